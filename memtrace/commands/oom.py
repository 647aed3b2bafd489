"""``memtrace oom FILE...``: why did TensorFlow run out of memory? The BFC allocator's dump explained."""

from __future__ import annotations

import argparse
from typing import Any

from . import input_paths, positive_int


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "oom",
        help="post-mortem of a BFC out-of-memory dump: fragmentation or exhaustion, and what helps",
        description="Read the BFC allocator's out-of-memory dump from a log or console capture (every dump in "
        "it) or from a MemoryDump protobuf (TF_BFC_MEMORY_DUMP), and say for each event what was asked, what "
        "was free, the largest free chunk, who held the memory, the verdict (fragmentation: enough bytes free "
        "but no chunk large enough; exhausted: not enough bytes free) and what helps.",
    )
    parser.add_argument("files", metavar="FILE", nargs="+", help="a log with BFC dumps, or a MemoryDump protobuf")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="write JSON (memtrace.oom/1) instead of text")
    output.add_argument("--html", action="store_true", help="write a self-contained HTML page with the memory map")
    parser.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    parser.add_argument("--request", metavar="SIZE", help="the failed request, where the dump does not say "
                        "(a MemoryDump never does), e.g. 24MiB or 25165824")
    parser.add_argument("--limit", metavar="SIZE", help="the allocator's memory limit, where the dump does not say")
    parser.add_argument("--top", type=positive_int, default=10, metavar="N",
                        help="rows in the text tables (default 10)")
    parser.add_argument("--trace", metavar="TRACE", help="the trace (a profile from the allocator's birth, best) of the "
                        "same run: replay it through the BFC model and say what limit or option would have avoided "
                        "each failure")
    parser.add_argument("--allocator", metavar="NAME", help="with --trace: the allocator of the trace that ran out "
                        "(default: the one the dump names)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..allocator.oom import analyse_all
    from ..errors import TraceFormatError
    from ..read.oom import load_oom_dumps
    from ..reporters import oom as report
    from ..reporters.common import open_output, write_json
    from ..reporters.tables import fitted
    from ..units import parse_size

    request = parse_size(args.request) if args.request else None
    limit = parse_size(args.limit) if args.limit else None
    events = [e for path in args.files for e in analyse_all(load_oom_dumps(path), request, limit)]
    avoided = _avoidances(args, events)
    with open_output(args.output, input_paths(args)) as out:
        if args.json:
            document = report.to_json(events)
            if avoided is not None:
                from ..reporters import oom_fit

                for entry, a in zip(document["events"], avoided):
                    entry["avoided_by"] = oom_fit.to_json(a)
            write_json(document, out)
        elif args.html:
            from ..reporters.oom import render_html

            extra = []
            if avoided is not None:
                from ..reporters.oom_fit import html_section

                extra = [html_section(a) for a in avoided]
            render_html(events, out, extra)
        else:
            with fitted(out) as text:
                after = []
                if avoided is not None:
                    from functools import partial

                    from ..reporters import oom_fit

                    after = [partial(oom_fit.render_text, a) for a in avoided]
                report.render_text(events, text, args.top, after)
    cut = next((e.dump for e in events if e.dump.missing), None)
    if cut is not None:  # the report stands, but the input was not whole: say so, and exit 2
        raise TraceFormatError(cut.path, "the dump is cut off, missing " + ", ".join(cut.missing)
                               + "; reported what is there", line=cut.line)
    return 0


def _avoidances(args: argparse.Namespace, events: list[Any]) -> list[Any] | None:
    """With ``--trace``: each event replayed against the run's trace (memtrace.allocator.oom_fit), else None."""
    if args.trace is None:
        if args.allocator is not None:
            from ..errors import UsageError

            raise UsageError("--allocator needs --trace")
        return None
    from ..allocator.oom_fit import avoidance
    from ..api import load

    trace = load(args.trace)
    return [avoidance(e, trace, args.allocator) for e in events]
