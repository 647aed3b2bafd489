"""The reader: every input form of a trace loads to one model, and bad input fails clearly."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from google.protobuf import text_format

import memtrace
from memtrace.errors import TraceFormatError
from memtrace.read._proto import tf_trace_pb2 as pb

from .conftest import ALEXNET, FIXTURES, PTB, REAL_TRACES, RECORDED, ROOT, as_unprivileged, tensorflow_protos

CONVNET = FIXTURES / "recorded" / "cpu_convnet_b8.pbtxt"


# -- one model from every form -------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".pb", ".pb.gz", ".pbtxt.gz"])
def test_alexnet_forms_load_to_identical_models(suffix: str) -> None:
    text = memtrace.load(ALEXNET)
    other = memtrace.load(FIXTURES / f"alexnet_train_gpu{suffix}")
    assert other.same_content(text)
    assert other.message == "StepStats"


def test_recorded_binary_run_metadata_equals_text() -> None:
    text = memtrace.load(CONVNET)
    binary = memtrace.load(CONVNET.with_suffix(".pb"))
    assert text.message == binary.message == "RunMetadata"
    assert binary.source_format == "binary" and text.source_format == "text"
    assert binary.same_content(text)


@pytest.mark.parametrize("trace_path", REAL_TRACES, ids=lambda p: p.name)
def test_every_real_trace_in_every_form_loads_identically(trace_path: Path, tmp_path: Path) -> None:
    text = trace_path.read_text()
    message = pb.RunMetadata() if text.lstrip().startswith(("step_stats", "partition_graphs")) else pb.StepStats()
    text_format.Parse(text, message)
    binary = message.SerializeToString()
    forms = {"x.pb": binary, "x.pb.gz": gzip.compress(binary), "x.txt.gz": gzip.compress(text.encode())}
    reference = memtrace.load(trace_path)
    for name, data in forms.items():
        (tmp_path / name).write_bytes(data)
        assert memtrace.load(tmp_path / name).same_content(reference), name


def test_format_is_detected_from_content_not_name(tmp_path: Path) -> None:
    misleading = tmp_path / "looks_like_text.pbtxt"
    misleading.write_bytes((FIXTURES / "alexnet_train_gpu.pb.gz").read_bytes())
    trace = memtrace.load(misleading)
    assert trace.source_format == "binary+gzip"
    assert trace.same_content(memtrace.load(ALEXNET))


# -- the model's content against TensorFlow's own classes -------------------------------------


def _tf_columns(path: Path) -> dict[str, list]:
    """Read a trace with TensorFlow's generated classes and lay it out as memtrace's columns."""
    import tensorflow as tf

    step_stats_pb2, config_pb2, _ = tensorflow_protos()
    text = path.read_text()
    try:
        step_stats = text_format.Parse(text, step_stats_pb2.StepStats())
    except text_format.ParseError:
        step_stats = text_format.Parse(text, config_pb2.RunMetadata()).step_stats
    cols: dict[str, list] = {k: [] for k in (
        "node_name", "device", "start", "op_end", "end", "label", "temp", "persistent", "persistent_ids",
        "mem_node", "mem_allocator", "mem_total", "mem_peak", "mem_live", "mem_in_use",
        "rec_time", "rec_bytes", "rec_node", "out_node", "out_slot", "out_allocator", "out_id",
        "out_requested", "out_allocated", "out_ptr", "out_dtype", "out_shape",
    )}
    node = 0
    for dev in step_stats.dev_stats:
        for n in dev.node_stats:
            nanos = n.all_start_nanos != 0
            start = n.all_start_nanos if nanos else n.all_start_micros * 1000
            cols["node_name"].append(n.node_name)
            cols["device"].append(dev.device)
            cols["start"].append(start)
            cols["op_end"].append(start + (n.op_end_rel_nanos if nanos else n.op_end_rel_micros * 1000))
            cols["end"].append(start + (n.all_end_rel_nanos if nanos else n.all_end_rel_micros * 1000))
            cols["label"].append(n.timeline_label)
            cols["temp"].append(n.memory_stats.temp_memory_size)
            cols["persistent"].append(n.memory_stats.persistent_memory_size)
            cols["persistent_ids"].extend(n.memory_stats.persistent_tensor_alloc_ids)
            for m in n.memory:
                cols["mem_node"].append(node)
                cols["mem_allocator"].append(m.allocator_name)
                cols["mem_total"].append(m.total_bytes)
                cols["mem_peak"].append(m.peak_bytes)
                cols["mem_live"].append(m.live_bytes)
                cols["mem_in_use"].append(m.allocator_bytes_in_use)
                for r in m.allocation_records:
                    cols["rec_time"].append(r.alloc_micros * 1000)
                    cols["rec_bytes"].append(r.alloc_bytes)
                    cols["rec_node"].append(node)
            for o in n.output:
                td = o.tensor_description
                ad = td.allocation_description
                cols["out_node"].append(node)
                cols["out_slot"].append(o.slot)
                cols["out_allocator"].append(ad.allocator_name)
                cols["out_id"].append(ad.allocation_id)
                cols["out_requested"].append(ad.requested_bytes)
                cols["out_allocated"].append(ad.allocated_bytes)
                cols["out_ptr"].append(ad.ptr)
                cols["out_dtype"].append(tf.dtypes.as_dtype(td.dtype).name if td.dtype else "")
                known = td.HasField("shape") and not td.shape.unknown_rank
                cols["out_shape"].append([d.size for d in td.shape.dim] if known else None)
            node += 1
    return cols


@pytest.mark.parametrize("trace_path", REAL_TRACES, ids=lambda p: p.name)
def test_columns_equal_what_tensorflow_reads(trace_path: Path) -> None:
    expected = _tf_columns(trace_path)
    t = memtrace.load(trace_path)
    names = lambda idx: [t.strings[i] for i in idx]
    allocator = lambda idx: [t.allocators[i] if i >= 0 else "" for i in idx]
    n, m, r, o = t.nodes, t.memory, t.records, t.outputs
    assert names(n.name) == expected["node_name"]
    assert [t.devices.name[d] for d in n.device] == expected["device"]
    assert n.start_ns.tolist() == expected["start"]
    assert n.op_end_ns.tolist() == expected["op_end"]
    assert n.end_ns.tolist() == expected["end"]
    assert names(n.label) == expected["label"]
    assert n.temp_bytes.tolist() == expected["temp"]
    assert n.persistent_bytes.tolist() == expected["persistent"]
    assert n.persistent_ids.tolist() == expected["persistent_ids"]
    assert m.node.tolist() == expected["mem_node"]
    assert allocator(m.allocator) == expected["mem_allocator"]
    assert m.total_bytes.tolist() == expected["mem_total"]
    assert m.peak_bytes.tolist() == expected["mem_peak"]
    assert m.live_bytes.tolist() == expected["mem_live"]
    assert m.bytes_in_use.tolist() == expected["mem_in_use"]
    assert r.time_ns.tolist() == expected["rec_time"]
    assert r.bytes.tolist() == expected["rec_bytes"]
    assert r.node.tolist() == expected["rec_node"]
    assert o.node.tolist() == expected["out_node"]
    assert o.slot.tolist() == expected["out_slot"]
    assert allocator(o.allocator) == expected["out_allocator"]
    assert o.allocation_id.tolist() == expected["out_id"]
    assert o.requested_bytes.tolist() == expected["out_requested"]
    assert o.allocated_bytes.tolist() == expected["out_allocated"]
    assert o.ptr.tolist() == expected["out_ptr"]
    assert names(o.dtype) == expected["out_dtype"]
    assert [t.output_shape(i) for i in range(len(o))] == expected["out_shape"]


def test_records_belong_to_their_memory_entry() -> None:
    t = memtrace.load(PTB)
    offsets = t.memory.record_offsets
    for entry in range(len(t.memory)):
        rows = slice(offsets[entry], offsets[entry + 1])
        assert (t.records.memory[rows] == entry).all()
        assert (t.records.node[rows] == t.memory.node[entry]).all()
    assert offsets[-1] == len(t.records) == 2128


def test_nanoseconds_are_used_when_present() -> None:
    t = memtrace.load(CONVNET)
    # TensorFlow 2.21 writes *_nanos; a micros-only reading would give whole microseconds only.
    assert (t.nodes.start_ns % 1000 != 0).any()


def test_partition_graphs_give_op_types_and_inputs() -> None:
    t = memtrace.load(CONVNET)
    assert t.graph is not None and t.graph_source == "partition_graphs"
    assert len(t.graph) == 39
    ops = {t.strings[n]: t.strings[o] for n, o in zip(t.nodes.name, t.nodes.op_type)}
    assert ops["SparseSoftmaxCrossEntropyWithLogits/SparseSoftmaxCrossEntropyWithLogits"] == (
        "SparseSoftmaxCrossEntropyWithLogits"
    )
    assert ops["conv1/Relu"] == "_MklNativeFusedConv2D"  # oneDNN's fused kernel, as the graph says


def test_separate_graphdef_text_and_binary(tmp_path: Path) -> None:
    run_metadata = text_format.Parse(CONVNET.read_text(), pb.RunMetadata())
    graph = run_metadata.partition_graphs[0]
    (tmp_path / "g.pbtxt").write_text(text_format.MessageToString(graph))
    (tmp_path / "g.pb").write_bytes(graph.SerializeToString())
    from_text = memtrace.load(ALEXNET, graph=tmp_path / "g.pbtxt")
    from_binary = memtrace.load(ALEXNET, graph=tmp_path / "g.pb")
    assert from_text.graph_source == "graph file"
    assert from_text.same_content(from_binary)
    assert len(from_text.graph) == len(graph.node)


def test_labels_give_op_types_and_inputs_without_a_graph() -> None:
    t = memtrace.load(ALEXNET)
    node = [t.node_name(i) for i in range(len(t.nodes))].index("conv1/Conv2D")
    assert t.strings[t.nodes.op_type[node]] == "Conv2D"
    lo, hi = t.nodes.input_offsets[node], t.nodes.input_offsets[node + 1]
    inputs = [t.strings[i] for i in t.nodes.input_name[lo:hi]]
    assert inputs == ["conv1/Conv2D-0-TransposeNHWCToNCHW-LayoutOptimizer", "conv1/weights/read"]


def test_seed_oddities_are_noted_not_fatal() -> None:
    kinds = {o.kind: o.count for o in memtrace.load(PTB).oddities}
    assert kinds["output-without-allocator"] == 2
    assert kinds["requested-exceeds-allocated"] == 10


def test_step_span_is_from_first_start_to_last_end() -> None:
    t = memtrace.load(ALEXNET)
    started = t.nodes.start_ns > 0
    assert t.step_start_ns == int(t.nodes.start_ns[started].min())
    assert t.step_end_ns == int(t.nodes.end_ns[started].max())


# -- bad input: one clear error naming the file ----------------------------------------------


def _error(path: Path | str, graph: Path | None = None) -> TraceFormatError:
    with pytest.raises(TraceFormatError) as info:
        memtrace.load(path, graph=graph)
    message = str(info.value)
    assert message.startswith(str(path)), message
    assert "\n" not in message
    return info.value


def test_missing_file(tmp_path: Path) -> None:
    assert "no such file" in str(_error(tmp_path / "nope.pbtxt"))


def test_directory(tmp_path: Path) -> None:
    assert "directory" in str(_error(tmp_path))


def test_empty_file(tmp_path: Path) -> None:
    (tmp_path / "e.pbtxt").write_bytes(b"")
    assert "empty" in str(_error(tmp_path / "e.pbtxt"))


def test_random_bytes(tmp_path: Path) -> None:
    (tmp_path / "r.pb").write_bytes(np.random.default_rng(7).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    assert "not" in str(_error(tmp_path / "r.pb"))


def test_truncated_text_trace(tmp_path: Path) -> None:
    text = ALEXNET.read_text()
    (tmp_path / "t.pbtxt").write_text(text[: len(text) // 2])
    error = _error(tmp_path / "t.pbtxt")
    assert error.line is not None and error.line > 1000


def test_truncated_gzip(tmp_path: Path) -> None:
    data = (FIXTURES / "alexnet_train_gpu.pbtxt.gz").read_bytes()
    (tmp_path / "t.gz").write_bytes(data[: len(data) // 2])
    assert "gzip" in str(_error(tmp_path / "t.gz"))


def test_truncated_binary(tmp_path: Path) -> None:
    data = (FIXTURES / "alexnet_train_gpu.pb").read_bytes()
    (tmp_path / "t.pb").write_bytes(data[: len(data) // 2 + 3])
    _error(tmp_path / "t.pb")


def test_json_file(tmp_path: Path) -> None:
    (tmp_path / "t.json").write_text('{"traceEvents": []}')
    assert "JSON" in str(_error(tmp_path / "t.json"))


def test_graphdef_given_as_trace(tmp_path: Path) -> None:
    graph = text_format.Parse(CONVNET.read_text(), pb.RunMetadata()).partition_graphs[0]
    (tmp_path / "g.pbtxt").write_text(text_format.MessageToString(graph))
    (tmp_path / "g.pb").write_bytes(graph.SerializeToString())
    assert "GraphDef" in str(_error(tmp_path / "g.pbtxt"))
    assert "GraphDef" in str(_error(tmp_path / "g.pb"))


def test_trace_given_as_graph(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match="is a trace, not a GraphDef"):
        memtrace.load(ALEXNET, graph=ALEXNET)


def test_number_overflowing_int64(tmp_path: Path) -> None:
    (tmp_path / "o.pbtxt").write_text(
        'dev_stats {\n  device: "/cpu:0"\n  node_stats {\n    all_start_micros: 99999999999999999999\n  }\n}\n'
    )
    error = _error(tmp_path / "o.pbtxt")
    assert (error.line, error.column) == (4, 23)


def test_word_where_a_number_belongs(tmp_path: Path) -> None:
    (tmp_path / "w.pbtxt").write_text('dev_stats {\n  node_stats {\n    all_start_micros: lots\n  }\n}\n')
    error = _error(tmp_path / "w.pbtxt")
    assert error.line == 3


def test_unknown_field_name(tmp_path: Path) -> None:
    (tmp_path / "u.pbtxt").write_text('dev_stats {\n  node_stats {\n    bogus_field: 3\n  }\n}\n')
    error = _error(tmp_path / "u.pbtxt")
    assert error.line == 3 and "bogus_field" in str(error)
    assert "memtrace.tf." not in str(error)


def test_unknown_top_level_field(tmp_path: Path) -> None:
    (tmp_path / "u.pbtxt").write_text("hello: 1\n")
    assert "hello" in str(_error(tmp_path / "u.pbtxt"))


_LOAD_THEN_SUMMARY = """
import sys
import memtrace
from memtrace.cli import main
from memtrace.errors import TraceFormatError
try:
    memtrace.load(sys.argv[1])
