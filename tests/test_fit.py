"""``memtrace fit``: the analysis on hand-made sequences and profiles (answers worked out by hand), the CLI, bad input.

The real recordings (from the allocator's birth, with TF's own limit ladders) are in
``tests/test_fit_recorded.py``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import memtrace
import memtrace.testing
from memtrace.allocator import bfc
from memtrace.allocator.bfc import BFCOptions, Requests
from memtrace.allocator.defaults import defaults_for, gpu_limit_bytes
from memtrace.allocator.fit import fit, fit_requests
from memtrace.allocator.reproduce import Reproduction
from memtrace.allocator.requests import requests_for
from memtrace.errors import UsageError
from memtrace.units import KIB, MIB

from .conftest import ALEXNET, FIXTURES
from .helpers import run
from .memory_profiles import profile as _profile
from .memory_profiles import write_profile

KERAS_CNN = FIXTURES / "profiles" / "keras_cnn.xplane.pb.gz"


# -- failures and what helps, on hand-made sequences ----------------------------------------------

# Under 3 MiB with growth: region 0 is 2 MiB, 1.5 MiB takes all of it (unsplit: 0.5 MiB would
# remain); 0.5 MiB makes region 1 of min(4, 3 - 2) = 1 MiB and takes half; 768 KiB finds 512 KiB
# free and nothing left to grow into.
GROWTH_AT_LIMIT = Requests.from_events([("a", 3 * MIB // 2, "big"), ("a", MIB // 2, "half"),
                                        ("a", 768 * KIB, "last")])


def test_first_failure_state_and_verdict_exhausted() -> None:
    result = fit_requests(GROWTH_AT_LIMIT, BFCOptions(3 * MIB), allocator="x")
    f = result.failure
    assert not result.fits and f is not None
    assert (f.row, f.op, f.requested_bytes, f.request_bytes) == (2, "last", 768 * KIB, 768 * KIB)
    assert (f.in_use_bytes, f.pool_bytes, f.largest_free_bytes) == (5 * MIB // 2, 3 * MIB, MIB // 2)
    # free = free chunks (512 KiB) + limit - pool (0): less than the request, so memory was exhausted
    assert (f.free_bytes, f.verdict, f.missing_bytes) == (MIB // 2, "exhausted", 256 * KIB)
    assert f.regions == ((0, 2 * MIB), (1, MIB))
    assert [(c.region, c.offset, c.size_bytes, c.in_use, c.requested_bytes, c.op) for c in f.chunks] == [
        (0, 0, 2 * MIB, True, 3 * MIB // 2, "big"), (1, 0, MIB // 2, True, MIB // 2, "half"),
        (1, MIB // 2, MIB // 2, False, 0, "")]
    # under 4 MiB region 1 is 2 MiB and 768 KiB fits in its free 1.5 MiB; 3 MiB does not fit
    assert result.min_limit_bytes == 4 * MIB and result.monotone


def test_what_would_help_is_measured_by_replaying() -> None:
    result = fit_requests(GROWTH_AT_LIMIT, BFCOptions(3 * MIB))
    helps = {a.change: (a.fits, a.min_limit_bytes) for a in result.alternatives}
    # without growth: one region of 3 MiB; 1.5 and 0.5 MiB split off (3 >= 2 x 1.5, 1.5 >= 2 x 0.5),
    # 768 KiB takes the last 1 MiB whole: it fits, and 3 MiB is the least (2.75 MiB are alive at once)
    assert helps["allow_growth off"] == (True, 3 * MIB)
    # garbage collection finds no wholly free region to give back
    assert helps["garbage_collection on"] == (False, 4 * MIB)


def test_whether_a_limit_fits_alone_is_one_replay_and_one_more_for_a_failures_map(
        monkeypatch: pytest.MonkeyPatch) -> None:
    runs: list[int] = []
    real = bfc._Run.__init__

    def counted(self: bfc._Run, requests: Requests, *args: object, **kwargs: object) -> None:
        runs.append(len(requests))
        real(self, requests, *args, **kwargs)

    monkeypatch.setattr(bfc._Run, "__init__", counted)
    # worked by hand above: under 4 MiB every request is served, under 3 MiB the 768 KiB one fails (a new sequence
    # each time: what earlier replays of one proved would answer without a replay)
    fits = fit_requests(replace(GROWTH_AT_LIMIT), BFCOptions(4 * MIB), alternatives=False, smallest=False)
    assert runs == [3] and fits.fits and fits.failure is None and fits.min_limit_bytes is None
    # in use at the end: all of region 0 (2 MiB: 1.5 MiB unsplit), then 512 and 768 KiB split from region 1's 2 MiB
    assert not fits.smallest_searched and fits.peak_in_use_bytes == 13 * MIB // 4
    runs.clear()
    fails = fit_requests(replace(GROWTH_AT_LIMIT), BFCOptions(3 * MIB), smallest=False)
    assert fails.failure is not None and (fails.failure.row, fails.failure.op) == (2, "last")
    # one replay says it fails, one records the map there, and each alternative is one replay under 3 MiB: the
    # same verdicts as the replays worked by hand in the test above, with no smallest limit searched
    assert len(runs) == 2 + len(fails.alternatives)
    assert {a.change: (a.fits, a.min_limit_bytes) for a in fails.alternatives}["allow_growth off"] == (True, None)
    assert {a.change: (a.fits, a.min_limit_bytes) for a in fails.alternatives}["garbage_collection on"] == (False, None)


@pytest.mark.parametrize("name", ["fit/cnn", "fit/transformer", "orders/default.r1", "fit/eager"])
def test_whether_a_limit_fits_alone_says_what_the_whole_fit_says_there(name: str) -> None:
    trace = memtrace.load(FIXTURES / f"{name}.xplane.pb.gz")
    allocator = "bfc_cpu_allocator_for_gpu"
    whole = fit(trace, allocator, orders=8)
    assert whole.band is not None and whole.min_limit_bytes is not None
    edges = sorted({whole.min_limit_bytes, whole.band.never_fits_below_bytes, whole.band.always_fits_bytes})
    for limit in sorted({*edges, *(edge - MIB for edge in edges)}):
        full = fit(trace, allocator, limit=limit, orders=8)
        alone = fit(trace, allocator, limit=limit, orders=8, smallest=False)
        assert full.band is not None and alone.orders_under is not None and alone.band is None
        assert (alone.fits, alone.verdict, alone.peak_in_use_bytes, alone.pool_bytes) == (
            full.fits, full.verdict, full.peak_in_use_bytes, full.pool_bytes)
        assert (alone.failure is None) == (full.failure is None)
        if full.failure is not None and alone.failure is not None:
            assert (alone.failure.row, alone.failure.chunks) == (full.failure.row, full.failure.chunks)
        assert (alone.orders_under.fitting, alone.orders_under.sampled) == (full.band.fitting_at_limit,
                                                                              len(full.band.orders))
        assert [(a.change, a.fits) for a in alone.alternatives] == [(a.change, a.fits) for a in full.alternatives]
        assert alone.reproduced == full.reproduced


def test_without_a_limit_the_smallest_is_searched_whatever_smallest_says_and_no_recording_is_refused() -> None:
    from memtrace.allocator.fit import fit_recordings

    # GIVEN the eager Keras recording, asked with no limit (the smallest limit is the question)
    trace = memtrace.load(FIXTURES / "fit" / "eager.xplane.pb.gz")
    allocator = "bfc_cpu_allocator_for_gpu"
    plain = fit(trace, allocator, orders=2, alternatives=False)
    asked = fit(trace, allocator, orders=2, alternatives=False, smallest=False)
    # THEN smallest=False changes nothing: TF's boundary for this step (814 MiB), searched, and the band
    assert plain.min_limit_bytes == 814 * MIB
    assert (asked.min_limit_bytes, asked.smallest_searched, asked.band) == (plain.min_limit_bytes, True, plain.band)
    # AND no recording at all is refused in words
    with pytest.raises(UsageError, match="^no recording to fit$"):
        fit_recordings([], allocator)


def test_the_defaults_of_fit_and_the_notes_on_partitioning_a_cpu_allocator() -> None:
    from memtrace.allocator.fit import fit_recordings

    # GIVEN the eager Keras recording of TF's CPU allocator (growth on, not partitioned)
    trace = memtrace.load(FIXTURES / "fit" / "eager.xplane.pb.gz")
    allocator = "bfc_cpu_allocator_for_gpu"
    # THEN fit and fit_recordings search the smallest limit and measure the alternatives unless told otherwise
    for answer in (fit(trace, allocator, orders=0), fit_recordings([trace], allocator, orders=0)):
        assert answer.smallest_searched and answer.min_limit_bytes == 814 * MIB
        assert [a.change for a in answer.alternatives] == ["garbage_collection on", "allow_growth off",
                                                           "fragmentation_fraction 0.01", "fragmentation_fraction 0.1"]
        assert not any("partition" in note or "gap split" in note for note in answer.assumptions)
    # (and fit_recordings under a limit searches the smallest too, unless told not to)
    assert fit_recordings([trace], allocator, limit=1 << 30, orders=0, alternatives=False).min_limit_bytes == 814 * MIB
    # AND under a limit, with no band, the verdict is whether the recorded order fits (TF's runs: 814 MiB and up)
    assert fit(trace, allocator, limit=814 * MIB, orders=0, alternatives=False).verdict is True
    assert fit(trace, allocator, limit=813 * MIB, orders=0, alternatives=False).verdict is False
    # AND partitioning it needs growth off, given or refused; with growth off given, it is modelled
    with pytest.raises(UsageError) as refused:
        fit(trace, allocator, partitioned=True)
    assert str(refused.value) == (f"{allocator}: spatial partitioning needs allow_growth off, and this allocator grows "
                                  "by default (give --no-allow-growth as well to model it)")
    partitioned = fit(trace, allocator, partitioned=True, allow_growth=False, limit=1 << 30, orders=0,
                      alternatives=False)
    assert partitioned.options.partitioned and not partitioned.options.allow_growth
    # AND a gap split for its pool, which is not partitioned, is said not to apply
    split = fit(trace, allocator, gap_split="exact", limit=1 << 30, orders=0, alternatives=False)
    assert "the gap split (exact) does not apply: this allocator's pool is not partitioned" in split.assumptions


def test_a_profile_after_the_allocators_birth_numbers_the_failures_regions_as_made(tmp_path: Path) -> None:
    # GIVEN a profile that starts after the allocator's birth (4 MiB in use before it) whose chunks lie lower and
    # lower: no self-check, so nothing tells the regions' address order
    high = 1 << 40
    events = [(True, MIB, MIB, high, 5 * MIB, 0.0, "a"), (True, 3 * MIB, 3 * MIB, high - 8 * MIB, 8 * MIB, 0.0, "b"),
              (True, 16 * MIB, 16 * MIB, high - 40 * MIB, 24 * MIB, 0.0, "c"),
              (True, 16 * MIB, 16 * MIB, high - 80 * MIB, 40 * MIB, 0.0, "d")]
    trace = memtrace.load(write_profile(tmp_path / "later.xplane.pb", events))
    answer = fit(trace, "bfc_cpu_allocator_for_gpu", limit=30 * MIB, orders=0, alternatives=False)
    # THEN under 30 MiB the last 16 MiB finds no room in regions of 2, 4 and 16 MiB (TF's growth), numbered in the
    # order they were made: a and the free rest of the first, b in the second whole (the 1 MiB over its 3 MiB is not
    # split off), c in the third
    failure = answer.failure
    assert not answer.fits and failure is not None and failure.request_bytes == 16 * MIB
    assert failure.regions == ((0, 2 * MIB), (1, 4 * MIB), (2, 16 * MIB))
    assert failure.numbers == ((0, 1), (1, 2), (2, 3))
    assert [(c.region, c.offset, c.size_bytes) for c in failure.chunks] == [
        (0, 0, MIB), (0, MIB, MIB), (1, 0, 4 * MIB), (2, 0, 16 * MIB)]


def test_two_recordings_measure_the_alternatives_once_and_the_recorded_limits_edges_are_taken() -> None:
    from memtrace.allocator.fit import fit_recordings

    trace = memtrace.load(FIXTURES / "fit" / "eager.xplane.pb.gz")
    allocator = "bfc_cpu_allocator_for_gpu"
    # GIVEN two recordings of the step: the alternatives are the first one's, measured once; asked for none, none
    both = fit_recordings([trace, trace], allocator, orders=0)
    assert len(both.recordings[0].alternatives) == 4 and both.recordings[1].alternatives == ()
    assert fit_recordings([trace, trace], allocator, orders=0, alternatives=False).recordings[0].alternatives == ()
    # AND a recorded limit of 0 or of the most the model holds (8 TiB) is taken for the self-check (beyond: refused)
    for recorded in (0, bfc.MAX_LIMIT_BYTES):
        checked = fit(trace, allocator, recorded_limit=recorded, orders=0, alternatives=False).reproduced
        assert checked is not None and checked.limit_bytes == recorded


@pytest.mark.parametrize("shown", [0, bfc.MAX_LIMIT_BYTES])
def test_a_limit_the_events_show_at_the_edges_of_what_the_model_holds_is_checked_under(tmp_path: Path,
                                                                                      shown: int) -> None:
    # GIVEN a profile from the allocator's birth whose events show a limit (bytes_available + bytes_allocated, where
    # bytes_available is positive) of 8 TiB, the most the model holds, or of 0 (a hostile file: its second event frees
    # 512 bytes of a chunk it never made, leaving -256 in use and 256 available)
    events = [(True, 256, 256, 4096, 256, 0.0, "a"), (False, 0, 512 if shown == 0 else 256, 8192 if shown == 0 else 4096,
                                                       -256 if shown == 0 else 0, 0.0, "")]
    path = write_profile(tmp_path / "edge.xplane.pb", events, available=lambda in_use: max(0, shown - in_use))
    answer = fit(memtrace.load(path), "bfc_cpu_allocator_for_gpu", orders=0, alternatives=False)
    # THEN the self-check runs under it, and says so
    assert answer.reproduced is not None and answer.reproduced.limit_bytes == shown
    assert (f"the self-check runs under the limit the profile's events show ({shown:,} bytes: bytes_available + "
            "bytes_allocated)") in answer.assumptions


def test_a_gpu_profile_that_shows_no_limit_has_no_self_check_and_says_why(tmp_path: Path) -> None:
    # GIVEN the same events from TF's CPU allocator and from a GPU's, whose limit depends on its card, neither
    # showing a limit
    events = [(True, 256, 256, 4096, 256, 0.0, "a"), (False, 0, 256, 4096, 0, 0.0, "")]
    unknown = ("the limit this profile was recorded under is unknown (a GPU's depends on the card): no self-check; "
               "give it with --recorded-limit")
    gpu = fit(memtrace.load(write_profile(tmp_path / "gpu.xplane.pb", events, allocator="GPU_0_bfc")), "GPU_0_bfc",
              orders=0, alternatives=False)
    cpu = fit(memtrace.load(write_profile(tmp_path / "cpu.xplane.pb", events)), "bfc_cpu_allocator_for_gpu",
              orders=0, alternatives=False)
    # THEN the GPU's is not checked and says why; the CPU's is checked under TF's default (64 GiB), and says nothing
    assert gpu.reproduced is None and unknown in gpu.assumptions
    assert cpu.reproduced is not None and cpu.reproduced.limit_bytes == 64 << 30 and unknown not in cpu.assumptions


def test_a_limit_asked_alone_claims_nothing_of_the_limits_below_it() -> None:
    # GIVEN the eager Keras recording asked only whether 1 GiB fits (no smallest limit searched)
    trace = memtrace.load(FIXTURES / "fit" / "eager.xplane.pb.gz")
    alone = fit(trace, "bfc_cpu_allocator_for_gpu", limit=1 << 30, orders=0, alternatives=False, smallest=False)
    # THEN no limit was tried but the one asked: nothing says fitting is not monotone, nothing is lost at a smallest
    assert (alone.min_limit_bytes, alone.monotone, alone.counterexample, alone.lost_bytes) == (None, True, None, None)


def test_a_failures_regions_are_numbered_among_all_made_those_given_back_included() -> None:
    # GIVEN growth under 6 MiB with garbage collection: 1.5 MiB takes region 0 (2 MiB) and is freed; 5 MiB does not
    # fit the 4 MiB left, so region 0 is given back and region 1 is 6 MiB, taken whole; then 1 MiB finds no room
    requests = Requests.from_events([("a", 3 * MIB // 2, "first"), ("f", 0), ("a", 5 * MIB, "big"), ("a", MIB, "c")])
    answer = fit_requests(requests, BFCOptions(6 * MIB, allow_growth=True, garbage_collection=True),
                          alternatives=False, smallest=False)
    # THEN the failure's map numbers region 1 second, after the region given back (as the picture draws both)
    failure = answer.failure
    assert failure is not None and failure.row == 3
    assert failure.regions == ((1, 6 * MIB),) and failure.numbers == ((0, 1), (1, 2))


def test_no_smallest_answers_whether_the_limit_fits_in_json_and_asks_for_a_limit(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    trace = str(FIXTURES / "orders" / "steady.r1.xplane.pb.gz")
    out = tmp_path / "fit.json"
    code, _, err = run(capsys, "fit", trace, "--limit", "112MiB", "--no-smallest", "--orders", "4", "--json", "-o",
                       str(out))
    assert code == 1 and err == ""  # TF's ladder: no run of this step completed under 112 MiB
    (answer,) = json.loads(out.read_text())["allocators"]
    assert (answer["smallest_searched"], answer["min_limit_bytes"], answer["band"], answer["fits_every_order"]) == (
        False, None, None, False)
    assert answer["orders_under_limit"]["fitting_orders"] == 0 and answer["orders_under_limit"]["orders"] == 4
    assert all(a["min_limit_bytes"] is None and a["fits"] is not None for a in answer["alternatives"])
    # two recordings of the step: each one's line says it was not searched, and that it does not fit
    code, text, _ = run(capsys, "fit", trace, trace.replace(".r1.", ".r2."), "--limit", "112MiB", "--no-smallest",
                        "--orders", "2", "--no-alternatives")
    assert code == 1 and " ".join(text.split()).count("smallest limit not searched for; does NOT fit the limit") == 2
    for argv in ((trace, "--no-smallest"), (trace, "--no-smallest", "--limit", "1GiB", "--vs", trace)):
        code, output, err = run(capsys, "fit", *argv)
        assert code == 2 and output == "" and "--no-smallest" in err and "Traceback" not in err


def test_fragmentation_verdict_when_enough_bytes_are_free_in_pieces() -> None:
    # 4 x 1024 B fill a 4096 B region; the 1st and 3rd freed: 2048 B free, in two chunks of 1024
    requests = Requests.from_events([("a", 1024), ("a", 1024), ("a", 1024), ("a", 1024), ("f", 0), ("f", 2),
                                     ("a", 2048, "wide")])
    f = fit_requests(requests, BFCOptions(4096, allow_growth=False), alternatives=False).failure
    assert f is not None and (f.row, f.op, f.free_bytes, f.largest_free_bytes) == (6, "wide", 2048, 1024)
    assert f.verdict == "fragmentation" and f.missing_bytes == 0


def test_a_limit_below_the_first_request_is_a_clear_does_not_fit() -> None:
    result = fit_requests(Requests.from_events([("a", 2 * MIB, "first")]), BFCOptions(MIB), alternatives=False)
    f = result.failure
    assert not result.fits and f is not None
    assert (f.row, f.op, f.in_use_bytes, f.pool_bytes, f.free_bytes, f.verdict) == (0, "first", 0, 0, MIB, "exhausted")
    assert result.min_limit_bytes == 2 * MIB


def test_without_a_limit_the_smallest_is_searched_and_what_is_lost_said() -> None:
    result = fit_requests(GROWTH_AT_LIMIT, BFCOptions(0), limit_given=False)
    assert result.fits and result.options.limit_bytes is None and result.min_limit_bytes == 4 * MIB
    # under 4 MiB: 2 MiB (the first chunk, whole) + 512 KiB + 768 KiB in use at the end
    assert result.peak_in_use_bytes == 2 * MIB + 512 * KIB + 768 * KIB
    assert result.lost_bytes == 4 * MIB - result.peak_in_use_bytes
    assert result.requested_peak_bytes == 3 * MIB // 2 + MIB // 2 + 768 * KIB


def test_requests_beyond_what_the_model_holds_are_refused_not_crashed() -> None:
    with pytest.raises(UsageError, match="no limit the model holds"):
        fit_requests(Requests.from_events([("a", 9 << 40)]), BFCOptions(0), limit_given=False)


# -- TF's defaults and GPU limits -----------------------------------------------------------------


def test_tfs_defaults_by_allocator_name() -> None:
    gpu, cpu = defaults_for("GPU_0_bfc"), defaults_for("bfc_cpu_allocator_for_gpu")
    assert (gpu.allow_growth, gpu.garbage_collection, gpu.limit_bytes) == (False, True, None)
    assert (cpu.allow_growth, cpu.garbage_collection, cpu.limit_bytes) == (True, False, 65536 * MIB)
    # the pinned host allocator (process_state.cc): growth on, TF_GPU_HOST_MEM_LIMIT_IN_MB default 2^17 MiB
    host = defaults_for("cuda_host_bfc")
    assert (host.allow_growth, host.garbage_collection, host.limit_bytes) == (True, False, 131072 * MIB)


@pytest.mark.parametrize(("free", "major", "reserve_mib"), [
    (16 << 30, 6, 500), (16 << 30, 7, 1050), (16 << 30, 8, 1536), (80 << 30, 9, 1800), (1 << 30, 8, 225)])
def test_gpu_limit_is_free_memory_minus_tfs_reserve(free: int, major: int, reserve_mib: int) -> None:
    # gpu_device.cc, MinSystemMemory: 225 MiB under 2 GiB, else by compute capability
    assert gpu_limit_bytes(free, major) == free - reserve_mib * MIB


# -- the self-check on a hand-made profile from the allocator's birth -----------------------------

BASE = 0x7F00_0000_0000  # where the "system" put region 0


# Growth from birth: region 0 is 2 MiB. 1000 B -> 1024 at 0; 2000 B -> 2048 at 1024; the first
# freed (free: 1024 at 0 and the rest at 3072); 512 B -> the smallest chunk that fits, 1024 at 0, split.
F0 = 2 * MIB
BIRTH = [
    (True, 1000, 1024, BASE, 1024, 0.0, "a"),
    (True, 2000, 2048, BASE + 1024, 3072, 0.0, "b"),
    (False, 1000, 1024, BASE, 2048, float(f"{1024 / (F0 - 2048):.6g}"), ""),
    (True, 512, 512, BASE, 2560, float(f"{512 / (F0 - 2560):.6g}"), "c"),
]


def test_a_profile_from_birth_is_reproduced_event_by_event(tmp_path: Path) -> None:
    path = tmp_path / "birth.xplane.pb"
    path.write_bytes(_profile(BIRTH).SerializeToString())
    trace = memtrace.load(path)
    found = requests_for(trace, "bfc_cpu_allocator_for_gpu")
    assert found.from_birth and found.bytes_before == 0 and found.assumptions == ()
    assert found.requests.requested_bytes.tolist() == [1000, 2000, 0, 512]
    assert found.requests.frees.tolist() == [-1, -1, 0, -1]
    p = fit(trace, "bfc_cpu_allocator_for_gpu", alternatives=False).reproduced
    assert p is not None and p.exact and p.first_difference is None
    assert (p.allocations, p.addresses_equal, p.events, p.fragmentation_equal) == (3, 3, 4, 4)


def test_the_self_check_counts_what_differs(tmp_path: Path) -> None:
    # GIVEN the last chunk placed at 512 instead of 0, and the free's fragmentation value changed
    wrong = [*BIRTH[:2], (*BIRTH[2][:5], 0.25, ""), (True, 512, 512, BASE + 512, 2560, BIRTH[3][5], "c")]
    path = tmp_path / "wrong.xplane.pb"
    path.write_bytes(_profile(wrong).SerializeToString())
    p = fit(memtrace.load(path), "bfc_cpu_allocator_for_gpu", alternatives=False).reproduced
    assert p is not None and not p.exact
    assert (p.addresses_equal, p.chunks_equal, p.fragmentation_equal, p.bytes_in_use_equal) == (2, 3, 3, 4)
    assert p.first_difference is not None and p.first_difference.startswith("event 2 (free)")


def test_the_first_difference_may_be_an_address_alone(tmp_path: Path) -> None:
    # GIVEN the last chunk at 512 where the model puts it at 0, its size, bytes in use and fragmentation the model's
    moved = [*BIRTH[:3], (True, 512, 512, BASE + 512, 2560, BIRTH[3][5], "c")]
    p = fit(memtrace.load(write_profile(tmp_path / "moved.xplane.pb", moved)), "bfc_cpu_allocator_for_gpu",
            alternatives=False).reproduced
    # THEN that address is the one difference, and the first
    assert p is not None and (p.addresses_equal, p.chunks_equal, p.fragmentation_equal, p.bytes_in_use_equal) == (
        2, 3, 4, 4)
    assert p.first_difference is not None and p.first_difference.startswith("event 3 (allocation)")


def test_the_regions_compared_are_those_of_the_order_learned_where_the_order_moves_them() -> None:
    from memtrace.allocator.reproduce import reproduce
    from memtrace.allocator.requests import TraceRequests

    # GIVEN a sequence whose third region TF's growth makes at another request by the regions' address order: row 9
    # with equal free chunks taken from the lower regions first (ascending), row 8 with the higher ones (descending)
    events = [("a", 786432), ("a", 2097152), ("f", 0), ("a", 524288), ("a", 262144), ("f", 4), ("a", 786432),
              ("f", 1), ("a", 4194304), ("a", 4194304), ("a", 2097152), ("f", 8), ("f", 10), ("f", 9), ("a", 262144),
              ("a", MIB), ("f", 6), ("f", 3), ("a", 1572864), ("a", 262144), ("a", 2097152)]
    requests = Requests.from_events(events)
    assert bfc.simulate(requests, BFCOptions(64 << 30)).region_rows == (0, 1, 9)
    # AND a profile of an allocator that laid its regions out downwards (mmap), each at 64 GiB below the last
    truth = bfc.simulate(requests, BFCOptions(64 << 30, regions_descending=True))
    assert truth.region_rows == (0, 1, 8)
    base = np.array([(1 << 46) - (r << 36) for r in range(3)], dtype=np.int64)
    found = TraceRequests("bfc", requests, "profile", True, 0, 0, (), np.where(truth.region >= 0, base[truth.region.clip(0)]
                          + truth.offset, 0), truth.chunk_bytes, truth.bytes_in_use,
                          np.array([float(f"{v:.6g}") for v in truth.fragmentation.tolist()]))
    # THEN the self-check, which starts from the ascending order, learns the descending one and compares the regions
    # that order makes (the addresses of rows 0, 1 and 8 are the bases): every event as the profile says
    check = reproduce(found, BFCOptions(64 << 30))
    assert check.exact and check.regions_descending and check.region_order == ()


def test_a_full_pool_has_no_fragmentation_value_and_only_nan_matches_it(tmp_path: Path) -> None:
    # GIVEN a first request of 2 MiB: growth makes region 0 of 2 MiB and hands all of it out, so nothing is free and
    # TF's fragmentation, (free - largest free) / free, is 0/0: NaN
    for recorded, equal in ((float("nan"), 1), (0.0, 0), (1.0, 0)):
        full = [(True, F0, F0, BASE, F0, recorded, "all")]
        p = fit(memtrace.load(write_profile(tmp_path / "full.xplane.pb", full)), "bfc_cpu_allocator_for_gpu",
                alternatives=False).reproduced
        # THEN a NaN in the profile matches, any number does not
        assert p is not None and (p.addresses_equal, p.fragmentation_equal) == (1, equal)


def test_a_profile_that_starts_later_says_what_is_assumed() -> None:
    found = requests_for(memtrace.load(KERAS_CNN), "CPU:0" and "bfc_cpu_allocator_for_gpu")
    # its first event frees a chunk allocated before the profile: bytes in use after it + its size
    assert not found.from_birth and found.bytes_before > 0 and found.dropped_frees > 0
    assert found.assumptions and "starts after the allocator's birth" in found.assumptions[0]
    assert fit(memtrace.load(KERAS_CNN), "bfc_cpu_allocator_for_gpu", alternatives=False).reproduced is None


# -- the command, the API, check and testing ------------------------------------------------------


def test_cli_exit_codes_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "fit", str(ALEXNET), "--allocator", "GPU:0", "--limit", "1GiB", "--json")
    doc = json.loads(out)
    assert code == 1 and doc["schema"] == "memtrace.fit/1"
    entry = doc["allocators"][0]
    assert entry["allocator"] == "GPU_0_bfc" and entry["fits"] is False
    assert entry["options"] == {"limit_bytes": 1 << 30, "allow_growth": False, "garbage_collection": True,
                                "fragmentation_fraction": 0.0, "partitioned": False, "gap_split": None}
    assert entry["reproduced"] is None and entry["failure"]["verdict"] in ("exhausted", "fragmentation")
    assert entry["min_limit_bytes"] > 1 << 30
    code, out, _ = run(capsys, "fit", str(ALEXNET), "--limit", f"{entry['min_limit_bytes']}")
    assert code == 0 and "fits" in out
    code, out, _ = run(capsys, "fit", str(ALEXNET), "--limit", f"{entry['min_limit_bytes'] - MIB}")
    assert code == 1 and "does NOT fit" in out


@pytest.mark.parametrize(("argv", "says"), [
    (["--limit=-1GiB"], "must not be negative"),
    (["--fragmentation-fraction", "1.5"], "between 0 and 1"),
    (["--fragmentation-fraction=-0.1"], "between 0 and 1"),
    (["--allocator", "nope"], "no allocator 'nope'"),
    (["--allocator", "cpu"], "no allocation records"),
    (["--card", "16GB", "--compute-capability", "eight"], "not a compute capability"),
])
def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str], says: str) -> None:
    code, out, err = run(capsys, "fit", str(ALEXNET), *argv)
    assert code == 2 and out == "" and says in err and err.count("\n") == 1


def test_card_gives_tfs_limit(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "fit", str(ALEXNET), "--card", "16GiB", "--compute-capability", "7.5", "--json",
                       "--no-alternatives")
    assert code == 0 and json.loads(out)["allocators"][0]["options"]["limit_bytes"] == (16 << 30) - 1050 * MIB


def test_api_testing_and_check_agree() -> None:
    trace = memtrace.load(ALEXNET)
    smallest = trace.fit("GPU:0", alternatives=False).min_limit_bytes
    assert trace.fit("GPU:0", smallest, alternatives=False).fits
    assert not trace.fit("GPU:0", smallest - MIB, alternatives=False).fits
    memtrace.testing.assert_fits(trace, "GPU:0", smallest)
    with pytest.raises(AssertionError, match="does not fit"):
        memtrace.testing.assert_fits(trace, "GPU:0", smallest - MIB)
    with pytest.raises(UsageError, match="negative"):
        trace.fit("GPU:0", -1)


def test_check_fits_key(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    budget = tmp_path / "budget.toml"
    budget.write_text('["GPU:0"]\nfits = "1GiB"\n')
    code, out, _ = run(capsys, "check", str(ALEXNET), "--budget", str(budget))
    assert code == 1 and "GPU:0 (GPU_0_bfc) fits: does not fit under 1 GiB" in out
    code, _, _ = run(capsys, "check", str(ALEXNET), "--fits", "GPU:0=2GiB")
    assert code == 0


# -- TF's own out-of-memory dumps (fixtures/oom, recorded by scripts/record_traces.py oom) ---------
#
# The programs are eager and tiny; their request sequences are read from the script and from the
# chunks the dumps show: a small scalar first (the dumps' 256-byte chunk), then the tensors.


def _map(regions: list[tuple[int, list[tuple[int, bool]]]]) -> list[tuple[int, tuple[tuple[int, bool], ...]]]:
    """Regions as (size, chunks in address order), sorted: the dump lists regions by address, the model by creation."""
    return sorted((size, tuple(chunks)) for size, chunks in regions)


def _dump_map(dump: object) -> list[tuple[int, tuple[tuple[int, bool], ...]]]:
    return _map([(r.size_bytes, [(c.size_bytes, c.in_use) for c in r.chunks]) for r in dump.regions])  # type: ignore[attr-defined]


def _model_map(f: object) -> list[tuple[int, tuple[tuple[int, bool], ...]]]:
    regions = dict(f.regions)  # type: ignore[attr-defined]
    chunks: dict[int, list[tuple[int, bool]]] = {r: [] for r in regions}
    for c in f.chunks:  # type: ignore[attr-defined]
        chunks[c.region].append((c.size_bytes, c.in_use))
    return _map([(regions[r], chunks[r]) for r in regions])


def test_model_meets_tfs_dump_when_memory_is_exhausted() -> None:
    from memtrace.read.oom import load_oom_dumps

    # oom_exhausted: ones([1024, 1024]) and ones([2048, 1024]) kept (4 and 8 MiB), then ones([4096, 4096]): 64 MiB
    requests = Requests.from_events([("a", 8), ("a", 4 * MIB, "Fill"), ("a", 8 * MIB, "Fill"), ("a", 64 * MIB, "Fill")])
    f = fit_requests(requests, BFCOptions(32 * MIB), alternatives=False).failure  # TF_CPU_BFC_MEM_LIMIT_IN_MB=32
    (logged,) = load_oom_dumps(str(FIXTURES / "oom" / "cpu_exhausted.log"))
    (dumped,) = load_oom_dumps(str(FIXTURES / "oom" / "cpu_exhausted.memdump.pb"))
    assert f is not None and (f.row, f.op, f.request_bytes) == (3, logged.op, logged.request_bytes)
    assert _model_map(f) == _dump_map(logged) == _dump_map(dumped)
    assert f.in_use_bytes == dumped.stats.in_use_bytes and f.verdict == "exhausted"


def test_model_meets_tfs_dumps_when_memory_is_fragmented() -> None:
    from memtrace.read.oom import load_oom_dumps

    first, second = load_oom_dumps(str(FIXTURES / "oom" / "cpu_fragmented.log"))
    (dumped,) = load_oom_dumps(str(FIXTURES / "oom" / "cpu_fragmented.memdump.pb"))
    # oom_fragmented under 64 MiB: 1 MiB blocks until one is refused. Regions of 2, 4, 8, 16, 32 MiB
    # and the last 2 MiB the limit leaves: 1 + 4 + 8 + 16 + 32 + 2 = 63 blocks (the first takes what
    # the scalar left of region 0 whole: 2,096,896 < 2 x 1 MiB), and the 64th fails.
    blocks = [("a", 4)] + [("a", MIB, "Fill")] * 64
    f = fit_requests(Requests.from_events(blocks), BFCOptions(64 * MIB), alternatives=False).failure
    assert f is not None and (f.row, f.op, f.request_bytes) == (64, first.op, first.request_bytes)
    assert _model_map(f) == _dump_map(first)
    # then every other block freed (blocks[::2] kept: rows 2, 4, ... freed) and 2 MiB asked: no chunk is large enough
    after = blocks[:64] + [("f", row) for row in range(2, 64, 2)] + [("a", 2 * MIB, "Fill")]
    g = fit_requests(Requests.from_events(after), BFCOptions(64 * MIB), alternatives=False).failure
    assert g is not None and (g.op, g.request_bytes) == (second.op, second.request_bytes)
    assert _model_map(g) == _dump_map(second) == _dump_map(dumped)
    assert (g.largest_free_bytes, g.verdict) == (MIB, "fragmentation")
    assert g.in_use_bytes == dumped.stats.in_use_bytes


def test_the_self_check_runs_under_the_limit_the_profiles_events_show() -> None:
    # GIVEN TF's CPU BFC run under TF_CPU_BFC_MEM_LIMIT_IN_MB=50 (fixtures/oom/cpu_regions.py): its last
    # region is cut to what the 50 MiB limit leaves, which TF's default 65,536 MiB would not cut
    path = FIXTURES / "oom" / "cpu_regions_50mib.xplane.pb.gz"
    trace = memtrace.load(path)
    assert trace.recorded_limit("bfc_cpu_allocator_for_gpu") == 50 * MIB  # bytes_available + bytes_allocated
    # WHEN fit is given no recorded limit
    result = fit(trace, "bfc_cpu_allocator_for_gpu", alternatives=False)
    # THEN it replays under the events' 50 MiB, says so, and reproduces every decision of the allocator
    r = result.reproduced
    assert r is not None and r.limit_bytes == 50 * MIB and r.exact and r.first_difference is None
    assert (r.allocations, r.chunks_equal, r.events, r.bytes_in_use_equal) == (21, 21, 35, 35)
    assert any("the limit the profile's events show (52,428,800 bytes" in note for note in result.assumptions)
    # AND a profile recorded under TF's default limit says nothing more than before
    default = fit(memtrace.load(FIXTURES / "profiles" / "cpu_bfc_regions.xplane.pb.gz"), "bfc_cpu_allocator_for_gpu",
                  alternatives=False)
    assert default.reproduced is not None and default.reproduced.limit_bytes == 65536 * MIB
    assert not any("events show" in note for note in default.assumptions)


# -- limits at the edges: 0, beyond what the model holds, a recorded limit that wraps (issue 36) ---------------


@pytest.fixture()
def birth(tmp_path: Path) -> Path:
    """The hand-made profile from the allocator's birth (3 KiB at most in use, 1 MiB its smallest limit)."""
    return write_profile(tmp_path / "birth.xplane.pb", BIRTH)


