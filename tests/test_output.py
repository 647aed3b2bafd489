"""Where outputs go (``open_output``): never over an input, through links, in place on devices, one line on failure."""

from __future__ import annotations

import gzip
import os
import resource
import signal
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from .conftest import FIXTURES, ROOT, TINY, as_unprivileged
from .helpers import run

TRACE = TINY / "ties.pbtxt"
PROFILE = FIXTURES / "profiles" / "keras_mlp.xplane.pb.gz"


def one_error_line(code: int, err: str) -> bool:
    return code == 2 and err.startswith("memtrace: error: ") and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("command", [["summary"], ["report"], ["export"], ["graph"], ["timeline", "--csv"]])
@pytest.mark.parametrize("how", ["same", "symlink", "hardlink"])
def test_output_that_is_the_input_is_refused_and_the_input_kept(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: list[str], how: str
) -> None:
    trace = tmp_path / "in.pbtxt"
    trace.write_bytes(TRACE.read_bytes())
    output = {"same": trace, "symlink": tmp_path / "link", "hardlink": tmp_path / "hard"}[how]
    if how == "symlink":
        output.symlink_to(trace.name)
    elif how == "hardlink":
        os.link(trace, output)
    code, out, err = run(capsys, command[0], str(trace), *command[1:], "-o", str(output))
    assert one_error_line(code, err) and out == ""
    assert f"{output}: is the input {trace}" in err
    assert trace.read_bytes() == TRACE.read_bytes()


def test_output_that_is_a_budget_file_or_a_diff_input_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    budget = tmp_path / "b.toml"
    budget.write_text('[GPU_0_bfc]\nmax_peak = "1GiB"\n')
    code, _, err = run(capsys, "check", str(TRACE), "--budget", str(budget), "-o", str(budget))
    assert one_error_line(code, err) and budget.read_text() == '[GPU_0_bfc]\nmax_peak = "1GiB"\n'
    new = tmp_path / "new.pbtxt"
    new.write_bytes(TRACE.read_bytes())
    code, _, err = run(capsys, "diff", str(TRACE), str(new), "-o", str(new))
    assert one_error_line(code, err) and new.read_bytes() == TRACE.read_bytes()


def _logdir(tmp_path: Path) -> tuple[Path, Path]:
    """A TensorFlow 2 logdir with one run and its host's profile; returns the logdir and the profile."""
    run = tmp_path / "logs" / "plugins" / "profile" / "2026_01_31_12_00_00"
    run.mkdir(parents=True)
    host = run / "host.xplane.pb"
    host.write_bytes(gzip.decompress(PROFILE.read_bytes()))
    return tmp_path / "logs", host


@pytest.mark.parametrize("case", ["logdir", "run-directory", "symlink", "diff", "older-run"])
def test_output_that_is_a_file_a_directory_input_stands_for_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, case: str
) -> None:
    # GIVEN a logdir whose profile is the input WHEN -o names that profile, in whatever way THEN one line, exit 2.
    logdir, host = _logdir(tmp_path)
    original = host.read_bytes()
    if case == "older-run":  # a run --run could pick is an input as well as the newest one
        older = logdir / "plugins" / "profile" / "2026_01_01_00_00_00"
        older.mkdir()
        host = older / "other.xplane.pb"
        host.write_bytes(original)
    output = host
    if case == "symlink":
        output = tmp_path / "link.pb"
        output.symlink_to(host)
    argv = {"logdir": ["summary", str(logdir)], "run-directory": ["report", str(host.parent)],
            "symlink": ["summary", str(logdir)], "diff": ["diff", str(logdir), str(TRACE)],
            "older-run": ["peak", str(logdir)]}[case]
    code, out, err = run(capsys, *argv, "-o", str(output))
    assert one_error_line(code, err) and out == ""
    assert f"{output}: is the input " in err and err.rstrip().endswith("writing the output there would destroy it")
    assert host.read_bytes() == original


