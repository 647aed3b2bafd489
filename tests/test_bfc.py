"""The BFC model's rules, each on a hand-made request sequence whose answer is worked out by hand.

Addresses are offsets within a region; sizes in bytes. ``KIB``/``MIB`` are 1024 and 1024**2.
Each test states the sequence (GIVEN), the options (WHEN) and what TF's allocator does (THEN),
with the arithmetic in comments.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from dataclasses import FrozenInstanceError, replace
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from memtrace.allocator import bfc
from memtrace.allocator.bfc import (
    BFCOptions,
    LimitSearch,
    Outcome,
    Requests,
    bin_for_size,
    fits,
    min_limit,
    outcome,
    proven_limits,
    rounded_bytes,
    search_min_limit,
    simulate,
)
from memtrace.allocator.reproduce import learned_order
from memtrace.units import KIB, MIB

# Each test replays as a fresh process would (tests/conftest.py): the rules worked out by hand here are the Python
# loop's, whatever ran before (tests/test_bfc_compiled.py holds the compiled loop to it).
pytestmark = pytest.mark.usefixtures("replays_as_a_command_of_its_own")


def seq(*events: tuple) -> Requests:
    return Requests.from_events(list(events))


def test_requests_round_up_to_256_bytes_and_bins_double() -> None:
    assert [rounded_bytes(n) for n in (1, 256, 257, 1000)] == [256, 256, 512, 1024]
    # bin b holds [256 * 2**b, 256 * 2**(b+1)); bin 20 holds everything from 256 MiB up
    assert [bin_for_size(n) for n in (1, 511, 512, 128 * MIB, 256 * MIB - 256, 256 * MIB, 1 << 40)] == [
        0, 0, 1, 19, 19, 20, 20]


def test_first_growth_region_is_2_mib_and_a_large_chunk_is_split() -> None:
    # GIVEN one request of 1000 B WHEN growth is on under 10 MiB
    sim = simulate(seq(("a", 1000)), BFCOptions(10 * MIB))
    # THEN the pool is one 2 MiB region, the chunk 1024 B at offset 0, the rest free
    assert sim.pool_bytes.tolist() == [2 * MIB]
    assert (sim.region.tolist(), sim.offset.tolist(), sim.chunk_bytes.tolist()) == ([0], [0], [1024])
    assert sim.largest_free_bytes.tolist() == [2 * MIB - 1024]
    assert sim.fragmentation.tolist() == [0.0]  # one free chunk: (F - largest) / F = 0


def test_split_at_exactly_twice_and_not_below() -> None:
    # GIVEN one region of 4096 B (no growth): 2048 B leaves a free chunk of 2048 B
    opts = BFCOptions(4096, allow_growth=False)
    # WHEN 1024 B asks for it: 2048 >= 2 x 1024, split: 1024 B at offset 2048, 1024 B stay free
    split = simulate(seq(("a", 2048), ("a", 1024)), opts)
    assert split.offset.tolist() == [0, 2048] and split.chunk_bytes.tolist() == [2048, 1024]
    assert split.bytes_in_use.tolist() == [2048, 3072]
    # WHEN 1280 B asks for it: 2048 < 2 x 1280 and 768 B remain (< 128 MiB): the whole chunk is handed out
    whole = simulate(seq(("a", 2048), ("a", 1280)), opts)
    assert whole.chunk_bytes.tolist() == [2048, 2048] and whole.bytes_in_use.tolist() == [2048, 4096]
    # THEN the pool is exactly full: no free bytes, TF's fragmentation is NaN
    assert math.isnan(float(whole.fragmentation[-1]))


def test_the_128_mib_rule_splits_below_twice() -> None:
    opts = BFCOptions(512 * MIB, allow_growth=False)
    # 300 MiB from 512: 512 < 600, but 212 MiB would remain (>= 128 MiB): split
    assert simulate(seq(("a", 300 * MIB)), opts).chunk_bytes.tolist() == [300 * MIB]
    # 400 MiB from 512: 112 MiB would remain (< 128 MiB): the whole 512 MiB is handed out
    assert simulate(seq(("a", 400 * MIB)), opts).chunk_bytes.tolist() == [512 * MIB]
    # 384 MiB: exactly 128 MiB would remain: split (the rule is >=)
    assert simulate(seq(("a", 384 * MIB)), opts).chunk_bytes.tolist() == [384 * MIB]
    # 385 MiB: 127 MiB would remain, a MiB short: the whole 512 MiB
    assert simulate(seq(("a", 385 * MIB)), opts).chunk_bytes.tolist() == [512 * MIB]


def test_fragmentation_fraction_sets_the_split_threshold_from_the_limit() -> None:
    # 0.1 x 512 MiB = 53,687,091 B: 112 MiB remaining is above it, so 400 MiB is split off
    frac = BFCOptions(512 * MIB, allow_growth=False, fragmentation_fraction=0.1)
    assert frac.max_internal_fragmentation_bytes == 53_687_091
    assert simulate(seq(("a", 400 * MIB)), frac).chunk_bytes.tolist() == [400 * MIB]
    # 0.25 x 512 MiB = 128 MiB: 112 MiB remaining stays below it, the whole chunk is handed out
    quarter = BFCOptions(512 * MIB, allow_growth=False, fragmentation_fraction=0.25)
    assert simulate(seq(("a", 400 * MIB)), quarter).chunk_bytes.tolist() == [512 * MIB]


def test_smallest_fitting_chunk_wins_and_ties_go_to_the_lowest_address() -> None:
    # GIVEN 4 x 1024 B in a region of 8192, then frees of the 1st and 3rd: free chunks 1024@0, 1024@2048, 4096@4096
    events = [("a", 1024), ("a", 1024), ("a", 1024), ("a", 1024), ("f", 0), ("f", 2)]
    opts = BFCOptions(8192, allow_growth=False)
    # WHEN 1024 B is asked: the two 1024 B chunks tie on size; the lower address wins
    assert simulate(seq(*events, ("a", 1024)), opts).offset.tolist()[-1] == 0
    # WHEN 512 B is asked: the smallest chunk that fits is a 1024 one (not the 4096), at 0, split in two
    small = simulate(seq(*events, ("a", 512)), opts)
    assert (small.offset.tolist()[-1], small.chunk_bytes.tolist()[-1]) == (0, 512)
    # WHEN 2048 B is asked: only the 4096 B chunk fits
    assert simulate(seq(*events, ("a", 2048)), opts).offset.tolist()[-1] == 4096


def test_offsets_are_within_each_region() -> None:
    # GIVEN 2 MiB (region 0, 2 MiB, full), 2 MiB (region 1 of 4 MiB, split), then 1 MiB (the 2 MiB free in region 1,
    # at 2 MiB, split)
    sim = simulate(seq(("a", 2 * MIB), ("a", 2 * MIB), ("a", MIB)), BFCOptions(64 * MIB))
    # THEN each event's offset, and each chunk's in the map, is from its own region's start
    assert sim.region.tolist() == [0, 1, 1] and sim.offset.tolist() == [0, 0, 2 * MIB]
    assert [(c.region, c.offset, c.size_bytes, c.in_use) for c in sim.chunks] == [
        (0, 0, 2 * MIB, True), (1, 0, 2 * MIB, True), (1, 2 * MIB, MIB, True), (1, 3 * MIB, MIB, False)]


@pytest.mark.parametrize(("descending", "region", "offset"), [(False, 0, 0), (True, 1, 2 * MIB)])
def test_ties_across_regions_follow_their_address_order(descending: bool, region: int, offset: int) -> None:
    # GIVEN 2 MiB (fills region 0 of 2 MiB), 2 MiB (region 1 of 4 MiB, split: 2 MiB free at 2 MiB),
    # then the first freed: two free chunks of 2 MiB, region 0 offset 0 and region 1 offset 2 MiB
    events = seq(("a", 2 * MIB), ("a", 2 * MIB), ("f", 0), ("a", 2 * MIB))
    sim = simulate(events, BFCOptions(64 * MIB, regions_descending=descending))
    assert [size for _, size in sim.regions] == [2 * MIB, 4 * MIB]
    # THEN the tie goes to the chunk at the lower address: region 0 when regions ascend, region 1 when they descend
    assert (int(sim.region[-1]), int(sim.offset[-1])) == (region, offset)


@pytest.mark.parametrize(("order", "region", "offset"), [((0, 2, 1), 0, 0), ((2, 0, 1), 1, 2 * MIB),
                                                       ((1, 2, 0), 0, 0), ((2, 1, 0), 1, 2 * MIB)])
def test_ties_across_regions_follow_a_learned_address_order(order: tuple[int, ...], region: int, offset: int) -> None:
    # GIVEN regions of 2, 4 and 8 MiB: 2 MiB fills region 0; 2 MiB splits region 1 (2 MiB stay free at
    # 2 MiB); 6 MiB takes region 2 whole (8 < 12 MiB and 2 MiB would remain, < 128 MiB); then the first
    # freed and 2 MiB asked: two free chunks of 2 MiB tie, region 0 at 0 and region 1 at 2 MiB
    events = seq(("a", 2 * MIB), ("a", 2 * MIB), ("a", 6 * MIB), ("f", 0), ("a", 2 * MIB))
    sim = simulate(events, BFCOptions(64 * MIB, region_order=order))
    assert [size for _, size in sim.regions] == [2 * MIB, 4 * MIB, 8 * MIB]
    # THEN the chunk in the region whose address ranks lower wins, whatever the third region's rank
    assert (int(sim.region[-1]), int(sim.offset[-1])) == (region, offset)


def test_a_freed_chunk_merges_with_both_neighbours() -> None:
    # GIVEN 4 x 1024 B filling a 4096 B region, the 1st and 3rd freed, then the 2nd
    sim = simulate(seq(("a", 1024), ("a", 1024), ("a", 1024), ("a", 1024), ("f", 0), ("f", 2), ("f", 1)),
                   BFCOptions(4096, allow_growth=False))
    # THEN after the 3rd free: 2048 free in two chunks of 1024: (2048 - 1024) / 2048 = 0.5
    assert sim.largest_free_bytes.tolist()[4:] == [1024, 1024, 3072]
    assert sim.fragmentation.tolist()[5] == 0.5
    # AND freeing the 2nd merges next (1024@2048) and previous (1024@0): one 3072 B chunk at 0
    assert sim.fragmentation.tolist()[6] == 0.0
    assert [(c.offset, c.size_bytes, c.in_use) for c in sim.chunks] == [(0, 3072, False), (3072, 1024, True)]
    assert [c.row for c in sim.chunks] == [-1, 3]  # (a free chunk's row: -1; the one in use, the 4th request's)
    # a free's event names the chunk freed, before merging
    assert (sim.offset.tolist()[6], sim.chunk_bytes.tolist()[6]) == (1024, 1024)


def test_region_sizes_double_by_tfs_extend_rule() -> None:
    # 5 MiB: the size doubles 2 -> 4 -> 8 MiB for it (and does not double again); 8 MiB handed out whole
    # (8 < 10 MiB and 3 MiB remain, < 128 MiB). Then 1 MiB: a new region of 8 MiB (the size did not
    # have to grow, so it doubles afterwards to 16 MiB); then 9 MiB (the 7 MiB left in region 1 are too
    # small): a region of 16 MiB, handed out whole (16 < 18 MiB and 7 MiB remain, < 128 MiB).
    sim = simulate(seq(("a", 5 * MIB), ("a", 1 * MIB), ("a", 9 * MIB)), BFCOptions(1 << 40))
    assert [size for _, size in sim.regions] == [8 * MIB, 8 * MIB, 16 * MIB]
    assert sim.chunk_bytes.tolist() == [8 * MIB, 1 * MIB, 16 * MIB]
    assert sim.region_rows == (0, 1, 2)


def test_growth_cuts_the_last_region_to_the_limit_and_then_fails() -> None:
    # GIVEN a 3 MiB limit: region 0 is 2 MiB; 1.5 MiB takes all of it (0.5 MiB would remain: unsplit)
    # 0.5 MiB: a region of min(4 MiB, 3 - 2 MiB) = 1 MiB; 768 KiB: nothing left to grow into
    events = seq(("a", 3 * MIB // 2, "big"), ("a", MIB // 2, "half"), ("a", 768 * KIB, "last"))
    sim = simulate(events, BFCOptions(3 * MIB))
    assert [size for _, size in sim.regions] == [2 * MIB, 1 * MIB]
    assert not sim.fits and sim.failed_at == 2
    assert sim.chunk_bytes.tolist() == [2 * MIB, MIB // 2]
    assert (sim.in_use_bytes, sim.largest_free_chunk_bytes, sim.free_bytes) == (5 * MIB // 2, MIB // 2, MIB // 2)
    # AND where the pool may still grow, the free bytes count the room too (as `memtrace oom` does): 1 MiB in the first
    # region of 2 MiB under 10 MiB leaves a free chunk of 1 MiB and 8 MiB to grow into
    roomy = simulate(seq(("a", MIB)), BFCOptions(10 * MIB))
    assert (roomy.pool_total_bytes, roomy.largest_free_chunk_bytes, roomy.free_bytes) == (2 * MIB, MIB, 9 * MIB)
    assert [(c.region, c.offset, c.size_bytes, c.in_use, c.requested_bytes, c.op) for c in sim.chunks] == [
        (0, 0, 2 * MIB, True, 3 * MIB // 2, "big"), (1, 0, MIB // 2, True, MIB // 2, "half"),
        (1, MIB // 2, MIB // 2, False, 0, "")]
    # under 4 MiB the second region is 2 MiB, and 768 KiB fits in its remaining 1.5 MiB
    assert fits(events, BFCOptions(4 * MIB))
    assert min_limit(events, BFCOptions(3 * MIB)) == 4 * MIB


def test_garbage_collection_frees_wholly_free_regions_and_retries() -> None:
    # GIVEN 2 MiB (region 0, exactly), freed, then 3 MiB under a 3 MiB limit
    events = seq(("a", 2 * MIB), ("f", 0), ("a", 3 * MIB))
    # WHEN garbage collection is off: 1 MiB is left to grow into, the 2 MiB chunk is too small: out of memory
    assert simulate(events, BFCOptions(3 * MIB)).failed_at == 2
    # WHEN on: region 0 is given back (3 <= 3 - 2 + 2 MiB), and a region of min(4, 3) = 3 MiB is made
    sim = simulate(events, BFCOptions(3 * MIB, garbage_collection=True))
    assert sim.fits and sim.regions == ((1, 3 * MIB),)
    assert (int(sim.region[-1]), int(sim.offset[-1]), int(sim.chunk_bytes[-1])) == (1, 0, 3 * MIB)
    assert sim.pool_bytes.tolist() == [2 * MIB, 2 * MIB, 3 * MIB]


def test_garbage_collection_across_regions_worked_by_hand() -> None:
    # GIVEN a 12 MiB limit with growth; by TF's Extend each region is min(the next region size, what the limit
    # leaves), the next size doubling after each region: 2 MiB (a0), 4 MiB (a1), then min(8, 12 - 6) = 6 MiB for a2
    # (1 MiB; 5 MiB of that region left free); a0 and a1 freed: regions 0 and 1 wholly free, region 2 in use
    head = [("a", 2 * MIB), ("a", 4 * MIB), ("a", MIB), ("f", 0), ("f", 1)]
    # WHEN 6 MiB is asked for: no free chunk holds it, the limit leaves nothing to extend by; DeallocateFreeRegions
    # finds 6 MiB wholly free and 6 <= 12 - 12 + 6, so regions 0 and 1 go back and Extend makes min(16, 6) = 6 MiB;
    # 5 MiB then takes region 2's free 5 MiB; 1 KiB finds no free chunk, nothing to extend by, no region wholly free
    events = seq(*head, ("a", 6 * MIB), ("a", 5 * MIB), ("a", KIB))
    sim = simulate(events, BFCOptions(12 * MIB, garbage_collection=True))
    # THEN the regions left are 2 and 3, 6 MiB each; the run is out of memory at the 1 KiB request
    assert sim.regions == ((2, 6 * MIB), (3, 6 * MIB)) and not sim.fits and sim.failed_at == 7
    assert list(zip(sim.region.tolist(), sim.offset.tolist())) == [(0, 0), (1, 0), (2, 0), (0, 0), (1, 0), (3, 0),
                                                                   (2, MIB)]
    assert sim.pool_bytes.tolist() == [2 * MIB, 6 * MIB, *[12 * MIB] * 5]
    # WHEN collection is off: the 6 MiB request fails (nothing given back)
    assert simulate(events, BFCOptions(12 * MIB)).failed_at == 5
    # WHEN 7 MiB is asked for instead: giving back 6 MiB leaves 6 < 7: nothing is given back, out of memory there
    sim = simulate(seq(*head, ("a", 7 * MIB)), BFCOptions(12 * MIB, garbage_collection=True))
    assert sim.failed_at == 5 and sim.regions == ((0, 2 * MIB), (1, 4 * MIB), (2, 6 * MIB))


def test_equal_free_chunks_go_to_the_lowest_address_by_the_region_order_worked_by_hand() -> None:
    # GIVEN three regions (growth: 2, 4 and 8 MiB), each filled by splits, then one 1 MiB chunk freed in each
    # (region 0 at 0, region 1 at 2 MiB, region 2 at 6 MiB; their neighbours in use, so none merges)
    events = seq(("a", MIB), ("a", MIB), ("a", 2 * MIB), ("a", MIB), ("a", MIB), ("a", 4 * MIB), ("a", 2 * MIB),
                 ("a", MIB), ("a", MIB), ("f", 0), ("f", 3), ("f", 7), ("a", MIB))

    def last_chunk(**order: Any) -> tuple[int, int]:
        sim = simulate(events, BFCOptions(64 * MIB, **order))
        assert [size for _, size in sim.regions] == [2 * MIB, 4 * MIB, 8 * MIB]
        return int(sim.region[-1]), int(sim.offset[-1])

    # WHEN 1 MiB is asked for: BFC's bin holds the three equal chunks by address, and the lowest is taken
    # THEN ascending: region 0's; descending: region 2's (the latest region lies lowest)
    assert last_chunk() == (0, 0) and last_chunk(regions_descending=True) == (2, 6 * MIB)
    # a partial order (region 1 below region 0), later regions ascending beyond both: region 1's
    assert last_chunk(region_order=(1, 0)) == (1, 2 * MIB)
    # the same partial order with later regions descending: region 2 lies below both
    assert last_chunk(region_order=(1, 0), regions_descending=True) == (2, 6 * MIB)
    # every region ranked: the one ranked 0 wins
    assert last_chunk(region_order=(2, 0, 1)) == (1, 2 * MIB) and last_chunk(region_order=(0, 2, 1)) == (0, 0)


def test_the_region_order_learned_from_the_bases_worked_by_hand() -> None:
    options = BFCOptions(64 * MIB)
    # wholly one way: a direction, no ranks
    assert (learned_order(options, [300, 200, 100]).regions_descending,
            learned_order(options, [300, 200, 100]).region_order) == (True, ())
    assert (learned_order(options, [100, 200]).regions_descending, learned_order(options, [100, 200]).region_order) \
        == (False, ())
    # one step down, one up: not most of them down, so later regions ascend; the ranks of the addresses
    assert learned_order(options, [100, 50, 200]) == replace(options, regions_descending=False, region_order=(1, 0, 2))
    # two of three steps down: later regions descend
    assert learned_order(options, [300, 200, 100, 400]) == replace(options, regions_descending=True,
                                                                   region_order=(2, 1, 0, 3))
    # no regions, or one: nothing learned
    assert learned_order(options, []) == options and learned_order(options, [5]) == options


def test_without_growth_one_region_of_the_limit() -> None:
    # the limit rounded down to 256: 10,000 -> 9,984
    sim = simulate(seq(("a", 1000), ("a", 1000)), BFCOptions(10_000, allow_growth=False))
    assert sim.regions == ((0, 9984),) and sim.offset.tolist() == [0, 1024]
    assert sim.largest_free_bytes.tolist() == [9984 - 1024, 9984 - 2048]


def test_a_limit_below_the_first_request_does_not_fit() -> None:
    events = seq(("a", 2 * MIB))
    sim = simulate(events, BFCOptions(MIB))
    assert not sim.fits and sim.failed_at == 0 and sim.regions == () and len(sim.bytes_in_use) == 0
    assert min_limit(events, BFCOptions(MIB)) == 2 * MIB


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError, match="rank"):
        BFCOptions(MIB, region_order=(0, 2))
    with pytest.raises(ValueError, match="negative"):
        BFCOptions(-1)
    for fraction in (-0.25, 1.5, math.nan):
        with pytest.raises(ValueError, match=r"\[0, 1\]"):
            BFCOptions(MIB, fragmentation_fraction=fraction)
    with pytest.raises(ValueError, match="above what the model holds"):
        BFCOptions(bfc.MAX_LIMIT_BYTES + 1)
    # AND the ends of each range are taken
    assert [BFCOptions(MIB, fragmentation_fraction=f).fragmentation_fraction for f in (0.0, 1.0)] == [0.0, 1.0]
    assert [BFCOptions(limit).limit_bytes for limit in (0, bfc.MAX_LIMIT_BYTES)] == [0, bfc.MAX_LIMIT_BYTES]


def test_a_sequence_by_hand_knows_its_frees_and_the_most_it_holds_at_once() -> None:
    # GIVEN 100 B, 300 B and 1 B requests (256, 512 and 256 rounded), the first freed between the second and third,
    # then the third freed, then a free of an allocation before the sequence (-1, as a profile that starts late has)
    requests = seq(("a", 100), ("a", 300), ("f", 0), ("a", 1), ("f", 3), ("f", -1))
    # THEN each allocation's free is the row that frees it (-1: none does, and for the frees themselves), and the
    # most rounded bytes alive at once are 768 (256 + 512, again after the swap of 256 for 256)
    assert requests.free_rows().tolist() == [2, -1, -1, 4, -1, -1]
    assert requests.peak_rounded_live_bytes() == 768
    # AND nothing asked holds nothing; an event of another kind is refused, naming the kinds
    assert seq().peak_rounded_live_bytes() == seq(("a", 0)).peak_rounded_live_bytes() == 0
    with pytest.raises(ValueError, match="unknown event kind 'x' \\(use 'a', 'u' or 'f'\\)"):
        seq(("a", 256), ("x", 0))


def test_a_pool_handed_out_whole_has_nothing_free() -> None:
    # GIVEN 2 MiB asked under a limit of 2 MiB with growth: region 0 of 2 MiB, all of it handed out, then 256 B more
    sim = simulate(seq(("a", 2 * MIB), ("a", 256)), BFCOptions(2 * MIB))
    # THEN the second request fails with nothing free: no free chunk (its largest is 0 bytes), no room to grow
    assert not sim.fits and sim.failed_at == 1 and sim.regions == ((0, 2 * MIB),)
    assert (sim.in_use_bytes, sim.largest_free_chunk_bytes, sim.free_bytes) == (2 * MIB, 0, 0)
    # AND the replay's repr shows its data, not the function that makes its chunk map
    assert "chunk_map" not in repr(sim) and "failed_at=1" in repr(sim)


def test_zero_byte_requests_and_frees_of_unknown_chunks_touch_nothing() -> None:
    events = Requests(np.array([True, False, True]), np.array([0, 0, 512]), np.array([-1, -1, -1]),
                      np.array([-1, -1, -1], dtype=np.int32), np.arange(3), ())
    sim = simulate(events, BFCOptions(MIB, allow_growth=False))
    assert sim.region.tolist() == [-1, -1, 0] and sim.bytes_in_use.tolist() == [0, 0, 512]


def test_limit_search_reports_what_it_tried() -> None:
    events = seq(("a", 3 * MIB // 2), ("a", MIB // 2), ("a", 768 * KIB))
    search = search_min_limit(events, BFCOptions(0))
    assert search.limit_bytes == 4 * MIB and search.monotone and search.counterexample() is None
    assert (3 * MIB, False) in search.tried and (4 * MIB, True) in search.tried
    # AND a request whose unlimited pool is exactly the most it holds at once (2 MiB in region 0 of 2 MiB): that
    # limit, known to fit, is the only one tried (its lower bound, 1 MiB, known not to), from the one unlimited replay
    whole = search_min_limit(seq(("a", 2 * MIB)), BFCOptions(0))
    assert (whole.limit_bytes, whole.tried, whole.replays) == (2 * MIB, ((2 * MIB, True),), 1)



@pytest.mark.parametrize("hint", [None, 4096])
def test_a_limit_search_to_the_byte_and_a_granularity_of_0_refused(hint: int | None) -> None:
    # 1,000 bytes are a 1,024-byte chunk (256-byte rounding): to the byte, that is the smallest limit, with growth
    # (the first region is what the limit leaves, under 2 MiB) and without (one region of the limit)
    for growth in (True, False):
        assert search_min_limit(seq(("a", 1000)), BFCOptions(0, growth), granularity=1, hint=hint).limit_bytes == 1024
    # to the MiB, 1 MiB fits and no limit lies between it and the lower bound (0): every limit below it was tried
    search = search_min_limit(seq(("a", 1000)), BFCOptions(0), hint=hint)
    assert search.limit_bytes == MIB and search.below_step == 1 and search.exhaustive
    with pytest.raises(ValueError, match="granularity must be positive"):
        search_min_limit(seq(("a", 1000)), BFCOptions(0), granularity=0, hint=hint)


def test_a_search_from_shared_rows_refuses_a_request_no_limit_holds() -> None:
    from memtrace.allocator.bfc import SharedStart

    # GIVEN 1 KiB allocated and freed (the rows shared with another sequence), then 16 TiB: more than the model holds
    requests = seq(("a", 1024, "x"), ("f", 0), ("a", 1 << 44, "huge"))
    # THEN the search from the shared rows says no limit fits, as the search from the first request does
    for shared in (None, SharedStart(requests, BFCOptions(0), 2)):
        with pytest.raises(ValueError, match="no limit the model holds fits these requests"):
            search_min_limit(requests, BFCOptions(0), shared=shared)

def test_the_limit_search_resumes_replays_exactly_as_full_ones_would_go() -> None:
    # GIVEN a sequence that grows the pool region by region (sizes up to 8 MiB, some freed at random)
    rng = np.random.default_rng(7)
    events: list[tuple] = []
    live: list[int] = []
    for _ in range(400):
        if live and rng.uniform() < 0.45:
            events.append(("f", live.pop(int(rng.integers(0, len(live))))))
        else:
            live.append(len(events))
            events.append(("a", int(2 ** rng.uniform(8, 23))))
    requests = seq(*events)
    # WHEN the smallest limit is searched (with growth, replays resume from the unlimited replay's state)
    search = search_min_limit(requests, BFCOptions(0))
    # THEN every limit it tried says what a replay from the first request says
    assert len(search.tried) > 10
    assert all(fits(requests, BFCOptions(limit)) == ok for limit, ok in search.tried)
    assert fits(requests, BFCOptions(search.limit_bytes)) and not any(
        fits(requests, BFCOptions(limit)) for limit in range(MIB, search.limit_bytes, MIB))


def random_sequence(seed: int, events: int, largest_log2: float = 0.0, *, round_sizes: bool = False) -> Requests:
    """Allocations of 256 B to 2**largest_log2 bytes, about half of them freed at random; with ``round_sizes``, of
    1 to 32 quarters of a MiB: sizes, regions and limits that are multiples of each other, so that the replay's
    comparisons with the limit often tie."""
    def allocation(rng: np.random.Generator) -> tuple[str, int]:
        return "a", (256 * KIB * int(rng.choice(QUARTERS_OF_A_MIB)) if round_sizes
                     else int(2 ** rng.uniform(8, largest_log2)))

    return seq(*random_events(np.random.default_rng(seed), events, allocation))


def random_events(rng: np.random.Generator, events: int, allocation: Callable[[np.random.Generator], tuple[Any, ...]],
                  ) -> list[tuple[Any, ...]]:
    """``events`` events as ``Requests.from_events`` takes them: each frees a live allocation at random (about 45% of
    the time, while one is live) or is ``allocation(rng)``."""
    made: list[tuple[Any, ...]] = []
    live: list[int] = []
    for _ in range(events):
        if live and rng.uniform() < 0.45:
            made.append(("f", live.pop(int(rng.integers(0, len(live))))))
        else:
            live.append(len(made))
            made.append(allocation(rng))
    return made


QUARTERS_OF_A_MIB = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32]


SEEDS_THAT_TIE = 40
OPTION_SETS = [(growth, gc, fraction) for growth in (True, False) for gc in (True, False) for fraction in (0.0, 0.01, 0.1)]


@pytest.mark.parametrize(("growth", "gc", "fraction"), OPTION_SETS)
def test_a_replay_proves_the_limits_that_decide_alike_event_by_event(growth: bool, gc: bool, fraction: float) -> None:
    # GIVEN random sequences and a limit around what they need
    for seed in range(12):
        requests = random_sequence(seed, 150, 12 + seed % 11)
        rng = np.random.default_rng(seed)
        limit = max(256, int(requests.peak_rounded_live_bytes() * rng.uniform(0.9, 2.0)) // 4096 * 4096)
        options = BFCOptions(limit, growth, gc, fraction)
        # WHEN one replay says under which limits every decision would be the same
        low, high, ok = proven_limits(requests, options)
        here = simulate(requests, options)
        assert low <= limit <= high and ok == here.fits
        # THEN a replay from the first request under each of them (ends, and limits between) decides alike, event
        # by event: the same chunk (region and offset) for every request, and the same failure
        for other in sorted({low, high, *(int(v) // 256 * 256 for v in rng.uniform(low, min(high, low + 64 * MIB), 4))}):
            if other < 256:
                continue
            theirs = simulate(requests, BFCOptions(other, growth, gc, fraction))
            assert theirs.failed_at == here.failed_at
            assert np.array_equal(theirs.region, here.region) and np.array_equal(theirs.offset, here.offset)


def test_the_limits_a_replay_proves_by_hand() -> None:
    # GIVEN 1 MiB then 3 MiB with growth: region 0 of 2 MiB (the first growth size), then a region of the next growth
    # size, 4 MiB, cut to what the limit leaves (limit - 2 MiB), which must hold 3 MiB
    requests = seq(("a", MIB), ("a", 3 * MIB))
    # THEN under 5 MiB it fits, and every limit from 5 MiB (room exactly 3 MiB) to 6 MiB (room exactly the growth
    # size) decides alike; above 6 MiB (from its next byte) the region is 4 MiB whatever the limit, up to the largest
    # the model holds; from above 2 MiB (room for a region at all) to below 5 MiB the cut region is too small: it fails
    assert proven_limits(requests, BFCOptions(5 * MIB)) == (5 * MIB, 6 * MIB, True)
    assert proven_limits(requests, BFCOptions(5 * MIB + 512)) == (5 * MIB, 6 * MIB, True)
    assert proven_limits(requests, BFCOptions(7 * MIB)) == (6 * MIB + 1, bfc.MAX_LIMIT_BYTES, True)
    assert proven_limits(requests, BFCOptions(4 * MIB)) == (2 * MIB + 1, 5 * MIB - 1, False)


@pytest.mark.parametrize(("growth", "gc", "fraction"), OPTION_SETS)
def test_a_replays_proof_holds_its_own_limit_where_comparisons_tie(growth: bool, gc: bool, fraction: float) -> None:
    # GIVEN sequences of round sizes under round limits (a free chunk exactly the size of a request, room exactly
    # what a region needs)
    for seed in range(SEEDS_THAT_TIE):
        requests = random_sequence(seed, 60, round_sizes=True)
        rng = np.random.default_rng(seed)
        limit = int(requests.peak_rounded_live_bytes() * rng.uniform(0.9, 2.0)) // (256 * KIB) * (256 * KIB)
        options = BFCOptions(limit, growth, gc, fraction)
        # WHEN one replay says under which limits every decision would be the same
        low, high, ok = proven_limits(requests, options)
        # THEN the range holds the replay's own limit, and replays from the first request at its ends decide alike
        assert low <= limit <= high
        for other in {low, high}:
            assert fits(seq_copy(requests), BFCOptions(other, growth, gc, fraction)) == ok

@pytest.mark.parametrize(("growth", "gc", "fraction"), OPTION_SETS)
def test_the_smallest_limit_is_exact_and_every_limit_tried_says_what_a_full_replay_says(
        monkeypatch: pytest.MonkeyPatch, growth: bool, gc: bool, fraction: float) -> None:
    # GIVEN random sequences, searched to 64 KiB (many limits, so many replays resume others and prove others),
    # with snapshots every 8 rows or so for replays to resume from
    monkeypatch.setattr(bfc, "_SNAPSHOT_ROWS", 8)
    granularity = 64 * KIB
    for seed in range(6):
        requests = random_sequence(100 + seed, 120, 14 + seed % 8)
        options = BFCOptions(0, growth, gc, fraction)
        # WHEN the smallest limit is searched for, and found from the lower bound up alone
        search = search_min_limit(requests, options, granularity)
        # THEN each limit tried is what a fresh replay from the first request says, the answer fits, every limit
        # below it does not (tried one by one), and min_limit agrees
        assert search.exhaustive
        assert all(fits(seq_copy(requests), BFCOptions(limit, growth, gc, fraction)) == ok for limit, ok in search.tried)
        fresh = seq_copy(requests)
        assert fits(fresh, BFCOptions(search.limit_bytes, growth, gc, fraction))
        assert not any(fits(seq_copy(requests), BFCOptions(limit, growth, gc, fraction))
                       for limit in range(granularity, search.limit_bytes, granularity))
        assert min_limit(seq_copy(requests), options, granularity) == search.limit_bytes
        # AND the outcome under each limit tried, worked out from the replays that proved it where none ran under
        # it (the peak in use and the largest pool move with the limit where the cut region's last chunk was in
        # use, or the region made), is that of a replay recording every event
        for limit, _ in search.tried:
            here = BFCOptions(limit, growth, gc, fraction)
            theirs = simulate(seq_copy(requests), here)
            assert outcome(requests, here) == Outcome(theirs.fits, theirs.failed_at, theirs.peak_in_use_bytes,
                                                      theirs.max_pool_bytes)


def seq_copy(requests: Requests) -> Requests:
    """The same sequence as a new object: nothing an earlier replay proved for it carries over."""
    return Requests(requests.is_alloc.copy(), requests.requested_bytes.copy(), requests.frees.copy(),
                    requests.op.copy(), requests.time_ns.copy(), requests.op_names)


def test_a_search_on_a_step_not_monotone_in_the_limit_stays_linear_in_its_events() -> None:
    # GIVEN a 5-request core that fits under 4 MiB, not under 5 MiB... and 20,000 alloc/free pairs of 256 B after it
    core = [("a", 3 * MIB // 2), ("a", MIB // 2), ("a", 768 * KIB)]
    pairs = [event for row in range(len(core), len(core) + 40_000, 2) for event in (("a", 256), ("f", row))]
    requests = seq(*core, *pairs)
    # WHEN the smallest limit is searched for
    search = search_min_limit(requests, BFCOptions(0))
    # THEN it is exact (the answer of the core alone) and takes a few replays, not one per limit below the boundary
    assert search.limit_bytes == search_min_limit(seq(*core), BFCOptions(0)).limit_bytes == 4 * MIB
    assert search.exhaustive and search.replays <= 10 and search.replayed_events <= 10 * len(requests)


def test_with_growth_garbage_collection_on_and_off_share_what_they_prove() -> None:
    # GIVEN sequences searched without garbage collection, then with it, on the same objects
    for seed in range(8):
        requests = random_sequence(300 + seed, 150, 14 + seed % 8)
        off = search_min_limit(requests, BFCOptions(0, True, False), 64 * KIB)
        on = search_min_limit(requests, BFCOptions(0, True, True), 64 * KIB)
        # THEN each answer and every limit tried is what fresh replays say (a fit without collection is the fit
        # with it, a failure with it a failure without), and the answer with it is found again from scratch
        fresh = search_min_limit(seq_copy(requests), BFCOptions(0, True, True), 64 * KIB)
        assert (on.limit_bytes, on.tried) == (fresh.limit_bytes, fresh.tried)
        for search, gc in ((off, False), (on, True)):
            assert all(fits(seq_copy(requests), BFCOptions(limit, True, gc)) == ok for limit, ok in search.tried)


def test_the_limit_search_keeps_states_only_where_a_searched_limit_can_cut_a_region() -> None:
    # GIVEN a sequence that grows the pool through ten regions (2 MiB, 4 MiB, ... as it asks for more)
    requests = seq(*[("a", MIB) for _ in range(1000)])
    # WHEN its smallest limit is searched for (with growth: replays resume from the unlimited replay's states)
    search = search_min_limit(requests, BFCOptions(0))
    # THEN only the states before the regions a limit above the lower bound (1,000 MiB) can cut are kept, as arrays
    kept = bfc._limits(requests, BFCOptions(0)).checkpoints
    assert search.limit_bytes == 1000 * MIB and kept is not None and 1 <= len(kept) <= 2
    assert all(c.pool + c.region_bytes > 1000 * MIB and isinstance(c.used_sizes, np.ndarray) for c in kept)


def repeated_steps(seed: int, steps: int, per_step: int) -> Requests:
    """Training-like steps that repeat: weights, then each step the same requests (some freed at once, some in the
    step, a few kept to the next step and freed there), one step with a request 4 KiB larger (the events stop
    repeating there)."""
    rng = np.random.default_rng(seed)
    events: list[tuple] = [("a", int(2 ** rng.uniform(8, 22))) for _ in range(int(rng.integers(0, 30)))]
    sizes = [int(2 ** rng.uniform(8, 24)) for _ in range(per_step)]
    kinds = rng.uniform(size=per_step)
    odd = int(rng.integers(0, steps))
    kept = int(rng.integers(0, 4))
    carried: list[int] = []
    for step in range(steps):
        live: list[int] = []
        for j, size in enumerate(sizes):
            live.append(len(events))
            events.append(("a", size + (4 * KIB if step == odd and j == 0 else 0)))
            if kinds[j] < 0.3:
                events.append(("f", live.pop()))
            elif kinds[j] < 0.5 and len(live) > 2:
                events.append(("f", live.pop(0)))
        events.extend(("f", row) for row in carried)
        carried = live[:kept]
        events.extend(("f", row) for row in reversed(live[kept:]))
    return seq(*events)


@pytest.mark.parametrize(("growth", "gc", "fraction"), OPTION_SETS)
def test_a_replay_moves_on_by_whole_periods_where_its_state_and_the_events_repeat(
        monkeypatch: pytest.MonkeyPatch, growth: bool, gc: bool, fraction: float) -> None:
    # GIVEN sequences of repeated steps (periods from 32 events up looked for), and a count of the periods skipped
    monkeypatch.setattr(bfc, "_MIN_PERIOD_ROWS", 32)
    skipped = []
    repeated = bfc._repeated

    def counted(*args: object) -> object:
        found = repeated(*args)  # type: ignore[arg-type]
        skipped.append(0 if found is None else found[0] - args[2])  # type: ignore[operator]
        return found

    monkeypatch.setattr(bfc, "_repeated", counted)
    # (seed 38, 20 steps of 34 requests: at row 340, the state two periods back has the same one region, but other
    # chunks in use and free: the replay must not move on from it)
    for seed, steps, per_step in [*((seed, 12 + seed, 20 + 7 * seed) for seed in range(10)), (38, 20, 34)]:
        requests = repeated_steps(seed, steps, per_step)
        found = bfc._period(requests)
        assert found is not None and found.rows >= 32
        rng = np.random.default_rng(seed)
        for limit in (int(requests.peak_rounded_live_bytes() * rng.uniform(0.95, 1.6)) // 256 * 256, bfc.MAX_LIMIT_BYTES):
            options = BFCOptions(limit, growth, gc, fraction)
            # WHEN it is replayed (tracking the limits that decide alike), and again with no period to move on by
            runs = []
            for period in (found, None):
                bfc._PERIODS[requests] = period
                runs.append(bfc._Run(requests, options, record=False, track=True))
            # THEN both end alike: the failure, the peaks, the limits proven, and the allocator's state at the end
            ours, plain = runs
            assert (ours.failed_at, ours.peaks, ours.proven_low, ours.proven_high) == (
                plain.failed_at, plain.peaks, plain.proven_low, plain.proven_high)
            assert (ours._end, ours.used, ours.addr_of, ours.regions) == (plain._end, plain.used, plain.addr_of,
                                                                          plain.regions)
            bfc._PERIODS[requests] = found
    # AND whole periods were skipped (thousands of events in all)
    assert sum(skipped) > 1000


@pytest.mark.parametrize("fraction", [0.0, 0.01, 0.1])
def test_shared_rows_give_the_state_and_the_smallest_limit_a_replay_from_the_first_request_gives(
        fraction: float) -> None:
    # GIVEN random sequences (growth on; with a fraction the split threshold moves with the limit, so a replay under
    # one limit is not the unlimited one up to the first region it cuts), each with a second sequence that begins
    # as it does (its first half) and then goes on in another order (its second half's frees reversed)
    for seed in range(8):
        source = random_sequence(300 + seed, 160, 14 + seed % 8)
        rows = len(source) // 2
        options = BFCOptions(0, True, False, fraction)
        shared = bfc.SharedStart(source, options, rows)
        head = Requests(source.is_alloc[:rows], source.requested_bytes[:rows], source.frees[:rows], source.op[:rows],
                        source.time_ns[:rows], source.op_names)
        rng = np.random.default_rng(seed)
        peak = source.peak_rounded_live_bytes()
        for limit in sorted({int(peak * f) // 256 * 256 for f in rng.uniform(0.5, 1.6, 6)}):
            # WHEN the state before row ``rows`` is asked for under a limit
            state = shared.at(limit)
            fresh = bfc._Run(head, BFCOptions(limit, True, False, fraction), record=False)
            # THEN it is the state a replay of those rows from the first request ends in (None where it fails)
            if fresh.failed_at is not None:
                assert state is None
                continue
            expected = fresh.state(rows)
            assert state is not None and state.regions == expected.regions and state.in_use == expected.in_use
            for name in ("free_sizes", "free_addresses", "used_rows", "used_addresses", "used_sizes"):
                assert np.array_equal(getattr(state, name), getattr(expected, name)), (seed, limit, name)
        # AND the smallest limit searched from the shared rows is the one searched from the first request
        alone = search_min_limit(seq_copy(source), options, 64 * KIB)
        assert search_min_limit(seq_copy(source), options, 64 * KIB, shared=shared).limit_bytes == alone.limit_bytes


def replay_starts(monkeypatch: pytest.MonkeyPatch) -> list[tuple[BFCOptions, int]]:
    """Every replay made from now on, as it is made: its options and the row it started at."""
    starts: list[tuple[BFCOptions, int]] = []
    run_init = bfc._Run.__init__

    def logged(run: Any, requests: Requests, options: BFCOptions, *args: Any, **kwargs: Any) -> None:
        run_init(run, requests, options, *args, **kwargs)
        starts.append((options, run.first_row))

    monkeypatch.setattr(bfc._Run, "__init__", logged)
    return starts


def branching_sequences(seed: int, events: int, largest_log2: float) -> tuple[Requests, Requests, int]:
    """Two random sequences (as :func:`random_sequence`'s) that are one up to row ``rows`` and then go on apart."""
    rng = np.random.default_rng(seed)
    made: list[tuple] = []
    live: list[int] = []

    def go_on(rng: np.random.Generator, made: list[tuple], live: list[int]) -> None:
        for _ in range(events // 2):
            if live and rng.uniform() < 0.45:
                made.append(("f", live.pop(int(rng.integers(0, len(live))))))
            else:
                live.append(len(made))
                made.append(("a", int(2 ** rng.uniform(8, largest_log2))))

    go_on(rng, made, live)
    rows = len(made)
    tails = []
    for branch in (1, 2):
        both, alive = list(made), list(live)
        go_on(np.random.default_rng([seed, branch]), both, alive)
        tails.append(seq(*both))
    return tails[0], tails[1], rows


@pytest.mark.parametrize("gc", [False, True])
def test_replays_from_shared_rows_learn_the_regions_and_answer_as_replays_from_the_first_request(
        gc: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN random sequences that share their first half with another (orders drawn from a recording do), and
    # searches of the second one's smallest limit as the band makes them: hints, no limit below the boundary
    # looked at, each replay from the shared state (growth on: up to the first region a limit cuts, a replay is the
    # unlimited one, so a replay learns the regions the next one under a smaller limit may start from)
    starts = replay_starts(monkeypatch)
    learned_starts = 0
    for seed in range(12):
        source, other, rows = branching_sequences(700 + seed, 240, 16 + seed % 6)
        options = BFCOptions(0, True, gc)
        shared = bfc.SharedStart(source, options, rows)
        peak = other.peak_rounded_live_bytes()
        hints = [int(peak * f) // (64 * KIB) * 64 * KIB for f in (1.5, 1.2, 1.05)]
        starts.clear()
        # WHEN the smallest limit is searched for from the shared rows
        search = search_min_limit(other, options, 64 * KIB, extra_probes=1, budget_events=0, hint=hints, shared=shared)
        # THEN every limit it tried answers as a replay of the whole sequence from its first request does
        for limit, ok in search.tried:
            fresh = bfc._Run(seq_copy(other), replace(options, limit_bytes=limit), record=False)
            assert ok == (fresh.failed_at is None), (seed, limit)
        assert dict(search.tried)[search.limit_bytes] is True
        # AND replays before any unlimited one started past the shared rows, where a replay before them learned a
        # region the limit cuts
        unlimited = next((i for i, (o, _) in enumerate(starts) if o.limit_bytes == bfc.MAX_LIMIT_BYTES), len(starts))
        learned_starts += sum(first_row > rows for _, first_row in starts[:unlimited])
    assert learned_starts >= 5, learned_starts


def test_garbage_collection_s_replays_resume_from_the_unlimited_replay_made_without_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN random sequences (growth on) whose smallest limit was searched without garbage collection (fit's answer
    # first; its unlimited replay kept its states where it made each region), then asked with it (the alternative)
    starts = replay_starts(monkeypatch)
    resumed = 0
    for seed in range(10):
        requests = random_sequence(900 + seed, 200, 18 + seed % 5)
        search_min_limit(requests, BFCOptions(0, True, False))
        starts.clear()
        # WHEN the smallest limit with garbage collection is found
        found = min_limit(requests, BFCOptions(0, True, True))
        ours = [row for options, row in starts if options.garbage_collection]
        # THEN it is the one found alone, with no replay before it (unlimited, collection changes nothing: the same
        # replay), and its replays (where the search without it proved no answer) started where the limit cuts a
        # region, not at the first request
        assert found == min_limit(seq_copy(requests), BFCOptions(0, True, True)), seed
        assert all(row > 0 for row in ours), (seed, ours)
        resumed += len(ours)
    assert resumed >= 5


@pytest.mark.parametrize("gc", [False, True])
def test_a_fractions_replays_start_where_the_128_mib_rules_unlimited_replay_decides_alike(
        gc: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN random sequences of requests up to 512 MiB (chunks whose remainder decides a split by the threshold),
    # growth on, whose smallest limit under the 128 MiB rule was searched (its unlimited replay kept its states where
    # it made each region and the remainders its split decisions turned on), then asked under fractions whose
    # threshold (fraction * limit) does and does not split as 128 MiB does
    starts = replay_starts(monkeypatch)
    for seed in range(16):
        requests = random_sequence(1300 + seed, 150, 24 + seed % 6)
        search_min_limit(requests, BFCOptions(0, True, gc))
        peak = requests.peak_rounded_live_bytes()
        rng = np.random.default_rng(seed)
        for fraction in (0.01, 0.1, 0.5):
            options = BFCOptions(0, True, gc, fraction)
            # WHEN each limit's outcome is asked, and the smallest limit
            for limit in sorted({int(peak * f) // 256 * 256 for f in rng.uniform(0.9, 2.5, 12)}):
                ours = outcome(requests, replace(options, limit_bytes=limit))
                fresh = bfc._Run(seq_copy(requests), replace(options, limit_bytes=limit), record=False)
                # THEN each is what a replay from the first request says: fits, where it fails, peak, largest pool
                assert ours == Outcome(fresh.failed_at is None, fresh.failed_at, fresh.peak, fresh.max_pool), (
                    seed, fraction, limit)
            assert min_limit(requests, options) == min_limit(seq_copy(requests), options), (seed, fraction)
    # AND many of the fractions' replays started past the first request (from the 128 MiB rule's states)
    assert sum(row > 0 for options, row in starts if options.fragmentation_fraction > 0) >= 40


class InOrder:
    """A schedule that serves the rows in order and lets no request wait: the plain replay's."""

    def __init__(self, rows: int, start: int) -> None:
        self.rows, self.start = rows, start

    def runs(self) -> Iterator[tuple[int, int]]:
        yield self.start, self.rows

    def blocked(self, row: int) -> bool:
        return False


def test_a_served_search_replays_a_failing_limit_from_where_it_cuts_a_region(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN random sequences (growth on) whose smallest limit was searched (its unlimited replay kept its states where
    # it made each region), searched again served by a schedule (the band's recorded order), the answer as a hint
    starts = replay_starts(monkeypatch)
    served = 0
    for seed in range(10):
        requests = random_sequence(1100 + seed, 200, 18 + seed % 5)
        plain = search_min_limit(requests, BFCOptions(0))
        starts.clear()
        # WHEN the schedule serves the rows in order (what the plain replays proved answers where they fit; a limit
        # where they fail is replayed served)
        search = search_min_limit(requests, BFCOptions(0), schedule=functools.partial(InOrder, len(requests)),
                                  hint=plain.limit_bytes)
        # THEN the answer is the plain one, and every replay started where its limit cuts a region, not at the first
        # request
        assert search.limit_bytes == plain.limit_bytes, seed
        assert all(first_row > 0 for _, first_row in starts), (seed, starts)
        served += len(starts)
    assert served >= 10


def test_a_search_counts_the_events_its_replays_ran_worked_by_hand() -> None:
    # GIVEN 100 requests of 1 KiB (region 0, 2 MiB), one of 3 MiB (a new region), 50 more of 1 KiB
    requests = seq(*[("a", KIB)] * 100, ("a", 3 * MIB), *[("a", KIB)] * 50)
    # WHEN its smallest limit is searched for (with growth: the unlimited replay, then replays from its state before
    # the 3 MiB request: the regions before it are the same under every limit above them)
    search = search_min_limit(requests, BFCOptions(0))
    # THEN 5 MiB (2 + min(4, 3) MiB); three replays: the unlimited one (151 events), 4 MiB from row 100 (the 3 MiB
    # request fails: 2 MiB left, 1 event), 5 MiB from row 100 (51 events); 4 MiB is not replayed again below it
    assert search.limit_bytes == 5 * MIB and {(4 * MIB, False), (5 * MIB, True)} <= set(search.tried)
    assert (search.replays, search.replayed_events) == (3, 151 + 1 + 51)


@pytest.mark.parametrize(("growth", "gc", "fraction"), OPTION_SETS)
def test_the_outcome_under_a_limit_off_the_256_byte_grid_is_a_fresh_replays(growth: bool, gc: bool,
                                                                             fraction: float) -> None:
    # GIVEN random sequences whose smallest limit was searched (the replays' proofs remembered for each sequence)
    for seed in range(3):
        requests = random_sequence(100 + seed, 120, 14 + seed % 8)
        search = search_min_limit(requests, BFCOptions(0, growth, gc, fraction), 64 * KIB)
        # WHEN the outcome is asked under limits beside those tried, off the 256-byte grid (a user's --limit in bytes)
        for limit, _ in search.tried:
            for odd in (limit + 1, limit - 255, limit + 100):
                options = BFCOptions(odd, growth, gc, fraction)
                # THEN it is what a replay from the first request of a fresh copy says
                theirs = simulate(seq_copy(requests), options)
                assert outcome(requests, options) == Outcome(theirs.fits, theirs.failed_at, theirs.peak_in_use_bytes,
                                                             theirs.max_pool_bytes), (seed, odd)


def test_no_period_is_kept_where_no_stretch_of_the_events_repeats_for_three_periods(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN 24 steps of 40 events each (20 allocations of 1 to 20 KiB, each freed at once), periods from 32 rows up
    # looked for; in some steps one allocation asks for 256 bytes more (each such row breaks the repeat, and so does
    # the same row a period later, which differs from it)
    monkeypatch.setattr(bfc, "_MIN_PERIOD_ROWS", 32)

    def steps(odd: set[int]) -> Requests:
        events: list[tuple] = []
        for step in range(24):
            for j in range(20):
                events.append(("a", (j + 1) * KIB + (256 if step in odd and j == step % 20 else 0)))
                events.append(("f", len(events) - 1))
        return seq(*events)

    # WHEN every other step has such a row (the longest stretch without a break is under two periods: 80 rows)
    # THEN no period is kept: a replay moves on only from a state saved where the events repeat for three periods
    assert bfc._period(steps(set(range(1, 24, 2)))) is None
    # WHEN steps 9 to 15 have none (from step 9's second period, rows 400 to 640, nothing breaks: six periods)
    found = bfc._period(steps(set(range(1, 9, 2)) | set(range(17, 24, 2))))
    # THEN the period of 40 rows is kept, with the rows that break it: in each such step s, its allocation j = s % 20
    # (row 40 s + 2 j) and the same allocation a step later (row 40 (s + 1) + 2 j)
    assert found is not None and found.rows == 40
    odd = set(range(1, 9, 2)) | set(range(17, 24, 2))
    assert found.breaks.tolist() == sorted({row for s in odd for row in (40 * s + 2 * (s % 20), 40 * (s + 1) + 2 * (s % 20))
                                            if row < 960})
    assert int(np.diff(found.breaks).max()) >= 3 * 40 > 80


def test_moving_on_by_periods_stops_before_a_free_of_a_chunk_that_moved_worked_by_hand() -> None:
    # GIVEN events that repeat every 10 rows, a replay at row 20 whose state is the one at row 10, but whose
    # allocation of row 15 (live now at address 100) had its counterpart (row 5) at 200 a period earlier; row 15 is
    # freed at row 37, row 12 (at 300, as its counterpart row 2 was) outlives the window
    free_row = np.full(80, 80, dtype=np.int64)
    free_row[15] = 37
    repeats = bfc._Period(10, np.zeros(0, dtype=np.int64), free_row, np.zeros(80, dtype=bool))
    before, now = {5: 200, 2: 300}, {15: 100, 12: 300}
    # WHEN it may move on up to row 60
    # THEN only to row 30, the last whole period before that free (which frees another chunk than a period before)
    assert bfc._repeated(repeats, 10, 20, 60, before, now) == (30, {15: 100, 12: 300})
    # and not at all where that free comes within the first period
    free_row[15] = 27
    assert bfc._repeated(repeats, 10, 20, 60, before, now) is None
    # and to row 30 where that free is row 30's own event (not yet replayed there: row 15 is still live)
    free_row[15] = 30
    assert bfc._repeated(repeats, 10, 20, 60, before, now) == (30, {15: 100, 12: 300})


def test_the_limits_under_which_the_moving_chunk_splits_alike_worked_by_hand() -> None:
    # GIVEN a free chunk of 1,500 bytes whose size moves with the limit (the cut region's last), 1,000 bytes asked
    # for, fragmentation_fraction 0.5: it splits under limit L + d when 1500 + d >= 2,000 or
    # 1500 + d - 1000 >= int(0.5 * (L + d))
    def bound(limit: int) -> tuple[int, int]:
        run = SimpleNamespace(options=BFCOptions(limit, fragmentation_fraction=0.5))
        return bfc._Run._tail_split_bound(run, 1000, 1500, -10_000, 10_000)  # type: ignore[arg-type]

    # WHEN L = 1,001: 500 >= int(500.5) splits; one byte less, 499 >= int(500) does not
    # THEN the limits that split alike begin at d = 0
    assert bound(1001) == (0, 10_000)
    # WHEN L = 1,000: 500 >= 500 and 499 >= int(499.5) split, 498 >= int(499) does not: from d = -1
    assert bound(1000) == (-1, 10_000)
    # WHEN L = 1,003: 500 >= int(501.5) does not split; 501 >= int(502) neither, 502 >= int(502.5) does: up to d = 1
    assert bound(1003) == (-10_000, 1)


def big_first(seed: int) -> Requests:
    """A request of 4 to 64 KiB first (under a limit near the peak it takes its whole region: the chunk that moves
    with the limit is in use), then 30 to 120 events: small requests, 0-byte ones, frees at random."""
    rng = np.random.default_rng(seed)
    events: list[tuple] = [("a", int(2 ** rng.uniform(12, 16)))]
    live = [0]
    for _ in range(int(rng.integers(30, 120))):
        r = rng.uniform()
        if live and r < 0.4:
            events.append(("f", live.pop(int(rng.integers(0, len(live))))))
        elif r < 0.55:
            events.append(("a", 0))
        else:
            live.append(len(events))
            events.append(("a", int(2 ** rng.uniform(8, 13))))
    return seq(*events)


@pytest.mark.parametrize(("seed", "growth", "fraction"), [(4, False, 0.1), (9, True, 0.1), (11, False, 0.0),
                                                          (11, True, 0.0)])
def test_replays_resumed_where_the_moving_chunk_is_in_use_decide_as_fresh_ones(
        monkeypatch: pytest.MonkeyPatch, seed: int, growth: bool, fraction: float) -> None:
    # GIVEN a sequence whose first request fills the region the limit cuts, snapshots every 8 rows or so
    monkeypatch.setattr(bfc, "_SNAPSHOT_ROWS", 8)
    requests = big_first(seed)
    options = BFCOptions(0, growth, False, fraction)
    # WHEN its smallest limit is searched to 256 bytes (replays resume from snapshots taken under other limits)
    search = search_min_limit(requests, options, 256)
    # THEN every limit tried says what a fresh replay says, and no limit below the answer fits
    assert all(fits(seq_copy(requests), BFCOptions(limit, growth, False, fraction)) == ok for limit, ok in search.tried)
    assert fits(seq_copy(requests), BFCOptions(search.limit_bytes, growth, False, fraction))
    assert not any(fits(seq_copy(requests), BFCOptions(limit, growth, False, fraction))
                   for limit in range(256, search.limit_bytes, 256))


FRACTION_EDGE_CASES = [
    # (the first: the quotient (remainder + 1) / fraction, 100, is a limit whose threshold is already above)
    (0.01, 0), (0.01, MIB), (0.3, 128 * MIB - 256), (1 / 3, 2**43), (0.9, 12345),
    # where the quotient (remainder + 1) / fraction is beyond 2**53, its float may lie below the edge (the model's
    # limits stop at 2**43, but the edge is what it is): 0.15 and 1.6e16, found by a search of random pairs
    (0.15, 16034930039357116), (0.13436424411240122, 18379659979244753)]


@pytest.mark.parametrize(("fraction", "remainder"), FRACTION_EDGE_CASES)
def test_the_fraction_edge_is_the_largest_limit_whose_split_threshold_is_within_the_remainder(
        fraction: float, remainder: int) -> None:
    # under a fragmentation fraction the split threshold is fraction x limit (BFC.md), int(fraction * limit) in the
    # model: the edge is the largest limit L with int(fraction * L) <= remainder, the next limit's threshold above it
    edge = bfc._fraction_edge(fraction, remainder)
    assert int(fraction * edge) <= remainder < int(fraction * (edge + 1))


@pytest.mark.parametrize("gc", [False, True])
def test_a_fractions_replays_are_what_fresh_replays_say_at_the_edges_of_the_limits_that_decide_alike(gc: bool) -> None:
    # GIVEN random sequences whose 128 MiB rule's unlimited replay kept the remainders its split decisions turned on
    # (the largest kept whole, the least split): a fraction's threshold int(fraction * limit) splits alike only
    # between the edges those remainders set, so the limits just inside and just outside each edge are asked
    checked = 0
    for seed in range(16):
        requests = random_sequence(1300 + seed, 150, 24 + seed % 6)
        search_min_limit(requests, BFCOptions(0, True, gc))
        kept_whole, split_at = bfc._limits(requests, BFCOptions(0, True, gc)).unlimited_splits
        for fraction in (0.01, 0.1, 0.5):
            options = BFCOptions(0, True, gc, fraction)
            edges = [] if kept_whole < 0 else [bfc._fraction_edge(fraction, kept_whole) + d for d in (-1, 0, 1, 2)]
            if split_at < bfc.MAX_LIMIT_BYTES:
                edges += [bfc._fraction_edge(fraction, split_at) + d for d in (-1, 0, 1)]
            for limit in (edge for edge in edges if edge > 0):
                # THEN each outcome is what a replay from the first request says
                ours = outcome(requests, replace(options, limit_bytes=limit))
                fresh = bfc._Run(seq_copy(requests), replace(options, limit_bytes=limit), record=False)
                assert ours == Outcome(fresh.failed_at is None, fresh.failed_at, fresh.peak, fresh.max_pool), (
                    seed, fraction, limit)
                checked += 1
    assert checked >= 150


@pytest.mark.parametrize(("growth", "gc"), [(True, False), (True, True), (False, False)])
def test_limits_asked_in_any_order_from_shared_rows_answer_as_fresh_replays(growth: bool, gc: bool) -> None:
    # GIVEN random sequences that share their first half with another, searched from the shared state with hints
    # that go up as well as down, with growth (a replay under a small limit learns the unlimited replay's regions only up to the
    # one its limit cuts: a larger limit's replay must not start from a state the small limit's replay made after it)
    # and without (one region the size of the limit: no replay's state is another limit's)
    for seed in range(24):
        source, other, rows = branching_sequences(700 + seed, 240, 16 + seed % 6)
        options = BFCOptions(0, growth, gc)
        shared = bfc.SharedStart(source, options, rows)
        peak = other.peak_rounded_live_bytes()
        for factors in ((1.02, 1.5, 1.1, 2.0), (1.3, 1.01, 1.6, 1.05), (1.01, 1.03, 1.06, 1.1, 1.2, 1.4, 2.0)):
            hints = [int(peak * f) // (64 * KIB) * 64 * KIB for f in factors]
            search = search_min_limit(seq_copy(other), options, 64 * KIB, extra_probes=1, budget_events=0, hint=hints,
                                      shared=shared)
            # THEN every limit tried answers as a replay of the whole sequence from its first request does
            for limit, ok in search.tried:
                fresh = bfc._Run(seq_copy(other), replace(options, limit_bytes=limit), record=False)
                assert ok == (fresh.failed_at is None), (seed, factors, limit)


@pytest.mark.parametrize("gc", [False, True])
def test_outcomes_on_either_side_of_where_a_limit_stops_cutting_a_region_are_fresh_replays(gc: bool) -> None:
    # GIVEN random sequences (growth on) whose unlimited replay kept its states where it made each region, and for
    # each region the limits about where it stops being cut (pool + region: a replay from that state proves a range
    # of limits, which must end below the limit that no longer cuts the region), asked from below first
    asked = 0
    for seed in range(20):
        requests = random_sequence(1500 + seed, 200, 18 + seed % 5)
        options = BFCOptions(0, True, gc)
        search_min_limit(requests, options)
        checkpoints = bfc._limits(requests, options).checkpoints or []
        for c in checkpoints[:6]:
            edge = c.pool + c.region_bytes
            for limit in (edge - 512, edge - 1, edge, edge + 255, edge + 256, edge + 4096):
                if limit <= 0:
                    continue
                # THEN each outcome is what a replay from the first request says
                ours = outcome(requests, replace(options, limit_bytes=limit))
                fresh = bfc._Run(seq_copy(requests), replace(options, limit_bytes=limit), record=False)
                assert ours == Outcome(fresh.failed_at is None, fresh.failed_at, fresh.peak, fresh.max_pool), (
                    seed, limit)
                asked += 1
    assert asked >= 60


def test_a_replay_refuses_options_that_contradict_each_other() -> None:
    # a replay served by a schedule records nothing (its events are not in row order), and one that may switch to a
    # schedule tracks nothing and starts without one
    requests = seq(("a", 256), ("f", 0))
    serve = functools.partial(InOrder, len(requests))
    with pytest.raises(ValueError, match="a replay served by a schedule records nothing"):
        bfc._Run(requests, BFCOptions(MIB), record=True, schedule=serve)
    with pytest.raises(ValueError, match="a replay served by a schedule records nothing"):
        bfc._Run(requests, BFCOptions(MIB), record=True, retry=serve)
    with pytest.raises(ValueError, match="a replay that may switch to a schedule tracks nothing"):
        bfc._Run(requests, BFCOptions(MIB), record=False, track=True, retry=serve)
    with pytest.raises(ValueError, match="a replay that may switch to a schedule tracks nothing"):
        bfc._Run(requests, BFCOptions(MIB), record=False, schedule=serve, retry=serve)
    assert bfc._Run(requests, BFCOptions(MIB), record=False, retry=serve).failed_at is None
    # AND so does XLA's partitioned pool's replay
    partitioned = BFCOptions(MIB, allow_growth=False, partitioned=True)
    with pytest.raises(ValueError, match="a replay served by a schedule records nothing"):
        bfc._PartitionedRun(requests, partitioned, record=True, schedule=serve)
    assert bfc._PartitionedRun(requests, partitioned, record=False, schedule=serve).failed_at is None


def replays_made(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int, int]]:
    """Every replay made from now on, as it is made: its limit, the row it started at and the rows of its sequence."""
    made: list[tuple[int, int, int]] = []
    run_init = bfc._Run.__init__

    def logged(run: Any, requests: Requests, options: BFCOptions, *args: Any, **kwargs: Any) -> None:
        run_init(run, requests, options, *args, **kwargs)
        made.append((options.limit_bytes, run.first_row, len(requests)))

    monkeypatch.setattr(bfc._Run, "__init__", logged)
    return made


# Row 0 (1 KiB) is shared with another sequence; then, with growth and unlimited, 3 MiB takes region 1 (4 MiB, at 2 MiB
# of pool, kept whole: 1 MiB would remain), is freed; 5 MiB takes region 2 (8 MiB at 6 MiB), is freed; 9 MiB fits no
# free chunk (4 and 8 MiB) and takes region 3 (16 MiB at 14 MiB). The most live at once: 9 MiB + 1 KiB.
FOUR_REGIONS = [("a", KIB), ("a", 3 * MIB), ("f", 1), ("a", 5 * MIB), ("f", 3), ("a", 9 * MIB)]


def test_a_search_from_shared_rows_learns_the_regions_and_replays_each_limit_from_the_one_it_cuts_worked_by_hand(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN FOUR_REGIONS, its first row shared, searched to 4 MiB (the lower bound 8 MiB: limits from 12 MiB; the
    # states kept where a region ends above 12 MiB: before rows 3 and 5) with hints 12, 20, 36 and 24 MiB
    made = replays_made(monkeypatch)
    options = BFCOptions(0)
    shared = bfc.SharedStart(seq(*FOUR_REGIONS), options, 1)
    made.clear()
    search = search_min_limit(seq(*FOUR_REGIONS), options, 4 * MIB, extra_probes=0, budget_events=0,
                              hint=[12 * MIB, 20 * MIB, 36 * MIB, 24 * MIB], shared=shared)
    # THEN 24 MiB (region 3 cut to 10 MiB holds 9; under 20 MiB it is cut to 6), and one replay a limit, each from
    # where the unlimited replay stops being the limit's:
    # 12 MiB cuts no region learned (only region 0, shared): from the shared state (row 1), learning regions 2 (cut by
    # 12 MiB: 6 MiB of room, the frontier) and none after; 20 MiB cuts none learned: from the frontier (row 3),
    # learning region 3 (cut: 6 MiB of room, the new frontier); 36 MiB cuts none: from the frontier (row 5), cuts no
    # region there either (the replay is the unlimited one to the end); 32 MiB (below 36) then needs no replay: it
    # cuts no region; 24 MiB cuts region 3: from row 5; 20 MiB was replayed already
    assert search.limit_bytes == 24 * MIB
    assert [(limit // MIB, ok) for limit, ok in search.tried] == [(12, False), (20, False), (36, True), (32, True),
                                                                  (24, True)]
    assert [(limit // MIB, row, rows) for limit, row, rows in made] == [(12, 1, 6), (20, 3, 6), (36, 5, 6), (24, 5, 6)]


def test_a_fractions_search_from_shared_rows_replays_every_limit_from_its_own_shared_state(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the same search with fragmentation_fraction 0.1 (the split threshold moves with the limit: no replay is
    # the unlimited one, so no region is learned)
    made = replays_made(monkeypatch)
    options = BFCOptions(0, fragmentation_fraction=0.1)
    shared = bfc.SharedStart(seq(*FOUR_REGIONS), options, 1)
    made.clear()
    search = search_min_limit(seq(*FOUR_REGIONS), options, 4 * MIB, extra_probes=0, budget_events=0,
                              hint=[12 * MIB, 20 * MIB, 36 * MIB, 24 * MIB], shared=shared)
    # THEN the same limits are tried, and each is replayed: the shared row under it (from the first request), then
    # the sequence from that state (row 1)
    assert [(limit // MIB, ok) for limit, ok in search.tried] == [(12, False), (20, False), (36, True), (32, True),
                                                                  (24, True)]
    assert [(limit // MIB, row, rows) for limit, row, rows in made] == [
        (limit, row, rows) for limit in (12, 20, 36, 32, 24) for row, rows in ((0, 1), (1, 6))]


def test_outcomes_replay_from_the_first_region_a_limit_cuts_and_reuse_what_each_replay_proved_worked_by_hand(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN 1, 3, 5 and 9 MiB, none freed: with growth, regions of 2, 4, 8 and 16 MiB (pool 2, 6, 14, 30 MiB), each
    # request taking its region's chunk (kept whole); the unlimited replay's states kept where a region ends above
    # 10 MiB: before row 2 (region 2, 6 to 14 MiB) and row 3 (region 3, 14 to 30 MiB)
    starts = replay_starts(monkeypatch)
    requests = seq(("a", KIB), ("a", 3 * MIB), ("a", 5 * MIB), ("a", 9 * MIB))
    bfc._limits(requests, BFCOptions(0)).unlimited(10 * MIB)

    def replayed_from(limit: int) -> list[int]:
        starts.clear()
        ours = outcome(requests, BFCOptions(limit))
        rows = [row for _, row in starts]
        theirs = simulate(seq_copy(requests), BFCOptions(limit))
        assert ours == Outcome(theirs.fits, theirs.failed_at, theirs.peak_in_use_bytes, theirs.max_pool_bytes), limit
        return rows

    # THEN 12 MiB cuts region 2 (6 MiB of room): replayed from row 2 (9 MiB fails at row 3); 256 bytes more decide
    # alike (proven by that replay): no replay
    assert replayed_from(12 * MIB) == [2]
    assert replayed_from(12 * MIB + 256) == []
    # 14 MiB leaves region 2 whole (exactly its end): it is not that replay's, and it cuts region 3: from row 3
    assert replayed_from(14 * MIB) == [3]
    # 10 MiB cuts region 2 to 4 MiB: from row 2 (5 MiB fails there); 9.5 MiB is below the states kept (a region
    # before 10 MiB might be cut too): from the first request, not answered by that replay's proof
    assert replayed_from(10 * MIB) == [2]
    assert replayed_from(9 * MIB + 512 * KIB) == [0]
    # above every region, off the 256-byte grid: the unlimited replay's outcome, no replay
    assert replayed_from(30 * MIB + 100) == []


def test_garbage_collection_borrows_the_unlimited_replay_and_its_proof_from_the_search_without_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN 1 KiB and 3 MiB (growth: regions of 2 and 4 MiB, the largest pool 6 MiB), searched to 8 MiB without
    # garbage collection (its unlimited replay, the states kept from 8 MiB)
    starts = replay_starts(monkeypatch)
    requests = seq(("a", KIB), ("a", 3 * MIB))
    assert search_min_limit(requests, BFCOptions(0, True, False), 8 * MIB).limit_bytes == 8 * MIB
    assert [(options.limit_bytes, row) for options, row in starts] == [(bfc.MAX_LIMIT_BYTES, 0)]
    # WHEN searched with it: unlimited, no extension fails, so the replay is the same: borrowed, with what it proved
    # (every limit from the largest pool up fits)
    starts.clear()
    assert search_min_limit(requests, BFCOptions(0, True, True), 8 * MIB).limit_bytes == 8 * MIB
    with_gc = bfc._limits(requests, BFCOptions(0, True, True))
    # THEN no replay; searched again, still none and nothing more proven
    assert starts == [] and with_gc.proven == [(6 * MIB, bfc.MAX_LIMIT_BYTES, True)]
    assert search_min_limit(requests, BFCOptions(0, True, True), 8 * MIB).limit_bytes == 8 * MIB
    assert starts == [] and with_gc.proven == [(6 * MIB, bfc.MAX_LIMIT_BYTES, True)]
    # AND a limit between the largest pool and the states kept (6 MiB + 256) is answered by the borrowed proof
    assert outcome(requests, BFCOptions(6 * MIB + 256, True, True)).fits and starts == []


def test_split_decisions_at_exactly_twice_the_request_are_not_the_thresholds() -> None:
    # GIVEN one request from the first region (2 MiB) of an unlimited replay under the 128 MiB rule
    def remainders(size: int) -> tuple[int, int]:
        return bfc._Run(seq(("a", size)), BFCOptions(bfc.MAX_LIMIT_BYTES), record=False).split_remainders

    # THEN 1 MiB: the chunk is exactly twice it, split whatever the threshold: no remainder the threshold decided
    # (and none kept whole: a remainder below 0)
    kept_whole, split_at = remainders(MIB)
    assert kept_whole < 0 and split_at == bfc.MAX_LIMIT_BYTES
    # 1.5 MiB: under twice, 512 KiB would remain (under 128 MiB): kept whole, 512 KiB the largest so kept
    assert remainders(3 * MIB // 2) == (512 * KIB, bfc.MAX_LIMIT_BYTES)
    # 300 MiB (a region of 512 MiB): under twice, 212 MiB remain (at least 128 MiB): split by the threshold alone
    kept_whole, split_at = remainders(300 * MIB)
    assert kept_whole < 0 and split_at == 212 * MIB


def test_a_fractions_replay_starts_from_the_128_mib_rules_state_exactly_within_its_edges_worked_by_hand(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN sequences whose smallest limit under the 128 MiB rule was searched (growth: its unlimited replay kept its
    # states where a region ends above the lower bound, and the remainders its split decisions turned on); a
    # fraction's replay is that replay up to the first region its limit cuts where its threshold int(fraction *
    # limit) splits alike: above the largest remainder kept whole, at most the least split by the threshold alone
    starts = replay_starts(monkeypatch)

    def replayed_from(requests: Requests, limit: int, fraction: float, gc: bool = False) -> list[int]:
        starts.clear()
        options = BFCOptions(limit, True, gc, fraction)
        ours = outcome(requests, options)
        rows = [row for _, row in starts]
        fresh = bfc._Run(seq_copy(requests), options, record=False)
        assert ours == Outcome(fresh.failed_at is None, fresh.failed_at, fresh.peak, fresh.max_pool), (limit, fraction)
        return rows

    # 1.5 MiB takes region 0 (2 MiB, under twice: kept whole, 512 KiB remain), is freed; 4 MiB takes region 1 (4 MiB
    # at 2 MiB, an exact fit): the state before row 2 kept (the lower bound is 4 MiB)
    kept = seq(("a", 3 * MIB // 2), ("f", 0), ("a", 4 * MIB))
    assert search_min_limit(kept, BFCOptions(0)).limit_bytes == 6 * MIB
    # THEN under fraction 0.1 about 5 MiB (cutting region 1): int(0.1 x 5,242,890) = 524,289 > 512 KiB keeps the
    # 1.5 MiB chunk whole as 128 MiB did: from row 2; a byte less, int(524,288.9) = 512 KiB splits it: from row 0
    assert replayed_from(kept, 5_242_890, 0.1) == [2]
    assert replayed_from(kept, 5_242_889, 0.1) == [0]
    # 2 MiB and 4 MiB, each its region exactly (0 bytes remain, kept whole)
    exact = seq(("a", 2 * MIB), ("f", 0), ("a", 4 * MIB))
    assert search_min_limit(exact, BFCOptions(0)).limit_bytes == 6 * MIB
    # under 5 MiB, fraction 1e-6: a threshold of 5 bytes keeps them whole: from row 2; 1e-7: int(0.52) = 0, and the
    # 0 bytes that remain reach it: split, unlike the 128 MiB rule's replay: from row 0
    assert replayed_from(exact, 5 * MIB, 1e-6) == [2]
    assert replayed_from(exact, 5 * MIB, 1e-7) == [0]
    # 300 MiB takes region 0 (512 MiB: under twice, 212 MiB remain, split by the threshold alone); 400 MiB takes
    # region 1 (512 MiB at 512 MiB: 112 MiB remain, kept whole)
    split = seq(("a", 300 * MIB), ("a", 400 * MIB))
    assert search_min_limit(split, BFCOptions(0)).limit_bytes == 912 * MIB
    # under fraction 0.25: int(0.25 x (848 MiB + 3)) = 212 MiB still splits it: from row 1; a byte more does not
    assert replayed_from(split, 848 * MIB + 3, 0.25) == [1]
    assert replayed_from(split, 848 * MIB + 4, 0.25) == [0]
    # AND with garbage collection, the 128 MiB rule's record has no unlimited replay of its own: it borrows the one
    # without (unlimited, no extension fails: the same replay), once: asked again, it proves nothing more
    assert replayed_from(kept, 5_242_890, 0.1, gc=True) == [2]
    base = bfc._limits(kept, BFCOptions(0, True, True))
    proofs = list(base.proven)
    assert replayed_from(kept, 5_242_890 + 256, 0.1, gc=True) == [2] and base.proven == proofs


def steps_of_twenty(count: int, changed: dict[int, int] | None = None, drop_last: int = 0) -> Requests:
    """``count`` steps of 40 events: 20 allocations of 1 to 20 KiB, each freed at once; in step s (a key of
    ``changed``) allocation ``changed[s]`` asks for 256 bytes more; the last ``drop_last`` events left out."""
    events: list[tuple] = []
    for step in range(count):
        for j in range(20):
            events.append(("a", (j + 1) * KIB + (256 if (changed or {}).get(step) == j else 0)))
            events.append(("f", len(events) - 1))
    return seq(*events[:len(events) - drop_last])


def test_a_period_of_exactly_the_shortest_looked_for_is_found_and_one_a_row_shorter_is_not(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN 12 steps of 40 events that repeat exactly
    requests = steps_of_twenty(12)
    # WHEN periods from 40 rows up are looked for THEN the period is 40 rows, and nothing breaks it
    monkeypatch.setattr(bfc, "_MIN_PERIOD_ROWS", 40)
    found = bfc._period(requests)
    assert found is not None and (found.rows, found.breaks.tolist()) == (40, [])
    # WHEN from 41 rows up THEN two steps (80 rows) are the period
    monkeypatch.setattr(bfc, "_MIN_PERIOD_ROWS", 41)
    found = bfc._period(seq_copy(requests))
    assert found is not None and (found.rows, found.breaks.tolist()) == (80, [])


def test_a_period_needs_four_periods_of_events_equal_to_the_one_before(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN periods from 32 rows up looked for, and 5 steps of 40 events (the last anchor's window ends the sequence)
    monkeypatch.setattr(bfc, "_MIN_PERIOD_ROWS", 32)
    # THEN 160 events each equal the one a period before (4 periods): the period is kept
    found = bfc._period(steps_of_twenty(5))
    assert found is not None and (found.rows, found.breaks.tolist()) == (40, [])
    # AND without the last event (the last free), 159 are: not enough, no period
    assert bfc._period(steps_of_twenty(5, drop_last=1)) is None


def test_a_period_is_kept_where_the_longest_stretch_between_breaks_is_exactly_three_periods(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN 24 steps of 40 events, periods from 32 rows up looked for; every third step from step 3 has its first
    # allocation 256 bytes larger: the rows that break the repeat are that row (40 s) and the same a step later
    monkeypatch.setattr(bfc, "_MIN_PERIOD_ROWS", 32)
    found = bfc._period(steps_of_twenty(24, {step: 0 for step in range(3, 24, 3)}))
    # THEN rows 0 to 119 repeat, three periods before the first break (row 120); the other stretches are 40 and 80
    # rows: the period is kept, with its breaks
    assert found is not None and found.rows == 40
    assert found.breaks.tolist() == [row for step in range(3, 24, 3) for row in (40 * step, 40 * step + 40)]
    # AND where every third step from step 2 has its last allocation larger, the longest stretch is the first, rows
    # 0 to 117 (the first break is row 80 + 38): two rows short of three periods, no period
    assert bfc._period(steps_of_twenty(24, {step: 19 for step in range(2, 24, 3)})) is None


def runs_of_blocks(steps: int, x_blocks: int, tail_blocks: int) -> Requests:
    """``steps`` steps of ``x_blocks`` blocks X and one block Y (a period of 16 (x_blocks + 1) rows), then
    ``tail_blocks`` blocks X: a block is 8 allocations, each freed at once (16 events), of 1 to 8 KiB in X and 9 to
    16 KiB in Y."""
    events: list[tuple] = []

    def block(first_kib: int) -> None:
        for size in range(first_kib, first_kib + 8):
            events.append(("a", size * KIB))
            events.append(("f", len(events) - 1))

    for _ in range(steps):
        for _ in range(x_blocks):
            block(1)
        block(9)
    for _ in range(tail_blocks):
        block(1)
    return seq(*events)


def test_the_period_is_a_distance_at_which_the_windows_at_every_anchor_recur(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN periods from 16 rows up looked for, and runs of nine blocks X between blocks Y (a period of 160 rows):
    # a window of 16 events within a run of X recurs 16, 32, ... rows earlier, up to the Y before it; each anchor's
    # window rules out other distances, and 160 recurs at all four
    monkeypatch.setattr(bfc, "_MIN_PERIOD_ROWS", 16)
    # WHEN 20 steps (3,200 rows): the anchors' windows recur together at 32, 48, 64, 96, 112, 128, 144 and 160 rows
    # (160 the eighth of the distances scored; the first anchor's alone also at 80)
    # THEN the period is 160 rows (every event equal to the one a period before), with nothing breaking it
    found = bfc._period(runs_of_blocks(20, 9, 0))
    assert found is not None and (found.rows, found.breaks.tolist()) == (160, [])
    # WHEN 16 steps and nine blocks X more, the last window (the ninth X of a run) recurs at 16 to 128 rows, and
    # the anchors' windows together only at multiples of 160 THEN the period is 160 rows
    found = bfc._period(runs_of_blocks(16, 9, 9))
    assert found is not None and (found.rows, found.breaks.tolist()) == (160, [])


def test_only_the_eight_nearest_distances_at_which_the_anchors_recur_are_scored(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN periods from 16 rows up looked for, 13 steps of twelve blocks X and one Y (a period of 208 rows) and two
    # blocks X: the anchors' windows recur together at 16, 32, 80, 96, 112, 128, 144, 192 and then 208 rows
    monkeypatch.setattr(bfc, "_MIN_PERIOD_ROWS", 16)
    found = bfc._period(runs_of_blocks(13, 12, 2))
    # THEN 208 is not scored: of the eight nearest, 16 rows (within the runs of X) has the most events equal to the
    # one a period before; it is kept, broken where a Y meets an X
    assert found is not None and found.rows == 16


def test_windows_that_differ_only_in_their_first_event_by_16_gib_are_told_apart(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN periods from 16 rows up looked for, and 5 steps of four blocks of 8 allocations of 1 to 8 KiB, each freed
    # at once, where the fourth block's first allocation is 16 GiB larger (a period of 64 rows): a window of 16
    # events that starts there differs from the one 16 rows before in its first event alone, by 2**34 (a hash
    # whose multiplier is 4 x an odd number, raised to the 15th power, would lose those bits)
    monkeypatch.setattr(bfc, "_MIN_PERIOD_ROWS", 16)
    events: list[tuple] = []
    for _ in range(5):
        for block in range(4):
            for j in range(8):
                events.append(("a", (j + 1) * KIB + (16 << 30 if block == 3 and j == 0 else 0)))
                events.append(("f", len(events) - 1))
    found = bfc._period(seq(*events))
    # THEN the period is 64 rows (not 16, under which the larger allocation and the one a block after it differ)
    assert found is not None and (found.rows, found.breaks.tolist()) == (64, [])


def test_a_scan_to_the_byte_steps_from_a_proof_that_ends_at_a_regions_end_to_that_end_worked_by_hand(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN FOUR_REGIONS (regions end at 2, 6, 14 and 30 MiB; 9 MiB + 1 KiB live at most), the unlimited replay's
    # states kept from 10 MiB (before rows 3 and 5), and the outcome under 12 MiB: replayed from row 3 (region 2 cut
    # to 6 MiB holds 5 MiB whole; 9 MiB then finds no room), proving 11 MiB (region 2 holds 5 MiB from there) up to
    # the end of region 2 less a byte (the limits that cut it)
    made = replays_made(monkeypatch)
    requests = seq(*FOUR_REGIONS)
    bfc._limits(requests, BFCOptions(0)).unlimited(10 * MIB)
    assert not outcome(requests, BFCOptions(12 * MIB)).fits
    made.clear()
    # WHEN the smallest limit is found to the byte, from the lower bound up
    # THEN 23 MiB (region 3 cut to 9 MiB), from three replays: 9 MiB + 1 KiB (below the states kept: from the first
    # request; region 2 cut to 3 MiB + 1 KiB, 5 MiB fails, proving up to 11 MiB less a byte); 11 MiB to 14 MiB less
    # a byte proven; 14 MiB, region 2 whole, cuts region 3 (to nothing: from row 5, proving up to 23 MiB less a
    # byte); 23 MiB from row 5
    assert min_limit(requests, BFCOptions(0), granularity=1) == 23 * MIB
    assert [(limit, row) for limit, row, _ in made] == [(9 * MIB + KIB, 0), (14 * MIB, 5), (23 * MIB, 5)]


def test_garbage_collections_record_takes_the_fits_proven_without_it_with_states_of_its_own_kept_higher(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN 1 KiB and 3 MiB (growth: regions of 2 and 4 MiB, the largest pool 6 MiB): searched with garbage collection
    # to 64 MiB first (its own unlimited replay, the states kept from 64 MiB), then without it to 1 MiB (5 MiB: region
    # 1 cut to 3 MiB; its own unlimited replay, kept from 4 MiB: the one with collection keeps none that low)
    made = replays_made(monkeypatch)
    requests = seq(("a", KIB), ("a", 3 * MIB))
    assert search_min_limit(requests, BFCOptions(0, True, True), 64 * MIB).limit_bytes == 64 * MIB
    assert search_min_limit(requests, BFCOptions(0, True, False), MIB).limit_bytes == 5 * MIB
    # WHEN without collection, the outcome above every region off the 256-byte grid (6 MiB + 100), and a fraction's
    # (0.1) above every region where it splits as the 128 MiB rule does (16 MiB: int(0.1 x 16 MiB) > 1 MiB, the
    # remainder the 3 MiB request left whole): no replay, each the unlimited outcome, remembered and proven
    made.clear()
    assert outcome(requests, BFCOptions(6 * MIB + 100, True, False)).fits
    assert outcome(requests, BFCOptions(16 * MIB, True, False, 0.1)).fits
    assert made == []
    # THEN with collection, those limits (and 20 MiB, alike under the fraction) fit without a replay: a fit without
    # collection is the fit with it (its own states, kept from 64 MiB, do not reach them)
    assert fits(requests, BFCOptions(6 * MIB + 100, True, True))
    assert fits(requests, BFCOptions(20 * MIB, True, True, 0.1))
    assert made == []


def test_a_hinted_search_tries_the_hint_and_the_limit_below_before_bisecting_and_probes_above_the_answer() -> None:
    # GIVEN one region of the limit (no growth): twenty 1 MiB blocks, every other one freed (1 MiB holes, the last
    # block held), then five of 2 MiB, which no hole holds: 20 MiB alive at most, 30 MiB needed
    requests = seq(*[("a", MIB)] * 20, *[("f", row) for row in range(0, 20, 2)], *[("a", 2 * MIB)] * 5)
    # WHEN the smallest limit is searched with a hint of 31 MiB (a similar sequence's answer)
    search = search_min_limit(requests, BFCOptions(0, allow_growth=False), hint=31 * MIB)
    # THEN the answer is 30 MiB, and the limits were tried as the search says: galloping up from the lower bound
    # (20 MiB) until 34 MiB fits, then the hint (fits) and the limit below it (fits: no bracket), bisection between
    # 26 and 31 (28 and 29 fail, 30 known), every limit below not yet tried (each fails), and the extra probes above
    # the answer: evenly spaced up to the largest limit that fitted, 34 MiB (31 known, 32)
    assert search.limit_bytes == 30 * MIB
    hinted = [(20, False), (22, False), (26, False), (34, True), (31, True), (30, True), (28, False), (29, False),
              (21, False), (23, False), (24, False), (25, False), (27, False), (32, True)]
    assert [(limit // MIB, ok) for limit, ok in search.tried] == hinted
    assert search.monotone
    # AND the same from the state after its first 20 rows, shared (each limit asked once: the probe at 31 MiB is known)
    shared = bfc.SharedStart(seq_copy(requests), BFCOptions(0, allow_growth=False), 20)
    again = search_min_limit(seq_copy(requests), BFCOptions(0, allow_growth=False), hint=31 * MIB, shared=shared)
    assert [(limit // MIB, ok) for limit, ok in again.tried] == hinted
    # AND with no budget below the boundary (the band's searches) and hints of 1, 31 and 33 MiB: the one under the lower
    # bound and the one above a hint that fitted are not asked; 31 and 30 fit, bisection from the lower bound to 30
    band = search_min_limit(seq_copy(requests), BFCOptions(0, allow_growth=False), hint=[MIB, 31 * MIB, 33 * MIB],
                            budget_events=0)
    assert band.limit_bytes == 30 * MIB
    assert [(limit // MIB, ok) for limit, ok in band.tried] == [
        (31, True), (30, True), (24, False), (27, False), (28, False), (29, False)]
    # AND without the hint: galloping, bisection (30 fits), the scan below from the lower bound (21 and 24 MiB the only
    # limits not tried before it nor proven by a replay: each limit is entered once), and the two probes above: 31 and
    # 32 MiB, evenly spaced below the 34 that fitted
    plain = search_min_limit(seq_copy(requests), BFCOptions(0, allow_growth=False))
    assert plain.limit_bytes == 30 * MIB
    assert [(limit // MIB, ok) for limit, ok in plain.tried] == [
        (20, False), (22, False), (26, False), (34, True), (30, True), (28, False), (29, False), (21, False),
        (24, False), (31, True), (32, True)]


def test_a_search_to_a_coarser_granularity_after_a_finer_one_replays_nothing() -> None:
    # GIVEN 1 MiB then 3 MiB with growth (5 MiB fits, 4 does not; the unlimited pool is 6 MiB), searched to 256 B: its
    # replays prove every limit from above 2 MiB to 6 MiB, and it keeps the unlimited replay's states for limits from
    # its lower bound (4 MiB) up
    requests = seq(("a", MIB), ("a", 3 * MIB))
    assert search_min_limit(requests, BFCOptions(0), granularity=256).limit_bytes == 5 * MIB
    # WHEN it is searched again to 1 MiB (a lower bound of 4 MiB too: no state below it is asked for)
    again = search_min_limit(requests, BFCOptions(0))
    # THEN the answer is the same, and no replay is made: the unlimited replay is not made again, and the limits its
    # bisection asks (4 and 5 MiB, between 3 and 6) are proven; no limit lies between the answer and 6 MiB to probe
    assert (again.limit_bytes, again.replays, again.replayed_events) == (5 * MIB, 0, 0)
    assert [(limit // MIB, ok) for limit, ok in again.tried] == [(6, True), (4, False), (5, True)]


def test_a_hint_that_brackets_the_boundary_leaves_no_bisection() -> None:
    # GIVEN 1 MiB then 3 MiB with growth (5 MiB fits, 4.75 does not; the unlimited pool is 6 MiB), searched to 256 KiB
    # from a hint of 5 MiB
    search = search_min_limit(seq(("a", MIB), ("a", 3 * MIB)), BFCOptions(0), granularity=256 * KIB, hint=5 * MIB)
    # THEN the unlimited pool (24 x 256 KiB) is known to fit, the hint (20) fits and the limit below it (19) does not:
    # the boundary, with no bisection; the scan from the lower bound (16: 4 MiB alive at once) up to it, each failing;
    # and the two probes, evenly spaced between the answer and 24: 21 and 22
    assert search.limit_bytes == 5 * MIB
    assert [(limit // (256 * KIB), ok) for limit, ok in search.tried] == [
        (24, True), (20, True), (19, False), (16, False), (17, False), (18, False), (21, True), (22, True)]
    # AND to 1 MiB with a budget of one event: the one limit below the boundary (4 MiB, the lower bound) is the
    # hint's own bracket, tried: no step, and the answer is called the smallest
    one_below = search_min_limit(seq(("a", MIB), ("a", 3 * MIB)), BFCOptions(0), hint=5 * MIB, budget_events=1)
    assert one_below.below_step == 1 and one_below.exhaustive and one_below.limit_bytes == 5 * MIB
    assert [(limit // MIB, ok) for limit, ok in one_below.tried] == [(6, True), (5, True), (4, False)]


def test_a_hint_above_the_unlimited_pool_leaves_that_pool_known_and_the_probes_ask_it_once() -> None:
    # GIVEN 1 MiB then 3 MiB with growth (regions of 2 MiB and of what the limit leaves, up to 4 MiB: 5 MiB fits, 4
    # does not; the unlimited pool is 6 MiB) and a hint of 8 MiB, with no budget below the boundary (the band's)
    search = search_min_limit(seq(("a", MIB), ("a", 3 * MIB)), BFCOptions(0), hint=8 * MIB, budget_events=0)
    # THEN the hint and the limit below it fit (no bracket), the unlimited pool's 6 MiB is known to fit, bisection
    # from the lower bound (3 MiB) tries 4 (fails) and 5 (fits); the two probes between the answer and the largest
    # limit that fitted (8 MiB) are 6 and 7 MiB, both known: each limit is in tried once
    assert search.limit_bytes == 5 * MIB
    assert [(limit // MIB, ok) for limit, ok in search.tried] == [(8, True), (7, True), (6, True), (4, False), (5, True)]


def test_a_served_search_tries_its_hints_and_probes_in_the_order_worked_by_hand() -> None:
    # GIVEN twenty 1 MiB blocks, every other one freed (1 MiB holes, the last block held), then two of 2 MiB, which no
    # hole holds: 20 MiB alive at most (the lower bound: 19 MiB is known not to fit), 24 MiB needed
    requests = seq(*[("a", MIB)] * 20, *[("f", row) for row in range(0, 20, 2)], *[("a", 2 * MIB)] * 2)
    options = BFCOptions(0, allow_growth=False)
    # WHEN the smallest limit is searched for plainly, with the first 20 rows shared, and with a hint of 26 MiB (the
    # limit the gallop up from the lower bound first finds fitting: the bracket's top)
    plain = search_min_limit(seq_copy(requests), options)
    shared = search_min_limit(seq_copy(requests), options, shared=bfc.SharedStart(seq_copy(requests), options, 20))
    hinted = search_min_limit(seq_copy(requests), options, hint=26 * MIB)
    # THEN each answers 24 MiB, each limit tried entered once: galloping 20, 22 (fail), 26 (fits); bisection 24 (fits),
    # 23 (fails); below it 21 (the plain scan asks 20 and 22 again: answered from what it tried); and the probe
    # above the answer, between it and the largest limit that fitted, 26: 25 MiB alone (the hint, known to fit, is
    # not asked again, nor the limit below it)
    served = [(20, False), (22, False), (26, True), (24, True), (23, False), (21, False), (25, True)]
    assert [(limit // MIB, ok) for limit, ok in shared.tried] == served
    assert [(limit // MIB, ok) for limit, ok in hinted.tried] == served
    assert [(limit // MIB, ok) for limit, ok in plain.tried] == served
    assert plain.limit_bytes == shared.limit_bytes == hinted.limit_bytes == 24 * MIB
    assert hinted.replays == hinted.replayed_events == 0  # (a served search does not count its replays: 0 says so)
    # AND with five blocks of 2 MiB (30 MiB needed), no budget below the boundary and hints of 19 MiB (the lower bound:
    # not asked), 31 MiB (fits, and 30 below it) and 30 MiB (the limit the last hint found fitting: asked again, it is
    # known, and the limit below it, 29 MiB, fails): the bracket 29-30 stands
    five = seq(*[("a", MIB)] * 20, *[("f", row) for row in range(0, 20, 2)], *[("a", 2 * MIB)] * 5)
    band = search_min_limit(seq_copy(five), options, hint=[19 * MIB, 31 * MIB, 30 * MIB], budget_events=0)
    assert [(limit // MIB, ok) for limit, ok in band.tried] == [(31, True), (30, True), (29, False)]
    # AND without the third hint, bisection from the lower bound (not asked) up to 30 MiB
    band = search_min_limit(seq_copy(five), options, hint=[19 * MIB, 31 * MIB], budget_events=0)
    assert [(limit // MIB, ok) for limit, ok in band.tried] == [
        (31, True), (30, True), (24, False), (27, False), (28, False), (29, False)]
    assert band.limit_bytes == 30 * MIB
    # AND with a budget, a first hint between the gallop's bounds (26 and 34 MiB) that fails, 28 MiB, raises the lower
    # bound: bisection from it (31 fits, 29 fails, 30 fits), the scan below (21, 23, 24, 25, 27), the probe 32
    hinted = search_min_limit(seq_copy(five), options, hint=28 * MIB)
    assert [(limit // MIB, ok) for limit, ok in hinted.tried] == [
        (20, False), (22, False), (26, False), (34, True), (28, False), (31, True), (29, False), (30, True),
        (21, False), (23, False), (24, False), (25, False), (27, False), (32, True)]
    # AND a hint that fails (25 MiB, after 31 MiB) raises the lower bound: bisection from it up to 30 MiB
    band = search_min_limit(seq_copy(five), options, hint=[31 * MIB, 25 * MIB], budget_events=0)
    assert [(limit // MIB, ok) for limit, ok in band.tried] == [
        (31, True), (30, True), (25, False), (27, False), (28, False), (29, False)]


def test_a_scan_below_the_boundary_may_spend_its_budget_exactly_and_stay_exhaustive() -> None:
    # GIVEN a random sequence of 400 events (one region of the limit) whose exhaustive scan below the boundary, to
    # 4 KiB, has replayed 2,317 events when it asks its last limit with more than one left (more than four replays'
    # worth, 1,600)
    requests = random_sequence(11, 400, 20)
    options = BFCOptions(0, allow_growth=False)
    exact = bfc.min_limit(seq_copy(requests), options, granularity=4 * KIB, budget_events=10**9)
    # THEN with a budget of 2,317 events the scan is within it to the end: exhaustive, the exact answer, 1,287 x 4 KiB
    spent = search_min_limit(seq_copy(requests), options, granularity=4 * KIB, budget_events=2317)
    assert spent.below_step == 1 and spent.limit_bytes == exact == 1287 * 4 * KIB
    # AND with one event less it is past its budget there, and steps over limits no replay proved: not exhaustive
    stepped = search_min_limit(seq_copy(requests), options, granularity=4 * KIB, budget_events=2316)
    assert stepped.below_step == 17 and not stepped.exhaustive and stepped.limit_bytes > exact
    # AND a served search (a hint) sets its step at once: the limits below the boundary not yet tried (for twenty
    # 1 MiB blocks every other freed then five of 2 MiB, 30 MiB needed: of the ten from 20 to 29 MiB, the gallop tried
    # 20, 22 and 26, bisection 28 and 29; five are left) times the events (35) over the budget, rounded up: with 175
    # events every limit, with 174 every other
    five = seq(*[("a", MIB)] * 20, *[("f", row) for row in range(0, 20, 2)], *[("a", 2 * MIB)] * 5)
    steps = [search_min_limit(seq_copy(five), options, hint=31 * MIB, budget_events=budget).below_step
             for budget in (175, 174)]
    assert steps == [1, 2]
    # AND with growth (the unlimited replay's pool, 30 MiB: regions of 2, 4, 8 and 16 MiB, bounds the bisection: 24,
    # 27, 28 and 29 MiB tried) and a budget of one event, the step is 210 (six limits left, 35 events each): the lower
    # bound's next limit alone
    grown = BFCOptions(0, allow_growth=True)
    one = search_min_limit(seq_copy(five), grown, hint=31 * MIB, budget_events=1)
    assert one.below_step == 210 and [(limit // MIB, ok) for limit, ok in one.tried] == [
        (30, True), (24, False), (27, False), (28, False), (29, False), (20, False)]
    # AND with no budget, none: the hint and the limit below it, 30 MiB (the unlimited pool, tried once), bisection
    none = search_min_limit(seq_copy(five), grown, hint=31 * MIB, budget_events=0)
    assert [(limit // MIB, ok) for limit, ok in none.tried] == [
        (31, True), (30, True), (24, False), (27, False), (28, False), (29, False)]


def test_a_served_stepped_scan_answers_the_first_fitting_limit_its_step_skipped() -> None:
    # GIVEN a random sequence of 120 events in quarters of a MiB, with growth, searched to 256 KiB: 174 x 256 KiB
    # alive at most; replayed one by one, 187 to 189 fit, 190 to 199 do not (the region the limit cuts), 200 does
    requests = random_sequence(39, 120, 22, round_sizes=True)
    options = BFCOptions(0, allow_growth=True)
    unit = 256 * KIB
    assert [units for units in range(174, 202) if fits(seq_copy(requests), BFCOptions(units * unit))] == [
        187, 188, 189, 200, 201]
    # WHEN a served search (a hint at the boundary) scans below it with a budget of 1,040 events: 26 limits below
    # (174 to 199) x 120 events over 1,040, a step of 3
    search = search_min_limit(seq_copy(requests), options, unit, hint=200 * unit, budget_events=1040)
    # THEN it asks 174, 177, ..., 186 (none fits), meets 189, and of the two the step skipped below it, both fitting,
    # the first, 187, is the answer (the plain scan's), asked once: 188 is not asked
    assert search.below_step == 3 and not search.exhaustive and not search.monotone
    assert [(limit // unit, ok) for limit, ok in search.tried] == [
        (256, True), (200, True), (199, False), *[(units, False) for units in range(174, 187, 3)], (189, True),
        (187, True), (210, True), (233, True)]
    assert search.limit_bytes == 187 * unit == bfc.min_limit(seq_copy(requests), options, unit)
    # AND with 240 events, a step of 13 (25 limits left x 120 / 240, rounded up): 174 fails, 187 fits, and the 12 the
    # step skipped below it are asked (all fail): every limit below the answer was asked, the search is exhaustive
    # (step 1); with 250 events a step of 12 passes over the band that fits (174, 186, 198 fail): 200, a step of 12
    wide = search_min_limit(seq_copy(requests), options, unit, hint=200 * unit, budget_events=240)
    assert [(limit // unit, ok) for limit, ok in wide.tried][3:17] == [
        (174, False), (187, True), *[(units, False) for units in range(175, 187)]]
    assert (wide.limit_bytes, wide.below_step, wide.exhaustive) == (187 * unit, 1, True)
    wider = search_min_limit(seq_copy(requests), options, unit, hint=200 * unit, budget_events=250)
    assert [(limit // unit, ok) for limit, ok in wider.tried][3:6] == [(174, False), (186, False), (198, False)]
    assert (wider.limit_bytes, wider.below_step, wider.exhaustive) == (200 * unit, 12, False)


def test_a_search_that_says_it_is_exhaustive_has_the_smallest_limit() -> None:
    # GIVEN random sequences of 300 events, without growth, searched to 4 KiB with budgets from one event (four
    # replays' worth) up, plainly and served (a hint), each against the smallest limit a scan from below finds
    said = {True: 0, False: 0}
    for seed in range(12):
        requests = random_sequence(700 + seed, 300, 20)
        options = BFCOptions(0, allow_growth=False)
        exact = bfc.min_limit(seq_copy(requests), options, 4 * KIB, budget_events=10**9)
        for budget in (1, 600, 1500):
            for hint in (None, 1 << 40):
                search = search_min_limit(seq_copy(requests), options, 4 * KIB, budget_events=budget, hint=hint)
                # THEN a search that calls itself exhaustive (no limit below its answer passed over unknown) has the
                # smallest limit; one that does not has a limit that fits, at least that one
                assert search.limit_bytes == exact if search.exhaustive else search.limit_bytes >= exact, (seed, budget)
                assert bfc.fits(seq_copy(requests), replace(options, limit_bytes=search.limit_bytes))
                said[search.exhaustive] += 1
    # AND both were said
    assert said[True] > 0 and said[False] > 0


def test_a_fitting_hint_one_limit_above_the_lower_bound_asks_that_limit() -> None:
    # GIVEN 1 MiB without growth (1 MiB alive at most: the lower bound, 0 MiB known not to fit) and a hint of 2 MiB
    # with no budget below the boundary (a band's search)
    search = search_min_limit(seq(("a", MIB)), BFCOptions(0, allow_growth=False), hint=2 * MIB, budget_events=0)
    # THEN 2 MiB fits, and so does 1 MiB, the limit below it (above the lower bound: asked): the answer is 1 MiB, not
    # the hint
    assert [(limit // MIB, ok) for limit, ok in search.tried] == [(2, True), (1, True)]
    assert search.limit_bytes == MIB


def test_the_unlimited_pool_one_limit_above_the_lower_bound_is_the_boundary_asked_once() -> None:
    # GIVEN 2 MiB with growth: the unlimited replay's pool is one region of 2 MiB, one limit above the lower bound
    # (1 MiB known not to fit: 2 MiB alive)
    for hint, shared in ((None, None), (64 * MIB, None), (None, bfc.SharedStart(seq(("a", 2 * MIB)), BFCOptions(0), 1))):
        # WHEN a search, plain or served (a hint, or the row shared with another sequence), looks for the smallest limit
        search = search_min_limit(seq(("a", 2 * MIB)), BFCOptions(0), hint=hint, shared=shared)
        # THEN the pool is the boundary, known to fit: nothing is left to ask (no limit between it and the bound)
        assert [(limit // MIB, ok) for limit, ok in search.tried] == [(2, True)] and search.limit_bytes == 2 * MIB


def test_a_served_search_steps_over_the_limits_below_not_yet_tried() -> None:
    # GIVEN without growth 2 MiB, 1 MiB, the first freed, then 3 MiB (4 MiB alive at most): under 4 MiB the free
    # chunks are the 2 MiB hole at 0 and 1 MiB at the end, under 5 MiB 2 MiB at the end, under 6 MiB 3 MiB: it fits
    requests = seq(("a", 2 * MIB), ("a", MIB), ("f", 0), ("a", 3 * MIB))
    options = BFCOptions(0, allow_growth=False)
    # WHEN a served search (a hint) has a budget of one event below the boundary
    search = search_min_limit(seq_copy(requests), options, hint=6 * MIB, budget_events=1)
    # THEN the gallop asked 4 and 6 MiB, bisection 5 MiB: every limit below the answer was tried, none is left to step
    # over: the search is exhaustive (a step from all the limits below, 2 x 4 events over 1, said it was not)
    assert [(limit // MIB, ok) for limit, ok in search.tried] == [(4, False), (6, True), (5, False)]
    assert (search.limit_bytes, search.below_step, search.exhaustive) == (6 * MIB, 1, True)
    # AND to 512 KiB one is left, 4.5 MiB (the gallop asked 4, 5 and 7, bisection 6 and 5.5): it is asked, no step
    half = search_min_limit(seq_copy(requests), options, 512 * KIB, hint=6 * MIB, budget_events=1)
    assert [(limit // KIB, ok) for limit, ok in half.tried][-3:] == [(5632, False), (4608, False), (6656, True)]
    assert (half.limit_bytes, half.below_step) == (6 * MIB, 1)
    # AND with two left (seed 5: 12 events, 12 MiB alive at most; the gallop asked 12, 14 and 18 MiB, bisection 16 and
    # 17: 13 and 15 are left), the step is theirs: 2 x 12 events over the budget, rounded up; with 24 events every
    # limit (both asked), with 23 every other (from 12: 12, 14 and 16, all tried, so none asked)
    five = random_sequence(5, 12, 22, round_sizes=True)
    for budget, step, asked in ((24, 1, [(13, False), (15, False)]), (23, 2, []), (1, 24, [])):
        stepped = search_min_limit(seq_copy(five), options, hint=64 * MIB, budget_events=budget)
        assert [(limit // MIB, ok) for limit, ok in stepped.tried] == [
            (12, False), (14, False), (18, True), (16, False), (17, True), *asked]
        assert (stepped.limit_bytes, stepped.below_step) == (17 * MIB, step)


def test_a_served_searchs_probes_above_the_unlimited_pool_fit_without_a_replay() -> None:
    # GIVEN 1 MiB, 3 MiB and 4 MiB, the first freed (growth: regions of 2, 4 and 8 MiB unlimited, a pool of 14 MiB;
    # 8 MiB alive at most), its first two rows shared, and a hint of 64 MiB with no budget below the boundary (a band's)
    source = seq(("a", MIB), ("a", 3 * MIB), ("a", 4 * MIB), ("f", 0))
    shared = bfc.SharedStart(seq_copy(source), BFCOptions(0), 2)
    search = search_min_limit(seq_copy(source), BFCOptions(0), hint=[64 * MIB], budget_events=0, shared=shared)
    # THEN the hint fits and so does 63 MiB; the unlimited replay's pool, 14 MiB, bounds the bisection from the lower
    # bound, 7 MiB: 10 fits, 8 and 9 do not; and the probes above the answer, 28 and 46 MiB, cut none of the unlimited
    # replay's regions: they fit, as it does
    assert [(limit // MIB, ok) for limit, ok in search.tried] == [
        (64, True), (63, True), (14, True), (10, True), (8, False), (9, False), (28, True), (46, True)]
    assert search.limit_bytes == 10 * MIB and search.monotone


def test_shared_rows_as_long_as_the_sequence_are_its_replays_start() -> None:
    # GIVEN 1 MiB, 3 MiB and 4 MiB, the first freed (growth: regions of 2 MiB, then what the limit leaves), shared whole
    source = seq(("a", MIB), ("a", 3 * MIB), ("a", 4 * MIB), ("f", 0))
    shared = bfc.SharedStart(source, BFCOptions(0), 4)
    asked: list[int] = []
    state_at = shared.at
    shared.at = lambda limit: asked.append(limit) or state_at(limit)  # type: ignore[method-assign]
    # WHEN the sequence itself is searched with them
    search = search_min_limit(seq_copy(source), BFCOptions(0), shared=shared)
    # THEN its replays start from the shared states (every limit that cuts a region asks for one), and the answer is
    # the one without them
    assert asked and search.limit_bytes == search_min_limit(seq_copy(source), BFCOptions(0)).limit_bytes


def test_fits_from_shared_rows_says_what_a_replay_from_the_first_request_says() -> None:
    # GIVEN 1 MiB, 3 MiB and 4 MiB, the first freed (growth: regions of 2 MiB, then what the limit leaves), and a
    # source that begins with the same two requests
    requests = seq(("a", MIB), ("a", 3 * MIB), ("a", 4 * MIB), ("f", 0))
    shared = bfc.SharedStart(seq(("a", MIB), ("a", 3 * MIB), ("f", 1)), BFCOptions(0), 2)
    # THEN from the shared state after two rows, each limit fits where a replay from the first request fits: not
    # under 3 MiB (the shared rows themselves run out), nor 9 MiB (the third region, what is left: 3 MiB, is too
    # small for 4 MiB); under 10 MiB it does (a third region of 4 MiB)
    for limit in (3 * MIB, 9 * MIB, 10 * MIB):
        assert fits(requests, BFCOptions(limit), shared=shared) == fits(seq_copy(requests), BFCOptions(limit)) == (
            limit == 10 * MIB), limit


def test_the_scan_from_below_reaches_the_largest_limit_and_past_its_budget_is_the_search(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a request of the largest limit the model holds: its smallest limit is that one
    assert bfc.min_limit(seq(("a", bfc.MAX_LIMIT_BYTES)), BFCOptions(0, allow_growth=False)) == bfc.MAX_LIMIT_BYTES
    # a random sequence of 400 events whose scan from below, to 4 KiB, spends more than four replays' worth of events
    # (the least budget: 1,600): past it, the answer is the search's, from the same budget
    requests = random_sequence(0, 400, 20)
    options = BFCOptions(0, allow_growth=False)
    searched: list[int] = []
    search = bfc.search_min_limit

    def recorded_search(*args: Any, **kwargs: Any) -> LimitSearch:
        found = search(*args, **kwargs)
        searched.append(found.limit_bytes)
        return found

    monkeypatch.setattr(bfc, "search_min_limit", recorded_search)
    assert bfc.min_limit(seq_copy(requests), options, granularity=4 * KIB, budget_events=1) == searched[0]
    assert len(searched) == 1
    # AND its budget is a bound the scan may reach: it has replayed 2,037 events when it asks its last limit, so with a
    # budget of 2,037 it is the scan's own answer, with 2,036 the search's
    for budget, handed_over in ((2037, 0), (2036, 1)):
        searched.clear()
        bfc.min_limit(seq_copy(requests), options, granularity=4 * KIB, budget_events=budget)
        assert len(searched) == handed_over, budget
    # AND the budget counts the scan's own events: a replay of the sequence before it (under 1 GiB, which fits: 400
    # events) does not spend it
    again, searched[:] = seq_copy(requests), []
    assert fits(again, replace(options, limit_bytes=1 << 30))
    bfc.min_limit(again, options, granularity=4 * KIB, budget_events=2037)
    assert not searched
    # AND the least budget is four replays' worth (1,600 events), no more: another sequence's scan asks its last
    # limit at 1,884 events, so with a budget of 1 it is handed over, with 1,884 it is not
    other = random_sequence(2, 400, 20)
    for budget, handed_over in ((1, 1), (1884, 0)):
        searched.clear()
        bfc.min_limit(seq_copy(other), options, granularity=4 * KIB, budget_events=budget)
        assert len(searched) == handed_over, budget
    # AND the least budget is four replays' worth, not three: twenty 1 MiB blocks, every other freed, then three of
    # 2 MiB (33 events; 26 MiB needed, one region of the limit): the scan replays 20 and 21 MiB (the first 2 MiB, row
    # 30, fails: 31 events each), 22 (the second fails: 32), 24 (the third: 33; 23 and 25 decide as 22 and 24), 127
    # events, before it asks 26 MiB: within 4 x 33 = 132, so with a budget of 1 the answer is the scan's own
    blocks = seq(*[("a", MIB)] * 20, *[("f", row) for row in range(0, 20, 2)], *[("a", 2 * MIB)] * 3)
    searched.clear()
    assert bfc.min_limit(blocks, options, budget_events=1) == 26 * MIB and not searched
    # AND a request beyond the largest limit: the scan has no limit to ask, and says no limit the model holds fits
    with pytest.raises(ValueError, match="no limit the model holds fits these requests"):
        bfc.min_limit(seq(("a", bfc.MAX_LIMIT_BYTES + 256)), options)


def test_options_refuse_a_limit_above_what_the_model_holds() -> None:
    assert BFCOptions(bfc.MAX_LIMIT_BYTES).limit_bytes == bfc.MAX_LIMIT_BYTES
    with pytest.raises(ValueError, match="the limit is above what the model holds"):
        BFCOptions(bfc.MAX_LIMIT_BYTES + 256)


def test_the_models_records_are_frozen_and_a_sequence_and_a_replay_are_keyed_by_identity() -> None:
    # a sequence keys the caches of what its replays proved (weakly, by identity): it must not change, nor be equal to
    # another; the map's chunks and a replay's record are values that do not change either
    requests = seq(("a", MIB))
    sim = simulate(requests, BFCOptions(10 * MIB))
    chunk = sim.chunks[0]
    said, search = outcome(requests, BFCOptions(10 * MIB)), search_min_limit(requests, BFCOptions(0))
    for record, name in ((requests, "op_names"), (chunk, "offset"), (sim, "fits"), (said, "fits"),
                         (search, "limit_bytes")):
        with pytest.raises(FrozenInstanceError):
            setattr(record, name, getattr(record, name))
    assert requests != seq_copy(requests) and len({requests, seq_copy(requests)}) == 2
    assert len({sim, simulate(requests, BFCOptions(10 * MIB))}) == 2 and hash(chunk) == hash(replace(chunk))


def test_a_granularity_of_0_is_refused() -> None:
    requests = seq(("a", MIB))
    for search in (bfc.min_limit, search_min_limit, lambda r, o, g: search_min_limit(r, o, g, hint=MIB)):
        with pytest.raises(ValueError, match="granularity must be positive"):
            search(requests, BFCOptions(0), 0)


def test_past_its_budget_the_scan_below_the_boundary_steps_and_still_ends_on_a_limit_that_fits() -> None:
    # GIVEN random sequences of 400 events (one region of the limit), searched to 4 KiB with a budget of one event
    # (so four replays' worth of events: 4 x 400)
    for seed in (7, 11, 20):
        requests = random_sequence(seed, 400, 20)
        options = BFCOptions(0, allow_growth=False)
        stepped = search_min_limit(requests, options, granularity=4 * KIB, budget_events=1)
        # THEN past the budget the scan tries every step-th limit, and its answer fits; where the smallest limit (the
        # plain scan from below, min_limit, without a budget) lies within the step below the first fitting limit it
        # meets, it is that one (seed 20: it meets 1,046 x 4 KiB, and the limits the step skipped below it that no
        # replay proved are asked from the lowest up: 1,029's replay proved up to 1,034 x 4 KiB, and 1,035 fits);
        # else one above it (seed 11, a step of 50). Where the step passed over no limit that a replay had not proven
        # (seeds 7 and 20), the search is exhaustive: its step is 1
        exact = bfc.min_limit(seq_copy(requests), options, granularity=4 * KIB, budget_events=10**9)
        assert stepped.below_step == (50 if seed == 11 else 1)
        assert bfc.fits(seq_copy(requests), replace(options, limit_bytes=stepped.limit_bytes))
        assert (stepped.limit_bytes == exact) if seed in (7, 20) else (stepped.limit_bytes > exact)
        if seed == 7:  # its step (21) from 1,984 x 4 KiB (whose replay proved up to 1,992) lands on 2,005, proven
            # with every limit from 1,993 to 2,029 by the replay of 1,994; the next limit past that is 2,030, the boundary
            assert [(limit // (4 * KIB), ok) for limit, ok in stepped.tried][-4:] == [
                (1984, False), (2005, False), (2054, True), (2078, True)]
            limits = bfc._limits(requests, options)
            low, high, _ = limits.span(2005 * 4 * KIB)
            assert (-(-low // (4 * KIB)), high // (4 * KIB), limits.span(1984 * 4 * KIB)[1] // (4 * KIB)) == (
                1993, 2029, 1992)
        if seed == 20:  # the last step's limits, the first fit met, then the limits skipped that no replay proved
            units = [(limit // (4 * KIB), ok) for limit, ok in stepped.tried]
            first_fit = units.index((1046, True), units.index((871, False)))
            assert units[first_fit - 3:first_fit + 2] == [
                (994, False), (1012, False), (1029, False), (1046, True), (1035, True)]
            # (the step passes over no limit unproven: 994's replay proved up to 1,011; 1,012's up to 1,015, and
            # 1,029's from 1,016 up to 1,034)
            limits = bfc._limits(requests, options)
            spans = [limits.span(units * 4 * KIB) for units in (994, 1012, 1029)]
            assert [high // (4 * KIB) for _, high, _ in spans] == [1011, 1015, 1034]
            assert -(-spans[2][0] // (4 * KIB)) == 1016 and not spans[2][2]
        # AND with the default budget it is exhaustive and exact
        assert search_min_limit(seq_copy(requests), options, granularity=4 * KIB).limit_bytes == exact
    # AND past the budget the step is the limits left's events over it, rounded up: seed 11 to 64 KiB is past its
    # budget at 80 x 64 KiB with five left below the boundary, 85 (5 x 400 events over 1,600: a step of 2); it passes
    # over 81, which no replay proved, and 81 fits: the answer, 85, is not the smallest, and the search says so
    requests = random_sequence(11, 400, 20)
    stepped = search_min_limit(requests, options, granularity=64 * KIB, budget_events=1)
    units = [(limit // (64 * KIB), ok) for limit, ok in stepped.tried]
    assert units[-5:] == [(77, False), (80, False), (82, False), (92, True), (99, True)] and 81 not in dict(units)
    assert (stepped.below_step, stepped.exhaustive, stepped.limit_bytes) == (2, False, 85 * 64 * KIB)
    assert bfc.fits(seq_copy(requests), replace(options, limit_bytes=81 * 64 * KIB))
    assert bfc.min_limit(seq_copy(requests), options, granularity=64 * KIB, budget_events=10**9) == 81 * 64 * KIB
    # AND a limit passed over is one no replay proved, whether or not it fits: seed 75 (300 events) to 64 KiB steps by
    # 4 past its budget at 92 x 64 KiB, whose replay proved 92 and 93; the step lands on 96, proven with 95 to 107 by
    # bisection's replay of 97: 94 alone was passed over. The answer, 108, is the smallest (94 does not fit), but the
    # search cannot know it: a step of 4, not exhaustive
    requests = random_sequence(75, 300, 20)
    stepped = search_min_limit(requests, options, granularity=64 * KIB, budget_events=1)
    units = [(limit // (64 * KIB), ok) for limit, ok in stepped.tried]
    assert units[-6:] == [(88, False), (91, False), (92, False), (96, False), (111, True), (114, True)]
    assert 94 not in dict(units)
    assert (stepped.below_step, stepped.exhaustive, stepped.limit_bytes) == (4, False, 108 * 64 * KIB)
    limits = bfc._limits(requests, options)
    assert limits._lookup(94 * 64 * KIB) is None and limits.span(92 * 64 * KIB)[1] // (64 * KIB) == 93
    assert not bfc.fits(seq_copy(requests), replace(options, limit_bytes=94 * 64 * KIB))
    # AND where the budget runs out with one limit left below the boundary, it is asked and none is skipped: seed 28
    # to 256 KiB scans 57 to 67 x 256 KiB (its 11 replays: 3,527 events), and 68, the one left below 69, is known
    requests = random_sequence(28, 400, 20)
    last = search_min_limit(requests, options, granularity=256 * KIB, budget_events=1)
    assert (last.below_step, last.exhaustive, last.limit_bytes, last.replays) == (1, True, 69 * 256 * KIB, 11)
    assert last.limit_bytes == bfc.min_limit(seq_copy(requests), options, granularity=256 * KIB, budget_events=10**9)


def test_a_search_ignores_shared_rows_longer_than_its_sequence_and_a_plain_one_beyond_every_limit_says_so() -> None:
    # GIVEN 1 MiB then 3 MiB (growth: a region of 2 MiB, then one of what the limit leaves: 4 MiB fails, 5 MiB fits),
    # and shared rows of a source that begins alike but runs on for four rows, holding 4 MiB more (which needs more)
    source = seq(("a", MIB), ("a", 3 * MIB), ("a", 4 * MIB), ("f", 0))
    shared = bfc.SharedStart(source, BFCOptions(0), 4)
    # THEN the search of the two rows starts from their own first request: 5 MiB, as without the shared rows
    assert search_min_limit(seq(("a", MIB), ("a", 3 * MIB)), BFCOptions(0), shared=shared).limit_bytes == 5 * MIB
    # AND a request beyond the largest limit: no limit the model holds fits, said as such (without growth the search
    # gallops up to the largest limit and stops there)
    beyond = seq(("a", bfc.MAX_LIMIT_BYTES + 256))
    for growth in (True, False):
        for hint in (None, MIB):  # (a hint: the search the band makes)
            with pytest.raises(ValueError, match="no limit the model holds fits these requests"):
                search_min_limit(beyond, BFCOptions(0, allow_growth=growth), hint=hint)


def test_without_growth_a_search_with_collection_and_one_without_share_their_replays() -> None:
    # GIVEN twenty 1 MiB blocks, every other one freed, then five of 2 MiB (one region of the limit: 30 MiB needed)
    requests = seq(*[("a", MIB)] * 20, *[("f", row) for row in range(0, 20, 2)], *[("a", 2 * MIB)] * 5)
    # WHEN its smallest limit is searched with garbage collection, then without
    collecting = search_min_limit(requests, BFCOptions(0, allow_growth=False, garbage_collection=True))
    plain = search_min_limit(requests, BFCOptions(0, allow_growth=False))
    # THEN both answer 30 MiB, and the second replays nothing: without growth the one region is the whole limit, so
    # collecting changes nothing (a request that finds no chunk finds the region in use in part, or wholly free and
    # still too small), and what the first search's replays proved answers every limit the second asks
    assert collecting.limit_bytes == plain.limit_bytes == 30 * MIB
    assert collecting.replays > 0 and plain.replays == 0 and plain.replayed_events == 0


def test_what_is_known_without_a_replay_makes_none() -> None:
    # GIVEN 3 MiB twice, held (growth: a region of 4 MiB, then one of what the limit leaves): 6 MiB alive at once
    requests = seq(("a", 3 * MIB), ("a", 3 * MIB))
    plain = bfc._limits(requests, BFCOptions(0))
    # THEN a limit below the bytes alive at once fails without a replay
    assert not bfc.fits(requests, BFCOptions(6 * MIB - 256)) and plain.replays == 0
    # AND a failure replayed with garbage collection (6 MiB: the second region would be 2 MiB, and the first is in use:
    # nothing to collect) answers the same limit without it: the replay without collection is the same up to the
    # extension that fails, and fails there
    assert not bfc.fits(requests, BFCOptions(6 * MIB, garbage_collection=True))
    assert not bfc.fits(requests, BFCOptions(6 * MIB)) and plain.replays == 0
    # AND proofs that touch are chained into one span (a scan below a boundary skips them all at once)
    plain.proven.extend([(8 * MIB, 9 * MIB - 256, True), (9 * MIB, 12 * MIB, True), (12 * MIB + 512, 13 * MIB, True)])
    assert plain.span(8 * MIB) == (8 * MIB, 12 * MIB, True)
    # AND the unlimited replay (regions of 4 MiB for each 3 MiB: a pool of 8 MiB) answers every limit from its largest
    # pool up without another replay: every region whole, the same replay
    assert plain.unlimited(6 * MIB) == 8 * MIB and plain.replays == 1
    assert all(plain.fits(limit) for limit in (8 * MIB, 100 * MIB, bfc.MAX_LIMIT_BYTES)) and plain.replays == 1


def test_the_scan_from_below_starts_at_the_first_limit_above_nothing() -> None:
    # a sequence that needs no memory (one 0-byte request): the smallest limit the scan and the search give is one
    # granularity (a limit of 0 fits nothing: see test_fit), and 3 MiB in one region needs exactly 3 MiB
    assert bfc.min_limit(seq(("a", 0)), BFCOptions(0)) == bfc.search_min_limit(seq(("a", 0)), BFCOptions(0)).limit_bytes
    assert bfc.min_limit(seq(("a", 0)), BFCOptions(0)) == MIB
    assert bfc.min_limit(seq(("a", 3 * MIB)), BFCOptions(0, allow_growth=False)) == 3 * MIB


# -- periods, and the edges of a replay's proof, by hand --------------------------------------------------------


def test_events_that_touch_no_chunk_repeat_as_they_are(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN periods from 32 rows up looked for, and 6 steps of 41 events: a 0-byte request (it touches no chunk),
    # then 20 allocations of 1 to 20 KiB, each freed at once
    monkeypatch.setattr(bfc, "_MIN_PERIOD_ROWS", 32)
    events: list[tuple] = []
    for _ in range(6):
        events.append(("a", 0))
        for j in range(20):
            events.append(("a", (j + 1) * KIB))
            events.append(("f", len(events) - 1))
    # WHEN its period is looked for
    found = bfc._period(seq(*events))
    # THEN a 0-byte request equals the 0-byte request a period before (not a break): every one of the 246 - 41 = 205
    # events from row 41 on equals the one 41 rows before (>= 4 x 41), and nothing breaks the repeat (were each 0-byte
    # request a break, rows 41, 82, ..., 205 would leave no stretch of three periods: no period)
    assert found is not None and (found.rows, found.breaks.tolist()) == (41, [])
    # AND the rows that take a chunk are the 20 allocations of each step: not the 0-byte request (nor the frees)
    assert found.allocates.tolist() == ([False] + [True, False] * 20) * 6


def test_of_distances_where_as_many_events_equal_the_one_before_the_shortest_is_the_period(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN periods from 32 rows up looked for, and 24 steps of 40 events (20 allocations of 1 to 20 KiB, each freed
    # at once), where steps 3, 5 and 7 ask for 256 bytes more in their first ten allocations: the anchors' windows
    # (rows 528, 672, 816 and 931, all in the steps from 8 on) recur at 40 and 80 rows (and further back)
    monkeypatch.setattr(bfc, "_MIN_PERIOD_ROWS", 32)
    events: list[tuple] = []
    for step in range(24):
        for j in range(20):
            events.append(("a", (j + 1) * KIB + (256 if step in (3, 5, 7) and j < 10 else 0)))
            events.append(("f", len(events) - 1))
    # WHEN its period is looked for
    found = bfc._period(seq(*events))
    # THEN 40 rows and 80 rows tie: under 40 rows the six steps 3 to 8 differ from the step before (in ten rows each),
    # 920 - 60 = 860 events equal the one a period before; under 80 rows steps 3 and 9 differ from the step two
    # before, 880 - 20 = 860 (120 rows: 840 - 60). The shorter is the period, broken in those ten rows of steps 3 to 8
    # (the last at 8 x 40 + 18 = 338: rows 338 to 960 repeat, more than three periods)
    assert found is not None and found.rows == 40
    assert found.breaks.tolist() == [40 * step + 2 * j for step in range(3, 9) for j in range(10)]


def test_the_limits_kept_are_where_a_linear_test_of_the_limit_holds_as_it_does_here_worked_by_hand() -> None:
    # _keep narrows [low, high] (offsets d of the limit) to where value + slope * d >= 0 is what it is at d = 0
    # 5 + 2d >= 0 holds at d = 0, and down to d = -2 (1; at -3: -1)
    assert bfc._keep(5, 2, -100, 100) == (-2, 100)
    # -5 + 2d >= 0 fails at d = 0, and up to d = 2 (-1; at 3: 1)
    assert bfc._keep(-5, 2, -100, 100) == (-100, 2)
    # 5 - 2d >= 0 holds at d = 0, and up to d = 2 (1; at 3: -1)
    assert bfc._keep(5, -2, -100, 100) == (-100, 2)
    # -5 - 2d >= 0 fails at d = 0, and down to d = -2 (-1; at -3: 1)
    assert bfc._keep(-5, -2, -100, 100) == (-2, 100)
    # 0 + d >= 0 holds at d = 0 (exactly), and from there up; 0 - d >= 0 from there down
    assert bfc._keep(0, 1, -100, 100) == (0, 100)
    assert bfc._keep(0, -1, -100, 100) == (-100, 0)
    # the bounds given stay where they are narrower; a test that does not move with the limit keeps them all
    assert bfc._keep(5, 2, 0, 1) == (0, 1) and bfc._keep(-5, 0, -100, 100) == (-100, 100)


@pytest.mark.parametrize(("fraction", "remainder", "edge"), [
    # a fraction of 1: the threshold is the limit itself; with nothing to spare only the limit 0 keeps it at 0
    (1.0, 0, 0),
    # a tiny fraction: the edge is 5 / 1e-12 less a byte (int(1e-12 x 6e12) is 6); found in a step or two, not in
    # the 1e12 steps that walk the limits one by one from 4e12 or to below 5e12 would take
    (1e-12, 5, 5_999_999_999_999),
])
def test_the_fraction_edge_at_the_extremes_of_the_fraction(fraction: float, remainder: int, edge: int) -> None:
    # the largest limit L with int(fraction * L) <= remainder
    assert bfc._fraction_edge(fraction, remainder) == edge
    assert int(fraction * edge) <= remainder < int(fraction * (edge + 1))


def test_frees_repeat_only_at_the_same_distance_back_and_only_frees_make_a_free_row(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN periods from 32 rows up looked for, and 8 steps of 40 events: allocations of 1, 2 and 3 KiB, their three
    # frees in that order (each 3 rows back), then 17 allocations of 4 to 20 KiB each freed at once; in step 2 (rows
    # 80 to 119) the first two frees swap (row 83 frees row 81, 2 rows back; row 84 frees row 80, 4 rows back); and
    # a last allocation of 1 KiB at row 320, never freed (as row 280 a period before)
    monkeypatch.setattr(bfc, "_MIN_PERIOD_ROWS", 32)
    events: list[tuple] = []
    for step in range(8):
        b = 40 * step
        events += [("a", KIB), ("a", 2 * KIB), ("a", 3 * KIB)]
        events += [("f", b + 1), ("f", b), ("f", b + 2)] if step == 2 else [("f", b), ("f", b + 1), ("f", b + 2)]
        for j in range(17):
            events += [("a", (j + 4) * KIB), ("f", b + 6 + 2 * j)]
    events.append(("a", KIB))
    # WHEN its period is looked for
    found = bfc._period(seq(*events))
    # THEN 40 rows: the anchors' windows (rows 176, 224, 272, 305) recur 40, 80, 120 and 160 rows back; under 40 rows
    # all 281 events from row 40 on but 4 equal the one a period before (80: 241 less 4). A free equals the one a
    # period before only at the same distance back: rows 83 and 84 (2 and 4 back, against 3) break the repeat with
    # step 1, and rows 123 and 124 (3 back, against 2 and 4) with step 2; row 85 (3 back, as row 45) does not
    assert found is not None and found.rows == 40
    assert found.breaks.tolist() == [83, 84, 123, 124]
    # AND per allocation the row that frees it; 321 (the length) for a row never freed, here the last allocation,
    # and for every free (an allocation's `frees` is -1: it frees nothing, and row -1 is not a row)
    free_row = [321] * 321
    for step in range(8):
        b = 40 * step
        free_row[b], free_row[b + 1] = (b + 4, b + 3) if step == 2 else (b + 3, b + 4)
        free_row[b + 2] = b + 5
        for j in range(17):
            free_row[b + 6 + 2 * j] = b + 7 + 2 * j
    assert found.free_row.tolist() == free_row


def test_a_free_of_an_allocation_outside_the_sequence_frees_no_row_of_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN periods from 32 rows up looked for, and 8 steps of 39 events: 1 KiB and its free, a free of an allocation
    # made before the sequence (its `frees` is -1), then 18 allocations of 2 to 19 KiB each freed at once; and a last
    # allocation of 1 KiB at row 312, never freed (as row 273 a period before)
    monkeypatch.setattr(bfc, "_MIN_PERIOD_ROWS", 32)
    is_alloc: list[bool] = []
    frees: list[int] = []
    asked: list[int] = []

    def event(allocates: bool, nbytes: int = 0, freed: int = -1) -> int:
        is_alloc.append(allocates)
        asked.append(nbytes)
        frees.append(freed)
        return len(is_alloc) - 1

    for _ in range(8):
        event(False, freed=event(True, KIB))
        event(False)
        for j in range(2, 20):
            event(False, freed=event(True, j * KIB))
    event(True, KIB)
    n = len(is_alloc)
    requests = Requests(np.array(is_alloc), np.array(asked), np.array(frees), np.full(n, -1, dtype=np.int32),
                        np.arange(n), ())
    # WHEN its period is looked for
    found = bfc._period(requests)
    # THEN 39 rows, nothing breaking it; per allocation the row that frees it, and 313 (the length) for the last one:
    # the free of an allocation outside the sequence frees no row of it (taken for a free of row -1, the last row, it
    # would have it freed at row 2)
    assert found is not None and (found.rows, found.breaks.tolist()) == (39, [])
    free_row = [n] * n
    for step in range(8):
        b = 39 * step
        free_row[b] = b + 1
        for k in range(18):
            free_row[b + 3 + 2 * k] = b + 4 + 2 * k
    assert found.free_row.tolist() == free_row


@pytest.mark.parametrize(("later", "nbytes"), [(129, 256), (257, 256), (171, 512)])
def test_a_free_of_a_later_row_is_not_the_allocation_of_as_many_bytes(monkeypatch: pytest.MonkeyPatch, later: int,
                                                                     nbytes: int) -> None:
    # GIVEN periods from 32 rows up looked for, and 10 steps of 40 events: an allocation of nbytes and its free, then
    # 19 allocations of 1 to 19 KiB each freed at once; but in step 2, row 80 is a free of a row `later` rows later: a
    # free is coded by how far back it names, -2 x (80 - (80 + later)) - 1 = 2 x later - 1, odd, never an
    # allocation's rounded bytes (so not the nbytes of row 40 a period before; coded as later - 1 or 3 x later - 1,
    # 129 rows would be neither, but 257 rows later is 256 bytes for the one, 171 rows later 512 bytes for the other)
    monkeypatch.setattr(bfc, "_MIN_PERIOD_ROWS", 32)
    events: list[tuple] = []
    for step in range(10):
        b = 40 * step
        events += [("f", b + later) if step == 2 else ("a", nbytes), ("f", b)]
        for j in range(19):
            events += [("a", (j + 1) * KIB), ("f", b + 2 + 2 * j)]
    # WHEN its period is looked for
    found = bfc._period(seq(*events))
    # THEN 40 rows, broken where step 2's first event differs from step 1's 256-byte allocation, and step 3's from it
    # (row 81's free, 1 row back, equals the others: row 80's event is a free, but 81 still names the row before)
    assert found is not None and found.rows == 40
    assert found.breaks.tolist() == [80, 120]


def test_the_compiled_loop_holds_requests_up_to_the_largest_limit_and_frees_of_rows_in_the_sequence() -> None:
    # a request of the largest limit itself (8 TiB, a multiple of 256: rounded to itself) is held; 256 bytes more not
    assert bfc._in_compiled_range(seq(("a", bfc.MAX_LIMIT_BYTES)))
    assert not bfc._in_compiled_range(seq(("a", bfc.MAX_LIMIT_BYTES + 1)))
    # in 3 rows, a free of row 2 (the last row: its event ~2 = -3 = -len) is held; a free of row 3 (~3 = -4) not
    assert bfc._in_compiled_range(seq(("a", KIB), ("f", 2), ("a", KIB)))
    assert not bfc._in_compiled_range(seq(("a", KIB), ("f", 3), ("a", KIB)))


# -- replays resumed from a kept state, and what their proofs answer, by hand ----------------------------------


MOVING_CHUNK_FREE_AT_ADDRESS_0_BESIDE_THE_CHOSEN = ([("a", 3 * MIB // 2), ("a", MIB // 4), ("f", 1), ("f", 0),
                                                     ("a", 3 * MIB // 2)], BFCOptions(5 * MIB, region_order=(1, 0)))


def test_the_peak_a_proof_answers_where_the_chunk_that_moves_with_the_limit_is_free_at_address_0() -> None:
    # GIVEN with growth, and a region order learned from a trace that puts region 1 at the lowest address (0): 1.5 MiB
    # (region 0, 2 MiB, handed out whole), 256 KiB (region 1: what a limit of 5 MiB leaves, 3 MiB, moving with the
    # limit; split), both freed (region 1 whole and free again: the chunk that moves with the limit, at address 0),
    # then 1.5 MiB (best fit: region 0's 2 MiB, not region 1's 3 MiB)
    events, options = MOVING_CHUNK_FREE_AT_ADDRESS_0_BESIDE_THE_CHOSEN
    requests = seq(*events)
    limits = bfc._limits(requests, options)
    # WHEN 5 MiB is replayed (it proves up to 6 MiB: region 1 grows with the limit up to the growth size, 4 MiB)
    assert limits.outcome(5 * MIB).peak_in_use_bytes == 9 * MIB // 4
    # THEN 6 MiB is answered from that proof, without a replay, with the peak a replay under it has: 2.25 MiB (2 MiB
    # and 256 KiB at row 1). The 2 MiB in use at the end does not move with the limit: the moving chunk is free
    assert limits.outcome(6 * MIB).peak_in_use_bytes == 9 * MIB // 4 and limits.replays == 1
    assert bfc.simulate(seq(*events), replace(options, limit_bytes=6 * MIB)).peak_in_use_bytes == 9 * MIB // 4

def test_a_python_replay_of_two_blocks_records_every_event(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN 35,000 allocations of 256 B, each freed at once: 70,000 events, more than one block of the Python loop
    # (bfc._BLOCK = 65,536 events) and fewer than two: its records come in two tables, which simulation() joins
    pairs = 35_000
    assert bfc._BLOCK < 2 * pairs <= 2 * bfc._BLOCK
    requests = seq(*[event for k in range(pairs) for event in (("a", 256), ("f", 2 * k))])
    monkeypatch.setenv("MEMTRACE_REPLAY", "python")
    # WHEN replayed with growth under 10 MiB
    sim = simulate(requests, BFCOptions(10 * MIB))
    # THEN every event is in the simulation, the last block's too: the first allocation makes the 2 MiB region and
    # takes 256 B at offset 0; its free merges the chunk back into the whole region, so each next one does the same
    assert sim.fits and len(sim.bytes_in_use) == 2 * pairs
    assert sim.bytes_in_use.tolist() == [256, 0] * pairs
    assert sim.chunk_bytes.tolist() == [256, 256] * pairs
    assert sim.offset.tolist() == [0] * (2 * pairs)
    assert sim.pool_bytes.tolist() == [2 * MIB] * (2 * pairs)
    assert sim.largest_free_bytes.tolist() == [2 * MIB - 256, 2 * MIB] * pairs


def test_the_outcomes_at_both_ends_of_a_proven_range_are_worked_out_without_a_replay() -> None:
    # GIVEN 1 MiB then 3 MiB with growth (tests/test_bfc.py, the limits a replay proves by hand): under 5.5 MiB region
    # 0 is 2 MiB and region 1 what the limit leaves, 3.5 MiB; 3 MiB takes all of it (3.5 < 2 x 3 and 0.5 MiB remain,
    # < 128 MiB), so the chunk in use moves with the limit, and limits 5 MiB..6 MiB decide alike
    requests = seq(("a", MIB), ("a", 3 * MIB))
    options = BFCOptions(5 * MIB + 512 * 1024)
    # WHEN its outcome is asked (one replay), then those of the range's two ends
    assert outcome(requests, options) == Outcome(True, None, 5 * MIB - 512 * 1024, 5 * MIB + 512 * 1024)
    # THEN each end's is worked out from that replay, d bytes apart: in use 1 MiB + (L - 2 MiB), the pool L
    assert outcome(requests, replace(options, limit_bytes=5 * MIB)) == Outcome(True, None, 4 * MIB, 5 * MIB)
    assert outcome(requests, replace(options, limit_bytes=6 * MIB)) == Outcome(True, None, 5 * MIB, 6 * MIB)
    # AND no other replay was made for them
    limits = bfc._limits(requests, options)
    assert (limits.replays, limits.replayed_events) == (1, 2)
    # AND asked only whether they fit, of the same requests anew: one replay (5.5 MiB) answers both ends too
    again = seq_copy(requests)
    assert all(fits(again, replace(options, limit_bytes=limit)) for limit in (5 * MIB + 512 * 1024, 5 * MIB, 6 * MIB))
    assert bfc._limits(again, options).replays == 1


def _resumable() -> bfc.Requests:
    # 1 MiB (row 0), 3 MiB (row 1), 8,190 requests of 0 bytes (rows 2..8191: the rows between snapshots, 8,192),
    # 256 B (row 8192), the free of row 1 (row 8193), 3.5 MiB (row 8194)
    return seq(("a", MIB), ("a", 3 * MIB), *[("a", 0)] * 8190, ("a", 256), ("f", 1), ("a", 7 * MIB // 2))


def test_a_replay_resumed_under_a_smaller_limit_shifts_the_cut_region_and_the_chunk_in_use() -> None:
    # GIVEN the sequence above with growth and garbage collection. Under L (5 MiB..6 MiB) region 0 is 2 MiB (1 MiB
    # in use), region 1 is cut to L - 2 MiB (room 3 MiB..4 MiB, the growth size) and 3 MiB takes all of it (less
    # than twice 3 MiB, under 1 MiB left): the chunk in use moves with the limit up to row 8192, where a snapshot
    # proves 5 MiB..6 MiB alike. Row 8192 takes 256 B from region 0: in use 1 MiB + (L - 2 MiB) + 256 B, the peak.
    # Row 8194's 3.5 MiB fits region 1, free again, iff L - 2 MiB >= 3.5 MiB; else the pool is full (no extension),
    # collection gives region 1 back (pool 2 MiB) and the new region, L - 2 MiB, is as small: it fails
    requests = _resumable()
    options = BFCOptions(11 * MIB // 2, garbage_collection=True)
    limits = bfc._limits(requests, options)
    # WHEN 5.5 MiB is tried (one replay, keeping the snapshot), then 5 MiB (resumed at row 8192), then 5.25 MiB
    assert limits.fits(11 * MIB // 2, snapshots=True)
    assert [(z.row, z.low, z.high) for z in limits.snapshots] == [(8192, 5 * MIB, 6 * MIB)]
    # THEN under 5 MiB: region 1 and its chunk in use are 3 MiB (0.5 MiB less than the snapshot's), the peak 4 MiB +
    # 256 B; collection leaves a pool of 2 MiB, 3 MiB to extend by: row 8194 fails
    assert limits.outcome(5 * MIB) == Outcome(False, 8194, 4 * MIB + 256, 5 * MIB)
    assert (limits.replays, limits.replayed_events) == (2, 8195 + 3)  # rows 8192..8194 resumed
    # AND that replay proves the snapshot's low end (5 MiB) up to the last limit whose region 1 is under 3.5 MiB
    assert limits.proven == [(11 * MIB // 2, 6 * MIB, True), (5 * MIB, 11 * MIB // 2 - 1, False)]
    # AND 5.25 MiB is worked out from it, 0.25 MiB larger, without another replay
    assert limits.outcome(21 * MIB // 4) == Outcome(False, 8194, 4 * MIB + MIB // 4 + 256, 21 * MIB // 4)
    assert limits.replays == 2


def test_a_replay_resumed_under_a_larger_limit_proves_no_more_than_its_snapshot() -> None:
    # GIVEN the same sequence and options (above), tried first under 5 MiB (it fails at row 8194; the snapshot at
    # row 8192 proves 5 MiB..6 MiB alike)
    requests = _resumable()
    options = BFCOptions(5 * MIB, garbage_collection=True)
    limits = bfc._limits(requests, options)
    assert not limits.fits(5 * MIB, snapshots=True)
    # WHEN 5.5 MiB is asked: resumed at row 8192, 0.5 MiB larger; row 8194's 3.5 MiB fits region 1 (3.5 MiB)
    assert limits.outcome(11 * MIB // 2) == Outcome(True, None, 4 * MIB + MIB // 2 + 256, 11 * MIB // 2)
    # THEN it proves from 5.5 MiB (region 1 must hold 3.5 MiB) to the snapshot's 6 MiB, no further
    assert limits.proven == [(5 * MIB, 11 * MIB // 2 - 1, False), (11 * MIB // 2, 6 * MIB, True)]
    # AND 7 MiB is replayed: region 1 is the growth size, 4 MiB (not cut), all of it for 3 MiB: in use 5 MiB + 256 B
    # at row 8192, the pool 6 MiB
    assert limits.outcome(7 * MIB) == Outcome(True, None, 5 * MIB + 256, 6 * MIB)
    assert limits.replays == 3


def test_a_replay_resumed_under_a_larger_limit_gives_back_the_cut_region_at_its_size_there() -> None:
    # GIVEN rows 0..8193 of the sequence above (region 1 cut to L - 2 MiB, all of it for 3 MiB, a snapshot at row
    # 8192 proving 5 MiB..6 MiB alike, 256 B from region 0, the free of row 1), then 1.75 MiB (row 8194): region 1
    # is split for it where L - 2 MiB >= 3.5 MiB (twice it), from 5.5 MiB, else handed out whole; its free (row
    # 8195), the frees of rows 0 and 8192 (8196, 8197): both regions wholly free; then 4.5 MiB (row 8198): no free
    # chunk holds it and the pool is full, so collection gives back both regions and one new region of L is made
    requests = seq(("a", MIB), ("a", 3 * MIB), *[("a", 0)] * 8190, ("a", 256), ("f", 1), ("a", 7 * MIB // 4),
                   ("f", 8194), ("f", 0), ("f", 8192), ("a", 9 * MIB // 2))
    options = BFCOptions(5 * MIB, garbage_collection=True)
    limits = bfc._limits(requests, options)
    # WHEN 5 MiB is tried (it fits; 1.75 MiB took region 1 whole: it proves up to 5.5 MiB less a byte), then 5.5 MiB
    assert limits.fits(5 * MIB, snapshots=True)
    assert limits.proven == [(5 * MIB, 11 * MIB // 2 - 1, True)]
    # THEN 5.5 MiB resumes at row 8192 (7 rows), its region 1 3.5 MiB: wholly free at row 8198, it is given back
    # with region 0, and the new region, 5.5 MiB, is all 4.5 MiB's (under twice it, 1 MiB left): in use 5.5 MiB
    assert limits.outcome(11 * MIB // 2) == Outcome(True, None, 11 * MIB // 2, 11 * MIB // 2)
    assert (limits.replays, limits.replayed_events) == (2, 8199 + 7)


def test_a_replay_resumed_without_growth_makes_its_one_region_the_whole_of_its_own_limit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN without growth (one region, the whole limit): a 0-byte request (row 0), A 1 MiB, B 256 KiB, A freed,
    # D 1.25 MiB; at most 1.5 MiB live (B + D); snapshots at every row
    monkeypatch.setattr(bfc, "_SNAPSHOT_ROWS", 1)
    requests = seq(("a", 0), ("a", MIB), ("a", 256 * KIB), ("f", 1), ("a", 5 * MIB // 4))
    # WHEN its smallest limit is searched to 256 KiB
    search = search_min_limit(requests, BFCOptions(0, allow_growth=False), 256 * KIB)
    # THEN from the lower bound 1.5 MiB up (no growth: 1.5, then 2, 3 MiB): 1.5 MiB: A takes the region whole
    # (1.5 < 2 x 1 MiB, 512 KiB left), B fails (rows 0-2); that proves [1 MiB, 2 MiB - 1] (A whole below twice)
    # 2 MiB resumes from the snapshot at row 1 (nothing made yet: every limit alike), its region the whole 2 MiB:
    # A splits (1 MiB free), B from it (768 KiB free), A freed (1 MiB free, B between), D fits neither: fails at row
    # 4 (rows 1-4), proving [2 MiB, 2.5 MiB - 1] (D fits the tail from 2.5 MiB); 3 MiB resumes at row 4 (the tail
    # 1.75 MiB holds D; 1 event); 2.5 MiB, 2.25 MiB and the probe 2.75 MiB are proven: 3 replays, 3 + 4 + 1 events
    tried = ((3 * MIB // 2, False), (2 * MIB, False), (3 * MIB, True), (5 * MIB // 2, True), (9 * MIB // 4, False),
             (11 * MIB // 4, True))
    assert search == LimitSearch(5 * MIB // 2, True, tried, 1, 3, 3 + 4 + 1)


def test_a_replay_resumed_without_growth_after_its_region_has_no_room_for_another(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN without growth: 3.25, 2.75, 2 and 0.5 MiB, all held (8.5 MiB at most); snapshots at every row
    monkeypatch.setattr(bfc, "_SNAPSHOT_ROWS", 1)
    requests = seq(("a", 13 * MIB // 4), ("a", 11 * MIB // 4), ("a", 2 * MIB), ("a", MIB // 2))
    # WHEN its smallest limit is searched to 512 KiB
    search = search_min_limit(requests, BFCOptions(0, allow_growth=False), 512 * KIB)
    # THEN 8.5 MiB: 3.25 splits the region (8.5 >= 6.5: 5.25 left), 2.75 takes those whole (5.25 < 5.5), 2 MiB fails
    # (rows 0-2; proven [6.5, 8.75 MiB - 1]); 9.5 MiB resumes at row 1 (after the first split: every limit from 6.5
    # MiB alike), pool and tail 1 MiB larger: 2.75 splits (6.25 left), 2 MiB takes 3.5 whole, 0.5 MiB fails: the
    # pool is the limit (rows 1-3; proven [8.75, 10 MiB - 1]); 11.5 MiB resumes at row 2 (tail 5.5: 2 MiB splits,
    # 0.5 fits; 2 events; proven from 10 MiB up); 10.5, 10, 9 and the probe 11 MiB are proven: 3 replays, 3 + 3 + 2
    assert search == LimitSearch(10 * MIB, True, ((17 * MIB // 2, False), (19 * MIB // 2, False), (23 * MIB // 2, True),
                                                  (21 * MIB // 2, True), (10 * MIB, True), (9 * MIB, False),
                                                  (11 * MIB, True)), 1, 3, 8)


def test_garbage_collection_after_a_resume_gives_back_the_cut_region_at_its_resumed_size(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN with growth and garbage collection: a 0-byte request, A 2 MiB (region 0, whole), B 2.75 MiB (region 1: 4 MiB
    # unlimited), both freed, C 3.25 MiB; 4.75 MiB at most live; snapshots at every row
    monkeypatch.setattr(bfc, "_SNAPSHOT_ROWS", 1)
    requests = seq(("a", 0), ("a", 2 * MIB), ("a", 11 * MIB // 4), ("f", 1), ("f", 2), ("a", 13 * MIB // 4))
    # WHEN its smallest limit is searched to 256 KiB
    search = search_min_limit(requests, BFCOptions(0, True, True), 256 * KIB)
    # THEN the unlimited replay (6 events) pools 6 MiB; 5.25 MiB cuts region 1 to 3.25 MiB (from row 2: 4 events; C
    # takes it whole, proving [5.25, 6 MiB - 1]); 4.75 MiB resumes at row 5 (snapshot admits 4.75 to 6 MiB): region
    # 1 is 2.75 MiB, wholly free, as region 0 is: C finds no chunk, garbage collection gives both back (4.75 MiB),
    # and a region of 4.75 MiB holds C (1 event), proving [4.75, 5.25 MiB - 1]: the probe 5 MiB is proven
    assert search == LimitSearch(19 * MIB // 4, True, ((6 * MIB, True), (21 * MIB // 4, True), (19 * MIB // 4, True),
                                                       (5 * MIB, True)), 1, 3, 6 + 4 + 1)


def test_a_replay_resumed_with_its_moving_chunk_in_use_peaks_with_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN with growth: A 2.25 MiB, freed, B 1.75 MiB (unlimited: region 0 of 4 MiB, A takes it whole); snapshots
    # at every row
    monkeypatch.setattr(bfc, "_SNAPSHOT_ROWS", 1)
    requests = seq(("a", 9 * MIB // 4), ("f", 0), ("a", 7 * MIB // 4))
    # WHEN its smallest limit is searched to 512 KiB
    search = search_min_limit(requests, BFCOptions(0), 512 * KIB)
    # THEN unlimited (3 events) pools 4 MiB; 3 MiB cuts region 0 to 3 MiB (from row 0: A takes it whole, B takes the
    # 3 MiB whole: 3 events), proving [2.5, 3.5 MiB - 1]; the probe 3.5 MiB resumes at row 2 (before B: A's region
    # 3.5 MiB, taken whole, in use up to A's free: the peak moves with the limit): B splits the 3.5 MiB (1 event)
    assert search == LimitSearch(5 * MIB // 2, True, ((4 * MIB, True), (3 * MIB, True), (5 * MIB // 2, True),
                                                      (7 * MIB // 2, True)), 1, 3, 3 + 3 + 1)
    # AND its outcome peaks at 3.5 MiB in use (A's whole region), the pool 3.5 MiB
    assert outcome(requests, BFCOptions(7 * MIB // 2)) == Outcome(True, None, 7 * MIB // 2, 7 * MIB // 2)


def test_a_replay_from_a_state_where_the_limit_cuts_a_region_proves_limits_below_the_first_growth_size() -> None:
    # GIVEN with growth: A 1.5 MiB (region 0 of 2 MiB, taken whole), B 512 KiB (region 1: 4 MiB unlimited)
    requests = seq(("a", 3 * MIB // 2), ("a", MIB // 2))
    # WHEN its smallest limit is searched to 256 KiB (the states kept from 2 MiB, the lower bound, up: region 1's)
    search = search_min_limit(requests, BFCOptions(0), 256 * KIB)
    # THEN unlimited pools 6 MiB (2 events); 3.75 MiB: region 1 of 1.75 MiB, B splits it (from row 1: 1 event; proven
    # [3, 6 MiB - 1]); 2.75 MiB: 0.75 MiB, taken whole ([2.5, 3 MiB - 1]); 2.25 MiB: 0.25 MiB left, B fails, which
    # holds from 2 MiB (region 0 whole from there) to 2.5 MiB - 1; 2.5 MiB proven; the scan from the lower bound
    # finds 2 MiB proven by that replay (no replay of its own), and the probes 3.5, 4.5 MiB proven: 4 replays
    assert search == LimitSearch(5 * MIB // 2, True, ((6 * MIB, True), (15 * MIB // 4, True), (11 * MIB // 4, True),
                                                      (9 * MIB // 4, False), (5 * MIB // 2, True), (2 * MIB, False),
                                                      (7 * MIB // 2, True), (9 * MIB // 2, True)), 1, 4, 2 + 1 + 1 + 1)


def test_a_replay_proves_a_range_that_ends_at_its_own_limit() -> None:
    # GIVEN with growth and garbage collection: 512 KiB (region 0 of 2 MiB), freed, 2.75 MiB (region 1: 4 MiB
    # unlimited, the growth size having doubled)
    requests = seq(("a", MIB // 2), ("f", 0), ("a", 11 * MIB // 4))
    # WHEN its smallest limit is searched to 1 MiB
    search = search_min_limit(requests, BFCOptions(0, True, True), MIB)
    # THEN unlimited pools 6 MiB (3 events); 4 MiB (from row 2, 1 event): 2 MiB of room is too little, collection
    # gives region 0 back, and the room, 4 MiB, is exactly the growth size: a larger limit would make a region of 4
    # MiB, not the room: proven [3 MiB (the states' lower end), 4 MiB], its own limit the top; 3 MiB is proven by it;
    # the probe 5 MiB is replayed (1 event): 3 replays
    assert search == LimitSearch(3 * MIB, True, ((6 * MIB, True), (4 * MIB, True), (3 * MIB, True), (5 * MIB, True)),
                                 1, 3, 3 + 1 + 1)


def test_the_limits_proven_below_the_first_growth_size_reach_it() -> None:
    # GIVEN 256 KiB asked under 1 MiB with growth: the first region is min(limit, 2 MiB) = 1 MiB, and it splits
    # (1 MiB >= 512 KiB)
    # THEN every limit from 512 KiB (where it still splits: twice the request) to 2 MiB (the first region grows with
    # the limit up to there) decides alike
    assert proven_limits(seq(("a", 256 * KIB)), BFCOptions(MIB)) == (512 * KIB, 2 * MIB, True)


def test_a_limit_off_the_256_byte_grid_proves_only_itself() -> None:
    # GIVEN 1 MiB then 3 MiB (under 5 MiB: proven [5, 6 MiB], see test_the_limits_a_replay_proves_by_hand)
    # THEN under 5 MiB + 1 byte the replay proves its own limit alone (the room is floored to 256 bytes there)
    assert proven_limits(seq(("a", MIB), ("a", 3 * MIB)), BFCOptions(5 * MIB + 1)) == (5 * MIB + 1, 5 * MIB + 1, True)
    # AND the second region is the room floored to 256 bytes: 3 MiB, not 3 MiB + 1 byte
    assert simulate(seq(("a", MIB), ("a", 3 * MIB)), BFCOptions(5 * MIB + 1)).regions == ((0, 2 * MIB), (1, 3 * MIB))


def test_a_region_made_after_collection_beside_the_one_the_limit_cuts_does_not_move_with_the_limit() -> None:
    # GIVEN growth and garbage collection under 10 MiB: 1.5 MiB (region 0, 2 MiB, handed out whole), 3 MiB (region 1,
    # 4 MiB, whole), 3 MiB (region 2: what the limit leaves, 4 MiB, moving with the limit), the first two freed, then
    # 5 MiB: no free chunk holds it and there is no room, so collection gives back regions 0 and 1 (6 MiB), and region
    # 3 is the room they leave, 6 MiB (under the growth size, 16 MiB): the pool less region 2, which does not move
    events = [("a", 3 * MIB // 2), ("a", 3 * MIB), ("a", 3 * MIB), ("f", 0), ("f", 1), ("a", 5 * MIB)]
    options = BFCOptions(10 * MIB, allow_growth=True, garbage_collection=True)
    assert simulate(seq(*events), options).regions == ((2, 4 * MIB), (3, 6 * MIB))
    # THEN the replay proves every limit from 9 MiB (region 2 holds 3 MiB) to 12 MiB less a byte (at 12 MiB region 2,
    # 6 MiB, would be split for 3 MiB): the last region is 6 MiB across them, region 2 moves
    assert proven_limits(seq(*events), options) == (9 * MIB, 12 * MIB - 1, True)
    assert simulate(seq(*events), replace(options, limit_bytes=11 * MIB)).regions == ((2, 5 * MIB), (3, 6 * MIB))


# Sequences whose proofs are worked by hand below (the compiled loop's proofs are held to the Python loop's on them:
# tests/test_bfc_compiled.py): events and options.
COLLECTION_BESIDE_THE_CUT_REGION = ([("a", 8 * MIB), ("a", 16 * MIB), ("a", 8 * MIB), ("f", 0), ("f", 1),
                                     ("a", 20 * MIB)], BFCOptions(32 * MIB, garbage_collection=True))
MOVING_CHUNK_TOO_SMALL_TO_THE_CUT_BOUND = ([("a", MIB), ("a", 3 * MIB // 2), ("a", 5 * MIB // 2)], BFCOptions(5 * MIB))
CHUNK_CHOSEN_OVER_THE_MOVING_ONE = ([("a", 8 * MIB), ("a", 2 * MIB), ("f", 0), ("a", 6 * MIB), ("a", 8 * MIB)],
                                    BFCOptions(12 * MIB))
MOVING_CHUNK_AT_ADDRESS_0 = ([("a", MIB // 2), ("f", 0), ("a", 2 * MIB)], BFCOptions(MIB, allow_growth=False))
# A region made of exactly the request (the growth size), at address 0 (region 1 first in the address order)
REGION_OF_EXACTLY_THE_REQUEST_AT_ADDRESS_0 = ([("a", MIB), ("a", 4 * MIB)], BFCOptions(1 << 30, region_order=(1, 0)))
# Collection gives back the region that moves with the limit, and the region made then does not move
MOVING_REGION_GIVEN_BACK_BEFORE_ONE_THAT_DOES_NOT_MOVE = (
    [("a", 3 * MIB), ("a", 5 * MIB), ("a", 5 * MIB), ("f", 2), ("f", 0), ("f", 1), ("a", 10 * MIB), ("a", MIB)],
    BFCOptions(18 * MIB, garbage_collection=True))
# Collection gives back regions 0 and 1; region 3, the room it leaves, is split and its chunks join back on each side
REGION_MADE_AFTER_COLLECTION_SPLIT_AND_JOINED = (
    [("a", 3 * MIB // 2), ("a", 3 * MIB), ("a", 6 * MIB), ("f", 0), ("f", 1), ("a", 5 * MIB),
     ("a", 4 * MIB), ("f", 5), ("a", 2 * MIB), ("a", 3 * MIB), ("f", 8), ("f", 9), ("f", 6),
     ("a", 4 * MIB), ("f", 13),
     ("a", 2 * MIB), ("a", 6 * MIB), ("f", 15), ("a", MIB), ("f", 18), ("f", 16),
     ("a", 4 * MIB), ("a", 6 * MIB), ("f", 21), ("a", MIB), ("f", 22), ("f", 24)],
    BFCOptions(18 * MIB, garbage_collection=True))


def test_a_region_made_of_exactly_the_request_at_address_0_is_handed_out_whole() -> None:
    # GIVEN with growth, region 1 first in the address order (at address 0): 1 MiB (region 0, 2 MiB, split), then
    # 4 MiB: region 0's 1 MiB left is too small, so region 1 is made of the growth size, 4 MiB, exactly the request
    events, options = REGION_OF_EXACTLY_THE_REQUEST_AT_ADDRESS_0
    simulation = simulate(seq(*events), options)
    # THEN the 4 MiB takes region 1 whole, at its start
    assert simulation.regions == ((0, 2 * MIB), (1, 4 * MIB))
    assert (simulation.region[-1], simulation.offset[-1], simulation.chunk_bytes[-1]) == (1, 0, 4 * MIB)
    assert simulation.largest_free_bytes.tolist() == [MIB, MIB]


def test_a_region_that_moves_with_the_limit_given_back_moves_no_more(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN growth and garbage collection under 18 MiB: 3 MiB (region 0: the growth size doubles to 4 MiB for it, and
    # stays), 5 MiB (region 1: 8 MiB, stays), 5 MiB (region 2: the 6 MiB the limit leaves, under the growth size, so
    # it moves with the limit; the growth size doubles to 16 MiB), all three freed, then 10 MiB: no free chunk holds
    # it and there is no room, so collection gives back all three, and region 3 is the growth size, 16 MiB, under the
    # 18 MiB of room: it does not move with the limit; then 1 MiB: region 4, the 2 MiB left, moves with it
    events, options = MOVING_REGION_GIVEN_BACK_BEFORE_ONE_THAT_DOES_NOT_MOVE
    simulation = simulate(seq(*events), options)
    assert simulation.made_regions == ((0, 4 * MIB), (1, 8 * MIB), (2, 6 * MIB), (3, 16 * MIB), (4, 2 * MIB))
    assert simulation.given_back == ((0, 6), (1, 6), (2, 6))
    # THEN the replay proves from 18 MiB (region 4, 2 MiB + d, is split for 1 MiB: at least twice it) to 20 MiB (region
    # 2, 6 MiB + d, is what the limit leaves while that is at most the growth size, 8 MiB); the 10 MiB, in region 3,
    # which does not move, bounds nothing by region 2's old chunk
    assert proven_limits(seq(*events), options) == (18 * MIB, 20 * MIB, True)
    # AND the states kept before each row say region 2 moves from its making to its giving back, and then none does
    monkeypatch.setattr(bfc, "_SNAPSHOT_ROWS", 1)
    taken: list[bfc._Snapshot] = []
    bfc._Run(seq(*events), options, record=False, track=True, snapshots=taken)
    assert [(z.row, z.region_slope) for z in taken] == [(1, {}), (2, {}), *[(row, {2: 1}) for row in range(3, 7)],
                                                        (7, {})]


def test_the_chunks_of_a_region_made_after_collection_join_back_on_either_side() -> None:
    # GIVEN growth and garbage collection under 18 MiB: 1.5, 3 and 6 MiB (regions 0-2 of 2, 4 and 8 MiB, each handed
    # out whole: under twice the request), the first two freed, then 5 MiB: no free chunk holds it, nor the room left
    # (4 MiB), so collection gives back regions 0 and 1, and region 3 is the room they leave, 10 MiB, split for it
    events, options = REGION_MADE_AFTER_COLLECTION_SPLIT_AND_JOINED
    simulation = simulate(seq(*events), options)
    assert simulation.given_back == ((0, 5), (1, 5)) and simulation.made_regions[3] == (3, 10 * MIB)
    # WHEN its chunks are handed out and freed: 4 MiB takes the 5 MiB left whole, the 5 MiB is freed; 2 MiB splits it
    # and 3 MiB takes the rest; the 2 MiB is freed, then the 3 MiB (joined to the 2 MiB before it: 5 MiB), then the
    # 4 MiB's (joined to the 5 MiB: the region whole); 4 MiB splits it and is freed (joined to the 6 MiB after it);
    # 2 MiB splits it, 6 MiB takes the 8 MiB left whole, the 2 MiB is freed; 1 MiB splits it and is freed (joined to
    # the 1 MiB after it), then the 6 MiB's (joined to the 2 MiB before it: the region whole again); 4 MiB splits it,
    # 6 MiB takes the 6 MiB left whole, the 4 MiB is freed; 1 MiB splits it, then the 6 MiB is freed (joined to the
    # 3 MiB before it: 9 MiB), then the 1 MiB (the region whole again)
    # THEN the largest free chunk after each event is as worked, and region 3 ends one free chunk of 10 MiB
    assert [size / MIB for size in simulation.largest_free_bytes.tolist()] == [
        0, 0, 0, 2, 4, 5, 0, 5, 3, 0, 2, 5, 10, 6, 10, 8, 0, 2, 1, 2, 10, 6, 0, 4, 3, 9, 10]
    assert simulation.regions == ((2, 8 * MIB), (3, 10 * MIB)) and simulation.chunks[1].size_bytes == 10 * MIB
    assert not simulation.chunks[1].in_use


def test_a_region_made_after_collection_under_the_growth_size_stays_so_while_the_cut_region_moves() -> None:
    # GIVEN growth and garbage collection under 32 MiB: 8 MiB (region 0: the growth size doubles 2 -> 8 MiB for it
    # and stays), 16 MiB (region 1: 8 -> 16 MiB, stays), 8 MiB (region 2: what the limit leaves, 8 MiB, under the
    # growth size 16 MiB: it moves with the limit, and is handed out whole below twice the request, 16 MiB; the
    # growth size doubles to 32 MiB), the first two freed, then 20 MiB: no free chunk holds it and there is no room,
    # so collection gives back regions 0 and 1 (24 MiB, more than the growth size at region 2) and region 3 is the
    # room they leave, 24 MiB, under the growth size 32 MiB whatever region 2's size: a limit d larger moves region
    # 2 and the pool by d, not the room region 3 is cut to
    events, options = COLLECTION_BESIDE_THE_CUT_REGION
    assert simulate(seq(*events), options).regions == ((2, 8 * MIB), (3, 24 * MIB))
    # THEN the replay proves every limit from 32 MiB (region 2 holds 8 MiB) to 40 MiB less a byte (at 40 MiB region
    # 2, 16 MiB, is split for 8 MiB and cannot be given back): all of each limit in use, region 3 24 MiB across them
    assert proven_limits(seq(*events), options) == (32 * MIB, 40 * MIB - 1, True)
    under_39 = simulate(seq(*events), replace(options, limit_bytes=39 * MIB))
    assert under_39.regions == ((2, 15 * MIB), (3, 24 * MIB)) and under_39.peak_in_use_bytes == 39 * MIB
    assert simulate(seq(*events), replace(options, limit_bytes=40 * MIB)).peak_in_use_bytes == 32 * MIB


def test_the_moving_chunk_s_bound_is_kept_where_the_cut_region_s_bound_falls_a_byte_further() -> None:
    # GIVEN growth under 5 MiB: 1 MiB (region 0, 2 MiB, split: 1 MiB free), 1.5 MiB (region 1: what the limit leaves,
    # 3 MiB, under the growth size 4 MiB, so cut up to a limit 1 MiB larger; split at twice the request: its last
    # 1.5 MiB free, the chunk that moves with the limit), then 2.5 MiB: no free chunk holds it and there is no room
    events, options = MOVING_CHUNK_TOO_SMALL_TO_THE_CUT_BOUND
    # THEN it fails, and so does every limit up to 6 MiB less a byte; at 6 MiB (where the cut region's bound also
    # ends) the moving chunk is 2.5 MiB and holds it
    assert proven_limits(seq(*events), options) == (5 * MIB, 6 * MIB - 1, False)
    assert simulate(seq(*events), replace(options, limit_bytes=6 * MIB - 256)).failed_at == 2
    assert simulate(seq(*events), replace(options, limit_bytes=6 * MIB)).failed_at is None


def test_a_chunk_chosen_over_the_moving_one_proves_short_of_where_that_holds_the_request_at_the_cut_bound() -> None:
    # GIVEN growth under 12 MiB: 8 MiB (region 0: the growth size doubles 2 -> 8 MiB for it and stays), 2 MiB
    # (region 1: what the limit leaves, 4 MiB, under the growth size 8 MiB, so cut up to a limit 4 MiB larger; split
    # at twice the request: its last 2 MiB free, the chunk that moves with the limit), the 8 MiB freed, 6 MiB (the
    # moving chunk is too small, 2 MiB: region 0 is chosen, whole), then 8 MiB: no free chunk holds it, no room
    events, options = CHUNK_CHOSEN_OVER_THE_MOVING_ONE
    # THEN it fails at row 4, and so does every limit up to 16 MiB less a byte; at 16 MiB (where the cut region's
    # bound also ends) the moving chunk is 6 MiB and is chosen for 6 MiB, region 0 stays free for 8 MiB: it fits
    assert proven_limits(seq(*events), options) == (12 * MIB, 16 * MIB - 1, False)
    assert simulate(seq(*events), replace(options, limit_bytes=16 * MIB - 256)).failed_at == 4
    assert simulate(seq(*events), replace(options, limit_bytes=16 * MIB)).failed_at is None


def test_a_request_larger_than_the_whole_free_region_at_address_0_proves_up_to_where_it_would_fit() -> None:
    # GIVEN without growth, under 1 MiB: 512 KiB (the one region, 1 MiB, at address 0, split at twice the request),
    # freed (the region whole and free again: the chunk that moves with the limit, at address 0), then 2 MiB
    events, options = MOVING_CHUNK_AT_ADDRESS_0
    requests = seq(*events)
    # THEN it fails, and so does every limit up to 2 MiB less a byte, where the free region is still too small; not
    # beyond (under 2 MiB it fits)
    assert proven_limits(requests, options) == (MIB, 2 * MIB - 1, False)
    assert fits(seq_copy(requests), BFCOptions(2 * MIB, allow_growth=False))


def test_the_gallop_from_the_lower_bound_first_steps_a_16th_of_it() -> None:
    # GIVEN one request without growth (the lower bound: the limit below it in MiB), searched plainly and served
    for hint in (None, 64 * MIB):
        # THEN 33 MiB: from 32 MiB the first step is 2 MiB (32 // 16): 34 fits, bisection asks 33
        search = search_min_limit(seq(("a", 33 * MIB)), BFCOptions(0, allow_growth=False), hint=hint)
        assert [(limit // MIB, ok) for limit, ok in search.tried] == [(34, True), (33, True)]
        # AND 31 MiB: from 30 MiB the first step is 1 MiB (30 // 16): 31 fits, the answer at once
        search = search_min_limit(seq(("a", 31 * MIB)), BFCOptions(0, allow_growth=False), hint=hint)
        assert [(limit // MIB, ok) for limit, ok in search.tried] == [(31, True)]


HOLE_SPLIT_BY_THE_FRACTION_BESIDE_THE_MOVING_CHUNK = (
    [("a", 381_952), ("a", 258_816), ("a", 381_952), ("f", 1), ("a", 257_536)],
    BFCOptions(1_024_000, allow_growth=False, fragmentation_fraction=0.001))
CHUNK_KEPT_WHOLE_BY_THE_FRACTION = (random_sequence(25, 40, 16, round_sizes=True),
                                    BFCOptions(22_960_640, allow_growth=False, fragmentation_fraction=0.3))


def test_a_hole_split_by_the_fraction_s_threshold_keeps_the_bound_the_moving_chunk_set() -> None:
    # GIVEN without growth, limit 1,024,000 B and fraction 0.001 (threshold int(1,024) = 1,024): 381,952 B, 258,816 B
    # and 381,952 B from the one region (1,280 B left at its end: the chunk that moves with the limit), the middle one
    # freed (a hole of 258,816 B), then 257,536 B: the end chunk is too small (under a limit 256,256 B larger it holds
    # it: 1,280 + 256,256 = 257,536), so the hole is chosen and split (remainder 1,280 >= the threshold)
    events, options = HOLE_SPLIT_BY_THE_FRACTION_BESIDE_THE_MOVING_CHUNK
    # THEN the replay proves up to 1,280,255 B, where the end chunk still cannot hold the request; up there the
    # threshold, int(1,280.255) = 1,280, still splits the hole, and up to 1,280,999 B it would: that bound is not the
    # proof's (the end chunk's is)
    assert proven_limits(seq(*events), options) == (1_023_743, 1_280_255, True)
    # AND under 1,280,256 B the request takes the end chunk instead (at 1,022,720), not the hole (at 381,952)
    assert simulate(seq(*events), options).offset.tolist()[-1] == 381_952
    assert simulate(seq(*events), replace(options, limit_bytes=1_280_256)).offset.tolist()[-1] == 1_022_720


def test_a_chunk_kept_whole_by_the_fraction_s_threshold_proves_only_limits_whose_threshold_stays_above_it() -> None:
    # GIVEN a random sequence of 40 events in quarters of a MiB, without growth, with fraction 0.3: under 22,960,640
    # B one chunk is kept whole with a remainder of 6 MiB (6,291,456 B) below the threshold int(0.3 x limit)
    requests, options = CHUNK_KEPT_WHOLE_BY_THE_FRACTION
    requests = seq_copy(requests)
    # THEN the replay proves down to 20,971,524 B only: int(0.3 x 20,971,524) = 6,291,457 stays above the remainder;
    # at 20,971,523 B it is 6,291,456, the remainder itself, and the chunk would be split (a threshold equal to the
    # remainder splits)
    assert proven_limits(requests, options) == (20_971_524, 23_068_671, True)
    assert int(0.3 * 20_971_523) == 6 * MIB < int(0.3 * 20_971_524)
    # AND a replay under 20 MiB (20,971,520 B, on TF's 256-byte grid) proves its own range, up to 20,971,523 B
    assert proven_limits(seq_copy(requests), replace(options, limit_bytes=20 * MIB)) == (20 * MIB, 20_971_523, True)


def test_the_moving_chunk_kept_whole_by_the_fraction_s_threshold_proves_up_to_its_own_limit() -> None:
    # GIVEN without growth, limit 1,025,024 B (4,004 x 256) and fraction 0.001: the split threshold int(1,025.024) =
    # 1,025; 1,024,000 B asked: 1,024 B would remain (< 1,025, and < twice): the whole region is handed out
    # THEN limits from 1,024,000 (the request fits) up to this one decide alike: at +1 byte, 1,025 >= int(1,025.025)
    # would split it (and at +256, 1,280 >= 1,025 does)
    limit = 1_025_024
    options = BFCOptions(limit, allow_growth=False, fragmentation_fraction=0.001)
    assert proven_limits(seq(("a", 1_024_000)), options) == (1_024_000, limit, True)


def test_events_that_touch_no_chunk_are_at_offset_0() -> None:
    # GIVEN a 0-byte request, a free of an allocation outside the sequence, then 512 B
    events = Requests(np.array([True, False, True]), np.array([0, 0, 512]), np.array([-1, -1, -1]),
                      np.array([-1, -1, -1], dtype=np.int32), np.arange(3), ())
    sim = simulate(events, BFCOptions(MIB, allow_growth=False))
    # THEN the first two are in no region (-1) at offset 0; the 512 B at offset 0 of region 0
    assert sim.region.tolist() == [-1, -1, 0] and sim.offset.tolist() == [0, 0, 0]


def test_a_recording_replay_of_repeating_steps_records_every_event(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN 12 steps of 1, 2, 3, 4 KiB each freed at once (8 rows a step), periods from 8 rows looked for
    monkeypatch.setattr(bfc, "_MIN_PERIOD_ROWS", 8)
    events: list[tuple] = []
    for _ in range(12):
        for j in range(4):
            events += [("a", (j + 1) * KIB), ("f", len(events))]
    requests = seq(*events)
    period = bfc._period(requests)
    assert period is not None and period.rows == 8  # (a replay that records nothing moves on by whole steps)
    # WHEN simulated (recording every event)
    sim = simulate(requests, BFCOptions(MIB))
    # THEN all 96 events are there, each step's in use 1, 0, 2, 0, 3, 0, 4, 0 KiB
    assert sim.bytes_in_use.tolist() == [KIB, 0, 2 * KIB, 0, 3 * KIB, 0, 4 * KIB, 0] * 12
