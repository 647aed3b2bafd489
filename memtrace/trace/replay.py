"""Replaying one allocator's allocations into a live-bytes timeline, and checking it against the allocator's snapshots.

The allocator's events in replay order, each allocation paired with its free and its buffer,
come from :mod:`memtrace.trace.buffers` (records where the allocator left ``allocation_records``, else
output lifetimes). Summed cumulatively from 0, they are the live bytes relative to the step
start. In outputs mode allocations come before frees at equal times, so the peak is an upper
bound; where snapshots exist, the output buffers that existed before the step are left to the
baseline, and the reconciliation says which and whether the model agrees with every snapshot.

Baseline: where the allocator left ``allocator_bytes_in_use`` snapshots (taken when a node's op
ended), ``snapshot - replay(at that time)`` for each; the most common value is the baseline,
the bytes already live when the step began. How many snapshots agree is the reconciliation.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from dataclasses import dataclass, fields

import numpy as np
import numpy.typing as npt

from ..errors import BEYOND_WHAT, SNAPSHOTS, BeyondInt64Error
from .buffers import Allocations, allocator_index, buffers
from .data import IntArray, TraceData

__all__ = ["Reconciliation", "Replay", "Uncounted", "allocator_index", "reconcile", "replay", "split_counted", "uncounted"]


@dataclass(frozen=True, eq=False)
class Replay(Allocations):
    """One allocator's paired allocations (:class:`~memtrace.trace.buffers.Allocations`) and the live bytes after each event."""

    live_bytes: IntArray  # per event: cumulative bytes after it, relative to the step start

    def peak_event(self) -> int | None:
        """The first event at which live bytes reach their maximum; None if they never rise above 0."""
        if not len(self.live_bytes) or int(self.live_bytes.max()) <= 0:
            return None
        return int(np.argmax(self.live_bytes))

    def alive_after(self, event: int) -> npt.NDArray[np.bool_]:
        """Per allocation: allocated at or before ``event`` and not freed by then (replay order)."""
        return (self.alloc_event <= event) & ((self.free_event < 0) | (self.free_event > event))

    def live_at(self, time_ns: int) -> int:
        """Relative live bytes after every event at or before ``time_ns``."""
        position = int(np.searchsorted(self.time_ns, time_ns, side="right"))
        return int(self.live_bytes[position - 1]) if position else 0



@dataclass(frozen=True)
class Reconciliation:
    """How the replay agrees with the allocator's own snapshots."""

    snapshots: int
    matched: int  # snapshots whose implied baseline equals the chosen one
    max_abs_error_bytes: int  # largest |implied baseline - baseline| over the snapshots
    baseline_bytes: int | None  # None when there is no snapshot
    # Outputs mode with snapshots only (see memtrace.trace.buffers): the outputs ("node:slot") whose
    # buffers existed before the step, left to the baseline, and whether a model of output
    # lifetimes agrees with every snapshot (None elsewhere).
    before_step_outputs: tuple[str, ...] = ()
    model_agrees: bool | None = None


@dataclass(frozen=True)
class Uncounted:
    """An allocator whose bytes add up past int64: any running total of them wraps around, so it has
    no replay, and its live bytes and peak are unknown (the other allocators of its trace are not)."""

    allocator: str
    source: str  # "records", "outputs" or "snapshots" (with the records): what adds up so
    total_bytes: float  # the sum of the sizes, 2^63 or more (with snapshots: 2^62 or more)

    @property
    def detail(self) -> str:
        """``its records add up to 1.38e+19 bytes``."""
        return f"its {BEYOND_WHAT[self.source]} add up to {self.total_bytes:.3g} bytes"

    @property
    def reason(self) -> str:
        """Why its numbers are unknown: ``beyond int64: its records add up to 1.38e+19 bytes``."""
        return f"beyond int64: {self.detail}"

    def error(self, path: str) -> BeyondInt64Error:
        """The error that refuses a command asking for this allocator's numbers."""
        return BeyondInt64Error(path, self.allocator, self.total_bytes, self.source)


_replayed: weakref.WeakKeyDictionary[TraceData, dict[str, Replay]] = weakref.WeakKeyDictionary()


