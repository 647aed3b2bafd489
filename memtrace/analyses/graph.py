"""The dataflow of a step as a networkx graph: ops as nodes, the buffers between them as edges.

What the graph says about each buffer (its creator, its aliases, its readers) comes from
:mod:`memtrace.trace.buffers`; this module only draws it, and cuts it down to what a person can read:
the ops around one op, or the buffers live at an allocator's peak.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import UsageError
from ..trace.buffers import Buffers, buffers
from ..trace.data import TraceData
from ..trace.replay import replay
from .peak import peak

if TYPE_CHECKING:
    import networkx as nx


# -- the networkx graph -------------------------------------------------------------------------


def graph(trace: TraceData) -> nx.MultiDiGraph:
    """The dataflow as a networkx MultiDiGraph: ops as nodes, one edge per ``producer:slot -> consumer``.

    Node attributes: ``op_type``, ``device``, ``start_us``, ``end_us`` (relative to the step start,
    first start and latest end), ``executions``. Edge key: the producer's slot. Edge attributes:
    ``slot``; and, when the producer reported that output, ``dtype``, ``shape``,
    ``requested_bytes``, ``allocated_bytes``, ``allocator``, ``allocation_id``, ``buffer``
    (``ALLOCATOR:ID``), ``creator`` and ``creator_slot`` (the op that created the buffer; not the
    producer when the producer forwarded it).
    """
    import networkx as nx

    flow = buffers(trace)
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


def _first_output_rows(trace: TraceData, flow: Buffers) -> dict[tuple[int, int], int]:
    """(op name, slot) -> the Outputs row of the op's earliest execution that reported that slot."""
    outputs, nodes = trace.outputs, trace.nodes
    found: dict[tuple[int, int], int] = {}
    order = np.lexsort((np.arange(len(outputs)), nodes.start_ns[outputs.node]))
    for row in order.tolist():
        name = int(nodes.name[outputs.node[row]])
        if name in flow.executions:
            found.setdefault((name, int(outputs.slot[row])), row)
    return found


def _buffer_attributes(trace: TraceData, flow: Buffers, row: int) -> dict[str, object]:
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


def around(trace: TraceData, full: nx.MultiDiGraph, name: str, depth: int) -> nx.MultiDiGraph:
    """The ops within ``depth`` edges of ``name`` (either direction) and the edges among them."""
    import difflib

    import networkx as nx

    if name not in full:
        close = difflib.get_close_matches(name, list(full.nodes), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UsageError(f"{trace.path}: no op {name!r} in the dataflow{hint}")
    near = set(nx.ego_graph(full, name, radius=depth, undirected=True))
    # Ops and edges in the full graph's order: networkx's own subgraph lists a small cut in set
    # order, which changes from run to run with Python's string hashing.
    cut = full.__class__(**full.graph)
    cut.add_nodes_from((op, full.nodes[op]) for op in full if op in near)
    cut.add_edges_from((producer, consumer, key, attributes)
                       for producer, consumer, key, attributes in full.edges(keys=True, data=True)
                       if producer in near and consumer in near)
    return cut


def live_at_peak(trace: TraceData, full: nx.MultiDiGraph, allocator: str) -> nx.MultiDiGraph:
    """Only the buffers live at the allocator's peak, with their creators and consumers.

    Kept edges carry ``live_at_peak=True``; every kept op that holds live bytes at the peak
    (outputs, temporaries, anything the live set attributes to it) carries ``live_at_peak_bytes``.
    """
    replayed = replay(trace, allocator)
    at = replayed.peak_event()
    flow = buffers(trace)
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