except TraceFormatError as error:
    print(type(error).__name__, error)
sys.exit(main(["summary", sys.argv[1]]))
"""


def test_unreadable_file_is_an_error_not_a_crash(tmp_path: Path) -> None:
    # In a child that cannot read it: as root (CI is root), one without the capabilities that let root read anyway.
    path = tmp_path / "locked.pbtxt"
    path.write_text("dev_stats {}")
    path.chmod(0)
    done = subprocess.run(as_unprivileged([sys.executable, "-c", _LOAD_THEN_SUMMARY, str(path)]), capture_output=True,
                          text=True, check=False, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.stdout == f"TraceFormatError {path}: cannot read: Permission denied\n"
    assert (done.returncode, done.stderr) == (2, f"memtrace: error: {path}: cannot read: Permission denied\n")
    assert path.stat().st_mode & 0o777 == 0 and path.read_text() == "dev_stats {}"


def test_reading_never_modifies_the_input(tmp_path: Path) -> None:
    path = tmp_path / "t.pbtxt"
    path.write_bytes(ALEXNET.read_bytes())
    before = path.stat().st_mtime_ns
    memtrace.load(path)
    assert path.read_bytes() == ALEXNET.read_bytes() and path.stat().st_mtime_ns == before


def test_recorded_fixtures_exist() -> None:
    assert {p.name for p in RECORDED} >= {"cpu_convnet_b8.pbtxt", "cpu_while_rnn.pbtxt"}


# -- field names of older TensorFlow --------------------------------------------------------

TF14 = FIXTURES / "tiny" / "tf14_memory_stats.pbtxt"


def test_tf14_memory_stats_names_are_read_by_every_path(tmp_path: Path) -> None:
    """GIVEN MemoryStats as TF 1.4 wrote it (host_temp_memory_size, host_persistent_memory_size,
    host_persistent_tensor_alloc_ids: fields 1, 3, 5; device_*: fields 2, 4, 6)
    WHEN the fast text reader, protobuf, and the fast binary reader read it
    THEN all give one model: host_* are today's fields, device_* are kept apart."""
    from .fastpaths import fast, reference, same

    got, expected = fast(TF14), reference(TF14)
    assert got is not None and same(got, expected)
    nodes = expected.nodes
    assert nodes.temp_bytes.tolist() == [512, 0] and nodes.persistent_bytes.tolist() == [1024, 0]
    assert nodes.device_temp_bytes.tolist() == [0, 256] and nodes.device_persistent_bytes.tolist() == [0, 768]
    assert nodes.persistent_ids.tolist() == [3, 4]
    # The same message in binary (field numbers are what binary knows): fast binary == upb.
    text = TF14.read_text().replace("host_", "")
    (tmp_path / "t.pb").write_bytes(text_format.Parse(text, pb.StepStats()).SerializeToString())
    binary = fast(tmp_path / "t.pb")
    assert binary is not None and binary.same_content(expected) and binary.same_content(reference(tmp_path / "t.pb"))


def test_tf14_names_change_only_inside_memory_stats(tmp_path: Path) -> None:
    """A node named like an old field, and a comment, keep their text; protobuf reads the old names."""
    text = TF14.read_text().replace('node_name: "conv"', 'node_name: "host_temp_memory_size"')
    path = tmp_path / "t.pbtxt"
    path.write_text("# TF 1.4 text with a comment: protobuf reads it\n" + text)
    trace = memtrace.load(path)
    assert trace.node_name(0) == "host_temp_memory_size"
    assert trace.nodes.temp_bytes.tolist() == [512, 0]
