"""``memtrace graph TRACE``: the dataflow graph for Graphviz, Gephi, yEd or scripts."""

from __future__ import annotations

import argparse
import os
from typing import Any

from . import add_trace_options, input_paths, load_trace, positive_int

_BY_EXTENSION = {".dot": "dot", ".gv": "dot", ".graphml": "graphml", ".json": "json"}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "graph",
        help="the dataflow graph (ops and the buffers between them) as DOT, GraphML or JSON",
        description="Write the dataflow graph: ops as nodes, one edge per buffer from producer to "
        "consumer with its allocator, allocation id, slot, dtype, shape and bytes. DOT is for "
        "Graphviz (dot -Tsvg), GraphML for Gephi or yEd, JSON is networkx node-link data. A whole "
        "model is unreadable; cut it with --around or --live-at-peak.",
    )
    add_trace_options(parser)
    parser.add_argument("--format", choices=("dot", "graphml", "json"),
                        help="output format (default: from the -o extension .dot/.gv/.graphml/.json, else dot)")
    parser.add_argument("--json", action="store_true", help="same as --format json")
    parser.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    parser.add_argument("--around", metavar="NODE", help="only the ops within --depth edges of NODE")
    parser.add_argument("--depth", type=positive_int, default=1, metavar="K",
                        help="how far --around reaches, in edges either way (default 1)")
    parser.add_argument("--live-at-peak", metavar="ALLOCATOR",
                        help="only the buffers live at ALLOCATOR's peak, with their producers and consumers")
    parser.set_defaults(run=run)


def _format(args: argparse.Namespace) -> str:
    if args.json:
        return "json"
    if args.format:
        return str(args.format)
    extension = os.path.splitext(args.output or "")[1].lower()
    return _BY_EXTENSION.get(extension, "dot")


def run(args: argparse.Namespace) -> int:
    from ..analyses.graph import around, graph, live_at_peak
    from ..errors import UsageError
    from ..reporters import graph as report
    from ..reporters.common import open_output

    if args.depth != 1 and args.around is None:
        raise UsageError("--depth needs --around NODE")
    trace = load_trace(args)
    if trace.message == "XSpace":
        raise UsageError(f"{trace.path}: a profile (XSpace) has no dataflow: its memory events name the op that "
                         "allocated each buffer, not the ops that read it; graph needs a RunMetadata or StepStats "
                         "(tensor, peak and ops work on a profile)")
    result = graph(trace)
    result.graph["trace"] = trace.path
    if args.live_at_peak is not None:
        result = live_at_peak(trace, result, args.live_at_peak)
    if args.around is not None:
        result = around(trace, result, args.around, args.depth)
    with open_output(args.output, input_paths(args)) as out:
        report.RENDERERS[_format(args)](result, out)
    return 0
