"""Memory budgets: limits on an allocator's numbers, stated on the command line, in a TOML file or a
pytest marker, and checked against a trace.

A budget is one limit on one allocator. The metrics are the numbers memtrace already defines:

- ``max_peak``: the allocator's ``peak_bytes`` (``memtrace.analyses.peak``): absolute where the snapshots give
  a baseline, else relative to the step start, which the outcome says;
- ``max_peak_delta``: ``peak_delta_bytes``, the peak of the step's own allocations (baseline left out);
- ``max_waste``: internal fragmentation over the step's unique buffers (``memtrace.analyses.frag``): as a
  percentage, allocated minus requested bytes **over allocated bytes**; as a size, allocated minus
  requested bytes.
- ``fits``: the step's requests fit under this limit when replayed through TF's BFC allocator
  (``memtrace.allocator.fit``, with TF's options for the allocator); the value shown is the smallest limit.
  A run does not repeat its order: by default the limit passes only when every sampled order of the
  recording fits under it (``memtrace.allocator.orders``), and the outcome says the share that does;
  ``orders=0`` holds only the recorded order to it.

Limits are inclusive: a value equal to its limit passes. Sizes read as people write them (``1234``,
``300MB`` = 3*10^8, ``1.5GiB`` = 1.5*2^30) and percentages as ``5%``. A budget file has one table
per allocator::

    [GPU_0_bfc]
    max_peak = "1.3GiB"
    max_waste = "5%"

Wherever an allocator is named, a device may be (``CPU:0``, ``GPU:0`` or a full device name): it
means the allocator that device's memory went through (``mklcpu``, ``cpu`` or
``bfc_cpu_allocator_for_gpu`` for a CPU, depending on TensorFlow's build), so that one budget file
serves every machine; the outcome says which allocator it was.

Anything that cannot be measured or understood (an allocator the trace lacks, a malformed size, an
unknown key, waste on an allocator that tracks no buffer sizes, a peak on an allocator whose bytes
add up past int64) is a :class:`UsageError`, never a silent pass. Waste needs no replay: it is
measured on such an allocator too.
"""

from __future__ import annotations

import os
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..errors import UsageError
from ..trace.data import TraceData
from ..trace.devices import resolve_allocator
from ..trace.replay import uncounted
from ..units import MAX_SIZE, decimal_note, format_bytes, parse_percent, parse_size
from .frag import OpWaste, Waste, internal_waste
from .peak import AllocatorPeak, peak

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

METRICS = {
    "max_peak": "peak_bytes: the allocator's peak, absolute where a baseline is known",
    "max_peak_delta": "peak_delta_bytes: the peak of the bytes allocated during the step",
    "max_waste": "allocated minus requested bytes of unique buffers: a percentage of allocated bytes, or a size",
    "fits": "the step's requests fit under this limit, replayed through TF's BFC allocator (memtrace fit) "
            "with TF's options for the allocator",
}
TOP_CONTRIBUTORS = 3


@dataclass(frozen=True)
class Budget:
    """One limit on one allocator, and where it was stated (an option, a file, a marker)."""

    allocator: str
    metric: str  # a key of METRICS
    limit: int | float  # bytes (int) or a fraction (float) as ``unit`` says
    unit: str  # "bytes" or "fraction"
    source: str
    stated_as: str | None = None  # the device it was stated for (``CPU:0``), when it was; ``allocator`` is then its allocator
    limit_note: str | None = None  # how a decimal size was read (``1.3G`` is 1.3*10^9 bytes), to say so


@dataclass(frozen=True)
class Contributor:
    """A node and the bytes it accounts for: held at the peak, or wasted."""

    name: str
    kinds: tuple[str, ...]  # how it holds them at the peak ("output", "temp", ...); empty for waste
    bytes: int  # the allocator's chunks
    requested_bytes: int | None = None  # at the peak: the tensors' own bytes in them, where the trace says each


