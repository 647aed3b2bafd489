"""A trace as Trace Event Format events, the JSON that Perfetto's UI and chrome://tracing open.

What goes in:

- per allocator, a process ``memory: NAME`` holding a counter of its bytes (``"ph": "C"``):
  ``baseline + live`` where the snapshots give a baseline, else live bytes relative to the step
  start; a second counter with the allocator's own snapshots; and every allocation of the replay
  as a slice (``"ph": "X"``) from its allocation to its free (or the end of the step), named
  after the node that allocated it;
- per device, a process with every op execution as a slice on it.

An allocator whose bytes add up past int64 has no replay, so no counter and no buffers: it is
left out (:func:`exported_allocators`), and ``otherData`` says so.

Times (``ts``, ``dur``) are microseconds **relative to the step start**, as everywhere in
memtrace; the absolute start is in ``otherData``. Slices on one thread never overlap: Perfetto
and the format itself require slices on a thread to nest, and buffer lifetimes and concurrent ops
do not, so overlapping slices go on further threads ("lanes") of the same process.
Perfetto ignores object events (``N``/``O``/``D``), so buffers are plain slices.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..trace.data import Int32Array, IntArray, TraceData
from ..trace.replay import Replay, Uncounted, allocator_index, reconcile, replay, split_counted
from ..units import format_bytes
from ..version import __version__
from .peak import allocation_kinds, peaks_and_unknown
from .timeline import snapshots

Event = dict[str, Any]
_RUN = 16384  # like events given as one set of columns


class Column(list):  # type: ignore[type-arg]
    """One field's values, one per event of an :class:`EventColumns`."""


@dataclass
class EventColumns:
    """``count`` events of one shape, as columns: a big trace's events need not exist as dicts.

    ``fields`` (the keys before ``args``) and ``args`` are in the order written; each value is
    a constant shared by every event or a :class:`Column`. ``extra_args`` are args that only
    the events at ``extra_rows`` (ascending) carry, after the others; their columns hold one
    value per such event.
    """

    count: int
    fields: dict[str, Any]
    args: dict[str, Any]
    extra_rows: list[int] = field(default_factory=list)
    extra_args: dict[str, Column] = field(default_factory=dict)

    def events(self) -> Iterator[Event]:
        """The same events as dicts."""
        extra = dict(zip(self.extra_rows, _rows(self.extra_args.values(), len(self.extra_rows))))
        for i, (values, args) in enumerate(zip(_rows(self.fields.values(), self.count),
                                               _rows(self.args.values(), self.count))):
            event = dict(zip(self.fields, values))
            event["args"] = dict(zip(self.args, args))
            if i in extra:
                event["args"].update(zip(self.extra_args, extra[i]))
            yield event


def _rows(values: Iterable[Any], count: int) -> Iterator[tuple[Any, ...]]:
    """Per event, its values in order (constants repeated)."""
    columns = [value if isinstance(value, Column) else itertools.repeat(value, count) for value in values]
    return zip(*columns) if columns else itertools.repeat((), count)


def chrome_events(trace: TraceData, allocators: Iterable[str] | None = None, buffers: bool = True) -> Iterator[Event]:
    """Every event as a dict, metadata first (see :func:`chrome_event_groups`)."""
    for group in chrome_event_groups(trace, allocators, buffers):
        if isinstance(group, EventColumns):
            yield from group.events()
        else:
            yield group


def exported_allocators(trace: TraceData, allocators: Iterable[str] | None = None) -> tuple[list[str], list[Uncounted]]:
    """The allocators whose memory is exported (the named ones in the order given, or all of them,
    largest peak first, as every command lists allocators), and apart those left out because their
    bytes add up past int64 (no replay to draw)."""
    if allocators is None:
        found, unknown = peaks_and_unknown(trace)
        return [p.allocator for p in found], unknown
    names = list(allocators)
    for name in names:
        allocator_index(trace, name)
    return split_counted(trace, names)


def chrome_event_groups(trace: TraceData, allocators: Iterable[str] | None = None,
                        buffers: bool = True) -> Iterator[Event | EventColumns]:
    """Every event, metadata first, single events as dicts and runs of like events as columns.

    The allocators are those of :func:`exported_allocators`: one beyond int64 is left out.
    """
    names, _ = exported_allocators(trace, allocators)
    pid = 0
    for order, name in enumerate(names):
        pid += 1
        yield from _allocator_events(trace, name, pid, order, buffers)
    canonical_first = sorted(range(len(trace.devices)), key=lambda d: (trace.devices.kind[d] != "device", d))
    for order, device in enumerate(canonical_first):
        pid += 1
        yield from _device_events(trace, device, pid, len(names) + order)


def other_data(trace: TraceData, left_out: Sequence[Uncounted] = ()) -> dict[str, str]:
    """The file's ``otherData``: where it came from and what the times are relative to; and, only
    where there are any, the allocators ``left_out`` (bytes beyond int64) and why."""
    data = {
        "generator": f"memtrace {__version__}",
        "trace": trace.path,
        "time_origin": "step start (earliest node start)",
        "step_start_ns": str(trace.step_start_ns),
    }
    if left_out:
        data["left_out"] = "; ".join(f"{u.allocator}: its live bytes are unknown ({u.reason})" for u in left_out)
    return data


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
    """Nanoseconds since the epoch -> microseconds since the step start, exact to the nanosecond.

    A whole number of nanoseconds divided by 1000 is the float nearest the exact quotient (the
    division is correctly rounded), which is what rounding to three decimals would give.
    """
    return ((time_ns - origin_ns) / 1000).tolist()


