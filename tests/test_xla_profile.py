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
from memtrace.allocator import bfc
from memtrace.cli import main
from memtrace.read._proto import xplane_pb2 as pb

from .xspace_events import memory_events

JAX = Path(__file__).parent.parent / "fixtures" / "profiles" / "jax_gpu.xplane.pb.gz"


@pytest.fixture(scope="module")
def trace() -> memtrace.Trace:
    return memtrace.load(JAX)


def test_xla_profile_is_read_with_its_allocators(trace: memtrace.Trace) -> None:
    assert trace.message == "XSpace" and set(trace.allocators) == {"GPU_0_bfc", "xla_gpu_host_bfc"}
    gpu = memory_events(JAX, "GPU_0_bfc")
    assert len(gpu) == 157 and sum(bool(e["alloc"]) for e in gpu) == 80
    # every allocation is a (no op) node: XLA names none
    assert {trace.node_name(int(n)) for n in trace.outputs.node} == {"(no op)"}
    [noted] = [o for o in trace.oddities if o.kind == "ops-unknown"]
    assert noted.count == 81 and noted.allocator is None and "XLA" in noted.example


def test_peak_is_the_allocators_own_peak_counter(trace: memtrace.Trace) -> None:
    gpu = memory_events(JAX, "GPU_0_bfc")
    peak = trace.peak("GPU_0_bfc")
    # the allocator's own counter (it starts at the allocator's birth: the first event's own chunk)
    assert gpu[0]["peak_bytes_in_use"] == gpu[0]["bytes_allocated"] == 256
    assert peak.peak_bytes == max(int(e["peak_bytes_in_use"]) for e in gpu) == 184_549_632  # type: ignore[call-overload]
    assert peak.baseline_bytes == 0
    assert (peak.reconciliation.snapshots, peak.reconciliation.matched) == (157, 157)
    assert peak.live_bytes_total == peak.peak_delta_bytes == 184_549_632
    assert len(peak.live_at_peak) == 6
    host = trace.peak("xla_gpu_host_bfc")
    assert host.peak_bytes == max(int(e["peak_bytes_in_use"]) for e in memory_events(JAX, "xla_gpu_host_bfc")) == 256  # type: ignore[call-overload]


