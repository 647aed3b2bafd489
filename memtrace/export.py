"""A trace as Trace Event Format events, the JSON that Perfetto's UI and chrome://tracing open.

What goes in:

- per allocator, a process ``memory: NAME`` holding a counter of its bytes (``"ph": "C"``):
  ``baseline + live`` where the snapshots give a baseline, else live bytes relative to the step
  start; a second counter with the allocator's own snapshots; and every allocation of the replay
  as a slice (``"ph": "X"``) from its allocation to its free (or the end of the step), named
  after the node that allocated it;
- per device, a process with every op execution as a slice on it.

Times (``ts``, ``dur``) are microseconds **relative to the step start**, as everywhere in
memtrace; the absolute start is in ``otherData``. Slices on one thread never overlap: Perfetto
and the format itself require slices on a thread to nest, and buffer lifetimes and concurrent ops
do not, so overlapping slices go on further threads ("lanes") of the same process.
Perfetto ignores object events (``N``/``O``/``D``), so buffers are plain slices.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from . import __version__
from .model import IntArray, Trace
from .peak import allocation_kind
from .replay import Replay, allocator_index, reconcile, replay
from .timeline import snapshots
from .units import format_bytes

Event = dict[str, Any]


def chrome_events(trace: Trace, allocators: Iterable[str] | None = None, buffers: bool = True) -> Iterator[Event]:
    """Every event, metadata first; one pass, so a big trace need not sit in memory as dicts."""
    names = list(allocators) if allocators is not None else list(trace.allocators)
    for name in names:
        allocator_index(trace, name)
    pid = 0
    for order, name in enumerate(names):
        pid += 1
        yield from _allocator_events(trace, name, pid, order, buffers)
    canonical_first = sorted(range(len(trace.devices)), key=lambda d: (trace.devices.kind[d] != "device", d))
    for order, device in enumerate(canonical_first):
        pid += 1
        yield from _device_events(trace, device, pid, len(names) + order)


def other_data(trace: Trace) -> dict[str, str]:
    """The file's ``otherData``: where it came from and what the times are relative to."""
    return {
        "generator": f"memtrace {__version__}",
        "trace": trace.path,
        "time_origin": "step start (earliest node start)",
        "step_start_ns": str(trace.step_start_ns),
    }


def lanes(start: IntArray, end: IntArray, touching: bool = True) -> IntArray:
    """Per interval, the lowest lane free at its start, so no lane holds two overlapping intervals.

    Taking intervals by start, first fit uses as many lanes as intervals ever overlap at once.
    With ``touching``, an interval may start in a lane at the instant another one ends there.
    """
    lane = np.zeros(len(start), dtype=np.int64)
    busy: list[tuple[int, int]] = []  # (end, lane)
    free: list[int] = []
    used = 0
    for i in np.lexsort((end, start)).tolist():
        s = int(start[i])
        while busy and (busy[0][0] <= s if touching else busy[0][0] < s):
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            lane[i] = heapq.heappop(free)
        else:
            lane[i] = used
            used += 1
        heapq.heappush(busy, (max(int(end[i]), s), int(lane[i])))
    return lane


# -- allocators ---------------------------------------------------------------------------------


def _us(time_ns: IntArray, origin_ns: int) -> list[float]:
    """Nanoseconds since the epoch -> microseconds since the step start, exact to the nanosecond."""
    return [round(v, 3) for v in ((time_ns - origin_ns) / 1000).tolist()]


def _meta(kind: str, pid: int, tid: int, **args: Any) -> Event:
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": args}


def counter_name(allocator: str, baseline_bytes: int | None) -> tuple[str, str]:
    """The counter's name and its series: absolute bytes where the baseline is known."""
    return allocator, "bytes in use" if baseline_bytes is not None else "live bytes relative to step start"


def _allocator_events(trace: Trace, allocator: str, pid: int, order: int, buffers: bool) -> Iterator[Event]:
    replayed = replay(trace, allocator)
    baseline = reconcile(trace, replayed).baseline_bytes
    yield _meta("process_name", pid, 0, name=f"memory: {allocator}")
    yield _meta("process_sort_index", pid, 0, sort_index=order)
    yield _meta("thread_name", pid, 0, name="bytes")
    name, series = counter_name(allocator, baseline)
    level = baseline or 0
    origin = trace.step_start_ns
    times = replayed.time_ns
    start = min([0.0, *_us(times[:1], origin)])
    yield {"ph": "C", "name": name, "pid": pid, "tid": 0, "ts": start, "args": {series: level}}
    for t, live in zip(_us(times, origin), replayed.live_bytes.tolist()):
        yield {"ph": "C", "name": name, "pid": pid, "tid": 0, "ts": t, "args": {series: level + live}}
    taken = snapshots(trace, allocator)
    for t, value in zip(taken.time_us.tolist(), taken.bytes_in_use.tolist()):
        yield {
            "ph": "C", "name": f"{allocator} snapshots", "pid": pid, "tid": 0,
            "ts": float(t), "args": {"allocator_bytes_in_use": value},
        }
    if buffers:
        yield from _buffer_events(trace, replayed, pid, origin)


