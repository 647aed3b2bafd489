"""``memtrace tensor TRACE ID``: one buffer's story, from its producer to its last consumer."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from . import add_output_options, add_trace_options, load_trace, write_report


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "tensor",
        help="one buffer's story: producer, aliases, consumers, size, lifetime, live at the peak",
        description="Tell the story of one buffer: the op that created it, the ops that forwarded it "
        "(aliases), the ops that read it in time order, its size requested and allocated, dtype, "
        "shape and pointer, when it was allocated and freed, and whether it was live at its "
        "allocator's peak. Times are relative to the step start.",
    )
    add_trace_options(parser)
    parser.add_argument("buffer", metavar="ID",
                        help="ALLOCATOR:ALLOCATION_ID (GPU_0_bfc:183) or NODE:SLOT (conv1/Conv2D:0; NODE alone is slot 0)")
    add_output_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..analyses.tensor import buffer_story
    from ..reporters import tensor as report

    trace = load_trace(args)
    story = buffer_story(trace, args.buffer)
    write_report(args, lambda: report.to_json(trace.path, story), lambda out: report.render_text(story, out, trace.span_name))
    if trace.message == "XSpace" and not args.json:
        print("note: a profile (XSpace) does not record who reads a buffer: its consumers and aliases are unknown",
              file=sys.stderr)
    return 0
