"""Assertions for tests: memory budgets and regressions, with messages that say who holds the bytes.

::

    trace = memtrace.load("run.pbtxt")
    memtrace.testing.assert_peak_below(trace, "GPU_0_bfc", "1.3GiB")
    memtrace.testing.assert_no_regression(base, new, max_increase="5%")

A failed assertion raises ``AssertionError`` stating the limit, the value and the top three
contributors at the peak. Asking for something the trace cannot answer (an allocator it lacks, a
malformed size) raises :class:`~memtrace.errors.UsageError` instead: a mistake, not a failure.
So does a recording whose peak varies from run to run, where its recorder says so
(:mod:`memtrace.trace.recording`: ``memtrace.tensorflow.profile`` with oneDNN's kernels or several
threads nobody chose): a check on it would pass or fail by chance. Limits are inclusive, as in
``memtrace check``: a peak equal to its limit passes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from .analyses.check import (
    Budget,
    CheckResult,
    budgets_from_mapping,
    check,
    load_budget_file,
    parse_limit,
    peak_contributors,
)
from .analyses.diff import TraceDiff, diff
from .errors import UsageError
from .reporters.check import explain
from .reporters.common import clean
from .reporters.diff import signed_bytes
from .scratch import keep
from .trace.data import TraceData
from .units import format_bytes, format_percent, parse_percent

TraceLike = TraceData | str | os.PathLike[str]

__all__ = ["assert_fits", "assert_no_regression", "assert_peak_below", "assert_waste_below", "assert_within_budget"]


def as_trace(value: TraceLike) -> TraceData:
    """A trace as given, or loaded from a path."""
    if isinstance(value, TraceData):
        return value
    from .api import load

    return load(value)


def _where(trace: TraceData) -> str:
    """The trace's path for a failure message; a temporary profile it names is kept, and the message says so."""
    kept = keep(trace.path) if trace.path and not trace.path.startswith("<") else None
    return clean(trace.path) + (" (a temporary profile, kept for you)" if kept else "")


STABLE_ROUTE = ("set memtrace_stable_tensorflow = true in the pytest configuration ([tool.pytest.ini_options] of "
                "pyproject.toml, or pytest.ini), which sets TensorFlow's environment before test modules import it, or "
                "call memtrace.tensorflow.use_cpu_bfc() before TensorFlow is imported; then record again")


def refuse_unstable(trace: TraceData) -> None:
    """Refuse (UsageError, with the reasons) a recording its recorder says was made where the peak varies
    from run to run; a trace that says nothing of how it was recorded passes."""
    from .trace.recording import load_recording

    found = load_recording(trace.path) if trace.path and not trace.path.startswith("<") else None
    if found is not None and found.unstable:
        raise UsageError(f"{_where(trace)} was recorded where its peak varies from run to run, so a check on it would "
                         f"pass or fail by chance: {'; '.join(found.unstable)}. To record a stable one, {STABLE_ROUTE} "
                         f"(or keep oneDNN's kernels on purpose: use_cpu_bfc(onednn=True) or TF_ENABLE_ONEDNN_OPTS=1)")


def assert_budgets(trace: TraceData, budgets: list[Budget], *, orders: int | None = None) -> CheckResult:
    """Every budget holds on ``trace``; the failure message names each one broken and who holds the bytes.
    A recording made where its peak varies from run to run is refused (:func:`refuse_unstable`).
    ``orders``: the orders sampled for ``fits`` budgets (None: the default; 0: the recorded order alone)."""
    __tracebackhide__ = True  # pytest shows the assertion in the caller
    refuse_unstable(trace)
    result = check(trace, budgets, orders=orders)
    if not result.passed:
        raise AssertionError("\n".join(explain(o, result.span) for o in result.failed) + f"\n  trace: {_where(trace)}")
    return result


def assert_peak_below(trace: TraceLike, allocator: str, limit: str | int) -> CheckResult:
    """The allocator's ``peak_bytes`` is at most ``limit`` (``"1.3GiB"``, ``"300MB"`` or bytes)."""
    __tracebackhide__ = True
    value, unit = parse_limit("max_peak", limit, "assert_peak_below")
    return assert_budgets(as_trace(trace), [Budget(allocator, "max_peak", value, unit, "assert_peak_below")])


def assert_waste_below(trace: TraceLike, allocator: str, limit: str | int) -> CheckResult:
    """The allocator's waste is at most ``limit``: ``"5%"`` of allocated bytes, or a size."""
    __tracebackhide__ = True
    value, unit = parse_limit("max_waste", limit, "assert_waste_below")
    return assert_budgets(as_trace(trace), [Budget(allocator, "max_waste", value, unit, "assert_waste_below")])


def assert_fits(trace: TraceLike, allocator: str, limit: str | int, *, batch: int | None = None,
                vs: TraceLike | None = None, batch_sizes: tuple[int, int] | None = None,
                orders: int | None = None) -> Any:
    """The step's requests fit under ``limit`` when replayed through TF's BFC allocator with TF's
    options for the allocator (``memtrace fit``), fragmentation included. A run does not repeat its
    order: the limit passes only when every sampled order of the recording fits (``orders`` of them,
    default 16; 0: only the recorded order is held to it), and the message says the share that does.
    On failure the message names the first request that fails, the verdict and the ops holding the
    most bytes then.

    With ``batch=N``, ``trace`` and ``vs`` are two recordings of the step at ``batch_sizes``
    (B1 < B2; None: read from the inputs' leading dimension) and batch N's predicted requests must
    fit (``memtrace fit --vs``): "batch 256 still fits on a 16 GB card", in every plausible run of
    the two recordings (``orders`` of each recording's requests, default 8; 0: the prediction alone).
    Returns the BatchFit then.
    """
    __tracebackhide__ = True
    if batch is not None or vs is not None:
        return _assert_batch_fits(trace, allocator, limit, batch, vs, batch_sizes, orders)
    value, unit = parse_limit("fits", limit, "assert_fits")
    return assert_budgets(as_trace(trace), [Budget(allocator, "fits", value, unit, "assert_fits")], orders=orders)


