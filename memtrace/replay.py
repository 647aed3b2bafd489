"""Replaying one allocator's allocations into a live-bytes timeline, with every allocation paired.

Records mode (the allocator left ``allocation_records``): all records of the allocator, ordered
by time with ties kept in trace order, summed cumulatively from 0; that curve is live bytes
relative to the step start. Allocations and frees are paired within one node's records of one
allocator, by size; among same-size allocations a free takes the most recent one (temporary
buffers are stack-like), and a free that finds no allocation freed memory from before the step.
Each allocation that survives its node is matched, by size, to one of the output buffers the
node created (not forwarded), so the live set can say what the bytes are; among same-size
outputs the dataflow decides, since an output is freed only after its last reader's kernel.

Outputs mode (no records, e.g. host allocators): each output buffer is live from its producer's
start to the end of the last reader of the buffer or of any alias of it (``dataflow``), or its
producer's end when nothing reads it. Allocations come before frees at equal times, so the
peak is an upper bound.

Baseline: where the allocator left ``allocator_bytes_in_use`` snapshots (taken when a node's op
ended), ``snapshot - replay(at that time)`` for each; the most common value is the baseline,
the bytes already live when the step began. How many snapshots agree is the reconciliation.
"""

from __future__ import annotations

import weakref
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .dataflow import dataflow
from .errors import UsageError
from .model import Int32Array, IntArray, Trace

_WALK_AT_MOST = 256  # shared-size outputs whose last reads are walked one by one rather than all computed


@dataclass(frozen=True, eq=False)
class Replay:
    """One allocator's events in replay order and its paired allocations.

    Events are records (records mode) or synthetic output-lifetime events (outputs mode).
    Allocations are the positive events; ``alloc_event``/``free_event`` index the event arrays.
    """

    allocator: str
    source: str  # "records" or "outputs"
    time_ns: IntArray  # per event, non-decreasing
    delta_bytes: IntArray  # per event; negative for a free
    live_bytes: IntArray  # per event: cumulative bytes after it, relative to the step start
    event_node: Int32Array  # per event: the node whose record (or output) it is
    alloc_event: IntArray  # per allocation: its event position
    free_event: IntArray  # per allocation: its free's event position, -1 if never freed
    output_row: IntArray  # per allocation: the Outputs row it holds, -1 when unknown
    unpaired_free_events: IntArray  # frees of memory allocated before the step

    def __post_init__(self) -> None:
        # Replays are cached per trace and shared by every analysis: nobody may change one.
        for value in vars(self).values():
            if isinstance(value, np.ndarray):
                value.flags.writeable = False

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


def allocator_index(trace: Trace, allocator: str) -> int:
    """The allocator's index, or a UsageError that lists the allocators the trace does have."""
    try:
        return trace.allocator_index(allocator)
    except ValueError:
        have = ", ".join(trace.allocators) or "none"
        raise UsageError(f"{trace.path}: no allocator {allocator!r} in this trace (it has: {have})") from None


_replayed: weakref.WeakKeyDictionary[Trace, dict[str, Replay]] = weakref.WeakKeyDictionary()


def replay(trace: Trace, allocator: str) -> Replay:
    """The allocator's replay: from its records when it has any, else from output lifetimes.

    Built once per trace and allocator (peak, frag, ops, the report and the export all ask).
    """
    done = _replayed.setdefault(trace, {})
    if allocator not in done:
        index = allocator_index(trace, allocator)
        rows = np.flatnonzero(trace.records.allocator == index)
        done[allocator] = _replay_records(trace, allocator, rows) if len(rows) else _replay_outputs(trace, allocator, index)
    return done[allocator]


def reconcile(trace: Trace, replayed: Replay) -> Reconciliation:
    """Check the replay against ``allocator_bytes_in_use`` snapshots and derive the baseline."""
    index = trace.allocator_index(replayed.allocator)
    memory = trace.memory
    taken = np.flatnonzero((memory.allocator == index) & (memory.bytes_in_use != 0))
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
        return Reconciliation(len(taken), 0, int(np.abs(implied).max()), None)
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
    )


