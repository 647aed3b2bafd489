"""Everything the HTML report shows, gathered from the analyses once and bounded in size.

The report is a picture of the other commands' results: per allocator its peak and live set
(``peak``), its timeline downsampled to an envelope (``timeline``) and its snapshots (the
reconciliation, point by point), then the top ops (``ops``) and the fragmentation (``frag``).
Whatever the size of the trace, the report holds at most ``2 * points + 2`` timeline points and
``points`` snapshots per allocator: the curve keeps every time bucket's maximum and minimum,
the snapshots keep each bucket's largest disagreement with the replay.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ..allocator.address_space import AddressSpace
from ..trace.data import TraceData
from ..trace.layers import LayerNames, batch_size
from ..trace.replay import Uncounted, allocator_index, replay, split_counted
from .frag import AllocatorFragmentation, Anomaly, fragmentations
from .ops import OpsReport, ops
from .peak import AllocatorPeak, peak
from .summary import Summary, summarize
from .timeline import Snapshots, Timeline, bucket_extrema, bucket_maxima, snapshots, timeline

DEFAULT_POINTS = 1500


@dataclass(frozen=True, eq=False)
class AllocatorView:
    """One allocator as the report draws it."""

    peak: AllocatorPeak
    timeline: Timeline  # downsampled; bytes absolute where the baseline is known
    events: int  # points in the full timeline, before downsampling
    event_nodes: tuple[str, ...]  # per drawn point: the node whose record (or output) it follows
    snapshots: Snapshots  # downsampled
    snapshot_count: int  # before downsampling
    snapshot_agreeing: int  # of them (before downsampling), those that agree with the replay
    snapshot_nodes: tuple[str, ...]  # per drawn snapshot: the node that carried it
    fragmentation: AllocatorFragmentation
    focus_us: tuple[int, int] | None = None  # where the chart opens: where the bytes move; None: the whole step
    # a profile's allocator: its address space over time as the BFC model lays it out (memtrace.allocator.address_space)
    address_space: AddressSpace | None = None


@dataclass(frozen=True, eq=False)
class UnknownView:
    """An allocator whose bytes add up past int64: no curve, no peak, no live set (``unknown`` says
    why), but its waste, which needs no replay."""

    unknown: Uncounted
    fragmentation: AllocatorFragmentation  # at_peak None


@dataclass(frozen=True, eq=False)
class ReportData:
    summary: Summary
    step_duration_us: int
    allocators: tuple[AllocatorView, ...]  # largest peak first, or in the order asked for
    ops: OpsReport  # by node, sorted by the bytes each holds at the peaks (at_peak_bytes)
    anomalies: tuple[Anomaly, ...]  # trace-wide ones (each allocator's are in its fragmentation)
    unknown: tuple[UnknownView, ...] = ()  # shown first, in the order asked for (or the trace's)
    by_layer: bool = False  # the live set's icicle by phase and Keras layer rather than by name scope
    layer_names: LayerNames | None = None  # the names a layers.json gave, for by_layer
    span: str = "step"  # what times are into: "step", or "profile" for a profile of several steps
    step_marks: tuple[tuple[int, int], ...] = ()  # (step number, start in us) of each marked step, with span "profile"
    input_batch: int | None = None  # by_layer: the batch the model's layers run on, to tell the input data by


def gather(trace: TraceData, allocators: Iterable[str] | None = None, points: int = DEFAULT_POINTS,
           by_layer: bool = False, layer_names: LayerNames | None = None) -> ReportData:
    """The report's results for the named allocators (default: all of them, largest peak first).

    An allocator whose bytes add up past int64 has no replay: it is set apart in ``unknown`` (with
    its waste) and left out of the ops' ``at_peak_bytes``; the others are drawn as usual.
    """
    names = list(allocators) if allocators is not None else list(trace.allocators)
    for name in names:
        allocator_index(trace, name)  # a clear UsageError for an unknown name
    frag = fragmentations(trace, names)
    by_name = {f.allocator: f for f in frag.allocators}
    counted, unknown = split_counted(trace, names)
    views = [_view(trace, name, points, by_name[name]) for name in counted]
    if allocators is None:
        views.sort(key=lambda v: (-v.peak.peak_bytes, v.peak.allocator))
    return ReportData(
        summary=summarize(trace),
        step_duration_us=(trace.step_end_ns - trace.step_start_ns) // 1000,
        allocators=tuple(views),
        ops=ops(trace, by="node", sort="at_peak_bytes", allocators=names),
        anomalies=frag.anomalies,
        unknown=tuple(UnknownView(u, by_name[u.allocator]) for u in unknown),
        by_layer=by_layer,
        layer_names=layer_names,
        span=trace.span_name,
        step_marks=tuple((s.number, (s.start_ns - trace.step_start_ns) // 1000) for s in trace.steps)
        if trace.span_name == "profile" else (),
        input_batch=batch_size(trace, layer_names) if by_layer else None,
    )


def _view(trace: TraceData, name: str, points: int, fragmentation: AllocatorFragmentation) -> AllocatorView:
    full = timeline(trace, name)  # one point per replay event, in replay order
    everything = np.arange(len(full.time_us))
    keep = everything if len(everything) <= 2 * points else bucket_extrema(full.time_us, full.live_bytes, points)
    drawn = Timeline(full.allocator, full.source, full.baseline_bytes, full.time_us[keep], full.live_bytes[keep])
    event_nodes = tuple(trace.node_name(int(n)) for n in replay(trace, name).event_node[keep])
    snaps = snapshots(trace, name)
    count = len(snaps.time_us)
    agreeing = int(snaps.agrees.sum())
    if count > points:
        chosen = bucket_maxima(snaps.time_us, np.abs(snaps.bytes_in_use - snaps.replay_bytes), points)
        snaps = Snapshots(
            snaps.allocator, snaps.baseline_bytes, snaps.time_us[chosen], snaps.bytes_in_use[chosen],
            snaps.replay_bytes[chosen], snaps.node[chosen],
        )
    snapshot_nodes = tuple(trace.node_name(int(n)) for n in snaps.node)
    found = peak(trace, name)
    duration_us = (trace.step_end_ns - trace.step_start_ns) // 1000
    focus = focus_window(full.time_us, full.live_bytes, found.baseline_bytes or 0, found.peak_time_us, duration_us)
    return AllocatorView(
        found, drawn, len(full.time_us), event_nodes, snaps, count, agreeing, snapshot_nodes, fragmentation, focus,
        _address_space(trace, name),
    )


def _address_space(trace: TraceData, name: str) -> AddressSpace | None:
    """A profile's allocator laid out by the BFC model (its own layout where the profile starts at its
    birth); None for a StepStats trace, whose requests from the step alone say little of the layout,
    or where the requests cannot be read."""
    from ..allocator.address_space import address_space
    from ..errors import MemtraceError

    if trace.message != "XSpace":
        return None
    try:
        return address_space(trace, name)
    except MemtraceError:
        return None


FOCUS_SHARE = 0.98  # of the bytes moved (allocated plus freed) that the opening view holds


def focus_window(
    time_us: np.ndarray, live_bytes: np.ndarray, start_bytes: int, peak_time_us: int, duration_us: int
) -> tuple[int, int] | None:
    """The part of the step where the allocator's memory moves: the shortest span of events that
    holds the middle ``FOCUS_SHARE`` of the bytes allocated and freed, widened to hold the peak and
    padded by a tenth; None when that is most of the step anyway (nothing to zoom into).

    On AlexNet the GPU allocator's bytes rise and fall in the first 6 ms of a 220 ms step: drawn
    whole, the peak is squeezed into 3% of the width.
    """
    if len(time_us) < 2 or duration_us <= 0:
        return None
    moved = np.abs(np.diff(np.concatenate(([start_bytes], live_bytes.astype(np.int64)))))
    total = moved.sum()
    if total <= 0:
        return None
    share = np.cumsum(moved) / total
    cut = (1 - FOCUS_SHARE) / 2
    first = int(time_us[min(int(np.searchsorted(share, cut, side="right")), len(share) - 1)])
    last = int(time_us[min(int(np.searchsorted(share, 1 - cut)), len(share) - 1)])
    first, last = min(first, peak_time_us), max(last, peak_time_us)
    pad = max((last - first) // 10, 1)
    low, high = max(min(0, int(time_us[0])), first - pad), min(max(duration_us, int(time_us[-1])), last + pad)
    if high - low >= 0.7 * duration_us:
        return None
    return low, high