def replay(trace: TraceData, allocator: str) -> Replay:
    """The allocator's replay: from its records when it has any, else from output lifetimes.

    Built once per trace and allocator (peak, frag, ops, the report and the export all ask).
    Refused (:class:`BeyondInt64Error`) where the allocator's bytes add up past int64, so that a
    wrapped running total never reaches a report as fact.
    """
    done = _replayed.setdefault(trace, {})
    if allocator not in done:
        paired = buffers(trace).allocations(allocator)
        magnitude = float(np.abs(paired.delta_bytes.astype(np.float64)).sum())
        if magnitude >= 2.0**63:
            raise BeyondInt64Error(trace.path, allocator, magnitude, paired.source)
        # The reconciliation takes snapshot - live bytes, the peak adds the baseline to the live
        # bytes: with the snapshots' largest magnitude, every such sum and difference must stay in int64.
        snapshots = _snapshot_magnitude(trace, allocator)
        if snapshots and 2 * (snapshots + magnitude) >= 2.0**63:
            raise BeyondInt64Error(trace.path, allocator, snapshots + magnitude, SNAPSHOTS)
        columns = {f.name: getattr(paired, f.name) for f in fields(paired)}
        done[allocator] = Replay(**columns, live_bytes=np.cumsum(paired.delta_bytes))
    return done[allocator]


def _snapshot_magnitude(trace: TraceData, allocator: str) -> float:
    """The largest magnitude of the allocator's ``allocator_bytes_in_use`` snapshots (0 without any)."""
    memory = trace.memory
    taken = (memory.allocator == trace.allocator_index(allocator)) & memory.has_snapshot
    if not taken.any():
        return 0.0
    return float(np.abs(memory.bytes_in_use[taken].astype(np.float64)).max())


def uncounted(trace: TraceData, allocator: str) -> Uncounted | None:
    """Why the allocator has no replay (its bytes add up past int64); None where it has one."""
    try:
        replay(trace, allocator)
    except BeyondInt64Error as error:
        return Uncounted(allocator, error.source, error.total_bytes)
    return None


def split_counted(trace: TraceData, allocators: Iterable[str]) -> tuple[list[str], list[Uncounted]]:
    """The allocators that have a replay, and apart, in the same order, those whose bytes add up past int64."""
    counted: list[str] = []
    unknown: list[Uncounted] = []
    for name in allocators:
        found = uncounted(trace, name)
        if found is None:
            counted.append(name)
        else:
            unknown.append(found)
    return counted, unknown


def reconcile(trace: TraceData, replayed: Replay) -> Reconciliation:
    """Check the replay against ``allocator_bytes_in_use`` snapshots and derive the baseline."""
    index = trace.allocator_index(replayed.allocator)
    memory = trace.memory
    taken = np.flatnonzero((memory.allocator == index) & memory.has_snapshot)
    before = tuple(
        f"{trace.node_name(int(trace.outputs.node[row]))}:{int(trace.outputs.slot[row])}"
        for row in replayed.before_step_rows.tolist()
    )
    agrees = replayed.agrees_with_snapshots
    if not len(taken):
        return Reconciliation(0, 0, 0, None)
    snapshot_time = trace.nodes.op_end_ns[memory.node[taken]]
    positions = np.searchsorted(replayed.time_ns, snapshot_time, side="right")
    live = np.where(positions > 0, replayed.live_bytes[np.maximum(positions - 1, 0)], 0)
    implied = memory.bytes_in_use[taken] - live
    # The most common implied baseline wins; among equally common ones, the earliest snapshot's.
    # Bytes live before the step cannot be negative: such values (allocators whose snapshots
    # count only part of what they hand out, like oneDNN's mklcpu) are never the baseline.
    candidates = implied[implied >= 0]
    if not len(candidates):
        return Reconciliation(len(taken), 0, int(np.abs(implied).max()), None, before, False if agrees else agrees)
    ordered = np.sort(candidates)
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    counts = np.diff(np.append(starts, len(ordered)))
    best = int(counts.max())
    tied = ordered[starts[counts == best]]
    baseline = int(candidates[np.flatnonzero(np.isin(candidates, tied))[0]])
    return Reconciliation(
        snapshots=len(taken),
        matched=best,
        max_abs_error_bytes=int(np.abs(implied - baseline).max()),
        baseline_bytes=baseline,
        before_step_outputs=before,
        model_agrees=None if agrees is None else agrees and best == len(taken),
    )
