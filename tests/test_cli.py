"""The command line: output, exit codes, and one clear line for every bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from memtrace.cli import main

from .conftest import ALEXNET, FIXTURES, PTB


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_summary_text_lists_devices_and_allocators(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "summary", str(ALEXNET))
    assert code == 0
    assert "/device:GPU:0/stream:all" in out and "stream" in out
    gpu = next(line for line in out.splitlines() if line.startswith("GPU_0_bfc"))
    assert gpu.split()[:6] == ["GPU_0_bfc", "194", "97", "97", "97", "85"]
    assert "records" in gpu


def test_summary_json_schema_and_counts(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "summary", str(PTB), "--json")
    document = json.loads(out)
    assert code == 0 and document["schema"] == "memtrace.summary/1"
    assert document["trace"] == str(PTB)
    assert document["nodes"] == 2087
    by_name = {a["allocator"]: a for a in document["allocators"]}
    assert sum(a["records"] for a in by_name.values()) == 2128
    assert by_name["cpu"]["sizes_tracked"] == "partly"
    assert by_name["GPU_0_bfc"]["snapshots"] == 556
    kinds = {d["kind"] for d in document["devices"]}
    assert kinds == {"device", "stream", "memcpy"}
    assert {o["kind"] for o in document["oddities"]} >= {"output-without-allocator", "requested-exceeds-allocated"}


def test_output_file_is_written_whole(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "s.json"
    code, out, _ = run(capsys, "summary", str(ALEXNET), "--json", "-o", str(target))
    assert code == 0 and out == ""
    assert json.loads(target.read_text())["schema"] == "memtrace.summary/1"
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]


def test_failed_command_leaves_existing_output_untouched(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "s.json"
    target.write_text("precious")
    code, _, err = run(capsys, "summary", str(tmp_path / "missing.pbtxt"), "-o", str(target))
    assert code == 2 and target.read_text() == "precious"
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    "content",
    [b"", b"\x00\x01garbage\xff" * 50, b'{"a": 1}', b"dev_stats { node_stats { all_start_micros: x } }"],
    ids=["empty", "random", "json", "word-for-number"],
)
def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.pbtxt"
    path.write_bytes(content)
    code, out, err = run(capsys, "summary", str(path))
    assert code == 2 and out == ""
    assert err.startswith(f"memtrace: error: {path}") and err.count("\n") == 1
    assert "Traceback" not in err


def test_unknown_option_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "summary", str(ALEXNET), "--frobnicate")
    assert code == 2 and "--frobnicate" in err


def test_no_command_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys)[0] == 2


def test_hostile_names_are_escaped_in_text(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "evil.pbtxt"
    path.write_text('dev_stats { device: "/cpu:0\\033[31m<script>" node_stats { node_name: "a" all_start_micros: 1 } }')
    code, out, _ = run(capsys, "summary", str(path))
    assert code == 0 and "\x1b" not in out and "\\x1b[31m<script>" in out


def test_console_script_end_to_end_without_traceback(tmp_path: Path) -> None:
    """A real process, as a user runs it: the installed entry point and its exit codes."""
    done = subprocess.run([sys.executable, "-m", "memtrace", "summary", str(FIXTURES / "alexnet_train_gpu.pb.gz")],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0 and "binary+gzip" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "memtrace", "summary", str(tmp_path)], capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and bad.stderr.count("\n") == 1


def test_help_does_not_import_heavy_modules() -> None:
    code = (
        "import sys\nfrom memtrace.cli import main\nassert main(['--help']) == 0\n"
        "heavy = [m for m in ('networkx', 'tensorflow', 'google.protobuf', 'numpy') if m in sys.modules]\n"
        "print('HEAVY=' + ','.join(heavy))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "usage: memtrace" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "HEAVY="
