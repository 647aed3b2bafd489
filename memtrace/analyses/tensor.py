"""One buffer's story: who created it, who forwarded it, who read it, when it lived, and whether
it was live at its allocator's peak.

A buffer is named ``ALLOCATOR:ALLOCATION_ID`` (``GPU_0_bfc:183``) or ``NODE:SLOT``
(``conv1/Conv2D:0``; a bare ``NODE`` means slot 0). Naming an alias (``conv1:0`` when ``conv1``
forwarded ``conv1/Conv2D``'s output) tells the story of the buffer it aliases. A node that
executed several times (while loops) is taken at its first execution.

Times come from the allocator's replay: its allocation records when the creator's allocation was
matched to the buffer (``source: "records"``), or the output-lifetime replay for allocators
without records (``"outputs"``). A buffer that no allocation of the step holds (a variable made
before the step, counted in the baseline) is ``"unrecorded"``: no dates, liveness unknown. An
output that names no allocator is dated by the dataflow alone (``"dataflow"``: its creator's
start to the end of its last use).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

import numpy as np

from ..errors import UsageError
from ..trace.buffers import Buffers, buffers
from ..trace.data import TraceData
from ..trace.replay import Replay, replay


@dataclass(frozen=True)
class Endpoint:
    node: str
    slot: int


@dataclass(frozen=True)
class Consumer:
    node: str
    start_us: int  # start of the consumer's first execution that reads the buffer, from the step start


@dataclass(frozen=True)
class BufferStory:
    allocator: str | None  # None when the output named no allocator
    allocation_id: int | None  # None when the allocator does not track ids
    producer: Endpoint  # the op whose output created the buffer
    aliases: tuple[Endpoint, ...]  # outputs of later ops that are this same buffer, in time order
    consumers: tuple[Consumer, ...]  # ops reading the buffer or any alias, earliest first
    op_type: str
    requested_bytes: int
    allocated_bytes: int
    dtype: str | None
    shape: list[int] | None
    ptr: int
    alloc_time_us: int | None  # relative to the step start; None when no allocation of the step holds it
    free_time_us: int | None  # None: not freed within the step (or not known, see ``source``)
    source: str  # "records", "outputs", "dataflow" (no allocator) or "unrecorded"
    live_at_peak: bool | None  # None when it cannot be told (no allocator, or no allocation of the step)
    peak_time_us: int | None  # the allocator's peak, for reference
    executions: int  # how many times the producer ran in the step

    @property
    def lifetime_us(self) -> int | None:
        if self.free_time_us is None or self.alloc_time_us is None:
            return None
        return self.free_time_us - self.alloc_time_us


def buffer_story(trace: TraceData, name: str) -> BufferStory:
    """The story of the buffer named ``ALLOCATOR:ALLOCATION_ID`` or ``NODE:SLOT``."""
    flow = buffers(trace)
    return _story(trace, flow, int(flow.buffer_of_output[_find_output(trace, flow, name)]))


def _find_output(trace: TraceData, flow: Buffers, name: str) -> int:
    """The Outputs row the name designates, or a UsageError that says what the trace does have."""
    head, sep, tail = name.rpartition(":")
    if not sep or not tail.isdigit():
        head, tail = name, "0"
    number = int(tail)
    outputs, strings = trace.outputs, trace.strings
    if head in trace.allocators:
        rows = np.flatnonzero((outputs.allocator == trace.allocator_index(head)) & (outputs.allocation_id == number))
        buffers = list(dict.fromkeys(flow.buffer_of_output[rows].tolist()))
        if not buffers:
            raise UsageError(f"{trace.path}: no buffer {name!r}: no output of {head} has allocation id {number}")
        if len(buffers) > 1:
            named = ", ".join(_endpoint_name(trace, flow.creator(b)) for b in buffers[:5])
            more = f" and {len(buffers) - 5} more" if len(buffers) > 5 else ""
            raise UsageError(
                f"{trace.path}: {name!r} names {len(buffers)} buffers ({head} reuses allocation ids); "
                f"name one as NODE:SLOT: {named}{more}"
            )
        return flow.creator(buffers[0])
    index = _string_index(trace, head)
    if index is None or index not in flow.executions:
        ops = [strings[n] for n in flow.executions]
        close = difflib.get_close_matches(head, ops, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UsageError(
            f"{trace.path}: no buffer {name!r}: it is neither ALLOCATOR:ID (allocators: "
            f"{', '.join(trace.allocators) or 'none'}) nor NODE:SLOT of an op in the trace{hint}"
        )
    executions = list(flow.executions[index])
    for node in executions:
        rows = np.flatnonzero((outputs.node == node) & (outputs.slot == number))
        if len(rows):
            return int(rows[0])
    slots = sorted(set(outputs.slot[np.isin(outputs.node, executions)].tolist()))
    have = f"outputs at slots {', '.join(map(str, slots))}" if slots else "no outputs in the trace"
    raise UsageError(f"{trace.path}: no buffer {name!r}: {head} has {have}")


def _string_index(trace: TraceData, text: str) -> int | None:
    try:
        return trace.strings.index(text)
    except ValueError:
        return None


def _endpoint_name(trace: TraceData, row: int) -> str:
    return f"{trace.node_name(int(trace.outputs.node[row]))}:{int(trace.outputs.slot[row])}"


def _endpoint(trace: TraceData, row: int) -> Endpoint:
    return Endpoint(trace.node_name(int(trace.outputs.node[row])), int(trace.outputs.slot[row]))


def _story(trace: TraceData, flow: Buffers, buffer: int) -> BufferStory:
    outputs, nodes, strings = trace.outputs, trace.nodes, trace.strings
    creator = flow.creator(buffer)
    producer_node = int(outputs.node[creator])
    origin = trace.step_start_ns
    allocator = int(outputs.allocator[creator])
    allocation_id = int(outputs.allocation_id[creator])

    # Without an allocator the dataflow alone dates the buffer: its creator's start to its last use.
    alloc_ns: int | None = int(nodes.start_ns[producer_node])
    free_ns: int | None = flow.last_use_ns(buffer)
    source, live_at_peak, peak_time_us = "dataflow", None, None
    if allocator >= 0:
        replayed = replay(trace, trace.allocators[allocator])
        at = replayed.peak_event()
        if at is not None:
            peak_time_us = (int(replayed.time_ns[at]) - origin) // 1000
        allocation = _allocation_of(replayed, creator)
        if allocation is None:
            # No allocation of the step holds it: made before the step (a variable), so part of
            # the baseline, or a record memtrace could not match. Either way, no dates to give.
            source, alloc_ns, free_ns = "unrecorded", None, None
        else:
            source = replayed.source
            event, free = int(replayed.alloc_event[allocation]), int(replayed.free_event[allocation])
            alloc_ns = int(replayed.time_ns[event])
            free_ns = int(replayed.time_ns[free]) if free >= 0 else None
            live_at_peak = bool(at is not None and replayed.alive_after(at)[allocation])

    return BufferStory(
        allocator=trace.allocators[allocator] if allocator >= 0 else None,
        allocation_id=allocation_id or None,
        producer=_endpoint(trace, creator),
        aliases=tuple(_endpoint(trace, row) for row in flow.chain(buffer)[1:]),
        consumers=tuple(
            Consumer(strings[name], (int(nodes.start_ns[node]) - origin) // 1000) for name, node in flow.buffer_consumers(buffer)
        ),
        op_type=strings[nodes.op_type[producer_node]],
        requested_bytes=int(outputs.requested_bytes[creator]),
        allocated_bytes=int(outputs.allocated_bytes[creator]),
        dtype=strings[outputs.dtype[creator]] or None,
        shape=trace.output_shape(creator),
        ptr=int(outputs.ptr[creator]),
        alloc_time_us=(alloc_ns - origin) // 1000 if alloc_ns is not None else None,
        free_time_us=(free_ns - origin) // 1000 if free_ns is not None else None,
        source=source,
        live_at_peak=live_at_peak,
        peak_time_us=peak_time_us,
        executions=len(flow.executions.get(int(nodes.name[producer_node]), ())),
    )


def _allocation_of(replayed: Replay, row: int) -> int | None:
    found = np.flatnonzero(replayed.output_row == row)
    return int(found[0]) if len(found) else None
