"""The dataflow: edges, alias chains, buffer stories, pairing by last read, and the graph cuts.

``tiny/dataflow_chain.pbtxt`` and ``tiny/pairing_dataflow.pbtxt`` are worked out by hand in
their header comments; the AlexNet answers are the issue's, read off the trace by eye; the
recorded CPU traces carry partition graphs to compare the label inputs against.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

import memtrace
from memtrace.errors import UsageError
from memtrace.trace.buffers import buffers, data_edges
from memtrace.trace.replay import replay

from .conftest import ALEXNET, FIXTURES, PTB, RECORDED, TINY

CHAIN = TINY / "dataflow_chain.pbtxt"
PAIRING = TINY / "pairing_dataflow.pbtxt"
HOSTILE = 'bad "name" <x> \\ end'

CHAIN_EDGES = {
    ("w", "w/read", 0),
    ("w/read", "mm", 0),
    ("split", "mm", 1),
    ("mm", "relu", 0),
    ("relu", "sink", 0),
    ("split", "late", 0),
    ("mm", "late", 0),
    ("sink", HOSTILE, 0),
}


def edges(graph: nx.MultiDiGraph) -> set[tuple[str, str, int]]:
    return {(u, v, k) for u, v, k in graph.edges(keys=True)}


# -- edges ---------------------------------------------------------------------------------------


def test_label_edges_by_hand() -> None:
    trace = memtrace.load(CHAIN)
    graph = trace.dataflow()
    assert set(graph.nodes) == {"w", "w/read", "split", "mm", "relu", "sink", "noop", "late", HOSTILE}
    # ^split on mm and ^relu on noop are control inputs: no data edge; mm reads split:1 only.
    assert edges(graph) == CHAIN_EDGES
    assert graph.in_degree("noop") == 0
    assert buffers(trace).unresolved_inputs == 1  # split's input x never executed
    assert graph.graph["source"] == "labels"


def test_edge_attributes_name_the_buffer_and_its_creator() -> None:
    graph = memtrace.load(CHAIN).dataflow()
    forwarded = graph.edges["relu", "sink", 0]
    assert forwarded == {
        "slot": 0, "requested_bytes": 1024, "allocated_bytes": 1024, "creator": "mm", "creator_slot": 0,
        "dtype": "float32", "shape": "[16,16]", "allocator": "bfc", "allocation_id": 4, "buffer": "bfc:4",
    }
    assert graph.edges["split", "mm", 1]["buffer"] == "bfc:3"
    assert graph.nodes["mm"] == {
        "op_type": "MatMul", "device": "/job:localhost/replica:0/task:0/device:GPU:0",
        "start_us": 30, "end_us": 40, "executions": 1,
    }


def test_trace_without_labels_or_graph_has_ops_but_no_edges(tmp_path: Path) -> None:
    stripped = tmp_path / "no_labels.pbtxt"
    stripped.write_text(re.sub(r"^\s*timeline_label:.*\n", "", CHAIN.read_text(), flags=re.MULTILINE))
    trace = memtrace.load(stripped)
    graph = trace.dataflow()
    assert graph.number_of_nodes() == 9 and graph.number_of_edges() == 0
    story = trace.buffer("relu:0")  # unique BFC ids still make relu an alias of mm's buffer
    assert story.producer.node == "mm" and [a.node for a in story.aliases] == ["relu"]
    assert story.consumers == ()
    assert story.free_time_us == 96  # the records still date it


# -- buffer stories ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["bfc:4", "mm:0", "mm", "relu:0"])
def test_forwarded_buffer_story(name: str) -> None:
    story = memtrace.load(CHAIN).buffer(name)
    assert (story.allocator, story.allocation_id) == ("bfc", 4)
    assert (story.producer.node, story.producer.slot, story.op_type) == ("mm", 0, "MatMul")
    assert [(a.node, a.slot) for a in story.aliases] == [("relu", 0)]
    # late reads mm itself after relu's reader sink finished: it is the buffer's last reader.
    assert [(c.node, c.start_us) for c in story.consumers] == [("sink", 50), ("late", 70)]
    assert (story.requested_bytes, story.allocated_bytes, story.dtype, story.shape, story.ptr) == (
        1024, 1024, "float32", [16, 16], 4000
    )
    assert (story.alloc_time_us, story.free_time_us, story.lifetime_us) == (32, 96, 64)
    assert (story.source, story.live_at_peak, story.peak_time_us) == ("records", True, 75)


def test_last_use_is_the_latest_reader_of_any_alias() -> None:
    trace = memtrace.load(CHAIN)
    flow = buffers(trace)
    buffer = int(flow.buffer_of_output[np.flatnonzero(trace.outputs.allocation_id == 4)[0]])
    assert flow.last_read_ns(buffer) == 1088 * 1000  # late's kernel end, after sink's (1058)
    assert flow.last_use_ns(buffer) == 1090 * 1000  # late's all_end


def test_stories_of_the_other_buffers() -> None:
    trace = memtrace.load(CHAIN)
    variable = trace.buffer("bfc:1")
    assert variable.producer.node == "w" and [a.node for a in variable.aliases] == ["w/read"]
    assert [c.node for c in variable.consumers] == ["mm"]
    assert (variable.source, variable.alloc_time_us, variable.free_time_us, variable.live_at_peak) == (
        "unrecorded", None, None, None
    )
    second = trace.buffer("split:1")
    assert (second.allocation_id, second.alloc_time_us, second.free_time_us, second.live_at_peak) == (3, 13, 46, False)
    first = trace.buffer("split")  # a bare name is slot 0
    assert (first.allocation_id, first.alloc_time_us, first.free_time_us, first.live_at_peak) == (2, 12, 91, True)
    assert [c.node for c in first.consumers] == ["late"]
    assert trace.buffer("sink:0").consumers[0].node == HOSTILE


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("bfc:99", "no output of bfc has allocation id 99"),
        ("mm:3", "mm has outputs at slots 0"),
        ("noop:0", "noop has no outputs in the trace"),
        ("nosuch:0", "neither ALLOCATOR:ID (allocators: bfc) nor NODE:SLOT"),
        ("sinc:0", "did you mean sink"),
    ],
)
def test_unknown_buffers_say_what_the_trace_has(name: str, message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        memtrace.load(CHAIN).buffer(name)


def test_ids_repeated_per_op_are_ambiguous_and_say_how_to_name_one() -> None:
    trace = memtrace.load(FIXTURES / "recorded" / "cpu_convnet_b8.pbtxt")
    with pytest.raises(UsageError, match=r"'mklcpu:1' names \d+ buffers .*name one as NODE:SLOT: "):
        trace.buffer("mklcpu:1")


def test_alexnet_conv1_buffer_story() -> None:
    story = memtrace.load(ALEXNET).buffer("GPU_0_bfc:183")
    assert story.producer.node == "conv1/Conv2D"
    assert [a.node for a in story.aliases] == ["conv1/BiasAdd", "conv1"]
    assert [c.node for c in story.consumers] == [
        "conv1-0-0-TransposeNCHWToNHWC-LayoutOptimizer",
        "gradients/conv1_grad/ReluGrad",
    ]
    assert (story.requested_bytes, story.allocated_bytes, story.shape) == (102760448, 102760448, [128, 64, 56, 56])
    assert story.source == "records" and story.live_at_peak is True
    # Freed after its last reader's kernel: ReluGrad's op_end, read from the trace.
    trace = memtrace.load(ALEXNET)
    relu_grad = trace.strings.index("gradients/conv1_grad/ReluGrad")
    op_end_us = (int(trace.nodes.op_end_ns[trace.nodes.name == relu_grad][0]) - trace.step_start_ns) // 1000
    assert story.free_time_us is not None and story.free_time_us >= op_end_us


def test_alexnet_bias_variable_is_read_through_its_identity() -> None:
    story = memtrace.load(ALEXNET).buffer("GPU_0_bfc:16")
    assert (story.producer.node, story.op_type) == ("conv5/biases", "VariableV2")
    assert [a.node for a in story.aliases] == ["conv5/biases/read"]
    assert [c.node for c in story.consumers] == ["conv5/BiasAdd"]
    assert story.source == "unrecorded"  # a variable: allocated before the step


# -- graph and label inputs agree ------------------------------------------------------------------


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_graph_and_label_edges_agree_where_both_exist(path: Path) -> None:
    trace = memtrace.load(path)
    assert trace.graph_source == "partition_graphs"
    from_graph, from_labels = data_edges(trace, "graph"), data_edges(trace, "labels")
    both = {c for _, _, c in from_graph} & {c for _, _, c in from_labels}
    assert len(both) >= 18
    graph_side = {e for e in from_graph if e[2] in both}
    label_side = {e for e in from_labels if e[2] in both}
    if path.name != "cpu_while_rnn.pbtxt":
        assert graph_side == label_side
        return
    # In the while loop the graph optimizer merged duplicate nodes (rnn/Enter into
    # gradients/f_count_1, one b_acc_1 into its twin) and rewired the consumers. The partition
    # graph shows the new producer; the label keeps the NodeDef's old input, an op that never
    # ran, so the label loses the edge and the graph has it. That is why the graph is preferred.
    assert label_side < graph_side
    assert graph_side - label_side == {
        ("gradients/f_count_1", 0, "rnn/Merge"),
        ("gradients/rnn/MatMul/ReadVariableOp/Enter_grad/b_acc_1", 0,
         "gradients/rnn/MatMul_1/ReadVariableOp/Enter_grad/b_acc_2"),
    }
    executed = set(trace.dataflow().nodes)
    assert "rnn/Enter" not in executed
    assert "gradients/rnn/MatMul_1/ReadVariableOp/Enter_grad/b_acc_1" not in executed


def test_graph_is_preferred_over_labels() -> None:
    trace = memtrace.load(FIXTURES / "recorded" / "cpu_while_rnn.pbtxt")
    assert trace.dataflow().graph["source"] == "partition_graphs"
    assert trace.dataflow().has_edge("gradients/f_count_1", "rnn/Merge")


# -- pairing by the dataflow ------------------------------------------------------------------------


def test_same_size_outputs_are_paired_by_their_last_reader() -> None:
    trace = memtrace.load(PAIRING)
    assert (trace.buffer("pair:1").alloc_time_us, trace.buffer("pair:1").free_time_us) == (10, 101)
    assert (trace.buffer("pair:0").alloc_time_us, trace.buffer("pair:0").free_time_us) == (12, 41)
    outputs = [a for a in trace.peak("bfc").live_at_peak if a.kind == "output"]
    # Slot order alone would say slot 0 (float32); its reader c0 finished before the peak.
    assert [(a.node, a.slot, a.dtype, a.bytes) for a in outputs] == [("pair", 1, "int32", 256)]


@pytest.mark.parametrize("path", [ALEXNET, PTB, *RECORDED], ids=lambda p: p.name)
def test_output_allocations_are_freed_after_their_last_reader(path: Path) -> None:
    """Records and dataflow are independent: the frees must come after the readers' kernels."""
    trace = memtrace.load(path)
    flow = buffers(trace)
    checked = 0
    for allocator in trace.allocators:
        replayed = replay(trace, allocator)
        if replayed.source != "records":
            continue
        for allocation in np.flatnonzero(replayed.output_row >= 0).tolist():
            checked += 1
            free = int(replayed.free_event[allocation])
            row = int(replayed.output_row[allocation])
            last_read_us = flow.last_read_ns(int(flow.buffer_of_output[row])) // 1000
            if free < 0 or int(replayed.time_ns[free]) // 1000 >= last_read_us:
                continue
            # Only in while loops, where which execution read which iteration's buffer is a guess.
            node = int(trace.outputs.node[row])
            assert len(flow.executions[int(trace.nodes.name[node])]) > 1, trace.node_name(node)
    assert checked >= 11


