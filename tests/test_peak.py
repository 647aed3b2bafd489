"""Peaks and live sets: hand-worked traces, the seeds' known answers, and identities on all traces."""

from __future__ import annotations

from pathlib import Path

import pytest

import memtrace
from memtrace.analyses.peak import (
    group_live_set,
    parse_group_by,
    peaks,
    peaks_and_unknown,
    repeated_allocations,
    select_live,
)
from memtrace.errors import UsageError

from .conftest import ALEXNET, PTB, REAL_TRACES, TINY


def test_tie_peak_is_reached_by_the_later_record_in_trace_order() -> None:
    p = memtrace.load(TINY / "ties.pbtxt").peak("bfc")
    assert (p.peak_delta_bytes, p.peak_bytes, p.baseline_bytes) == (768, 768, None)
    assert (p.peak_node, p.peak_time_us) == ("b", 10)
    assert p.running_at_peak == ("a", "b")
    assert [(a.node, a.kind, a.bytes) for a in p.live_at_peak] == [("b", "temp", 512), ("a", "temp", 256)]


def test_hand_worked_peak_with_baseline_output_and_persistent() -> None:
    p = memtrace.load(TINY / "producer_free.pbtxt").peak("bfc")
    assert (p.peak_bytes, p.peak_delta_bytes, p.baseline_bytes) == (13072, 3072, 10000)
    assert (p.peak_node, p.peak_time_us, p.running_at_peak) == ("consumer", 105, ("consumer",))
    persistent, output = p.live_at_peak
    assert (persistent.node, persistent.kind, persistent.bytes, persistent.free_time_us) == ("consumer", "persistent", 2048, None)
    assert (output.node, output.kind, output.bytes, output.alloc_time_us, output.free_time_us) == ("conv", "output", 1024, 10, 200)
    assert (output.allocation_id, output.slot, output.requested_bytes, output.dtype, output.shape) == (7, 0, 1000, "float32", [250])


def test_allocator_with_outputs_but_no_records() -> None:
    p = memtrace.load(TINY / "outputs_only.pbtxt").peak("host")
    assert (p.source, p.peak_bytes, p.peak_node, p.peak_time_us) == ("outputs", 768, "q", 20)
    assert {(a.node, a.bytes, a.kind) for a in p.live_at_peak} == {("p", 256, "output"), ("q", 512, "output")}


def test_trace_with_no_memory_has_no_peaks() -> None:
    assert peaks(memtrace.load(TINY / "no_memory.pbtxt")) == []


def test_allocator_that_never_rises() -> None:
    p = memtrace.load(ALEXNET).peak("cpu")
    assert (p.peak_bytes, p.peak_delta_bytes, p.peak_node, p.live_at_peak) == (0, 0, None, ())


def test_alexnet_gpu_peak_matches_the_seed() -> None:
    p = memtrace.load(ALEXNET).peak("GPU_0_bfc")
    assert p.source == "records"
    # These numbers are derived again from the proto alone in test_proto_replay.py.
    assert (p.peak_bytes, p.baseline_bytes, p.peak_delta_bytes) == (1_325_898_496, 86_954_240, 1_238_944_256)
    assert p.peak_node == "gradients/conv4/Conv2D_grad/Conv2DBackpropInput"
    assert p.live_bytes_total == p.peak_delta_bytes
    assert p.live_at_peak[0].kind == "temp" and p.live_at_peak[0].node == p.peak_node


@pytest.mark.parametrize("trace_path", [ALEXNET, PTB], ids=lambda p: p.name)
def test_peak_is_at_least_every_snapshot_the_allocator_took(trace_path: Path) -> None:
    """Independent bound: the allocator's own bytes-in-use readings never exceed the true peak."""
    trace = memtrace.load(trace_path)
    for p in trace.peaks():
        if p.baseline_bytes is None:
            continue
        index = trace.allocator_index(p.allocator)
        readings = trace.memory.bytes_in_use[trace.memory.allocator == index]
        assert p.peak_bytes >= int(readings.max())
    alexnet_gpu = memtrace.load(ALEXNET).memory
    assert int(alexnet_gpu.bytes_in_use.max()) < 1_325_898_496  # snapshots alone miss the peak


