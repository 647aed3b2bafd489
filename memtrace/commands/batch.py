"""``memtrace batch PATH... -o OUTDIR``: every trace under the paths, analysed in parallel on Dask, as Parquet tables."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from . import add_allocator_option, positive_int


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "batch",
        help="analyse many traces in parallel (Dask) into Parquet tables: runs, allocators, ops, live_at_peak",
        description="Find every trace under the paths (files; directories, searched recursively for files whose "
        "content is a trace; glob patterns), analyse each one as a Dask task on local processes or on a "
        "dask.distributed cluster, and write runs.parquet, allocators.parquet, ops.parquet and "
        "live_at_peak.parquet into OUTDIR. A trace that cannot be read is a row of runs.parquet with its error. "
        "Needs the batch extra: pip install 'memtrace[batch]'. Exit codes: 0 every trace was read, 1 some "
        "could not be (see the error column), 2 bad usage.",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="a trace, a directory of traces, or a glob pattern")
    parser.add_argument("-o", "--output", required=True, metavar="OUTDIR", help="the directory to write the tables to")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="a running dask.distributed scheduler (tcp://HOST:PORT); default: local processes")
    parser.add_argument("--workers", type=positive_int, metavar="N",
                        help="local processes to use (default: one per core; the cluster decides with --scheduler)")
    add_allocator_option(parser)
    parser.add_argument("--json", action="store_true", help="print what was written as JSON instead of text")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..errors import UsageError
    from ..many.batch import batch, find_traces, refuse_outputs, write_tables
    from ..reporters.common import clean, write_json
    from ..reporters.progress import CountLine

    if args.scheduler is not None and args.workers is not None:
        raise UsageError("--workers is for local processes; with --scheduler the cluster has its own workers")
    found = find_traces(args.paths)
    refuse_outputs(args.output, found)  # before the work: no table may replace a trace it reads
    progress = CountLine(sys.stderr, "analysing traces")
    client = _client(args.scheduler) if args.scheduler is not None else None
    try:
        built = batch(found, client=client, workers=args.workers, allocators=args.allocator, progress=progress)
    finally:
        progress.close()
        if client is not None:
            client.close()
    written = write_tables(built, args.output)
    runs = built["runs"].to_pylist()
    failed = [r for r in runs if r["error"] is not None]
    if args.json:
        write_json({"schema": "memtrace.batch/1", "outdir": args.output, "traces": len(runs),
                    "failed": [{"run": r["run"], "error": r["error"]} for r in failed],
                    "tables": {name: table.num_rows for name, table in built.items()}, "files": written},
                   sys.stdout)
    else:
        print(f"{len(runs)} traces, {len(runs) - len(failed)} read, {len(failed)} could not be -> {clean(args.output)}")
        for name, table in built.items():
            print(f"  {name}.parquet  {table.num_rows:,} rows")
    for r in failed:
        print(f"memtrace: {clean(r['error'])}", file=sys.stderr)
    return 1 if failed else 0


def _client(address: str) -> Any:
    """A client of the running scheduler at ``address``, or a usage error saying it cannot be reached."""
    from ..errors import UsageError
    from ..many.batch import require_extra

    distributed = require_extra("distributed")
    try:
        return distributed.Client(address, timeout="10s")
    except (OSError, TimeoutError, ValueError) as error:
        raise UsageError(f"{address}: cannot reach a Dask scheduler there ({error})") from None
