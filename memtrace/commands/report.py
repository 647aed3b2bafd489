"""``memtrace report TRACE -o report.html``: one self-contained HTML page to look at."""

from __future__ import annotations

import argparse
from typing import Any

from . import (
    add_allocator_option,
    add_trace_options,
    input_paths,
    load_trace,
    positive_int,
    refuse_unknown,
    resolve_allocators,
)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "report",
        help="write a self-contained HTML report: memory timelines, live set at the peak, top ops, fragmentation",
        description="Write one HTML file that works offline: the trace's facts; per allocator a chart of its "
        "bytes over the step with the peak, the baseline and the allocator's own snapshots, and the live set at "
        "the peak; the top ops; the fragmentation summary. Hover or click a chart for time and bytes.",
    )
    add_trace_options(parser)
    add_allocator_option(parser)
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="the HTML file to write ('-' for stdout); required unless --json")
    parser.add_argument("--json", action="store_true",
                        help="write the report's data as JSON (memtrace.report/1) instead of HTML, to stdout by default")
    parser.add_argument("--top", type=positive_int, default=20, metavar="N",
                        help="rows in the live-set and op tables (default 20)")
    parser.add_argument("--group-by", choices=("scope", "layer"), default="scope",
                        help="the live set's icicle by name scope (default) or by phase and Keras layer (a "
                        "layers.json beside the profile names the layers)")
    parser.add_argument("--points", type=positive_int, metavar="N",
                        help="time buckets per chart; each keeps its maximum and minimum (default 1500)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..analyses.report import DEFAULT_POINTS, gather
    from ..errors import UsageError
    from ..reporters import report
    from ..reporters.common import open_output, write_json
    from ..trace.layers import load_layer_names

    if args.output is None and not args.json:
        raise UsageError("report needs -o/--output FILE for the HTML page (or --json for its data)")
    trace = load_trace(args)
    named = resolve_allocators(trace, args.allocator)
    by_layer = args.group_by == "layer"
    data = gather(trace, named, args.points or DEFAULT_POINTS, by_layer, load_layer_names(trace.path) if by_layer else None)
    refuse_unknown(trace, named, [u.unknown for u in data.unknown])
    with open_output(args.output, input_paths(args)) as out:
        if args.json:
            write_json(report.to_json(data, args.top), out)
        else:
            report.render_html(data, out, args.top)
    return 0
