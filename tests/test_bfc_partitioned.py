"""XLA's partitioned BFC allocator (``BFCOptions(partitioned=True)``), rule by rule.

GIVEN tiny request sequences whose answers are worked out by hand from the rules of openxla/xla's
``xla/tsl/framework/bfc_allocator.cc`` (the scenarios of XLA's own spatial-partitioning unit tests,
and one for each rule they leave out) WHEN the model replays them THEN every offset, chunk size,
tag and statistic is the one worked out. The real recordings (JAX 0.11.2 on an H200) are held to
the model in ``tests/test_fit_xla.py``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import replace

import numpy as np
import pytest

from memtrace.allocator import bfc
from memtrace.allocator.bfc import BFCOptions, ChunkState, EndPolicy, Requests
from tests.test_bfc import InOrder

pytestmark = pytest.mark.usefixtures("replays_as_a_command_of_its_own")  # (tests/conftest.py)

MIB = 1 << 20
HEURISTIC_GAP = EndPolicy(gap_split="heuristic")  # JAX 0.11.2's lower end: a small gap is handed out whole
SOURCE = EndPolicy()  # openxla/xla's source: holes split by BFC's rule, the gap exactly


def partitioned(limit: int, lower: EndPolicy = SOURCE, upper: EndPolicy = SOURCE) -> BFCOptions:
    return BFCOptions(limit, allow_growth=False, partitioned=True, lower_end=lower, upper_end=upper)


def replay(events: list[tuple[object, ...]], options: BFCOptions) -> bfc.Simulation:
    return bfc.simulate(Requests.from_events(events), options)


def chunks(sim: bfc.Simulation) -> list[tuple[int, int, bool, str]]:
    """The map at the end (or the failure): (offset, size, in use, tag) in address order."""
    return [(c.offset, c.size_bytes, c.in_use, c.tag) for c in sim.chunks]


# -- the two ends and the central gap ----------------------------------------------------------


def test_the_ends_grow_from_the_two_ends_of_one_region() -> None:
    # XLA's SpatialAllocatesFromEnds: a lower 256 B at the base, an upper 256 B at the top of 4096
    sim = replay([("a", 256), ("u", 256)], partitioned(4096))
    assert sim.offset.tolist() == [0, 4096 - 256]
    assert chunks(sim) == [(0, 256, True, "lower"), (256, 3584, False, "central_gap"), (3840, 256, True, "upper")]
    assert sim.regions == sim.made_regions == ((0, 4096),) and sim.pool_bytes.tolist() == [4096, 4096]


def test_an_upper_offset_does_not_depend_on_the_lower_end() -> None:
    # XLA's SpatialKeepsUpperOffset: 256 lower, then 512 upper, with or without 1 KiB more lower in between
    a = replay([("a", 256), ("u", 512)], partitioned(4096))
    b = replay([("a", 256), ("a", 1024), ("u", 512)], partitioned(4096))
    assert a.offset[-1] == b.offset[-1] == 3584


def test_an_end_never_uses_the_other_ends_hole() -> None:
    # XLA's SpatialSkipsLowerHole: 256 + 256 lower and 512 upper fill 1024; the first lower freed is
    # trapped below the second (an interior lower hole), so a 256 B upper request fails
    sim = replay([("a", 256), ("a", 256), ("u", 512), ("f", 0), ("u", 256)], partitioned(1024))
    assert sim.failed_at == 4
    assert chunks(sim)[0] == (0, 256, False, "lower")
    # ... and XLA's SpatialSkipsUpperHole, mirrored
    sim = replay([("u", 256), ("u", 256), ("a", 512), ("f", 0), ("a", 256)], partitioned(1024))
    assert sim.failed_at == 4 and chunks(sim)[-1] == (768, 256, False, "upper")


def test_a_freed_boundary_chunk_rejoins_the_gap() -> None:
    # XLA's SpatialLowerReclaimsGap: 1 KiB upper freed, then the lower end takes all 2 KiB
    sim = replay([("u", 1024), ("f", 0), ("a", 2048)], partitioned(2048))
    assert sim.fits and sim.offset.tolist() == [1024, 1024, 0] and sim.chunk_bytes[-1] == 2048


def test_the_boundary_moves_with_frees_but_ownership_holds() -> None:
    # XLA's SpatialReclaimsGap: lower 1 KiB at 0; upper 512 at 3584, freed (back to the gap); lower 512 at 1024;
    # upper 512 at 3584 again, freed; lower 2560 takes the gap up to the top; an upper 256 then fails
    sim = replay([("a", 1024), ("u", 512), ("f", 1), ("a", 512), ("u", 512), ("f", 4), ("a", 2560), ("u", 256)],
                 partitioned(4096))
    assert sim.offset.tolist()[:7] == [0, 3584, 3584, 1024, 3584, 3584, 1536]
    assert 1536 + 2560 == 3584 + 512 and sim.failed_at == 7


def test_a_whole_end_freed_reforms_one_gap_for_the_other_end() -> None:
    # XLA's SpatialUpperReclaimsAfterLowerFill: 32 x 32 MiB fill 1 GiB from below, all freed in order; an 18 MiB
    # upper request then ends at the top of the pool. Each free but the last leaves an interior hole that the
    # last boundary free sweeps into the gap (the cascade: hole + boundary chunk + gap, one larger gap).
    events: list[tuple[object, ...]] = [("a", 32 * MIB) for _ in range(32)]
    events += [("f", row) for row in range(32)] + [("u", 18 * MIB)]
    sim = replay(events, partitioned(1 << 30))
    assert sim.fits and sim.offset[-1] + 18 * MIB == 1 << 30
    assert chunks(sim) == [(0, (1 << 30) - 18 * MIB, False, "central_gap"), ((1 << 30) - 18 * MIB, 18 * MIB, True, "upper")]
    # ... and mirrored (XLA's SpatialLowerReclaimsAfterUpperFill)
    events = [("u", 32 * MIB) for _ in range(32)] + [("f", row) for row in range(32)] + [("a", 18 * MIB)]
    assert replay(events, partitioned(1 << 30)).offset[-1] == 0


def test_a_boundary_free_sweeps_the_ends_holes_below_it_into_the_gap() -> None:
    # three 1 KiB from below in 4096 (a 1 KiB gap above); the middle one freed stays a lower hole (a lower chunk is
    # above it); the top one freed rejoins the gap, and merging (MergedChunkTag: hole + gap -> gap) makes one gap of
    # 3 KiB, which a 3 KiB lower request then carves from its start
    sim = replay([("a", 1024), ("a", 1024), ("a", 1024), ("f", 1)], partitioned(4096))
    assert chunks(sim) == [(0, 1024, True, "lower"), (1024, 1024, False, "lower"), (2048, 1024, True, "lower"),
                           (3072, 1024, False, "central_gap")]
    sim = replay([("a", 1024), ("a", 1024), ("a", 1024), ("f", 1), ("f", 2), ("a", 3072)], partitioned(4096))
    assert sim.offset.tolist() == [0, 1024, 2048, 1024, 2048, 1024] and sim.fits
    assert sim.largest_free_bytes.tolist()[3:5] == [1024, 3072]


def test_own_holes_are_reused_before_the_gap_even_when_the_gap_fits_better() -> None:
    # XLA's SpatialReusesOwnHoles: three 256 B at each end, the middle ones freed, then taken again
    sim = replay([("a", 256), ("a", 256), ("a", 256), ("u", 256), ("u", 256), ("u", 256), ("f", 1), ("f", 4),
                  ("a", 256), ("u", 256)], partitioned(4096))
    assert sim.offset.tolist()[8:] == [256, 3584]
    # A 2 KiB lower hole (the first chunk, freed below a live one) and a 1 KiB gap: a 768 B request takes the
    # hole (split: 2048 >= 2 x 768), where classic BFC takes the better-fitting free chunk at the top whole
    # (what mlp_930's event 110 shows on a real H200).
    events: list[tuple[object, ...]] = [("a", 2048), ("a", 1024), ("f", 0), ("a", 768)]
    part = replay(events, partitioned(4096))
    classic = replay(events, BFCOptions(4096, allow_growth=False))
    assert (part.offset[-1], part.chunk_bytes[-1]) == (0, 768)
    assert (classic.offset[-1], classic.chunk_bytes[-1]) == (3072, 1024)


# -- splitting: the heuristic and the exact policy ----------------------------------------------


def test_the_gap_is_split_exactly_as_xlas_source_does_or_handed_out_whole_as_jax_0_11_does() -> None:
    # a 3000 B request (3072 rounded) in a 4096 B gap: 4096 < 2 x 3072, and 1 KiB to spare is under 128 MiB
    exact = replay([("a", 3000)], partitioned(4096))
    whole = replay([("a", 3000)], partitioned(4096, lower=HEURISTIC_GAP))
    assert chunks(exact) == [(0, 3072, True, "lower"), (3072, 1024, False, "central_gap")]
    assert chunks(whole) == [(0, 4096, True, "lower")]
    assert (exact.bytes_in_use[0], whole.bytes_in_use[0]) == (3072, 4096)
    # at least twice the request, the heuristic splits too, and the rest stays the gap
    assert chunks(replay([("a", 2048)], partitioned(4096, lower=HEURISTIC_GAP)))[1] == (2048, 2048, False,
                                                                                         "central_gap")


def test_a_hole_is_split_by_the_heuristic_or_exactly() -> None:
    # a 1 KiB lower hole (below a live chunk); a 600 B request (768 rounded): 1024 < 2 x 768, so BFC's rule
    # hands the hole out whole; the exact policy leaves a 256 B lower hole
    events: list[tuple[object, ...]] = [("a", 1024), ("a", 256), ("f", 0), ("a", 600)]
    heuristic = replay(events, partitioned(4096))
    exact = replay(events, partitioned(4096, lower=EndPolicy(hole_split="exact")))
    assert chunks(heuristic)[0] == (0, 1024, True, "lower")
    assert chunks(exact)[:2] == [(0, 768, True, "lower"), (768, 256, False, "lower")]
    # AND at the upper end (AllocateChunkFromHighEnd): a 768 B upper hole (above a live upper chunk) and 512 B asked:
    # 768 < 2 x 512, so BFC's rule hands the hole out whole, from its start; the exact policy carves the 512 B from
    # its top and leaves a 256 B upper hole below
    events = [("u", 768), ("u", 256), ("f", 0), ("u", 512)]
    heuristic = replay(events, partitioned(4096))
    exact = replay(events, partitioned(4096, upper=EndPolicy(hole_split="exact")))
    assert chunks(heuristic)[1:] == [(3072, 256, True, "upper"), (3328, 768, True, "upper")]
    assert chunks(exact)[1:] == [(3072, 256, True, "upper"), (3328, 256, False, "upper"), (3584, 512, True, "upper")]


def test_the_128_mib_rule_splits_a_gap_under_twice_the_request() -> None:
    # 200 MiB in a 300 MiB gap: under twice the request, and 100 MiB to spare is under 128 MiB: whole;
    # 170 MiB in 300 MiB: also under twice, but 130 MiB to spare: split
    whole = replay([("a", 200 * MIB)], partitioned(300 * MIB, lower=HEURISTIC_GAP))
    split = replay([("a", 170 * MIB)], partitioned(300 * MIB, lower=HEURISTIC_GAP))
    assert whole.chunk_bytes[0] == 300 * MIB and split.chunk_bytes[0] == 170 * MIB


# -- alignment above 256 B ---------------------------------------------------------------------


def test_an_upper_chunk_aligned_down_leaves_an_upper_hole_above_it() -> None:
    # XLA's SpatialUpperAlignmentSuffix: 256 B at 1 KiB alignment from the top of 4096 starts at 3072; the
    # 768 B above it are an upper hole, so a lower 3072 takes the rest and a lower 768 then fails
    sim = replay([("u", 256, None, 1024), ("a", 3072), ("a", 768)], partitioned(4096))
    assert sim.offset.tolist()[:2] == [3072, 0] and sim.failed_at == 2
    assert chunks(sim) == [(0, 3072, True, "lower"), (3072, 256, True, "upper"), (3328, 768, False, "upper")]


def test_a_lower_chunk_aligned_up_leaves_a_lower_hole_below_it() -> None:
    # XLA's SpatialLowerAlignmentPrefix: 256 B at 0, then 256 B at 1 KiB alignment lands at 1024 with a 768 B
    # lower hole below it; an upper 2816 fills the rest and a 768 B upper request then fails
    sim = replay([("a", 256), ("a", 256, None, 1024), ("u", 2816), ("u", 768)], partitioned(4096))
    assert sim.offset.tolist()[:3] == [0, 1024, 1280] and sim.failed_at == 3
    assert chunks(sim)[1] == (256, 768, False, "lower")


def test_an_alignment_must_be_a_power_of_two() -> None:
    with pytest.raises(ValueError, match="power of two"):
        replay([("a", 256, None, 768)], partitioned(4096))


# -- statistics -----------------------------------------------------------------------------------


def test_fragmentation_and_the_largest_free_chunk_count_the_gap() -> None:
    # 1 KiB + 1 KiB from below in 4096, the first freed: a 1 KiB lower hole and a 2 KiB gap. TF's metric:
    # (free - largest free) / free = (3072 - 2048) / 3072
    sim = replay([("a", 1024), ("a", 1024), ("f", 0)], partitioned(4096))
    assert sim.largest_free_bytes.tolist() == [3072, 2048, 2048]
    assert sim.fragmentation[-1] == pytest.approx(1 / 3)
    assert sim.chunk_bytes.tolist() == [1024, 1024, 1024] and sim.offset.tolist() == [0, 1024, 0]


def test_the_hole_order_breaks_ties_between_equal_holes() -> None:
    # five 256 B from below, the 2nd and 4th freed (interior holes at 256 and 768); 256 B more takes the lower
    # address in ascending order (XLA's default) and the higher one in descending order
    events: list[tuple[object, ...]] = [("a", 256)] * 5 + [("f", 1), ("f", 3), ("a", 256)]
    assert replay(events, partitioned(4096)).offset[-1] == 256
    assert replay(events, partitioned(4096, lower=EndPolicy(hole_order="descending"))).offset[-1] == 768


def test_upper_offsets_stay_the_same_under_any_lower_churn() -> None:
    # XLA's SpatialUpperOffsetsStable: a fixed upper sequence (512 B aligned) between random lower bursts
    # (some freed at random), the lower end kept under half the pool: the upper offsets never change
    sizes = [4 * MIB, 16 * MIB, MIB, 18 * MIB, 2 * MIB, 8 * MIB, 4 * MIB, 32 * MIB]

    def offsets(seed: int) -> list[int]:
        rng = random.Random(seed)
        events: list[tuple[object, ...]] = []
        live_lower: list[tuple[int, int]] = []  # (row, bytes)
        live_upper: list[int] = []
        uppers = []
        for size in sizes:
            for _ in range(rng.randint(0, 6)):
                if live_lower and rng.randint(0, 2) == 0:
                    row, _ = live_lower.pop(rng.randrange(len(live_lower)))
                    events.append(("f", row))
                else:
                    nbytes = rng.choice([256, MIB, 8 * MIB, 32 * MIB, 64 * MIB])
                    if sum(b for _, b in live_lower) + nbytes <= 256 * MIB:
                        live_lower.append((len(events), nbytes))
                        events.append(("a", nbytes, None, 512))
            uppers.append(len(events))
            live_upper.append(len(events))
            events.append(("u", size, None, 512))
            if len(live_upper) > 2:
                events.append(("f", live_upper.pop(0)))
        sim = replay(events, partitioned(512 * MIB))
        assert sim.fits
        return [int(sim.offset[row]) for row in uppers]

    first = offsets(1)
    assert all(offsets(seed) == first for seed in range(2, 12))


# -- options ------------------------------------------------------------------------------------


def test_partitioning_with_growth_is_refused_as_xla_refuses_it() -> None:
    with pytest.raises(ValueError, match="allow_growth off"):
        BFCOptions(4096, allow_growth=True, partitioned=True)
    with pytest.raises(ValueError, match="split policy"):
        EndPolicy(gap_split="best")
    with pytest.raises(ValueError, match="hole order"):
        EndPolicy(hole_order="up")


def test_classic_bfc_refuses_what_only_a_partitioned_pool_serves() -> None:
    with pytest.raises(ValueError, match="upper end"):
        bfc.fits(Requests.from_events([("u", 256)]), BFCOptions(4096))
    with pytest.raises(ValueError, match="alignment"):
        bfc.simulate(Requests.from_events([("a", 256, None, 1024)]), BFCOptions(4096))
    # an alignment of 256 B (or less) is none: every chunk starts at a multiple of 256 B, and the classic model serves a
    # sequence that carries such alignments (a sequence written by hand drops the column where all are)
    plain_events = Requests.from_events([("a", 256), ("a", 512)])
    aligned = replace(plain_events, alignment_bytes=np.array([256, 128], dtype=np.int64))
    simulated = bfc.simulate(aligned, BFCOptions(4096))
    assert simulated.fits and simulated.offset.tolist() == [0, 256]
    plain = Requests.from_events([("a", 256), ("f", 0)])
    assert plain.upper_end is None and plain.alignment_bytes is None  # a plain sequence carries neither column


def _simulated(requests: Requests, options: BFCOptions) -> tuple[object, ...]:
    s = bfc.simulate(requests, options)
    return s.fits, s.region_rows, s.peak_in_use_bytes, s.max_pool_bytes


# Every way into the model, asked of a sequence and options: what it answers.
ENTRIES: dict[str, Callable[[Requests, BFCOptions], object]] = {
    "simulate": _simulated,
    "regions_made": bfc.regions_made,
    "fits": bfc.fits,
    "fits served by a schedule": lambda r, o: bfc.fits(r, o, lambda start: InOrder(len(r), start)),
    "proven_limits": bfc.proven_limits,
    "outcome": bfc.outcome,
    "search_min_limit": lambda r, o: bfc.search_min_limit(r, replace(o, limit_bytes=0), granularity=256).limit_bytes,
    "min_limit": lambda r, o: bfc.min_limit(r, replace(o, limit_bytes=0), granularity=256),
}


@pytest.mark.parametrize("entry", ENTRIES)
def test_every_way_into_the_model_asks_the_partitioned_pool_where_partitioned_and_the_classic_one_refuses_the_upper_end(
        entry: str) -> None:
    # GIVEN a 0-byte request (XLA returns null: no memory) and then 256 B from the upper end
    requests = Requests.from_events([("a", 0), ("u", 256)])
    # THEN under 4 KiB the partitioned pool makes its one region (the whole 4 KiB) at the first request that needs
    # memory (row 1) and serves both: 256 B at the peak, the smallest limit 256 B, and a replay proves only its own
    # limit
    expected = {"simulate": (True, (1,), 256, 4096), "regions_made": (1,), "fits": True,
                "fits served by a schedule": True, "proven_limits": (4096, 4096, True),
                "outcome": bfc.Outcome(True, None, 256, 4096), "search_min_limit": 256, "min_limit": 256}
    assert ENTRIES[entry](requests, partitioned(4096)) == expected[entry]
    # AND the classic allocator refuses the upper end, whichever it is asked
    with pytest.raises(ValueError, match="upper end"):
        ENTRIES[entry](requests, BFCOptions(4096, allow_growth=False))


def test_the_smallest_limit_of_a_lower_end_sequence_is_its_high_water_mark() -> None:
    # 1 KiB, 1 KiB, the first freed (an interior hole), then 1.5 KiB: the hole is too small, so the gap above the
    # second is carved: the lower end reaches 2048 + 1536 = 3584 B, the smallest limit (to 256 B)
    requests = Requests.from_events([("a", 1024), ("a", 1024), ("f", 0), ("a", 1536)])
    search = bfc.search_min_limit(requests, partitioned(0), granularity=256)
    assert search.limit_bytes == 3584 and search.monotone
    assert not bfc.fits(requests, partitioned(3584 - 256))
    assert bfc.simulate(requests, partitioned(3584)).offset.tolist() == [0, 1024, 0, 2048]
    assert np.array_equal(bfc.simulate(requests, partitioned(3584)).region, [0, 0, 0, 0])
    # AND each limit the search asked was its own replay (a partitioned replay proves only its limit), of the events up
    # to the failure or all four
    asked = {limit for limit, _ in search.tried}
    failures = [bfc.simulate(requests, partitioned(limit)).failed_at for limit in asked]
    assert search.replays == len(asked)
    assert search.replayed_events == sum(len(requests) if at is None else at + 1 for at in failures)


def test_a_0_byte_request_and_a_free_of_an_unknown_allocation_are_events_that_change_nothing() -> None:
    # GIVEN a 0-byte request and its free, 1,000 bytes, and a free of an allocation made before the sequence
    requests = Requests(np.array([True, False, True, False]), np.array([0, 0, 1000, 0]), np.array([-1, 0, -1, -1]),
                        np.full(4, -1, dtype=np.int32), np.arange(4), ())
    # WHEN replayed through the partitioned pool and the classic one
    for options in (partitioned(MIB), BFCOptions(MIB, allow_growth=False)):
        sim = bfc.simulate(requests, options)
        # THEN each of the four events has its row: only the 1,000 bytes take a chunk (1,024 bytes, at 0)
        assert sim.fits and sim.bytes_in_use.tolist() == [0, 0, 1024, 1024]
        assert sim.region.tolist() == [-1, -1, 0, -1] and sim.chunk_bytes.tolist()[2] == 1024
        assert sim.offset.tolist() == [0, 0, 0, 0]  # (an event that touches no chunk is drawn at offset 0)
        assert sim.chunk_bytes.tolist() == [0, 0, 1024, 0]
        # (the largest free chunk: none before the region is made, then the rest of it, 1 MiB - 1,024)
        assert sim.largest_free_bytes.tolist() == [0, 0, MIB - 1024, MIB - 1024]
        # AND a 0-byte request and its free after the region is made see the same largest free chunk
        sim = bfc.simulate(Requests.from_events([("a", 1000), ("a", 0), ("f", 1)]), options)
        assert sim.largest_free_bytes.tolist() == [MIB - 1024] * 3 and sim.chunk_bytes.tolist() == [1024, 0, 0]


def test_a_1_byte_request_takes_a_chunk_and_only_0_bytes_is_none() -> None:
    # XLA returns null for 0 bytes alone: 1 byte is rounded up to 256 and takes the lower end's first chunk
    sim = replay([("a", 1), ("a", 0)], partitioned(4096))
    assert sim.offset.tolist() == [0, 0] and sim.region.tolist() == [0, -1]
    assert sim.chunk_bytes.tolist() == [256, 0] and sim.bytes_in_use.tolist() == [256, 256]


def test_the_largest_free_chunk_may_be_an_ends_hole() -> None:
    # GIVEN 256 B, 2 KiB and 256 B from the lower end of 4 KiB, then the 2 KiB freed: a lower hole of 2 KiB at 256,
    # larger than the central gap left (4096 - 2560 = 1536)
    sim = replay([("a", 256), ("a", 2048), ("a", 256), ("f", 1)], partitioned(4096))
    # THEN the largest free chunk is the gap's size until the free, then the hole's (its size, not its place)
    assert sim.largest_free_bytes.tolist() == [3840, 1792, 1536, 2048]
    assert chunks(sim)[1] == (256, 2048, False, "lower")
    # AND an upper hole: 256 B, 512 B and 256 B from the upper end of 2 KiB, the lower end's 1 KiB filling the gap,
    # then the 512 B freed (an upper hole at 1280, between upper chunks): the largest free chunk is it, 512 B
    sim = replay([("u", 256), ("u", 512), ("u", 256), ("a", 1024), ("f", 1)], partitioned(2048))
    assert sim.largest_free_bytes.tolist() == [1792, 1280, 1024, 0, 512]
    assert chunks(sim)[2] == (1280, 512, False, "upper")


def test_the_high_end_start_is_aligned_down_from_the_top_and_none_where_the_chunk_is_too_small() -> None:
    # XLA's HighEndAlignedStart: a 1,024 B chunk at 4,096 holds 512 B from its top at 4,608, aligned down to 512 at
    # 4,608 and to 1,024 at 4,096; a 256 B chunk cannot hold 512 B (-1), nor can one whose aligned start falls below it
    assert bfc.high_end_aligned_start(4096, 1024, 512, 512) == 4608
    assert bfc.high_end_aligned_start(4096, 1024, 512, 1024) == 4096
    assert bfc.high_end_aligned_start(4096, 256, 512, 256) == -1
    assert bfc.high_end_aligned_start(4352, 1024, 512, 1024) == 4096  # below the chunk: the caller's test refuses it


def test_a_remainder_of_exactly_128_mib_splits_the_gap() -> None:
    # GIVEN a 300 MiB pool whose lower end hands out a small gap whole (JAX 0.11.2's heuristic)
    # WHEN 172 MiB is asked: under twice the request (300 < 344 MiB), and the rest is 300 - 172 = 128 MiB
    sim = replay([("a", 172 * MIB)], partitioned(300 * MIB, lower=HEURISTIC_GAP))
    # THEN ShouldSplitChunk's "rest >= 128 MiB" holds at equality: the gap is split, its 128 MiB rest stays the gap
    assert chunks(sim) == [(0, 172 * MIB, True, "lower"), (172 * MIB, 128 * MIB, False, "central_gap")]
    assert sim.bytes_in_use.tolist() == [172 * MIB] and sim.largest_free_bytes.tolist() == [128 * MIB]


def test_an_upper_hole_is_judged_for_splitting_less_its_alignment_padding() -> None:
    # GIVEN a 4096 B pool, upper 256 B at 3840, upper 2048 at 1792 (3840 - 2048), upper 256 at 1536, and the 2048 freed:
    # an upper hole [1792, 3840) (an upper chunk lies below it), the gap [0, 1536)
    events: list[tuple[object, ...]] = [("u", 256), ("u", 2048), ("u", 256), ("f", 1)]
    # WHEN 1,000 B (1024 rounded) is asked from the upper end at 512 B alignment: the hole fits (its highest 512-aligned
    # start for 1024 B is (3840 - 1024) // 512 * 512 = 2560 >= 1792); the padding from 1792 up to 2048 is 256 B
    sim = replay([*events, ("u", 1000, None, 512)], partitioned(4096))
    # THEN ShouldSplitChunk sees the hole less its padding, 2048 - 256 = 1792: under twice 1024, and 768 B to spare is
    # under 128 MiB, so the hole is taken whole from its first aligned address, 2048 (1792 B, up to 3840), and the 256
    # B below stay an upper hole. (Judged on 2048 + 256 it would split: the chunk carved from the top at 2560, 1280 B.)
    assert sim.fits and sim.offset.tolist() == [3840, 1792, 1536, 1792, 2048]
    assert sim.chunk_bytes.tolist() == [256, 2048, 256, 2048, 1792]
    assert chunks(sim) == [(0, 1536, False, "central_gap"), (1536, 256, True, "upper"), (1792, 256, False, "upper"),
                           (2048, 1792, True, "upper"), (3840, 256, True, "upper")]
    assert sim.bytes_in_use.tolist() == [256, 2304, 2560, 512, 2304]


def test_an_upper_chunk_freed_above_an_upper_chunk_at_the_base_stays_an_upper_hole() -> None:
    # GIVEN a 1024 B pool whose upper end takes all four 256 B chunks, from the top down: 768, 512, 256 and, last, 0
    # (the gap's last 256 B, handed out whole); then the one at 256 is freed: the chunk below it, at address 0, is
    # an upper chunk, so ReturnBoundaryChunkToGap leaves it an upper hole (no gap is made)
    events: list[tuple[object, ...]] = [("u", 256), ("u", 256), ("u", 256), ("u", 256), ("f", 2)]
    sim = replay(events, partitioned(1024))
    assert sim.fits and sim.offset.tolist() == [768, 512, 256, 0, 256]
    assert chunks(sim) == [(0, 256, True, "upper"), (256, 256, False, "upper"), (512, 256, True, "upper"),
                           (768, 256, True, "upper")]
    assert sim.largest_free_bytes.tolist() == [768, 512, 256, 0, 256]
    # WHEN the lower end then asks for 256 B
    sim = replay([*events, ("a", 256)], partitioned(1024))
    # THEN it has no hole and there is no gap (and the one region is made): it fails there, at row 5
    assert not sim.fits and sim.failed_at == 5
    # AND the upper end reuses its own hole at 256
    assert replay([*events, ("u", 256)], partitioned(1024)).offset.tolist()[-1] == 256


def test_a_partitioned_chunk_in_use_names_the_op_of_its_row_row_0_included() -> None:
    # GIVEN 1000 B from the lower end by "conv" (row 0) and 256 B from the upper end by "matmul" (row 1) in 4096 B
    sim = replay([("a", 1000, "conv"), ("u", 256, "matmul")], partitioned(4096))
    # THEN the map names each chunk's op, row and request: 1024 B at 0 (row 0), the gap [1024, 3840), 256 B at 3840
    assert sim.chunks == (ChunkState(0, 0, 1024, True, 1000, "conv", 0, "lower"),
                          ChunkState(0, 1024, 2816, False, 0, "", -1, "central_gap"),
                          ChunkState(0, 3840, 256, True, 256, "matmul", 1, "upper"))


class _WaitsOnce:
    """Serves the rows in order; the first request that fails waits until the rest of the rows are served."""

    def __init__(self, rows: int, start: int) -> None:
        self.rows, self.start = rows, start
        self.waiting: int | None = None

    def runs(self) -> Iterator[tuple[int, int]]:
        yield self.start, self.rows
        if self.waiting is not None:
            yield self.waiting + 1, self.rows
            yield self.waiting, self.waiting + 1

    def blocked(self, row: int) -> bool:
        if self.waiting is None:
            self.waiting = row
            return True
        return False


def test_a_partitioned_request_that_fails_waits_where_its_schedule_says_it_waits() -> None:
    # GIVEN 4096 B from the lower end (row 0), 4096 B more (row 1), then row 0 freed, in a 4096 B pool
    requests = Requests.from_events([("a", 4096), ("a", 4096), ("f", 0)])
    # WHEN served in order: row 0 takes the whole gap, row 1 finds no hole and no gap (the one region is made): out
    # of memory
    assert not bfc.fits(requests, partitioned(4096))
    assert not bfc.fits(requests, partitioned(4096), lambda start: InOrder(len(requests), start))
    # THEN served by a schedule under which row 1 waits: the free (row 2) returns the lower chunk to the gap (nothing
    # of the lower end lies above it), and row 1, served again, takes the whole gap: every request is served
    assert bfc.fits(requests, partitioned(4096), lambda start: _WaitsOnce(len(requests), start))
    # AND the replay goes on after a wait: where 256 B more comes after the free (row 3), it takes part of the gap,
    # and row 1, served again after it, no longer fits (and waits no more): out of memory at row 1
    longer = Requests.from_events([("a", 4096), ("a", 4096), ("f", 0), ("a", 256)])
    run = bfc._PartitionedRun(longer, partitioned(4096), record=False, schedule=lambda start: _WaitsOnce(4, start))
    assert run.failed_at == 1 and run.in_use == 256


def test_a_partitioned_replay_stops_at_the_first_request_that_fails() -> None:
    # GIVEN 4096 B, then 256 B twice, in a 4096 B pool: row 1 finds no room, nor would row 2
    sim = replay([("a", 4096), ("a", 256), ("a", 256)], partitioned(4096))
    # THEN the replay stops at row 1: its failure, and the events up to it
    assert sim.failed_at == 1 and not sim.fits and sim.offset.tolist() == [0]