@dataclass(frozen=True)
class Outcome:
    """A budget measured on a trace."""

    budget: Budget
    measured: int | float | None  # None: a ``fits`` budget whose requests no limit the model holds (8 TiB) fits
    note: str  # what the measured value is, in words (absolute or relative, over how many buffers)
    contributors: tuple[Contributor, ...]  # the largest, at most TOP_CONTRIBUTORS
    peak: AllocatorPeak | None  # for peak budgets: the peak measured
    fits: bool | None = None  # for ``fits``: the replay's verdict under the limit (measured is the smallest limit)
    measured_as: str = "the smallest limit"  # for ``fits``: what ``measured`` is, in words

    @property
    def passed(self) -> bool:
        """Inclusive: a value equal to its limit passes; ``fits`` passes when the replay fits."""
        if self.fits is not None:
            return self.fits
        return self.measured is not None and self.measured <= self.budget.limit

    @property
    def margin(self) -> int | float | None:
        """Headroom left: limit minus value (negative when over budget); None where nothing was measured."""
        return None if self.measured is None else self.budget.limit - self.measured


@dataclass(frozen=True)
class CheckResult:
    trace: str
    outcomes: tuple[Outcome, ...]
    step: int | None = None  # the profile's step measured (``--step``), else None
    span: str = "step"  # what peak times are into: "step", or "profile" for a profile of several steps

    @property
    def passed(self) -> bool:
        return all(o.passed for o in self.outcomes)

    @property
    def failed(self) -> tuple[Outcome, ...]:
        return tuple(o for o in self.outcomes if not o.passed)


# -- stating budgets ------------------------------------------------------------------------------


def parse_limit(metric: str, value: object, where: str) -> tuple[int | float, str]:
    """A limit as written (``"1.3GiB"``, ``1234``, ``"5%"``) -> ``(limit, "bytes" | "fraction")``."""
    if metric not in METRICS:
        raise UsageError(f"{where}: unknown budget {metric!r} (known: {', '.join(METRICS)})")
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise UsageError(f"{where}: {metric} must be a size such as \"1.3GiB\" or a whole number of bytes, "
                         + ("or a percentage such as \"5%\", " if metric == "max_waste" else "")
                         + f"not {value!r}")
    if metric == "max_waste" and str(value).strip().replace(".", "", 1).isdigit():
        raise UsageError(f"{where}: max_waste {str(value).strip()} is ambiguous: write {str(value).strip()}% for a share "
                         f"of the allocated bytes or {str(value).strip()}B for bytes")
    if isinstance(value, int):
        if value < 0:
            raise UsageError(f"{where}: {metric} cannot be negative: {value}")
        if value > MAX_SIZE:
            raise UsageError(f"{where}: {metric} too large: a number of {len(str(value))} digits "
                             f"(at most {MAX_SIZE} bytes)")
        return value, "bytes"
    text = value.strip()
    if text.endswith("%") and metric != "max_waste":
        raise UsageError(f"{where}: {metric} takes a size (e.g. 1.3GiB), not a percentage: {value!r}")
    try:
        if text.endswith("%"):
            return parse_percent(text), "fraction"
        return parse_size(text), "bytes"
    except UsageError as error:
        raise UsageError(f"{where}: {error}") from None


def parse_assignment(metric: str, text: str, option: str) -> Budget:
    """``GPU_0_bfc=1.3GiB`` from the command line option ``option`` -> a Budget."""
    allocator, equals, value = text.partition("=")
    if not equals or not allocator.strip() or not value.strip():
        raise UsageError(f"{option} {text!r}: write ALLOCATOR=LIMIT, e.g. {option} GPU_0_bfc="
                         + ("5%" if metric == "max_waste" else "1.3GiB"))
    limit, unit = parse_limit(metric, value, f"{option} {text}")
    return Budget(allocator.strip(), metric, limit, unit, option, limit_note=decimal_note(value))


def budgets_from_mapping(tables: Mapping[str, Any], source: str) -> list[Budget]:
    """``{"GPU_0_bfc": {"max_peak": "1.3GiB"}}`` (a parsed budget file, or a marker's) -> Budgets."""
    found = []
    for allocator, table in tables.items():
        if not isinstance(table, Mapping):
            raise UsageError(f"{source}: {allocator} = {table!r} is not a table: budgets go in one table per "
                             f"allocator, e.g. [GPU_0_bfc] then max_peak = \"1.3GiB\"")
        if not table:
            raise UsageError(f"{source}: [{allocator}] states no budget (known: {', '.join(METRICS)})")
        for metric, value in table.items():
            limit, unit = parse_limit(metric, value, f"{source}: [{allocator}]")
            note = decimal_note(value) if isinstance(value, str) else None
            found.append(Budget(allocator, metric, limit, unit, source, limit_note=note))
    if not found:
        raise UsageError(f"{source}: states no budget; write one table per allocator, e.g. [GPU_0_bfc] then "
                         "max_peak = \"1.3GiB\"")
    return found


