"""A device where an allocator is named: ``CPU:0`` means mklcpu on one machine and cpu on another."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import memtrace
from memtrace.cli import main
from memtrace.errors import UsageError
from memtrace.trace.devices import resolve_allocator, short_device_name

from .conftest import ALEXNET, FIXTURES, PTB

B8 = FIXTURES / "recorded" / "cpu_convnet_b8.pbtxt"


@pytest.mark.parametrize(("path", "spec", "allocator"), [
    (ALEXNET, "GPU:0", "GPU_0_bfc"), (ALEXNET, "CPU:0", "cpu"), (ALEXNET, "/device:GPU:0", "GPU_0_bfc"),
    (ALEXNET, "/job:localhost/replica:0/task:0/device:GPU:0", "GPU_0_bfc"), (ALEXNET, "gpu:0", "GPU_0_bfc"),
    (PTB, "GPU:0", "GPU_0_bfc"), (PTB, "CPU:0", "cpu"), (B8, "CPU:0", "mklcpu"), (B8, "mklcpu", "mklcpu"),
])
def test_a_device_means_the_allocator_its_memory_went_through(path: Path, spec: str, allocator: str) -> None:
    assert resolve_allocator(memtrace.load(path), spec) == allocator


def test_short_device_names() -> None:
    assert short_device_name("/job:localhost/replica:0/task:0/device:CPU:0") == "CPU:0"
    assert short_device_name("/device:GPU:0/stream:13") is None
    assert short_device_name("GPU_0_bfc") is None


def test_an_unknown_name_lists_allocators_and_devices() -> None:
    with pytest.raises(UsageError, match=r"no allocator 'GPU:0' in this trace \(it has: mklcpu\); a device names "
                                         r"its allocator too \(devices: CPU:0\)"):
        resolve_allocator(memtrace.load(B8), "GPU:0")


def test_peak_allocator_option_takes_a_device_and_says_which(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["peak", str(B8), "--allocator", "CPU:0", "--json"]) == 0
    out, err = capsys.readouterr()
    assert [a["allocator"] for a in json.loads(out)["allocators"]] == ["mklcpu"]
    assert err == "memtrace: CPU:0 means allocator mklcpu, the one its memory went through\n"


def test_check_takes_a_device_on_the_command_line_and_in_a_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["check", str(B8), "--max-peak", "CPU:0=700KiB"]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[3].split()[:4] == ["CPU:0", "(mklcpu)", "max_peak", "700"]
    assert "CPU:0 (mklcpu) max_peak: 736 KiB (753,708 B) is over the limit 700 KiB (716,800 B)" in out
    budget = tmp_path / "budget.toml"
    budget.write_text('["CPU:0"]\nmax_peak = "1MiB"\n')
    for trace in (B8, ALEXNET):  # mklcpu on one, cpu on the other: one file serves both
        assert main(["check", str(trace), "--budget", str(budget), "--json"]) == 0
        (entry,) = json.loads(capsys.readouterr().out)["budgets"]
        assert entry["device"] == "CPU:0" and entry["allocator"] == ("mklcpu" if trace == B8 else "cpu")


def test_assert_peak_below_takes_a_device() -> None:
    memtrace.testing.assert_peak_below(B8, "CPU:0", "736.1KiB")
    with pytest.raises(AssertionError, match=r"CPU:0 \(mklcpu\) max_peak: 736 KiB"):
        memtrace.testing.assert_peak_below(B8, "CPU:0", "700KiB")


def test_api_peak_takes_a_device() -> None:
    assert memtrace.load(B8).peak("CPU:0").allocator == "mklcpu"


def test_diff_pairs_a_devices_allocators_across_machines(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", str(B8), str(FIXTURES / "recorded" / "cpu_convnet_b16.pbtxt"), "--allocator", "CPU:0", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [a["allocator"] for a in document["allocators"]] == ["CPU:0 (mklcpu)"]
