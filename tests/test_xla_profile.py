"""A profile XLA recorded (JAX 0.11.2 on an H100): read, with the ops unknown, and held to the allocator's own stats.

The independent source is the profile itself, walked here with protobuf alone (not memtrace's
reader): every event's ``bytes_allocated`` (the allocator's bytes in use after it),
``peak_bytes_in_use`` (its own peak counter), ``fragmentation`` and ``addr``.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

import memtrace
from memtrace.cli import main
from memtrace.read._proto import xplane_pb2 as pb

JAX = Path(__file__).parent.parent / "fixtures" / "profiles" / "jax_gpu.xplane.pb.gz"


def _raw_events(allocator: str) -> list[dict[str, object]]:
    """The allocator's memory events as the profile holds them, in time order (ties in file order)."""
    space = pb.XSpace()
    space.ParseFromString(gzip.decompress(JAX.read_bytes()))
    events = []
    for plane in space.planes:
        names = {key: meta.name for key, meta in plane.stat_metadata.items()}
        kinds = {key: meta.name for key, meta in plane.event_metadata.items()}
        for line in plane.lines:
            for event in line.events:
                kind = kinds.get(event.metadata_id)
                if kind not in ("MemoryAllocation", "MemoryDeallocation"):
                    continue
                stats: dict[str, object] = {"alloc": kind == "MemoryAllocation",
                                            "time_ps": line.timestamp_ns * 1000 + event.offset_ps}
                for stat in event.stats:
                    which = stat.WhichOneof("value")
                    value = getattr(stat, which) if which else 0
                    stats[names[stat.metadata_id]] = names.get(value, "") if which == "ref_value" else value
                if stats.get("allocator_name") == allocator:
                    events.append(stats)
    return sorted(events, key=lambda e: e["time_ps"])  # type: ignore[arg-type,return-value]


@pytest.fixture(scope="module")
def trace() -> memtrace.Trace:
    return memtrace.load(JAX)


def test_xla_profile_is_read_with_its_allocators(trace: memtrace.Trace) -> None:
    assert trace.message == "XSpace" and set(trace.allocators) == {"GPU_0_bfc", "xla_gpu_host_bfc"}
    gpu = _raw_events("GPU_0_bfc")
    assert len(gpu) == 157 and sum(bool(e["alloc"]) for e in gpu) == 80
    # every allocation is a (no op) node: XLA names none
    assert {trace.node_name(int(n)) for n in trace.outputs.node} == {"(no op)"}
    [noted] = [o for o in trace.oddities if o.kind == "ops-unknown"]
    assert noted.count == 81 and noted.allocator is None and "XLA" in noted.example


def test_peak_is_the_allocators_own_peak_counter(trace: memtrace.Trace) -> None:
    gpu = _raw_events("GPU_0_bfc")
    peak = trace.peak("GPU_0_bfc")
    # the allocator's own counter (it starts at the allocator's birth: the first event's own chunk)
    assert gpu[0]["peak_bytes_in_use"] == gpu[0]["bytes_allocated"] == 256
    assert peak.peak_bytes == max(int(e["peak_bytes_in_use"]) for e in gpu) == 184_549_632  # type: ignore[call-overload]
    assert peak.baseline_bytes == 0
    assert (peak.reconciliation.snapshots, peak.reconciliation.matched) == (157, 157)
    assert peak.live_bytes_total == peak.peak_delta_bytes == 184_549_632
    assert len(peak.live_at_peak) == 6
    host = trace.peak("xla_gpu_host_bfc")
    assert host.peak_bytes == max(int(e["peak_bytes_in_use"]) for e in _raw_events("xla_gpu_host_bfc")) == 256  # type: ignore[call-overload]


def test_timeline_is_the_allocators_bytes_in_use_event_by_event(trace: memtrace.Trace) -> None:
    gpu = _raw_events("GPU_0_bfc")
    line = trace.timeline("GPU_0_bfc")
    assert line.baseline_bytes == 0
    assert line.live_bytes.tolist() == [int(e["bytes_allocated"]) for e in gpu]  # type: ignore[call-overload]
    # times in microseconds from the first event (this allocator's first: the profile's first memory event)
    first_ns = int(gpu[0]["time_ps"]) // 1000  # type: ignore[call-overload]
    assert line.time_us.tolist() == [(int(e["time_ps"]) // 1000 - first_ns) // 1000 for e in gpu]  # type: ignore[call-overload]


def test_frag_holds_the_allocators_own_metric_and_the_live_chunks(trace: memtrace.Trace) -> None:
    from memtrace.frag import fragmentation

    gpu = _raw_events("GPU_0_bfc")
    result = fragmentation(trace, "GPU_0_bfc")
    assert result is not None and result.tf_metric is not None
    values = [float(e["fragmentation"]) for e in gpu]  # type: ignore[arg-type]
    assert result.tf_metric.events == 157 and result.tf_metric.highest == max(values)
    # the chunks live at the peak, from the events' own addresses: allocated, not yet freed, up to the peak
    top = max(range(len(gpu)), key=lambda i: (int(gpu[i]["bytes_allocated"]), -i))  # type: ignore[call-overload]
    live: dict[int, int] = {}
    for e in gpu[:top + 1]:
        if e["alloc"]:
            live[int(e["addr"])] = int(e["allocation_bytes"])  # type: ignore[call-overload]
        else:
            live.pop(int(e["addr"]))  # type: ignore[call-overload]
    assert sum(live.values()) == 184_549_632
    moment = result.at_peak
    assert moment is not None and moment.external is not None
    assert sorted((r.start, r.bytes) for r in moment.external.ranges) == sorted(live.items())
    assert not moment.external.holes  # the six chunks sit side by side from the region's start


@pytest.mark.parametrize("command", ["peak", "timeline", "frag", "ops"])
def test_every_report_says_the_ops_are_unknown(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, str(JAX)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("note: ops-unknown: recorded by XLA")
    assert main([command, str(JAX), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [o["kind"] for o in document["oddities"]] == ["ops-unknown"]
    assert document["oddities"][0]["count"] == 81


def test_an_xla_profile_without_memory_events_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # GIVEN a profile with XLA's stat names (as JAX's CPU client writes: no BFC allocator, no memory events)
    space = pb.XSpace(hostnames=["h"])
    plane = space.planes.add(id=1, name="/host:CPU")
    plane.stat_metadata[1].CopyFrom(pb.XStatMetadata(id=1, name="pjrt_client"))
    plane.event_metadata[1].CopyFrom(pb.XEventMetadata(id=1, name="PjRtCApiLoadedExecutable:Execute"))
    line = plane.lines.add(id=1, timestamp_ns=1000)
    line.events.add(metadata_id=1, offset_ps=5, duration_ps=10)
    path = tmp_path / "cpu.xplane.pb"
    path.write_bytes(space.SerializeToString())
    # THEN it is refused in one line that says why
    assert main(["peak", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and "XLA" in err and "no memory events" in err


def test_a_tensorflow_profile_has_no_note(capsys: pytest.CaptureFixture[str]) -> None:
    keras = JAX.parent / "keras_mlp.xplane.pb.gz"
    assert main(["peak", str(keras)]) == 0
    assert "ops-unknown" not in capsys.readouterr().out
    assert not [o for o in memtrace.load(keras).oddities if o.kind == "ops-unknown"]
    assert np.all(memtrace.load(keras).outputs.node >= 0)
