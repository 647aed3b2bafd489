"""The dataflow of a step: which op produced each buffer, which ops forwarded it, which consumed it.

The trace says who allocated a buffer; the graph says who kept it alive.

**Ops.** One per node name that executed on a device that owns memory (kernel entries on GPU
stream and memcpy pseudo-devices are timings of the same ops, not ops of their own). A name
that executes several times (while loops) is one op with several executions.

**Edges.** Data edges ``producer:slot -> consumer``, control inputs excluded. The inputs come,
in order of preference, from a GraphDef given with ``--graph``, the trace's partition or function
graphs, else the ``timeline_label`` of each node (``name = Op(a, b:1, ^ctrl)``). Inputs naming an
op that never executed are counted, not linked.

**Buffers.** Every ``NodeOutput`` holds a buffer. An output that reports the same (allocator,
allocation id, pointer) as an earlier output is an alias of that buffer (Identity, ``/read``,
in-place BiasAdd or Relu, Reshape), not new memory. Where the allocator's ids are unique (BFC:
each id has one pointer) the shared key is enough. Where they are not (CPU allocators number ids
per op and hand a freed pointer out again), the output is an alias only when its op consumes
an op already holding the buffer. Untracked outputs (allocation id 0) are buffers of their own.
A buffer's *chain* is its creator's output followed by its aliases in time order; every
consumer of any alias keeps the buffer alive, so its last use is the latest end of the chain's
ops and their consumers (a consumer executed several times counts with its latest execution).
"""

from __future__ import annotations

import functools
import weakref
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .model import GraphNodes, IntArray, Nodes, Trace

if TYPE_CHECKING:
    import networkx as nx

Inputs = tuple[tuple[int, int], ...]  # data inputs as (producer name, slot), string indices
Executions = dict[int, IntArray]  # op name -> its Nodes rows, earliest start first (views of one array)


@dataclass(frozen=True, eq=False)
class Dataflow:
    """Ops, data edges and buffer chains of one trace; built once per trace by :func:`dataflow`."""

    trace: Trace
    source: str  # where the edges come from: "graph file", "partition_graphs", "function_graphs", "labels"
    executions: Executions  # op name -> its Nodes rows, earliest start first; names by first start
    inputs: dict[int, Inputs]  # op name -> its data inputs, for the ops whose inputs are known
    consumers: dict[tuple[int, int], tuple[int, ...]]  # (producer name, slot) -> consumer names
    unresolved_inputs: int  # data inputs naming an op that never executed
    buffer_of_output: IntArray  # per Outputs row: the buffer it holds
    chain_offsets: IntArray  # buffer b's chain is chain_rows[chain_offsets[b]:chain_offsets[b + 1]]
    chain_rows: IntArray  # Outputs rows by buffer, creator first, then its aliases in time order

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

    def owned_outputs(self, allocator_index: int) -> IntArray:
        """The Outputs rows on this allocator that created their buffer (forwarded ones left out)."""
        creators = self.chain_rows[self.chain_offsets[:-1]]
        return np.sort(creators[self.trace.outputs.allocator[creators] == allocator_index])


_built: weakref.WeakKeyDictionary[Trace, Dataflow] = weakref.WeakKeyDictionary()


def dataflow(trace: Trace) -> Dataflow:
    """The trace's dataflow, built on first use and kept for the trace's lifetime."""
    flow = _built.get(trace)
    if flow is None:
        flow = _build(trace)
        _built[trace] = flow
    return flow


