"""``memtrace timeline TRACE``: live bytes over time per allocator, for plots and scripts."""

from __future__ import annotations

import argparse
from typing import Any

from . import (
    add_allocator_option,
    add_output_options,
    add_trace_options,
    input_paths,
    load_trace,
    positive_int,
    resolve_allocators,
)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "timeline",
        help="live bytes over time per allocator (CSV, JSON or a text sparkline)",
        description="The replayed live-bytes curve of each allocator: (time_us, live_bytes) after every "
        "allocation and free, times relative to the step start, bytes absolute where the baseline is known.",
    )
    add_trace_options(parser)
    add_allocator_option(parser)
    parser.add_argument("--points", type=positive_int, metavar="N",
                        help="downsample to at most N points, keeping every time bucket's maximum")
    parser.add_argument("--csv", action="store_true", help="write CSV: allocator,time_us,live_bytes")
    add_output_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..errors import UsageError
    from ..peak import peaks
    from ..reporters import timeline as report
    from ..reporters.common import concerning, open_output, with_oddities, write_caution, write_json
    from ..reporters.tables import fitted
    from ..timeline import timeline

    if args.csv and args.json:
        raise UsageError("choose one of --csv and --json")
    trace = load_trace(args)
    names = resolve_allocators(trace, args.allocator) or [p.allocator for p in peaks(trace)]  # largest peak first, as everywhere
    result = [timeline(trace, name, args.points) for name in names]
    oddities = concerning(trace.oddities, names)
    with open_output(args.output, input_paths(args)) as out:
        if args.json:
            write_json(with_oddities(report.to_json(trace.path, result, oddities), oddities), out)
        elif args.csv:
            report.render_csv(result, out)
        else:
            with fitted(out) as text:
                write_caution(oddities, text)
                report.render_text(result, text, oddities=oddities)
    return 0
