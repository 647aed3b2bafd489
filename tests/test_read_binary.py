"""The fast binary reader: the same model as upb on every input, or it steps aside."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from google.protobuf import text_format
from hypothesis import HealthCheck, example, given, settings

from memtrace.read import binary as binreader
from memtrace.read import jobs as memtrace_jobs
from memtrace.read._proto import tf_trace_pb2 as pb

from .conftest import FIXTURES, PTB, REAL_TRACES, trace_files
from .fastpaths import DiesInAWorker, Edit, check, damaged, edits, fast
from .test_read_text import BASE, step_stats


def _message(path: Path) -> pb.StepStats | pb.RunMetadata:
    text = path.read_text()
    message = pb.RunMetadata() if text.lstrip().startswith(("step_stats", "partition_graphs")) else pb.StepStats()
    return text_format.Parse(text, message)


# TF2 profiles (XSpace) have a fast path of their own, held to upb in tests/test_xplane.py.
_BINARY = [p for p in trace_files(".pb", ".pb.gz") if ".xplane." not in p.name]


@pytest.mark.parametrize("path", _BINARY, ids=lambda p: p.name)
def test_binary_fixtures_read_fast_and_identically(path: Path) -> None:
    check(path)


@pytest.mark.parametrize("path", REAL_TRACES, ids=lambda p: p.name)
def test_every_real_trace_serialized_reads_fast_and_identically(path: Path, tmp_path: Path) -> None:
    binary = _message(path).SerializeToString()
    (tmp_path / "t.pb").write_bytes(binary)
    (tmp_path / "t.pb.gz").write_bytes(gzip.compress(binary))
    check(tmp_path / "t.pb")
    check(tmp_path / "t.pb.gz")
    assert fast(tmp_path / "t.pb").same_content(fast(path))  # type: ignore[union-attr, arg-type]



@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize("block_bytes", [1, 700, 20_000])
@pytest.mark.parametrize("name", ["alexnet_train_gpu.pbtxt", "ptb_lstm_train_gpu.pbtxt", "recorded/cpu_while_rnn.pbtxt"])
def test_small_blocks_give_the_same_model(name: str, block_bytes: int, jobs: int, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks cut within devices, between them, and one node at a time, all read as one (in this
    process, or decoded in two others after the first)."""
    monkeypatch.setattr(binreader, "BLOCK_BYTES", block_bytes)
    monkeypatch.setattr(memtrace_jobs, "cores", lambda: 4)  # (jobs are capped at the cores: CI may have one)
    flushes = []
    monkeypatch.setattr(binreader._Block, "flush", lambda self, flush=binreader._Block.flush: (
        flushes.append(len(self.starts)), flush(self))[1])
    path = tmp_path / "t.pb"
    path.write_bytes(_message(FIXTURES / name).SerializeToString())
    check(path, jobs=jobs)
    nodes = len(fast(FIXTURES / name).nodes)  # type: ignore[union-attr]
    assert sum(flushes) == nodes
    if block_bytes == 1:
        assert max(flushes) == 1  # one node a block
    else:
        assert len([f for f in flushes if f]) > 2


