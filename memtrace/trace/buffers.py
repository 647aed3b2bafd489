"""Every buffer of a step, worked out once per trace: who holds it, who reads it, how long it lives, and which records allocate and free it.

The trace says who allocated a buffer; the graph says who kept it alive. Replay, peak, frag,
ops, the tensor stories and the dataflow graph all read what this module works out, so that
each answer about a buffer has one source.

**Ops.** One per node name that executed on a device that owns memory (kernel entries on GPU
stream and memcpy pseudo-devices are timings of the same ops, not ops of their own). A name
that executes several times (while loops) is one op with several executions.

**Edges.** Data edges ``producer:slot -> consumer``, control inputs excluded. The inputs come,
in order of preference, from a GraphDef given with ``--graph``, the trace's partition or function
graphs, else the ``timeline_label`` of each node (``name = Op(a, b:1, ^ctrl)``). Inputs naming an
op that never executed are counted, not linked.

**Identity.** Every ``NodeOutput`` holds a buffer. An output that reports the same (allocator,
allocation id, pointer) as an earlier output is an alias of that buffer (Identity, ``/read``,
in-place BiasAdd or Relu, Reshape), not new memory. Where the allocator's ids are unique (BFC:
each id has one pointer) the shared key is enough. Where they are not (CPU allocators number ids
per op and hand a freed pointer out again), the output is an alias only when its op consumes
an op already holding the buffer. Untracked outputs (allocation id 0, as everywhere in old
traces) are told apart by pointer the same way: an output with the allocator and ``ptr`` of a
buffer whose holder its op reads is that buffer (a variable ``w`` and its ``w/read``); one whose
op reads no holder, or whose inputs are unknown, is a buffer of its own, and so is every output
without a pointer. Two outputs with one id and pointer whose lifetimes do not meet (the
allocator handed the address out again) are two buffers.

**Lifetime.** A buffer's *chain* is its creator's output followed by its aliases in time order;
every consumer of any alias keeps the buffer alive, so its last use is the latest end of the
chain's ops and their consumers (a consumer executed several times counts with its latest
execution).

**Allocations** (per allocator, see :class:`Allocations`). Records mode (the allocator left
``allocation_records``): the allocator's records ordered by time with ties kept in trace order.
Allocations and frees are paired within one node's records of one allocator, by size; among
same-size allocations a free takes the most recent one (temporary buffers are stack-like), and a
free that finds no allocation freed memory from before the step. Each allocation that survives
its node is matched, by size, to one of the output buffers the node created (not forwarded), so
the live set can say what the bytes are; among same-size outputs the lifetimes decide, since an
output is freed only after its last reader's kernel. Outputs mode (no records, e.g. host
allocators): each output buffer is allocated at its producer's start and freed at its last use,
or its producer's end when nothing reads it; allocations come before frees at equal times.
Where the allocator left ``allocator_bytes_in_use`` snapshots, they decide which output buffers
the step allocated at all: a variable or constant "runs" without the snapshot moving, since its
buffer existed before the step. Between two consecutive snapshots the model must change by what
the snapshots changed by; where it does not, the smallest set of buffers allocated in that
interval (or, for buffers allocated before the first snapshot, freed in it) whose sizes make up
the difference existed before the step and is left out (it is part of the baseline). Where no
such set exists the model cannot agree with every snapshot, and says so
(``agrees_with_snapshots``).
"""

from __future__ import annotations

import functools
import itertools
import weakref
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from ..errors import UsageError
from .data import GraphNodes, Int32Array, IntArray, Nodes, TraceData

Inputs = tuple[tuple[int, int], ...]  # data inputs as (producer name, slot), string indices
Executions = dict[int, IntArray]  # op name -> its Nodes rows, earliest start first (views of one array)
_WALK_AT_MOST = 256  # shared-size outputs whose last reads are walked one by one rather than all computed