def load_budget_file(path: str | os.PathLike[str]) -> list[Budget]:
    """Read a TOML budget file; every way it can be wrong is a UsageError naming the file."""
    name = os.fspath(path)
    if os.path.isdir(name):
        raise UsageError(f"{name}: is a directory, not a budget file")
    try:
        with open(name, "rb") as handle:
            tables = tomllib.load(handle)
    except FileNotFoundError:
        raise UsageError(f"{name}: no such budget file") from None
    except OSError as error:
        raise UsageError(f"{name}: cannot read: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{name}: not a TOML budget file (not UTF-8 text)") from None
    except tomllib.TOMLDecodeError as error:
        raise UsageError(f"{name}: not valid TOML: {error}") from None
    except RecursionError:  # arrays or tables nested thousands deep
        raise UsageError(f"{name}: not a budget file: nested too deeply") from None
    return budgets_from_mapping(tables, name)


# -- checking -------------------------------------------------------------------------------------


def check(trace: TraceData, budgets: Iterable[Budget], *, orders: int | None = None) -> CheckResult:
    """Measure every budget on the trace, in the order given.

    Every budget names an allocator the trace has (else a UsageError listing the ones it has), and
    no (allocator, metric) is stated twice. ``orders``: the orders sampled for ``fits`` budgets
    (None: the default, ``memtrace.allocator.orders.DEFAULT_ORDERS``; 0: the recorded order alone).
    """
    budgets = list(budgets)
    if not budgets:
        raise UsageError("no budget to check: give --max-peak, --max-peak-delta, --max-waste, --fits or --budget FILE")
    seen: dict[tuple[str, str], Budget] = {}
    budgets = [_resolved(trace, b) for b in budgets]
    for b in budgets:
        first = seen.setdefault((b.allocator, b.metric), b)
        if first is not b:
            raise UsageError(f"{b.metric} of {b.allocator} is stated twice ({first.source} and {b.source})")
    peaks: dict[str, AllocatorPeak] = {}
    wastes: dict[str, tuple[Waste, tuple[OpWaste, ...]]] = {}
    outcomes = []
    for b in budgets:
        if b.metric in ("max_peak", "max_peak_delta"):
            if b.allocator not in peaks:
                unknown = uncounted(trace, b.allocator)
                if unknown is not None:
                    raise UsageError(f"{trace.path}: {b.metric} of {b.allocator} cannot be measured: its peak is unknown, "
                                     f"{unknown.reason} (oddity bytes-beyond-int64)")
                peaks[b.allocator] = peak(trace, b.allocator)
            outcomes.append(_peak_outcome(b, peaks[b.allocator], trace.span_name))
        elif b.metric == "fits":
            outcomes.append(_fits_outcome(trace, b, orders))
        else:
            if b.allocator not in wastes:
                wastes[b.allocator] = internal_waste(trace, b.allocator)
            outcomes.append(_waste_outcome(trace, b, *wastes[b.allocator]))
    return CheckResult(trace.path, tuple(outcomes), trace.step, trace.span_name)


def _resolved(trace: TraceData, b: Budget) -> Budget:
    """The budget on an allocator of the trace: a device (``CPU:0``) becomes the allocator its memory went through."""
    allocator = resolve_allocator(trace, b.allocator)
    return b if allocator == b.allocator else replace(b, allocator=allocator, stated_as=b.allocator)


def peak_contributors(p: AllocatorPeak, top: int = TOP_CONTRIBUTORS) -> tuple[Contributor, ...]:
    """The nodes holding the most bytes at the peak (their live allocations summed), largest first."""
    held: dict[str, int] = defaultdict(int)
    requested: dict[str, int | None] = defaultdict(int)
    kinds: dict[str, dict[str, None]] = defaultdict(dict)
    for a in p.live_at_peak:
        if a.bytes > 0:
            held[a.node] += a.bytes
            before = requested[a.node]
            requested[a.node] = None if before is None or a.requested_bytes is None else before + a.requested_bytes
            kinds[a.node][a.kind] = None
    ranked = sorted(held, key=lambda node: (-held[node], node))[:top]
    return tuple(Contributor(node, tuple(kinds[node]), held[node], requested[node]) for node in ranked)