@pytest.mark.parametrize("argv", [["--limit", "0"], ["--limit", "0B"], ["--limit", "0.4B"], ["--card", "0"],
                                  ["--card", "0.2"]])
def test_a_limit_of_0_does_not_fit(capsys: pytest.CaptureFixture[str], birth: Path, argv: list[str]) -> None:
    # GIVEN a step whose first request is 1000 bytes WHEN asked about a limit of 0 bytes (as written, rounded,
    # or a card of 0 bytes) THEN it does not fit: 0 is a limit, not "no limit"
    code, out, _ = run(capsys, "fit", str(birth), *argv, "--json", "--no-alternatives")
    entry = json.loads(out)["allocators"][0]
    assert code == 1 and entry["fits"] is False and entry["options"]["limit_bytes"] == 0
    assert entry["failure"]["event"] == 0 and entry["min_limit_bytes"] == MIB


def test_a_limit_of_0_does_not_fit_in_the_api_check_budgets_and_assertions(capsys: pytest.CaptureFixture[str],
                                                                          birth: Path, tmp_path: Path) -> None:
    trace = memtrace.load(birth)
    assert not trace.fit("CPU:0", 0, alternatives=False).fits
    assert not fit(trace, "bfc_cpu_allocator_for_gpu", limit=0, alternatives=False).fits
    with pytest.raises(AssertionError, match="does not fit under 0 B"):
        memtrace.testing.assert_fits(trace, "CPU:0", 0)
    with pytest.raises(AssertionError, match="does not fit under 0 B"):
        memtrace.testing.assert_fits(trace, "CPU:0", "0B")
    code, out, _ = run(capsys, "check", str(birth), "--fits", "CPU:0=0")
    assert code == 1 and "FAIL" in out
    budget = tmp_path / "budget.toml"
    budget.write_text('["CPU:0"]\nfits = "0B"\n')
    code, out, _ = run(capsys, "check", str(birth), "--budget", str(budget), "--json")
    assert code == 1 and json.loads(out)["budgets"][0]["passed"] is False
    # and fit_requests replays a limit of 0 as asked unless told no limit was given
    zero = fit_requests(Requests.from_events([("a", 1000)]), BFCOptions(0), alternatives=False)
    assert not zero.fits and zero.options.limit_bytes == 0 and zero.failure is not None and zero.failure.row == 0