@dataclass(frozen=True, eq=False)
class Allocations:
    """One allocator's events in replay order and its allocations, each paired with its free and buffer.

    Events are records (records mode) or synthetic output-lifetime events (outputs mode).
    Allocations are the positive events; ``alloc_event``/``free_event`` index the event arrays.
    """

    allocator: str
    source: str  # "records" or "outputs"
    time_ns: IntArray  # per event, non-decreasing
    delta_bytes: IntArray  # per event; negative for a free
    event_node: Int32Array  # per event: the node whose record (or output) it is
    alloc_event: IntArray  # per allocation: its event position
    free_event: IntArray  # per allocation: its free's event position, -1 if never freed
    output_row: IntArray  # per allocation: the Outputs row it holds, -1 when unknown
    unpaired_free_events: IntArray  # frees of memory allocated before the step
    # Outputs mode with snapshots: the output buffers that existed before the step (variables,
    # constants: the snapshots did not move when their ops ran), left to the baseline; and
    # whether the model agrees with every snapshot (None: records mode, or no snapshots).
    before_step_rows: IntArray
    agrees_with_snapshots: bool | None

    def __post_init__(self) -> None:
        # Built once per trace and shared by every analysis: nobody may change one.
        for value in vars(self).values():
            if isinstance(value, np.ndarray):
                value.flags.writeable = False


