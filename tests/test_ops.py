"""Per-op accounting: hand-worked rows, grouping by type and scope, and memtrace's own columns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import memtrace
from memtrace.cli import main
from memtrace.errors import UsageError
from memtrace.ops import node_rows, ops

from .conftest import ALEXNET, FIXTURES, REAL_TRACES, TINY

SCOPES = TINY / "ops_scopes.pbtxt"
CONV = "resnet50/conv2_block1_1_conv/Conv2D"
BN = "resnet50/conv2_block1_1_bn/FusedBatchNormV3"
GRAD = "gradient_tape/resnet50/conv2_block1_1_conv/Conv2D/Conv2DBackpropInput"


def _rows(path: Path = SCOPES) -> dict[str, memtrace.ops.OpRow]:
    return {r.name: r for r in node_rows(memtrace.load(path))}


def test_repeated_executions_are_summed() -> None:
    conv = _rows()[CONV]
    assert (conv.occurrences, conv.requested_bytes, conv.peak_bytes, conv.residual_bytes, conv.output_bytes) == (
        2, 4200, 3000, 1000, 2048,
    )
    assert (conv.temp_bytes, conv.persistent_bytes, conv.waste_bytes) == (200, 0, 48)
    assert conv.op_type == "Conv2D" and conv.device == "/job:worker/replica:0/task:0/device:GPU:0"


def test_persistent_bytes_count_in_residual() -> None:
    bn = _rows()[BN]
    assert (bn.requested_bytes, bn.peak_bytes, bn.residual_bytes, bn.output_bytes, bn.waste_bytes) == (464, 464, 320, 256, 56)


def test_name_suffix_stream_entries_and_unstarted_executions() -> None:
    grad = _rows()[GRAD]
    assert (grad.occurrences, grad.requested_bytes) == (1, 50)  # not 7777 (never started), not 999999 (stream)
    assert f"{CONV}:Conv2D" not in _rows()


def test_scope_aggregation_at_depths() -> None:
    trace = memtrace.load(SCOPES)
    depth1 = {r.name: r for r in ops(trace, by="scope", depth=1).rows}
    assert set(depth1) == {"resnet50", "gradient_tape"}
    assert depth1["resnet50"].requested_bytes == 4200 + 464 and depth1["resnet50"].occurrences == 3
    assert depth1["resnet50"].op_type is None  # Conv2D and FusedBatchNormV3 mixed
    depth2 = {r.name: r.requested_bytes for r in ops(trace, by="scope", depth=2).rows}
    assert depth2 == {"resnet50/conv2_block1_1_conv": 4200, "resnet50/conv2_block1_1_bn": 464, "gradient_tape/resnet50": 50}


def test_scope_names_from_the_resnet_seed_group_into_blocks(tmp_path: Path) -> None:
    names = (FIXTURES / "resnet50_node_names.txt").read_text().split()
    lines = ['dev_stats {\n  device: "/device:GPU:0"']
    for i, name in enumerate(names):
        lines.append(f'  node_stats {{ node_name: "{name}" all_start_micros: {i + 1} memory {{ allocator_name: "bfc" total_bytes: 1 }} }}')
    lines.append("}")
    path = tmp_path / "resnet_names.pbtxt"
    path.write_text("\n".join(lines))
    rows = ops(memtrace.load(path), by="scope", depth=2).rows
    by_scope = {r.name: r.requested_bytes for r in rows}
    expected = {}
    for name in dict.fromkeys(names):
        key = "/".join(name.split("/")[:2])
        expected[key] = expected.get(key, 0) + names.count(name)
    assert by_scope == expected
    assert "resnet50/conv2_block1_1_conv" in by_scope


def test_group_by_type_and_sorting() -> None:
    report = ops(memtrace.load(SCOPES), by="type", sort="name")
    assert [r.name for r in report.rows] == ["Conv2D", "Conv2DBackpropInput", "FusedBatchNormV3"]
    assert report.total.requested_bytes == 4200 + 464 + 50
    assert next(r.name for r in ops(memtrace.load(SCOPES), by="type", sort="residual").rows) == "Conv2D"


def test_unknown_sort_or_grouping_is_usage_error() -> None:
    with pytest.raises(UsageError, match="cannot sort by 'bogus'"):
        ops(memtrace.load(SCOPES), sort="bogus")
    with pytest.raises(UsageError):
        ops(memtrace.load(SCOPES), by="colour")


def test_device_filter() -> None:
    trace = memtrace.load(FIXTURES / "ptb_lstm_train_gpu.pbtxt")
    cpu = ops(trace, by="node", device="cpu:0").rows
    assert cpu and all("CPU:0" in r.device for r in cpu)
    assert len(cpu) < len(ops(trace, by="node").rows)


@pytest.mark.parametrize("trace_path", REAL_TRACES, ids=lambda p: p.name)
def test_at_peak_bytes_add_up_to_the_peaks(trace_path: Path) -> None:
    trace = memtrace.load(trace_path)
    report = ops(trace, by="node")
    assert report.total.at_peak_bytes == sum(p.peak_delta_bytes for p in trace.peaks())


def test_at_peak_per_allocator() -> None:
    trace = memtrace.load(ALEXNET)
    report = ops(trace, by="node", allocators=["cuda_host_bfc"])
    assert report.total.at_peak_bytes == 2816 and report.allocators == ("cuda_host_bfc",)


def test_waste_counts_each_buffer_once_by_an_independent_loop() -> None:
    trace = memtrace.load(ALEXNET)
    seen, expected = set(), 0
    o = trace.outputs
    for row in range(len(o)):
        key = (int(o.allocator[row]), int(o.allocation_id[row]), int(o.ptr[row]))
        if o.allocation_id[row] and o.allocated_bytes[row] and key not in seen:
            seen.add(key)
            expected += int(o.allocated_bytes[row] - o.requested_bytes[row])
    assert ops(trace, by="node").total.waste_bytes == expected > 0


def test_cli_ops_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ops", str(SCOPES), "--by", "node", "--json", "--sort", "requested"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["schema"] == "memtrace.ops/1" and document["by"] == "node"
    assert set(document["rows"][0]) == {
        "name", "op_type", "device", "occurrences", "requested_bytes", "peak_bytes", "residual_bytes", "output_bytes",
        "temp_bytes", "persistent_bytes", "at_peak_bytes", "waste_bytes",
    }
    assert [r["name"] for r in document["rows"]] == [CONV, BN, GRAD]


def test_cli_ops_text_has_tfprof_percentages(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ops", str(ALEXNET), "--top", "3"]) == 0
    out = capsys.readouterr().out
    first = out.splitlines()[2]
    assert first.startswith("Conv2DBackpropFilter") and "(100.0%, 28.7%)" in first
    assert "total (18 rows, 15 not shown)" in out


def test_cli_depth_needs_scope(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ops", str(SCOPES), "--depth", "2"]) == 2
