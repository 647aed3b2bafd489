"""``memtrace summary TRACE``: what a trace holds, before any analysis."""

from __future__ import annotations

import argparse
from typing import Any

from . import add_output_options, add_trace_options, load_trace, write_report


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "summary",
        help="devices, time span and, per allocator, the memory evidence in a trace",
        description="List the devices, the step's time span, and for every allocator its allocation records, "
        "snapshots and output buffers, plus oddities seen while reading.",
    )
    add_trace_options(parser)
    add_output_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..analyses.summary import summarize
    from ..reporters import summary as report

    result = summarize(load_trace(args))
    write_report(args, lambda: report.to_json(result), lambda out: report.render_text(result, out))
    return 0