@pytest.mark.parametrize("trace_path", REAL_TRACES, ids=lambda p: p.name)
def test_live_set_adds_up_to_the_peak_on_every_real_trace(trace_path: Path) -> None:
    trace = memtrace.load(trace_path)
    for p in trace.peaks():
        assert sum(a.bytes for a in p.live_at_peak) == p.peak_delta_bytes, p.allocator
        assert p.peak_bytes == p.peak_delta_bytes + (p.baseline_bytes or 0)
        assert all(a.alloc_time_us <= p.peak_time_us for a in p.live_at_peak)
        assert all(a.free_time_us is None or a.free_time_us >= p.peak_time_us for a in p.live_at_peak)


def test_ptb_every_allocator_has_records_and_adds_up() -> None:
    trace = memtrace.load(PTB)
    found = {p.allocator: p for p in trace.peaks()}
    assert set(found) == {"GPU_0_bfc", "cuda_host_bfc", "cpu_pool", "cpu"}
    assert all(p.source == "records" for p in found.values())
    assert found["GPU_0_bfc"].peak_bytes == 77_062_912  # derived from the proto in test_proto_replay.py


def test_peaks_are_sorted_largest_first() -> None:
    sizes = [p.peak_bytes for p in memtrace.load(PTB).peaks()]
    assert sizes == sorted(sizes, reverse=True)


# -- the live set, grouped ----------------------------------------------------------------------


def test_live_set_grouped_by_node_type_and_scope_as_worked_by_hand() -> None:
    trace = memtrace.load(TINY / "live_groups.pbtxt")
    p = trace.peak("bfc")
    assert (p.peak_delta_bytes, p.peak_node) == (2816, "dense/MatMul")

    def rows(by: str, depth: int = 1) -> list[tuple[str, int, int]]:
        return [(g.key, g.count, g.bytes) for g in group_live_set(trace, p, by, depth)]

    assert rows("node") == [("lstm/cell_0/MatMul", 1, 1024), ("lstm/cell_1/MatMul", 1, 1024),
                            ("lstm/cell_0/BiasAdd", 1, 512), ("dense/MatMul", 1, 256)]
    assert rows("type") == [("MatMul", 3, 2304), ("BiasAdd", 1, 512)]
    assert rows("scope") == [("lstm", 3, 2560), ("dense", 1, 256)]
    assert rows("scope", 2) == [("lstm/cell_0", 2, 1536), ("lstm/cell_1", 1, 1024), ("dense/MatMul", 1, 256)]
    assert [g.share for g in group_live_set(trace, p, "type")] == [2304 / 2816, 512 / 2816]


@pytest.mark.parametrize("by", ["node", "type", "scope"])
def test_groups_add_up_to_the_peak_delta_on_every_real_trace(by: str) -> None:
    for path in (ALEXNET, PTB):
        trace = memtrace.load(path)
        for p in peaks(trace):
            groups = group_live_set(trace, p, by)
            assert sum(g.bytes for g in groups) == p.peak_delta_bytes
            assert sum(g.count for g in groups) == len(p.live_at_peak)


def test_grouping_by_something_else_is_refused() -> None:
    trace = memtrace.load(TINY / "live_groups.pbtxt")
    with pytest.raises(UsageError, match="cannot group by 'device'"):
        group_live_set(trace, trace.peak("bfc"), "device")


# -- repeats folded, filters, --group-by ---------------------------------------------------------


def test_repeated_allocations_fold_an_unrolled_lstm() -> None:
    # GIVEN the PTB step, whose live set at the peak is mostly 38 gradient MatMuls of unrolled cells,
    # WHEN repeats are folded, THEN they are one row with the numbers as "*" and the bytes add up.
    p = memtrace.load(PTB).peak("GPU_0_bfc")
    rows = repeated_allocations(p.live_at_peak)
    first = rows[0]
    assert (first.count, first.bytes, first.kind, first.dtype, first.shape) == (38, 48_653_568, "output", "float32", [400, 800])
    assert first.node == "Train/Model/gradients/Train/Model/RNN/RNN/multi_rnn_cell/cell_*/lstm_cell/LSTMBlockCell_*_grad/MatMul_*"
    assert sum(r.bytes for r in rows) == p.peak_delta_bytes and sum(r.count for r in rows) == len(p.live_at_peak) == 112
    assert len(rows) == 14


