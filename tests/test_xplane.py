"""TF2 profiles (XSpace): the allocator's own memory events read into the model, checked against the allocator.

GIVEN a hand-made XSpace with hand-worked answers, or a Keras profile recorded with
``scripts/record_traces.py --profiles`` next to the allocator's own counters, WHEN memtrace
reads it, THEN its peaks, baselines and reconciliation are the allocator's numbers.
"""

from __future__ import annotations

import gzip
import json
import math
import shutil
from pathlib import Path

import pytest

import memtrace
from memtrace.cli import main
from memtrace.read._proto import xplane_pb2 as pb
from memtrace.trace.replay import replay

from .conftest import ALEXNET, FIXTURES, require

PROFILES = FIXTURES / "profiles"
KERAS = [PROFILES / f"keras_{name}.xplane.pb.gz" for name in ("mlp", "cnn", "lstm")]
JAX = PROFILES / "jax_gpu.xplane.pb.gz"
BFC = "bfc_cpu_allocator_for_gpu"


# -- a hand-made profile ------------------------------------------------------------------------


def _space(events: list[tuple[str, int, dict[str, object]]], steps: list[tuple[int, int, int]] = (),
           plane: str = "/host:CPU") -> pb.XSpace:
    """An XSpace with one host plane: memory events ``(kind, time_ps, stats)`` on one line, step events on another."""
    space = pb.XSpace(hostnames=["testhost"])
    host = space.planes.add(id=1, name=plane)
    stat_ids: dict[str, int] = {}

    def stat_id(name: str) -> int:
        if name not in stat_ids:
            stat_ids[name] = len(stat_ids) + 1
            host.stat_metadata[stat_ids[name]].CopyFrom(pb.XStatMetadata(id=stat_ids[name], name=name))
        return stat_ids[name]

    for key, name in ((1, "MemoryAllocation"), (2, "MemoryDeallocation"), (3, "train"), (4, "some/op:MatMul")):
        host.event_metadata[key].CopyFrom(pb.XEventMetadata(id=key, name=name))
    line = host.lines.add(id=7, name="tf_Compute/1", timestamp_ns=1000)
    for kind, time_ps, stats in events:
        event = line.events.add(metadata_id=1 if kind == "alloc" else 2, offset_ps=time_ps)
        for name, value in stats.items():
            if name == "allocator_name":  # as TensorFlow writes it: a reference to a metadata name
                event.stats.add(metadata_id=stat_id(name), ref_value=stat_id(str(value)))
            elif isinstance(value, str):
                event.stats.add(metadata_id=stat_id(name), str_value=value)
            else:
                event.stats.add(metadata_id=stat_id(name), int64_value=int(value))  # type: ignore[call-overload]
    steps_line = host.lines.add(id=8, name="python", timestamp_ns=1000)
    for number, start_ps, duration_ps in steps:
        event = steps_line.events.add(metadata_id=3, offset_ps=start_ps, duration_ps=duration_ps)
        event.stats.add(metadata_id=stat_id("step_num"), int64_value=number)
    return space


def _event(kind: str, time_us: int, size: int, in_use: int, addr: int, op: str = "", requested: int | None = None,
           allocator: str = "cpu_bfc", region: str = "output") -> tuple[str, int, dict[str, object]]:
    stats: dict[str, object] = {"allocator_name": allocator, "bytes_allocated": in_use, "allocation_bytes": size,
                                "requested_bytes": size if requested is None else requested, "addr": addr}
    if op:
        stats.update(tf_op=op, region_type=region, data_type=1, shape="[2,3]")
    return kind, time_us * 1_000_000, stats


# 1,000 bytes in use before the profile (one 100-byte chunk among them, freed at 50 us).
HAND = [
    _event("alloc", 10, 256, 1256, 0x1000, "a/Relu", requested=24),
    _event("alloc", 20, 512, 1768, 0x2000, "b/MatMul_1"),
    _event("dealloc", 30, 256, 1512, 0x1000),
    _event("alloc", 40, 1024, 2536, 0x3000, "some/op"),
    _event("dealloc", 50, 100, 2436, 0x9000),
    _event("dealloc", 60, 512, 1924, 0x2000),
    _event("dealloc", 70, 1024, 900, 0x3000),
]
HAND_STEPS = [(0, 5_000_000, 30_000_000), (1, 35_000_000, 40_000_000)]  # 1 us after the line start = 1,000 ns


def _write(tmp_path: Path, space: pb.XSpace, name: str = "host.xplane.pb") -> Path:
    path = tmp_path / name
    path.write_bytes(space.SerializeToString())
    return path


def test_hand_made_profile_peak_baseline_and_live_set(tmp_path: Path) -> None:
    trace = memtrace.load(_write(tmp_path, _space(HAND, HAND_STEPS)))
    assert trace.message == "XSpace" and trace.allocators == ("cpu_bfc",)
    assert trace.devices.name == ("/device:CPU:0",)
    peak = trace.peak("cpu_bfc")
    assert peak.baseline_bytes == 1000
    assert (peak.peak_bytes, peak.peak_delta_bytes) == (2536, 1536)
    assert peak.peak_node == "some/op"
    assert peak.reconciliation.snapshots == 7 and peak.reconciliation.matched == 7
    assert sorted((a.node, a.bytes) for a in peak.live_at_peak) == [("b/MatMul_1", 512), ("some/op", 1024)]
    # Times keep nanoseconds: line start 1,000 ns + 40 us.
    assert int(trace.records.time_ns.max()) == 1000 + 70_000


def test_hand_made_profile_ops_frag_and_types(tmp_path: Path) -> None:
    from memtrace.analyses.frag import fragmentation
    from memtrace.analyses.ops import node_rows

    trace = memtrace.load(_write(tmp_path, _space(HAND, HAND_STEPS)))
    rows = {row.name: row for row in node_rows(trace)}
    assert rows["some/op"].op_type == "MatMul"  # from the op event "some/op:MatMul"
    assert rows["b/MatMul_1"].op_type == "MatMul"  # guessed from the name
    assert rows["a/Relu"].requested_bytes == 256 and rows["a/Relu"].waste_bytes == 256 - 24
    assert trace.outputs.ptr.tolist() == [0x1000, 0x2000, 0x3000]
    assert trace.outputs.allocation_id.tolist() == [1, 2, 3]
    # HAND's three allocations, worked by hand: 24 + 512 + 1024 B requested in 256 + 512 + 1024 B,
    # a/Relu's 232 B of waste all rounding to 256.
    total = fragmentation(trace, "cpu_bfc").total
    assert (total.tensors, total.requested_bytes, total.allocated_bytes, total.rounding_waste_bytes) == (3, 1560, 1792, 232)


