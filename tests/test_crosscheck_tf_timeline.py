"""TensorFlow's client timeline on the same traces: the numbers docs/peak.md quotes.

The client timeline counts only output tensors, by requested size, from creation to last use,
without temporaries or the baseline; so it must differ from memtrace's peak in the documented
way. Runs where TensorFlow is installed.
"""

from __future__ import annotations

import json

import pytest
from google.protobuf import text_format

import memtrace

from .conftest import ALEXNET, tensorflow_protos


def _client_timeline_peaks(path) -> dict[str, int]:
    step_stats_pb2, _, _ = tensorflow_protos()
    from tensorflow.python.client import timeline

    step_stats = text_format.Parse(path.read_text(), step_stats_pb2.StepStats())
    events = json.loads(timeline.Timeline(step_stats).generate_chrome_trace_format(show_memory=True))["traceEvents"]
    peaks: dict[str, int] = {}
    for event in events:
        if event.get("ph") == "C":
            for value in event["args"].values():
                peaks[event["name"]] = max(peaks.get(event["name"], 0), int(value))
    return peaks


def test_client_timeline_peak_on_alexnet_is_the_documented_one() -> None:
    theirs = _client_timeline_peaks(ALEXNET)
    trace = memtrace.load(ALEXNET)
    assert theirs["GPU_0_bfc"] == 765_575_168
    assert trace.peak("GPU_0_bfc").peak_bytes == 1_325_898_496
    # Host constants: 11 tensors of 16 requested bytes each, in 256-byte BFC chunks.
    assert theirs["cuda_host_bfc"] == 11 * 16
    assert trace.peak("cuda_host_bfc").peak_bytes == 11 * 256


def test_memtrace_peak_decomposes_into_outputs_temporaries_and_baseline() -> None:
    """The parts docs/peak.md lists, which the client timeline leaves out (temps, baseline, chunk sizes)."""
    p = memtrace.load(ALEXNET).peak("GPU_0_bfc")
    by_kind: dict[str, int] = {}
    for allocation in p.live_at_peak:
        by_kind[allocation.kind] = by_kind.get(allocation.kind, 0) + allocation.bytes
    assert by_kind == {"output": 988_203_520, "temp": 250_740_736}
    assert sum(a.requested_bytes or 0 for a in p.live_at_peak if a.kind == "output") == 902_890_496
    assert p.baseline_bytes + by_kind["output"] + by_kind["temp"] == p.peak_bytes


pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