def _build(trace: Trace) -> Dataflow:
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
    return Dataflow(
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


def _executions(trace: Trace) -> Executions:
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
    trace: Trace, executions: Executions, use_graph: bool = True
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


def data_edges(trace: Trace, source: str) -> set[tuple[str, int, str]]:
    """``(producer, slot, consumer)`` among executed ops, from ``"graph"`` or ``"labels"`` alone.

    For comparing the two sources; the dataflow itself uses the preferred one.
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


def _chains(trace: Trace, inputs: dict[int, Inputs]) -> tuple[IntArray, IntArray, IntArray]:
    """Assign every output to a buffer: a new one, or the buffer of an earlier output it aliases.

    Returns the buffer of each output and the chains as offsets and rows. Buffers are numbered
    in the time order of their creators.
    """
    outputs, nodes = trace.outputs, trace.nodes
    count = len(outputs)
    order = np.lexsort((np.arange(count), nodes.start_ns[outputs.node]))  # time order, ties by row
    joins = np.arange(count, dtype=np.int64)  # per row: the creator row of its buffer
    tracked = (outputs.allocator >= 0) & (outputs.allocation_id != 0)
    allocators = np.unique(outputs.allocator[tracked]).tolist()
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

    # Ids repeated per op: an alias only along a data edge, so one output at a time.
    holders: dict[tuple[int, int, int], tuple[int, set[int]]] = {}  # key -> creator row, holder names
    rows = order[(tracked & ~unique)[order]]
    columns = zip(rows.tolist(), outputs.allocator[rows].tolist(), outputs.allocation_id[rows].tolist(),
                  outputs.ptr[rows].tolist(), nodes.name[outputs.node[rows]].tolist())
    for row, allocator, allocation_id, ptr, name in columns:
        key = (allocator, allocation_id, ptr)
        held = holders.get(key)
        if held is not None and _consumes_any(inputs.get(name), held[1]):
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
    trace: Trace, executions: Executions, consumers: dict[tuple[int, int], tuple[int, ...]]
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
    trace: Trace,
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


def _ids_unique(trace: Trace, allocator: int) -> bool:
    """Whether every nonzero allocation id of the allocator's outputs comes with a single pointer."""
    outputs = trace.outputs
    mine = (outputs.allocator == allocator) & (outputs.allocation_id != 0)
    ids, ptrs = outputs.allocation_id[mine], outputs.ptr[mine]
    order = np.lexsort((ptrs, ids))
    ids, ptrs = ids[order], ptrs[order]
    return not bool(np.any((ids[1:] == ids[:-1]) & (ptrs[1:] != ptrs[:-1])))


def _consumes_any(inputs: Inputs | None, names: set[int]) -> bool:
    """Whether these inputs read one of the named ops; True when the inputs are unknown."""
    if inputs is None:
        return True  # nothing says otherwise: trust the shared id and pointer
    return any(producer in names for producer, _ in inputs)


# -- the networkx graph -------------------------------------------------------------------------


def graph(trace: Trace) -> nx.MultiDiGraph:
    """The dataflow as a networkx MultiDiGraph: ops as nodes, one edge per ``producer:slot -> consumer``.

    Node attributes: ``op_type``, ``device``, ``start_us``, ``end_us`` (relative to the step start,
    first start and latest end), ``executions``. Edge key: the producer's slot. Edge attributes:
    ``slot``; and, when the producer reported that output, ``dtype``, ``shape``,
    ``requested_bytes``, ``allocated_bytes``, ``allocator``, ``allocation_id``, ``buffer``
    (``ALLOCATOR:ID``), ``creator`` and ``creator_slot`` (the op that created the buffer; not the
    producer when the producer forwarded it).
    """
    import networkx as nx

    flow = dataflow(trace)
    strings, nodes = trace.strings, trace.nodes
    origin = trace.step_start_ns
    result = nx.MultiDiGraph(source=flow.source)
    for name, rows in flow.executions.items():
        first = rows[0]
        start = flow.op_start_ns(name)
        result.add_node(
            strings[name],
            op_type=strings[nodes.op_type[first]],
            device=trace.devices.name[nodes.device[first]],
            start_us=(start - origin) // 1000 if start > 0 else 0,
            end_us=(flow.op_end_ns(name) - origin) // 1000 if start > 0 else 0,
            executions=len(rows),
        )
    first_output = _first_output_rows(trace, flow)
    for (producer, slot), consumer_names in flow.consumers.items():
        attributes: dict[str, object] = {"slot": slot}
        row = first_output.get((producer, slot))
        if row is not None:
            attributes.update(_buffer_attributes(trace, flow, row))
        for consumer in consumer_names:
            result.add_edge(strings[producer], strings[consumer], key=slot, **attributes)
    return result


def _first_output_rows(trace: Trace, flow: Dataflow) -> dict[tuple[int, int], int]:
    """(op name, slot) -> the Outputs row of the op's earliest execution that reported that slot."""
    outputs, nodes = trace.outputs, trace.nodes
    found: dict[tuple[int, int], int] = {}
    order = np.lexsort((np.arange(len(outputs)), nodes.start_ns[outputs.node]))
    for row in order.tolist():
        name = int(nodes.name[outputs.node[row]])
        if name in flow.executions:
            found.setdefault((name, int(outputs.slot[row])), row)
    return found


def _buffer_attributes(trace: Trace, flow: Dataflow, row: int) -> dict[str, object]:
    outputs, nodes, strings = trace.outputs, trace.nodes, trace.strings
    creator = flow.creator(int(flow.buffer_of_output[row]))
    attributes: dict[str, object] = {
        "requested_bytes": int(outputs.requested_bytes[row]),
        "allocated_bytes": int(outputs.allocated_bytes[row]),
        "creator": strings[nodes.name[outputs.node[creator]]],
        "creator_slot": int(outputs.slot[creator]),
    }
    if outputs.dtype[row]:
        attributes["dtype"] = strings[outputs.dtype[row]]
    shape = trace.output_shape(row)
    if shape is not None:
        attributes["shape"] = "[" + ",".join(str(d) for d in shape) + "]"
    if outputs.allocator[row] >= 0:
        allocator = trace.allocators[outputs.allocator[row]]
        attributes["allocator"] = allocator
        attributes["allocation_id"] = int(outputs.allocation_id[row])
        attributes["buffer"] = f"{allocator}:{int(outputs.allocation_id[row])}"
    return attributes


# -- cuts of the graph, because a 2,000-node graph is unreadable --------------------------------


def around(trace: Trace, full: nx.MultiDiGraph, name: str, depth: int) -> nx.MultiDiGraph:
    """The ops within ``depth`` edges of ``name`` (either direction) and the edges among them."""
    import difflib

    import networkx as nx

    from .errors import UsageError

    if name not in full:
        close = difflib.get_close_matches(name, list(full.nodes), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UsageError(f"{trace.path}: no op {name!r} in the dataflow{hint}")
    return nx.ego_graph(full, name, radius=depth, undirected=True).copy()


def live_at_peak(trace: Trace, full: nx.MultiDiGraph, allocator: str) -> nx.MultiDiGraph:
    """Only the buffers live at the allocator's peak, with their creators and consumers.

    Kept edges carry ``live_at_peak=True``; every kept op that holds live bytes at the peak
    (outputs, temporaries, anything the live set attributes to it) carries ``live_at_peak_bytes``.
    """
    from .peak import peak
    from .replay import replay

    replayed = replay(trace, allocator)
    at = replayed.peak_event()
    flow = dataflow(trace)
    strings, outputs, nodes = trace.strings, trace.outputs, trace.nodes
    live: set[tuple[str, int]] = set()  # (creator, creator slot) of the live buffers
    if at is not None:
        rows = replayed.output_row[replayed.alive_after(at) & (replayed.output_row >= 0)]
        for row in rows.tolist():
            creator = flow.creator(int(flow.buffer_of_output[row]))
            live.add((strings[nodes.name[outputs.node[creator]]], int(outputs.slot[creator])))
    cut = full.__class__(**full.graph, live_at_peak=allocator)
    for creator_name, _slot in sorted(live):
        if creator_name in full:
            cut.add_node(creator_name, **full.nodes[creator_name])
    for producer, consumer, key, attributes in full.edges(keys=True, data=True):
        if (attributes.get("creator"), attributes.get("creator_slot")) in live:
            cut.add_node(producer, **full.nodes[producer])
            cut.add_node(consumer, **full.nodes[consumer])
            cut.add_edge(producer, consumer, key=key, **attributes, live_at_peak=True)
    held: dict[str, int] = {}
    for allocation in peak(trace, allocator).live_at_peak:
        held[allocation.node] = held.get(allocation.node, 0) + allocation.bytes
    for name in cut.nodes:
        if name in held:
            cut.nodes[name]["live_at_peak_bytes"] = held[name]
    return cut
