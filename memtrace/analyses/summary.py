"""What is in a trace: devices, time span, and for every allocator what evidence it left.

The first thing to run on an unfamiliar trace: it says how high each allocator went (its peak, as
``memtrace peak`` finds it, largest first), which allocators have allocation records (so a peak
can be replayed exactly), which have snapshots to check it against, and which only describe
output buffers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..trace.buffers import buffers
from ..trace.data import Oddity, TraceData
from ..trace.replay import reconcile, replay, uncounted
from .peak import peak


@dataclass(frozen=True)
class DeviceSummary:
    name: str
    kind: str  # "device", "stream", "memcpy" or "other"
    nodes: int


@dataclass(frozen=True)
class AllocatorSummary:
    allocator: str
    records: int
    allocations: int
    frees: int
    snapshots: int  # allocator_bytes_in_use snapshots (nonzero values in a StepStats)
    outputs: int  # output rows naming this allocator
    buffers: int  # buffers created on this allocator, as frag and the dataflow count them (aliases once)
    sizes_tracked: str  # "yes", "partly" or "no": whether outputs carry allocated_bytes
    source: str  # "records" when a replay is possible, else "outputs" (buffer lifetimes), as ``memtrace peak`` says
    # memtrace.analyses.peak's numbers: absolute where a baseline is known; None where the allocator's
    # bytes add up past int64 (the bytes-beyond-int64 oddity), so no running total can be trusted
    peak_bytes: int | None = 0
    peak_delta_bytes: int | None = 0
    peak_time_us: int | None = None  # relative to the step start; None when it never rises
    peak_node: str | None = None
    unknown: str | None = None  # why the peak is None: "beyond int64: its records add up to 1.38e+19 bytes"


@dataclass(frozen=True)
class StepSummary:
    """One step a profile marks: its window (from the profile's start) and each allocator's peak in it."""

    step: int
    start_us: int  # relative to the trace's start
    duration_us: int
    peak_bytes: dict[str, int | None]  # per allocator, absolute: the most in use at any moment of the step


@dataclass(frozen=True)
class Summary:
    path: str
    source_format: str
    message: str
    step_start_ns: int
    duration_ns: int
    nodes: int
    outputs: int
    devices: tuple[DeviceSummary, ...]
    allocators: tuple[AllocatorSummary, ...]
    graph_source: str | None
    graph_nodes: int
    oddities: tuple[Oddity, ...]
    steps: tuple[StepSummary, ...] = ()  # the steps a profile (XSpace) marks; () for a StepStats
    step: int | None = None  # the step the trace was restricted to, if any


def summarize(trace: TraceData) -> Summary:
    """Counts and facts of one trace, with no interpretation beyond classification."""
    node_counts = np.bincount(trace.nodes.device, minlength=len(trace.devices))
    devices = tuple(
        DeviceSummary(name, kind, int(count))
        for name, kind, count in zip(trace.devices.name, trace.devices.kind, node_counts)
    )
    found = [_with_peak(trace, _allocator_summary(trace, index)) for index in range(len(trace.allocators))]
    # largest peak first; an unknown peak (beyond int64) first of all
    allocators = tuple(sorted(found, key=lambda a: (a.peak_bytes is not None, -(a.peak_bytes or 0), a.allocator)))
    return Summary(
        path=trace.path,
        source_format=trace.source_format,
        message=trace.message,
        step_start_ns=trace.step_start_ns,
        duration_ns=trace.step_end_ns - trace.step_start_ns,
        nodes=len(trace.nodes),
        outputs=len(trace.outputs),
        devices=devices,
        allocators=allocators,
        graph_source=trace.graph_source,
        graph_nodes=len(trace.graph) if trace.graph is not None else 0,
        oddities=trace.oddities,
        steps=tuple(step_peaks(trace)),
        step=trace.step,
    )


def _with_peak(trace: TraceData, found: AllocatorSummary) -> AllocatorSummary:
    """The allocator's peak as ``memtrace peak`` finds it, and the source it was found from; unknown
    (None) where its bytes add up past int64."""
    unknown = uncounted(trace, found.allocator)
    if unknown is not None:
        return replace(found, peak_bytes=None, peak_delta_bytes=None, unknown=unknown.reason)
    p = peak(trace, found.allocator)
    return replace(
        found, source=p.source, peak_bytes=p.peak_bytes, peak_delta_bytes=p.peak_delta_bytes,
        peak_time_us=p.peak_time_us if p.peak_node is not None else None, peak_node=p.peak_node,
    )


def step_peaks(trace: TraceData) -> list[StepSummary]:
    """Each marked step's peak per allocator, from the whole trace's replay.

    In a step's window the most in use is the baseline plus the larger of the replay just
    before the window and its maximum inside it: what the allocator's own peak counter says
    when it is reset as the step begins.
    """
    origin = trace.step_start_ns
    found = []
    if not trace.steps:
        return []
    replays = [(name, None if uncounted(trace, name) else replay(trace, name)) for name in trace.allocators]
    baselines = [(reconcile(trace, replayed).baseline_bytes or 0) if replayed is not None else 0 for _, replayed in replays]
    for step in trace.steps:
        if trace.step is not None and step.number != trace.step:
            continue  # the trace holds that one step's events only
        peaks: dict[str, int | None] = {}
        for (name, replayed), baseline in zip(replays, baselines):
            if replayed is None:
                peaks[name] = None
                continue
            before = int(np.searchsorted(replayed.time_ns, step.start_ns, side="left"))
            after = int(np.searchsorted(replayed.time_ns, step.end_ns, side="right"))
            live = replayed.live_bytes
            highest = int(live[before - 1]) if before else 0
            if after > before:
                highest = max(highest, int(live[before:after].max()))
            peaks[name] = baseline + highest
        found.append(StepSummary(step.number, (step.start_ns - origin) // 1000, (step.end_ns - step.start_ns) // 1000, peaks))
    return found


def _allocator_summary(trace: TraceData, index: int) -> AllocatorSummary:
    record_bytes = trace.records.bytes[trace.records.allocator == index]
    memory = trace.memory.allocator == index
    outputs = trace.outputs.allocator == index
    tracked = int(np.count_nonzero(trace.outputs.allocated_bytes[outputs] > 0))
    total = int(np.count_nonzero(outputs))
    return AllocatorSummary(
        allocator=trace.allocators[index],
        records=len(record_bytes),
        allocations=int(np.count_nonzero(record_bytes > 0)),
        frees=int(np.count_nonzero(record_bytes < 0)),
        snapshots=int(np.count_nonzero(trace.memory.has_snapshot[memory])),
        outputs=total,
        buffers=len(buffers(trace).owned_outputs(index)),
        sizes_tracked="no" if tracked == 0 else ("yes" if tracked == total else "partly"),
        source="records" if len(record_bytes) else ("outputs" if total else "none"),
    )
