"""Live bytes over time for one allocator, ready to plot, with downsampling that keeps peaks.

Points are ``(time_us, live_bytes)`` after each event of the replay, times relative to the
step start, bytes absolute where the baseline is known. Downsampling to N points splits the
step into N - 1 equal time buckets and keeps each bucket's maximum (its first occurrence), so the
global peak always survives, and the last point, so the fall after it does too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..trace.data import Int32Array, IntArray, TraceData
from ..trace.replay import reconcile, replay


@dataclass(frozen=True, eq=False)
class Timeline:
    allocator: str
    source: str  # "records" or "outputs"
    baseline_bytes: int | None  # added to live_bytes when known
    time_us: IntArray
    live_bytes: IntArray


def timeline(trace: TraceData, allocator: str, points: int | None = None) -> Timeline:
    """The allocator's live-bytes curve, optionally downsampled to at most ``points`` points."""
    replayed = replay(trace, allocator)
    baseline = reconcile(trace, replayed).baseline_bytes
    time_us = (replayed.time_ns - trace.step_start_ns) // 1000
    live = replayed.live_bytes + (baseline or 0)
    if points is not None and len(time_us) > points:
        keep = downsample(time_us, live, points)
        time_us, live = time_us[keep], live[keep]
    return Timeline(allocator, replayed.source, baseline, time_us, live)


def downsample(time: IntArray, values: IntArray, points: int) -> IntArray:
    """Indices of at most ``points`` points that keep the curve's shape: the first maximum of each
    of ``points - 1`` equal time buckets, and the last point, so that the fall after the peak and
    the level the step ends on survive."""
    if points < 2:
        return bucket_maxima(time, values, 1)
    return np.unique(np.concatenate([bucket_maxima(time, values, points - 1), [len(time) - 1]]))


def bucket_maxima(time: IntArray, values: IntArray, buckets: int) -> IntArray:
    """Indices of the first maximum in each of ``buckets`` equal time spans (``time`` sorted)."""
    if buckets < 1:
        raise ValueError("buckets must be at least 1")
    edges = np.linspace(time[0], time[-1], buckets + 1)[1:-1]
    bounds = np.concatenate([[0], np.searchsorted(time, edges, side="right"), [len(time)]])
    keep = [lo + int(np.argmax(values[lo:hi])) for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()) if hi > lo]
    return np.array(keep, dtype=np.int64)


def bucket_extrema(time: IntArray, values: IntArray, buckets: int) -> IntArray:
    """Indices of each bucket's first maximum and first minimum, plus the first and last point.

    Drawn in time order, these points trace the curve's envelope: the peak survives, and so do
    the troughs that a maxima-only downsampling would fill in.
    """
    if not len(time):
        return np.zeros(0, dtype=np.int64)
    keep = np.concatenate([bucket_maxima(time, values, buckets), bucket_maxima(time, -values, buckets), [0, len(time) - 1]])
    return np.unique(keep)


@dataclass(frozen=True, eq=False)
class Snapshots:
    """The allocator's own ``allocator_bytes_in_use`` counts, next to the replay at the same instant.

    Each snapshot is taken when a node's op ends. ``replay_bytes`` is the replayed live bytes
    then, plus the baseline where one is known; where it is, ``agrees`` says which snapshots the
    replay reproduces exactly (the reconciliation, point by point).
    """

    allocator: str
    baseline_bytes: int | None
    time_us: IntArray  # relative to the step start
    bytes_in_use: IntArray
    replay_bytes: IntArray
    node: Int32Array  # the node whose memory entry carried the snapshot

    @property
    def agrees(self) -> npt.NDArray[np.bool_]:
        if self.baseline_bytes is None:
            return np.zeros(len(self.time_us), dtype=bool)
        return self.bytes_in_use == self.replay_bytes


def snapshots(trace: TraceData, allocator: str) -> Snapshots:
    """Every snapshot of the allocator, in time order, with the replay it is checked against."""
    replayed = replay(trace, allocator)
    baseline = reconcile(trace, replayed).baseline_bytes
    memory = trace.memory
    taken = np.flatnonzero((memory.allocator == trace.allocator_index(allocator)) & memory.has_snapshot)
    nodes = memory.node[taken]
    time_ns = trace.nodes.op_end_ns[nodes]
    order = np.argsort(time_ns, kind="stable")
    taken, nodes, time_ns = taken[order], nodes[order], time_ns[order]
    replay_bytes = np.array([replayed.live_at(int(t)) for t in time_ns.tolist()], dtype=np.int64) + (baseline or 0)
    return Snapshots(
        allocator=allocator,
        baseline_bytes=baseline,
        time_us=(time_ns - trace.step_start_ns) // 1000,
        bytes_in_use=memory.bytes_in_use[taken],
        replay_bytes=replay_bytes,
        node=nodes.astype(np.int32),
    )