@dataclass(frozen=True, eq=False)
class Buffers:
    """Ops, data edges, buffer chains and lifetimes of one trace; built once per trace by :func:`buffers`."""

    trace: TraceData
    source: str  # where the edges come from: "graph file", "partition_graphs", "function_graphs", "labels"
    executions: Executions  # op name -> its Nodes rows, earliest start first; names by first start
    inputs: dict[int, Inputs]  # op name -> its data inputs, for the ops whose inputs are known
    consumers: dict[tuple[int, int], tuple[int, ...]]  # (producer name, slot) -> consumer names
    unresolved_inputs: int  # data inputs naming an op that never executed
    buffer_of_output: IntArray  # per Outputs row: the buffer it holds
    chain_offsets: IntArray  # buffer b's chain is chain_rows[chain_offsets[b]:chain_offsets[b + 1]]
    chain_rows: IntArray  # Outputs rows by buffer, creator first, then its aliases in time order
    _allocations: dict[str, Allocations] = field(default_factory=dict, repr=False)  # by allocator, see allocations()

    # -- ops --------------------------------------------------------------------------------

    def op_start_ns(self, name: int) -> int:
        """The op's first stamped start (0 when it was never stamped)."""
        starts = self.trace.nodes.start_ns[self.executions[name]]
        stamped = starts[starts > 0]
        return int(stamped.min()) if len(stamped) else 0

    def op_end_ns(self, name: int) -> int:
        """The op's latest end (``all_end``) over all its executions."""
        return int(self.trace.nodes.end_ns[self.executions[name]].max())

    # -- buffers ----------------------------------------------------------------------------

    @property
    def buffers(self) -> int:
        return len(self.chain_offsets) - 1

    def chain(self, buffer: int) -> list[int]:
        """The buffer's Outputs rows: its creator's output, then its aliases in time order."""
        return self.chain_rows[self.chain_offsets[buffer] : self.chain_offsets[buffer + 1]].tolist()

    def creator(self, buffer: int) -> int:
        """The Outputs row that created the buffer."""
        return int(self.chain_rows[self.chain_offsets[buffer]])

    def holders(self, buffer: int) -> list[int]:
        """Names of the ops whose outputs are the buffer: its creator, then its aliases."""
        names = self.trace.nodes.name[self.trace.outputs.node[self.chain(buffer)]]
        return list(dict.fromkeys(names.tolist()))

    def buffer_consumers(self, buffer: int) -> list[tuple[int, int]]:
        """The ops reading the buffer through any of its holders, as (name, first reading execution).

        Earliest reading execution first. The holders themselves are left out: a forwarding op is
        an alias, not a reader.
        """
        holders = set(self.holders(buffer))
        found: dict[int, int] = {}
        for row, consumer, reading in self._reads(buffer):
            if consumer not in holders:
                first = min(reading, key=lambda node: (int(self.trace.nodes.start_ns[node]), node))
                if consumer not in found or self.trace.nodes.start_ns[first] < self.trace.nodes.start_ns[found[consumer]]:
                    found[consumer] = first
        return sorted(found.items(), key=lambda item: (int(self.trace.nodes.start_ns[item[1]]), item[0]))

    def last_use_ns(self, buffer: int) -> int:
        """The latest end (``all_end``) of the buffer's holders and of the executions reading them."""
        return self._latest(buffer, self.trace.nodes.end_ns)

    def last_read_ns(self, buffer: int) -> int:
        """The latest kernel end (``op_end``) of the buffer's holders and of the executions reading them.

        TensorFlow drops a kernel's inputs once the kernel finished, before the executor stamps
        ``all_end``, so an output's free is recorded at or after this moment, not after
        :meth:`last_use_ns`.
        """
        return self._latest(buffer, self.trace.nodes.op_end_ns)

    @functools.cached_property
    def last_use(self) -> IntArray:
        """:meth:`last_use_ns` of every buffer at once (built on first use)."""
        return _latest_by_buffer(self.trace, self.executions, self.buffer_of_output, self._all_reads, self.trace.nodes.end_ns)

    @functools.cached_property
    def last_read(self) -> IntArray:
        """:meth:`last_read_ns` of every buffer at once (built on first use)."""
        return _latest_by_buffer(
            self.trace, self.executions, self.buffer_of_output, self._all_reads, self.trace.nodes.op_end_ns
        )

    @functools.cached_property
    def _all_reads(self) -> tuple[IntArray, IntArray, IntArray]:
        return _reads_of_outputs(self.trace, self.executions, self.consumers)

    def _latest(self, buffer: int, column: IntArray) -> int:
        holders = self.trace.outputs.node[self.chain(buffer)].tolist()
        readers = [node for _, _, reading in self._reads(buffer) for node in reading]
        return int(column[holders + readers].max())

    def _reads(self, buffer: int) -> Iterator[tuple[int, int, tuple[int, ...]]]:
        """(holder row, consumer name, the consumer's executions that read it) for each edge out of the chain.

        The rule of :func:`_reads_of_outputs`, one buffer at a time.
        """
        nodes, outputs = self.trace.nodes, self.trace.outputs
        for row in self.chain(buffer):
            node = int(outputs.node[row])
            name = int(nodes.name[node])
            runs = self.executions.get(name, np.array([node]))
            rank = np.flatnonzero(runs == node)
            for consumer in self.consumers.get((name, int(outputs.slot[row])), ()):
                reading = self.executions[consumer]
                if len(reading) == len(runs) > 1 and len(rank):
                    reading = reading[rank]
                yield row, consumer, tuple(reading.tolist())

    def allocations(self, allocator: str) -> Allocations:
        """The allocator's allocations, each paired with its free and its buffer (built once per allocator)."""
        found = self._allocations.get(allocator)
        if found is None:
            index = allocator_index(self.trace, allocator)
            rows = np.flatnonzero(self.trace.records.allocator == index)
            found = _from_records(self, allocator, index, rows) if len(rows) else _from_outputs(self, allocator, index)
            self._allocations[allocator] = found
        return found

    def owned_outputs(self, allocator_index: int) -> IntArray:
        """The Outputs rows on this allocator that created their buffer (forwarded ones left out)."""
        creators = self.chain_rows[self.chain_offsets[:-1]]
        return np.sort(creators[self.trace.outputs.allocator[creators] == allocator_index])


_built: weakref.WeakKeyDictionary[TraceData, Buffers] = weakref.WeakKeyDictionary()


