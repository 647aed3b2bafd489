"""Progress while reading: the reader's callback, and the line the command shows on a terminal."""

from __future__ import annotations

import gzip
import io
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf import text_format

import memtrace
from memtrace.cli import main
from memtrace.read import binary as binreader
from memtrace.read import files
from memtrace.read import jobs as memtrace_jobs
from memtrace.read import text as textreader
from memtrace.read._proto import tf_trace_pb2 as pb
from memtrace.reporters import progress as progress_module
from memtrace.reporters.progress import ProgressLine

from .conftest import ALEXNET, FIXTURES, PTB, ROOT


def _calls(path: Path) -> list[tuple[int, int]]:
    calls: list[tuple[int, int]] = []
    memtrace.load(path, progress=lambda done, total: calls.append((done, total)))
    return calls


def test_progress_reports_bytes_read_up_to_the_file_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(textreader, "CHUNK_BYTES", 100_000)
    calls = _calls(PTB)
    size = PTB.stat().st_size
    assert len(calls) > 5  # one per chunk, then the end
    assert all(total == size for _, total in calls)
    done = [d for d, _ in calls]
    assert done == sorted(done) and done[-1] == size


@pytest.mark.parametrize("name", ["alexnet_train_gpu.pbtxt.gz", "alexnet_train_gpu.pb", "tiny/ties.pbtxt"])
def test_progress_ends_at_the_stored_size_on_every_path(name: str) -> None:
    path = FIXTURES / name
    calls = _calls(path)
    assert calls and calls[-1] == (path.stat().st_size, path.stat().st_size)


@pytest.mark.parametrize("jobs", [1, 2])
def test_binary_progress_comes_block_by_block(jobs: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(binreader, "BLOCK_BYTES", 5_000)
    monkeypatch.setattr(memtrace_jobs, "cores", lambda: 4)
    path = FIXTURES / "alexnet_train_gpu.pb"
    calls: list[tuple[int, int]] = []
    memtrace.load(path, progress=lambda done, total: calls.append((done, total)), jobs=jobs)
    size = path.stat().st_size
    assert len(calls) > 3 and all(total == size for _, total in calls)
    done = [d for d, _ in calls]
    assert done == sorted(done) and done[0] < size == done[-1]


def test_gzip_progress_counts_compressed_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(textreader, "CHUNK_BYTES", 100_000)
    path = tmp_path / "ptb.pbtxt.gz"
    path.write_bytes(gzip.compress(PTB.read_bytes()))
    calls = _calls(path)
    assert len(calls) > 2 and all(total == path.stat().st_size for _, total in calls)
    assert calls[0][0] < path.stat().st_size == calls[-1][0]


def test_gzip_binary_progress_comes_block_by_block_in_compressed_bytes(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(binreader, "BLOCK_BYTES", 5_000)
    monkeypatch.setattr(binreader, "READ_BYTES", 5_000)
    monkeypatch.setattr(files, "PIECE_BYTES", 5_000)  # gzip is inflated through a buffer of this size
    path = tmp_path / "ptb.pb.gz"
    message = text_format.Parse(PTB.read_text(), pb.StepStats())
    path.write_bytes(gzip.compress(message.SerializeToString()))  # 546 KB in 52 KB
    calls = _calls(path)
    size = path.stat().st_size
    assert len(calls) > 3 and all(total == size for _, total in calls)
    done = [d for d, _ in calls]
    assert done == sorted(done) and done[0] < size == done[-1]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_line_is_drawn_only_on_a_terminal_and_only_for_large_files(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress_module, "INTERVAL_S", 0.0)
    pipe, terminal = io.StringIO(), _Terminal()
    ProgressLine(pipe)(50_000_000, 100_000_000)
    ProgressLine(terminal)(5_000, 10_000)  # small file: done in a blink, no line
    assert pipe.getvalue() == "" and terminal.getvalue() == ""
    line = ProgressLine(terminal)
    line(50_000_000, 100_000_000)
    line(100_000_000, 100_000_000)
    assert " 50% (47.7 MiB of 95.4 MiB)" in terminal.getvalue()
    assert terminal.getvalue().count("\r\x1b[K") == 2
    line.close()
    assert terminal.getvalue().endswith("\r\x1b[K") and terminal.getvalue().count("\r\x1b[K") == 3


def test_command_shows_and_erases_the_line_on_a_terminal(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(progress_module, "MIN_BYTES", 0)
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["summary", str(ALEXNET)]) == 0
    shown = terminal.getvalue()
    assert "memtrace: reading trace 100%" in shown and shown.endswith("\r\x1b[K")
    assert "reading" not in capsys.readouterr().out


def test_command_is_silent_when_stderr_is_not_a_terminal(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(progress_module, "MIN_BYTES", 0)
    assert main(["summary", str(ALEXNET)]) == 0
    assert capsys.readouterr().err == ""


def test_line_is_erased_before_an_error_is_printed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(progress_module, "MIN_BYTES", 0)
    monkeypatch.setattr(progress_module, "INTERVAL_S", 0.0)
    monkeypatch.setattr(textreader, "CHUNK_BYTES", 100_000)
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    bad = tmp_path / "bad.pbtxt"  # wrong only at the very end, after the line has been drawn
    bad.write_bytes(PTB.read_bytes() + b"dev_stats {\n  bogus: 1\n}\n")
    assert main(["summary", str(bad)]) == 2
    drawn, _, after = terminal.getvalue().rpartition("\r\x1b[K")
    assert "memtrace: reading trace" in drawn
    assert after.startswith(f"memtrace: error: {bad}:47284:") and after.count("\n") == 1


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_real_terminal_sees_the_line_for_a_large_trace(tmp_path: Path) -> None:
    big = tmp_path / "ptb15.pbtxt"
    big.write_bytes(PTB.read_bytes() * 15)  # 21.7 MB: above the 20 MB threshold
    assert big.stat().st_size > progress_module.MIN_BYTES
    leader, follower = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([sys.executable, "-m", "memtrace", "summary", str(big)], stdout=subprocess.PIPE,
                               stderr=follower, env=env, cwd=ROOT)
    os.close(follower)
    seen = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 30)
        if not ready:
            break
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the follower side closed: the process is done
            break
        if not chunk:
            break
        seen += chunk
    out, _ = process.communicate(timeout=60)
    os.close(leader)
    assert process.returncode == 0 and b"GPU_0_bfc" in out
    assert b"memtrace: reading trace" in seen and seen.endswith(b"\r\x1b[K")
    assert b"reading" not in out
