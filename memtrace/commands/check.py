"""``memtrace check TRACE``: memory budgets for CI; exit 0 when every budget passes, 1 when one fails."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import IO, Any

from . import add_output_options, add_trace_options, load_trace, order_count, write_report


def _limit(metric: str) -> Callable[[str], tuple[str, str]]:
    """An argparse type that keeps which option a value came with, so budgets stay in command-line order."""

    def keep(text: str) -> tuple[str, str]:
        return metric, text

    keep.__name__ = metric
    return keep


_EPILOG = """\
Budget file (TOML), one table per allocator or device (quote names that hold dots or colons):

    [GPU_0_bfc]
    max_peak = "1.3GiB"
    max_peak_delta = "1.2GiB"
    max_waste = "5%"
    fits = "15GiB"

    ["CPU:0"]
    max_peak = "300MiB"
"""


class _ExampleFormatter(argparse.HelpFormatter):
    """Wraps the description as usual but keeps the epilog's TOML example line by line, valid as it stands."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("Budget file (TOML)"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "check",
        help="check memory budgets (peak, waste) and exit 1 when one fails: for CI",
        description="Measure each budget on the trace and list it with its limit, measured value, margin "
        "(limit minus value) and PASS/FAIL. Limits are inclusive: a value equal to its limit passes. "
        "Sizes: 1234, 300MB (10^6), 1.5GiB (2^30), 64KiB; percentages: 5%. "
        "Exit codes: 0 all budgets pass, 1 one or more fail, 2 bad usage or input.",
        epilog=_EPILOG,
        formatter_class=_ExampleFormatter,
    )
    add_trace_options(parser)
    parser.add_argument("--max-peak", dest="limits", action="append", type=_limit("max_peak"), metavar="ALLOC=SIZE",
                        help="the allocator's peak_bytes (absolute when snapshots give a baseline, else relative to "
                        "the step start) must be at most SIZE; repeatable")
    parser.add_argument("--max-peak-delta", dest="limits", action="append", type=_limit("max_peak_delta"),
                        metavar="ALLOC=SIZE",
                        help="the peak of the bytes allocated during the step (baseline left out) must be at most SIZE")
    parser.add_argument("--max-waste", dest="limits", action="append", type=_limit("max_waste"), metavar="ALLOC=LIMIT",
                        help="internal fragmentation over unique buffers: with a percentage, allocated minus requested "
                        "bytes over allocated bytes (as 'memtrace frag' reports it); with a size, the wasted bytes")
    parser.add_argument("--fits", dest="limits", action="append", type=_limit("fits"), metavar="ALLOC=SIZE",
                        help="the step's requests, replayed through TF's BFC allocator with TF's options for the "
                        "allocator (see 'memtrace fit'), must fit under SIZE, fragmentation included")
    parser.add_argument("--budget", metavar="FILE", help="a TOML budget file, one table per allocator")
    parser.add_argument("--orders", type=order_count, default=None, metavar="N",
                        help="for fits: the orders sampled from the recording (default 16); the limit passes only when "
                        "every one fits; 0: only the recorded order is held to it")
    add_output_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..analyses.check import check, load_budget_file, parse_assignment
    from ..reporters import check as report
    from ..reporters.common import concerning, with_oddities, write_caution

    budgets = load_budget_file(args.budget) if args.budget else []
    budgets += [parse_assignment(metric, text, "--" + metric.replace("_", "-")) for metric, text in args.limits or ()]
    if not budgets:
        from ..errors import UsageError

        raise UsageError("no budget to check: give --max-peak, --max-peak-delta, --max-waste, --fits or --budget FILE")
    trace = load_trace(args)
    result = check(trace, budgets, orders=args.orders)
    oddities = concerning(trace.oddities, [o.budget.allocator for o in result.outcomes])

    def render_text(out: IO[str]) -> None:
        write_caution(oddities, out)
        report.render_text(result, out, oddities)

    write_report(args, lambda: with_oddities(report.to_json(result, oddities), oddities), render_text)
    if args.output not in (None, "-") and not result.passed:
        # The report went to a file: the terminal (or the CI log) still hears the verdict.
        print(f"memtrace check: {report.verdict(result)}; the report is in {args.output}", file=sys.stderr)
    return 0 if result.passed else 1
