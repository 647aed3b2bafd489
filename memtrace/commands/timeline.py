"""``memtrace timeline TRACE``: live bytes over time per allocator, for plots and scripts."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from . import (
    add_allocator_option,
    add_output_options,
    add_trace_options,
    input_paths,
    load_trace,
    positive_int,
    refuse_unknown,
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
    from ..analyses.peak import peaks_and_unknown
    from ..analyses.timeline import timeline
    from ..errors import UsageError
    from ..reporters import timeline as report
    from ..reporters.common import clean, concerning, open_output, with_oddities, write_caution, write_json
    from ..reporters.tables import fitted
    from ..trace.replay import split_counted

    if args.csv and args.json:
        raise UsageError("choose one of --csv and --json")
    trace = load_trace(args)
    named = resolve_allocators(trace, args.allocator)
    if named is None:
        found, unknown = peaks_and_unknown(trace)
        names = [p.allocator for p in found]  # largest peak first, as everywhere
    else:
        names, unknown = split_counted(trace, named)
    refuse_unknown(trace, named, unknown)
    result = [timeline(trace, name, args.points) for name in names]
    oddities = concerning(trace.oddities, names + [u.allocator for u in unknown])
    with open_output(args.output, input_paths(args)) as out:
        if args.json:
            write_json(with_oddities(report.to_json(trace.path, result, oddities, unknown), oddities), out)
        elif args.csv:
            for u in unknown:  # CSV has no row for a curve that is not known
                print(f"memtrace: {clean(u.allocator)} left out: its live bytes are unknown ({u.reason})", file=sys.stderr)
            report.render_csv(result, out)
        else:
            with fitted(out) as text:
                write_caution(oddities, text)
                report.render_text(result, text, oddities=oddities, unknown=unknown, span=trace.span_name)
    return 0
