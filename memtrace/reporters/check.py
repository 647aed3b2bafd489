"""Rendering budget checks as text or JSON (``memtrace.check/1``), and explaining a failed budget.

``explain`` is shared with ``memtrace.testing``: a failed assertion reads like a failed
``memtrace check`` line (the limit, the value, and who holds the bytes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import IO, Any

from ..analyses.check import Budget, CheckResult, Contributor, Outcome
from ..trace.data import Oddity
from ..units import format_bytes, format_percent, format_us, plural
from .common import BENT_NUMBERS, clean, table, with_oddities

SCHEMA = "memtrace.check/1"


def to_json(result: CheckResult, oddities: Sequence[Oddity] = ()) -> dict[str, Any]:
    """Every budget with its limit, measured value, margin (limit - value) and whether it passed, and
    the ``oddities`` found on its allocator that bend numbers."""
    return {
        "schema": SCHEMA,
        "trace": result.trace,
        **({"step": result.step} if result.step is not None else {}),
        "passed": result.passed,
        "budgets": [
            with_oddities({
                "allocator": o.budget.allocator,
                **({"device": o.budget.stated_as} if o.budget.stated_as is not None else {}),
                **({"limit_note": o.budget.limit_note} if o.budget.limit_note is not None else {}),
                "metric": o.budget.metric,
                "unit": o.budget.unit,
                "limit": o.budget.limit,
                "measured": o.measured,
                **({"measured_as": o.measured_as} if o.fits is not None else {}),
                "margin": o.margin,
                "passed": o.passed,
                "source": o.budget.source,
                "note": o.note,
                "contributors": [{"name": c.name, "kinds": list(c.kinds), "bytes": c.bytes,
                                  **({"requested_bytes": c.requested_bytes} if c.requested_bytes is not None else {})}
                                 for c in o.contributors],
            }, oddities, o.budget.allocator)
            for o in result.outcomes
        ],
    }


def value_text(value: float | None, unit: str) -> str:
    """``1.23 GiB (1,325,898,496 B)`` for bytes, ``5%`` for a fraction; None (a ``fits`` budget that no limit
    the model holds fits) is ``none <= 8 TiB``."""
    if value is None:
        return "none <= 8 TiB"
    if unit == "fraction":
        return format_percent(value)
    return f"{format_bytes(int(value))} ({int(value):,} B)"


def margin_text(outcome: Outcome) -> str:
    margin = outcome.margin
    if margin is None:
        return "-"
    sign = "+" if margin >= 0 else "-"
    if outcome.budget.unit == "fraction":
        return f"{sign}{format_percent(abs(margin))}"
    return f"{sign}{format_bytes(abs(int(margin)))}"


def budget_name(budget: Budget) -> str:
    return f"{_allocator_name(budget)} {budget.metric}"


def _allocator_name(budget: Budget) -> str:
    """The allocator, and the device it was stated for when it was: ``CPU:0 (mklcpu)``."""
    if budget.stated_as is None:
        return clean(budget.allocator)
    return f"{clean(budget.stated_as)} ({clean(budget.allocator)})"


def render_text(result: CheckResult, out: IO[str], oddities: Sequence[Oddity] = ()) -> None:
    """One row per budget, then an explanation of every failure and the verdict. A measured value
    the ``oddities`` bend (the whole trace's, or those found on its allocator) is starred, and the
    kinds named under the table."""
    bent_by = [_bent_by(o, oddities) for o in result.outcomes]
    rows = [
        (_allocator_name(o.budget), o.budget.metric, value_text(o.budget.limit, o.budget.unit),
         value_text(o.measured, o.budget.unit) + ("*" if kinds else ""), margin_text(o),
         "PASS" if o.passed else "FAIL")
        for o, kinds in zip(result.outcomes, bent_by)
    ]
    headers = ("allocator", "budget", "limit", "measured", "margin", "result")
    step = f" (step {result.step})" if result.step is not None else ""
    out.write(f"memtrace check {clean(result.trace)}{step}\n")
    out.write(table(rows, headers, ("left", "left", "right", "right", "right", "left")) + "\n")
    starred = list(dict.fromkeys(k for kinds in bent_by for k in kinds))
    if starred:
        out.write(f"* bent by {', '.join(starred)}: see 'memtrace summary'\n")
    for note in dict.fromkeys(o.budget.limit_note for o in result.outcomes if o.budget.limit_note):
        out.write(f"note: {note}\n")
    for o in result.failed:
        out.write("\n" + explain(o, result.span) + "\n")
    failed = len(result.failed)
    verdict = "PASS" if not failed else "FAIL"
    out.write(f"\n{verdict}: {len(result.outcomes) - failed} of {plural(len(result.outcomes), 'budget')} passed\n")


# The numbers each budget measures (keys of reporters.common.BENT_NUMBERS).
_BENT_METRICS = {"max_peak": ("live bytes",), "max_peak_delta": ("live bytes",), "max_waste": ("sizes",), "fits": ()}


def _bent_by(outcome: Outcome, oddities: Sequence[Oddity]) -> list[str]:
    """The oddity kinds that bend the measured value: the whole trace's and its allocator's own."""
    kinds = {o.kind for o in oddities if o.allocator in (None, outcome.budget.allocator)}
    return [k for number in _BENT_METRICS[outcome.budget.metric] for k in BENT_NUMBERS[number] if k in kinds]


def _contributor_line(c: Contributor, whole: int) -> str:
    share = f" ({100 * c.bytes / whole:.1f}%)" if whole > 0 else ""
    kinds = f" {'/'.join(c.kinds)}" if c.kinds else ""
    tensors = (f", tensors {format_bytes(c.requested_bytes)} in the chunks"
               if c.requested_bytes is not None and c.requested_bytes != c.bytes else "")
    return f"    {clean(c.name)}{kinds}: {format_bytes(c.bytes)}{share}{tensors}"


def verdict(result: CheckResult) -> str:
    """One line: ``FAIL: 1 of 2 budgets passed (GPU_0_bfc max_peak)`` or ``PASS: 2 of 2 budgets passed``."""
    failed = result.failed
    names = f" (failed: {', '.join(budget_name(o.budget) for o in failed)})" if failed else ""
    return f"{'FAIL' if failed else 'PASS'}: {len(result.outcomes) - len(failed)} of {plural(len(result.outcomes), 'budget')} passed{names}"


def explain(outcome: Outcome, span: str = "step") -> str:
    """Several lines: the value against the limit, what the value is, and its largest contributors
    (the peak's time into the ``span``: the step, or a profile of several steps)."""
    b = outcome.budget
    if outcome.fits is not None:
        return _explain_fit(outcome)
    over = "within" if outcome.passed else "over"
    lines = [
        (f"{budget_name(b)}: {value_text(outcome.measured, b.unit)} is {over} the limit "
         f"{value_text(b.limit, b.unit)} (margin {margin_text(outcome)}; limit from {b.source})"),
        f"  {clean(outcome.note)}",
    ]
    p = outcome.peak
    if p is not None and p.peak_node is not None:
        lines.append(f"  peak at {format_us(p.peak_time_us * 1000)} into the {span}, reached by {clean(p.peak_node)}")
    if outcome.contributors:
        if p is not None:
            whole = p.peak_bytes if b.metric == "max_peak" else p.peak_delta_bytes
            of = "the peak, baseline included" if b.metric == "max_peak" else f"the bytes allocated during the {span}"
            lines.append(f"  top contributors at the peak (shares of {of}, {format_bytes(whole)}):")
        else:
            lines.append("  most wasteful ops:")
            whole = 0  # no share: the note says the total waste
        lines.extend(_contributor_line(c, whole) for c in outcome.contributors)
    if p is not None and b.metric == "max_peak" and p.baseline_bytes:
        lines.append(f"    live before the {span} (baseline): {format_bytes(p.baseline_bytes)} "
                     f"({100 * p.baseline_bytes / p.peak_bytes:.1f}%)")
    return "\n".join(lines)


def _explain_fit(outcome: Outcome) -> str:
    """A ``fits`` budget: whether the replay fits the limit, the smallest limit, who held the bytes at the failure."""
    b = outcome.budget
    lines = [(f"{budget_name(b)}: {'fits' if outcome.fits else 'does not fit'} under {value_text(b.limit, b.unit)} "
             f"({outcome.measured_as} {value_text(outcome.measured, b.unit)}; limit from {b.source})"),
             f"  {clean(outcome.note)}"]  # (the failing op's name is the trace's: escaped)
    if outcome.contributors:
        lines.append("  ops holding the most bytes at the failure:")
        lines.extend(_contributor_line(c, 0) for c in outcome.contributors)
    return "\n".join(lines)
