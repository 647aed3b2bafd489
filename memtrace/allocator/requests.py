"""A trace's events as the request sequence its allocator saw: what the allocator model replays.

- **A TF2 profile** (XSpace): every event of the allocator, in order, with the caller's
  ``requested_bytes``, the chunk (``allocation_bytes``, ``addr``), the bytes in use after it and
  TF's fragmentation value, kept beside the requests for the self-check (:mod:`.reproduce`). Where
  the profile starts later than the allocator's birth, the model starts from an empty allocator
  with only the profile's requests, and frees of chunks allocated before it are dropped.
- **A profile XLA recorded** (JAX): the same events from XLA's own copy of the allocator.
- **A TF1 StepStats**: ``allocation_records`` (chunk sizes, alloc and free) and outputs
  (``requested_bytes``). A request is the output's ``requested_bytes`` where the record is matched
  to an output, else the record's chunk size (an upper bound on the request, by up to the chunk's
  unsplit remainder). The step starts from an empty allocator.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UsageError
from ..trace.data import IntArray, TraceData
from .bfc import Requests


def bfc_allocators(trace: TraceData) -> list[str]:
    """The allocators ``fit`` looks at by default: every one of a profile (only BFC allocators write
    its events), else those named like BFC (``GPU_0_bfc``, ``bfc_cpu_allocator_for_gpu``) that left records."""
    if trace.message == "XSpace":
        return list(trace.allocators)
    have_records = set(np.unique(trace.records.allocator).tolist())
    return [name for index, name in enumerate(trace.allocators) if "bfc" in name.lower() and index in have_records]



@dataclass(frozen=True, eq=False)
class TraceRequests:
    """One allocator's requests as read from a trace, with the allocator's own decisions where the trace has them."""

    allocator: str
    requests: Requests
    source: str  # "profile" or "records"
    from_birth: bool
    bytes_before: int  # bytes in use before the first event (what the model leaves out)
    dropped_frees: int  # frees of chunks allocated before the trace
    assumptions: tuple[str, ...]
    # per row, from a profile (None for a StepStats): chunk address, chunk size, bytes in use after, TF's fragmentation
    addresses: IntArray | None = None
    chunk_bytes: IntArray | None = None
    bytes_in_use: IntArray | None = None
    fragmentation: np.ndarray | None = None
    # per row, the thread the event happened on (a profile's line, a StepStats node's thread_id): which events
    # ran one after another on one thread and which on others (``allocator/orders.py``); None where unknown
    threads: IntArray | None = None


def requests_for(trace: TraceData, allocator: str) -> TraceRequests:
    """The request sequence ``allocator`` saw in ``trace``; a UsageError when it made none."""
    if allocator not in trace.allocators:
        raise UsageError(f"{trace.path}: no allocator {allocator!r} in this trace (it has: "
                         f"{', '.join(trace.allocators) or 'none'})")
    index = trace.allocators.index(allocator)
    found = _from_profile(trace, allocator, index) if trace.message == "XSpace" else _from_records(trace, allocator)
    if not found.requests.is_alloc.any():
        raise UsageError(f"{trace.path}: the allocator {allocator!r} made no allocations in this trace: nothing to fit")
    return found


def _from_profile(trace: TraceData, allocator: str, index: int) -> TraceRequests:
    memory = trace.memory
    rows = np.flatnonzero(memory.allocator == index)  # one memory row per event, in event order
    nodes = memory.node[rows]
    n = len(rows)
    outputs = trace.outputs
    out_rows = np.flatnonzero(outputs.allocator == index)
    out_of_node = np.full(len(trace.nodes), -1, dtype=np.int64)
    out_of_node[outputs.node[out_rows]] = out_rows
    out = out_of_node[nodes]
    is_alloc = out >= 0
    in_use = memory.bytes_in_use[rows].astype(np.int64)
    size = np.zeros(n, dtype=np.int64)
    size[is_alloc] = outputs.allocated_bytes[out[is_alloc]]
    requested = np.zeros(n, dtype=np.int64)
    requested[is_alloc] = outputs.requested_bytes[out[is_alloc]]
    addresses = np.zeros(n, dtype=np.int64)
    addresses[is_alloc] = outputs.ptr[out[is_alloc]].astype(np.int64)
    # Each allocation's free sits as the second record of its memory row (at the free's time);
    # a free with a record of its own freed a chunk from before the profile.
    offsets = memory.record_offsets
    counts = offsets[rows + 1] - offsets[rows]
    # A free's chunk: its own record's bytes, else the drop in bytes in use it made.
    previous = np.concatenate([[0], in_use[:-1]])
    size[~is_alloc] = (previous - in_use)[~is_alloc]
    own = np.flatnonzero(~is_alloc & (counts == 1))
    size[own] = -trace.records.bytes[offsets[rows[own]]]
    from_birth = bool(n) and bool(is_alloc[0]) and int(in_use[0]) == int(size[0])
    bytes_before = int(in_use[0] - size[0]) if n and is_alloc[0] else (int(in_use[0] + size[0]) if n else 0)
    frees = np.full(n, -1, dtype=np.int64)
    freed_allocs = np.flatnonzero(is_alloc & (counts == 2))
    paired_frees = np.flatnonzero(~is_alloc & (counts == 0))
    free_time = trace.records.time_ns[offsets[rows[freed_allocs]] + 1] - trace.step_start_ns
    time_ns = trace.nodes.start_ns[nodes].astype(np.int64) - trace.step_start_ns
    a_order = np.lexsort((freed_allocs, size[freed_allocs], free_time))
    f_order = np.lexsort((paired_frees, size[paired_frees], time_ns[paired_frees]))
    a_sorted, f_sorted = freed_allocs[a_order], paired_frees[f_order]
    assumptions = []
    if len(a_sorted) != len(f_sorted) or not (
            np.array_equal(free_time[a_order], time_ns[f_sorted]) and np.array_equal(size[a_sorted], size[f_sorted])):
        raise UsageError(f"{trace.path}: the frees of {allocator!r} cannot be matched to its allocations")
    frees[f_sorted] = a_sorted
    dropped = int(np.count_nonzero(~is_alloc & (counts == 1)))
    if not from_birth:
        what = "the profile" if trace.step is None else f"step {trace.step}"
        assumptions.append(
            f"{what} starts after the allocator's birth ({bytes_before:,} bytes were in use before its first "
            f"event): the model starts from an empty allocator with only {what}'s requests"
            + (f", and drops {dropped:,} frees of chunks allocated before it" if dropped else ""))
    ops = _op_codes(trace, nodes, is_alloc)
    return TraceRequests(
        allocator=allocator,
        requests=Requests(is_alloc, requested, frees, ops[0], time_ns, ops[1]),
        source="profile", from_birth=from_birth, bytes_before=bytes_before, dropped_frees=dropped,
        assumptions=tuple(assumptions), addresses=addresses, chunk_bytes=size, bytes_in_use=in_use,
        fragmentation=memory.fragmentation[rows].astype(np.float64),
        threads=trace.nodes.thread_id[nodes].astype(np.int64),
    )


def _op_codes(trace: TraceData, nodes: np.ndarray, is_alloc: np.ndarray) -> tuple[np.ndarray, tuple[str, ...]]:
    names = trace.nodes.name[nodes]
    distinct, codes = np.unique(names, return_inverse=True)
    op_names = tuple(trace.strings[int(s)] for s in distinct)
    codes = np.where(is_alloc, codes, -1).astype(np.int32)
    return codes, op_names


def _from_records(trace: TraceData, allocator: str) -> TraceRequests:
    from ..trace.buffers import buffers

    flow = buffers(trace)
    allocations = flow.allocations(allocator)
    if allocations.source != "records":
        raise UsageError(f"{trace.path}: the allocator {allocator!r} left no allocation records, so the order of its "
                         "requests is unknown: nothing to fit")
    n = len(allocations.delta_bytes)
    delta = allocations.delta_bytes.astype(np.int64)
    is_alloc = delta > 0
    requested = np.where(is_alloc, delta, 0)
    frees = np.full(n, -1, dtype=np.int64)
    paired = allocations.free_event >= 0
    frees[allocations.free_event[paired]] = allocations.alloc_event[paired]
    with_output = allocations.output_row >= 0
    asked = trace.outputs.requested_bytes[allocations.output_row[with_output]]
    ev = allocations.alloc_event[with_output]
    requested[ev] = np.where((asked > 0) & (asked <= delta[ev]), asked, delta[ev])
    dropped = len(allocations.unpaired_free_events)
    guessed = int(np.count_nonzero(is_alloc)) - int(np.count_nonzero(with_output))
    ops = _op_codes(trace, allocations.event_node, is_alloc)
    notes = ["a StepStats trace starts after the allocator's birth: the model starts from an empty allocator with "
             "only the step's requests (what was in use before the step is left out)"
             + (f", and drops {dropped:,} frees of chunks allocated before the step" if dropped else "")]
    if guessed:
        notes.append(f"{guessed:,} of the allocations match no output, so their chunk size (from allocation_records) "
                     "stands for the request")
    return TraceRequests(allocator=allocator, requests=Requests(is_alloc, requested, frees, ops[0],
                         allocations.time_ns.astype(np.int64) - trace.step_start_ns, ops[1]),
                         source="records", from_birth=False, bytes_before=0, dropped_frees=dropped,
                         assumptions=tuple(notes),
                         threads=trace.nodes.thread_id[allocations.event_node].astype(np.int64))
