"""The Python face: each method of the trace ``memtrace.load`` returns answers as its command does."""

from __future__ import annotations

import json

import pytest

import memtrace

from .conftest import ALEXNET, RECORDED
from .helpers import run


def test_ops_frag_check_and_diff_answer_as_their_commands_do(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the AlexNet step WHEN asked through the API and through the command line THEN the same numbers.
    trace = memtrace.load(ALEXNET)
    _, out, _ = run(capsys, "ops", str(ALEXNET), "--json", "--top", "3")
    rows = json.loads(out)["rows"]
    assert [(r.name, r.peak_bytes) for r in trace.ops().rows[:3]] == [(r["name"], r["peak_bytes"]) for r in rows]
    assert rows[0]["peak_bytes"] == 2_643_156_736  # Conv2DBackpropFilter, as tfprof sums it (tests/test_ops_tfprof.py)

    _, out, _ = run(capsys, "frag", str(ALEXNET), "--json", "--allocator", "cuda_host_bfc")
    [host] = [a for a in trace.frag(["cuda_host_bfc"]).allocators]
    assert host.total.waste_bytes == json.loads(out)["allocators"][0]["waste_bytes"] == 2640  # docs/fragmentation.md

    passed = trace.check({"GPU_0_bfc": {"max_peak": "1.3GiB"}})
    failed = trace.check({"GPU_0_bfc": {"max_peak": "1GiB"}})
    assert passed.passed and not failed.passed and failed.outcomes[0].measured == 1_325_898_496

    change = trace.diff(ALEXNET).allocators[0]
    assert change.base.peak_bytes == change.new.peak_bytes == 1_325_898_496


def test_diff_reads_a_path_or_a_trace_alike() -> None:
    small, large = (memtrace.load(p) for p in sorted(RECORDED)[:2])
    by_path = small.diff(large.path)
    by_trace = small.diff(large)
    assert [(c.allocator, c.new.peak_bytes) for c in by_path.allocators] == [
        (c.allocator, c.new.peak_bytes) for c in by_trace.allocators]