# -- cuts -----------------------------------------------------------------------------------------


def test_around_keeps_the_neighbourhood() -> None:
    from memtrace.analyses.graph import around

    trace = memtrace.load(CHAIN)
    cut = around(trace, trace.dataflow(), "mm", 1)
    assert set(cut.nodes) == {"mm", "split", "w/read", "relu", "late"}
    assert edges(cut) == {("split", "mm", 1), ("w/read", "mm", 0), ("mm", "relu", 0), ("mm", "late", 0),
                          ("split", "late", 0)}
    assert set(around(trace, trace.dataflow(), "mm", 2).nodes) == set(trace.dataflow().nodes) - {"noop", HOSTILE}


def test_around_lists_ops_and_edges_in_the_full_graphs_order_every_run() -> None:
    # networkx's own subgraph of a small cut iterates a set, whose order changes with string hashing.
    from memtrace.analyses.graph import around

    trace = memtrace.load(ALEXNET)
    full = trace.dataflow()
    cut = around(trace, full, "conv1/Conv2D", 1)
    assert len(cut) > 3
    assert list(cut.nodes) == [op for op in full.nodes if op in cut]
    assert list(cut.edges(keys=True)) == [e for e in full.edges(keys=True) if e[0] in cut and e[1] in cut]
    script = (f"import memtrace; from memtrace.analyses.graph import around; t = memtrace.load({str(ALEXNET)!r}); "
              "print(list(around(t, t.dataflow(), 'conv1/Conv2D', 1)))")
    orders = {subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONHASHSEED": str(seed)},
                             capture_output=True, text=True, check=True).stdout for seed in (1, 2, 3)}
    assert len(orders) == 1