def _durations_us(start_ns: IntArray, end_ns: IntArray) -> list[float]:
    """End minus start in microseconds (never negative), exact to the nanosecond like :func:`_us`."""
    return (np.maximum(end_ns - start_ns, 0) / 1000).tolist()


def _spans(count: int) -> Iterator[slice]:
    """The events of a run, ``_RUN`` at a time: so the columns of only one part exist as objects."""
    return (slice(first, min(first + _RUN, count)) for first in range(0, count, _RUN))


def _meta(kind: str, pid: int, tid: int, **args: Any) -> Event:
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": args}


def counter_name(allocator: str, baseline_bytes: int | None) -> tuple[str, str]:
    """The counter's name and its series: absolute bytes where the baseline is known."""
    return allocator, "bytes in use" if baseline_bytes is not None else "live bytes relative to step start"


def _allocator_events(trace: TraceData, allocator: str, pid: int, order: int, buffers: bool) -> Iterator[Event | EventColumns]:
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
    for span in _spans(len(times)):
        yield EventColumns(span.stop - span.start,
                           {"ph": "C", "name": name, "pid": pid, "tid": 0, "ts": Column(_us(times[span], origin))},
                           {series: Column((level + replayed.live_bytes[span]).tolist())})
    taken = snapshots(trace, allocator)
    for span in _spans(len(taken.time_us)):
        yield EventColumns(span.stop - span.start,
                           {"ph": "C", "name": f"{allocator} snapshots", "pid": pid, "tid": 0,
                            "ts": Column(map(float, taken.time_us[span].tolist()))},
                           {"allocator_bytes_in_use": Column(taken.bytes_in_use[span].tolist())})
    if buffers:
        yield from _buffer_events(trace, replayed, pid, origin)


def _buffer_events(trace: TraceData, replayed: Replay, pid: int, origin: int) -> Iterator[Event | EventColumns]:
    allocs, frees = replayed.alloc_event, replayed.free_event
    if not len(allocs):
        return
    horizon = max(trace.step_end_ns, int(replayed.time_ns[-1]))
    start = replayed.time_ns[allocs]
    end = np.where(frees >= 0, replayed.time_ns[np.maximum(frees, 0)], horizon)
    lane = lanes(start, end)
    for number in range(int(lane.max()) + 1):
        yield _meta("thread_name", pid, number + 1, name=f"buffers, lane {number + 1}")
        yield _meta("thread_sort_index", pid, number + 1, sort_index=number + 1)
    outputs = trace.outputs
    size_texts: dict[int, str] = {}
    for span in _spans(len(allocs)):
        sizes = replayed.delta_bytes[allocs[span]].tolist()
        with_output = np.flatnonzero(replayed.output_row[span] >= 0)
        rows = replayed.output_row[span][with_output]
        yield EventColumns(
            span.stop - span.start,
            {"ph": "X", "cat": "buffer", "name": Column(_node_names(trace, replayed.event_node[allocs[span]])),
             "pid": pid, "tid": Column((lane[span] + 1).tolist()), "ts": Column(_us(start[span], origin)),
             "dur": Column(_durations_us(start[span], end[span]))},
            {"bytes": Column(sizes),
             "size": Column(size_texts.get(size) or size_texts.setdefault(size, format_bytes(size)) for size in sizes),
             "kind": Column(allocation_kinds(trace, replayed, np.arange(span.start, span.stop))),
             "freed_in_step": Column((frees[span] >= 0).tolist())},
            extra_rows=with_output.tolist(),
            extra_args={"slot": Column(outputs.slot[rows].tolist()),
                        "allocation_id": Column(outputs.allocation_id[rows].tolist()),
                        "requested_bytes": Column(outputs.requested_bytes[rows].tolist()),
                        "dtype": Column(map(trace.strings.__getitem__, outputs.dtype[rows].tolist())),
                        "shape": Column(trace.output_shapes(rows))},
        )
    unpaired = replayed.unpaired_free_events
    if len(unpaired):
        tid = int(lane.max()) + 2
        yield _meta("thread_name", pid, tid, name="frees of memory from before the step")
        yield _meta("thread_sort_index", pid, tid, sort_index=tid)
        for span in _spans(len(unpaired)):
            events = unpaired[span]
            yield EventColumns(
                len(events),
                {"ph": "i", "s": "t", "cat": "buffer", "name": Column(_node_names(trace, replayed.event_node[events])),
                 "pid": pid, "tid": tid, "ts": Column(_us(replayed.time_ns[events], origin))},
                {"bytes": Column(replayed.delta_bytes[events].tolist())},
            )


def _node_names(trace: TraceData, nodes: IntArray | Int32Array) -> list[str]:
    return list(map(trace.strings.__getitem__, trace.nodes.name[nodes].tolist()))


# -- devices ------------------------------------------------------------------------------------


def _device_events(trace: TraceData, device: int, pid: int, order: int) -> Iterator[Event | EventColumns]:
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
    strings = trace.strings
    for span in _spans(len(rows)):
        run = rows[span]
        yield EventColumns(
            len(run),
            {"ph": "X", "cat": "op", "name": Column(_node_names(trace, run)), "pid": pid, "tid": Column(lane[span].tolist()),
             "ts": Column(_us(start[span], origin)), "dur": Column(_durations_us(start[span], end[span]))},
            {"op": Column(map(strings.__getitem__, nodes.op_type[run].tolist())),
             "label": Column(map(strings.__getitem__, nodes.label[run].tolist())),
             "thread_id": Column(nodes.thread_id[run].tolist())},
        )
