"""Live bytes over time for one allocator, ready to plot, with downsampling that keeps peaks.

Points are ``(time_us, live_bytes)`` after each event of the replay, times relative to the
step start, bytes absolute where the baseline is known. Downsampling to N points splits the
step into N equal time buckets and keeps each bucket's maximum (its first occurrence), so the
global peak always survives.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .model import IntArray, Trace
from .replay import reconcile, replay


@dataclass(frozen=True, eq=False)
class Timeline:
    allocator: str
    source: str  # "records" or "outputs"
    baseline_bytes: int | None  # added to live_bytes when known
    time_us: IntArray
    live_bytes: IntArray


def timeline(trace: Trace, allocator: str, points: int | None = None) -> Timeline:
    """The allocator's live-bytes curve, optionally downsampled to at most ``points`` points."""
    replayed = replay(trace, allocator)
    baseline = reconcile(trace, replayed).baseline_bytes
    time_us = (replayed.time_ns - trace.step_start_ns) // 1000
    live = replayed.live_bytes + (baseline or 0)
    if points is not None and len(time_us) > points:
        keep = bucket_maxima(time_us, live, points)
        time_us, live = time_us[keep], live[keep]
    return Timeline(allocator, replayed.source, baseline, time_us, live)


def bucket_maxima(time: IntArray, values: IntArray, buckets: int) -> IntArray:
    """Indices of the first maximum in each of ``buckets`` equal time spans (``time`` sorted)."""
    if buckets < 1:
        raise ValueError("buckets must be at least 1")
    edges = np.linspace(time[0], time[-1], buckets + 1)[1:-1]
    bounds = np.concatenate([[0], np.searchsorted(time, edges, side="right"), [len(time)]])
    keep = [lo + int(np.argmax(values[lo:hi])) for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()) if hi > lo]
    return np.array(keep, dtype=np.int64)
