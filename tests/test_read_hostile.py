"""Reading what an attacker hands over (issue 17): pipes read once, memory bounded, one line when refused."""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import memtrace
from memtrace.errors import TraceFormatError
from memtrace.read import detect, files
from memtrace.read import text as textreader

from .conftest import ROOT, TINY
from .fastpaths import fast, reference, same
from .helpers import run

TRACE = TINY / "ties.pbtxt"
# A form of text left to protobuf: a no-break space between two tokens (whitespace to protobuf's
# tokenizer, which reads text as str; the fast reader takes ASCII blanks only).
NBSP_NAME = 'node_name:\u00a0"a"'


# -- pipes: read once -------------------------------------------------------------------------


def _cli(argv: list[str], stdin: object = None, memory_mb: int = 0) -> subprocess.CompletedProcess[str]:
    """memtrace in its own process; with ``memory_mb``, its address space is limited to that much."""
    limit = ("import resource\n"
             f"resource.setrlimit(resource.RLIMIT_AS, ({memory_mb << 20}, {memory_mb << 20}))\n") if memory_mb else ""
    code = (f"{limit}import sys\nfrom memtrace.cli import main\ncode = main(sys.argv[1:])\n"
            "sys.stdout.flush()\n"
            # VmHWM, not ru_maxrss: the latter keeps the high-water mark of the process before exec (pytest's)
            "peak = next(line for line in open('/proc/self/status') if line.startswith('VmHWM:'))\n"
            "print('RSS_MB', int(peak.split()[1]) // 1024, file=sys.stderr)\n"
            "sys.exit(code)")
    return subprocess.run([sys.executable, "-c", code, *argv], stdin=stdin, capture_output=True, text=True,  # type: ignore[call-overload]
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60, check=False)


def _said(done: subprocess.CompletedProcess[str]) -> tuple[list[str], int]:
    """stderr's lines without the RSS line, and the peak RSS in MB."""
    lines = done.stderr.splitlines()
    return [line for line in lines if not line.startswith("RSS_MB")], int(lines[-1].split()[1])


@pytest.mark.parametrize("compressed", [False, True], ids=["text", "gzip"])
def test_dash_reads_standard_input(tmp_path: Path, compressed: bool) -> None:
    data = TRACE.read_bytes()
    piped = tmp_path / "in"
    piped.write_bytes(gzip.compress(data) if compressed else data)
    with piped.open("rb") as stdin, subprocess.Popen(["cat"], stdin=stdin, stdout=subprocess.PIPE) as cat:
        done = _cli(["summary", "-"], stdin=cat.stdout)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "<stdin>: StepStats (text" + ("+gzip)" if compressed else ")")
    assert done.stdout.splitlines()[1:] == _cli(["summary", str(TRACE)]).stdout.splitlines()[1:]


def test_empty_standard_input_is_one_line() -> None:
    done = _cli(["summary", "-"], stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and _said(done)[0] == ["memtrace: error: <stdin>: the file is empty"]


def test_a_fifo_fed_once_is_read_once(tmp_path: Path) -> None:
    """The fast path used to read it, fail to seek, and open it again: forever waiting for a writer."""
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(TRACE.read_bytes()))
    writer.start()
    trace = memtrace.load(fifo)
    writer.join(10)
    assert trace.path == str(fifo) and trace.same_content(reference(TRACE))


def _feed(fifo: Path, data: bytes) -> threading.Thread:
    def write() -> None:
        with contextlib.suppress(BrokenPipeError), fifo.open("wb") as out:
            out.write(data)

    writer = threading.Thread(target=write)
    writer.start()
    return writer