def test_live_at_peak_keeps_the_live_buffers_and_their_readers() -> None:
    from memtrace.analyses.graph import live_at_peak

    trace = memtrace.load(CHAIN)
    cut = live_at_peak(trace, trace.dataflow(), "bfc")
    assert set(cut.nodes) == {"split", "mm", "relu", "sink", "late", HOSTILE}
    assert edges(cut) == {("split", "late", 0), ("mm", "relu", 0), ("relu", "sink", 0), ("mm", "late", 0),
                          ("sink", HOSTILE, 0)}
    assert all(data["live_at_peak"] for _, _, data in cut.edges(data=True))
    held = {name: data.get("live_at_peak_bytes") for name, data in cut.nodes(data=True)}
    assert held == {"split": 512, "mm": 1024, "relu": None, "sink": 1024, "late": 256, HOSTILE: None}
    assert sum(v for v in held.values() if v) == trace.peak("bfc").peak_delta_bytes


def test_alexnet_live_at_peak_graph_covers_every_live_output() -> None:
    from memtrace.analyses.graph import live_at_peak

    trace = memtrace.load(ALEXNET)
    cut = live_at_peak(trace, trace.dataflow(), "GPU_0_bfc")
    live_outputs = {a.node for a in trace.peak("GPU_0_bfc").live_at_peak if a.kind == "output"}
    assert live_outputs <= set(cut.nodes)
    assert cut.has_edge("conv1", "gradients/conv1_grad/ReluGrad")


@pytest.mark.parametrize("path", [ALEXNET, PTB, *RECORDED, CHAIN, PAIRING], ids=lambda p: p.name)
def test_columnar_last_use_equals_walking_each_chain(path: Path) -> None:
    """The whole-trace numpy computation against a plain walk of each buffer's chain and readers."""
    trace = memtrace.load(path)
    flow = buffers(trace)
    nodes = trace.nodes
    for buffer in range(flow.buffers):
        holders = [int(trace.outputs.node[row]) for row in flow.chain(buffer)]
        readers = [node for _, _, reading in flow._reads(buffer) for node in reading]
        assert int(flow.last_use[buffer]) == flow.last_use_ns(buffer) == int(nodes.end_ns[holders + readers].max())
        assert int(flow.last_read[buffer]) == flow.last_read_ns(buffer) == int(nodes.op_end_ns[holders + readers].max())
