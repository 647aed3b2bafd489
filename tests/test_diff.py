"""Run-to-run diffs: hand-worked on tiny traces, and on one model recorded at batch 8 and 16."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import memtrace
from memtrace.analyses.diff import diff, unmatched_at_peak
from memtrace.analyses.peak import LiveAllocation
from memtrace.cli import main
from memtrace.errors import UsageError

from .conftest import ALEXNET, FIXTURES, PTB, TINY
from .helpers import run

B8 = FIXTURES / "recorded" / "cpu_convnet_b8.pbtxt"
B16 = FIXTURES / "recorded" / "cpu_convnet_b16.pbtxt"

# producer_free.pbtxt (base: peak 3072 + baseline 10000 = 13072, by consumer at t=2105) changed by
# hand: consumer now keeps 4096 bytes instead of 2048, and a new node "extra" allocates 512 bytes
# at t=2120 that it never frees. Replay: +1024 @2010, +1024 @2015, -1024 @2030, +4096 @2105,
# +512 @2120, -1024 @2200, so the peak is 5632 (15632 absolute) at t=2120, reached by extra.
# The snapshots still imply the baseline 10000: 11024 @2040, 15632 @2125 (extra's op end),
# 14608 @2200 (consumer's op end, after conv's output is freed at the same time).
GROWN = """
dev_stats {
  device: "/job:localhost/replica:0/task:0/device:GPU:0"
  node_stats {
    node_name: "conv" all_start_micros: 2000 op_start_rel_micros: 2 op_end_rel_micros: 40 all_end_rel_micros: 50
    memory {
      allocator_name: "bfc" total_bytes: 2048 peak_bytes: 2048 live_bytes: 1024 allocator_bytes_in_use: 11024
      allocation_records { alloc_micros: 2010 alloc_bytes: 1024 }
      allocation_records { alloc_micros: 2015 alloc_bytes: 1024 }
      allocation_records { alloc_micros: 2030 alloc_bytes: -1024 }
      allocation_records { alloc_micros: 2200 alloc_bytes: -1024 }
    }
    output { slot: 0 tensor_description { dtype: DT_FLOAT shape { dim { size: 250 } } allocation_description {
      requested_bytes: 1000 allocated_bytes: 1024 allocator_name: "bfc" allocation_id: 7 ptr: 4096 } } }
    timeline_label: "[bfc 1.0KB 2.0KB] conv = Conv2D(x, w)"
  }
  node_stats {
    node_name: "consumer" all_start_micros: 2100 op_start_rel_micros: 1 op_end_rel_micros: 100 all_end_rel_micros: 110
    memory {
      allocator_name: "bfc" total_bytes: 4096 peak_bytes: 4096 live_bytes: 4096 allocator_bytes_in_use: 14608
      allocation_records { alloc_micros: 2105 alloc_bytes: 4096 }
    }
    timeline_label: "consumer = Relu(conv)"
  }
  node_stats {
    node_name: "extra" all_start_micros: 2115 op_start_rel_micros: 1 op_end_rel_micros: 10 all_end_rel_micros: 20
    memory {
      allocator_name: "bfc" total_bytes: 512 peak_bytes: 512 live_bytes: 512 allocator_bytes_in_use: 15632
      allocation_records { alloc_micros: 2120 alloc_bytes: 512 }
    }
    timeline_label: "extra = Fill(consumer)"
  }
}
"""


@pytest.fixture
def grown(tmp_path: Path) -> Path:
    path = tmp_path / "grown.pbtxt"
    path.write_text(GROWN)
    return path


# -- hand-worked ----------------------------------------------------------------------------------


def test_tiny_diff_hand_worked(grown: Path) -> None:
    result = diff(memtrace.load(TINY / "producer_free.pbtxt"), memtrace.load(grown))
    (bfc,) = result.allocators
    assert (bfc.base_peak_bytes, bfc.new_peak_bytes, bfc.delta_bytes) == (13072, 15632, 2560)
    assert bfc.delta_fraction == 2560 / 13072
    assert bfc.new is not None and bfc.new.reconciliation.matched == 3 and bfc.new.peak_node == "extra"
    assert [(o.name, o.status, o.delta_bytes, o.residual_delta_bytes, o.at_peak_delta_bytes) for o in result.ops] == [
        ("consumer", "changed", 2048, 2048, 2048),
        ("extra", "added", 512, 512, 512),
    ]
    assert [(f.allocator, f.allocation.node, f.allocation.slot, f.allocation.kind, f.allocation.bytes)
            for f in result.new_at_peak] == [("bfc", "extra", None, "persistent", 512)]


def test_max_increase_is_inclusive(grown: Path) -> None:
    base, new = memtrace.load(TINY / "producer_free.pbtxt"), memtrace.load(grown)
    assert diff(base, new, max_increase=2560 / 13072).passed
    assert not diff(base, new, max_increase=2559 / 13072).passed
    assert diff(base, new).passed and diff(base, new).exceeded == ()  # no limit, nothing to exceed
    assert diff(new, base, max_increase=0.0).passed  # shrinking never exceeds


def _live(node: str, nbytes: int, slot: int | None = 0, kind: str = "output") -> LiveAllocation:
    return LiveAllocation(node, kind, nbytes, 0, None, None, slot, None, None, None)


def test_counterparts_match_by_producer_and_slot() -> None:
    base = [_live("a", 100), _live("b", 50, slot=1), _live("t", 10, None, "temp"), _live("t", 20, None, "temp")]
    new = [
        _live("a", 400),  # same producer and slot, grown: has a counterpart
        _live("b", 50, slot=0),  # another slot of b: new
        _live("t", 30, None, "temp"), _live("t", 5, None, "temp"), _live("t", 7, None, "temp"),  # 3 temps for 2
        _live("t", 9, None, "unknown"),  # same producer, another kind: new
        _live("old", -64, None, "freed-from-before-step"),  # not a buffer
    ]
    left = unmatched_at_peak(base, new)
    assert [(a.node, a.slot, a.kind, a.bytes) for a in left] == [
        ("b", 0, "output", 50), ("t", None, "unknown", 9), ("t", None, "temp", 5),
    ]


def test_allocator_in_one_trace_only_grew_from_nothing() -> None:
    """PTB has cpu_pool, AlexNet does not: it counts as peak 0 in the base and exceeds any limit."""
    result = diff(memtrace.load(ALEXNET), memtrace.load(PTB), max_increase=10.0)
    pool = next(c for c in result.allocators if c.allocator == "cpu_pool")
    assert pool.base is None and pool.base_peak_bytes == 0 and pool.delta_fraction is None
    assert pool.delta_bytes == pool.new_peak_bytes > 0
    assert pool in result.exceeded


def test_unknown_allocator_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match=r"no allocator 'GPU_7'.*they have: mklcpu"):
        diff(memtrace.load(B8), memtrace.load(B16), allocators=["GPU_7"])


# -- one model at two batch sizes -----------------------------------------------------------------


def _shape_bytes(trace: memtrace.Trace) -> dict[tuple[str, int], int]:
    """Each output's size from its dtype and shape alone: elements times bytes per element."""
    outputs = trace.outputs
    sizes = {}
    for row in range(len(outputs)):
        shape, dtype = trace.output_shape(row), trace.strings[outputs.dtype[row]]
        if shape is not None and dtype in ("float32", "int32", "uint8"):
            sizes[(trace.node_name(int(outputs.node[row])), int(outputs.slot[row]))] = (
                int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
            )
    return sizes