def test_the_spool_keeps_no_more_than_its_cap_and_the_fast_path_reads_on(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A pipe of valid text longer than the spool's cap streams, and the spool stops growing."""
    monkeypatch.setattr(files, "SPOOL_IN_MEMORY_BYTES", 1 << 10)
    monkeypatch.setattr(files, "SPOOL_MAX_BYTES", 4 << 10)
    kept: list[int] = []
    original = files._Replayable.readinto

    def spy(self: files._Replayable, buffer: object) -> int:
        count = original(self, buffer)
        kept.append(self._kept_bytes)
        return count

    monkeypatch.setattr(files._Replayable, "readinto", spy)
    text = TRACE.read_text()
    padded = text.replace("dev_stats {\n", "dev_stats {\n" + "  # a comment line to make the pipe long\n" * 1000, 1)
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    writer = _feed(fifo, padded.encode())
    trace = memtrace.load(fifo)
    writer.join(10)
    assert trace.same_content(reference(TRACE))
    assert len(padded) > 8 * (4 << 10) and kept and max(kept) <= 4 << 10


@pytest.mark.parametrize("through", ["fifo", "stdin"])
def test_a_pipe_beyond_the_spool_in_a_form_left_to_protobuf_is_refused_in_one_line(
        through: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(files, "REFERENCE_MAX_BYTES", 4 << 10)
    monkeypatch.setattr(files, "SPOOL_MAX_BYTES", 5 << 10)
    text = TRACE.read_text().replace('node_name: "a"', NBSP_NAME)
    data = text.replace("dev_stats {\n", "dev_stats {\n" + "  # a comment line to make the pipe long\n" * 1000, 1).encode()
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    writer = _feed(fifo, data)
    if through == "stdin":
        with fifo.open("rb") as pipe:
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(pipe))
            code, out, err = run(capsys, "summary", "-")
        name = "<stdin>"
    else:
        code, out, err = run(capsys, "summary", str(fifo))
        name = str(fifo)
    writer.join(10)
    assert (code, out) == (2, "")
    assert err == (f"memtrace: error: {name}: over 4 KiB in a form memtrace's streaming readers do not take, and too "
                   "large for protobuf's own parser (damaged, or not written by a protobuf printer?)\n")


def test_a_pipe_the_fast_path_declines_is_read_again_from_what_was_kept(tmp_path: Path) -> None:
    """Single quotes are left to protobuf: the second reading comes from the spooled copy."""
    quoted = TRACE.read_text().replace('"', "'").encode()
    read_fd, write_fd = os.pipe()
    writer = threading.Thread(target=lambda: (os.write(write_fd, quoted), os.close(write_fd)))
    writer.start()
    try:
        trace = memtrace.load(f"/dev/fd/{read_fd}")
    finally:
        writer.join(10)
        os.close(read_fd)
    assert trace.same_content(reference(TRACE))


# -- memory: bounded, or refused in one line ---------------------------------------------------


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_dev_zero_is_refused_with_bounded_memory() -> None:
    done = _cli(["summary", "/dev/zero"], memory_mb=2048)
    lines, rss_mb = _said(done)
    assert done.returncode == 2 and len(lines) == 1
    assert lines[0].startswith("memtrace: error: /dev/zero: over 256 MiB in a form memtrace's streaming readers do not take")
    assert rss_mb < 600


def test_a_gzip_bomb_is_refused_with_bounded_memory(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.pb.gz"
    with gzip.open(bomb, "wb", compresslevel=1) as out:
        for _ in range(300):
            out.write(bytes(1 << 20))
    assert bomb.stat().st_size < 2 << 20
    done = _cli(["summary", str(bomb)], memory_mb=2048)
    lines, rss_mb = _said(done)
    assert done.returncode == 2 and len(lines) == 1
    assert lines[0].startswith(f"memtrace: error: {bomb}: over 256 MiB")
    assert rss_mb < 600


def _gzip_of(path: Path, head: bytes, zeros_mib: int, filler: bytes = b"\0") -> Path:
    """``head`` and then ``zeros_mib`` MiB of ``filler``, gzip-compressed a piece at a time."""
    with gzip.open(path, "wb", compresslevel=1) as out:
        out.write(head)
        piece = filler * (1 << 20)
        for _ in range(zeros_mib):
            out.write(piece)
    return path


def _keras_profile() -> bytes:
    return gzip.decompress((ROOT / "fixtures" / "profiles" / "keras_mlp.xplane.pb.gz").read_bytes())


def test_a_profile_that_inflates_without_end_is_refused_at_the_cap(tmp_path: Path) -> None:
    """Issue 25 item 8: a profile's gzip was inflated into a temporary file with no cap (4 GB of disk from 4 MiB)."""
    run_dir = tmp_path / "logdir" / "plugins" / "profile" / "run1"
    run_dir.mkdir(parents=True)
    bomb = _gzip_of(run_dir / "host.xplane.pb.gz", _keras_profile(), 300)
    assert bomb.stat().st_size < 2 << 20
    done = _cli(["summary", str(tmp_path / "logdir")], memory_mb=1024)
    lines, rss_mb = _said(done)
    assert done.returncode == 2 and lines == [
        (f"memtrace: error: {bomb}: gzip data that inflates to over 256 MiB, over 100 times its compressed size "
        "(memtrace inflates no more: a compression bomb, or not a trace?)")]
    assert rss_mb < 200


@pytest.mark.parametrize("form", ["text", "profile"])
def test_what_a_compressed_input_may_inflate_to_is_capped_on_the_streaming_paths(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], form: str) -> None:
    """The cap, made small: text streamed by the fast reader (spaces, which it would read to the end)
    and a profile inflated for the fast path, both refused once past it; a real trace under it reads."""
    monkeypatch.setattr(files, "INFLATE_FLOOR_BYTES", 1 << 20)
    if form == "text":
        path = _gzip_of(tmp_path / "t.pbtxt.gz", b'dev_stats {\n  device: "/cpu:0"\n', 8, b" ")
    else:
        path = _gzip_of(tmp_path / "host.xplane.pb.gz", _keras_profile(), 8)
    code, out, err = run(capsys, "summary", str(path))
    assert code == 2 and out == ""
    assert err == (f"memtrace: error: {path}: gzip data that inflates to over 1 MiB, over 100 times its compressed size "
                   "(memtrace inflates no more: a compression bomb, or not a trace?)\n")
    assert run(capsys, "summary", str(ROOT / "fixtures" / "profiles" / "keras_mlp.xplane.pb.gz"))[0] == 0


@pytest.mark.parametrize(("head", "size"), [("profile", 8 << 30), ("zeros", 3 << 30)], ids=["profile-then-8GiB", "3GiB-of-zeros"])
def test_a_host_file_the_fast_path_declines_is_not_read_whole_past_the_reference_cap(
        tmp_path: Path, head: str, size: int) -> None:
    """Issue 25 item 9: a valid profile followed by 8 GiB of (sparse) zeros raised MemoryError; 3 GiB of zeros took 53 s."""
    import time

    run_dir = tmp_path / "logdir" / "plugins" / "profile" / "run1"
    run_dir.mkdir(parents=True)
    host = run_dir / "host.xplane.pb"
    host.write_bytes(_keras_profile() if head == "profile" else b"")
    os.truncate(host, host.stat().st_size + size)  # sparse: no disk written
    started = time.monotonic()
    done = _cli(["summary", str(tmp_path / "logdir")], memory_mb=1024)
    lines, rss_mb = _said(done)
    assert done.returncode == 2 and lines == [
        (f"memtrace: error: {host}: a profile of {size >> 30} GiB that memtrace's fast reader cannot read (damaged, "
        "or not an XSpace?), and over the 256 MiB protobuf's own parser is given")]
    assert rss_mb < 200 and time.monotonic() - started < 20


def _one_long_line(tmp_path: Path, filler: bytes, size: int) -> Path:
    path = tmp_path / "long.pbtxt"
    path.write_bytes(b'dev_stats {\n  device: "/cpu:0"\n  node_stats {\n    node_name: "a"\n    all_start_micros: 1'
                     + filler * size + b"\n  }\n}\n")
    return path


@pytest.mark.parametrize("filler", [b" ", b"x"], ids=["spaces", "a-comment"])
def test_a_line_longer_than_the_limit_is_refused_in_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch, filler: bytes) -> None:
    monkeypatch.setattr(textreader, "MAX_LINE_BYTES", 1 << 20)
    monkeypatch.setattr(textreader, "CHUNK_BYTES", 1 << 16)
    path = _one_long_line(tmp_path, filler if filler == b" " else b"#" + filler, 2 << 20)
    code, out, err = run(capsys, "summary", str(path))
    assert code == 2 and out == ""
    assert err == f"memtrace: error: {path}: a line of over 1 MiB (no name or value is that long in a trace)\n"