def test_region_type_gives_each_buffer_its_kind(tmp_path: Path) -> None:
    from memtrace.analyses.ops import node_rows

    # GIVEN the hand-made profile with a temp, a persistent and a dynamic buffer among its allocations
    regions = {"a/Relu": "temp", "b/MatMul_1": "persist", "some/op": "dynamic"}
    events = [_event(kind, time_ps // 1_000_000, int(stats["allocation_bytes"]), int(stats["bytes_allocated"]),  # type: ignore[call-overload]
                     int(stats["addr"]), str(stats.get("tf_op", "")), int(stats["requested_bytes"]),  # type: ignore[call-overload]
                     region=regions.get(str(stats.get("tf_op")), "output"))
              for kind, time_ps, stats in HAND]
    trace = memtrace.load(_write(tmp_path, _space(events, HAND_STEPS)))
    # THEN the live set at the peak (40 us) says what each buffer is, and still sums to the peak
    peak = trace.peak("cpu_bfc")
    assert sorted((a.node, a.kind, a.bytes) for a in peak.live_at_peak) == [
        ("b/MatMul_1", "persistent", 512), ("some/op", "output", 1024)]
    assert peak.live_bytes_total == peak.peak_delta_bytes == 1536
    # AND the per-op columns count each buffer once, in its own column
    rows = {row.name: row for row in node_rows(trace)}
    columns = {name: (r.requested_bytes, r.output_bytes, r.temp_bytes, r.persistent_bytes) for name, r in rows.items()
               if name != "(free)"}
    assert columns == {"a/Relu": (256, 0, 256, 0), "b/MatMul_1": (512, 0, 0, 512), "some/op": (1024, 1024, 0, 0)}
    assert trace.outputs.kind.tolist() == [1, 2, 0]
    # AND the two ways of reading agree
    from memtrace.read import xplane, xplane_binary
    from memtrace.read.wire import PAD

    data = _space(events, HAND_STEPS).SerializeToString()
    fast, reference = xplane.Events(), xplane.Events()
    xplane_binary.collect(bytearray(data) + bytes(PAD), fast)
    xplane.collect(xplane.parse("hand", data), reference)
    assert fast.same_as(reference) and fast.text("region").tolist() == ["temp", "persist", "", "dynamic", "", "", ""]


def _with_peak_counter(counters: list[int]) -> list[tuple[str, int, dict[str, object]]]:
    return [(kind, time_ps, {**stats, "peak_bytes_in_use": counter}) for (kind, time_ps, stats), counter in zip(HAND, counters)]


def test_the_allocators_own_peak_counter_is_held_to_the_peak(tmp_path: Path) -> None:
    # GIVEN the allocator's peak counter reset just before the profile (1,000 bytes in use then)
    running_max = [1256, 1768, 1768, 2536, 2536, 2536, 2536]
    agrees = memtrace.load(_write(tmp_path, _space(_with_peak_counter(running_max)), "a.xplane.pb"))
    # THEN it agrees with the replay's peak, and nothing is said
    assert agrees.peak("cpu_bfc").peak_bytes == 2536
    assert not [o for o in agrees.oddities if o.kind == "peak-counter-differs"]
    # GIVEN a counter that rises higher than the allocator ever held
    differs = memtrace.load(_write(tmp_path, _space(_with_peak_counter([*running_max[:-1], 3000])), "b.xplane.pb"))
    (oddity,) = [o for o in differs.oddities if o.kind == "peak-counter-differs"]
    assert "3000" in oddity.example and "2536" in oddity.example
    # GIVEN a counter never reset (its first value is an earlier, higher peak): nothing to hold it to
    earlier = memtrace.load(_write(tmp_path, _space(_with_peak_counter([9000] * 7)), "c.xplane.pb"))
    assert not [o for o in earlier.oddities if o.kind == "peak-counter-differs"]


@pytest.mark.parametrize("path", KERAS, ids=lambda p: p.name.split(".")[0])
def test_recorded_peaks_agree_with_the_allocators_peak_counter(path: Path) -> None:
    # Each recorded step starts at a reset of the allocator's stats, so the check applies to each.
    for step in (None, 0, 1, 2):
        assert "peak-counter-differs" not in {o.kind for o in memtrace.load(path, step=step).oddities}


def _region_types(path: Path) -> list[str]:
    """Every allocation's region_type, read straight from the protobuf (a reference to a metadata name)."""
    space = pb.XSpace()
    space.ParseFromString(gzip.decompress(path.read_bytes()))
    found = []
    for plane in space.planes:
        names = {k: m.name for k, m in plane.stat_metadata.items()}
        allocation = {k for k, m in plane.event_metadata.items() if m.name == "MemoryAllocation"}
        for line in plane.lines:
            for event in line.events:
                if event.metadata_id in allocation:
                    found.extend(names[s.ref_value] for s in event.stats if names[s.metadata_id] == "region_type")
    return found


@pytest.mark.parametrize("path", KERAS, ids=lambda p: p.name.split(".")[0])
def test_recorded_profiles_carry_region_type(path: Path) -> None:
    from collections import Counter

    from memtrace.trace.data import OUTPUT_KINDS

    trace = memtrace.load(path)
    regions = Counter(_region_types(path))
    assert set(regions) == {"output", "temp"} and regions["temp"] > 0  # what Keras on CPU writes
    kinds = Counter(OUTPUT_KINDS[k] for k in trace.outputs.kind.tolist())
    assert kinds["temp"] == regions["temp"] and kinds["persistent"] == 0
    assert kinds["output"] == len(trace.outputs) - regions["temp"]
    for step in (None, 0, 1, 2):
        found = (trace if step is None else memtrace.load(path, step=step)).peak(BFC)
        by_kind = Counter()
        for allocation in found.live_at_peak:
            by_kind[allocation.kind] += allocation.bytes
        assert sum(by_kind.values()) == found.peak_delta_bytes
        assert set(by_kind) <= {"output", "temp", "freed-from-before-step"}


def test_hand_made_profile_steps(tmp_path: Path) -> None:
    path = _write(tmp_path, _space(HAND, HAND_STEPS))
    summary = memtrace.load(path).summary()
    assert [(s.step, s.peak_bytes["cpu_bfc"]) for s in summary.steps] == [(0, 1768), (1, 2536)]
    first, second = memtrace.load(path, step=0), memtrace.load(path, step=1)
    assert (first.peak("cpu_bfc").baseline_bytes, first.peak("cpu_bfc").peak_bytes) == (1000, 1768)
    assert (second.peak("cpu_bfc").baseline_bytes, second.peak("cpu_bfc").peak_bytes) == (1512, 2536)
    # The 100-byte chunk allocated before the profile is freed in step 1: a free of its own.
    assert any(o.kind == "free-of-earlier-allocation" for o in second.oddities)


