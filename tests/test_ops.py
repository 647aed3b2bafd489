"""Per-op accounting: hand-worked rows, grouping by type and scope, and memtrace's own columns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import memtrace
from memtrace.analyses.ops import node_rows, ops
from memtrace.cli import main
from memtrace.errors import UsageError

from .conftest import ALEXNET, FIXTURES, REAL_TRACES, TINY
from .proto_replay import outputs_with_buffers, parse_step_stats, replay

SCOPES = TINY / "ops_scopes.pbtxt"
CONV = "resnet50/conv2_block1_1_conv/Conv2D"
BN = "resnet50/conv2_block1_1_bn/FusedBatchNormV3"
GRAD = "gradient_tape/resnet50/conv2_block1_1_conv/Conv2D/Conv2DBackpropInput"


def _rows(path: Path = SCOPES) -> dict[str, memtrace.analyses.ops.OpRow]:
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
    # (the scopes Grappler puts before the names it rewrites are no scope of the model's: 106 ConstantFolding/
    # nodes of gradient_tape/resnet50 are its own)
    grappler = ("ConstantFolding", "ArithmeticOptimizer", "DependencyOptimizer")
    for name in dict.fromkeys(names):
        parts = name.split("/")
        key = "/".join([p for p in parts[:-1] if p not in grappler] + parts[-1:])
        key = "/".join(key.split("/")[:2])
        expected[key] = expected.get(key, 0) + names.count(name)
    assert by_scope == expected
    assert "resnet50/conv2_block1_1_conv" in by_scope and not any(k.startswith("ConstantFolding") for k in by_scope)


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


def test_cli_ops_text_has_tfprof_percentages(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")  # wide enough for tfprof's (cumulative %, self %)
    assert main(["ops", str(ALEXNET), "--top", "3"]) == 0
    out = capsys.readouterr().out
    first = out.splitlines()[2]
    assert first.startswith("Conv2DBackpropFilter") and "(100.0%, 28.7%)" in first
    assert "total (17 rows, 14 not shown)" in out  # _SOURCE is no op, as in tfprof


def test_cli_depth_needs_scope(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ops", str(SCOPES), "--depth", "2"]) == 2


def _node_rows_one_by_one(trace: memtrace.Trace, path: Path, allocators: list[str]) -> list[tuple[object, ...]]:
    """node_rows as the module docstring says it, one node execution at a time; the at-peak column over
    ``allocators`` (those replayed from records), it and the waste column from the proto (tests/proto_replay.py)."""
    nodes, memory, outputs = trace.nodes, trace.memory, trace.outputs
    names = [trace.strings[i].split(":", 1)[0] for i in nodes.name.tolist()]
    home: dict[str, int] = {}
    for node, name in enumerate(names):
        if trace.devices.kind[nodes.device[node]] == "device":
            home.setdefault(name, int(nodes.device[node]))
    sums = {c: [0] * len(nodes) for c in ("total_bytes", "peak_bytes", "live_bytes")}
    for entry, node in enumerate(memory.node.tolist()):
        for column, by_node in sums.items():
            by_node[node] += int(getattr(memory, column)[entry])
    output_bytes = [0] * len(nodes)
    for row, node in enumerate(outputs.node.tolist()):
        output_bytes[node] += max(int(outputs.allocated_bytes[row]), int(outputs.requested_bytes[row]))
    step = parse_step_stats(path)
    at_peak: dict[str, int] = {}
    for allocator in allocators:
        for node, (_, size) in replay(step, allocator).live_at_peak.items():
            at_peak[node.split(":", 1)[0]] = at_peak.get(node.split(":", 1)[0], 0) + size
    waste: dict[str, int] = {}
    for allocator in trace.allocators:
        for index, out in enumerate(outputs_with_buffers(step, allocator)):
            if out.buffer == index and out.allocated_bytes > 0 and out.allocation_id != 0:
                name = out.node.split(":", 1)[0]
                waste[name] = waste.get(name, 0) + max(0, out.allocated_bytes - out.requested_bytes)
    rows: dict[str, list[object]] = {}
    for node, name in enumerate(names):
        if home.get(name) != int(nodes.device[node]) or nodes.start_ns[node] <= 0:
            continue
        if name in ("_SOURCE", "RecvTensor") or "MEMCPY" in name:  # tfprof makes no node of these
            continue
        temp, persistent = int(nodes.temp_bytes[node]), int(nodes.persistent_bytes[node])
        # memtrace's own columns fall back to the deprecated device_* sizes; tfprof's never do.
        own_temp = temp or int(nodes.device_temp_bytes[node])
        own_persistent = persistent or int(nodes.device_persistent_bytes[node])
        values = [1, sums["total_bytes"][node] + temp + persistent, sums["peak_bytes"][node] + temp + persistent,
                  sums["live_bytes"][node] + persistent, output_bytes[node], own_temp, own_persistent]
        op_type = trace.strings[nodes.op_type[node]] or None
        if name not in rows:
            rows[name] = [name, op_type, trace.devices.name[nodes.device[node]], *values]
        else:
            row = rows[name]
            row[1] = row[1] if row[1] == op_type else None
            row[3:] = [a + b for a, b in zip(row[3:], values)]  # type: ignore[operator]
    return [(*row, at_peak.get(name, 0), waste.get(name, 0)) for name, row in rows.items()]


# TF 1.4's MemoryStats fields, which today's proto lacks, are left out (the one-by-one side cannot read them).
@pytest.mark.parametrize("path", [p for p in [*REAL_TRACES, *sorted(TINY.glob("*.pbtxt"))]
                                  if p.name != "tf14_memory_stats.pbtxt"], ids=lambda p: p.name)
def test_node_rows_equal_adding_up_one_execution_at_a_time(path: Path) -> None:
    trace = memtrace.load(path)
    # The at-peak column over the allocators replayed from records, where the proto says the peak.
    replayed = [p.allocator for p in trace.peaks() if p.source == "records"]
    got = [(r.name, r.op_type, r.device, r.occurrences, r.requested_bytes, r.peak_bytes, r.residual_bytes, r.output_bytes,
            r.temp_bytes, r.persistent_bytes, r.at_peak_bytes, r.waste_bytes) for r in node_rows(trace, replayed)]
    assert got == _node_rows_one_by_one(trace, path, replayed)


def test_at_peak_from_output_lifetimes_as_worked_by_hand() -> None:
    # outputs_only.pbtxt (no records): p's 256 B and q's 512 B are live together at q's output (test_peak.py).
    trace = memtrace.load(TINY / "outputs_only.pbtxt")
    assert {r.name: r.at_peak_bytes for r in node_rows(trace, ["host"]) if r.at_peak_bytes} == {"p": 256, "q": 512}


def test_an_op_type_survives_only_where_every_execution_has_it(tmp_path: Path) -> None:
    path = tmp_path / "t.pbtxt"
    node = 'node_stats {{ node_name: "{name}" all_start_micros: {start} all_end_rel_micros: 1 timeline_label: "{name} = {op}()" }} '
    path.write_text('dev_stats { device: "/job:localhost/replica:0/task:0/device:GPU:0" ' + "".join(
        node.format(name=name, start=start, op=op)
        for name, start, op in (("n", 10, "Conv2D"), ("m", 11, "MatMul"), ("n", 12, "MatMul"), ("m", 13, "MatMul"))
    ) + "}")
    rows = {r.name: r for r in node_rows(memtrace.load(path))}
    assert (rows["n"].op_type, rows["n"].occurrences) == (None, 2)
    assert (rows["m"].op_type, rows["m"].occurrences) == ("MatMul", 2)


def test_deprecated_device_memory_stats_fill_memtrace_columns_not_tfprofs() -> None:
    """GIVEN a TF 1.4 trace (tiny/tf14_memory_stats.pbtxt): ``conv`` says host_temp 512 and
    host_persistent 1024 (today's fields 1 and 3), ``matmul`` only device_temp 256 and
    device_persistent 768 (deprecated fields 2 and 4)
    THEN tfprof's columns count only today's fields: conv requested = 4096 + 512 + 1024 = 5632,
    residual = 2048 + 1024 = 3072; matmul requested = 1024 (tfprof ignores the device_* fields)
    AND memtrace's temp/persistent columns take the device_* sizes where today's are 0."""
    rows = _rows(TINY / "tf14_memory_stats.pbtxt")
    conv, matmul = rows["conv"], rows["matmul"]
    assert (conv.requested_bytes, conv.peak_bytes, conv.residual_bytes) == (5632, 5632, 3072)
    assert (conv.temp_bytes, conv.persistent_bytes) == (512, 1024)
    assert (matmul.requested_bytes, matmul.peak_bytes, matmul.residual_bytes) == (1024, 1024, 1024)
    assert (matmul.temp_bytes, matmul.persistent_bytes) == (256, 768)


def test_tf14_trace_runs_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    """It used to exit 2 with "has no field named host_persistent_memory_size"."""
    for command in ("summary", "peak", "ops", "frag"):
        assert main([command, str(TINY / "tf14_memory_stats.pbtxt")]) == 0, capsys.readouterr().err


def test_tfprofs_exceptions_are_not_ops(tmp_path: Path) -> None:
    """tfprof makes no node of ``_SOURCE`` (it runs on several devices), ``RecvTensor`` or a name
    containing ``MEMCPY``, so its run counts leave them out; memtrace's occurrences do too."""
    path = tmp_path / "t.pbtxt"
    path.write_text(
        'dev_stats { device: "/job:localhost/replica:0/task:0/device:CPU:0"\n'
        + "".join(f'  node_stats {{ node_name: "{name}" all_start_micros: {10 + k} all_end_rel_micros: 1 }}\n'
                  for k, name in enumerate(["_SOURCE", "RecvTensor", "MEMCPYHtoD", "a", "a"]))
        + "}\n"
    )
    report = ops(memtrace.load(path), by="node")
    assert [(r.name, r.occurrences) for r in report.rows] == [("a", 2)]
    assert report.total.occurrences == 2


def test_cli_ops_text_fits_100_columns_without_the_percentages(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ops", str(ALEXNET), "--top", "3"]) == 0  # not a terminal, no COLUMNS: 100 wide
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["op", "type", "count", "allocated", "peak", "output", "at", "peak", "waste"]
    assert lines[2].split()[:5] == ["Conv2DBackpropFilter", "5", "2.46", "GiB", "2.46"]
    assert max(len(line) for line in lines) <= 100
    assert lines[-2:] == [
        "sorted by peak_bytes; 'at peak' covers the peaks of: GPU_0_bfc, cuda_host_bfc, cpu; a wider terminal",
        "  (COLUMNS) also shows each size's (cumulative %, self %)",
    ]


# -- filters like tfprof's, --sort and --device as a new user meets them -------------------------


def test_ops_name_and_min_bytes_filter_nodes_before_grouping() -> None:
    trace = memtrace.load(ALEXNET)
    report = ops(trace, by="node", name="^conv[0-9]/Conv2D$")
    assert sorted(r.name for r in report.rows) == [f"conv{i}/Conv2D" for i in range(1, 6)]
    big = ops(trace, by="node", min_bytes=500 * 2**20)
    assert big.rows and all(r.requested_bytes >= 500 * 2**20 for r in big.rows)
    assert [r.name for r in ops(trace, by="type", name="^conv[0-9]/Conv2D$").rows] == ["Conv2D"]


def test_ops_filters_on_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ops", str(ALEXNET), "--json", "--by", "node", "--name", "LRN", "--min-bytes", "100MiB"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [r["name"] for r in rows] == ["lrn1/LRN"]


def test_sort_names_in_help_and_error_are_one_set(capsys: pytest.CaptureFixture[str]) -> None:
    from memtrace.analyses.ops import SORT_NAMES
    from memtrace.commands.ops import SORT_NAMES as HELP_NAMES

    assert HELP_NAMES == SORT_NAMES
    assert main(["ops", str(ALEXNET), "--sort", "bogus"]) == 2
    assert f"choose one of {', '.join(SORT_NAMES)}" in capsys.readouterr().err
    for name in SORT_NAMES:
        assert main(["ops", str(ALEXNET), "--sort", name, "--json"]) == 0
    capsys.readouterr()


def test_device_that_matches_nothing_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ops", str(ALEXNET), "--device", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("memtrace: error: --device 'nosuch' matches no device with ops; these have ops: ")
    assert "no op on a memory-owning device" not in err