def test_a_long_line_within_the_limit_still_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(textreader, "CHUNK_BYTES", 1 << 16)
    path = _one_long_line(tmp_path, b" ", 1 << 20)
    assert memtrace.load(path).same_content(reference(path))


def _small_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of 4 KiB, a first read (the sniff) as small, and 64 KiB at most with no place to cut."""
    monkeypatch.setattr(textreader, "CHUNK_BYTES", 1 << 12)
    monkeypatch.setattr(detect, "SNIFF_BYTES", 1 << 12)
    monkeypatch.setattr(detect, "SNIFF_CHARS", 1 << 10)
    monkeypatch.setattr(textreader, "MAX_UNCUT_BYTES", 1 << 16)


def test_nodes_with_no_line_of_their_own_stream_laid_out_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nodes many to a line (no line to cut before): the text is laid out again as it streams, and
    cut where its new lines can be; no chunk holds much more than a chunk's worth."""
    chunks: list[int] = []
    monkeypatch.setattr(textreader, "read_chunk", lambda chunk, state, builder, line, read=textreader.read_chunk: (
        chunks.append(len(chunk)), read(chunk, state, builder, line))[1])
    _small_reads(monkeypatch)
    node = 'node_stats { node_name: "n" all_start_micros: 1 } '
    path = tmp_path / "nodes-on-lines-of-ten.pbtxt"  # (each line indented as no printer would: nowhere to cut)
    path.write_text('dev_stats {\n  device: "/cpu:0"\n' + ("    " + node * 10 + "\n") * 800 + "}\n")
    trace = fast(path)
    assert trace is not None and len(trace.nodes) == 8000 and same(trace, reference(path))
    assert len(chunks) > 50 and max(chunks) <= 3 << 12


