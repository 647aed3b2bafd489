"""``memtrace peak TRACE``: each allocator's peak, who reached it, and what was live."""

from __future__ import annotations

import argparse
from typing import IO, Any

from . import (
    add_allocator_option,
    add_filter_options,
    add_output_options,
    add_trace_options,
    load_trace,
    positive_int,
    refuse_unknown,
    resolve_allocators,
    write_report,
)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "peak",
        help="each allocator's peak, the node that reached it, and the live set at that moment",
        description="Replay every allocator's records and report its peak: bytes (absolute when the "
        "snapshots give a baseline), time, the node that reached it, what else ran, how well the "
        "snapshots reconcile, and every allocation live at that instant. Allocations that differ only "
        "in the numbers of their node names (an unrolled loop) are shown as one row with a count.",
    )
    add_trace_options(parser)
    add_allocator_option(parser)
    parser.add_argument("--group-by", metavar="node|type|scope[:DEPTH]|layer",
                        help="add the live set up by op, op type, name scope (DEPTH levels; default: where the "
                        "names show a Keras model, down to its layers, else 1) or Keras layer and phase (forward, "
                        "backward, optimizer, other; a layers.json beside the profile names the layers)")
    add_filter_options(parser, "only live allocations whose node name matches REGEX (a search, as in tfprof)",
                       "only live allocations of at least SIZE (e.g. 1MiB)")
    parser.add_argument("--top", type=positive_int, metavar="N",
                        help="show the N largest live allocations or groups (text default 10; JSON lists all unless given)")
    add_output_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..analyses.peak import group_live_set, parse_group_by, peaks_and_unknown, select_live
    from ..reporters import peak as report
    from ..reporters.common import concerning, with_oddities, write_caution
    from ..trace.layers import load_layer_names
    from ..units import parse_size

    grouping = parse_group_by(args.group_by) if args.group_by else None
    min_bytes = parse_size(args.min_bytes) if args.min_bytes is not None else None
    trace = load_trace(args)
    named = resolve_allocators(trace, args.allocator)
    result, unknown = peaks_and_unknown(trace, named)
    refuse_unknown(trace, named, unknown)
    filtered = args.name is not None or min_bytes is not None
    layer_names = load_layer_names(trace.path) if grouping and grouping[0] == "layer" else None
    listings = {}
    for p in result:
        live = select_live(p, args.name, min_bytes) if filtered else None
        groups = group_live_set(trace, p, *grouping, live=live, layer_names=layer_names) if grouping else None
        listings[p.allocator] = report.Listing(live, groups, args.group_by)

    oddities = concerning(trace.oddities, [p.allocator for p in result] + [u.allocator for u in unknown])

    def render_text(out: IO[str]) -> None:
        write_caution(oddities, out)
        report.render_text(result, out, args.top or 10, listings, oddities, unknown, trace.span_name)

    write_report(args, lambda: with_oddities(report.to_json(trace.path, result, args.top, listings, oddities, unknown),
                                             oddities), render_text)
    return 0
