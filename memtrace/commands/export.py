"""``memtrace export TRACE --format chrome``: the trace as JSON for Perfetto and chrome://tracing."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from . import add_allocator_option, add_trace_options, input_paths, load_trace, refuse_unknown, resolve_allocators


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "export",
        help="write the trace for Perfetto's UI or chrome://tracing (Trace Event Format JSON)",
        description="Write Trace Event Format JSON: per allocator a counter of its bytes (absolute where the "
        "snapshots give a baseline) and every buffer's lifetime as a slice; per device every op as a slice. "
        "Times are microseconds relative to the step start. Open the file at ui.perfetto.dev or chrome://tracing.",
    )
    add_trace_options(parser)
    parser.add_argument("--format", choices=("chrome",), default="chrome",
                        help="chrome: Trace Event Format JSON (the only format so far; the default)")
    add_allocator_option(parser)
    parser.add_argument("--no-buffers", action="store_true",
                        help="leave out the buffer-lifetime slices (counters and op slices only)")
    parser.add_argument("--json", action="store_true",
                        help="accepted for symmetry with the other commands: the export is JSON already")
    parser.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..analyses.export import chrome_event_groups, exported_allocators, other_data
    from ..reporters import export as report
    from ..reporters.common import clean, open_output

    trace = load_trace(args)
    named = resolve_allocators(trace, args.allocator)
    names, unknown = exported_allocators(trace, named)
    refuse_unknown(trace, named, unknown)
    for u in unknown:  # no counter for bytes that are not known: left out, and said so (otherData too)
        print(f"memtrace: {clean(u.allocator)} left out: its live bytes are unknown ({u.reason})", file=sys.stderr)
    events = chrome_event_groups(trace, names, buffers=not args.no_buffers)
    with open_output(args.output, input_paths(args)) as out:
        report.render_chrome(events, other_data(trace, unknown), out)
    return 0