@pytest.mark.parametrize(("read_bytes", "block_bytes"), [(1, 1), (7, 700), (1000, 20_000), (5000, 1 << 30)])
@pytest.mark.parametrize("name", ["alexnet_train_gpu.pbtxt", "ptb_lstm_train_gpu.pbtxt"])
@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_reads_of_any_size_give_the_same_model(name: str, read_bytes: int, block_bytes: int, compress: bool,
                                               tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fields cut by the end of a read anywhere (tags, lengths, names, nodes), all read as one."""
    monkeypatch.setattr(binreader, "READ_BYTES", read_bytes)
    monkeypatch.setattr(binreader, "BLOCK_BYTES", block_bytes)
    data = _message(FIXTURES / name).SerializeToString()
    path = tmp_path / ("t.pb.gz" if compress else "t.pb")
    path.write_bytes(gzip.compress(data) if compress else data)
    check(path)


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_the_window_holds_a_block_or_two_not_the_file(compress: bool, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(binreader, "READ_BYTES", 20_000)
    monkeypatch.setattr(binreader, "BLOCK_BYTES", 20_000)
    held: list[int] = []
    monkeypatch.setattr(binreader._Window, "fill", lambda self, upto, keep, fill=binreader._Window.fill: (
        fill(self, upto, keep), held.append(len(self.buf)))[0])
    data = _message(PTB).SerializeToString()
    path = tmp_path / ("t.pb.gz" if compress else "t.pb")
    path.write_bytes(gzip.compress(data) if compress else data)
    check(path)
    after_head = held[next(i for i, n in enumerate(held) if n != held[0]):]
    assert len(data) > 500_000 and len(after_head) > 10
    assert max(after_head) <= 2 * 20_000 + 2_000  # a block, a read and a node


def test_blocks_a_dead_worker_leaves_are_decoded_in_the_main_process(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(binreader, "BLOCK_BYTES", 20_000)
    monkeypatch.setattr(memtrace_jobs, "cores", lambda: 4)
    decoded_here: list[int] = []
    decode = binreader._decode_block
    monkeypatch.setattr(binreader, "_decode_block", DiesInAWorker(lambda *block: (decoded_here.append(1), decode(*block))[1]))
    path = tmp_path / "t.pb"
    path.write_bytes(_message(PTB).SerializeToString())
    check(path, jobs=2)
    assert len(decoded_here) > 20  # every block of the 546 KB, the workers' too


def _base() -> pb.StepStats:
    return text_format.Parse(BASE, pb.StepStats())


def _write(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "t.pb"
    path.write_bytes(data)
    return path


def test_packed_and_unpacked_repeated_ids_agree(tmp_path: Path) -> None:
    message = _base()
    packed = message.SerializeToString()  # proto3 packs repeated int64
    ids = message.dev_stats[0].node_stats[0].memory_stats.persistent_tensor_alloc_ids
    assert list(ids) == [3, 4]
    stats = message.dev_stats[0].node_stats[0].memory_stats
    stats_bytes = stats.SerializeToString()
    unpacked_stats = stats_bytes.replace(b"\x2a\x02\x03\x04", b"\x28\x03\x28\x04")  # field 5: LEN [3, 4] -> two varints
    assert unpacked_stats != stats_bytes
    unpacked = packed.replace(stats_bytes, unpacked_stats)
    check(_write(tmp_path, packed))
    path = _write(tmp_path, unpacked)
    check(path)
    assert fast(path).nodes.persistent_ids.tolist() == [3, 4]  # type: ignore[union-attr]


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        out.append(value & 0x7F | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            return bytes(out)


def _step_stats_around(node: bytes) -> bytes:
    """A StepStats with one device holding one node whose wire bytes are ``node``, as given."""
    device = b"\x0a\x06/cpu:0" + b"\x12" + _varint(len(node)) + node
    return b"\x0a" + _varint(len(device)) + device


def test_unknown_fields_are_skipped_as_upb_skips_them(tmp_path: Path) -> None:
    node = text_format.Parse(BASE, pb.StepStats()).dev_stats[0].node_stats[0].SerializeToString()
    extra = b"\xf8\x01\x05" + b"\xfa\x01\x02hi" + b"\xfd\x01\x00\x00\x00\x00" + b"\xf9\x01" + bytes(8)  # field 31, 4 wire types
    path = _write(tmp_path, _step_stats_around(node + extra))
    check(path)
    assert fast(path).same_content(fast(_write(tmp_path, _step_stats_around(node))))  # type: ignore[union-attr, arg-type]


def test_run_metadata_with_graphs(tmp_path: Path) -> None:
    metadata = pb.RunMetadata()
    metadata.step_stats.CopyFrom(_base())
    node = metadata.partition_graphs.add().node.add()
    node.name, node.op = "relu", "Relu"
    node.input.append("conv1/Conv2D:1")
    path = _write(tmp_path, metadata.SerializeToString())
    check(path)
    trace = fast(path)
    assert trace is not None and trace.message == "RunMetadata" and trace.graph_source == "partition_graphs"


@pytest.mark.parametrize("extra", [
    b"\x10\x05",  # all_start_micros again: upb keeps the last
    b"\x15\x01\x02\x03\x04",  # all_start_micros as fixed32: upb keeps it aside as unknown
    b"\x0a\x02\xff\xfe",  # a node name that is not UTF-8
    b"\x1b\x1c",  # a group
    b"\x12\x05ab",  # a message running past its parent
    b"\x62\x00\x62\x00",  # memory_stats twice: upb merges them
], ids=["scalar twice", "wrong wire type", "not utf-8", "group", "overrun", "message twice"])
def test_what_the_fast_reader_leaves_to_upb(extra: bytes, tmp_path: Path) -> None:
    node = text_format.Parse(BASE, pb.StepStats()).dev_stats[0].node_stats[0].SerializeToString()
    check(_write(tmp_path, _step_stats_around(node + extra)), expect_fast=False)


def test_a_device_protobuf_would_not_take_for_one_is_left_to_upb(tmp_path: Path) -> None:
    message = _base()
    message.dev_stats[1].device = "stream:all"  # StepStats reading rejected: the reference decides
    check(_write(tmp_path, message.SerializeToString()), expect_fast=False)


_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_SETTINGS
@given(message=step_stats())
def test_generated_traces_read_identically(message: pb.StepStats, tmp_path: Path) -> None:
    data = message.SerializeToString()
    if not data:
        return
    path = _write(tmp_path, data)
    check(path, expect_fast=None)
    if all(d.device == "" or d.device.startswith("/") for d in message.dev_stats):
        assert fast(path) is not None


_SMALL = _base().SerializeToString()


@_SETTINGS
@given(changes=edits(len(_SMALL)))
@example(changes=[(276, 0, b"\x80\x80\x80")])  # a node's length claimed as 122 MiB: refused by both, each in its words
def test_damaged_binary_is_read_identically_or_left_to_upb(changes: list[Edit], tmp_path: Path) -> None:
    check(_write(tmp_path, damaged(_SMALL, changes)), expect_fast=None)