def test_bigger_batch_has_the_peak_its_shapes_predict() -> None:
    """The tensors live at the batch-8 peak, sized from their batch-16 shapes, add up to the new peak."""
    b8, b16 = memtrace.load(B8), memtrace.load(B16)
    result = diff(b8, b16)
    (mklcpu,) = result.allocators
    live = [(a.node, a.slot) for a in b8.peak("mklcpu").live_at_peak]
    assert all(slot is not None for _, slot in live)  # all outputs: each has a shape
    small, big = _shape_bytes(b8), _shape_bytes(b16)
    assert mklcpu.base_peak_bytes == sum(small[key] for key in live) == 753_708
    assert mklcpu.new_peak_bytes == sum(big[key] for key in live) == 1_425_452
    assert mklcpu.delta_bytes == 671_744 and mklcpu.delta_fraction == 671_744 / 753_708
    # the same buffers, only bigger: nothing at the new peak lacks a counterpart
    assert result.new_at_peak == ()


def test_ops_that_grew_are_the_ones_whose_tensors_scale_with_the_batch() -> None:
    b8, b16 = memtrace.load(B8), memtrace.load(B16)
    small, big = _shape_bytes(b8), _shape_bytes(b16)
    scaled = {node for (node, slot), size in small.items() if big[(node, slot)] > size}
    fixed = {node for (node, slot), size in small.items() if big[(node, slot)] == size and size > 100}
    result = diff(b8, b16)
    assert result.ops and all(o.status == "changed" and o.delta_bytes > 0 for o in result.ops)
    assert {o.name for o in result.ops} <= scaled
    # weight gradients have the weights' shapes: the batch does not change them
    assert {"gradients/dense/MatMul_grad/MatMul_1", "gradients/conv1/Conv2D_grad/Conv2DBackpropFilter"} <= fixed
    assert not fixed & {o.name for o in result.ops}
    # bytes held at the peak grew exactly by the shape-derived growth of the op's tensors there
    live = b8.peak("mklcpu").live_at_peak
    for o in result.ops:
        growth = sum(big[(a.node, a.slot)] - small[(a.node, a.slot)] for a in live if a.node == o.name and a.slot is not None)
        assert o.at_peak_delta_bytes == growth, o.name
    assert [o.name for o in result.ops[:4]] == [
        "conv1/Relu", "gradients/pool1_grad/MaxPoolGrad", "pool1", "gradients/dense/MatMul_grad/MatMul",
    ]