def test_repeats_fold_by_name_pattern_and_keep_single_names_whole() -> None:
    p = memtrace.load(TINY / "live_groups.pbtxt").peak("bfc")
    assert [(r.node, r.count, r.bytes) for r in repeated_allocations(p.live_at_peak)] == [
        ("lstm/cell_*/MatMul", 2, 2048), ("lstm/cell_0/BiasAdd", 1, 512), ("dense/MatMul", 1, 256)]


def test_select_live_by_name_and_size() -> None:
    p = memtrace.load(TINY / "live_groups.pbtxt").peak("bfc")
    assert [a.node for a in select_live(p, "MatMul")] == ["lstm/cell_0/MatMul", "lstm/cell_1/MatMul", "dense/MatMul"]
    assert [a.node for a in select_live(p, "^lstm", 1000)] == ["lstm/cell_0/MatMul", "lstm/cell_1/MatMul"]
    assert select_live(p, min_bytes=4096) == ()
    with pytest.raises(UsageError, match="not a regular expression"):
        select_live(p, "(")


# No depth given: None, which scope grouping reads as "down to the layers where the names show a Keras model, else 1".
@pytest.mark.parametrize(("text", "parsed"), [("node", ("node", None)), ("type", ("type", None)),
                                              ("scope", ("scope", None)), ("scope:3", ("scope", 3))])
def test_parse_group_by(text: str, parsed: tuple[str, int | None]) -> None:
    assert parse_group_by(text) == parsed


@pytest.mark.parametrize("text", ["device", "type:2", "scope:0", "scope:x", ""])
def test_parse_group_by_refuses_what_it_cannot_group_by(text: str) -> None:
    with pytest.raises(UsageError):
        parse_group_by(text)


def test_a_peak_is_built_once_per_trace_and_allocator() -> None:
    # ops, summary, check, the report and batch all ask for the same peaks: one live set each.
    from memtrace.analyses.ops import ops

    trace = memtrace.load(PTB)
    first = trace.peak("GPU_0_bfc")
    ops(trace, by="node")
    assert trace.peak("GPU_0_bfc") is first
    assert memtrace.load(PTB).peak("GPU_0_bfc") is not first  # another trace, another peak


@pytest.mark.parametrize("in_use", [-2**63, 2**63 - 1, 2**62], ids=["int64-min", "int64-max", "2^62"])
def test_a_snapshot_leaving_no_room_in_int64_makes_the_peak_unknown_not_a_number(tmp_path: Path, in_use: int) -> None:
    """Issue 25 item 16 on a StepStats: baseline (snapshot - live bytes) + live bytes once wrapped past int64."""
    path = tmp_path / "t.pbtxt"
    path.write_text('dev_stats {\n  device: "/cpu:0"\n  node_stats {\n    node_name: "a"\n    all_start_micros: 1\n'
                    f'    memory {{ allocator_name: "cpu" allocator_bytes_in_use: {in_use}\n'
                    "      allocation_records { alloc_micros: 1 alloc_bytes: 256 } }\n  }\n}\n"
                    'dev_stats {\n  device: "/gpu:0"\n  node_stats {\n    node_name: "b"\n    all_start_micros: 1\n'
                    '    memory { allocator_name: "gpu" allocator_bytes_in_use: 512\n'
                    "      allocation_records { alloc_micros: 1 alloc_bytes: 512 } }\n  }\n}\n")
    trace = memtrace.load(path)
    found, [unknown] = peaks_and_unknown(trace)
    assert unknown.allocator == "cpu" and unknown.source == "snapshots"
    assert [(p.allocator, p.peak_bytes) for p in found] == [("gpu", 512)]  # the other allocator is untouched
    assert any(o.kind == "bytes-beyond-int64" and o.allocator == "cpu" for o in trace.oddities)