def test_timeline_is_the_allocators_bytes_in_use_event_by_event(trace: memtrace.Trace) -> None:
    gpu = memory_events(JAX, "GPU_0_bfc")
    line = trace.timeline("GPU_0_bfc")
    assert line.baseline_bytes == 0
    assert line.live_bytes.tolist() == [int(e["bytes_allocated"]) for e in gpu]  # type: ignore[call-overload]
    # times in microseconds from the first event (this allocator's first: the profile's first memory event)
    first_ns = int(gpu[0]["time_ps"]) // 1000  # type: ignore[call-overload]
    assert line.time_us.tolist() == [(int(e["time_ps"]) // 1000 - first_ns) // 1000 for e in gpu]  # type: ignore[call-overload]


def test_frag_holds_the_allocators_own_metric_and_the_live_chunks(trace: memtrace.Trace) -> None:
    from memtrace.analyses.frag import fragmentation

    gpu = memory_events(JAX, "GPU_0_bfc")
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


@pytest.mark.parametrize("command", ["peak", "timeline", "frag", "ops", "fit"])
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


# -- the allocator model (memtrace.allocator.bfc) against XLA's own allocator on a real GPU -----------------------


def _requests(events: list[dict[str, object]]) -> bfc.Requests:
    """The allocator's requests in the order it saw them; a free names the allocation at its address."""
    is_alloc = np.array([bool(e["alloc"]) for e in events])
    requested = np.array([int(e["requested_bytes"]) if e["alloc"] else 0 for e in events], dtype=np.int64)  # type: ignore[call-overload]
    frees = np.full(len(events), -1, dtype=np.int64)
    live: dict[int, int] = {}
    for row, e in enumerate(events):
        if e["alloc"]:
            live[int(e["addr"])] = row  # type: ignore[call-overload]
        else:
            frees[row] = live.pop(int(e["addr"]))  # type: ignore[call-overload]
    times = np.array([int(e["time_ps"]) // 1000 for e in events], dtype=np.int64)  # type: ignore[call-overload]
    return bfc.Requests(is_alloc, requested, frees, np.full(len(events), -1, dtype=np.int32), times)


def _six_digits(values: np.ndarray) -> np.ndarray:
    # XLA's TraceMe writes a double stat as text with six significant digits (absl's StrCat), so
    # the profile's fragmentation values are the allocator's rounded that way.
    return np.array([float(f"{value:.6g}") for value in values])


def test_the_model_reproduces_xlas_allocator_on_an_h100() -> None:
    # GIVEN the GPU allocator's events from its birth (the first event's bytes in use are its own chunk)
    events = memory_events(JAX, "GPU_0_bfc")
    assert events[0]["bytes_allocated"] == events[0]["allocation_bytes"]
    # AND XLA's defaults: preallocated, one region of the limit (bytes available + in use), no growth
    limit = int(events[0]["bytes_available"]) + int(events[0]["bytes_allocated"])  # type: ignore[call-overload]
    assert limit == 63_763_906_560
    # WHEN the model replays the requests
    sim = bfc.simulate(_requests(events), bfc.BFCOptions(limit_bytes=limit, allow_growth=False))
    # THEN it fits in one region of the limit, every chunk at the address XLA gave it (the region
    # starts at the first chunk: one preallocated region hands its start out first)
    assert sim.fits and sim.regions == ((0, limit),)
    is_alloc = np.array([bool(e["alloc"]) for e in events])
    addresses = np.array([int(e["addr"]) for e in events]) - int(events[0]["addr"])  # type: ignore[call-overload]
    assert int(is_alloc.sum()) == 80
    assert (sim.offset[is_alloc] == addresses[is_alloc]).sum() == 80
    assert (sim.offset == addresses).sum() == 157  # a free names the chunk it frees
    # AND every chunk size, bytes in use and fragmentation value after each of the 157 events
    assert sim.chunk_bytes.tolist() == [int(e["allocation_bytes"]) for e in events]  # type: ignore[call-overload]
    assert sim.bytes_in_use.tolist() == [int(e["bytes_allocated"]) for e in events]  # type: ignore[call-overload]
    theirs = np.array([float(e["fragmentation"]) for e in events])  # type: ignore[arg-type]
    assert (_six_digits(sim.fragmentation) == theirs).sum() == 157
    assert sim.peak_in_use_bytes == max(int(e["peak_bytes_in_use"]) for e in events) == 184_549_632  # type: ignore[call-overload]


def test_with_growth_the_model_places_chunks_elsewhere() -> None:
    # (the comparison above can fail: growth on makes regions of 2 MiB, 4 MiB, ... and other addresses)
    events = memory_events(JAX, "GPU_0_bfc")
    limit = int(events[0]["bytes_available"]) + int(events[0]["bytes_allocated"])  # type: ignore[call-overload]
    sim = bfc.simulate(_requests(events), bfc.BFCOptions(limit_bytes=limit, allow_growth=True))
    addresses = np.array([int(e["addr"]) for e in events]) - int(events[0]["addr"])  # type: ignore[call-overload]
    assert len(sim.regions) > 1 and (sim.offset == addresses).sum() < 157


def test_fit_checks_itself_on_xlas_allocator(trace: memtrace.Trace) -> None:
    # the same check through memtrace.allocator.fit: the trace's requests (requests_for) and its self-check
    from memtrace.allocator.fit import fit
    from memtrace.allocator.requests import requests_for

    events = memory_events(JAX, "GPU_0_bfc")
    limit = int(events[0]["bytes_available"]) + int(events[0]["bytes_allocated"])  # type: ignore[call-overload]
    found = requests_for(trace, "GPU_0_bfc")
    assert found.from_birth and len(found.requests) == 157 and found.assumptions == ()
    # XLA's GPU allocator: preallocated (no growth), no garbage collection
    result = fit(trace, "GPU_0_bfc", recorded_limit=limit, allow_growth=False, garbage_collection=False)
    r = result.reproduced
    assert r is not None and r.first_difference is None
    assert (r.allocations, r.addresses_equal, r.chunks_equal) == (80, 80, 80)
    assert (r.events, r.bytes_in_use_equal, r.fragmentation_equal) == (157, 157, 157)
    assert result.fits


def test_fit_cli_reports_the_self_check_on_xla(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fit", str(JAX), "--allocator", "GPU_0_bfc", "--recorded-limit", "63763906560",
                 "--no-garbage-collection"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "the model reproduces 80 of 80 addresses and 157 of 157 fragmentation values" in text


# -- fit's defaults follow the runtime that recorded the trace (XLA's, not TF's) ----------------------


def _shown_limit(allocator: str) -> int:
    """The allocator's limit as its raw events say it: bytes_available + bytes_allocated, the same in every event."""
    limits = {int(e["bytes_available"]) + int(e["bytes_allocated"]) for e in memory_events(JAX, allocator)}  # type: ignore[call-overload]
    assert len(limits) == 1
    return limits.pop()


def test_the_trace_says_xla_recorded_it_and_under_which_limits(trace: memtrace.Trace) -> None:
    from memtrace.read import xplane, xplane_binary
    from memtrace.read.wire import PAD

    assert trace.xla_allocators == ("GPU_0_bfc", "xla_gpu_host_bfc")
    assert trace.runtime_of("GPU_0_bfc") == trace.runtime_of("xla_gpu_host_bfc") == "XLA"
    assert trace.recorded_limit("GPU_0_bfc") == _shown_limit("GPU_0_bfc") == 63_763_906_560
    assert trace.recorded_limit("xla_gpu_host_bfc") == _shown_limit("xla_gpu_host_bfc") == 64 << 30
    # both ways of reading take bytes_available alike
    data = gzip.decompress(JAX.read_bytes())
    fast, reference = xplane.Events(), xplane.Events()
    xplane_binary.collect(bytearray(data) + bytes(PAD), fast)
    xplane.collect(xplane.parse(str(JAX), data), reference)
    assert fast.same_as(reference) and (fast.column("available") > 0).all()


def test_a_tensorflow_profile_is_tensorflows() -> None:
    keras = memtrace.load(JAX.parent / "keras_mlp.xplane.pb.gz")
    assert keras.xla_allocators == () and keras.runtime_of("bfc_cpu_allocator_for_gpu") == "TensorFlow"


def test_fit_takes_xlas_defaults_and_the_limit_the_events_show(trace: memtrace.Trace) -> None:
    from memtrace.allocator.fit import fit

    # WHEN fit is given no option at all
    gpu = fit(trace, "GPU_0_bfc")
    # THEN XLA's GPU allocator's options: preallocated (no growth), no garbage collection (TF's GPU: on)
    assert (gpu.runtime, gpu.options.allow_growth, gpu.options.garbage_collection) == ("XLA", False, False)
    assert gpu.defaults.startswith("XLA's GPU allocator")
    # AND the self-check runs under the limit the events show, reproducing every decision of the allocator
    r = gpu.reproduced
    assert r is not None and r.limit_bytes == _shown_limit("GPU_0_bfc") and r.exact
    assert (r.addresses_equal, r.events, r.fragmentation_equal) == (80, 157, 157)
    assert any("bytes_available + bytes_allocated" in note for note in gpu.assumptions)
    # AND XLA's pinned host allocator: growth on, no garbage collection, 64 GiB
    host = fit(trace, "xla_gpu_host_bfc")
    assert (host.runtime, host.options.allow_growth, host.options.garbage_collection) == ("XLA", True, False)
    assert host.reproduced is not None and host.reproduced.limit_bytes == 64 << 30 and host.reproduced.exact


def test_fit_says_whose_defaults_apply(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fit", str(JAX), "--json"]) == 0
    entries = {e["allocator"]: e for e in json.loads(capsys.readouterr().out)["allocators"]}
    assert {name: e["runtime"] for name, e in entries.items()} == {"GPU_0_bfc": "XLA", "xla_gpu_host_bfc": "XLA"}
    assert entries["GPU_0_bfc"]["options"]["garbage_collection"] is False
    assert entries["GPU_0_bfc"]["reproduced"]["addresses_equal"] == 80
    assert main(["fit", str(JAX), "--allocator", "GPU_0_bfc"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "options not given are XLA's GPU allocator (JAX 0.11.2)" in text
    assert entries["GPU_0_bfc"]["options"]["partitioned"] is True  # preallocated: XLA partitions the pool
    assert entries["xla_gpu_host_bfc"]["options"]["partitioned"] is False  # pinned host memory grows: never
    assert "the model reproduces 80 of 80 addresses and 157 of 157 fragmentation values" in text
    keras = str(JAX.parent / "keras_mlp.xplane.pb.gz")
    assert main(["fit", keras, "--json", "--no-alternatives"]) == 0
    assert [e["runtime"] for e in json.loads(capsys.readouterr().out)["allocators"]] == ["TensorFlow"]


def test_a_card_gives_xlas_limit_on_an_xla_profile(capsys: pytest.CaptureFixture[str]) -> None:
    # XLA takes XLA_PYTHON_CLIENT_MEM_FRACTION (0.75) of the card, rounded up to its 2 MiB step (12 GB is not one:
    # 5,722.05 steps); TF the card less its reserve
    assert main(["fit", str(JAX), "--allocator", "GPU_0_bfc", "--card", "16GB", "--json", "--no-alternatives"]) == 0
    [entry] = json.loads(capsys.readouterr().out)["allocators"]
    assert entry["options"]["limit_bytes"] == 5723 * (2 << 20) == 12_002_000_896
