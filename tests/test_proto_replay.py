"""The central numbers, derived again by an independent replay written from the proto (tests/proto_replay.py).

The suite's pasted numbers (AlexNet's peak, baseline and step peak in test_peak.py, test_cli.py,
test_check.py, test_export.py, test_timeline.py, test_report.py, test_crosscheck_tf_timeline.py;
PTB's in test_peak.py, test_replay.py, test_check.py, test_cli.py) came from memtrace's first
implementation. Here each is derived from the trace by code that shares nothing with memtrace's
readers or analyses, and memtrace is held to that replay on every real trace.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import pytest

import memtrace
from memtrace.analyses.ops import node_rows
from memtrace.analyses.peak import AllocatorPeak

from .conftest import ALEXNET, PTB, REAL_TRACES, TINY
from .proto_replay import into_step_us, parse_step_stats, replay, replay_file

HAND_WORKED = [TINY / "ties.pbtxt", TINY / "producer_free.pbtxt", TINY / "live_groups.pbtxt",
               TINY / "hostile_names.pbtxt", TINY / "frag_bfc.pbtxt", TINY / "dataflow_chain.pbtxt"]


def test_the_proto_replay_gets_the_hand_worked_traces_right() -> None:
    # The replay itself checked by hand first (the files' own comments work them out): ties.pbtxt's
    # two records at 1010 us (256 B by a, then 512 B by b) peak at 768 B, reached by b;
    # producer_free.pbtxt's 1024 B output and 2048 B persistent on a baseline its 2 snapshots put at 10000 B.
    ties = replay_file(TINY / "ties.pbtxt", "bfc")
    assert (ties.peak_delta_bytes, ties.peak_node, ties.peak_time_us, ties.baseline_bytes) == (768, "b", 1010, None)
    assert ties.live_at_peak == {"a": (1, 256), "b": (1, 512)}
    produced = replay_file(TINY / "producer_free.pbtxt", "bfc")
    assert (produced.peak_bytes, produced.peak_delta_bytes, produced.baseline_bytes) == (13072, 3072, 10000)
    assert (produced.snapshots, produced.matched, produced.peak_node) == (2, 2, "consumer")


def test_alexnet_central_numbers_come_from_the_proto() -> None:
    step = parse_step_stats(ALEXNET)
    gpu = replay(step, "GPU_0_bfc")
    # test_peak.py, test_cli.py, test_check.py, test_export.py, test_timeline.py, test_report.py,
    # test_crosscheck_tf_timeline.py: (peak, baseline, peak delta) and where the peak is.
    assert (gpu.peak_bytes, gpu.baseline_bytes, gpu.peak_delta_bytes) == (1_325_898_496, 86_954_240, 1_238_944_256)
    assert gpu.peak_node == "gradients/conv4/Conv2D_grad/Conv2DBackpropInput"
    assert gpu.peak_time_us is not None and into_step_us(step, gpu.peak_time_us) == 1387
    # test_replay.py: 97 of 97 snapshots agree; test_cli.py's summary row: 194 records, 97 allocations,
    # 97 frees, 97 snapshots, 85 outputs.
    assert (gpu.snapshots, gpu.matched) == (97, 97)
    assert (gpu.records, gpu.allocs, gpu.frees, gpu.outputs) == (194, 97, 97, 85)
    # docs/peak.md: 21 allocations live at the peak; test_report.py: the op holding most then, 295,043,072 B.
    assert sum(count for count, _ in gpu.live_at_peak.values()) == 21
    top = max(gpu.live_at_peak.items(), key=lambda item: item[1][1])
    assert top == ("gradients/conv4/Conv2D_grad/Conv2DBackpropInput", (4, 295_043_072))


def test_ptb_central_numbers_come_from_the_proto() -> None:
    step = parse_step_stats(PTB)
    gpu = replay(step, "GPU_0_bfc")
    # test_peak.py, test_check.py, test_cli.py: the peak; test_replay.py: 364 of 556 snapshots agree on the baseline.
    assert gpu.peak_bytes == 77_062_912
    assert (gpu.snapshots, gpu.matched, gpu.baseline_bytes) == (556, 364, 10_703_104)
    assert gpu.peak_delta_bytes == sum(size for _, size in gpu.live_at_peak.values()) == 66_359_808
    assert sum(count for count, _ in gpu.live_at_peak.values()) == 112
    # test_peak.py's fold of the unrolled LSTM: 38 gradient MatMuls whose names differ only in their
    # numbers, each a float32 [400, 800] output (TensorFlow's DT_FLOAT is 1).
    shapes: dict[str, set[tuple[int, tuple[int, ...]]]] = {}
    for device in step.dev_stats:
        for node in device.node_stats:
            for out in node.output:
                described = out.tensor_description
                if described.allocation_description.allocator_name == "GPU_0_bfc":
                    dims = tuple(d.size for d in described.shape.dim)
                    shapes.setdefault(node.node_name, set()).add((described.dtype, dims))
    name = re.compile(r"Train/Model/gradients/Train/Model/RNN/RNN/multi_rnn_cell/cell_\d+/lstm_cell/"
                      r"LSTMBlockCell_\d+_grad/MatMul_\d+")
    cells = [held for node, held in gpu.live_at_peak.items()
             if name.fullmatch(node) and shapes.get(node) == {(1, (400, 800))}]
    assert (sum(count for count, _ in cells), sum(size for _, size in cells)) == (38, 48_653_568)


def _records_allocators(trace: memtrace.Trace) -> list[AllocatorPeak]:
    return [p for p in trace.peaks() if p.source == "records"]


@pytest.mark.parametrize("trace_path", REAL_TRACES + HAND_WORKED, ids=lambda p: p.name)
def test_memtrace_agrees_with_the_proto_replay(trace_path: Path) -> None:
    """Every allocator replayed from its records: peak, baseline, reconciliation and live set, as the proto says."""
    step = parse_step_stats(trace_path)
    trace = memtrace.load(trace_path)
    found = _records_allocators(trace)
    assert found
    for p in found:
        theirs = replay(step, p.allocator)
        assert (p.peak_bytes, p.baseline_bytes, p.peak_delta_bytes) == (
            theirs.peak_bytes, theirs.baseline_bytes, theirs.peak_delta_bytes), p.allocator
        assert (p.reconciliation.snapshots, p.reconciliation.matched) == (theirs.snapshots, theirs.matched), p.allocator
        assert p.peak_node == theirs.peak_node, p.allocator
        if theirs.peak_time_us is not None:
            assert p.peak_time_us == into_step_us(step, theirs.peak_time_us), p.allocator
        held: Counter[str] = Counter()
        counted: Counter[str] = Counter()
        for allocation in p.live_at_peak:
            held[allocation.node] += allocation.bytes
            counted[allocation.node] += 1
        assert {node: (counted[node], held[node]) for node in held} == theirs.live_at_peak, p.allocator


def test_ops_at_the_peak_agree_with_the_proto_replay() -> None:
    # The per-op "held at the peak" column (test_report.py's 295,043,072 B) is the node's records live then.
    trace = memtrace.load(ALEXNET)
    theirs = replay_file(ALEXNET, "GPU_0_bfc").live_at_peak
    rows = {row.name: row.at_peak_bytes for row in node_rows(trace, ["GPU_0_bfc"]) if row.at_peak_bytes}
    assert rows == {node: size for node, (_, size) in theirs.items()}


def test_the_replay_imports_nothing_of_memtrace_but_the_generated_classes() -> None:
    tree = ast.parse((Path(__file__).parent / "proto_replay.py").read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert {name for name in imported if name.startswith("memtrace")} == {"memtrace.read._proto"}
