"""memtrace.testing: assertions that pass at the limit and fail with the limit, the value and who held the bytes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import memtrace
import memtrace.testing
from memtrace.errors import UsageError

from .conftest import ALEXNET, FIXTURES, ROOT

B8 = FIXTURES / "recorded" / "cpu_convnet_b8.pbtxt"
B16 = FIXTURES / "recorded" / "cpu_convnet_b16.pbtxt"


@pytest.fixture(scope="module")
def alexnet() -> memtrace.Trace:
    return memtrace.load(ALEXNET)


def test_reachable_as_an_attribute_after_import_memtrace() -> None:
    code = "import sys, memtrace; print(memtrace.testing.assert_peak_below.__module__, 'numpy' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.split() == ["memtrace.testing", "True"]


def test_peak_equal_to_the_limit_passes(alexnet: memtrace.Trace) -> None:
    result = memtrace.testing.assert_peak_below(alexnet, "GPU_0_bfc", 1_325_898_496)
    assert result.passed and result.outcomes[0].measured == 1_325_898_496


def test_peak_over_the_limit_says_limit_value_and_top_three(alexnet: memtrace.Trace) -> None:
    with pytest.raises(AssertionError) as caught:
        memtrace.testing.assert_peak_below(alexnet, "GPU_0_bfc", "1.2GiB")
    message = str(caught.value)
    lines = message.splitlines()
    assert lines[0] == ("GPU_0_bfc max_peak: 1.23 GiB (1,325,898,496 B) is over the limit 1.2 GiB (1,288,490,189 B) "
                        "(margin -35.7 MiB; limit from assert_peak_below)")
    assert lines[3:7] == [
        "  top contributors at the peak (shares of the peak, baseline included, 1.23 GiB):",
        "    gradients/conv4/Conv2D_grad/Conv2DBackpropInput temp/output: 281 MiB (22.3%)",
        "    lrn1/LRN output: 148 MiB (11.7%), tensors 98 MiB in the chunks",
        "    conv1-0-0-TransposeNCHWToNHWC-LayoutOptimizer output: 98 MiB (7.8%)",
    ]
    assert lines[-1] == f"  trace: {ALEXNET}"


def test_a_path_is_loaded() -> None:
    memtrace.testing.assert_peak_below(str(B8), "mklcpu", "736.1KiB")
    with pytest.raises(AssertionError, match="mklcpu max_peak: 736 KiB"):
        memtrace.testing.assert_peak_below(B8, "mklcpu", "700KiB")


def test_mistakes_are_usage_errors_not_failures(alexnet: memtrace.Trace) -> None:
    with pytest.raises(UsageError, match="it has: cpu, GPU_0_bfc, cuda_host_bfc"):
        memtrace.testing.assert_peak_below(alexnet, "GPU_1_bfc", "1GiB")
    with pytest.raises(UsageError, match="not a size: 'lots'"):
        memtrace.testing.assert_peak_below(alexnet, "GPU_0_bfc", "lots")
    with pytest.raises(UsageError, match='"5%"'):
        memtrace.testing.assert_no_regression(B8, B16, max_increase=0.05)  # type: ignore[arg-type]


def test_waste_assertion(alexnet: memtrace.Trace) -> None:
    memtrace.testing.assert_waste_below(alexnet, "GPU_0_bfc", "6.3%")
    with pytest.raises(AssertionError, match=r"GPU_0_bfc max_waste: 6.22% is over the limit 5%(.|\n)*most wasteful ops:\n"
                       r"    lrn1/LRN: 49.7 MiB"):
        memtrace.testing.assert_waste_below(alexnet, "GPU_0_bfc", "5%")


def test_within_budget_from_a_mapping_or_a_file(alexnet: memtrace.Trace, tmp_path: Path) -> None:
    result = memtrace.testing.assert_within_budget(alexnet, {"GPU_0_bfc": {"max_peak": "1.3GiB"}, "cuda_host_bfc": {"max_peak": 2816}})
    assert len(result.outcomes) == 2 and result.passed
    path = tmp_path / "budget.toml"
    path.write_text('[GPU_0_bfc]\nmax_peak = "1.3GiB"\nmax_peak_delta = "1GiB"\n')
    with pytest.raises(AssertionError, match=r"GPU_0_bfc max_peak_delta: 1.15 GiB \(1,238,944,256 B\) is over") as caught:
        memtrace.testing.assert_within_budget(alexnet, path)
    assert "max_peak:" not in str(caught.value)  # only the failed budget is explained


def test_regression_over_the_allowed_increase_fails_with_contributors() -> None:
    with pytest.raises(AssertionError) as caught:
        memtrace.testing.assert_no_regression(B8, B16, max_increase="5%")
    lines = str(caught.value).splitlines()
    assert lines[0] == ("mklcpu peak grew by 89.1%, more than the 5% allowed: 736 KiB (753,708 B) -> "
                        "1.36 MiB (1,425,452 B), +656 KiB")
    assert lines[1:5] == [
        "  top contributors at the new peak:",
        "    conv1/Relu output: 512 KiB (36.8%)",
        "    gradients/pool1_grad/MaxPoolGrad output: 512 KiB (36.8%)",
        "    pool1 output: 160 KiB (11.5%)",  # its pooled output and its argmax workspace: 128 KiB + 32 KiB
    ]
    assert "  ops that grew most:" in lines
    assert "    conv1/Relu: tfprof peak +256 KiB, held at the peaks +256 KiB" in lines


def test_no_regression_within_the_allowance_or_when_shrinking() -> None:
    result = memtrace.testing.assert_no_regression(B8, B16, max_increase="90%")
    assert result.allocators[0].delta_bytes == 671_744
    memtrace.testing.assert_no_regression(B16, B8)  # default: no growth at all allowed; this shrinks
    memtrace.testing.assert_no_regression(B8, FIXTURES / "recorded" / "cpu_convnet_b8.pb")  # the same step