def _buffer_events(trace: Trace, replayed: Replay, pid: int, origin: int) -> Iterator[Event]:
    allocs, frees = replayed.alloc_event, replayed.free_event
    if not len(allocs):
        return
    horizon = max(trace.step_end_ns, int(replayed.time_ns[-1]))
    start = replayed.time_ns[allocs]
    end = np.where(frees >= 0, replayed.time_ns[np.maximum(frees, 0)], horizon)
    lane = lanes(start, end)
    start_us, end_us = _us(start, origin), _us(end, origin)
    sizes = replayed.delta_bytes[allocs].tolist()
    nodes = replayed.event_node[allocs].tolist()
    rows = replayed.output_row.tolist()
    for number in range(int(lane.max()) + 1):
        yield _meta("thread_name", pid, number + 1, name=f"buffers, lane {number + 1}")
        yield _meta("thread_sort_index", pid, number + 1, sort_index=number + 1)
    outputs = trace.outputs
    for allocation, free in enumerate(frees.tolist()):
        size = sizes[allocation]
        args: dict[str, Any] = {
            "bytes": size,
            "size": format_bytes(size),
            "kind": allocation_kind(trace, replayed, allocation),
            "freed_in_step": free >= 0,
        }
        row = rows[allocation]
        if row >= 0:
            args.update(
                slot=int(outputs.slot[row]),
                allocation_id=int(outputs.allocation_id[row]),
                requested_bytes=int(outputs.requested_bytes[row]),
                dtype=trace.strings[outputs.dtype[row]],
                shape=trace.output_shape(row),
            )
        ts = start_us[allocation]
        yield {
            "ph": "X", "cat": "buffer", "name": trace.node_name(nodes[allocation]),
            "pid": pid, "tid": int(lane[allocation]) + 1,
            "ts": ts, "dur": max(0.0, round(end_us[allocation] - ts, 3)), "args": args,
        }
    unpaired = replayed.unpaired_free_events
    if len(unpaired):
        tid = int(lane.max()) + 2
        yield _meta("thread_name", pid, tid, name="frees of memory from before the step")
        yield _meta("thread_sort_index", pid, tid, sort_index=tid)
        for event, ts in zip(unpaired.tolist(), _us(replayed.time_ns[unpaired], origin)):
            yield {
                "ph": "i", "s": "t", "cat": "buffer", "name": trace.node_name(int(replayed.event_node[event])),
                "pid": pid, "tid": tid, "ts": ts,
                "args": {"bytes": int(replayed.delta_bytes[event])},
            }


# -- devices ------------------------------------------------------------------------------------


def _device_events(trace: Trace, device: int, pid: int, order: int) -> Iterator[Event]:
    nodes = trace.nodes
    rows = np.flatnonzero((nodes.device == device) & (nodes.start_ns > 0))
    yield _meta("process_name", pid, 0, name=trace.devices.name[device])
    yield _meta("process_sort_index", pid, 0, sort_index=order)
    if not len(rows):
        return
    start, end = nodes.start_ns[rows], np.maximum(nodes.end_ns[rows], nodes.start_ns[rows])
    # Op times are nanoseconds, written as fractional microseconds: keep a gap between slices of
    # one lane so that no rounding by a reader can make two of them overlap.
    lane = lanes(start, end, touching=False)
    for number in range(int(lane.max()) + 1):
        yield _meta("thread_name", pid, number, name="ops" if number == 0 else f"ops, lane {number + 1}")
        yield _meta("thread_sort_index", pid, number, sort_index=number)
    origin = trace.step_start_ns
    start_us, end_us = _us(start, origin), _us(end, origin)
    strings = trace.strings
    for i, (row, op, label, thread) in enumerate(zip(
        rows.tolist(), nodes.op_type[rows].tolist(), nodes.label[rows].tolist(), nodes.thread_id[rows].tolist()
    )):
        yield {
            "ph": "X", "cat": "op", "name": trace.node_name(row), "pid": pid, "tid": int(lane[i]),
            "ts": start_us[i], "dur": max(0.0, round(end_us[i] - start_us[i], 3)),
            "args": {"op": strings[op], "label": strings[label], "thread_id": thread},
        }