def test_a_node_too_large_to_cut_is_left_to_protobuf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Laid out again, a stretch with no place to cut (one node of many records) is held only so far."""
    from memtrace.read import text_layout

    held: list[int] = []
    original = text_layout.Layout.feed

    def spy(self: text_layout.Layout, text: bytes) -> None:
        original(self, text)
        held.append(sum(map(len, self.lines)))

    monkeypatch.setattr(text_layout.Layout, "feed", spy)
    _small_reads(monkeypatch)
    records = "allocation_records { alloc_micros: 1 alloc_bytes: 8 } " * 4000
    node = f'node_stats {{ node_name: "n" all_start_micros: 1 memory {{ allocator_name: "cpu" {records}}} }} '
    path = tmp_path / "a-large-node.pbtxt"
    path.write_text('dev_stats { device: "/cpu:0" node_stats { node_name: "small" } ' + node * 2 + "}\n")
    assert fast(path) is None
    # The lines of at most 64 KiB of text and a piece (indentation can double them), not the whole file.
    assert held and max(held) <= 2 * ((1 << 16) + (1 << 12)) < path.stat().st_size
    assert len(memtrace.load(path).nodes) == 3


def test_the_reference_path_refuses_more_than_its_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:

    monkeypatch.setattr(files, "REFERENCE_MAX_BYTES", 100)
    path = tmp_path / "nbsp.pbtxt"
    spaced = TRACE.read_text().replace('node_name: "a"', NBSP_NAME)
    path.write_text(spaced)
    with pytest.raises(TraceFormatError, match="over 100 B in a form"):
        memtrace.load(path)
    path.write_bytes(gzip.compress(spaced.encode()))
    with pytest.raises(TraceFormatError, match="over 100 B in a form"):
        memtrace.load(path)


# -- binary: a length claims what it likes; nothing is allocated on its word --------------------


def _varint(value: int) -> bytes:
    out = b""
    while value > 0x7F:
        out += bytes([value & 0x7F | 0x80])
        value >>= 7
    return out + bytes([value])


def _field(number: int, payload: bytes, claimed: int | None = None) -> bytes:
    """A length-delimited field, its length as given (``claimed``) or true."""
    return _varint(number << 3 | 2) + _varint(len(payload) if claimed is None else claimed) + payload


_DEVICE_NAME = _field(1, b"/job:localhost/replica:0/task:0/device:CPU:0")
_BINARY_NODE = _field(1, b"a") + b"\x10" + _varint(5)
_STEP_STATS = _field(1, _field(1, _DEVICE_NAME + _field(2, _BINARY_NODE)))
HUGE_CLAIMS = {  # 1 KB files each claiming 2 GiB somewhere, and what they are told
    "node_stats": (_field(1, _DEVICE_NAME + _field(2, _BINARY_NODE, claimed=2 << 30)), "a node_stats of 2 GiB, over the 64 MiB"),
    "thread_names": (_field(1, _DEVICE_NAME + _field(3, b"\x08\x01", claimed=2 << 30)),
                     "a thread_names entry of 2 GiB, over the 64 MiB"),
    "graph": (_STEP_STATS + _field(3, b"\x0a\x00", claimed=2 << 30), "a RunMetadata graph of 2 GiB, over the 256 MiB"),
}


@pytest.mark.parametrize("name", list(HUGE_CLAIMS))
def test_a_binary_length_claiming_2_gib_is_refused_in_one_line_and_never_allocated(name: str, tmp_path: Path) -> None:
    data, said = HUGE_CLAIMS[name]
    path = tmp_path / f"{name}.pb"
    path.write_bytes(data + bytes(1000))
    done = _cli(["summary", str(path)], memory_mb=1024)
    lines, rss_mb = _said(done)
    assert done.returncode == 2 and lines == [
        f"memtrace: error: {path}: {said} memtrace takes for one (damaged, or not a trace?)"]
    assert rss_mb < 200


def test_the_binary_reader_reads_what_is_there_not_what_a_length_claims(monkeypatch: pytest.MonkeyPatch,
                                                                          tmp_path: Path) -> None:
    """Each read of the stream asks for a piece, so a claim past the end allocates nothing."""
    from memtrace.read import binary

    asked: list[int] = []
    original = binary._Window.fill

    def spy(self: binary._Window, upto: int, keep: int) -> None:
        before = self.stream.read

        def read(size: int = -1) -> bytes:
            asked.append(size)
            return before(size)

        self.stream = type("Spied", (), {"read": staticmethod(read)})()
        try:
            original(self, upto, keep)
        finally:
            self.stream = type("Plain", (), {"read": staticmethod(before)})()

    monkeypatch.setattr(binary._Window, "fill", spy)
    path = tmp_path / "graph.pb"  # a RunMetadata graph claiming 200 MiB (under its cap) in 1 KB
    path.write_bytes(_STEP_STATS + _field(3, b"\x0a\x00", claimed=200 << 20) + bytes(1000))
    assert fast(path) is None  # truncated: protobuf's reading says so
    assert asked and max(asked) <= binary.READ_BYTES


def test_a_real_node_over_its_cap_is_refused_in_one_line_with_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "name.pb"
    path.write_bytes(_field(1, _DEVICE_NAME + _field(2, _field(1, b"n" * (70 << 20)) + b"\x10\x05")))
    done = _cli(["summary", str(path)], memory_mb=1024)
    lines, rss_mb = _said(done)
    assert done.returncode == 2 and lines == [
        f"memtrace: error: {path}: a node_stats of 70 MiB, over the 64 MiB memtrace takes for one (damaged, or not a trace?)"]
    assert rss_mb < 200


# -- times beyond int64 nanoseconds: the same clear error on every path --------------------------

_NODE = 'dev_stats {{\n  device: "/cpu:0"\n  node_stats {{\n    node_name: "a"\n{fields}  }}\n}}\n'
OUT_OF_RANGE = {
    "start-micros": ("    all_start_micros: 9223372036854776\n", "all_start time out of range"),
    "rel-micros": ("    all_start_micros: 5\n    op_end_rel_micros: 9223372036854775000\n", "op_end_rel time out of range"),
    "nanos-summing-past-int64": ("    all_start_nanos: 9223372036854775000\n    all_end_rel_nanos: 9223372036854775000\n",
                                 "all_start time out of range"),
    "int64-min": ("    all_start_micros: 5\n    all_end_rel_nanos: -9223372036854775808\n    all_start_nanos: 5\n",
                  "all_end_rel time out of range"),
    "record-micros": (('    all_start_micros: 5\n    memory {\n      allocator_name: "c"\n      allocation_records {\n'
                      "        alloc_micros: 9223372036854775000\n        alloc_bytes: 4\n      }\n    }\n"),
                      "alloc_micros of a record out of range"),
}


@pytest.mark.parametrize("form", ["text", "binary"])
@pytest.mark.parametrize("case", list(OUT_OF_RANGE))
def test_a_time_beyond_int64_nanoseconds_is_one_error_on_every_path(tmp_path: Path, case: str, form: str) -> None:
    from google.protobuf import text_format

    from memtrace.read._proto import tf_trace_pb2 as pb

    fields, says = OUT_OF_RANGE[case]
    text = _NODE.format(fields=fields)
    path = tmp_path / ("t.pbtxt" if form == "text" else "t.pb")
    path.write_bytes(text.encode() if form == "text" else text_format.Parse(text, pb.StepStats()).SerializeToString())
    expected = f"{path}: node 'a': {says} (146 years or more)"
    for read in (fast, reference, memtrace.load):
        with pytest.raises(TraceFormatError) as refused:
            read(path)
        assert str(refused.value) == expected


# tfprof's own GPU test data (tensorflow/core/profiler/internal/testdata/run_meta) has stream nodes
# whose scheduled_micros hold nanoseconds, about 1.5e18: no number memtrace gives depends on it.
_SCHEDULED_IN_NANOS = (
    'dev_stats {\n  device: "/job:localhost/replica:0/task:0/device:GPU:0"\n'
    '  node_stats {\n    node_name: "Conv2D"\n    all_start_micros: 10\n    op_end_rel_micros: 4\n'
    '    all_end_rel_micros: 5\n    scheduled_micros: 1500000000000000000\n'
    '    memory {\n      allocator_name: "GPU_0_bfc"\n'
    '      allocation_records {\n        alloc_micros: 11\n        alloc_bytes: 768\n      }\n'
    '      allocation_records {\n        alloc_micros: 14\n        alloc_bytes: -768\n      }\n    }\n  }\n}\n'
    'dev_stats {\n  device: "/device:GPU:0/stream:all"\n'
    '  node_stats {\n    node_name: "Conv2D"\n    all_start_micros: 12\n    all_end_rel_micros: 2\n'
    '    scheduled_micros: 1500000000000012000\n  }\n}\n')


@pytest.mark.parametrize("form", ["text", "binary"])
def test_a_scheduled_time_in_nanoseconds_does_not_refuse_a_trace(tmp_path: Path, form: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 25 item 0: a field no number depends on never refuses a trace; the times used still read exactly."""
    from google.protobuf import text_format

    from memtrace.read._proto import tf_trace_pb2 as pb

    path = tmp_path / ("t.pbtxt" if form == "text" else "t.pb")
    path.write_bytes(_SCHEDULED_IN_NANOS.encode() if form == "text"
                     else text_format.Parse(_SCHEDULED_IN_NANOS, pb.StepStats()).SerializeToString())
    trace = fast(path)
    assert trace is not None and same(trace, reference(path)) and same(trace, memtrace.load(path))
    assert trace.nodes.start_ns.tolist() == [10_000, 12_000]
    code, out, err = run(capsys, "peak", "--json", str(path))
    assert code == 0 and err == ""
    assert '"peak_bytes": 768' in out  # the one buffer of 768 B, live from 11 us to 14 us


def test_the_largest_time_in_range_reads_on_both_paths(tmp_path: Path) -> None:
    path = tmp_path / "t.pbtxt"
    path.write_text(_NODE.format(fields="    all_start_micros: 4611686018427387\n    all_end_rel_micros: 1\n"))
    trace = fast(path)
    assert trace is not None and same(trace, reference(path))
    assert int(trace.nodes.start_ns[0]) == 4_611_686_018_427_387_000


def test_a_string_over_the_limit_is_refused_before_it_is_decoded(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """An 8 MB name of escapes once took 660 MB to decode; a name longer than any real one is refused."""
    from memtrace.read import text_chunks

    monkeypatch.setattr(text_chunks, "MAX_STRING_BYTES", 1 << 16)
    path = tmp_path / "name.pbtxt"
    name = '\\"' * (1 << 16)
    path.write_text(f'dev_stats {{\n  device: "/cpu:0"\n  node_stats {{\n    node_name: "{name}"\n'
                    "    all_start_micros: 1\n  }\n}\n")
    code, out, err = run(capsys, "summary", str(path))
    assert code == 2 and out == ""
    assert err == f"memtrace: error: {path}: a string of over 64 KiB (no name or label in a trace is that long)\n"
