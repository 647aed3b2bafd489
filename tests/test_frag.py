"""Fragmentation: hand-worked traces, the seeds' known answers, an independent recount, and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memtrace
from memtrace.allocator.bfc import rounded_bytes
from memtrace.analyses.frag import (
    Waste,
    fragmentation,
    fragmentations,
    internal_waste,
    rounding_waste,
    size_class,
)
from memtrace.errors import UsageError

from .conftest import ALEXNET, PTB, REAL_TRACES, TINY
from .helpers import run
from .proto_replay import Output, outputs_with_buffers, parse_step_stats

FRAG_BFC = TINY / "frag_bfc.pbtxt"
FRAG_ANOMALIES = TINY / "frag_anomalies.pbtxt"


def by_kind(anomalies: tuple[memtrace.analyses.frag.Anomaly, ...]) -> dict[str, int]:
    return {a.kind: a.count for a in anomalies}


# -- the BFC model --------------------------------------------------------------------------------


def test_requests_round_up_to_256_byte_multiples() -> None:
    assert [rounded_bytes(n) for n in (0, 1, 16, 255, 256, 257, 1000)] == [0, 256, 256, 256, 256, 512, 1024]


def test_rounding_waste_is_capped_by_the_waste_and_the_rest_is_an_unsplit_chunk() -> None:
    assert rounding_waste(16, 256) == 240  # all rounding
    assert rounding_waste(300, 1024) == 212  # 300 -> 512, the other 512 is an unsplit chunk
    assert rounding_waste(4096, 8192) == 0  # already a multiple: all unsplit
    assert rounding_waste(100, 120) == 20  # never more than the waste itself


def test_size_classes_are_powers_of_two_of_the_request() -> None:
    assert [size_class(n) for n in (0, 1, 2, 3, 16, 17, 4096, 4097)] == [1, 1, 2, 4, 16, 32, 4096, 8192]


def test_waste_adds_up_and_has_no_fraction_without_allocation() -> None:
    total = Waste(1, 16, 256, 240) + Waste(1, 300, 1024, 212)
    assert total == Waste(2, 316, 1280, 452)
    assert (total.waste_bytes, total.unsplit_waste_bytes) == (964, 512)
    assert Waste().waste_fraction == 0.0


# -- hand-worked traces (answers in the fixtures' headers) ----------------------------------------


def test_hand_worked_totals_count_aliases_once_and_skip_zero_ids() -> None:
    f = fragmentation(memtrace.load(FRAG_BFC), "gpu_bfc")
    assert f.bfc
    assert f.total == Waste(tensors=3, requested_bytes=5396, allocated_bytes=10240, rounding_waste_bytes=236)
    assert (f.total.waste_bytes, f.total.unsplit_waste_bytes) == (4844, 4608)
    assert f.total.waste_fraction == pytest.approx(4844 / 10240)
    # c forwards b (same id and pointer): one buffer, attributed to b; d has allocation id 0.
    assert sorted((b.node, b.allocation_id) for b in f.buffers) == [("a", 1), ("b", 2), ("e", 3)]


def test_same_allocation_id_in_two_allocators_is_two_buffers() -> None:
    trace = memtrace.load(FRAG_BFC)
    gpu, host = fragmentation(trace, "gpu_bfc"), fragmentation(trace, "host_bfc")
    assert [(b.node, b.allocation_id) for b in host.buffers] == [("f", 1)]
    assert ("a", 1) in [(b.node, b.allocation_id) for b in gpu.buffers]
    assert host.total == Waste(1, 16, 256, 240)


def test_hand_worked_split_histogram_and_top_wasters() -> None:
    f = fragmentation(memtrace.load(FRAG_BFC), "gpu_bfc")
    assert [(b.node, b.waste.rounding_waste_bytes, b.waste.unsplit_waste_bytes) for b in f.buffers] == [
        ("e", 0, 4096), ("b", 212, 512), ("a", 24, 0),
    ]
    assert [(c.max_bytes, c.waste.tensors, c.waste.waste_bytes) for c in f.histogram] == [(512, 1, 724), (1024, 1, 24), (4096, 1, 4096)]
    assert [(o.node, o.waste.waste_bytes) for o in f.ops] == [("e", 4096), ("b", 724), ("a", 24)]


def test_hand_worked_peak_internal_and_address_space() -> None:
    f = fragmentation(memtrace.load(FRAG_BFC), "gpu_bfc")
    peak = f.at_peak
    assert (peak.time_us, peak.replay_live_bytes) == (61, 9216)
    assert (peak.live.tensors, peak.live.requested_bytes, peak.live.allocated_bytes, peak.live.waste_bytes) == (2, 4396, 9216, 4820)
    e = f.external
    assert e is not None and e is peak.external
    assert [(r.node, r.start, r.end) for r in e.ranges] == [("b", 67072, 68096), ("e", 70144, 78336)]
    assert (e.span_bytes, e.live_bytes, e.hole_bytes, e.largest_hole_bytes) == (11264, 9216, 2048, 2048)
    assert [(h.start, h.bytes, h.below, h.above) for h in e.holes] == [(68096, 2048, "b", "e")]
    assert e.free_fraction == pytest.approx(2048 / 11264)
    assert (e.overlaps, f.anomalies) == ((), ())


def test_at_a_given_time_measures_the_buffers_alive_then() -> None:
    f = fragmentation(memtrace.load(FRAG_BFC), "gpu_bfc", at_us=25)
    assert f.at is not None and f.at.time_us == 25
    assert (f.at.live.tensors, f.at.live.requested_bytes, f.at.live.allocated_bytes, f.at.live.waste_bytes) == (2, 1300, 2048, 748)
    e = f.external
    assert e is not None and e is f.at.external
    assert (e.start, e.span_bytes, e.live_bytes, len(e.holes), e.largest_hole_bytes) == (65536, 2560, 2048, 1, 512)
    assert e.free_fraction == pytest.approx(0.2)
    assert f.at_peak.time_us == 61  # the peak is still reported


def test_a_time_before_any_allocation_sees_nothing() -> None:
    f = fragmentation(memtrace.load(FRAG_BFC), "gpu_bfc", at_us=-5)
    assert f.at is not None and (f.at.live, f.at.external, f.external) == (Waste(), None, None)


def test_allocator_without_records_uses_output_lifetimes() -> None:
    f = fragmentation(memtrace.load(FRAG_BFC), "host_bfc")
    assert (f.at_peak.time_us, f.at_peak.live) == (80, Waste(1, 16, 256, 240))
    assert f.external is not None and (f.external.span_bytes, f.external.holes) == (256, ())


def test_every_anomaly_kind_is_counted_with_examples_and_never_fatal() -> None:
    result = fragmentations(memtrace.load(FRAG_ANOMALIES))
    found = {f.allocator: f for f in result.allocators}
    assert by_kind(found["gpu_bfc"].anomalies) == {
        "requested-exceeds-allocated": 1,
        "size-not-tracked": 1,
        "id-reused-with-another-size": 1,
        "not-256-aligned": 2,
    }
    examples = {a.kind: a.examples for a in found["gpu_bfc"].anomalies}
    assert examples["requested-exceeds-allocated"] == ("x:0 requested 2,000 B, allocated 1,024 B",)
    assert examples["id-reused-with-another-size"] == ("id 2: 512 B (y:0), 1,024 B (z:0)",)
    assert found["gpu_bfc"].total == Waste(3, 2612, 1836, -976 + 0 + 156)
    assert by_kind(result.anomalies) == {"output-without-allocator": 1}


def test_cpu_allocators_repeat_ids_at_other_pointers_without_anomaly() -> None:
    f = fragmentation(memtrace.load(FRAG_ANOMALIES), "cpu")
    assert not f.bfc
    assert sorted((b.node, b.allocation_id, b.ptr) for b in f.buffers) == [("p", 1, 1000), ("q", 1, 2000)]
    assert f.anomalies == ()


def test_overlapping_live_buffers_are_a_finding() -> None:
    f = fragmentation(memtrace.load(FRAG_ANOMALIES), "ov_bfc")
    e = f.external
    assert e is not None and f.at_peak.time_us == 80
    assert (e.span_bytes, e.live_bytes, e.holes, e.overlap_bytes) == (768, 768, (), 256)
    assert by_kind(f.anomalies) == {"overlapping-live-buffers": 1}


def test_unknown_allocator_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="no allocator 'nope'"):
        fragmentation(memtrace.load(FRAG_BFC), "nope")


# -- the seeds --------------------------------------------------------------------------------------


def test_alexnet_host_waste_is_sixteen_byte_constants_in_256_byte_chunks() -> None:
    f = fragmentation(memtrace.load(ALEXNET), "cuda_host_bfc")
    assert f.total == Waste(tensors=11, requested_bytes=176, allocated_bytes=2816, rounding_waste_bytes=2640)
    assert f.total.waste_bytes == 2640 and f.total.unsplit_waste_bytes == 0
    assert [(c.max_bytes, c.waste.tensors, c.waste.waste_bytes) for c in f.histogram] == [(16, 11, 2640)]
    assert all((b.requested_bytes, b.allocated_bytes, b.dtype, b.shape) == (16, 256, "int32", [4]) for b in f.buffers)


def test_alexnet_gpu_waste_is_unsplit_chunks() -> None:
    f = fragmentation(memtrace.load(ALEXNET), "GPU_0_bfc")
    assert (f.total.tensors, f.total.waste_bytes, f.total.rounding_waste_bytes) == (59, 143_328_768, 0)
    assert (f.buffers[0].node, f.buffers[0].waste.waste_bytes) == ("lrn1/LRN", 52_069_888)
    assert f.anomalies == ()


def test_ptb_cpu_outputs_without_allocated_size_are_anomalies() -> None:
    result = fragmentations(memtrace.load(PTB))
    cpu = next(f for f in result.allocators if f.allocator == "cpu")
    assert by_kind(cpu.anomalies) == {"size-not-tracked": 10}
    assert cpu.total == Waste(1, 136, 136, 0)  # the one output whose size is tracked
    assert by_kind(result.anomalies) == {"output-without-allocator": 2}


def independent_recount(trace: memtrace.Trace, allocator: str) -> tuple[int, int, int, int]:
    """Unique buffers counted with a plain loop over the Outputs table, without memtrace.analyses.frag."""
    index = trace.allocators.index(allocator)
    seen: dict[tuple[int, int], tuple[int, int]] = {}
    o = trace.outputs
    for row in range(len(o)):
        if o.allocator[row] == index and o.allocation_id[row] != 0 and o.allocated_bytes[row] > 0:
            seen.setdefault((int(o.allocation_id[row]), int(o.ptr[row])), (int(o.requested_bytes[row]), int(o.allocated_bytes[row])))
    rounding = sum(min(a - r, (r + 255) // 256 * 256 - r) for r, a in seen.values())
    return len(seen), sum(r for r, _ in seen.values()), sum(a for _, a in seen.values()), rounding


def _ids_reused(trace: memtrace.Trace, allocator: str) -> bool:
    o = trace.outputs
    index = trace.allocators.index(allocator)
    pairs = {(int(o.allocation_id[r]), int(o.ptr[r])) for r in range(len(o)) if o.allocator[r] == index and o.allocation_id[r]}
    return len(pairs) != len({i for i, _ in pairs})


def _own_allocations(trace: memtrace.Trace, allocator: str) -> int:
    """Outputs whose own node has an allocation record of their size: buffers it surely created."""
    index = trace.allocators.index(allocator)
    r, o = trace.records, trace.outputs
    left: dict[tuple[int, int], int] = {}
    for k in range(len(r)):
        if r.allocator[k] == index and r.bytes[k] > 0:
            key = (int(r.node[k]), int(r.bytes[k]))
            left[key] = left.get(key, 0) + 1
    found = 0
    for row in range(len(o)):
        key = (int(o.node[row]), int(o.allocated_bytes[row]))
        if o.allocator[row] == index and o.allocation_id[row] and o.allocated_bytes[row] > 0 and left.get(key, 0) > 0:
            left[key] -= 1
            found += 1
    return found


@pytest.mark.parametrize("trace_path", REAL_TRACES, ids=lambda p: p.name)
def test_totals_match_an_independent_recount_on_every_real_trace(trace_path: Path) -> None:
    """Where ids are unique (BFC), (id, ptr) identifies a buffer and a plain loop recounts exactly.

    CPU allocators number ids per op and reuse freed pointers, so there the count must lie
    between the buffers whose node recorded their allocation and all tracked output rows.
    """
    trace = memtrace.load(trace_path)
    for f in fragmentations(trace).allocators:
        ours = (f.total.tensors, f.total.requested_bytes, f.total.allocated_bytes, f.total.rounding_waste_bytes)
        if not _ids_reused(trace, f.allocator):
            assert ours == independent_recount(trace, f.allocator), f.allocator
            continue
        index = trace.allocators.index(f.allocator)
        o = trace.outputs
        tracked_rows = int(((o.allocator == index) & (o.allocation_id != 0) & (o.allocated_bytes > 0)).sum())
        assert _own_allocations(trace, f.allocator) <= f.total.tensors <= tracked_rows, f.allocator
        assert independent_recount(trace, f.allocator)[0] <= f.total.tensors, f.allocator


def test_alexnet_gpu_recount_by_hand_numbers() -> None:
    # memtrace's totals, the plain loop over the Outputs table, and the proto's buffers: one answer.
    trace = memtrace.load(ALEXNET)
    total = fragmentation(trace, "GPU_0_bfc").total
    numbers = (59, 2_162_620_928, 2_305_949_696, 0)
    assert (total.tensors, total.requested_bytes, total.allocated_bytes, total.rounding_waste_bytes) == numbers
    assert independent_recount(trace, "GPU_0_bfc") == numbers
    buffers = _buffers_from_the_proto(ALEXNET, "GPU_0_bfc")
    assert (len(buffers), sum(b[4] for b in buffers), sum(b[5] for b in buffers)) == numbers[:3]


@pytest.mark.parametrize("trace_path", REAL_TRACES, ids=lambda p: p.name)
def test_identities_and_the_peak_agree_with_memtrace_peak(trace_path: Path) -> None:
    trace = memtrace.load(trace_path)
    for f in fragmentations(trace).allocators:
        assert sum((c.waste for c in f.histogram), Waste()) == f.total
        assert sum((o.waste for o in f.ops), Waste()) == f.total
        p = trace.peak(f.allocator)
        assert f.at_peak.time_us == (p.peak_time_us if p.peak_node is not None else None)
        assert f.at_peak.replay_live_bytes == p.peak_delta_bytes
        # Independent route: memtrace.analyses.peak's live set, its output entries with an allocation id.
        outputs = [a for a in p.live_at_peak if a.kind == "output" and a.allocation_id]
        live = f.at_peak.live
        assert (live.tensors, live.requested_bytes, live.allocated_bytes) == (
            len(outputs), sum(a.requested_bytes or 0 for a in outputs), sum(a.bytes for a in outputs)
        ), f.allocator
        e = f.external
        if e is not None:
            assert e.live_bytes + e.hole_bytes == e.span_bytes
            assert e.largest_hole_bytes <= e.hole_bytes


# -- the command line -------------------------------------------------------------------------------


def test_text_makes_the_alexnet_host_story_obvious(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "frag", str(ALEXNET), "--allocator", "cuda_host_bfc")
    assert code == 0
    assert out.startswith("cuda_host_bfc (BFC): 11 buffers, requested 176 B, allocated 2.75 KiB (2,816 bytes)")
    assert "11 small tensors of at most 16 B each take a whole 256-byte chunk" in out
    row = next(line for line in out.splitlines() if line.strip().startswith("<= 16 B"))
    assert row.split()[3:10] == ["11", "176", "B", "2.75", "KiB", "2.58", "KiB"]  # sizes as people read them


def test_text_shows_peak_address_space_and_says_what_it_cannot_see(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "frag", str(FRAG_BFC), "--allocator", "gpu_bfc")
    assert code == 0
    assert "address space at the peak: 2 buffers from 0x10600 to 0x13200" in out
    assert "1 hole of 2 KiB: 18.2% of the span is free" in out
    assert "only output buffers the trace describes" in out


def test_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "frag", str(FRAG_BFC), "--json", "--at", "25")
    assert code == 0
    document = json.loads(out)
    assert document["schema"] == "memtrace.frag/1" and document["trace"] == str(FRAG_BFC)
    gpu = next(a for a in document["allocators"] if a["allocator"] == "gpu_bfc")
    assert {k: gpu[k] for k in ("tensors", "requested_bytes", "allocated_bytes", "waste_bytes", "rounding_waste_bytes", "unsplit_waste_bytes")} == {
        "tensors": 3, "requested_bytes": 5396, "allocated_bytes": 10240, "waste_bytes": 4844,
        "rounding_waste_bytes": 236, "unsplit_waste_bytes": 4608,
    }
    assert gpu["waste_fraction"] == pytest.approx(4844 / 10240)
    assert {k: gpu["at_peak"][k] for k in ("requested_bytes", "allocated_bytes", "waste_bytes")} == {
        "requested_bytes": 4396, "allocated_bytes": 9216, "waste_bytes": 4820,
    }
    external = gpu["external"]  # at --at 25
    assert {k: external[k] for k in ("time_us", "span_bytes", "live_bytes", "holes", "largest_hole_bytes")} == {
        "time_us": 25, "span_bytes": 2560, "live_bytes": 2048, "holes": 1, "largest_hole_bytes": 512,
    }
    assert gpu["histogram"][0].keys() >= {"max_bytes", "tensors", "waste_bytes"}
    assert gpu["anomalies"] == []
    cpu_free = json.loads(run(capsys, "frag", str(ALEXNET), "--json", "--allocator", "cpu")[1])
    assert cpu_free["allocators"][0]["external"] is None


def test_json_anomalies_carry_kind_count_and_detail(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "frag", str(PTB), "--json", "--allocator", "cpu", "--top", "2")
    assert code == 0
    document = json.loads(out)
    (anomaly,) = document["allocators"][0]["anomalies"]
    assert (anomaly["kind"], anomaly["count"], len(anomaly["examples"])) == ("size-not-tracked", 10, 3)
    assert "allocated_bytes 0" in anomaly["detail"]
    assert [a["kind"] for a in document["anomalies"]] == ["output-without-allocator"]


def test_top_limits_the_wasters(capsys: pytest.CaptureFixture[str]) -> None:
    document = json.loads(run(capsys, "frag", str(ALEXNET), "--json", "--top", "2")[1])
    assert all(len(a["top_buffers"]) <= 2 and len(a["top_ops"]) <= 2 for a in document["allocators"])
    _, out, _ = run(capsys, "frag", str(ALEXNET), "--allocator", "cuda_host_bfc", "--top", "2")
    assert "(9 more)" in out


def test_unknown_allocator_exits_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "frag", str(ALEXNET), "--allocator", "nope")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "nope" in err


def test_names_from_the_trace_are_escaped(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    trace = tmp_path / "evil.pbtxt"
    trace.write_text(
        'dev_stats { device: "/job:localhost/replica:0/task:0/device:GPU:0" node_stats {\n'
        '  node_name: "evil\\033[31m" all_start_micros: 10 all_end_rel_micros: 5\n'
        '  output { slot: 0 tensor_description { allocation_description {\n'
        '    requested_bytes: 4 allocated_bytes: 256 allocator_name: "bfc\\033[2J" allocation_id: 1 ptr: 512 } } } } }\n'
    )
    code, out, _ = run(capsys, "frag", str(trace))
    assert code == 0
    assert "\x1b" not in out
    assert "evil\\x1b[31m:0" in out and out.startswith("bfc\\x1b[2J (BFC): 1 buffer,")


# -- the numpy sums against the buffers one by one ---------------------------------------------------------


def _anomalies_one_by_one(path: Path, allocator: str) -> list[tuple[str, int, tuple[str, ...]]]:
    """The per-output anomalies as the module docstring says them, walking the proto's outputs in order.

    Which outputs share a buffer comes from tests/proto_replay.py, not from memtrace.trace.buffers.
    """
    step = parse_step_stats(path)
    outputs = outputs_with_buffers(step, allocator)
    label = lambda out: f"{out.node}:{out.slot}"
    found: dict[str, list[str]] = {}
    tracks_sizes = any(out.allocated_bytes > 0 for out in outputs)
    sizes: dict[tuple[int, int], dict[tuple[int, int], Output]] = {}
    for out in outputs:
        requested, allocated = out.requested_bytes, out.allocated_bytes
        if 0 < allocated < requested:
            found.setdefault("requested-exceeds-allocated", []).append(
                f"{label(out)} requested {requested:,} B, allocated {allocated:,} B")
        elif allocated == 0 and requested > 0 and tracks_sizes:
            found.setdefault("size-not-tracked", []).append(f"{label(out)} requested {requested:,} B, allocated_bytes 0")
        if out.allocation_id != 0:
            # One buffer: the id on BFC, else the buffer the dataflow says (one id and pointer
            # with separate lifetimes are two buffers).
            key = (out.allocation_id, 0 if "bfc" in allocator.lower() else out.buffer)
            sizes.setdefault(key, {}).setdefault((requested, allocated), out)
    for (allocation_id, _), seen in sizes.items():
        if len(seen) > 1:
            shown = ", ".join(f"{a:,} B ({label(out)})" for (_, a), out in list(seen.items())[:3])
            found.setdefault("id-reused-with-another-size", []).append(f"id {allocation_id}: {shown}")
    if "bfc" in allocator.lower():
        for index, out in enumerate(outputs):
            # TF's CPU sub-allocator aligns a region to 64 bytes only (kAllocatorAlignment).
            address_alignment = 64 if "cpu" in allocator.lower() else 256
            if out.buffer == index and out.allocation_id and out.allocated_bytes > 0 and (
                    out.ptr % address_alignment or out.allocated_bytes % 256):
                found.setdefault("not-256-aligned", []).append(f"{label(out)} {out.allocated_bytes:,} B at {out.ptr:#x}")
        for device in step.dev_stats:
            for node in device.node_stats:
                for used in node.memory:
                    if used.allocator_name != allocator:
                        continue
                    for record in used.allocation_records:
                        if record.alloc_bytes > 0 and record.alloc_bytes % 256:
                            found.setdefault("not-256-aligned", []).append(
                                f"record of {record.alloc_bytes:,} B on {node.node_name}")
    return [(kind, len(examples), tuple(examples[:3])) for kind, examples in found.items()]


def _buffers_from_the_proto(path: Path, allocator: str) -> list[tuple[str, int, int, int, int, int]]:
    """The measurable buffers (an id, allocated bytes) as tests/proto_replay.py finds them, in trace order."""
    outputs = outputs_with_buffers(parse_step_stats(path), allocator)
    return [(out.node, out.slot, out.allocation_id, out.ptr, out.requested_bytes, out.allocated_bytes)
            for index, out in enumerate(outputs) if out.buffer == index and out.allocation_id and out.allocated_bytes > 0]


# TF 1.4's MemoryStats fields, which today's proto lacks, are left out (the going-by-buffer side cannot read them).
@pytest.mark.parametrize("path", [p for p in [*REAL_TRACES, *sorted(TINY.glob("*.pbtxt"))]
                                  if p.name != "tf14_memory_stats.pbtxt"], ids=lambda p: p.name)
def test_sums_order_and_anomalies_equal_going_buffer_by_buffer(path: Path) -> None:
    trace = memtrace.load(path)
    for allocator in trace.allocators:
        f = fragmentation(trace, allocator)
        got = [(b.node, b.slot, b.allocation_id, b.ptr, b.requested_bytes, b.allocated_bytes) for b in f.buffers]
        expected = _buffers_from_the_proto(path, allocator)
        assert sorted(got) == sorted(expected), allocator
        waste = [Waste(1, r, a, min(a - r, (r + 255) // 256 * 256 - r)) for _, _, _, _, r, a in expected]
        assert got == [row for row, _ in sorted(zip(expected, waste), key=lambda pair: (
            -pair[1].waste_bytes, pair[0][0], pair[0][1]))], allocator
        assert f.total == sum(waste, Waste())
        by_node: dict[str, Waste] = {}
        by_class: dict[int, Waste] = {}
        for (node, _, _, _, requested, _), w in zip(expected, waste):
            by_node[node] = by_node.get(node, Waste()) + w
            size_class = 1  # the smallest power of two at least the request
            while size_class < requested:
                size_class *= 2
            by_class[size_class] = by_class.get(size_class, Waste()) + w
        assert {o.node: o.waste for o in f.ops} == by_node
        assert [(c.max_bytes, c.waste) for c in f.histogram] == sorted(by_class.items())
        per_output = [(a.kind, a.count, a.examples) for a in f.anomalies if a.kind != "overlapping-live-buffers"]
        assert per_output == _anomalies_one_by_one(path, allocator)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(outputs=st.lists(st.tuples(st.sampled_from(["gpu_bfc", "cpu"]), st.integers(0, 4), st.sampled_from([0, 256, 4096]),
                          st.sampled_from([0, 100, 256, 300]), st.sampled_from([0, 256, 512, 1000])), min_size=1, max_size=30))
def test_anomalies_of_generated_outputs_equal_going_output_by_output(
        outputs: list[tuple[str, int, int, int, int]], tmp_path: Path) -> None:
    """Ids reused at one or several pointers, sizes untracked or too small, odd sizes: any mix."""
    path = tmp_path / "t.pbtxt"
    path.write_text('dev_stats { device: "/job:localhost/replica:0/task:0/device:GPU:0" ' + "".join(
        f'node_stats {{ node_name: "n{k}" all_start_micros: {10 + k} all_end_rel_micros: 1 output {{ tensor_description {{ '
        f'allocation_description {{ allocator_name: "{allocator}" allocation_id: {allocation_id} ptr: {ptr} '
        f"requested_bytes: {requested} allocated_bytes: {allocated} }} }} }} }} "
        for k, (allocator, allocation_id, ptr, requested, allocated) in enumerate(outputs)
    ) + "}")
    trace = memtrace.load(path)
    for allocator in trace.allocators:
        got = [(a.kind, a.count, a.examples) for a in fragmentation(trace, allocator).anomalies
               if a.kind != "overlapping-live-buffers"]
        assert got == _anomalies_one_by_one(path, allocator)


@pytest.mark.parametrize("path", [ALEXNET, PTB], ids=lambda p: p.name)
def test_internal_waste_is_the_waste_of_the_buffers_the_proto_shows(path: Path) -> None:
    # internal_waste (no replay) against the buffers tests/proto_replay.py finds, summed by hand.
    trace = memtrace.load(path)
    for allocator in trace.allocators:
        by_node: dict[str, Waste] = {}
        for node, _, _, _, r, a in _buffers_from_the_proto(path, allocator):
            by_node[node] = by_node.get(node, Waste()) + Waste(1, r, a, min(a - r, (r + 255) // 256 * 256 - r))
        total = sum(by_node.values(), Waste())
        ops = sorted(((node, w) for node, w in by_node.items()), key=lambda item: (-item[1].waste_bytes, item[0]))
        got_total, got_ops = internal_waste(trace, allocator)
        assert got_total == total and [(o.node, o.waste) for o in got_ops] == ops, allocator
        assert fragmentation(trace, allocator).total == total, allocator


_HUGE_REQUEST = """dev_stats {
  device: "/cpu:0"
  node_stats {
    node_name: "a"
    all_start_micros: 1
    all_end_rel_micros: 2
    memory { allocator_name: "cpu" allocation_records { alloc_micros: 1 alloc_bytes: 256 } }
    output { slot: 0 tensor_description { dtype: DT_FLOAT allocation_description {
      requested_bytes: 9223372036854775807 allocated_bytes: 256 allocator_name: "cpu" allocation_id: 1 ptr: 4096 } } }
  }
}
"""


@pytest.mark.parametrize("argv", [["frag", "--json"], ["report", "--json"], ["frag"]])
def test_a_request_of_int64_max_falls_in_the_size_class_of_two_to_the_63(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    """Issue 25 item 14: the class above a request past 2^62 is 2^63, beyond int64 (it overflowed)."""
    path = tmp_path / "huge.pbtxt"
    path.write_text(_HUGE_REQUEST)
    assert size_class(2**63 - 1) == 2**63  # the smallest power of two at least the request
    code, out, err = run(capsys, *argv, str(path))
    assert code == 0 and err == ""
    if argv[0] == "frag" and argv[1:] == ["--json"]:
        [allocator] = json.loads(out)["allocators"]
        assert [(c["max_bytes"], c["tensors"], c["requested_bytes"]) for c in allocator["histogram"]] == [
            (2**63, 1, 2**63 - 1)]
        assert [a["kind"] for a in allocator["anomalies"]] == ["requested-exceeds-allocated"]


@pytest.mark.parametrize("name", ["keras_cnn", "keras_mlp", "keras_lstm"])
def test_cpu_bfc_chunks_at_64_byte_aligned_addresses_are_no_anomaly(name: str) -> None:
    # GIVEN a real TF 2 profile of TensorFlow's CPU BFC, whose chunks all sit at addresses ending
    # in 0x40 (its sub-allocator aligns regions to 64 bytes) and are all multiples of 256 bytes
    trace = memtrace.load(TINY.parent / "profiles" / f"{name}.xplane.pb.gz")
    outputs = trace.outputs
    assert {int(p) % 256 for p in outputs.ptr} == {64} and not (outputs.allocated_bytes % 256).any()
    # THEN no allocation is flagged as misaligned
    f = fragmentation(trace, "bfc_cpu_allocator_for_gpu")
    assert [a.kind for a in f.anomalies if a.kind == "not-256-aligned"] == []