def buffers(trace: TraceData) -> Buffers:
    """The trace's buffers, worked out on first use and kept for the trace's lifetime."""
    flow = _built.get(trace)
    if flow is None:
        flow = _build(trace)
        _built[trace] = flow
    return flow


def _build(trace: TraceData) -> Buffers:
    executions = _executions(trace)
    source, inputs = _inputs(trace, executions)
    consumers: dict[tuple[int, int], dict[int, None]] = defaultdict(dict)
    unresolved = 0
    for consumer, data_inputs in inputs.items():
        if consumer not in executions:
            continue
        for producer, slot in data_inputs:
            if producer in executions:
                consumers[(producer, slot)][consumer] = None
            else:
                unresolved += 1
    consumers_by_key = {key: tuple(names) for key, names in consumers.items()}
    buffer_of_output, chain_offsets, chain_rows = _chains(trace, inputs)
    return Buffers(
        trace=trace,
        source=source,
        executions=executions,
        inputs=inputs,
        consumers=consumers_by_key,
        unresolved_inputs=unresolved,
        buffer_of_output=buffer_of_output,
        chain_offsets=chain_offsets,
        chain_rows=chain_rows,
    )


def _executions(trace: TraceData) -> Executions:
    """Op name -> Nodes rows on devices that are not GPU stream or memcpy pseudo-devices."""
    nodes = trace.nodes
    is_op = np.array([kind not in ("stream", "memcpy") for kind in trace.devices.kind], dtype=bool)
    rows = np.flatnonzero(is_op[nodes.device]) if len(trace.devices.kind) else np.zeros(0, dtype=np.int64)
    rows = rows[np.lexsort((rows, nodes.start_ns[rows], nodes.name[rows]))]  # by name, then time
    names = nodes.name[rows]
    bounds = np.flatnonzero(names[1:] != names[:-1]) + 1
    starts = np.concatenate([[0], bounds]).astype(np.int64) if len(rows) else np.zeros(0, dtype=np.int64)
    ends = np.append(starts[1:], len(rows))
    firsts = rows[starts]
    by_first_start = np.lexsort((firsts, nodes.start_ns[firsts]))
    return {int(names[starts[g]]): rows[starts[g] : ends[g]] for g in by_first_start.tolist()}


def _inputs(
    trace: TraceData, executions: Executions, use_graph: bool = True
) -> tuple[str, dict[int, Inputs]]:
    """Where the inputs come from, and each op's data inputs (control inputs dropped)."""
    table: Nodes | GraphNodes
    if trace.graph is not None and use_graph:
        table, names = trace.graph, list(range(len(trace.graph)))
        source = trace.graph_source or "graph file"
    else:
        # A node's inputs are known when its label names an op; the first labelled execution speaks.
        table, source = trace.nodes, "labels"
        ops = np.concatenate(list(executions.values())) if executions else np.zeros(0, dtype=np.int64)
        labelled = ops[trace.nodes.op_type[ops] != 0]
        _, first = np.unique(trace.nodes.name[labelled], return_index=True)  # executions are in time order
        names = labelled[np.sort(first)].tolist()
    found: dict[int, Inputs] = {}
    offsets = table.input_offsets
    for row in names:
        name = int(table.name[row])
        if name in found:
            continue
        lo, hi = int(offsets[row]), int(offsets[row + 1])
        control = table.input_is_control[lo:hi].tolist()
        pairs = zip(table.input_name[lo:hi].tolist(), table.input_slot[lo:hi].tolist())
        found[name] = tuple(dict.fromkeys(pair for pair, c in zip(pairs, control) if not c))
    return source, found


def data_edges(trace: TraceData, source: str) -> set[tuple[str, int, str]]:
    """``(producer, slot, consumer)`` among executed ops, from ``"graph"`` or ``"labels"`` alone.

    For comparing the two sources; the buffers' lifetimes use the preferred one.
    """
    executions = _executions(trace)
    if source == "graph" and trace.graph is None:
        return set()
    _, inputs = _inputs(trace, executions, use_graph=source == "graph")
    strings = trace.strings
    return {
        (strings[producer], slot, strings[consumer])
        for consumer, data_inputs in inputs.items() if consumer in executions
        for producer, slot in data_inputs if producer in executions
    }