def test_a_recorded_limit_above_what_the_model_holds_is_one_line(capsys: pytest.CaptureFixture[str],
                                                                 birth: Path) -> None:
    code, out, err = run(capsys, "fit", str(birth), "--recorded-limit", "9TiB")
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert "9,895,604,649,984 bytes is above what the model holds (at most 8,796,093,022,208 bytes" in err
    with pytest.raises(UsageError, match="above what the model holds"):
        memtrace.load(birth).fit("CPU:0", recorded_limit="9TiB")


def test_a_recorded_limit_that_wraps_is_no_limit_to_check_against(capsys: pytest.CaptureFixture[str],
                                                                 tmp_path: Path) -> None:
    # GIVEN a profile whose bytes_available + bytes_allocated is 2^63 in every event (past int64: it wraps)
    path = write_profile(tmp_path / "wraps.xplane.pb", BIRTH, available=lambda in_use: (1 << 63) - in_use)
    trace = memtrace.load(path)
    assert trace.recorded_limit("bfc_cpu_allocator_for_gpu") == 1 << 63  # read whole, not wrapped to -2^63
    # WHEN fit and check --fits read it THEN they answer, without the self-check, and say why
    code, out, _ = run(capsys, "fit", str(path), "--no-alternatives")
    assert code == 0 and "smallest limit: 1 MiB" in out and "self-check:" not in out
    assert ("(9,223,372,036,854,775,808 bytes: bytes_available + bytes_allocated) is beyond what the model holds"
            in " ".join(out.split()))
    code, out, _ = run(capsys, "check", str(path), "--fits", "CPU:0=1GiB")
    assert code == 0 and "PASS" in out
    # AND --recorded-limit still runs the self-check under the limit given
    p = fit(trace, "bfc_cpu_allocator_for_gpu", recorded_limit=65536 * MIB, alternatives=False).reproduced
    assert p is not None and p.exact


