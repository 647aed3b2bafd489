"""``memtrace ops TRACE``: memory per op, by node, op type or name scope, tfprof-compatible."""

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

# The names --sort takes; memtrace.analyses.ops.SORT_NAMES, written out so that --help imports no analysis.
SORT_NAMES = ("peak", "requested", "residual", "output", "temp", "persistent", "at_peak", "waste", "occurrences",
              "name", "op_type", "device")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "ops",
        help="memory per op by node, op type or name scope (tfprof's numbers, plus at-peak and waste)",
        description="Requested, peak, residual and output bytes per op exactly as TensorFlow's profiler computes "
        "them, plus temp and persistent bytes, the bytes each op holds at the allocators' peaks, and the "
        "bytes its buffers waste (allocated minus requested).",
    )
    add_trace_options(parser)
    parser.add_argument("--group-by", metavar="node|type|scope[:DEPTH]|layer",
                        help="one row per op type (default), per node, per name scope (DEPTH levels; default: "
                        "where the names show a Keras model, down to its layers, else 1), or per Keras layer and phase (forward, backward, optimizer, other), as peak groups")
    parser.add_argument("--by", choices=("type", "node", "scope", "layer"),
                        help="the same as --group-by (its older spelling; --depth K with --by scope)")
    parser.add_argument("--depth", type=positive_int, metavar="K", help="with --by scope: scope levels to keep (default: down to a Keras model's layers, else 1)")
    parser.add_argument("--sort", default="peak_bytes", metavar="COLUMN",
                        help=f"sort by a column: {', '.join(SORT_NAMES)} (default peak)")
    parser.add_argument("--device", metavar="TEXT", help="only ops on devices whose name contains TEXT (e.g. gpu:0)")
    add_filter_options(parser, "only nodes whose name matches REGEX (a search, as tfprof's -show_name_regexes)",
                       "only nodes that request at least SIZE bytes (e.g. 1MiB; as tfprof's -min_bytes)")
    add_allocator_option(parser)
    parser.add_argument("--top", type=positive_int, metavar="N", help="show N rows (text default 20; JSON all); totals stay exact")
    add_output_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..analyses.ops import ops
    from ..analyses.peak import parse_group_by
    from ..errors import UsageError
    from ..reporters import ops as report
    from ..reporters.common import with_oddities, write_caution
    from ..trace.layers import load_layer_names
    from ..units import parse_size

    if args.group_by is not None and (args.by is not None or args.depth is not None):
        raise UsageError("--group-by says it all: give it, or --by (and --depth), not both")
    if args.group_by is not None:
        args.by, depth = parse_group_by(args.group_by)
        args.depth = depth if ":" in args.group_by else None
    args.by = args.by or "type"
    if args.depth is not None and args.by != "scope":
        raise UsageError("--depth goes with --by scope")

    min_bytes = parse_size(args.min_bytes) if args.min_bytes is not None else None
    trace = load_trace(args)
    named = resolve_allocators(trace, args.allocator)
    result = ops(trace, by=args.by, sort=args.sort, depth=args.depth, allocators=named,
                 device=args.device, name=args.name, min_bytes=min_bytes,
                 layer_names=load_layer_names(trace.path) if args.by == "layer" else None)
    refuse_unknown(trace, named, list(result.unknown))

    oddities = report.bending(result, trace.oddities)

    def render_text(out: IO[str]) -> None:
        write_caution(oddities, out)
        report.render_text(result, out, args.top or 20, oddities)

    write_report(args, lambda: with_oddities(report.to_json(trace.path, result, args.top), oddities), render_text)
    return 0