def _chains(trace: TraceData, inputs: dict[int, Inputs]) -> tuple[IntArray, IntArray, IntArray]:
    """Assign every output to a buffer: a new one, or the buffer of an earlier output it aliases.

    Returns the buffer of each output and the chains as offsets and rows. Buffers are numbered
    in the time order of their creators.
    """
    outputs, nodes = trace.outputs, trace.nodes
    count = len(outputs)
    order = np.lexsort((np.arange(count), nodes.start_ns[outputs.node]))  # time order, ties by row
    joins = np.arange(count, dtype=np.int64)  # per row: the creator row of its buffer
    tracked = (outputs.allocator >= 0) & (outputs.allocation_id != 0)
    by_pointer = (outputs.allocator >= 0) & (outputs.allocation_id == 0) & (outputs.ptr != 0)
    allocators = np.flatnonzero(np.bincount(outputs.allocator[tracked])).tolist()  # codes are small; np.unique would import numpy.ma
    unique = np.isin(outputs.allocator, [a for a in allocators if _ids_unique(trace, a)]) & tracked

    # Unique ids: every output with an earlier output's (allocator, id, pointer) is its alias.
    rows = order[unique[order]]
    if len(rows):
        # With unique ids, the id names the pointer too: (allocator, id) is the whole key.
        ids = outputs.allocation_id[rows]
        if int(ids.min()) >= 0 and int(ids.max()) < 1 << 48:
            keys = (outputs.allocator[rows].astype(np.int64) << 48) | ids
            _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        else:
            pairs = np.stack([outputs.allocator[rows].astype(np.int64), ids], axis=1)
            _, first, inverse = np.unique(pairs, axis=0, return_index=True, return_inverse=True)
        joins[rows] = rows[first[inverse.reshape(-1)]]

    # Ids repeated per op, or no ids at all: an alias only along a data edge, one output at a time.
    # A consumer reads its input while it runs, so a buffer it reads is alive then: sharing the
    # pointer along an edge means sharing the buffer, not a reused address.
    holders: dict[tuple[int, int, int], tuple[int, set[int]]] = {}  # key -> creator row, holder names
    rows = order[((tracked & ~unique) | by_pointer)[order]]
    columns = zip(rows.tolist(), outputs.allocator[rows].tolist(), outputs.allocation_id[rows].tolist(),
                  outputs.ptr[rows].tolist(), nodes.name[outputs.node[rows]].tolist())
    for row, allocator, allocation_id, ptr, name in columns:
        key = (allocator, allocation_id, ptr)
        held = holders.get(key)
        if held is not None and _consumes_any(inputs.get(name), held[1], trust_unknown=allocation_id != 0):
            held[1].add(name)
            joins[row] = held[0]
        else:
            holders[key] = (row, {name})

    creators = order[joins[order] == order]
    number = np.full(count, -1, dtype=np.int64)
    number[creators] = np.arange(len(creators))
    buffer_of_output = number[joins]
    position = np.empty(count, dtype=np.int64)
    position[order] = np.arange(count)
    chain_rows = np.lexsort((position, buffer_of_output)).astype(np.int64)
    chain_offsets = np.searchsorted(buffer_of_output[chain_rows], np.arange(len(creators) + 1)).astype(np.int64)
    return buffer_of_output, chain_offsets, chain_rows


