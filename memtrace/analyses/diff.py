"""Run-to-run diffs: what grew between a base trace and a new one.

Three views, each from numbers memtrace already defines:

- **Allocators**: each allocator's ``peak_bytes`` (``memtrace.analyses.peak``) in both traces, the change
  in bytes and as a fraction of the base peak. An allocator missing from one trace counts as
  peak 0 there; growth from 0 has no fraction (``None``) and exceeds any ``max_increase``.
  An allocator whose bytes add up past int64 in either trace has an unknown peak there and no
  change (``None``, never a wrapped number); ``max_increase`` cannot be measured on it, which is
  a :class:`UsageError` (as ``memtrace check`` treats a peak budget it cannot measure), never a pass.
  Where a baseline rests on a minority of its snapshots (oneDNN's ``mklcpu``), ``peak_bytes``
  moves with whichever snapshot won; ``measure="peak_delta_bytes"`` compares the step's own
  peaks instead.
- **Ops**: per node name, tfprof's ``peak_bytes`` and ``residual_bytes`` and memtrace's
  ``at_peak_bytes`` (``memtrace.analyses.ops``), in both traces; the ops whose largest change among the
  three is biggest come first. Ops whose three numbers did not change are left out, as are ops
  that appear in only one trace and hold no bytes there. ``at_peak_bytes`` covers the allocators
  whose peak is known in both traces.
- **New at the peak**: allocations live at an allocator's new peak with no counterpart at its
  base peak. Counterparts are matched by producer (node name) and output slot (allocations
  that are not outputs match by producer and kind); where one producer holds several such
  allocations, the largest pair up first and the smallest are left over as new.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..errors import UsageError
from ..trace.data import TraceData
from ..trace.devices import device_allocator
from ..trace.layers import LayerNames, shows_keras
from ..trace.replay import Uncounted, uncounted
from .ops import OpRow, group_rows, node_rows
from .peak import AllocatorPeak, LiveAllocation, parse_group_by, peak

MEASURES = ("peak_bytes", "peak_delta_bytes")


@dataclass(frozen=True)
class AllocatorChange:
    """One allocator's peak in both traces (None where the trace lacks the allocator, or where its
    peak there is unknown: ``base_unknown``, ``new_unknown``, its bytes beyond int64).

    ``measure`` says which peak the change is computed on: ``peak_bytes`` (absolute where a
    baseline is known) or ``peak_delta_bytes`` (the step's own allocations, baseline left out).
    Every number of a side whose peak is unknown is None, and so is the change.
    """

    allocator: str
    base: AllocatorPeak | None
    new: AllocatorPeak | None
    measure: str = "peak_bytes"
    base_unknown: Uncounted | None = None
    new_unknown: Uncounted | None = None

    @property
    def unknown(self) -> bool:
        """True where the peak is unknown in either trace: there is no change to compute."""
        return self.base_unknown is not None or self.new_unknown is not None

    @property
    def unknown_sides(self) -> tuple[tuple[str, Uncounted], ...]:
        """``("base", why)`` and/or ``("new", why)``: the traces where the peak is unknown."""
        sides = (("base", self.base_unknown), ("new", self.new_unknown))
        return tuple((side, u) for side, u in sides if u is not None)

    @property
    def unknown_reason(self) -> str | None:
        """Why the change is unknown, per trace: ``new: beyond int64: its records add up to 1.38e+19 bytes``."""
        return "; ".join(f"{side}: {u.reason}" for side, u in self.unknown_sides) or None

    @property
    def in_base(self) -> bool:
        """Whether the base trace has the allocator (with a known peak or not)."""
        return self.base is not None or self.base_unknown is not None

    @property
    def in_new(self) -> bool:
        return self.new is not None or self.new_unknown is not None

    @property
    def base_peak_bytes(self) -> int | None:
        if self.base_unknown is not None:
            return None
        return self.base.peak_bytes if self.base is not None else 0

    @property
    def new_peak_bytes(self) -> int | None:
        if self.new_unknown is not None:
            return None
        return self.new.peak_bytes if self.new is not None else 0

    @property
    def base_peak_delta_bytes(self) -> int | None:
        if self.base_unknown is not None:
            return None
        return self.base.peak_delta_bytes if self.base is not None else 0

    @property
    def new_peak_delta_bytes(self) -> int | None:
        if self.new_unknown is not None:
            return None
        return self.new.peak_delta_bytes if self.new is not None else 0

    @property
    def base_bytes(self) -> int | None:
        """The compared peak of the base trace (``measure``); None where it is unknown."""
        return self.base_peak_bytes if self.measure == "peak_bytes" else self.base_peak_delta_bytes

    @property
    def new_bytes(self) -> int | None:
        return self.new_peak_bytes if self.measure == "peak_bytes" else self.new_peak_delta_bytes

    @property
    def delta_bytes(self) -> int | None:
        """The change of the compared peak; None where either peak is unknown."""
        base, new = self.base_bytes, self.new_bytes
        return None if base is None or new is None else new - base

    @property
    def delta_fraction(self) -> float | None:
        """The change over the base peak; None for growth from a base peak of 0, and where either
        peak is unknown (``delta_bytes`` is None then too)."""
        base, delta = self.base_bytes, self.delta_bytes
        if base is None or delta is None:
            return None
        if base:
            return delta / base
        return 0.0 if delta == 0 else None

    @property
    def weak_baseline(self) -> bool:
        """True when a baseline in ``peak_bytes`` rests on fewer than half of its trace's snapshots.

        oneDNN's ``mklcpu`` snapshots count only part of what it hands out, so each implies a
        different baseline; comparing ``peak_delta_bytes`` is then the sounder comparison.
        """
        return any(
            p is not None and p.baseline_bytes is not None and 2 * p.reconciliation.matched < p.reconciliation.snapshots
            for p in (self.base, self.new)
        )

    @property
    def same_basis(self) -> bool:
        """False when one peak is absolute (baseline known) and the other relative to its step start."""
        if self.base is None or self.new is None:
            return True
        return (self.base.baseline_bytes is None) == (self.new.baseline_bytes is None)

    def exceeds(self, max_increase: float) -> bool:
        """True when the peak grew by more than ``max_increase`` (a fraction) of the base peak;
        False where the change is unknown (:func:`diff` refuses ``max_increase`` on such a one)."""
        if self.delta_bytes is None or self.delta_bytes <= 0:
            return False
        fraction = self.delta_fraction
        return fraction is None or fraction > max_increase


@dataclass(frozen=True)
class OpChange:
    """One op (node name) in both traces; an op missing from a trace has zeros there."""

    name: str
    status: str  # "changed", "added" (only in new) or "removed" (only in base)
    base_peak_bytes: int
    new_peak_bytes: int
    base_residual_bytes: int
    new_residual_bytes: int
    base_at_peak_bytes: int
    new_at_peak_bytes: int

    @property
    def delta_bytes(self) -> int:
        """The change of tfprof's per-op peak_bytes."""
        return self.new_peak_bytes - self.base_peak_bytes

    @property
    def residual_delta_bytes(self) -> int:
        return self.new_residual_bytes - self.base_residual_bytes

    @property
    def at_peak_delta_bytes(self) -> int:
        return self.new_at_peak_bytes - self.base_at_peak_bytes

    @property
    def largest_change_bytes(self) -> int:
        """The biggest of the three changes, by magnitude (what the ranking uses)."""
        return max(abs(self.delta_bytes), abs(self.residual_delta_bytes), abs(self.at_peak_delta_bytes))


@dataclass(frozen=True)
class NewAtPeak:
    """An allocation live at the new peak whose producer and slot held nothing at the base peak."""

    allocator: str
    allocation: LiveAllocation


@dataclass(frozen=True)
class TraceDiff:
    base_path: str
    new_path: str
    measure: str  # "peak_bytes" or "peak_delta_bytes": what the allocator changes compare
    allocators: tuple[AllocatorChange, ...]  # largest peak (new or base) first
    ops: tuple[OpChange, ...]  # changed ops only, biggest change first
    new_at_peak: tuple[NewAtPeak, ...]  # largest first
    max_increase: float | None  # the allowed growth, when one was given
    grouped_by: str = "node"  # what the ops are added up by: node, type, scope[:DEPTH] or layer

    @property
    def exceeded(self) -> tuple[AllocatorChange, ...]:
        """The allocators whose peak grew by more than ``max_increase`` (none when it is not given)."""
        if self.max_increase is None:
            return ()
        limit = self.max_increase
        return tuple(a for a in self.allocators if a.exceeds(limit))

    @property
    def passed(self) -> bool:
        return not self.exceeded


def diff(
    base: TraceData,
    new: TraceData,
    allocators: Iterable[str] | None = None,
    max_increase: float | None = None,
    measure: str = "peak_bytes",
    group_by: str = "node",
    layer_names: tuple[LayerNames | None, LayerNames | None] = (None, None),
) -> TraceDiff:
    """Compare two traces of the same model: allocator peaks, per-op changes, new buffers at the peak.

    ``measure`` is the peak the allocator changes (and ``max_increase``) are computed on:
    ``peak_bytes`` or ``peak_delta_bytes``. An allocator whose peak is unknown in either trace (its
    bytes beyond int64) comes first with no change, is left out of the ops' at-peak bytes and of
    the new allocations, and cannot be held to ``max_increase``: a :class:`UsageError` then.
    ``group_by`` adds the ops up (``type``, ``scope[:DEPTH]``, ``layer`` with each trace's
    ``layer_names``) before they are compared.
    """
    by, depth = parse_group_by(group_by)
    if measure not in MEASURES:
        raise UsageError(f"cannot compare {measure!r}: choose one of {', '.join(MEASURES)}")
    pairs = _allocator_pairs(base, new, allocators)
    changes = [_change(base, new, label, before, after, measure) for label, before, after in pairs]
    unmeasured = [(c, side, u) for c in changes for side, u in c.unknown_sides]
    if max_increase is not None and unmeasured:
        c, side, u = unmeasured[0]
        raise UsageError(f"{base.path if side == 'base' else new.path}: max_increase of {c.allocator} cannot be "
                         f"measured: its peak is unknown, {u.reason} (oddity bytes-beyond-int64)")
    # Ops hold bytes at the peaks known in both traces: one known on one side only would show as a change.
    known = [(before, after) for (_, before, after), c in zip(pairs, changes) if not c.unknown]
    changes.sort(key=lambda c: (not c.unknown, -max(c.new_bytes or 0, c.base_bytes or 0), c.allocator))
    base_rows = node_rows(base, [before for before, _ in known if before is not None])
    new_rows = node_rows(new, [after for _, after in known if after is not None])
    # Both sides cut their scopes alike, so that a group of one is the same group of the other.
    layered = by == "scope" and depth is None and shows_keras(row.name for row in [*base_rows, *new_rows])
    ops = _op_changes(
        group_rows(base_rows, by, depth, layer_names[0], layered),
        group_rows(new_rows, by, depth, layer_names[1], layered),
    )
    fresh = [
        NewAtPeak(c.allocator, a)
        for c in changes
        if c.new is not None and not c.unknown
        for a in unmatched_at_peak(c.base.live_at_peak if c.base is not None else (), c.new.live_at_peak)
    ]
    fresh.sort(key=lambda f: (-f.allocation.bytes, f.allocator, f.allocation.node))
    return TraceDiff(base.path, new.path, measure, tuple(changes), tuple(ops), tuple(fresh), max_increase, group_by)


def _change(base: TraceData, new: TraceData, label: str, before: str | None, after: str | None,
            measure: str) -> AllocatorChange:
    """One allocator's peaks in both traces; a side whose bytes add up past int64 is unknown, not a peak."""
    base_unknown = uncounted(base, before) if before is not None else None
    new_unknown = uncounted(new, after) if after is not None else None
    return AllocatorChange(
        label,
        peak(base, before) if before is not None and base_unknown is None else None,
        peak(new, after) if after is not None and new_unknown is None else None,
        measure,
        base_unknown,
        new_unknown,
    )


def unmatched_at_peak(base: Sequence[LiveAllocation], new: Sequence[LiveAllocation]) -> list[LiveAllocation]:
    """The allocations of ``new`` with no counterpart in ``base``, matched by producer and slot.

    Negative entries (frees of memory from before the step) are not buffers and never listed.
    """
    available: dict[tuple[str, int | None, str | None], int] = defaultdict(int)
    for a in base:
        if a.bytes > 0:
            available[_key(a)] += 1
    left = []
    for a in sorted((a for a in new if a.bytes > 0), key=lambda a: -a.bytes):
        key = _key(a)
        if available[key]:
            available[key] -= 1
        else:
            left.append(a)
    return left


def _key(a: LiveAllocation) -> tuple[str, int | None, str | None]:
    """Producer and slot; allocations that are not outputs have no slot and match by kind instead."""
    return (a.node, a.slot, None) if a.slot is not None else (a.node, None, a.kind)


def _allocator_pairs(
    base: TraceData, new: TraceData, chosen: Iterable[str] | None
) -> list[tuple[str, str | None, str | None]]:
    """(label, base allocator, new allocator) per allocator compared. A device (``CPU:0``) pairs the
    allocators its memory went through in each trace, which may differ (``mklcpu`` and ``cpu``);
    the label then says both, e.g. ``CPU:0 (mklcpu -> cpu)``."""
    pairs: list[tuple[str, str | None, str | None]] = []
    known = list(dict.fromkeys((*base.allocators, *new.allocators)))
    for name in _allocators(base, new, chosen):
        if name in known:
            pairs.append((name, name if name in base.allocators else None, name if name in new.allocators else None))
            continue
        before, after = device_allocator(base, name), device_allocator(new, name)
        label = f"{name} ({before})" if before == after else f"{name} ({before or 'none'} -> {after or 'none'})"
        pairs.append((label, before, after))
    return pairs


def _allocators(base: TraceData, new: TraceData, chosen: Iterable[str] | None) -> list[str]:
    known = list(dict.fromkeys((*base.allocators, *new.allocators)))
    if chosen is None:
        return known
    names = list(dict.fromkeys(chosen))
    for name in names:
        if name not in known and device_allocator(base, name) is None and device_allocator(new, name) is None:
            raise UsageError(
                f"no allocator {name!r} in {base.path} or {new.path} (they have: {', '.join(known) or 'none'}; "
                "or name a device, e.g. CPU:0)"
            )
    return names


def _op_changes(base_rows: list[OpRow], new_rows: list[OpRow]) -> list[OpChange]:
    before = {r.name: r for r in base_rows}
    after = {r.name: r for r in new_rows}
    changes = []
    for name in dict.fromkeys((*before, *after)):
        b, n = before.get(name), after.get(name)
        change = OpChange(
            name=name,
            status="changed" if b is not None and n is not None else ("added" if b is None else "removed"),
            base_peak_bytes=b.peak_bytes if b else 0,
            new_peak_bytes=n.peak_bytes if n else 0,
            base_residual_bytes=b.residual_bytes if b else 0,
            new_residual_bytes=n.residual_bytes if n else 0,
            base_at_peak_bytes=b.at_peak_bytes if b else 0,
            new_at_peak_bytes=n.at_peak_bytes if n else 0,
        )
        if change.largest_change_bytes:
            changes.append(change)
    changes.sort(key=lambda c: (-c.largest_change_bytes, c.name))
    return changes