def assert_within_budget(
    trace: TraceLike, budget: str | os.PathLike[str] | Mapping[str, Mapping[str, Any]]
) -> CheckResult:
    """Every budget in a TOML budget file, or in ``{"GPU_0_bfc": {"max_peak": "1.3GiB"}}``, passes."""
    __tracebackhide__ = True
    budgets = budgets_from_mapping(budget, "assert_within_budget") if isinstance(budget, Mapping) else load_budget_file(budget)
    return assert_budgets(as_trace(trace), budgets)


def assert_no_regression(
    base: TraceLike,
    new: TraceLike,
    *,
    max_increase: str = "0%",
    allocators: Iterable[str] | None = None,
    exclude_baseline: bool = False,
) -> TraceDiff:
    """No allocator's ``peak_bytes`` grew by more than ``max_increase`` (``"5%"``) of its base peak.

    ``exclude_baseline=True`` compares ``peak_delta_bytes`` (the step's own allocations) instead:
    sounder where snapshots disagree on the baseline, as oneDNN's ``mklcpu`` ones do. An
    allocator that appears in ``new`` only (or grew from a peak of 0) has grown without bound and
    fails. On failure the message names the allocators, their peaks, the top contributors at the
    new peak and the ops that grew most. An allocator whose peak is unknown in either trace (its
    bytes add up past int64) cannot be measured: a :class:`~memtrace.errors.UsageError`, never a pass; so is
    a recording whose peak varies from run to run (:func:`refuse_unstable`).
    """
    __tracebackhide__ = True
    if not isinstance(max_increase, str):
        raise UsageError(f"max_increase must be a percentage such as \"5%\", not {max_increase!r}")
    base_trace, new_trace = as_trace(base), as_trace(new)
    refuse_unstable(base_trace)
    refuse_unstable(new_trace)
    measure = "peak_delta_bytes" if exclude_baseline else "peak_bytes"
    result = diff(base_trace, new_trace, allocators, parse_percent(max_increase), measure)
    if result.passed:
        return result
    lines = []
    for c in result.exceeded:
        before, after = c.base_bytes, c.new_bytes
        if before is None or after is None:  # never: an unknown change exceeds nothing (diff refuses it)
            continue
        grew = "from nothing" if c.delta_fraction is None else f"by {format_percent(c.delta_fraction)}"
        what = "peak" if measure == "peak_bytes" else "peak without baseline"
        lines.append(
            f"{clean(c.allocator)} {what} grew {grew}, more than the {max_increase} allowed: "
            f"{format_bytes(before)} ({before:,} B) -> "
            f"{format_bytes(after)} ({after:,} B), {signed_bytes(after - before)}"
        )
        if c.new is not None:
            lines.append("  top contributors at the new peak:")
            for contributor in peak_contributors(c.new):
                share = 100 * contributor.bytes / c.new.peak_bytes if c.new.peak_bytes else 0.0
                lines.append(f"    {clean(contributor.name)} {'/'.join(contributor.kinds)}: "
                             f"{format_bytes(contributor.bytes)} ({share:.1f}%)")
    grown = [o for o in result.ops if o.at_peak_delta_bytes > 0 or o.delta_bytes > 0][:3]
    if grown:
        lines.append("  ops that grew most:")
        lines.extend(f"    {clean(o.name)}: tfprof peak {signed_bytes(o.delta_bytes)}, "
                     f"held at the peaks {signed_bytes(o.at_peak_delta_bytes)}" for o in grown)
    lines.append(f"  base: {_where(base_trace)}\n  new:  {_where(new_trace)}")
    raise AssertionError("\n".join(lines))


def _assert_batch_fits(trace: TraceLike, allocator: str, limit: str | int, batch: int | None, vs: TraceLike | None,
                       batch_sizes: tuple[int, int] | None, orders: int | None) -> Any:
    __tracebackhide__ = True
    from .api import fit_batches

    if batch is None or vs is None:
        raise UsageError("assert_fits: batch=N needs vs=LARGE, a recording at a second batch size (and the other "
                         "way round)")
    result = fit_batches(trace, vs, batch_sizes, allocator=allocator, limit=limit, batch=batch, orders=orders)
    if not result.fits:
        fit, failure = result.fit, result.fit.failure
        limit_bytes = fit.options.limit_bytes or 0
        needs = "more than the model holds (8 TiB)" if fit.min_limit_bytes is None else format_bytes(fit.min_limit_bytes)
        how = f": it needs {needs}" if not fit.fits else f" in every plausible run (the prediction needs {needs})"
        lines = [(f"batch {batch:,} does not fit {format_bytes(limit_bytes)} on {clean(result.allocator)}{how} "
                  f"(predicted from batch {result.batch_sizes[0]:,} and {result.batch_sizes[1]:,})")]
        if failure is not None:
            lines.append(f"  the first request that fails: {clean(failure.op) or '(unknown op)'}, "
                         f"{format_bytes(failure.request_bytes)}, with {format_bytes(failure.free_bytes)} free and "
                         f"{format_bytes(failure.largest_free_bytes)} the largest free chunk: {failure.verdict}")
        band = result.limit_band
        if band is not None and band.fitting_at_limit is not None:
            lines.append(f"  {band.fitting_at_limit}/{len(band.orders)} plausible runs of batch {batch:,} fit; every "
                         f"one fits from {format_bytes(band.always_fits_bytes)}")
        raise AssertionError("\n".join(lines))
    return result