NINE_TIB = 9 << 40
HUGE = [(True, NINE_TIB, NINE_TIB, BASE, NINE_TIB, 0.0, "huge")]


def test_a_request_beyond_the_model_under_a_limit_does_not_fit(capsys: pytest.CaptureFixture[str],
                                                               tmp_path: Path) -> None:
    # GIVEN one 9 TiB request (more than any limit the model holds, 8 TiB) WHEN asked about 1 MiB
    path = write_profile(tmp_path / "huge.xplane.pb", HUGE)
    code, out, err = run(capsys, "fit", str(path), "--limit", "1MiB", "--json")
    # THEN it does not fit (exit 1): the first request fails, and there is no smallest limit
    entry = json.loads(out)["allocators"][0]
    assert code == 1 and err == "" and entry["fits"] is False and entry["min_limit_bytes"] is None
    assert entry["failure"]["request_bytes"] == NINE_TIB and entry["failure"]["op"] == "huge"
    code, out, _ = run(capsys, "fit", str(path), "--limit", "1MiB")
    assert code == 1 and "smallest limit: none that the model holds (up to 8 TiB) fits" in out
    code, out, _ = run(capsys, "check", str(path), "--fits", "CPU:0=1MiB")
    assert code == 1 and "none <= 8 TiB" in out and "no limit the model holds (8 TiB) fits" in " ".join(out.split())
    # AND without a limit there is nothing to find: refused in one line naming the file
    code, out, err = run(capsys, "fit", str(path))
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert err.startswith(f"memtrace: error: {path}: bfc_cpu_allocator_for_gpu: no limit the model holds fits")


