"""Timelines: absolute where the baseline is known, and downsampling never loses the peak."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import memtrace
from memtrace.analyses.timeline import bucket_maxima

from .conftest import ALEXNET, PTB, TINY


def test_timeline_is_absolute_with_a_baseline() -> None:
    t = memtrace.load(TINY / "producer_free.pbtxt").timeline("bfc")
    assert t.baseline_bytes == 10000
    assert t.time_us.tolist() == [10, 15, 30, 105, 200]
    assert t.live_bytes.tolist() == [11024, 12048, 11024, 13072, 12048]


def test_timeline_is_relative_without_one() -> None:
    t = memtrace.load(TINY / "ties.pbtxt").timeline("bfc")
    assert t.baseline_bytes is None and t.live_bytes.tolist() == [256, 768, 512, 0]


def test_downsampling_keeps_the_peak_on_a_real_trace() -> None:
    trace = memtrace.load(PTB)
    full = trace.timeline("GPU_0_bfc")
    small = trace.timeline("GPU_0_bfc", points=50)
    assert len(small.time_us) <= 50 < len(full.time_us)
    assert small.live_bytes.max() == full.live_bytes.max() == trace.peak("GPU_0_bfc").peak_bytes


def test_alexnet_timeline_maximum_is_the_peak() -> None:
    trace = memtrace.load(ALEXNET)
    assert trace.timeline("GPU_0_bfc").live_bytes.max() == 1_325_898_496


@given(st.lists(st.tuples(st.integers(0, 10_000), st.integers(-(10**9), 10**9)), min_size=1, max_size=300),
       st.integers(1, 40))
def test_bucket_maxima_always_keeps_the_global_maximum(points: list[tuple[int, int]], buckets: int) -> None:
    points.sort(key=lambda p: p[0])
    time = np.array([p[0] for p in points], dtype=np.int64)
    values = np.array([p[1] for p in points], dtype=np.int64)
    keep = bucket_maxima(time, values, buckets)
    assert len(keep) <= buckets
    assert values[keep].max() == values.max()
    assert (np.diff(keep) > 0).all()


# -- as a new user meets it -------------------------------------------------------------------------


def test_points_keep_the_last_point_and_the_fall_after_the_peak() -> None:
    trace = memtrace.load(ALEXNET)
    full = trace.timeline("GPU_0_bfc")
    few = trace.timeline("GPU_0_bfc", points=10)
    assert len(few.time_us) <= 10
    assert few.live_bytes.max() == full.live_bytes.max()
    assert (few.time_us[-1], few.live_bytes[-1]) == (full.time_us[-1], full.live_bytes[-1])


def test_text_lists_largest_peak_first_and_draws_the_baseline(capsys: pytest.CaptureFixture[str]) -> None:
    from memtrace.cli import main

    assert main(["timeline", str(PTB)]) == 0
    lines = capsys.readouterr().out.splitlines()
    headers = [line.split(" ")[0] for line in lines if not line.startswith(" ")]
    assert headers == ["GPU_0_bfc", "cuda_host_bfc", "cpu_pool", "cpu"]
    gpu_bars = lines[1].strip()
    assert " " not in gpu_bars  # 10.2 MiB of baseline is never a blank cell