# -- records mode -------------------------------------------------------------------------------


def _replay_records(trace: Trace, allocator: str, rows: IntArray) -> Replay:
    records = trace.records
    # Ties in time keep trace order: rows are ascending, and the sort is stable.
    order = rows[np.argsort(records.time_ns[rows], kind="stable")]
    delta = records.bytes[order]
    event_node = records.node[order]
    time_ns = records.time_ns[order]
    # Event positions as int32 halve the largest temporaries (a trace has far fewer than 2^31 records).
    position = np.empty(len(records), dtype=np.int32)
    position[order] = np.arange(len(order), dtype=np.int32)
    positions = position[rows]
    del position, order

    allocs, frees, unpaired = pair_lifo(records.memory[rows], positions, records.bytes[rows])
    del positions
    return Replay(
        allocator=allocator,
        source="records",
        time_ns=time_ns,
        delta_bytes=delta,
        live_bytes=np.cumsum(delta),
        event_node=event_node,
        alloc_event=allocs,
        free_event=frees,
        output_row=_match_outputs(trace, trace.allocator_index(allocator), allocs, frees, time_ns, delta, event_node),
        unpaired_free_events=unpaired,
    )


def pair_lifo(entries: Int32Array, events: Int32Array, sizes: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """Pair frees with allocations: within one memory entry and one size, a free takes the most recent open one.

    Per record: its memory entry, its event position (distinct) and its bytes (negative for a
    free; zero is neither). Returns the allocations' events (ascending), each one's free event
    (-1 when never freed) and the events of frees that found nothing open (ascending).

    A stack per (entry, size), without walking it: the stack's depth is the running sum of
    +1 (allocation) and -1 (free) floored at zero, and at each depth pushes and pops alternate,
    so a free's allocation is the last push to the depth the free pops from.
    """
    # Each temporary is dropped as soon as it is spent: on a 1 GB trace each is tens of MB.
    real = np.flatnonzero(sizes != 0)
    entries, events, sizes = entries[real], events[real], sizes[real]
    del real
    magnitude = np.abs(sizes)
    order = np.lexsort((events, magnitude, entries))  # by stack, then in replay order
    entries, events, magnitude = entries[order], events[order], magnitude[order]
    step = np.where(sizes[order] > 0, 1, -1).astype(np.int64)
    del sizes, order
    n = len(events)
    if not n:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty.copy(), empty.copy()
    first = np.ones(n, dtype=np.bool_)  # the first record of each stack
    first[1:] = (entries[1:] != entries[:-1]) | (magnitude[1:] != magnitude[:-1])
    del entries, magnitude
    stack = np.cumsum(first) - 1
    starts = np.flatnonzero(first)
    height = np.cumsum(step)
    height -= (height[starts] - step[starts])[stack]  # the running sum within the stack
    # Its running minimum within the stack: offsetting earlier stacks upwards keeps them out of it.
    offset = (len(starts) - 1 - stack) * (2 * n + 1)
    floor = np.minimum.accumulate(height + offset)
    floor -= offset
    del offset
    depth = height - np.minimum(floor, 0)  # after each record
    del height, floor
    depth_before = np.empty_like(depth)
    depth_before[1:] = depth[:-1]
    depth_before[starts] = 0
    is_alloc = step > 0
    del step, starts
    unpaired = np.flatnonzero(~is_alloc & (depth_before == 0))
    paired = np.flatnonzero(is_alloc | (depth_before > 0))
    level = np.where(is_alloc, depth, depth_before)[paired]
    del depth, depth_before
    by_level = paired[np.lexsort((level, stack[paired]))]  # stable: replay order within a level
    del level, paired, stack
    frees_sorted = np.flatnonzero(~is_alloc[by_level])
    free_rows, alloc_rows = by_level[frees_sorted], by_level[frees_sorted - 1]
    del by_level, frees_sorted
    free_of = np.full(n, -1, dtype=np.int64)
    free_of[alloc_rows] = events[free_rows]
    del free_rows, alloc_rows
    alloc_rows = np.flatnonzero(is_alloc)
    alloc_rows = alloc_rows[np.argsort(events[alloc_rows])]
    return (events[alloc_rows].astype(np.int64), free_of[alloc_rows],
            np.sort(events[unpaired]).astype(np.int64))


def owned_outputs(trace: Trace, allocator_index: int) -> IntArray:
    """Output rows on this allocator that created their buffer rather than forwarding one (see ``dataflow``)."""
    return dataflow(trace).owned_outputs(allocator_index)


def _pair_keys(
    out_node: npt.NDArray[np.integer], out_size: IntArray, cand_node: npt.NDArray[np.integer], cand_size: IntArray
) -> tuple[IntArray, IntArray]:
    """One int64 key per (node, size), equal exactly when both are; sizes are below 2^40 in practice."""
    width = max(int(out_size.max()) if len(out_size) else 0, int(cand_size.max()) if len(cand_size) else 0) + 1
    nodes = max(int(out_node.max()) if len(out_node) else 0, int(cand_node.max()) if len(cand_node) else 0) + 1
    if nodes * width >= 1 << 63:  # cannot happen with real traces; keep it exact anyway
        _, keys = np.unique(np.stack([np.concatenate([out_node, cand_node]).astype(np.int64),
                                      np.concatenate([out_size, cand_size])], axis=1), axis=0, return_inverse=True)
        keys = keys.reshape(-1).astype(np.int64)
        return keys[: len(out_node)], keys[len(out_node) :]
    return out_node.astype(np.int64) * width + out_size, cand_node.astype(np.int64) * width + cand_size


def output_sizes(trace: Trace, rows: IntArray) -> IntArray:
    """:func:`output_bytes` of many rows at once."""
    allocated = trace.outputs.allocated_bytes[rows]
    return np.where(allocated > 0, allocated, trace.outputs.requested_bytes[rows])


def output_bytes(trace: Trace, row: int) -> int:
    """The bytes an output buffer occupies: allocated where the allocator tracks it, else requested."""
    allocated = int(trace.outputs.allocated_bytes[row])
    return allocated if allocated > 0 else int(trace.outputs.requested_bytes[row])


def _match_outputs(
    trace: Trace,
    allocator_index: int,
    allocs: IntArray,
    frees: IntArray,
    time_ns: IntArray,
    delta: IntArray,
    event_node: Int32Array,
) -> IntArray:
    """For each allocation, the output buffer it holds (-1 for temporaries and unknowns).

    An allocation can hold one of its node's output buffers only if it outlives the node and has
    the buffer's size. Among a node's same-size allocations that do, the dataflow decides: an
    output buffer stays alive until the kernel of its last reader (consumer or alias) finished,
    so it is held by an allocation freed at or after that moment (never freed counts as after).
    Each output takes the earliest allocation that fits it; an output no free fits takes the
    earliest remaining allocation. Frees are recorded in whole microseconds,
    so the last read is compared in whole microseconds too.
    """
    matched = np.full(len(allocs), -1, dtype=np.int64)
    flow = dataflow(trace)
    owned = flow.owned_outputs(allocator_index)
    if not len(owned) or not len(allocs):
        return matched
    outputs, end_ns = trace.outputs, trace.nodes.end_ns
    node = event_node[allocs]
    survives = (frees < 0) | (time_ns[np.maximum(frees, 0)] > end_ns[node])  # else a temporary
    candidates = np.flatnonzero(survives)
    del survives
    # Key outputs and surviving allocations by (node, size); find each output's candidates in
    # the sorted candidate keys, and how many outputs share its key.
    out_key, cand_key = _pair_keys(outputs.node[owned], output_sizes(trace, owned), node[candidates],
                                   delta[allocs[candidates]])
    del node
    by_key = np.argsort(cand_key, kind="stable")  # stable: candidates of one key stay in allocation order
    cand_key = cand_key[by_key]
    lo = np.searchsorted(cand_key, out_key, side="left")
    cands_of_key = np.searchsorted(cand_key, out_key, side="right") - lo
    sorted_out_key = np.sort(out_key)
    outs_of_key = np.searchsorted(sorted_out_key, out_key, side="right") - np.searchsorted(sorted_out_key, out_key)
    del sorted_out_key
    # One output and one allocation of its node and size: they belong together.
    single = (outs_of_key == 1) & (cands_of_key == 1)
    matched[candidates[by_key[lo[single]]]] = owned[single]
    # Several of one size: the dataflow decides. The outputs read longest choose first: the
    # allocations that fit a later last read also fit every earlier one, so no choice can leave
    # an output without a fit that had one. Among those that fit, the earliest allocated, as
    # kernels allocate outputs in slot order.
    shared = np.flatnonzero(~single & (cands_of_key > 0))
    if len(shared):
        never = np.iinfo(np.int64).max
        # Usually few outputs share a size with another of their node: then walking just their
        # chains is cheaper than the whole trace's last reads (equal by test).
        buffers = flow.buffer_of_output[owned[shared]]
        if len(shared) > _WALK_AT_MOST:
            last_read_us = (flow.last_read[buffers] // 1000).tolist()
        else:
            last_read_us = [flow.last_read_ns(b) // 1000 for b in buffers.tolist()]
        wanted: dict[int, list[tuple[int, int]]] = defaultdict(list)  # key -> (-last read, row)
        for key, last, row in zip(out_key[shared].tolist(), last_read_us, owned[shared].tolist()):
            wanted[key].append((-last, row))
        for key, outputs_wanted in wanted.items():
            start = int(np.searchsorted(cand_key, key, side="left"))
            stop = int(np.searchsorted(cand_key, key, side="right"))
            fits = []
            for allocation in candidates[by_key[start:stop]].tolist():
                free = int(frees[allocation])
                fits.append((int(time_ns[free]) // 1000 if free >= 0 else never, allocation))
            unserved = []
            for negative_last, row in sorted(outputs_wanted):
                fit = next((c for c in fits if c[0] >= -negative_last), None)
                if fit is None:
                    unserved.append(row)
                    continue
                matched[fit[1]] = row
                fits.remove(fit)
            for row, (_, allocation) in zip(sorted(unserved), fits):
                matched[allocation] = row
    return matched


# -- outputs mode -------------------------------------------------------------------------------


def _replay_outputs(trace: Trace, allocator: str, index: int) -> Replay:
    outputs, nodes = trace.outputs, trace.nodes
    flow = dataflow(trace)
    owned = flow.owned_outputs(index)
    owned = owned[(output_sizes(trace, owned) > 0) & (nodes.start_ns[outputs.node[owned]] > 0)]
    n = len(owned)
    start = nodes.start_ns[outputs.node[owned]]
    end = flow.last_use[flow.buffer_of_output[owned]]
    size = output_sizes(trace, owned)
    time = np.concatenate([start, end])
    delta = np.concatenate([size, -size])
    is_free = np.concatenate([np.zeros(n, dtype=np.int64), np.ones(n, dtype=np.int64)])
    order = np.lexsort((np.arange(2 * n), is_free, time))
    position = np.empty(2 * n, dtype=np.int64)
    position[order] = np.arange(2 * n)
    producer = outputs.node[owned].astype(np.int32)
    return Replay(
        allocator=allocator,
        source="outputs",
        time_ns=time[order],
        delta_bytes=delta[order],
        live_bytes=np.cumsum(delta[order]),
        event_node=np.concatenate([producer, producer])[order].astype(np.int32),
        alloc_event=position[:n],
        free_event=position[n:],
        output_row=owned.astype(np.int64),
        unpaired_free_events=np.zeros(0, dtype=np.int64),
    )