def peak_basis(p: AllocatorPeak, span: str = "step") -> str:
    """Whether ``peak_bytes`` is absolute, in words; ``span`` is what the trace holds: ``"step"``, or
    ``"profile"`` for a profile of several steps (:attr:`TraceData.span_name`)."""
    rec = p.reconciliation
    if p.baseline_bytes is None:
        return f"relative to the {span} start: no snapshot gives a baseline"
    return (f"absolute: baseline {format_bytes(p.baseline_bytes)} live before the {span} "
            f"({rec.matched} of {rec.snapshots} snapshots agree)")


def _peak_outcome(b: Budget, p: AllocatorPeak, span: str = "step") -> Outcome:
    if b.metric == "max_peak":
        return Outcome(b, p.peak_bytes, peak_basis(p, span), peak_contributors(p), p)
    return Outcome(b, p.peak_delta_bytes, f"bytes allocated during the {span}, baseline left out", peak_contributors(p),
                   p)


def _fits_outcome(trace: TraceData, b: Budget, orders: int | None) -> Outcome:
    from ..allocator.bfc import MAX_LIMIT_BYTES
    from ..allocator.fit import fit
    from ..allocator.orders import DEFAULT_ORDERS

    where = f"{b.source}: [{b.stated_as or b.allocator}] fits"
    if b.limit > MAX_LIMIT_BYTES:
        raise UsageError(f"{where} {format_bytes(int(b.limit))} ({int(b.limit):,} bytes) is above what the model holds "
                         f"(at most {MAX_LIMIT_BYTES:,} bytes, 8 TiB)")
    result = fit(trace, b.allocator, limit=int(b.limit), alternatives=False,
                 orders=DEFAULT_ORDERS if orders is None else orders)
    smallest = ("no limit the model holds (8 TiB) fits" if result.min_limit_bytes is None
                else f"the smallest limit is {result.min_limit_bytes // (1 << 20):,} MiB")
    note = f"replayed through TF's BFC allocator: {'fits' if result.fits else 'does not fit'}; {smallest}"
    band = result.band
    if band is not None and band.fitting_at_limit is not None:
        n = len(band.orders)
        note = (f"replayed through TF's BFC allocator: the recorded order {'fits' if result.fits else 'does not fit'}; "
                f"{band.fitting_at_limit} of {n} sampled orders fit ({100 * band.fitting_at_limit / n:.0f}%), and the "
                f"limit passes only when every one does; {smallest.replace('the smallest limit', 'the smallest limit under the recorded order')}, "
                f"every sampled order fits from {band.always_fits_bytes // (1 << 20):,} MiB")
    contributors: tuple[Contributor, ...] = ()
    if result.failure is not None:
        f = result.failure
        note += (f"; first failure: {format_bytes(f.request_bytes)} for {f.op or '(unknown op)'}, {f.verdict}, "
                 f"largest free chunk {format_bytes(f.largest_free_bytes)}")
        held: dict[str, int] = defaultdict(int)
        for c in f.chunks:
            if c.in_use:
                held[c.op or "(unknown op)"] += c.size_bytes
        ranked = sorted(held, key=lambda op: (-held[op], op))[:TOP_CONTRIBUTORS]
        contributors = tuple(Contributor(op, ("in use",), held[op]) for op in ranked)
    if band is not None and band.fitting_at_limit is not None:
        measured = band.always_fits_bytes if result.min_limit_bytes is None else max(band.always_fits_bytes,
                                                                                       result.min_limit_bytes)
        return Outcome(b, measured, note, contributors, None,
                       fits=result.verdict, measured_as="every sampled order fits from")
    return Outcome(b, result.min_limit_bytes, note, contributors, None, fits=result.verdict)


def _waste_outcome(trace: TraceData, b: Budget, total: Waste, ops: tuple[OpWaste, ...]) -> Outcome:
    if total.tensors == 0:
        raise UsageError(f"{trace.path}: max_waste of {b.allocator} cannot be measured: the trace gives no "
                         "allocated size for any of its buffers")
    contributors = tuple(Contributor(o.node, (), o.waste.waste_bytes) for o in ops[:TOP_CONTRIBUTORS] if o.waste.waste_bytes > 0)
    note = (f"allocated minus requested over {total.tensors} unique buffers: {format_bytes(total.waste_bytes)} "
            f"of {format_bytes(total.allocated_bytes)} allocated")
    measured = total.waste_fraction if b.unit == "fraction" else total.waste_bytes
    return Outcome(b, measured, note, contributors, None)
