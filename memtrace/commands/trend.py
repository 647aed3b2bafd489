"""``memtrace trend OUTDIR``: each allocator's peak across the runs ``memtrace batch`` wrote, as a table, JSON or a page."""

from __future__ import annotations

import argparse
import os
from typing import Any

from . import add_output_options


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "trend",
        help="peak per allocator across the runs of a 'memtrace batch' output: table, JSON or an HTML chart",
        description="Read runs.parquet and allocators.parquet from OUTDIR (written by memtrace batch) and show "
        "each allocator's peak run by run, with the change from the run before, so that a regression is "
        "visible at a glance. Text by default; --json for JSON; -o FILE writes a self-contained HTML page "
        "with a chart (or JSON with --json).",
    )
    parser.add_argument("outdir", metavar="OUTDIR", help="a directory that memtrace batch wrote")
    parser.add_argument("--by", choices=("run", "mtime"), default="run",
                        help="order the runs by name (default) or by the trace files' modification time")
    add_output_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..many.trend import trend
    from ..reporters import trend as report
    from ..reporters.common import open_output, write_json
    from ..reporters.tables import fitted

    result = trend(args.outdir, args.by)
    tables = [os.path.join(args.outdir, f"{name}.parquet") for name in ("runs", "allocators")]
    with open_output(args.output, tables) as out:
        if args.json:
            write_json(report.to_json(result), out)
        elif args.output not in (None, "-"):
            report.render_html(result, out)
        else:
            with fitted(out) as text:
                report.render_text(result, text)
    return 0
