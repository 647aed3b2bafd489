"""``memtrace diff BASE NEW``: what grew between two runs; exit 1 with ``--max-increase`` when a peak grew too much."""

from __future__ import annotations

import argparse
from typing import Any

from . import (
    add_allocator_option,
    add_jobs_option,
    add_output_options,
    add_profile_options,
    load_trace,
    positive_int,
    write_report,
)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "diff",
        help="compare two traces: peaks per allocator, the ops that changed, new buffers at the peak",
        description="Per allocator the base and new peak_bytes and the change (bytes and fraction of the base "
        "peak); the ops whose tfprof peak, residual or at-peak bytes changed most; and the allocations live "
        "at the new peak with no counterpart (same producer and slot) at the base peak. Exit codes: 0 fine, "
        "1 a peak grew by more than --max-increase, 2 bad usage or input (or --max-increase on an allocator whose "
        "peak cannot be measured).",
    )
    parser.add_argument("base", metavar="BASE", help="the earlier trace: RunMetadata or StepStats, text or binary, optionally gzip")
    parser.add_argument("new", metavar="NEW", help="the later trace")
    add_profile_options(parser)
    add_jobs_option(parser)
    add_allocator_option(parser)
    parser.add_argument("--max-increase", metavar="PERCENT",
                        help="exit 1 when any allocator's peak grew by more than PERCENT of its base peak (e.g. 5%%); "
                        "an allocator that grew from nothing always exceeds it; one whose peak is unknown (bytes beyond int64) "
                        "cannot be measured, exit 2")
    parser.add_argument("--exclude-baseline", action="store_true",
                        help="compare peak_delta_bytes, the peaks of the bytes allocated during each step, instead of "
                        "peak_bytes: sounder where snapshots disagree on the baseline (oneDNN's mklcpu)")
    parser.add_argument("--group-by", metavar="node|type|scope[:DEPTH]|layer", default="node",
                        help="compare the ops added up by op type, name scope or Keras layer and phase, as peak "
                        "groups them (default: node by node)")
    parser.add_argument("--top", type=positive_int, metavar="N",
                        help="show the N ops and new allocations that changed most (text default 10; JSON lists all unless given)")
    add_output_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..analyses.diff import diff
    from ..errors import UsageError
    from ..reporters import diff as report
    from ..trace.layers import load_layer_names
    from ..units import parse_percent

    try:
        max_increase = parse_percent(args.max_increase) if args.max_increase is not None else None
    except UsageError as error:
        raise UsageError(f"--max-increase: {error}") from None
    base, new = load_trace(args, args.base), load_trace(args, args.new)
    by_layer = args.group_by == "layer"
    names = (load_layer_names(base.path), load_layer_names(new.path)) if by_layer else (None, None)
    result = diff(base, new, args.allocator, max_increase, "peak_delta_bytes" if args.exclude_baseline else "peak_bytes",
                  args.group_by, names)
    # As every command: an allocator whose peak is unknown (bytes beyond int64) is refused where it
    # was named, or where every allocator compared is one; otherwise it is listed as unknown.
    unknown = [(u, base.path if side == "base" else new.path) for c in result.allocators for side, u in c.unknown_sides]
    if unknown and (args.allocator is not None or all(c.unknown for c in result.allocators)):
        found, path = unknown[0]
        raise found.error(path)
    write_report(args, lambda: report.to_json(result, args.top), lambda out: report.render_text(result, out, args.top or 10))
    return 0 if result.passed else 1