# -- memtrace diff --------------------------------------------------------------------------------


def test_diff_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "diff", str(B8), str(B16))
    assert code == 0
    row = next(line for line in out.splitlines() if line.startswith("mklcpu"))
    assert row.split() == ["mklcpu", "736", "KiB", "(753,708", "B)", "1.36", "MiB", "(1,425,452", "B)", "+656", "KiB", "+89.1%"]
    assert "conv1/Relu" in out and "new at the new peak: nothing" in out
    assert "PASS" not in out and "FAIL" not in out  # no --max-increase, no verdict


def test_diff_json_contract(capsys: pytest.CaptureFixture[str], grown: Path) -> None:
    code, out, _ = run(capsys, "diff", str(TINY / "producer_free.pbtxt"), str(grown), "--json")
    document = json.loads(out)
    assert code == 0 and document["schema"] == "memtrace.diff/1" and document["passed"] is None
    (bfc,) = document["allocators"]
    assert {k: bfc[k] for k in ("allocator", "base_peak_bytes", "new_peak_bytes", "delta_bytes", "delta_fraction")} == {
        "allocator": "bfc", "base_peak_bytes": 13072, "new_peak_bytes": 15632, "delta_bytes": 2560,
        "delta_fraction": 2560 / 13072,
    }
    assert [{k: o[k] for k in ("name", "base_peak_bytes", "new_peak_bytes", "delta_bytes")} for o in document["ops"]] == [
        {"name": "consumer", "base_peak_bytes": 2048, "new_peak_bytes": 4096, "delta_bytes": 2048},
        {"name": "extra", "base_peak_bytes": 0, "new_peak_bytes": 512, "delta_bytes": 512},
    ]
    assert document["new_at_peak"] == [
        {"allocator": "bfc", "node": "extra", "slot": None, "kind": "persistent", "bytes": 512,
             "requested_bytes": None, "dtype": None, "shape": None},
    ]


@pytest.mark.parametrize(("limit", "code"), [("5%", 1), ("89%", 1), ("89.2%", 0), ("120%", 0)])
def test_diff_max_increase_exit_codes(capsys: pytest.CaptureFixture[str], limit: str, code: int) -> None:
    """The batch-16 peak is 89.12% above the batch-8 one."""
    got, out, _ = run(capsys, "diff", str(B8), str(B16), "--max-increase", limit)
    assert got == code
    assert out.rstrip().splitlines()[-1] == (
        f"FAIL: mklcpu peak grew by 89.1% (+656 KiB), more than the {limit} allowed" if code
        else f"PASS: no allocator's peak grew by more than {limit}"
    )


def test_diff_max_increase_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "diff", str(B8), str(B16), "--max-increase", "5%", "--json")
    document = json.loads(out)
    assert code == 1 and document["passed"] is False and document["max_increase"] == 0.05
    assert document["allocators"][0]["exceeds_max_increase"] is True


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--max-increase", "5"], "--max-increase: not a percentage: '5'"),
        (["--max-increase", "lots%"], "not a percentage"),
        (["--allocator", "GPU_0_bfc"], "no allocator 'GPU_0_bfc'"),
    ],
)
def test_diff_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str], says: str) -> None:
    code, out, err = run(capsys, "diff", str(B8), str(B16), *argv)
    assert code == 2 and out == "" and says in err and err.count("\n") == 1


def test_diff_unreadable_input_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "diff", str(B8), str(tmp_path / "gone.pb"))
    assert code == 2 and "gone.pb: no such file" in err


def test_diff_binary_against_text_of_the_same_step(capsys: pytest.CaptureFixture[str]) -> None:
    """cpu_convnet_b8.pb is the same message as the .pbtxt: nothing may differ."""
    code, out, _ = run(capsys, "diff", str(FIXTURES / "recorded" / "cpu_convnet_b8.pb"), str(B8), "--max-increase", "0%", "--json")
    document = json.loads(out)
    assert code == 0 and document["ops"] == [] and document["new_at_peak"] == []
    assert document["allocators"][0]["delta_bytes"] == 0 and document["allocators"][0]["delta_fraction"] == 0.0


def test_top_says_it_is_showing_some_of_the_ops_that_changed(capsys: pytest.CaptureFixture[str]) -> None:

    assert main(["diff", str(ALEXNET), str(PTB), "--top", "3"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("ops that changed most"))
    assert line.startswith("ops that changed most (showing 3 of ")
    assert " that changed; " in line