def test_a_snapshot_of_zero_bytes_counts(tmp_path: Path) -> None:
    events = [_event("alloc", 10, 256, 256, 0x1000, "x"), _event("dealloc", 20, 256, 0, 0x1000)]
    peak = memtrace.load(_write(tmp_path, _space(events))).peak("cpu_bfc")
    assert peak.reconciliation.snapshots == 2 and peak.reconciliation.matched == 2
    assert (peak.baseline_bytes, peak.peak_bytes) == (0, 256)


def test_several_hosts_name_the_host(tmp_path: Path) -> None:
    run = tmp_path / "logs" / "plugins" / "profile" / "2024_01_01_00_00_00"
    run.mkdir(parents=True)
    _write(run, _space(HAND), "alpha.xplane.pb")
    _write(run, _space(HAND), "beta.xplane.pb")
    trace = memtrace.load(tmp_path / "logs")
    assert trace.allocators == ("alpha:cpu_bfc", "beta:cpu_bfc")
    assert [p.peak_bytes for p in trace.peaks()] == [2536, 2536]


def test_logdir_takes_the_newest_run_or_the_one_named(tmp_path: Path) -> None:
    root = tmp_path / "plugins" / "profile"
    for run, events in (("2024_01_01_00_00_00", HAND[:2]), ("2024_02_01_00_00_00", HAND)):
        (root / run).mkdir(parents=True)
        _write(root / run, _space(events), "vm.xplane.pb")
    assert len(memtrace.load(tmp_path).nodes) == len(HAND)
    assert len(memtrace.load(tmp_path, run="2024_01_01_00_00_00").nodes) == 2
    assert len(memtrace.load(root / "2024_01_01_00_00_00").nodes) == 2


