"""frag measures holes inside the allocator's regions (issue 26, item 5), on a CPU BFC profile recorded from birth.

The profile (fixtures/profiles/cpu_bfc_regions.py) grows the allocator to five regions the system
placed far apart. The independent source is the allocator's own stats at the peak event, walked
here with protobuf alone: its bytes in use and its fragmentation metric (free - largest free) /
free, with free = pool - in use. Inside regions the free memory is exactly the holes between
live chunks plus each region's free head and tail, so those stats pin the regions and the holes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import memtrace
from memtrace.allocator.regions import regions_of
from memtrace.analyses.frag import fragmentation
from memtrace.cli import main

from .memory_profiles import write_profile
from .xspace_events import memory_events

PROFILE = Path(__file__).parent.parent / "fixtures" / "profiles" / "cpu_bfc_regions.xplane.pb.gz"
ALLOCATOR = "bfc_cpu_allocator_for_gpu"
MIB = 1 << 20


@pytest.fixture(scope="module")
def trace() -> memtrace.Trace:
    return memtrace.load(PROFILE)


def test_regions_are_tfs_growth_placed_where_the_profile_put_them(trace: memtrace.Trace) -> None:
    regions = regions_of(trace, ALLOCATOR)
    assert regions is not None
    # TF's growth rule: 2 MiB, then doubling; the system (mmap) put each later one lower, none touching
    assert [r.bytes for r in regions.regions] == [32 * MIB, 16 * MIB, 8 * MIB, 4 * MIB, 2 * MIB]
    assert [r.made_at_ns for r in regions.regions] == sorted((r.made_at_ns for r in regions.regions), reverse=True)
    gaps = [b.start - a.end for a, b in zip(regions.regions, regions.regions[1:])]
    assert gaps == [4096, 4096, 4096, 203_411_456]  # what frag counted as holes before (the last 194 MiB)
    # every chunk the profile allocated lies inside one region
    chunks = [(int(e["addr"]), int(e["allocation_bytes"])) for e in memory_events(PROFILE) if e["alloc"]]  # type: ignore[call-overload]
    holding = [sum(r.start <= addr and addr + size <= r.end for r in regions.regions) for addr, size in chunks]
    assert len(chunks) == 27 and holding == [1] * 27


def test_holes_at_the_peak_are_only_those_inside_a_region(trace: memtrace.Trace) -> None:
    events = memory_events(PROFILE)
    moment = fragmentation(trace, ALLOCATOR).at_peak
    assert moment is not None and moment.external is not None
    e = moment.external
    assert len(e.regions) == 5 and len(e.ranges) == 13
    # the one hole: the freed 256 KiB tensor's place in the first region, less what a later small output took
    [hole] = e.holes
    assert hole.bytes == 260_608 and any(r.start <= hole.start < r.end for r in e.regions)
    assert e.live_bytes == e.span_bytes - hole.bytes
    # AND the allocator's own stats at the peak event agree: its free memory (pool - in use) is the
    # hole plus each region's free head and tail, its largest free chunk the largest of those pieces
    peak = max(range(len(events)), key=lambda i: (int(events[i]["bytes_allocated"]), -i))  # type: ignore[call-overload]
    in_use = int(events[peak]["bytes_allocated"])  # type: ignore[call-overload]
    assert in_use == sum(r.bytes for r in e.ranges) == e.live_bytes
    pieces = [hole.bytes]
    for region, (first, last) in zip(e.regions, e.region_spans):
        pieces += [first - region.start, region.end - last]
    free = sum(r.bytes for r in e.regions) - in_use
    assert sum(pieces) == free
    theirs = float(events[peak]["fragmentation"])  # type: ignore[arg-type]
    assert theirs == pytest.approx((free - max(pieces)) / free, rel=1e-6) and theirs > 0


def test_frag_says_holes_are_measured_inside_regions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["frag", str(PROFILE)]) == 0
    text = " ".join(capsys.readouterr().out.split())  # as one line, however the terminal wraps it
    assert "13 buffers in 5 regions of the allocator" in text
    assert "span inside the regions 60.8 MiB (63,701,248 bytes), live 60.5 MiB, 1 hole of 254 KiB" in text
    assert main(["frag", str(PROFILE), "--json"]) == 0
    external = json.loads(capsys.readouterr().out)["allocators"][0]["external"]
    assert (external["span_bytes"], external["hole_bytes"], external["holes"]) == (63_701_248, 260_608, 1)
    assert sorted(r["bytes"] for r in external["regions"]) == [2 * MIB, 4 * MIB, 8 * MIB, 16 * MIB, 32 * MIB]


def test_without_known_regions_the_walk_is_as_before() -> None:
    # the Keras fixtures start after the allocator's birth: regions unknown, one walk over all buffers
    keras = memtrace.load(PROFILE.parent / "keras_cnn.xplane.pb.gz")
    assert regions_of(keras, ALLOCATOR) is None
    moment = fragmentation(keras, ALLOCATOR).at_peak
    assert moment is not None and moment.external is not None and moment.external.regions == ()
    e = moment.external
    assert e.span_bytes == e.end - e.start == 316_160 and len(e.holes) == 7


def test_an_address_is_found_in_its_region_and_outside_every_one_in_none(trace: memtrace.Trace) -> None:
    regions = regions_of(trace, ALLOCATOR)
    assert regions is not None
    for index, region in enumerate(regions.regions):
        assert regions.index_of(region.start) == index and regions.index_of(region.end - 1) == index
    first = regions.regions[0]
    assert regions.index_of(first.end) == -1  # 4 KiB between the first region and the next: in none
    assert regions.index_of(0) == -1


def test_addresses_the_model_does_not_reproduce_give_no_regions(tmp_path: Path) -> None:
    # GIVEN a from-birth profile whose second 1 KiB chunk lies 4 MiB above the first (the model, growing from an
    # empty allocator, puts it right after the first, in the same 2 MiB region)
    events = [(True, 1024, 1024, 1 << 30, 1024, 0.0, "a"), (True, 1024, 1024, (1 << 30) + 4 * MIB, 2048, 1.0, "b")]
    trace = memtrace.load(write_profile(tmp_path / "scattered.xplane.pb", events))
    # THEN the regions are not known (holes between chunks cannot be told from the space between regions)
    assert regions_of(trace, ALLOCATOR) is None
    # AND where the addresses are the model's, they are: one region of 2 MiB from the first chunk
    events[1] = (True, 1024, 1024, (1 << 30) + 1024, 2048, 1.0, "b")
    found = regions_of(memtrace.load(write_profile(tmp_path / "packed.xplane.pb", events)), ALLOCATOR)
    assert found is not None and [(r.start, r.bytes) for r in found.regions] == [(1 << 30, 2 * MIB)]


def test_no_regions_for_an_allocator_the_profile_does_not_have_or_a_stepstats_trace(trace: memtrace.Trace) -> None:
    assert regions_of(trace, "GPU_0_bfc") is None
    assert regions_of(memtrace.load(PROFILE.parent.parent / "tiny" / "frag_bfc.pbtxt"), "gpu_bfc") is None


def test_a_profile_that_starts_after_the_allocators_birth_has_no_regions_even_where_its_chunks_look_fresh(
        tmp_path: Path) -> None:
    # GIVEN the packed profile above, but with 4 KiB in use before its first event: the allocator was born earlier
    events = [(True, 1024, 1024, 1 << 30, 5120, 0.0, "a"), (True, 1024, 1024, (1 << 30) + 1024, 6144, 1.0, "b")]
    trace = memtrace.load(write_profile(tmp_path / "later.xplane.pb", events))
    # THEN its regions are not known (the chunks from before the profile lie somewhere in them), though an empty
    # allocator would place these two chunks just so
    assert regions_of(trace, ALLOCATOR) is None


@pytest.mark.parametrize("grown_gib", [32, 64])
def test_a_gpu_allocators_regions_grow_as_far_as_a_card_holds(tmp_path: Path, grown_gib: int) -> None:
    # GIVEN a GPU allocator grown from birth (its limit depends on the card, the profile does not say it): 256 bytes
    # in a first region of 2 MiB, then 32 or 64 GiB, for which TF's Extend doubles the next region's size from 4 MiB
    # until it holds the request: a region of that size (64 GiB + 2 MiB in all: an H100's 80 GB holds it, and a
    # stand-in limit of 64 GiB, as the model took for the unknown card, could not have made it)
    gib = 1 << 30
    size = grown_gib * gib
    events = [(True, 256, 256, 1 << 44, 256, 0.0, "a"), (True, size, size, 1 << 45, size + 256, 1.0, "b")]
    trace = memtrace.load(write_profile(tmp_path / "gpu.xplane.pb", events, allocator="GPU_0_bfc"))
    # THEN both regions are found where the profile put them
    found = regions_of(trace, "GPU_0_bfc")
    assert found is not None and [(r.start, r.bytes) for r in found.regions] == [(1 << 44, 2 * MIB), (1 << 45, size)]
