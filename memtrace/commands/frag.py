"""``memtrace frag TRACE``: requested versus allocated bytes, BFC waste, address-space holes, anomalies."""

from __future__ import annotations

import argparse
from typing import IO, Any

from . import (
    add_allocator_option,
    add_output_options,
    add_trace_options,
    load_trace,
    positive_int,
    refuse_unknown,
    resolve_allocators,
    write_report,
)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "frag",
        help="fragmentation: bytes allocated beyond the request, BFC rounding, holes between live buffers",
        description="Per allocator: requested versus allocated bytes over unique buffers, the waste split "
        "by the BFC model (rounding to 256 bytes, chunks handed out unsplit), the same at the peak, a "
        "size-class histogram and the top wasters; the address ranges of the live buffers at the peak "
        "(or --at) with their holes; and anomalies in the allocation descriptions.",
    )
    add_trace_options(parser)
    add_allocator_option(parser)
    parser.add_argument("--at", type=int, metavar="TIME_US",
                        help="also measure at this time, in microseconds after the step start; "
                        "the address space is then shown at this time instead of the peak")
    parser.add_argument("--top", type=positive_int, metavar="N",
                        help="show the N most wasteful ops and buffers (text default 10; JSON lists all unless given)")
    add_output_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..analyses.frag import fragmentations
    from ..reporters import frag as report
    from ..reporters.common import with_notes, write_notes

    trace = load_trace(args)
    named = resolve_allocators(trace, args.allocator)
    result = fragmentations(trace, named, args.at)
    refuse_unknown(trace, named, [f.unknown for f in result.allocators if f.unknown is not None])

    def render_text(out: IO[str]) -> None:
        write_notes(trace.oddities, out)
        report.render_text(result, out, args.top or 10, trace.span_name)

    write_report(args, lambda: with_notes(report.to_json(trace.path, result, args.top), trace.oddities), render_text)
    return 0