def test_a_keras_logdir_has_its_runs_under_train(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # keras.callbacks.TensorBoard(log_dir=LOGDIR, profile_batch=...) writes LOGDIR/train/plugins/profile/RUN/.
    root = tmp_path / "train" / "plugins" / "profile"
    for run, events in (("2024_01_01_00_00_00", HAND[:2]), ("2024_02_01_00_00_00", HAND)):
        (root / run).mkdir(parents=True)
        _write(root / run, _space(events), "vm.xplane.pb")
    (tmp_path / "validation").mkdir()
    assert len(memtrace.load(tmp_path).nodes) == len(HAND)
    assert len(memtrace.load(tmp_path, run="2024_01_01_00_00_00").nodes) == 2
    code, _, err = _run(capsys, "summary", str(tmp_path), "--run", "2023")
    assert code == 2 and "no run '2023' (runs: 2024_01_01_00_00_00, 2024_02_01_00_00_00)" in err


def test_vendored_schema_matches_tensorflows() -> None:
    require("tensorflow")
    from tensorflow.tsl.profiler.protobuf import xplane_pb2 as theirs

    assert pb.XSpace.DESCRIPTOR.full_name == "memtrace.xplane.XSpace"
    for name in ("XSpace", "XPlane", "XLine", "XEvent", "XStat", "XEventMetadata", "XStatMetadata"):
        mine, their = getattr(pb, name).DESCRIPTOR, getattr(theirs, name).DESCRIPTOR
        assert {(f.name, f.number, f.type) for f in mine.fields} == {(f.name, f.number, f.type) for f in their.fields}, name


# -- recorded Keras profiles against the allocator's own counters --------------------------------


def _bytes_allocated(path: Path) -> list[int]:
    """Every memory event's bytes_allocated, read straight from the protobuf (no memtrace in between)."""
    space = pb.XSpace()
    space.ParseFromString(gzip.decompress(path.read_bytes()))
    found = []
    for plane in space.planes:
        kinds = {k for k, m in plane.event_metadata.items() if m.name in ("MemoryAllocation", "MemoryDeallocation")}
        stat = next((k for k, m in plane.stat_metadata.items() if m.name == "bytes_allocated"), None)
        for line in plane.lines:
            for event in line.events:
                if event.metadata_id in kinds:
                    found.extend(s.int64_value for s in event.stats if s.metadata_id == stat)
    return found


@pytest.mark.parametrize("path", KERAS, ids=lambda p: p.name.split(".")[0])
def test_step_peaks_equal_the_allocators_own_peak_counter(path: Path) -> None:
    counters = json.loads(path.with_name(path.name.replace(".xplane.pb.gz", ".steps.json")).read_text())["steps"]
    assert len(counters) == 3
    summary = memtrace.load(path).summary()
    for counter in counters:
        step = memtrace.load(path, step=counter["step"]).peak(BFC)
        assert step.peak_bytes == counter["peak_bytes"]
        assert step.baseline_bytes == counter["current_bytes_before"]
        listed = next(s for s in summary.steps if s.step == counter["step"])
        assert listed.peak_bytes[BFC] == counter["peak_bytes"]


@pytest.mark.parametrize("path", KERAS, ids=lambda p: p.name.split(".")[0])
def test_whole_profile_peak_is_the_largest_bytes_allocated(path: Path) -> None:
    in_use = _bytes_allocated(path)
    peak = memtrace.load(path).peak(BFC)
    assert peak.peak_bytes == max(in_use)
    assert peak.reconciliation.snapshots == len(in_use) == peak.reconciliation.matched


@pytest.mark.parametrize("path", KERAS, ids=lambda p: p.name.split(".")[0])
def test_agrees_with_xprofs_memory_profile(path: Path, tmp_path: Path) -> None:
    raw_to_tool_data = require("xprof.convert.raw_to_tool_data")
    plain = tmp_path / "host.xplane.pb"
    plain.write_bytes(gzip.decompress(path.read_bytes()))
    data, _ = raw_to_tool_data.xspace_to_tool_data([str(plain)], "memory_profile", {})
    summary = json.loads(data)["memoryProfilePerAllocator"][BFC]["profileSummary"]
    trace = memtrace.load(path)
    peak = trace.peak(BFC)
    assert peak.peak_bytes == int(summary["peakStats"]["heapAllocatedBytes"])
    # xprof times an event by its offset from its line's start (ps); memtrace adds the line's
    # timestamp_ns (the same for every line of these profiles) and keeps nanoseconds.
    space = pb.XSpace()
    space.ParseFromString(plain.read_bytes())
    (line_start_ns,) = {line.timestamp_ns for plane in space.planes for line in plane.lines}
    # Where the peak is reached more than once, memtrace names the first time; xprof may name
    # another: it must be one of the times at which the allocator holds the peak.
    replayed = replay(trace, BFC)
    at_peak = replayed.time_ns[replayed.live_bytes == replayed.live_bytes.max()] - line_start_ns
    xprof_ns = int(summary["peakStatsTimePs"]) // 1000
    assert xprof_ns in at_peak.tolist()
    assert int(replayed.time_ns[replayed.peak_event()]) - line_start_ns <= xprof_ns


# -- the command line -----------------------------------------------------------------------------


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _memory_events(path: Path) -> list[tuple[str, dict[str, object]]]:
    """The profile's memory events in time order, kind and stats by name, read straight from the protobuf."""
    space = pb.XSpace()
    space.ParseFromString(gzip.decompress(path.read_bytes()))
    found = []
    for plane in space.planes:
        kinds = {k: m.name for k, m in plane.event_metadata.items() if m.name in ("MemoryAllocation", "MemoryDeallocation")}
        names = {k: m.name for k, m in plane.stat_metadata.items()}
        for line in plane.lines:
            for event in line.events:
                if event.metadata_id in kinds:
                    stats = {names[s.metadata_id]: s.str_value or names.get(s.ref_value) or s.int64_value or s.uint64_value
                             for s in event.stats}
                    found.append((line.timestamp_ns * 1000 + event.offset_ps, len(found), kinds[event.metadata_id], stats))
    return [(kind, stats) for _, _, kind, stats in sorted(found, key=lambda event: event[:2])]


@pytest.mark.parametrize("command", [
    ["summary"], ["summary", "--json"], ["peak"], ["peak", "--step", "1"], ["timeline"], ["ops"], ["ops", "--by", "scope"],
    ["ops", "--by", "node"], ["frag"], ["check", "--max-peak", f"{BFC}=1GiB"], ["tensor", f"{BFC}:5"], ["export"],
], ids=" ".join)
def test_every_command_works_on_a_profile(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                          command: list[str]) -> None:
    # Each command's numbers against the profile's own: its events' counters and sizes as protobuf
    # reads them, and the allocator's peak counters TensorFlow gave for each step (steps.json).
    from memtrace.units import format_bytes

    monkeypatch.setenv("COLUMNS", "250")
    events = _memory_events(KERAS[0])
    allocs = [stats for kind, stats in events if kind == "MemoryAllocation"]
    frees = len(events) - len(allocs)
    peak = max(int(stats["bytes_allocated"]) for _, stats in events)  # type: ignore[call-overload]
    allocated = sum(int(stats["allocation_bytes"]) for stats in allocs)  # type: ignore[call-overload]
    requested = sum(int(stats["requested_bytes"]) for stats in allocs)  # type: ignore[call-overload]
    steps = json.loads(KERAS[0].with_name("keras_mlp.steps.json").read_text())["steps"]
    code, out, err = _run(capsys, command[0], str(KERAS[0]), *command[1:])
    assert code == 0, err
    first = out.splitlines()[0]
    if command == ["summary"]:
        row = next(line.split() for line in out.splitlines() if line.startswith(BFC))
        at = row.index("records")
        assert row[at + 1:at + 4] == [str(len(events)), str(len(allocs)), str(frees)]
        assert format_bytes(peak) == " ".join(row[1:3])
    elif command == ["summary", "--json"]:
        (entry,) = json.loads(out)["allocators"]
        assert (entry["records"], entry["allocations"], entry["frees"], entry["peak_bytes"]) == (
            len(events), len(allocs), frees, peak)
    elif command == ["peak"]:
        assert first.startswith(f"{BFC}: peak {format_bytes(peak)} ({peak:,} bytes)")
    elif command[:2] == ["peak", "--step"]:
        assert first.startswith(f"{BFC}: peak {format_bytes(steps[1]['peak_bytes'])} ({steps[1]['peak_bytes']:,} bytes)")
        assert f"({steps[1]['current_bytes_before']:,} bytes) live before the step" in out
    elif command == ["timeline"]:
        assert first == f"{BFC} (records, bytes absolute): max {format_bytes(peak)}, {len(events)} points"
    elif command[0] == "ops":
        total = next(line for line in out.splitlines() if line.startswith("total"))
        # Every allocation's bytes, and the waste of them all (allocated less requested), on the total row.
        assert f" {format_bytes(allocated)} " in total and total.endswith(f" {format_bytes(allocated - requested)}")
    elif command == ["frag"]:
        assert first.startswith(f"{BFC} (BFC): {len(allocs)} buffers, requested {format_bytes(requested)} ({requested:,} bytes)")
        assert f"({allocated:,} bytes)" in out and f"waste {format_bytes(allocated - requested)} ({allocated - requested:,} bytes)" in out
    elif command[0] == "check":
        assert f"{format_bytes(peak)} ({peak:,} B)" in out and out.endswith("PASS: 1 of 1 budget passed\n")
    elif command[0] == "tensor":
        fifth = allocs[4]  # ids number a profile's allocations in time order
        assert first.startswith(f"buffer {BFC}:5")
        assert f"producer   {fifth['tf_op']}:0 " in out
        assert (f"size       {format_bytes(int(fifth['requested_bytes']))} requested ({fifth['requested_bytes']:,} bytes), "  # type: ignore[call-overload]
                f"{format_bytes(int(fifth['allocation_bytes']))} allocated ({fifth['allocation_bytes']:,} bytes)") in out  # type: ignore[call-overload]
    else:
        counters = [e["args"] for e in json.loads(out)["traceEvents"] if e.get("ph") == "C"]
        replayed = [args["bytes in use"] for args in counters if "bytes in use" in args]
        assert max(replayed) == peak and len(replayed) == len(events) + 1  # a point at the start, one per event
        snapshots = [args["allocator_bytes_in_use"] for args in counters if "allocator_bytes_in_use" in args]
        assert snapshots == [stats["bytes_allocated"] for _, stats in events]


def test_report_and_diff_on_profiles(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from .test_report import Page

    assert _run(capsys, "report", str(KERAS[1]), "-o", str(tmp_path / "r.html"))[0] == 0
    page = Page((tmp_path / "r.html").read_text(encoding="utf-8"))
    (label,) = page.find("text", "peak-label")
    assert int(label.attrs["data-peak-bytes"]) == max(_bytes_allocated(KERAS[1]))  # the allocator's own counter
    code, out, _ = _run(capsys, "diff", str(KERAS[0]), str(KERAS[0]), "--step", "2")
    step_2 = json.loads(KERAS[0].with_name("keras_mlp.steps.json").read_text())["steps"][2]["peak_bytes"]
    (row,) = [line for line in out.splitlines() if line.startswith(BFC)]
    assert code == 0 and row.count(f"({step_2:,} B)") == 2 and row.split()[-3:] == ["+0", "B", "+0%"]


def _one_line_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code, out, err = _run(capsys, *argv)
    assert code == 2 and not out
    assert err.count("\n") == 1 and "Traceback" not in err
    return err


def test_graph_says_a_profile_has_no_dataflow(capsys: pytest.CaptureFixture[str]) -> None:
    assert "no dataflow" in _one_line_error(capsys, "graph", str(KERAS[0]))


def test_truncated_and_corrupt_profiles(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = gzip.decompress(KERAS[0].read_bytes())
    truncated = tmp_path / "cut.xplane.pb"
    truncated.write_bytes(data[: len(data) // 2])
    assert "truncated or corrupt" in _one_line_error(capsys, "peak", str(truncated))
    corrupt = tmp_path / "bad.xplane.pb"
    corrupt.write_bytes(data[:40] + b"\xff" * 64)
    assert "truncated or corrupt" in _one_line_error(capsys, "peak", str(corrupt))


def test_logdir_without_profile(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "plugins" / "profile").mkdir(parents=True)
    assert "no profile here" in _one_line_error(capsys, "summary", str(tmp_path))


def test_profile_without_memory_events_says_how_to_get_them(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = _write(tmp_path, _space([]))
    assert "TF_CPU_ALLOCATOR_USE_BFC=true" in _one_line_error(capsys, "peak", str(path))


def test_a_jax_profile_is_read_saying_the_ops_are_unknown(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # (tests/test_xla_profile.py holds its numbers to the profile's own stats)
    shutil.copy(JAX, tmp_path / "vm.xplane.pb.gz")
    assert main(["summary", str(tmp_path)]) == 0
    assert "ops-unknown: 81" in capsys.readouterr().out


def test_unknown_step_and_step_on_a_stepstats(capsys: pytest.CaptureFixture[str]) -> None:
    assert "no step 9" in _one_line_error(capsys, "peak", str(KERAS[0]), "--step", "9")
    assert "--step needs a profile" in _one_line_error(capsys, "peak", str(ALEXNET), "--step", "0")


# -- the fast path against upb ----------------------------------------------------------------------


@pytest.mark.parametrize("path", [*KERAS, JAX], ids=lambda p: p.name.split(".")[0])
def test_fast_path_reads_what_upb_reads(path: Path) -> None:
    from memtrace.read import xplane, xplane_binary
    from memtrace.read.wire import PAD

    data = gzip.decompress(path.read_bytes())
    fast, reference = xplane.Events(), xplane.Events()
    xplane_binary.collect(bytearray(data) + bytes(PAD), fast)
    xplane.collect(xplane.parse(str(path), data), reference)
    assert len(fast) > 0 and fast.same_as(reference)


@pytest.mark.parametrize("path", [*KERAS, JAX], ids=lambda p: p.name.split(".")[0])
@pytest.mark.parametrize("piece_bytes", [7, 100, 4096, 1 << 20])
def test_reading_a_piece_at_a_time_reads_what_upb_reads(path: Path, piece_bytes: int) -> None:
    # Pieces smaller than a field, than an event, or holding many: the events are the same.
    import io

    from memtrace.read import xplane, xplane_binary

    data = gzip.decompress(path.read_bytes())
    streamed, reference = xplane.Events(), xplane.Events()
    xplane_binary.collect_file(io.BufferedReader(io.BytesIO(data)), len(data), streamed, piece_bytes)  # type: ignore[arg-type]
    xplane.collect(xplane.parse(str(path), data), reference)
    assert len(streamed) > 0 and streamed.same_as(reference)


@pytest.mark.parametrize("path", [*KERAS, JAX], ids=lambda p: p.name.split(".")[0])
def test_plain_and_gzip_files_take_the_fast_path(path: Path, tmp_path: Path) -> None:
    from memtrace.read import xplane

    plain = tmp_path / "host.xplane.pb"
    plain.write_bytes(gzip.decompress(path.read_bytes()))
    reference = xplane.Events()
    xplane.collect(xplane.parse(str(path), plain.read_bytes()), reference)
    for file, compressed in ((plain, False), (path, True)):
        events = xplane.Events()
        assert xplane.read_file_events(str(file), events) is compressed
        assert events.same_as(reference)


def test_fast_path_on_the_hand_made_profile(tmp_path: Path) -> None:
    from memtrace.read import xplane, xplane_binary
    from memtrace.read.wire import PAD

    data = _space(HAND, HAND_STEPS).SerializeToString()
    fast, reference = xplane.Events(), xplane.Events()
    xplane_binary.collect(bytearray(data) + bytes(PAD), fast)
    xplane.collect(xplane.parse("hand", data), reference)
    assert fast.same_as(reference) and sorted(fast.steps) == [0, 1]


# -- memtrace.testing and the pytest plugin take profiles unchanged ---------------------------------


def test_testing_assertions_take_a_profile() -> None:
    from memtrace import testing

    peak = max(_bytes_allocated(KERAS[0]))  # the allocator's own counter, read from the protobuf
    step_1 = json.loads(KERAS[0].with_name("keras_mlp.steps.json").read_text())["steps"][1]["peak_bytes"]
    assert testing.assert_peak_below(KERAS[0], BFC, "1MiB").outcomes[0].measured == peak
    with pytest.raises(AssertionError, match=rf"max_peak: .* \({step_1:,} B\) is over the limit"):
        testing.assert_peak_below(memtrace.load(KERAS[0], step=1), BFC, "10KiB")
    (change,) = testing.assert_no_regression(KERAS[0], KERAS[0]).allocators
    assert change.base.peak_bytes == change.new.peak_bytes == peak


@pytest.mark.memory_budget(BFC, max_peak="1MiB")
def test_the_memory_budget_fixture_takes_a_profile(memory_budget) -> None:  # type: ignore[no-untyped-def]
    memory_budget(memtrace.load(KERAS[2]))


# -- recording from TF2 --------------------------------------------------------------------------

_PROFILE_SCRIPT = """
import json, os, sys, tempfile
import memtrace.tensorflow as mtf
if sys.argv[1] == "late":
    import tensorflow as tf
    tf.constant(1.0) + 1  # TensorFlow has started: too late for the BFC allocator
else:
    assert mtf.use_cpu_bfc()  # before the model is built, as the docs say
import keras, numpy as np
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(3)])
model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
x, y = np.ones((16, 8), dtype="float32"), np.zeros(16, dtype="int64")
logdir = tempfile.mkdtemp()
try:
    counters = mtf.record_profile(model.train_on_batch, x, y, steps=2, warmup=1, logdir=logdir)
    trace = mtf.profile(model.train_on_batch, x, y, steps=1)
except Exception as error:
    print(json.dumps({"error": str(error)}))
    raise SystemExit(0)
import memtrace
peaks = [memtrace.load(logdir, step=c.step).peaks()[0].peak_bytes for c in counters]
print(json.dumps({"counters": [c.peak_bytes for c in counters], "peaks": peaks, "steps": len(trace.steps),
                  "bfc": os.environ.get("TF_CPU_ALLOCATOR_USE_BFC")}))
"""


def _profile_in_a_fresh_process(when: str) -> dict[str, object]:
    import os
    import subprocess
    import sys

    require("tensorflow")
    env = {k: v for k, v in os.environ.items() if k != "TF_CPU_ALLOCATOR_USE_BFC"}
    env["PYTHONPATH"] = str(FIXTURES.parent)
    done = subprocess.run([sys.executable, "-c", _PROFILE_SCRIPT, when], capture_output=True, text=True, env=env,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_profile_records_keras_steps_on_cpu() -> None:
    found = _profile_in_a_fresh_process("early")
    assert found["bfc"] == "true" and found["steps"] == 1
    assert found["peaks"] == found["counters"] and len(found["counters"]) == 2  # type: ignore[arg-type]


def test_profile_says_when_it_is_too_late_for_the_bfc_allocator() -> None:
    found = _profile_in_a_fresh_process("late")
    assert "TF_CPU_ALLOCATOR_USE_BFC" in str(found.get("error")) and "started" in str(found.get("error"))


def test_tfs_own_fragmentation_metric_over_time(capsys: pytest.CaptureFixture[str]) -> None:
    space = pb.XSpace()
    space.ParseFromString(gzip.decompress(KERAS[0].read_bytes()))
    reported = []
    for plane in space.planes:
        kinds = {k for k, m in plane.event_metadata.items() if m.name in ("MemoryAllocation", "MemoryDeallocation")}
        stat = next((k for k, m in plane.stat_metadata.items() if m.name == "fragmentation"), None)
        for line in plane.lines:
            for event in line.events:
                if event.metadata_id in kinds:
                    reported.extend(s.double_value for s in event.stats if s.metadata_id == stat)
    trace = memtrace.load(KERAS[0])
    assert sorted(trace.memory.fragmentation.tolist()) == sorted(reported)
    code, out, _ = _run(capsys, "frag", str(KERAS[0]), "--json")
    metric = json.loads(out)["allocators"][0]["tf_fragmentation"]
    assert code == 0 and metric["events"] == len(reported) and metric["highest"] == max(reported)
    code, out, _ = _run(capsys, "frag", str(ALEXNET), "--json")
    assert "tf_fragmentation" not in json.loads(out)["allocators"][0]  # a StepStats reports none


@pytest.mark.parametrize("name", ["keras_mlp", "keras_cnn", "keras_lstm"])
def test_frees_of_chunks_from_before_the_profile_are_no_false_caution(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    # The (free) nodes of chunks allocated before the profile free what they never allocated: that is
    # free-of-earlier-allocation, not free-exceeds-allocation, and peak opens with no caution line.
    path = FIXTURES / "profiles" / f"{name}.xplane.pb.gz"
    kinds = {o.kind for o in memtrace.load(path).oddities}
    assert "free-exceeds-allocation" not in kinds
    assert main(["peak", str(path)]) == 0
    assert not capsys.readouterr().out.startswith("caution:")


# -- the fast path's shortcuts: runs of events, texts as codes, constant columns -------------------


def _lookalikes() -> list[tuple[str, int, dict[str, object]]]:
    """Events the event walk's candidates miss or mistake: at offset 0 (no offset field written),
    larger than 16 KiB (a three-byte length), and string stats holding the very bytes of an event
    header (0x22, a length, 0x08, an id, 0x10) in their middle."""
    header = bytes([0x22, 0x05, 0x08, 0x01, 0x10, 0x01, 0x22]).decode("latin-1")
    return [
        ("alloc", 0, {"allocator_name": "cpu", "bytes_allocated": 256, "allocation_bytes": 256, "addr": 0x10, "tf_op": "a"}),
        ("alloc", 2_000_000, {"allocator_name": "cpu", "bytes_allocated": 512, "allocation_bytes": 256, "addr": 0x20,
                              "tf_op": "b", "shape": header * 3}),
        ("alloc", 3_000_000, {"allocator_name": "cpu", "bytes_allocated": 768, "allocation_bytes": 256, "addr": 0x30,
                              "tf_op": "c" * 20_000}),
        ("free", 4_000_000, {"allocator_name": "cpu", "bytes_allocated": 512, "allocation_bytes": 256, "addr": 0x10}),
        ("alloc", 5_000_000, {"allocator_name": "cpu", "bytes_allocated": 768, "allocation_bytes": 256, "addr": 0x40,
                              "tf_op": header}),
    ]


@pytest.mark.parametrize("piece_bytes", [5, 64, 1 << 20])
def test_the_event_walk_believes_only_events_it_reaches(piece_bytes: int) -> None:
    import io

    from memtrace.read import xplane, xplane_binary
    from memtrace.read.wire import PAD

    data = _space(_lookalikes()).SerializeToString()
    assert bytes([0x22, 0x05, 0x08, 0x01, 0x10]) in data  # the lookalike is there to be mistaken
    fast, streamed, reference = xplane.Events(), xplane.Events(), xplane.Events()
    xplane_binary.collect(bytearray(data) + bytes(PAD), fast)
    xplane_binary.collect_file(io.BufferedReader(io.BytesIO(data)), len(data), streamed, piece_bytes)  # type: ignore[arg-type]
    xplane.collect(xplane.parse("lookalikes", data), reference)
    assert len(reference) == 5
    assert fast.same_as(reference) and streamed.same_as(reference)
    assert fast.text("tf_op").tolist() == ["a", "b", "c" * 20_000, "", _lookalikes()[4][2]["tf_op"]]
    assert fast.column("time_ps").tolist() == [1_000_000, 3_000_000, 4_000_000, 5_000_000, 6_000_000]


def test_event_candidates_skip_stats_and_find_runs() -> None:
    import numpy as np

    from memtrace.read import xplane_binary
    from memtrace.read.wire import PAD, Padded

    space = _space(HAND)
    line = space.planes[0].lines[0].SerializeToString()
    padded = Padded(bytearray(line) + bytes(PAD))  # type: ignore[arg-type]
    line_id, timestamp_ns, starts, ends, stop = xplane_binary._line_events(padded, 0, len(line))
    assert (line_id, timestamp_ns, stop) == (7, 1000, len(line))
    field_at, payload_at, end_at = xplane_binary._event_candidates(padded.u8, 0, len(line))
    # Every event is a candidate (each has an offset), no stat is, and one run holds them all.
    assert len(field_at) == len(HAND) == len(starts)
    assert np.array_equal(payload_at, starts) and np.array_equal(end_at, ends)
    assert np.array_equal(end_at[:-1], field_at[1:])


def test_coded_texts_number_values_by_first_appearance() -> None:
    import numpy as np

    from memtrace.read.builder import CodedTexts, codes_by_first_appearance

    texts = ["b", "a", "b", "", "c", "a"]
    # A table holding a value twice (a reference's name and the same string): coded once.
    coded = CodedTexts.from_table(np.array([3, 1, 0, 2, 4, 1]), ["b", "a", "", "b", "c"])
    assert coded.tolist() == texts and len(coded.values) == 4
    codes, distinct, first = codes_by_first_appearance(coded)
    expected = codes_by_first_appearance(texts)
    assert codes.tolist() == expected[0].tolist() == [0, 1, 0, 2, 3, 1]
    assert distinct == expected[1] == ["b", "a", "", "c"]
    assert first.tolist() == expected[2].tolist() == [0, 1, 3, 4]
    both = CodedTexts.concatenate([coded, CodedTexts.of(["c", "d"])])
    assert both.tolist() == [*texts, "c", "d"] and both.distinct() == ["b", "a", "", "c", "d"]
    assert coded.map(str.upper).tolist() == ["B", "A", "B", "", "C", "A"] and coded.take(np.array([4, 0]))[0] == "c"


def test_a_profiles_constant_columns_cost_nothing_per_event() -> None:
    trace = memtrace.load(str(KERAS[0]))
    nodes = trace.nodes
    # Events are instants with no temp or persistent memory and no inputs: those columns are one number each.
    assert nodes.end_ns is nodes.start_ns and nodes.op_start_ns is nodes.start_ns
    for column in (nodes.scheduled_ns, nodes.temp_bytes, nodes.persistent_bytes, nodes.input_offsets,
                   nodes.persistent_ids_offsets):
        assert column.strides == (0,) and not column.flags.writeable and not column.any()
    assert len(nodes.input_offsets) == len(nodes.start_ns) + 1


@pytest.mark.parametrize("path", KERAS, ids=lambda p: p.name.split(".")[0])
def test_pieces_decoded_in_worker_processes_read_what_upb_reads(path: Path) -> None:
    import io

    from memtrace.read import xplane, xplane_binary

    data = gzip.decompress(path.read_bytes())
    pooled, reference = xplane.Events(), xplane.Events()
    xplane_binary.collect_file(io.BufferedReader(io.BytesIO(data)), len(data), pooled, 4096, jobs=2)  # type: ignore[arg-type]
    xplane.collect(xplane.parse(str(path), data), reference)
    assert len(pooled) > 0 and pooled.same_as(reference)


def test_jobs_give_the_same_report_on_a_profile(capsys: pytest.CaptureFixture[str]) -> None:
    one = _run(capsys, "ops", str(KERAS[2]), "--json")
    two = _run(capsys, "ops", str(KERAS[2]), "--json", "-j", "2")
    assert one[0] == 0 and one == two


_TENSORBOARD_SCRIPT = """
import json, os, tempfile
os.environ["TF_CPU_ALLOCATOR_USE_BFC"] = "true"
import keras, numpy as np, tensorflow as tf
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(3)])
model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
x, y = np.ones((64, 8), dtype="float32"), np.zeros(64, dtype="int64")
logdir = tempfile.mkdtemp()
counters = {}
class Counters(keras.callbacks.Callback):  # the allocator's own peak counter, batch by batch
    def on_train_batch_begin(self, batch, logs=None):
        tf.config.experimental.reset_memory_stats("CPU:0")
    def on_train_batch_end(self, batch, logs=None):
        counters[batch] = tf.config.experimental.get_memory_info("CPU:0")["peak"]
model.fit(x, y, batch_size=8, epochs=1, verbose=0,
          callbacks=[Counters(), keras.callbacks.TensorBoard(log_dir=logdir, profile_batch=(3, 5))])
import memtrace
steps = [s.number for s in memtrace.load(logdir).steps]
print(json.dumps({"steps": steps, "peaks": [memtrace.load(logdir, step=n).peaks()[0].peak_bytes for n in steps],
                  "counters": [counters[n] for n in steps]}))
"""


def test_tensorboards_profile_batch_steps_peak_at_the_allocators_own_counter() -> None:
    # Keras's TensorBoard callback, as users record: its logdir read whole, each profiled batch's
    # peak equal to the allocator's own peak counter reset before that batch.
    import os
    import subprocess
    import sys

    require("tensorflow")
    require("tensorboard")
    env = {**os.environ, "PYTHONPATH": str(FIXTURES.parent), "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run([sys.executable, "-c", _TENSORBOARD_SCRIPT], capture_output=True, text=True, env=env,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["steps"] == [2, 3, 4]  # profile_batch=(3, 5): the third to fifth batch, numbered from 0
    assert found["peaks"] == found["counters"] and min(found["peaks"]) > 0


def test_a_piece_a_worker_cannot_read_stops_the_pool_and_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    # The worker's Unrecognised comes back as raised (the caller then reads the file with upb), and
    # the pieces still in flight are dropped rather than waited for.
    import io
    import os

    from memtrace.read import xplane, xplane_binary
    from memtrace.read.detect import Unrecognised

    parent, decode = os.getpid(), xplane_binary._line

    def refused_in_a_worker(*arguments: object, **keywords: object) -> None:
        if os.getpid() != parent:
            raise Unrecognised("a piece no worker can read")
        decode(*arguments, **keywords)  # type: ignore[arg-type]

    monkeypatch.setattr(xplane_binary, "_line", refused_in_a_worker)
    data = gzip.decompress(KERAS[2].read_bytes())
    with pytest.raises(Unrecognised, match="a piece no worker can read"):
        xplane_binary.collect_file(io.BufferedReader(io.BytesIO(data)), len(data), xplane.Events(), 4096, jobs=2)  # type: ignore[arg-type]


# -- numbers that must never be printed (issue 25 items 16, 17) -----------------------------------


def _strict(text: str) -> object:
    """JSON as the standard has it: NaN and Infinity refused."""
    def refuse(constant: str) -> object:
        raise ValueError(f"not JSON: {constant}")
    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("in_use", [-2**63, 2**63 - 1], ids=["int64-min", "int64-max"])
def test_a_peak_beyond_int64_from_snapshots_is_unknown_never_a_number(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], in_use: int) -> None:
    """bytes_allocated at an int64 extreme: baseline + live bytes once gave 9223372036854800640."""
    events = [(kind, time_ps, {**stats, "bytes_allocated": in_use}) for kind, time_ps, stats in HAND]
    events.append(_event("alloc", 15, 256, 256, 0x1000, "other/op", allocator="other_bfc"))
    path = _write(tmp_path, _space(events))
    code, out, err = _run(capsys, "peak", "--json", str(path))
    assert code == 0 and err == ""
    peaks = {a["allocator"]: a for a in _strict(out)["allocators"]}  # type: ignore[index]
    assert peaks["cpu_bfc"]["peak_bytes"] is None and peaks["cpu_bfc"]["unknown"].startswith(
        "beyond int64: its bytes-in-use snapshots and records")
    assert peaks["other_bfc"]["peak_bytes"] == 256  # the other allocator is untouched
    code, out, err = _run(capsys, "peak", str(path))
    assert code == 0 and "cpu_bfc: peak unknown (beyond int64)" in out and "bytes-beyond-int64 on cpu_bfc" in out
    for argv in (["summary", "--json"], ["report", "--json"], ["frag", "--json"], ["timeline", "--json"]):
        code, out, err = _run(capsys, *argv, str(path))
        assert code == 0, (argv, err)
        assert "9223372036854" not in out.replace(str(in_use), ""), argv  # no wrapped or beyond-int64 total


def _with_fragmentation(value: float) -> pb.XSpace:
    space = _space([(k, t, {**s, "fragmentation": 0}) for k, t, s in HAND])
    host = space.planes[0]
    stat = next(m.id for m in host.stat_metadata.values() if m.name == "fragmentation")
    for event in host.lines[0].events:
        for s in event.stats:
            if s.metadata_id == stat:
                s.double_value = value
    return space


@pytest.mark.parametrize("value", [float("inf"), float("nan")], ids=["inf", "nan"])
def test_json_is_strict_where_tf_reports_a_fragmentation_that_is_no_number(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], value: float) -> None:
    path = _write(tmp_path, _with_fragmentation(value))
    code, out, err = _run(capsys, "frag", "--json", str(path))
    assert code == 0 and err == ""
    [allocator] = _strict(out)["allocators"]  # type: ignore[index]
    if math.isnan(value):  # NaN is no value at all (as -1, absent): no metric
        assert "tf_fragmentation" not in allocator
    else:
        metric = allocator["tf_fragmentation"]
        assert (metric["at_peak"], metric["highest"], metric["last"]) == (None, None, None)
        assert metric["not_finite"] == {"at_peak": "inf", "highest": "inf", "last": "inf"}
        assert metric["events"] == len(HAND)
    for argv in (["report", "--json"], ["summary", "--json"], ["peak", "--json"], ["ops", "--json"]):
        code, out, err = _run(capsys, *argv, str(path))
        assert code == 0 and _strict(out), argv


def test_strict_json_writes_null_for_what_is_not_finite() -> None:
    from memtrace.reporters.common import strict_json

    assert strict_json({"a": [1.5, float("nan"), (float("-inf"), 2)], "b": float("inf")}) == (
        '{"a": [1.5, null, [null, 2]], "b": null}')


# -- stats of the wrong type, times out of range (issue 25 item 13) --------------------------------


def _set_stat(space: pb.XSpace, name: str, **value: object) -> pb.XSpace:
    """The first memory event's stat ``name`` given another value (``int64_value=...``, ``str_value=...``, ...)."""
    host = space.planes[0]
    stat = next(m.id for m in host.stat_metadata.values() if m.name == name)
    for s in host.lines[0].events[0].stats:
        if s.metadata_id == stat:
            for field, v in value.items():
                setattr(s, field, v)
    return space


def _line_start(space: pb.XSpace, timestamp_ns: int) -> pb.XSpace:
    space.planes[0].lines[0].timestamp_ns = timestamp_ns
    return space


_WRONG_STATS = {
    "string-data-type": (lambda: _set_stat(_space(HAND), "data_type", str_value="float"),
                         "a memory event's data_type stat is 'float', not an integer"),
    "string-addr": (lambda: _set_stat(_space(HAND), "addr", str_value="0x1000"),
                    "a memory event's addr stat is '0x1000', not an integer"),
    "nan-bytes": (lambda: _set_stat(_space(HAND), "allocation_bytes", double_value=float("nan")),
                  "a memory event's allocation_bytes stat is nan, not an integer"),
    "inf-bytes": (lambda: _set_stat(_space(HAND), "bytes_allocated", double_value=float("inf")),
                  "a memory event's bytes_allocated stat is inf, not an integer"),
    "huge-double": (lambda: _set_stat(_space(HAND), "requested_bytes", double_value=1e19),
                    "a memory event's requested_bytes stat is 1e+19, not an integer"),
    "timestamp-int64-max": (lambda: _line_start(_space(HAND), 2**63 - 1),
                            ("line 'tf_Compute/1': an event's time (timestamp_ns 9223372036854775807 + offset_ps 10000000) "
                            "is out of range (53 days or more from the profile's origin)")),
    "timestamp-int64-min": (lambda: _line_start(_space(HAND), -2**63),
                            ("line 'tf_Compute/1': an event's time (timestamp_ns -9223372036854775808 + offset_ps 10000000) "
                            "is out of range (53 days or more from the profile's origin)")),
}


@pytest.mark.parametrize("case", list(_WRONG_STATS))
def test_a_stat_of_the_wrong_type_or_a_time_out_of_range_is_one_line_on_every_path(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    from memtrace.read import xplane, xplane_binary
    from memtrace.read.detect import Unrecognised
    from memtrace.read.wire import PAD

    make, says = _WRONG_STATS[case]
    path = _write(tmp_path, make())
    assert _one_line_error(capsys, "peak", str(path)) == f"memtrace: error: {path}: {says}\n"
    # The fast path leaves it to upb (never a wrapped time or a crash); upb's walk names it.
    with pytest.raises(Unrecognised):
        xplane_binary.collect(bytearray(path.read_bytes()) + bytes(PAD), xplane.Events())
    with pytest.raises(memtrace.errors.TraceFormatError, match="^" + str(path).replace(".", r"\.")):
        xplane.read([(str(path), "h")], lambda p: bytearray(path.read_bytes()) + bytes(PAD), memtrace.read.builder.TraceBuilder(),
                    fast=False)


def test_a_whole_double_or_a_uint64_byte_count_reads_as_the_fast_path_reads_its_int(tmp_path: Path) -> None:
    """A double that is a whole number is that number; a uint64 past int64 wraps to its int64 bits on both paths."""
    from memtrace.read import xplane, xplane_binary
    from memtrace.read.wire import PAD

    plain = xplane.Events()
    xplane.collect(_space(HAND), plain)
    as_double = xplane.Events()
    xplane.collect(_set_stat(_space(HAND), "allocation_bytes", double_value=256.0), as_double)
    assert as_double.same_as(plain)
    wrapped = _set_stat(_space(HAND), "addr", uint64_value=2**64 - 4096)
    fast, reference = xplane.Events(), xplane.Events()
    xplane_binary.collect(bytearray(wrapped.SerializeToString()) + bytes(PAD), fast)
    xplane.collect(wrapped, reference)
    assert fast.same_as(reference) and int(reference.column("addr")[0]) == 2**64 - 4096