@pytest.mark.parametrize("command", [["summary"], ["report"], ["peak", "--json"]])
def test_output_onto_a_write_protected_file_is_refused_even_as_root(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: list[str]
) -> None:
    # Renaming over a file needs only the directory's permission (and root passes every check):
    # a file with no write bit for anyone is refused by its mode bits.
    protected = tmp_path / "keep.txt"
    protected.write_text("precious\n")
    protected.chmod(0o444)
    code, out, err = run(capsys, command[0], str(TRACE), *command[1:], "-o", str(protected))
    assert one_error_line(code, err) and out == ""
    assert err == (f"memtrace: error: {protected}: is write-protected (mode 0444); memtrace does not replace it "
                   "(make it writable, or write elsewhere)\n")
    assert protected.read_text() == "precious\n" and stat.S_IMODE(protected.stat().st_mode) == 0o444
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]  # no temporary file left either


def test_output_through_a_symlink_writes_its_target_and_keeps_the_link(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "real.txt").write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to("real.txt")
    dangling = tmp_path / "dangling.txt"
    dangling.symlink_to("fresh.txt")
    for output in (link, dangling):
        code, _, err = run(capsys, "summary", str(TRACE), "-o", str(output))
        assert code == 0 and err == ""
        assert output.is_symlink()
    assert (tmp_path / "real.txt").read_text().startswith(f"{TRACE}: StepStats (text)")
    assert (tmp_path / "fresh.txt").read_text() == (tmp_path / "real.txt").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling.txt", "fresh.txt", "link.txt", "real.txt"]


def test_output_to_a_fifo_is_written_in_place_not_renamed_over(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    code, _, err = run(capsys, "summary", str(TRACE), "-o", str(fifo))
    reader.join(10)
    assert code == 0 and err == ""
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert received[0].decode().startswith(f"{TRACE}: StepStats (text)")


def test_output_to_dev_null_leaves_the_device_a_device(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "summary", str(TRACE), "-o", os.devnull)
    assert (code, out, err) == (0, "", "")
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_output_to_a_directory_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "summary", str(TRACE), "-o", str(tmp_path))
    assert one_error_line(code, err)
    assert err == f"memtrace: error: {tmp_path}: is a directory\n"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_output_to_dev_full_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "report", str(TRACE), "-o", "/dev/full")
    assert err == "memtrace: error: /dev/full: cannot write: No space left on device\n" and code == 2
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_output_in_a_read_only_directory_is_one_line(tmp_path: Path) -> None:
    # As root (CI is root), the command runs without the capabilities that let root write anyway.
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        done = subprocess.run(as_unprivileged([sys.executable, "-m", "memtrace", "summary", str(TRACE),
                                               "-o", str(locked / "s.txt")]),
                              capture_output=True, text=True, check=False, env={**os.environ, "PYTHONPATH": str(ROOT)})
    finally:
        locked.chmod(0o755)
    assert done.stdout == "" and one_error_line(done.returncode, done.stderr)
    assert done.stderr == f"memtrace: error: {locked / 's.txt'}: cannot write: Permission denied\n"
    assert list(locked.iterdir()) == []


def _cli(argv: list[str], **options: object) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "memtrace", *argv], capture_output=False, check=False,
                          stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)}, **options)  # type: ignore[call-overload]


def _small_file_limit() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails (EFBIG) instead of killing
    resource.setrlimit(resource.RLIMIT_FSIZE, (100, 100))


def test_a_disk_that_fills_while_writing_is_one_line_and_leaves_no_partial_file(tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    done = _cli(["report", str(TRACE), "-o", str(target)], preexec_fn=_small_file_limit)
    err = done.stderr.decode()
    assert done.returncode == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"memtrace: error: {target}: cannot write: File too large")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_stdout_full_is_one_line() -> None:
    with open("/dev/full", "w") as full:
        done = _cli(["summary", str(TRACE)], stdout=full)
    assert done.returncode == 2
    assert done.stderr.decode() == "memtrace: error: standard output: cannot write: No space left on device\n"


def test_stdout_closed_is_one_line() -> None:
    done = subprocess.run(f"'{sys.executable}' -m memtrace summary '{TRACE}' >&-", shell=True, check=False,
                          stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2
    assert done.stderr.decode() == "memtrace: error: standard output is closed\n"