def _reads_of_outputs(
    trace: TraceData, executions: Executions, consumers: dict[tuple[int, int], tuple[int, ...]]
) -> tuple[IntArray, IntArray, IntArray]:
    """Every (output row, consumer name, reading execution or -1 for all of them) along the data edges.

    A consumer that ran as often as the output's op (both in one while loop) read the k-th
    output in its k-th execution; otherwise every execution may have read it (a loop reading a
    value from outside it), which -1 stands for.
    """
    outputs, nodes = trace.outputs, trace.nodes
    empty = np.zeros(0, dtype=np.int64)
    if not consumers or not len(outputs):
        return empty, empty, empty
    names = len(trace.strings)
    runs = np.zeros(names, dtype=np.int64)  # executions per name
    first = np.zeros(names, dtype=np.int64)  # per name: where its executions start in `in_order`
    lengths = np.array([len(rows) for rows in executions.values()], dtype=np.int64)
    owners = np.fromiter(executions.keys(), dtype=np.int64, count=len(executions))
    runs[owners] = lengths
    first[owners] = np.cumsum(lengths) - lengths
    in_order = np.concatenate(list(executions.values()))
    rank = np.full(len(nodes), -1, dtype=np.int64)  # per node: which execution of its name it is
    rank[in_order] = np.arange(len(in_order)) - np.repeat(first[owners], lengths)

    # Edges as sorted (producer name, slot) keys, to join every output with its readers.
    width = int(max(int(outputs.slot.max()), max(slot for _, slot in consumers)) + 1)
    pairs = [(producer * width + slot, consumer) for (producer, slot), found in consumers.items() for consumer in found]
    edge_key, edge_consumer = (np.array(column, dtype=np.int64) for column in zip(*sorted(pairs)))
    out_name = nodes.name[outputs.node].astype(np.int64)
    out_key = out_name * width + outputs.slot
    lo = np.searchsorted(edge_key, out_key, side="left")
    hi = np.searchsorted(edge_key, out_key, side="right")
    row = np.repeat(np.arange(len(outputs), dtype=np.int64), hi - lo)
    edge = lo[row] + (np.arange(len(row)) - np.repeat(np.cumsum(hi - lo) - (hi - lo), hi - lo))
    consumer = edge_consumer[edge]
    k = rank[outputs.node[row]]
    same = (runs[consumer] == runs[out_name[row]]) & (runs[consumer] > 1) & (k >= 0)
    reading = np.where(same, in_order[first[consumer] + np.where(same, k, 0)], -1)
    return row, consumer, reading