def test_a_budget_limit_beyond_the_model_is_refused_naming_the_file_and_table(capsys: pytest.CaptureFixture[str],
                                                                              birth: Path, tmp_path: Path) -> None:
    budget = tmp_path / "budget.toml"
    budget.write_text('["CPU:0"]\nfits = "9TiB"\n')
    code, out, err = run(capsys, "check", str(birth), "--budget", str(budget))
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert err.startswith(f"memtrace: error: {budget}: [CPU:0] fits 9 TiB (9,895,604,649,984 bytes) is above what")


def test_check_fits_escapes_the_failing_ops_name(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # GIVEN an op name with ESC, BEL, CR and LF (a forged PASS line) WHEN its request fails under check --fits
    hostile = "evil\x1b[2J\x07\rPASS: 1 of 1 budget passed\nok"
    path = write_profile(tmp_path / "hostile.xplane.pb", [(True, 4 * MIB, 4 * MIB, BASE, 4 * MIB, 0.0, hostile)])
    code, out, _ = run(capsys, "check", str(path), "--fits", "CPU:0=1MiB")
    # THEN the note shows the name escaped, and nothing reaches the terminal raw
    assert code == 1 and "evil\\x1b[2J\\x07\\x0dPASS: 1 of 1 budget passed\\x0aok" in " ".join(out.split())
    assert not any(c in out for c in "\x1b\x07\r") and "\nPASS" not in out and "\nok" not in out
    with pytest.raises(AssertionError) as failed:
        memtrace.testing.assert_fits(str(path), "CPU:0", "1MiB")
    assert "\x1b" not in str(failed.value) and "evil\\x1b" in str(failed.value)


# -- --card limits the GPU's allocators, not the pinned host allocator (issue 36) ---------------------------


def test_card_leaves_the_pinned_host_allocator_its_own_limit(capsys: pytest.CaptureFixture[str],
                                                             tmp_path: Path) -> None:
    # GIVEN TF's pinned host allocator holding 20 GiB of input batches (host RAM, not the card's memory)
    path = write_profile(tmp_path / "host.xplane.pb", [(True, 20 << 30, 20 << 30, BASE, 20 << 30, 0.0, "batches")],
                         allocator="cuda_host_bfc")
    # WHEN asked whether the step fits a 16 GB card
    code, out, _ = run(capsys, "fit", str(path), "--card", "16GB", "--json", "--no-alternatives")
    entry = json.loads(out)["allocators"][0]
    # THEN the host allocator keeps TF_GPU_HOST_MEM_LIMIT_IN_MB's 131,072 MiB, fits, and a note says why
    assert code == 0 and entry["fits"] is True and entry["options"]["limit_bytes"] == 131072 * MIB
    assert any("cuda_host_bfc holds pinned host memory (RAM), so it keeps its own limit, TF_GPU_HOST_MEM_LIMIT_IN_MB"
               in note for note in entry["assumptions"])
    code, out, _ = run(capsys, "fit", str(path), "--card", "16GB", "--no-alternatives")
    assert code == 0 and "under 131,072 MiB: fits" in out and "limits the GPU's allocators only" in " ".join(out.split())
    # AND XLA's host allocator keeps XLA's own (64 GiB); a GPU allocator takes the card's
    from memtrace.allocator.defaults import limit_on_card

    assert limit_on_card("xla_gpu_host_bfc", "XLA", 16 * 10**9, 8)[0] == 64 << 30
    assert limit_on_card("GPU_0_bfc", "TensorFlow", 16 * 10**9, 8) == (16 * 10**9 - 1536 * MIB, None)


def test_an_allocator_that_only_frees_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a profile whose allocator's only event frees a chunk allocated before the profile began
    path = write_profile(tmp_path / "frees.xplane.pb", [(False, 0, 256, 4096, 0, 0.0, "")])
    # WHEN fit is asked about it
    code, out, err = run(capsys, "fit", str(path))
    # THEN there is nothing to fit: one line naming the file and the allocator, exit 2
    assert code == 2 and out == ""
    assert err.strip() == (f"memtrace: error: {path}: the allocator 'bfc_cpu_allocator_for_gpu' made no allocations "
                           "in this trace: nothing to fit")


def test_the_requests_of_a_stepstats_trace_worked_by_hand() -> None:
    # GIVEN fixtures/tiny/frag_bfc.pbtxt, worked in its header: gpu_bfc's records, the step starting at 100 us:
    # +1024 a@101 (a's output, 1,000 requested), +512 a@102 (a temporary: no output, its chunk stands for the
    # request), -512 a@105, +1024 b@121 (b's output, 300 requested), -1024 a@150, +8192 e@161 (4,096 requested),
    # -1024 b@200
    found = requests_for(memtrace.load(FIXTURES / "tiny" / "frag_bfc.pbtxt"), "gpu_bfc")
    q = found.requests
    # THEN the requests are the outputs' requested bytes (the temporary's chunk), each free names its allocation's
    # row, and the times are from the step's start
    assert q.is_alloc.tolist() == [True, True, False, True, False, True, False]
    assert q.requested_bytes[q.is_alloc].tolist() == [1000, 512, 300, 4096]
    assert q.frees[~q.is_alloc].tolist() == [1, 0, 3]
    assert q.time_ns.tolist() == [1000, 2000, 5000, 21000, 50000, 61000, 100000]
    assert [q.op_names[i] for i in q.op[q.is_alloc].tolist()] == ["a", "a", "b", "e"]
    assert (found.source, found.from_birth, found.dropped_frees) == ("records", False, 0)


def test_the_first_difference_is_the_first_event_the_model_gets_wrong_in_any_count(tmp_path: Path) -> None:
    from memtrace.allocator.reproduce import reproduce

    # GIVEN a from-birth profile whose allocator says 768 bytes in use after its second 256-byte chunk (its addresses,
    # chunks and fragmentation are the model's: both chunks in the first 2 MiB region, side by side, no hole)
    at = 1 << 30
    events = [(True, 256, 256, at, 256, 0.0, "a"), (True, 256, 256, at + 256, 768, 0.0, "b"),
              (False, 256, 256, at + 256, 512, 0.0, "")]
    found = requests_for(memtrace.load(write_profile(tmp_path / "off.xplane.pb", events)), "bfc_cpu_allocator_for_gpu")
    check = reproduce(found, BFCOptions(1 << 30))
    # THEN every address and chunk is the model's, the bytes in use of the first event only, and the first
    # difference is the second event's bytes in use
    assert (check.addresses_equal, check.chunks_equal, check.bytes_in_use_equal, check.fragmentation_equal) == (2, 2, 1, 3)
    assert check.first_difference == ("event 1 (allocation): the trace says chunk 256 B at region offset 256, 768 B in "
                                      "use, fragmentation 0; the model 256 B at 256, 512 B, 0")
    assert not check.exact
    # AND where the model runs out of memory first (a second chunk of 1 KiB, one region of 512 bytes), that is it
    events = [(True, 256, 256, at, 256, 0.0, "a"), (True, 1024, 1024, at + 256, 1280, 0.0, "b")]
    bigger = requests_for(memtrace.load(write_profile(tmp_path / "big.xplane.pb", events)), "bfc_cpu_allocator_for_gpu")
    under = reproduce(bigger, BFCOptions(512, allow_growth=False))
    assert under.first_difference == "event 1: the model runs out of memory there, the allocator did not"


@pytest.mark.parametrize(("counts", "exact"), [
    ((2, 2, 2, 4, 4, 4), True),  # every address, chunk, bytes in use and fragmentation value
    ((2, 2, 2, 4, 4, 3), False),  # one fragmentation value differs
    ((2, 2, 2, 4, 3, 4), False),  # one bytes-in-use value differs
    ((2, 1, 2, 4, 4, 4), False),  # one address differs
    ((2, 2, 1, 4, 4, 4), False),  # one chunk differs
])
def test_a_reproduction_is_exact_only_where_every_event_is(counts: tuple[int, ...], exact: bool) -> None:
    allocations, addresses, chunks, events, in_use, fragmentation = counts
    sim = bfc.simulate(Requests.from_events([("a", 256), ("a", 256), ("f", 0), ("f", 1)]), BFCOptions(MIB))
    found = Reproduction(allocations, addresses, chunks, events, in_use, fragmentation, False, (), MIB, None, sim)
    assert found.exact is exact


def records_asked(nodes: list[tuple[str, int, int]]) -> str:
    """A StepStats trace of "gpu_bfc": per node (name, bytes its record took, bytes its output said it asked for),
    one 20 us after the other."""
    text = ""
    for k, (name, took, asked) in enumerate(nodes):
        start = 100 + 20 * k
        text += (f'  node_stats {{ node_name: "{name}" all_start_micros: {start} all_end_rel_micros: 10\n'
                 f'    memory {{ allocator_name: "gpu_bfc" allocation_records {{ alloc_micros: {start + 1} '
                 f'alloc_bytes: {took} }} }}\n'
                 f'    output {{ slot: 0 tensor_description {{ dtype: DT_FLOAT allocation_description {{ '
                 f'requested_bytes: {asked} allocated_bytes: {took} allocator_name: "gpu_bfc" allocation_id: {k + 1} '
                 f'ptr: {65536 + 4096 * k} }} }} }}\n  }}\n')
    return f'dev_stats {{\n  device: "/job:localhost/replica:0/task:0/device:GPU:0"\n{text}}}\n'


def test_a_records_requests_are_what_its_outputs_asked_where_known_and_within_the_chunk(tmp_path: Path) -> None:
    # GIVEN a StepStats trace: three allocation records whose outputs said they asked for 0 bytes (unknown), for 4 KiB
    # (more than the 2 KiB the record took: not what the allocator was asked) and for 300 bytes of 512
    path = tmp_path / "asked.pbtxt"
    path.write_text(records_asked([("unknown_size", 1024, 0), ("asks_more", 2048, 4096), ("asks_less", 512, 300)]))
    found = requests_for(memtrace.load(path), "gpu_bfc")
    # THEN each request is the output's where it is known and no more than the record's bytes, else the record's
    assert found.source == "records"
    assert found.requests.requested_bytes.tolist() == [1024, 2048, 300]


def stepstats_node(name: str, start: int, records: list[tuple[int, int]],
                   outputs: list[tuple[int, int, int, int]]) -> str:
    """One node of a StepStats trace of "gpu_bfc": its allocation records (micros, bytes; negative: a free) and its
    outputs (requested bytes, allocated bytes, allocation id, pointer)."""
    recs = "".join(f"allocation_records {{ alloc_micros: {t} alloc_bytes: {b} }} " for t, b in records)
    outs = "".join(f"output {{ slot: {slot} tensor_description {{ dtype: DT_FLOAT allocation_description {{ "
                   f"requested_bytes: {asked} allocated_bytes: {took} allocator_name: \"gpu_bfc\" "
                   f"allocation_id: {aid} ptr: {ptr} }} }} }} " for slot, (asked, took, aid, ptr) in enumerate(outputs))
    return (f'  node_stats {{ node_name: "{name}" all_start_micros: {start} all_end_rel_micros: 10 '
            f'memory {{ allocator_name: "gpu_bfc" {recs}}} {outs}}}\n')


def test_a_records_trace_is_the_request_sequence_worked_by_hand(tmp_path: Path) -> None:
    # GIVEN a StepStats trace (the step starts at 100 us): a takes 1 KiB for an output that asked 1,000 bytes and frees
    # it at 150 us; b takes 512 B for an output that asked 300 and 256 B for no output; z's record is of 0 bytes (no
    # chunk); y's of 1 byte, for no output; w frees 2 KiB that no record of the step allocated
    path = tmp_path / "step.pbtxt"
    path.write_text('dev_stats {\n  device: "/job:localhost/replica:0/task:0/device:GPU:0"\n'
                    + stepstats_node("a", 100, [(101, 1024), (150, -1024)], [(1000, 1024, 1, 65536)])
                    + stepstats_node("b", 120, [(121, 512), (122, 256)], [(300, 512, 2, 69632)])
                    + stepstats_node("z", 130, [(131, 0)], []) + stepstats_node("y", 140, [(141, 1)], [])
                    + stepstats_node("w", 144, [(145, -2048)], []) + "}\n")
    found = requests_for(memtrace.load(path), "gpu_bfc")
    q = found.requests
    # THEN one row per record in time order: four allocations (the outputs' requests where known, else the records'
    # bytes), the 0-byte record a row that allocates nothing, the unknown chunk's free a row that frees nothing
    # (dropped, and counted), a's free naming a's row; requests 0 on every row that is not an allocation
    assert q.is_alloc.tolist() == [True, True, True, False, True, False, False]
    assert q.requested_bytes.tolist() == [1000, 300, 256, 0, 1, 0, 0]
    assert q.frees.tolist() == [-1, -1, -1, -1, -1, -1, 0]
    assert q.time_ns.tolist() == [1_000, 21_000, 22_000, 31_000, 41_000, 45_000, 50_000]
    assert [q.op_names[c] if c >= 0 else None for c in q.op.tolist()] == ["a", "b", "b", None, "y", None, None]
    assert (found.source, found.from_birth, found.bytes_before, found.dropped_frees) == ("records", False, 0, 1)
    # AND what it assumed says so: the step's start, the dropped free, the two allocations that match no output
    assert found.assumptions == (
        ("a StepStats trace starts after the allocator's birth: the model starts from an empty allocator with only the "
        "step's requests (what was in use before the step is left out), and drops 1 frees of chunks allocated before "
        "the step"),
        "2 of the allocations match no output, so their chunk size (from allocation_records) stands for the request")
    # AND where every allocation matches an output, only the step's start is said
    every = tmp_path / "every.pbtxt"
    every.write_text(records_asked([("x", 1024, 1000), ("y", 512, 300)]))
    assert len(requests_for(memtrace.load(every), "gpu_bfc").assumptions) == 1


def test_an_output_that_asked_one_byte_is_a_request_of_one_byte(tmp_path: Path) -> None:
    # GIVEN a StepStats trace whose one output asked 1 byte of its 256-byte chunk (the least any request asks)
    path = tmp_path / "one.pbtxt"
    path.write_text(records_asked([("tiny", 256, 1)]))
    # THEN the request is that 1 byte, not the chunk
    assert requests_for(memtrace.load(path), "gpu_bfc").requests.requested_bytes.tolist() == [1]


def test_a_profile_that_starts_with_a_free_counts_the_bytes_in_use_before_it(tmp_path: Path) -> None:
    # GIVEN a profile whose first event frees 512 B of a chunk from before it, leaving 1,024 B in use; then an
    # allocation of 256 B, freed
    path = write_profile(tmp_path / "late.xplane.pb", [
        (False, 0, 512, 4096, 1024, 0.0, ""), (True, 256, 256, 8192, 1280, 0.0, "a"),
        (False, 0, 256, 8192, 1024, 0.0, "")])
    found = requests_for(memtrace.load(path), "bfc_cpu_allocator_for_gpu")
    # THEN 1,536 B were in use before it (1,024 after the free, and the 512 it freed), the free is dropped
    assert (found.from_birth, found.bytes_before, found.dropped_frees) == (False, 1536, 1)
    assert found.requests.frees.tolist() == [-1, -1, 1]
    assert found.assumptions == (
        ("the profile starts after the allocator's birth (1,536 bytes were in use before its first event): the model "
        "starts from an empty allocator with only the profile's requests, and drops 1 frees of chunks allocated "
        "before it"),)


def test_every_allocator_of_a_profile_is_fitted_by_default_and_an_unknown_one_is_refused(tmp_path: Path) -> None:
    from memtrace.allocator.requests import bfc_allocators

    # GIVEN a profile of an allocator not named like BFC (only BFC allocators write a profile's memory events)
    path = write_profile(tmp_path / "pool.xplane.pb", [(True, 256, 256, 8192, 256, 0.0, "a")], allocator="mem_pool")
    trace = memtrace.load(path)
    # THEN it is fitted by default; a StepStats trace's are those named like BFC with records
    assert bfc_allocators(trace) == ["mem_pool"]
    every = tmp_path / "every.pbtxt"
    every.write_text(records_asked([("x", 1024, 1000)]))
    assert bfc_allocators(memtrace.load(every)) == ["gpu_bfc"]
    # AND an allocator the trace does not have is refused, naming the file and the allocators it has
    with pytest.raises(UsageError) as refused:
        requests_for(trace, "GPU_0_bfc")
    assert str(refused.value) == f"{path}: no allocator 'GPU_0_bfc' in this trace (it has: mem_pool)"


def test_a_profile_whose_free_records_disagree_with_its_frees_is_refused(tmp_path: Path) -> None:
    # GIVEN a profile read, then one free's record moved 1 ns from its event (a file no allocator writes)
    path = write_profile(tmp_path / "moved.xplane.pb", [
        (True, 256, 256, 8192, 256, 0.0, "a"), (False, 0, 256, 8192, 0, 0.0, "")])
    trace = memtrace.load(path)
    assert requests_for(trace, "bfc_cpu_allocator_for_gpu").requests.frees.tolist() == [-1, 0]
    offsets = trace.memory.record_offsets
    free_record = int(offsets[0]) + 1  # an allocation's free is the second record of its row
    time_ns = trace.records.time_ns.copy()
    time_ns[free_record] += 1
    moved = replace(trace, records=replace(trace.records, time_ns=time_ns))
    # THEN its frees cannot be matched to its allocations: refused, naming the file and the allocator
    with pytest.raises(UsageError, match=r"moved\.xplane\.pb: the frees of 'bfc_cpu_allocator_for_gpu' cannot be "
                                         r"matched to its allocations"):
        requests_for(moved, "bfc_cpu_allocator_for_gpu")


@pytest.mark.parametrize("name", ["keras_cnn", "keras_lstm", "keras_mlp"])
def test_a_profile_after_birth_drops_the_frees_of_chunks_from_before_it_counted_with_protobuf_alone(name: str) -> None:
    from .xspace_events import memory_events

    # GIVEN a Keras profile that starts after the allocator's birth
    path = FIXTURES / "profiles" / f"{name}.xplane.pb.gz"
    found = requests_for(memtrace.load(path), "bfc_cpu_allocator_for_gpu")
    # THEN the frees it drops are those of addresses no allocation in the profile made live, walked with protobuf alone
    live: set[int] = set()
    before = 0
    for event in memory_events(path, "bfc_cpu_allocator_for_gpu"):
        if event["alloc"]:
            live.add(event["addr"])
        elif event["addr"] in live:
            live.discard(event["addr"])
        else:
            before += 1
    assert not found.from_birth and found.dropped_frees == before > 0
    # (and a free is no op's request: its op is unknown, -1)
    assert set(found.requests.op[~found.requests.is_alloc].tolist()) == {-1}
    assert f"drops {before:,} frees of chunks allocated before it" in found.assumptions[0]


def test_recordings_of_one_allocator_by_two_runtimes_are_not_one_step(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN JAX's H100 profile (XLA's GPU_0_bfc) and a TensorFlow profile of an allocator of the same name
    tf = write_profile(tmp_path / "tf_gpu.xplane.pb", [(True, 1024, 1024, 1 << 30, 1024, 0.0, "a"),
                                                       (False, 1024, 1024, 1 << 30, 0, 0.0, "")], allocator="GPU_0_bfc")
    jax = FIXTURES / "profiles" / "jax_gpu.xplane.pb.gz"
    # THEN fitting them as recordings of one step is refused in one line, exit 2, naming the second
    code, out, err = run(capsys, "fit", str(jax), str(tf), "--allocator", "GPU_0_bfc")
    assert (code, out) == (2, "")
    assert err == (f"memtrace: error: {tf}: 'GPU_0_bfc' was recorded by another runtime or with other options than in "
                   f"{jax}: not recordings of one step\n")


def test_an_alternative_no_limit_fits_is_left_out_and_the_ones_after_it_stay() -> None:
    # GIVEN 3 TiB then 4.5 TiB alive at once, one region of the whole limit (growth off): 7.5 TiB fits
    tib = 1 << 40
    requests = Requests.from_events([("a", 3 * tib, "a"), ("a", 4 * tib + tib // 2, "b"), ("f", 0), ("f", 1)])
    result = fit_requests(requests, BFCOptions(8 * tib, allow_growth=False))
    assert result.min_limit_bytes == 7 * tib + tib // 2
    # WHEN the alternatives are tried, THEN growth on fits under no limit the model holds (8 TiB): the regions
    # double from 2 MiB, 3 TiB takes one of 4 TiB, and 4.5 TiB finds 4 TiB left: it is left out; the ones after
    # it (the split fractions) stay, each with the 7.5 TiB of one region
    assert [(a.change, a.min_limit_bytes) for a in result.alternatives] == [
        ("garbage_collection on", 7 * tib + tib // 2), ("fragmentation_fraction 0.01", 7 * tib + tib // 2),
        ("fragmentation_fraction 0.1", 7 * tib + tib // 2)]


@pytest.mark.parametrize("smallest", [True, False])
def test_no_sampled_order_asked_for_is_one_line_naming_the_allocator(smallest: bool) -> None:
    # GIVEN one recording (the eager program's) and a negative number of orders, asked through the API: the band
    # (smallest) or the orders under the limit alone (not smallest) refuses it, in words naming the allocator
    trace = memtrace.load(FIXTURES / "fit" / "eager.xplane.pb.gz")
    allocator = trace.allocators[0]
    with pytest.raises(UsageError, match=f"^{allocator}: at least one order$"):
        fit(trace, allocator, limit=900 * MIB, smallest=smallest, orders=-1, alternatives=False)