def _latest_by_buffer(
    trace: TraceData,
    executions: Executions,
    buffer_of_output: IntArray,
    reads: tuple[IntArray, IntArray, IntArray],
    column: IntArray,
) -> IntArray:
    """Per buffer: the latest ``column`` (a node time) over its holders and the executions reading them."""
    outputs, nodes = trace.outputs, trace.nodes
    buffers = int(buffer_of_output.max()) + 1 if len(buffer_of_output) else 0
    latest = np.full(buffers, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(latest, buffer_of_output, column[outputs.node])
    row, consumer, reading = reads
    if len(row):
        op_nodes = np.concatenate(list(executions.values()))
        latest_of_name = np.full(len(trace.strings), np.iinfo(np.int64).min, dtype=np.int64)
        np.maximum.at(latest_of_name, nodes.name[op_nodes], column[op_nodes])
        value = np.where(reading >= 0, column[np.maximum(reading, 0)], latest_of_name[consumer])
        np.maximum.at(latest, buffer_of_output[row], value)
    return latest


def _ids_unique(trace: TraceData, allocator: int) -> bool:
    """Whether every nonzero allocation id of the allocator's outputs comes with a single pointer."""
    outputs = trace.outputs
    mine = (outputs.allocator == allocator) & (outputs.allocation_id != 0)
    ids, ptrs = outputs.allocation_id[mine], outputs.ptr[mine]
    order = np.lexsort((ptrs, ids))
    ids, ptrs = ids[order], ptrs[order]
    return not bool(np.any((ids[1:] == ids[:-1]) & (ptrs[1:] != ptrs[:-1])))


def _consumes_any(inputs: Inputs | None, names: set[int], trust_unknown: bool = True) -> bool:
    """Whether these inputs read one of the named ops; ``trust_unknown`` when the inputs are unknown."""
    if inputs is None:
        # Nothing says otherwise: trust a shared id and pointer, but not a bare pointer.
        return trust_unknown
    return any(producer in names for producer, _ in inputs)


def allocator_index(trace: TraceData, allocator: str) -> int:
    """The allocator's index, or a UsageError that lists the allocators the trace does have."""
    try:
        return trace.allocator_index(allocator)
    except ValueError:
        have = ", ".join(trace.allocators) or "none"
        raise UsageError(f"{trace.path}: no allocator {allocator!r} in this trace (it has: {have})") from None


# -- allocations from records ------------------------------------------------------------------


def _from_records(flow: Buffers, allocator: str, index: int, rows: IntArray) -> Allocations:
    trace = flow.trace
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
    return Allocations(
        allocator=allocator,
        source="records",
        time_ns=time_ns,
        delta_bytes=delta,
        event_node=event_node,
        alloc_event=allocs,
        free_event=frees,
        output_row=_match_outputs(flow, index, allocs, frees, time_ns, delta, event_node),
        unpaired_free_events=unpaired,
        before_step_rows=np.zeros(0, dtype=np.int64),
        agrees_with_snapshots=None,  # records mode: the reconciliation says how well they agree
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


def owned_outputs(trace: TraceData, allocator_index: int) -> IntArray:
    """Output rows on this allocator that created their buffer rather than forwarding one."""
    return buffers(trace).owned_outputs(allocator_index)


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


def output_sizes(trace: TraceData, rows: IntArray) -> IntArray:
    """The bytes output buffers occupy: allocated where the allocator tracks it, else requested."""
    allocated = trace.outputs.allocated_bytes[rows]
    return np.where(allocated > 0, allocated, trace.outputs.requested_bytes[rows])


def _match_outputs(
    flow: Buffers,
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
    trace = flow.trace
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


# -- allocations from output lifetimes ----------------------------------------------------------


def _from_outputs(flow: Buffers, allocator: str, index: int) -> Allocations:
    trace = flow.trace
    outputs, nodes = trace.outputs, trace.nodes
    owned = flow.owned_outputs(index)
    owned = owned[(output_sizes(trace, owned) > 0) & (nodes.start_ns[outputs.node[owned]] > 0)]
    start = nodes.start_ns[outputs.node[owned]]
    end = flow.last_use[flow.buffer_of_output[owned]]
    size = output_sizes(trace, owned)
    before_step, agrees = _before_step(flow, index, owned, start, end, size)
    kept = ~before_step
    before_rows, owned, start, end, size = owned[before_step], owned[kept], start[kept], end[kept], size[kept]
    n = len(owned)
    time = np.concatenate([start, end])
    delta = np.concatenate([size, -size])
    is_free = np.concatenate([np.zeros(n, dtype=np.int64), np.ones(n, dtype=np.int64)])
    order = np.lexsort((np.arange(2 * n), is_free, time))
    position = np.empty(2 * n, dtype=np.int64)
    position[order] = np.arange(2 * n)
    producer = outputs.node[owned].astype(np.int32)
    return Allocations(
        allocator=allocator,
        source="outputs",
        time_ns=time[order],
        delta_bytes=delta[order],
        event_node=np.concatenate([producer, producer])[order].astype(np.int32),
        alloc_event=position[:n],
        free_event=position[n:],
        output_row=owned.astype(np.int64),
        unpaired_free_events=np.zeros(0, dtype=np.int64),
        before_step_rows=np.sort(before_rows).astype(np.int64),
        agrees_with_snapshots=agrees,
    )


_CHOOSE_AMONG = 16  # buffers of one interval searched for the set that explains it
_CHOOSE_AT_MOST = 3  # buffers in that set


def _before_step(
    flow: Buffers, index: int, owned: IntArray, start: IntArray, end: IntArray, size: IntArray
) -> tuple[npt.NDArray[np.bool_], bool | None]:
    """Per owned output: whether its buffer existed before the step; and whether the model then
    agrees with every snapshot (None without snapshots). See the module docstring.

    Snapshots are taken at op ends; an output counts from its producer's start to its last use,
    as the replay has it. Intervals are walked in time order, so a choice is final once made.
    """
    trace = flow.trace
    memory = trace.memory
    taken = np.flatnonzero((memory.allocator == index) & memory.has_snapshot)
    before = np.zeros(len(owned), dtype=np.bool_)
    if not len(taken):
        return before, None
    snapshot_time = trace.nodes.op_end_ns[memory.node[taken]]
    order = np.argsort(snapshot_time, kind="stable")
    snapshot_time, snapshot = snapshot_time[order], memory.bytes_in_use[taken][order]
    # The interval each buffer is allocated and freed in: 0 before the first snapshot, k between
    # snapshot k-1 and snapshot k, len(snapshots) after the last (events at a snapshot's instant
    # come before it, as the replay has them).
    alloc_in = np.searchsorted(snapshot_time, start, side="left")
    free_in = np.searchsorted(snapshot_time, end, side="left")
    # A producer with no data inputs (a variable, a constant) is the likelier holder of old bytes.
    no_inputs = np.array([len(flow.inputs.get(int(trace.nodes.name[trace.outputs.node[row]]), ())) == 0
                          for row in owned.tolist()], dtype=np.bool_)
    # The model's change over each interval: what it allocates there minus what it frees there
    # (a buffer allocated and freed in one interval changes nothing a snapshot sees).
    intervals = len(snapshot_time) + 1
    crosses = alloc_in < free_in
    rises = np.bincount(alloc_in[crosses], weights=size[crosses], minlength=intervals).astype(np.int64)
    falls = np.bincount(free_in[crosses], weights=size[crosses], minlength=intervals).astype(np.int64)
    allocated_in = _grouped(np.flatnonzero(crosses), alloc_in, intervals)
    freed_in = _grouped(np.flatnonzero(crosses & (alloc_in == 0)), free_in, intervals)
    agrees = True
    for k in range(1, len(snapshot_time)):
        surplus = int(rises[k] - falls[k]) - int(snapshot[k] - snapshot[k - 1])
        if surplus == 0:
            continue
        # Leaving out a buffer allocated here lowers the model's change by its size; one allocated
        # before the first snapshot (nothing checked it) and freed here raises it.
        candidates = [(b, int(size[b])) for b in allocated_in[k]]
        candidates += [(b, -int(size[b])) for b in freed_in[k] if not before[b]]
        chosen = _explaining(candidates, surplus, no_inputs)
        if chosen is None:
            agrees = False
            continue
        for b in chosen:  # gone from the model: its free (in a later interval) goes too
            before[b] = True
            rises[alloc_in[b]] -= size[b]
            falls[free_in[b]] -= size[b]
    return before, agrees


def _grouped(members: IntArray, key: IntArray, groups: int) -> list[list[int]]:
    """``members`` grouped by ``key[member]`` into ``groups`` lists, each in ascending order."""
    found: list[list[int]] = [[] for _ in range(groups)]
    for member, group in zip(members.tolist(), key[members].tolist()):
        found[group].append(member)
    return found


def _explaining(candidates: list[tuple[int, int]], surplus: int, no_inputs: npt.NDArray[np.bool_]) -> list[int] | None:
    """The fewest candidates whose changes add up to ``surplus``; among as few, those whose
    producers read nothing (variables, constants) first, then the earliest. None if none do."""
    candidates = sorted(candidates, key=lambda c: (not no_inputs[c[0]], c[0]))[:_CHOOSE_AMONG]
    for count in range(1, min(_CHOOSE_AT_MOST, len(candidates)) + 1):
        for combination in itertools.combinations(candidates, count):
            if sum(change for _, change in combination) == surplus:
                return [b for b, _ in combination]
    return None
