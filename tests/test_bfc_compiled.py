"""The compiled replay (``memtrace.allocator.bfc_compiled``, numba) against the Python loop it transcribes.

The Python loop (``MEMTRACE_REPLAY=python``) is the reference: every test replays the same sequence both ways and
compares everything a replay says, event by event where it records: each event's chunk, address, bytes in use,
pool and largest free chunk; the failure; the peaks; the limits it proves alike; the states it keeps where it
makes a region, the snapshots it takes for nearby limits, the replays resumed from them; TF's retry taking over
where a request fails; and the searches built on all of these. Sequences: random ones under every option set,
ties made on purpose, garbage collection across regions, and the real recordings among the fixtures.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import astuple, replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest

import memtrace
from memtrace.allocator import bfc, bfc_compiled, orders
from memtrace.allocator.bfc import BFCOptions, LimitSearch, Requests, search_min_limit
from memtrace.allocator.requests import requests_for
from memtrace.units import KIB, MIB
from tests.conftest import unavailable
from tests.test_bfc import (
    CHUNK_CHOSEN_OVER_THE_MOVING_ONE,
    CHUNK_KEPT_WHOLE_BY_THE_FRACTION,
    COLLECTION_BESIDE_THE_CUT_REGION,
    FRACTION_EDGE_CASES,
    HOLE_SPLIT_BY_THE_FRACTION_BESIDE_THE_MOVING_CHUNK,
    MOVING_CHUNK_AT_ADDRESS_0,
    MOVING_CHUNK_FREE_AT_ADDRESS_0_BESIDE_THE_CHOSEN,
    MOVING_CHUNK_TOO_SMALL_TO_THE_CUT_BOUND,
    MOVING_REGION_GIVEN_BACK_BEFORE_ONE_THAT_DOES_NOT_MOVE,
    OPTION_SETS,
    REGION_MADE_AFTER_COLLECTION_SPLIT_AND_JOINED,
    REGION_OF_EXACTLY_THE_REQUEST_AT_ADDRESS_0,
    random_sequence,
    seq,
    seq_copy,
)
from tests.test_orders import random_recording

T = TypeVar("T")
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

@pytest.fixture(autouse=True)
def _numba() -> None:
    if not bfc_compiled.available():
        unavailable("numba is not installed (pip install -e '.[test]' installs it)")


def both(monkeypatch: pytest.MonkeyPatch, make: Callable[[], T]) -> tuple[T, T]:
    """``make()`` with the Python loop, then with the compiled one (each on what ``make`` builds afresh)."""
    compiled_runs = []
    real = bfc._Run._replay_compiled

    def counted(run: Any) -> None:
        compiled_runs.append(run)
        real(run)

    monkeypatch.setattr(bfc._Run, "_replay_compiled", counted)
    monkeypatch.setenv("MEMTRACE_REPLAY", "python")
    reference = make()
    assert not compiled_runs
    monkeypatch.setenv("MEMTRACE_REPLAY", "compiled")
    ours = make()
    assert compiled_runs, "the compiled loop replayed nothing"
    return reference, ours


def said(run: Any) -> tuple[Any, ...]:
    """Everything a replay says once done."""
    return (run.failed_at, run.peaks, run.peak, run.max_pool, run.split_remainders, run.region_rows, run.regions,
            run.made_regions, run.given_back, run.used, run.free_size, run.addr_of, run._end, run.proven_low,
            run.proven_high)


def columns(simulation: bfc.Simulation) -> tuple[Any, ...]:
    """Every event's statistics, and the final map."""
    return (simulation.fits, simulation.failed_at, simulation.region.tolist(), simulation.offset.tolist(),
            simulation.chunk_bytes.tolist(), simulation.bytes_in_use.tolist(), simulation.pool_bytes.tolist(),
            simulation.largest_free_bytes.tolist(), simulation.peak_in_use_bytes, simulation.regions,
            simulation.region_rows, simulation.max_pool_bytes, simulation.made_regions, simulation.given_back,
            simulation.chunks)


def checkpoint(c: Any) -> tuple[Any, ...]:
    return tuple(x.tolist() if isinstance(x, np.ndarray) else x for x in astuple(c))


def snapshot(z: bfc._Snapshot) -> tuple[Any, ...]:
    return tuple(getattr(z, name) for name in bfc._Snapshot.__dataclass_fields__)


def options_for(growth: bool, gc: bool, fraction: float, limit: int, **more: Any) -> BFCOptions:
    return BFCOptions(limit, allow_growth=growth, garbage_collection=gc, fragmentation_fraction=fraction, **more)


@pytest.mark.parametrize(("growth", "gc", "fraction"), OPTION_SETS)
def test_every_event_replays_alike_on_random_sequences(monkeypatch: pytest.MonkeyPatch, growth: bool, gc: bool,
                                                       fraction: float) -> None:
    # GIVEN random sequences (256 B to 2**10..2**27 B, about half freed) under limits from below their peak to
    # unlimited, regions in each address order
    compared = failed = 0
    for seed in range(25):
        requests = random_sequence(300 + seed, 400, 10 + seed % 18, round_sizes=seed % 3 == 0)
        peak = requests.peak_rounded_live_bytes()
        rng = np.random.default_rng(seed)
        for share in (0.8, 1.0, 1.15, 1.6, 4.0):
            limit = min(bfc.MAX_LIMIT_BYTES, max(256, int(peak * share * rng.uniform(0.95, 1.05)) // 256 * 256))
            options = options_for(growth, gc, fraction, limit, regions_descending=seed % 2 == 1,
                                  region_order=(1, 0) if seed % 5 == 0 else ())
            # WHEN each is replayed recording every event, and tracking the limits that decide alike
            recorded = both(monkeypatch, lambda: columns(bfc.simulate(seq_copy(requests), options)))  # noqa: B023
            tracked = both(monkeypatch, lambda: said(bfc._Run(seq_copy(requests), options, record=False,  # noqa: B023
                                                               track=True)))
            # THEN both loops say the same, event by event
            assert recorded[0] == recorded[1], (seed, share)
            assert tracked[0] == tracked[1], (seed, share)
            compared += 1
            failed += not recorded[0][0]
    assert compared == 125 and 10 < failed < 100


def test_garbage_collection_gives_back_the_same_regions_and_makes_new_ones_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN growth and garbage collection, regions emptied and a request that fits only once they are given back:
    # 1 MiB and 2 MiB (regions 0 and 1: 2 and 4 MiB), both freed; 5 MiB under 8 MiB needs them back
    requests = seq(("a", 1 << 20), ("a", 3 << 20), ("f", 0), ("f", 1), ("a", 5 << 20), ("a", 256), ("f", 4),
                   ("a", 7 << 20))
    options = BFCOptions(8 << 20, allow_growth=True, garbage_collection=True)
    reference, ours = both(monkeypatch, lambda: columns(bfc.simulate(seq_copy(requests), options)))
    assert reference == ours
    # (the regions given back, worked by hand: 0 and 1 at row 4, whose 5 MiB takes region 2 whole)
    assert ours[13] == ((0, 4), (1, 4))
    tracked = both(monkeypatch, lambda: said(bfc._Run(seq_copy(requests), options, record=False, track=True)))
    assert tracked[0] == tracked[1]
    # AND where the region the limit cuts is given back (it moved with the limit: so does the room collected):
    # under 10 MiB, 1 MiB takes region 0 (2 MiB), 3 MiB region 1 (4 MiB), 1.5 MiB region 2, cut to the 4 MiB left;
    # 1 MiB and 1.5 MiB freed, 5.5 MiB finds no chunk and no room: regions 0 and 2 go back, 6 MiB is made. The room
    # collected, 0.5 MiB beyond the request, shrinks with the limit: limits down to 9.5 MiB decide alike
    cut = seq(("a", 1 << 20), ("a", 3 << 20), ("a", 3 << 19), ("f", 2), ("f", 0), ("a", 11 << 19))
    options = BFCOptions(10 << 20, allow_growth=True, garbage_collection=True)
    for track in (False, True):
        reference, ours = both(monkeypatch, lambda: said(bfc._Run(seq_copy(cut), options, record=False,
                                                                  track=track)))  # noqa: B023
        assert reference == ours, track
    recorded = both(monkeypatch, lambda: columns(bfc.simulate(seq_copy(cut), options)))
    assert recorded[0] == recorded[1]
    assert recorded[1][13] == ((0, 5), (2, 5)) and recorded[1][9] == ((1, 4 << 20), (3, 6 << 20))
    assert bfc._Run(seq_copy(cut), options, record=False, track=True).proven_low == 19 << 19
    # AND where collecting cannot make the room: 6.5 MiB fails under 10 MiB (6 MiB would come back); it would not
    # from 10.5 MiB on, which the room collected (moving with the limit) says, before the moving chunk's size does
    failing = seq(("a", 1 << 20), ("a", 3 << 20), ("a", 3 << 19), ("f", 2), ("f", 0), ("a", 13 << 19))
    reference, ours = both(monkeypatch, lambda: said(bfc._Run(seq_copy(failing), options, record=False, track=True)))
    assert reference == ours
    assert ours[0] == 5 and ours[-1] == (21 << 19) - 1


def test_the_states_kept_where_regions_are_made_and_the_replays_from_them_are_alike(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN random sequences with growth, replayed unlimited keeping the state before each region a limit of
    # keep_from or more may cut
    for seed in range(12):
        requests = random_sequence(500 + seed, 500, 14 + seed % 12)
        keep_from = requests.peak_rounded_live_bytes() // 2

        def unlimited() -> tuple[Any, ...]:
            kept: list[bfc._Checkpoint] = []
            run = bfc._Run(seq_copy(requests), BFCOptions(bfc.MAX_LIMIT_BYTES), record=False,  # noqa: B023
                           checkpoints=kept, keep_from=keep_from)  # noqa: B023
            return said(run), [checkpoint(c) for c in kept], kept

        reference, ours = both(monkeypatch, unlimited)
        # THEN the same states are kept, and a replay from each under a limit that cuts its region is alike
        assert reference[:2] == ours[:2], seed
        assert ours[2], seed
        for c in ours[2]:
            limit = (c.pool + c.region_bytes // 2) // 256 * 256
            for track in (False, True):
                start = both(monkeypatch, lambda: said(bfc._Run(seq_copy(requests), BFCOptions(limit), record=False,  # noqa: B023
                                                                start=c, track=track)))  # noqa: B023
                assert start[0] == start[1], (seed, c.row, track)


def test_snapshots_and_the_replays_resumed_from_them_are_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN sequences long enough for snapshots (every 8,192 rows at least), tracked under a limit near their peak
    for seed, (growth, fraction) in enumerate([(True, 0.0), (False, 0.0), (True, 0.05), (False, 0.1)]):
        requests = random_sequence(700 + seed, 40_000, 16 + seed)
        limit = int(requests.peak_rounded_live_bytes() * 1.3) // 4096 * 4096
        options = options_for(growth, False, fraction, limit)

        def tracked() -> tuple[Any, ...]:
            taken: list[bfc._Snapshot] = []
            run = bfc._Run(seq_copy(requests), options, record=False, track=True, snapshots=taken)  # noqa: B023
            return said(run), [snapshot(z) for z in taken], taken

        reference, ours = both(monkeypatch, tracked)
        # THEN the same snapshots are taken at the same rows
        assert reference[:2] == ours[:2], seed
        assert len(ours[2]) >= 2, seed
        # AND a replay resumed from each, under another limit its comparisons admit, says the same both ways
        for z in ours[2]:
            other = z.low + (z.high - z.low) // 3 // 256 * 256
            resumed = both(monkeypatch, lambda: said(bfc._Run(seq_copy(requests), replace(options, limit_bytes=other),  # noqa: B023
                                                              record=False, track=True, resume=z)))  # noqa: B023
            assert resumed[0] == resumed[1], (seed, z.row)


def test_a_replay_handed_to_tfs_retry_where_it_fails_ends_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN random recordings on four threads and orders drawn from them, under limits around their peak
    switched = 0
    for seed in range(12):
        g = random_recording(seed, 150)
        peak = g.requests.peak_rounded_live_bytes()
        for order in orders.sample_orders(g, 2, seed):
            for limit in (peak // 256 * 256, int(peak * 1.1) // 256 * 256):
                options = BFCOptions(limit, allow_growth=seed % 2 == 0)
                # WHEN replayed in order until a request fails, and from there as TF's retry serves it
                reference, ours = both(monkeypatch, lambda: said(bfc._Run(
                    order.requests, options, record=False, retry=order.schedule())))  # noqa: B023
                # THEN both end alike
                assert reference == ours, (seed, limit)
                # AND alike where the replay keeps the states before its extensions (a search learning the unlimited
                # replay's regions, with shared rows): the retry's rows keep none, and are all served
                reference, ours = both(monkeypatch, lambda: _with_checkpoints(order.requests, options,  # noqa: B023
                                                                              order.schedule()))  # noqa: B023
                assert reference == ours, (seed, limit)
                switched += bfc._Run(order.requests, options, record=False).failed_at is not None
    assert switched > 10


def _with_checkpoints(requests: Requests, options: BFCOptions, retry: Any) -> tuple[Any, ...]:
    kept: list[Any] = []
    run = bfc._Run(requests, options, record=False, checkpoints=kept, retry=retry)
    return said(run), [(c.row, c.pool) for c in kept]


@pytest.mark.parametrize(("growth", "gc", "fraction"), OPTION_SETS)
def test_searches_for_the_smallest_limit_answer_alike(monkeypatch: pytest.MonkeyPatch, growth: bool, gc: bool,
                                                      fraction: float) -> None:
    # GIVEN random sequences, one long enough for snapshots (every 2,048 rows here: four in its 10,000 rows) and a
    # search of some 60 replays, resumed from them
    monkeypatch.setattr(bfc, "_SNAPSHOT_ROWS", 2048)
    for seed in range(6):
        events = 10_000 if seed == 5 else 300
        requests = random_sequence(900 + seed, events, 12 + 3 * seed, round_sizes=seed == 2)
        options = options_for(growth, gc, fraction, 0)
        # WHEN the smallest limit is searched (every limit tried, the replays made, the proofs)
        reference, ours = both(monkeypatch, lambda: _search(seq_copy(requests), options))  # noqa: B023
        # THEN the same
        assert reference == ours, seed


def _search(requests: Requests, options: BFCOptions) -> tuple[Any, ...]:
    found = search_min_limit(requests, options)
    return (found.limit_bytes, found.monotone, found.tried, found.below_step, found.replays, found.replayed_events,
            found.counterexample())


FIXTURE_TRACES = ["fit/eager.xplane.pb.gz", "fit/lstm.xplane.pb.gz", "fit/cnn.xplane.pb.gz",
                  "gpu-h200/mlp_930.xplane.pb.gz"]


@pytest.mark.parametrize("name", FIXTURE_TRACES)
def test_real_recordings_replay_alike_event_by_event(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    # GIVEN a real recording's requests (TF's CPU allocator, and JAX's on an H200) under TF's defaults and a tight
    # limit where it fails
    path = FIXTURES / name
    trace = memtrace.load(path)
    allocator = "GPU_0_bfc" if "GPU_0_bfc" in trace.allocators else trace.allocators[0]
    requests = requests_for(trace, allocator).requests
    peak = requests.peak_rounded_live_bytes()
    for options in (BFCOptions(bfc.MAX_LIMIT_BYTES), BFCOptions(peak // 256 * 256, garbage_collection=True),
                    BFCOptions(int(peak * 1.2) // 256 * 256, allow_growth=False)):
        # WHEN replayed recording every event
        reference, ours = both(monkeypatch, lambda: columns(bfc.simulate(seq_copy(requests), options)))  # noqa: B023
        # THEN every event's statistics are the same
        assert reference == ours, options
    searched = both(monkeypatch, lambda: _search(seq_copy(requests), BFCOptions(0)))
    assert searched[0] == searched[1]


def test_the_compiled_loop_serves_only_where_it_is_asked_and_holds_the_sequence(
        monkeypatch: pytest.MonkeyPatch) -> None:
    short = seq(("a", 256), ("f", 0))
    monkeypatch.setenv("MEMTRACE_REPLAY", "python")
    assert not bfc._compiled_serves(_bare(short))
    monkeypatch.setenv("MEMTRACE_REPLAY", "compiled")
    assert bfc._compiled_serves(_bare(short))
    # a request above the largest limit (the growth size would pass 64 bits doubling towards it) stays in Python
    assert not bfc._compiled_serves(_bare(seq(("a", bfc.MAX_LIMIT_BYTES + 256))))
    # so does a replay served by a schedule
    assert not bfc._compiled_serves(_bare(short, schedule=lambda start: iter(())))
    # unset: the Python loop serves until this process's Python replays come to a million events replayed
    monkeypatch.delenv("MEMTRACE_REPLAY")
    monkeypatch.setattr(bfc, "_python_rows", [0])
    # (a replay that fails at its fourth row replays four rows: the rest of the sequence is not counted)
    sizes = np.random.default_rng(5).integers(1, 1 << 10, 100_000).tolist()  # (no period to skip)
    failing = seq(("a", 1 << 20), ("a", 1 << 20), ("f", 0), ("a", 3 << 20), *[("a", size) for size in sizes])
    assert bfc._Run(failing, BFCOptions(2 << 20, allow_growth=False), record=False).failed_at == 3
    assert bfc._python_rows == [4]
    bfc._Run(failing, BFCOptions(1 << 30), record=False)
    assert bfc._python_rows == [4 + len(failing)]
    assert not bfc._compiled_serves(_bare(short))
    monkeypatch.setattr(bfc, "_python_rows", [bfc._COMPILED_AFTER_ROWS])
    assert bfc._compiled_serves(_bare(short))
    # or from the first where a caller says many replays are to come, and only while it does
    monkeypatch.setattr(bfc, "_python_rows", [0])
    with bfc.many_replays():
        with bfc.many_replays():
            assert bfc._compiled_serves(_bare(short))
        assert bfc._compiled_serves(_bare(short))
        assert not bfc._compiled_serves(_bare(short, schedule=lambda start: iter(())))
    assert not bfc._compiled_serves(_bare(short))
    # and a replay that alone has that many events to replay, from the first: unless the events repeat (where the
    # Python loop moves on by whole periods) and it does not record (where it does not)
    monkeypatch.setattr(bfc, "_python_rows", [0])
    monkeypatch.setattr(bfc, "_COMPILED_AFTER_ROWS", 50_000)
    assert bfc._compiled_serves(_bare(failing))
    repeating = seq(*[event for base in range(0, 50_000, 4) for event in (("a", 1024), ("a", 4096), ("f", base),
                                                                          ("f", base + 1))])
    assert bfc._period(repeating) is not None
    assert not bfc._compiled_serves(_bare(repeating))
    recording = _bare(repeating)
    recording.record = True
    assert bfc._compiled_serves(recording)
    # AND where numba cannot run the loop, the Python loop serves even such a replay; asked for the compiled one, the
    # API says why
    monkeypatch.setattr(bfc_compiled, "_usable", [False])
    assert not bfc._compiled_serves(recording)
    monkeypatch.setenv("MEMTRACE_REPLAY", "compiled")
    with pytest.raises(RuntimeError, match="numba is not installed"):
        bfc._compiled_serves(_bare(short))


def _bare(requests: Requests, schedule: Any = None, first_row: int = 0) -> Any:
    """A replay's fields as _compiled_serves and _long read them, not replayed."""
    run = bfc._Run.__new__(bfc._Run)
    run.requests, run._schedule, run.first_row, run.record = requests, schedule, first_row, False
    return run


def test_a_replay_is_long_by_the_rows_left_from_where_it_begins(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN 150 allocations (too few for a period to be looked for: under 4 x 512) and the compiled loop's start
    # worth 100 events replayed in Python
    monkeypatch.setattr(bfc, "_COMPILED_AFTER_ROWS", 100)
    requests = seq(*[("a", 256 * (i + 1)) for i in range(150)])
    # WHEN a replay begins at row 50 THEN it has 100 rows to replay: long enough to pay for the compiled loop
    assert bfc._long(_bare(requests, first_row=50))
    # WHEN it begins at row 51 (a state kept there) THEN 99 rows: not
    assert not bfc._long(_bare(requests, first_row=51))


def logged_moves(monkeypatch: pytest.MonkeyPatch) -> list[tuple[tuple[int, int, int], int | None]]:
    """Each look for a repeat from here on: ((period, row, until), the row moved on to or None), in order."""
    moves: list[tuple[tuple[int, int, int], int | None]] = []
    real = bfc._repeated

    def logged(*args: Any) -> Any:
        found = real(*args)
        moves.append((args[1:4], found if found is None else found[0]))
        return found

    monkeypatch.setattr(bfc, "_repeated", logged)
    return moves


def test_a_replay_of_repeating_steps_moves_on_by_the_same_periods(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN steps of training: a random step (weights kept, activations freed) repeated 40 times
    moves = logged_moves(monkeypatch)
    for seed, (growth, gc, fraction) in enumerate([(True, False, 0.0), (False, True, 0.0), (True, False, 0.05)]):
        step = random_sequence(1300 + seed, 700, 14 + 4 * seed)
        events: list[tuple[Any, ...]] = [("a", 4096)]
        for repeat in range(40):
            base = len(events)
            for kind, value in zip(step.is_alloc.tolist(), step.requested_bytes.tolist()):
                events.append(("a", value) if kind else ("f", 0))
            frees = step.frees.tolist()
            for offset, freed in enumerate(frees):
                if freed >= 0:
                    events[base + offset] = ("f", base + freed)
            # (whatever the step leaves live is freed before the next one)
            live = set(range(base, len(events))) - {value for kind, value in events[base:] if kind == "f"}
            events += [("f", row) for row in sorted(live) if events[row][0] == "a"]
            del repeat
        requests = seq(*events)
        assert bfc._period(requests) is not None
        limit = int(requests.peak_rounded_live_bytes() * 1.25) // 4096 * 4096
        options = options_for(growth, gc, fraction, limit)
        for track in (False, True):
            # WHEN replayed both ways
            moves.clear()
            reference = said(bfc._Run(seq_copy(requests), options, record=False, track=track))
            python_moves = list(moves)
            moves.clear()
            monkeypatch.setenv("MEMTRACE_REPLAY", "compiled")
            ours = said(bfc._Run(seq_copy(requests), options, record=False, track=track))
            monkeypatch.setenv("MEMTRACE_REPLAY", "python")
            # THEN both moved on by the same periods, from the same rows, and say the same
            assert reference == ours, (seed, track)
            assert moves == python_moves and any(found for _, found in moves), (seed, track)
        searched = both(monkeypatch, lambda: _search(seq_copy(requests), options_for(growth, gc, fraction, 0)))  # noqa: B023
        assert searched[0] == searched[1], seed


def test_a_replay_that_moves_on_by_whole_periods_compares_its_chunks_in_use_and_relabels_their_rows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN 4 KiB of weights, then 10 steps of 512 events: buffers of 2 MiB, 256 KiB and 768 KiB kept to the next
    # step, which frees them (the third, the first, the second; the first step makes three of 256 B in their place),
    # and temporaries of 1 MiB and 2 MiB in turn, each freed at once; with growth under 7.67 MiB (8,040,448 B)
    events: list[tuple[Any, ...]] = [("a", 4 * KIB)]
    for step in range(10):
        base = len(events)
        events += [("a", 2 * MIB), ("a", 256 * KIB), ("a", 768 * KIB)]
        events += [("f", base - 512 + kept) for kept in (2, 0, 1)] if step else [("a", 256)] * 3
        while len(events) < base + 512:
            events += [("a", MIB if (len(events) - base) % 4 == 2 else 2 * MIB), ("f", len(events))]
    requests = seq(*events)
    moves = logged_moves(monkeypatch)
    # WHEN replayed, tracked, by each loop
    reference, ours = both(monkeypatch, lambda: said(bfc._Run(seq_copy(requests), BFCOptions(8_040_448), record=False,
                                                              track=True)))
    # THEN each finds its state at row 2,048 the one it had two periods earlier (the chunks in use where they were:
    # not one period earlier, and not before) and moves on to row 5,120, the last whole period
    assert [(period, begin, found) for (period, begin, _), found in moves] == [(1024, 2048, 5120)] * 2
    # AND both end with the weights (row 0), the first step's three 256 B (rows 4-6) and the last step's buffers (rows
    # 4,609-4,611) live, by the rows that made them, where the Python loop put them
    assert reference == ours and sorted(ours[11]) == [0, 4, 5, 6, 4609, 4610, 4611]


def test_snapshots_wait_where_copying_the_state_costs_more_than_the_rows_since_the_last(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN 60,000 allocations of 256 B in one region (growth off), none freed: at row r the state holds r + 1
    # chunks; snapshots are looked at every 8,192 rows and taken where the chunks are at most four per row since the
    # last one taken (worked by hand: 8,192, 16,384 and 24,576 are taken; at 32,768 the 32,769 chunks are more than
    # 4 x 8,192; at 40,960, 40,961 are at most 4 x 16,384 since 24,576; at 49,152, 49,153 are more than 4 x 8,192;
    # at 57,344, 57,345 are at most 4 x 16,384 since 40,960)
    requests = seq(*[("a", 256)] * 60_000)
    options = BFCOptions(1 << 30, allow_growth=False)

    def tracked() -> tuple[Any, ...]:
        taken: list[bfc._Snapshot] = []
        bfc._Run(seq_copy(requests), options, record=False, track=True, snapshots=taken)
        return tuple(z.row for z in taken)

    reference, ours = both(monkeypatch, tracked)
    assert reference == ours == (8192, 16384, 24576, 40960, 57344)


def test_an_empty_sequence_and_one_that_touches_no_chunk_replay_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN no events, and events that touch no chunk (a 0-byte request, a free of it)
    for requests in (seq(), seq(("a", 0), ("f", 0))):
        # WHEN replayed recording every event
        reference, ours = both(monkeypatch, lambda: columns(bfc.simulate(seq_copy(requests), BFCOptions(1 << 20))))  # noqa: B023
        # THEN nothing is recorded but those events, with nothing in use and no pool
        assert reference == ours
        assert ours[4] == [0] * len(requests) and ours[5] == [0] * len(requests) and ours[6] == [0] * len(requests)


@pytest.mark.parametrize(("setting", "numba_works", "said"), [
    ("numba", True, "MEMTRACE_REPLAY='numba' names no replay: use python, compiled, or leave it unset"),
    ("compiled", False, "MEMTRACE_REPLAY=compiled, but numba is not installed or cannot compile the replay"),
])
def test_a_replay_setting_that_cannot_be_kept_is_refused_in_one_line(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], setting: str, numba_works: bool,
        said: str) -> None:
    # GIVEN MEMTRACE_REPLAY naming no loop, or the compiled loop where numba cannot run it
    from memtrace.cli import main

    monkeypatch.setenv("MEMTRACE_REPLAY", setting)
    monkeypatch.setattr(bfc_compiled, "_usable", [numba_works])
    # WHEN a command runs
    code = main(["fit", str(FIXTURES / "fit/eager.xplane.pb.gz"), "--limit", "1GiB", "--no-alternatives"])
    # THEN it stops at once: exit 2, one line saying what is wrong, nothing on stdout
    err = capsys.readouterr()
    assert code == 2 and err.out == ""
    assert err.err.startswith(f"memtrace: error: {said}") and err.err.count("\n") == 1


@pytest.mark.parametrize("setting", ["python", "compiled"])
def test_a_replay_setting_naming_a_loop_that_can_run_is_kept(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], setting: str) -> None:
    # GIVEN MEMTRACE_REPLAY naming either loop, numba able to run the compiled one
    from memtrace.cli import main

    monkeypatch.setenv("MEMTRACE_REPLAY", setting)
    monkeypatch.setattr(bfc_compiled, "_usable", [True])
    # THEN nothing is wrong with it, and a command runs under it: exit 0, its answer on stdout, nothing on stderr
    assert bfc.replay_setting_problem() is None
    code = main(["fit", str(FIXTURES / "fit/eager.xplane.pb.gz"), "--limit", "814MiB", "--no-alternatives"])
    out = capsys.readouterr()
    assert code == 0 and out.err == "" and "under 814 MiB: fits" in out.out, out.out + out.err


def test_a_replay_that_makes_more_regions_than_the_model_has_slots_for_is_refused_by_both_loops(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN room for three regions' virtual addresses, and requests of 3, 5, 9 and 17 MiB held at once: with growth,
    # each outgrows every free chunk and the growth size, so each makes a region (4, 8, 16, 32 MiB: the growth size
    # doubles past the request)
    monkeypatch.setattr(bfc, "_REGION_SLOTS", 3)
    requests = seq(("a", 3 * MIB), ("a", 5 * MIB), ("a", 9 * MIB), ("a", 17 * MIB))
    three = seq(("a", 3 * MIB), ("a", 5 * MIB), ("a", 9 * MIB))
    for replay in ("python", "compiled"):
        monkeypatch.setenv("MEMTRACE_REPLAY", replay)
        # THEN three regions are made, and the fourth is refused, not laid over another region's addresses
        assert bfc._Run(three, BFCOptions(1 << 30), record=False).region_rows == (0, 1, 2), replay
        with pytest.raises(ValueError, match="more regions than the model holds"):
            bfc._Run(requests, BFCOptions(1 << 30), record=False)


def test_whether_the_loop_can_run_is_checked_once_and_a_numba_that_cannot_compile_it_says_so(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN numba installed (the test extras): the loop replays its check (256 B, then its free) and is usable
    monkeypatch.setattr(bfc_compiled, "_usable", [])
    assert bfc_compiled.available() and bfc_compiled._usable == [True]
    # GIVEN a numba that cannot compile it: one warning naming the error, the Python loop serves, and the check is not
    # made again
    monkeypatch.setattr(bfc_compiled, "_usable", [])

    def broken(*args: object) -> None:
        raise TypeError("no such type")

    monkeypatch.setattr(bfc_compiled, "Machine", broken)
    with pytest.warns(RuntimeWarning, match=r"numba could not compile the allocator replay \(TypeError: no such type\)"):
        assert not bfc_compiled.available()
    assert bfc_compiled._usable == [False] and not bfc_compiled.available()


def bare_machine(events: Any, limit: int, gc: bool = False, record: bool = False, first_row: int = 0) -> Any:
    """A compiled machine as a replay makes one, under TF's rules (128 MiB threshold, no fraction) with regions at
    r << 44 in the order made, no states kept: for a test to load by hand."""
    return bfc_compiled.Machine(events, limit, 128 * MIB, 0.0, gc, record, False, 0, (), False, 44,
                                bfc._REGION_SLOTS, first_row)


def test_the_machines_tables_grow_keeping_what_they_hold() -> None:
    # GIVEN a machine loaded with nothing: room for 4,096 chunks and 64 regions
    machine = bare_machine(np.array([256, -1], dtype=np.int64), 1 << 20)
    nothing = np.zeros(0, dtype=np.int64)
    machine.load(nothing, nothing, nothing, nothing, nothing, {}, [], {},
                 {"GROWTH": 1 << 20, "KEPT_WHOLE": -1, "TFREE": -1, "TEND": -1})
    assert (len(machine.key_size), len(machine.chunk_address), len(machine.region_size)) == (4096, 4096, 64)
    # WHEN the loop stops with 63 regions made (one more would leave no room) and as many keys and handles as fit
    machine.region_size[:63] = np.arange(1, 64)
    machine.key_size[:4095] = machine.chunk_address[:4095] = np.arange(4095)
    machine.s[[bfc_compiled.REGIONS, bfc_compiled.FREE_COUNT, bfc_compiled.HANDLES]] = (63, 4095, 4095)
    machine._grow()
    # THEN each table has twice the room, what it held kept (the regions given back: two numbers a region)
    assert (len(machine.key_size), len(machine.chunk_address), len(machine.region_size), len(machine.given)) == (
        8192, 8192, 128, 256)
    assert machine.region_size[:63].tolist() == list(range(1, 64)) and not machine.region_size[63:].any()
    assert machine.key_size[:4095].tolist() == machine.chunk_address[:4095].tolist() == list(range(4095))


def test_snapshots_over_their_budget_are_thinned_out_evenly(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN 60,000 allocations of 256 B in one region (growth off), none freed, replayed tracking the limits: a
    # snapshot is taken before rows 8,192, 16,384, 24,576, 40,960 and 57,344 (as in
    # test_snapshots_wait_where_copying_the_state_costs_more_than_the_rows_since_the_last); before row r it holds one
    # free chunk and r in use, reckoned at 8 x 1 + 100 x (1 + r) + 1,000 = 100 r + 1,108 bytes; snapshots may hold
    # 4,000,000 bytes in all
    monkeypatch.setattr(bfc, "_SNAPSHOT_BYTES", 4_000_000)
    requests = seq(*[("a", 256)] * 60_000)
    options = BFCOptions(1 << 30, allow_growth=False)
    taken: dict[str, tuple[int, ...]] = {}
    loops = ["python"] + (["compiled"] if bfc_compiled.available() else [])
    for loop in loops:
        monkeypatch.setenv("MEMTRACE_REPLAY", loop)
        snapshots: list[bfc._Snapshot] = []
        # WHEN replayed by each loop
        bfc._Run(seq_copy(requests), options, record=False, track=True, snapshots=snapshots)
        taken[loop] = tuple(z.row for z in snapshots)
    # THEN each time they come to more, every other one is let go, from the first: 820,308 + 1,639,508 + 2,458,708 =
    # 4,918,524 keeps 16,384; with 40,960 (4,097,108) 5,736,616 keeps 40,960; with 57,344 (5,735,508) 9,832,616
    # keeps 57,344
    assert taken == {loop: (57344,) for loop in loops}
    if "compiled" not in taken:
        unavailable("numba is not installed (pip install -e '.[test]' installs it): the compiled loop was not checked")


@pytest.mark.parametrize("replay", ["python", "compiled"])
def test_a_region_made_for_a_request_of_exactly_the_growth_size_is_kept_at_that_size(
        monkeypatch: pytest.MonkeyPatch, replay: str) -> None:
    if replay == "compiled" and not bfc_compiled.available():
        unavailable("numba is not installed (pip install -e '.[test]' installs it)")
    # GIVEN 2 MiB, then 4 MiB, each exactly the growth size when it comes (the first region 2 MiB, then doubled)
    requests = seq(("a", 2 * MIB), ("a", 4 * MIB))
    monkeypatch.setenv("MEMTRACE_REPLAY", replay)
    # WHEN replayed unlimited, keeping the state before every region (keep_from 0)
    kept: list[bfc._Checkpoint] = []
    run = bfc._Run(requests, BFCOptions(bfc.MAX_LIMIT_BYTES), record=False, checkpoints=kept, keep_from=0)
    # THEN each region is the growth size itself (a request of the growth size fits it: no doubling): 2 MiB from a
    # pool of 0 at row 0, 4 MiB from a pool of 2 MiB at row 1
    assert run.failed_at is None and run.max_pool == 6 * MIB
    assert [(c.row, c.pool, c.region_bytes) for c in kept] == [(0, 0, 2 * MIB), (1, 2 * MIB, 4 * MIB)]
    # AND where the request is larger than the growth size (2 MiB, then 9 MiB: the growth size, 4 MiB, doubles twice
    # to hold it), the state kept before its region names the region unlimited: 16 MiB, from a pool of 2 MiB
    kept = []
    run = bfc._Run(seq(("a", 2 * MIB), ("a", 9 * MIB)), BFCOptions(bfc.MAX_LIMIT_BYTES), record=False,
                   checkpoints=kept, keep_from=0)
    assert run.failed_at is None and run.max_pool == 18 * MIB
    assert [(c.row, c.pool, c.region_bytes) for c in kept] == [(0, 0, 2 * MIB), (1, 2 * MIB, 16 * MIB)]


def test_the_compiled_loop_keeps_a_state_at_the_first_row_of_repeating_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    if not bfc_compiled.available():
        unavailable("numba is not installed (pip install -e '.[test]' installs it)")
    # GIVEN the steps above (12 x 8 rows), replayed by the compiled loop, periods from 8 rows looked for
    monkeypatch.setattr(bfc, "_MIN_PERIOD_ROWS", 8)
    monkeypatch.setenv("MEMTRACE_REPLAY", "compiled")
    events: list[tuple] = []
    for _ in range(12):
        for j in range(4):
            events += [("a", (j + 1) * KIB), ("f", len(events))]
    requests = seq(*events)
    # WHEN its smallest limit is searched to 1 MiB (the lower bound: 4 KiB, so states from 1 MiB up are kept)
    search = search_min_limit(requests, BFCOptions(0))
    # THEN the unlimited replay keeps its state at row 0 (a step's first row, where it makes region 0, 2 MiB), pools
    # 2 MiB, and 1 MiB cuts it: replayed from there, fits (96 + 96 events)
    kept = bfc._limits(requests, BFCOptions(0)).checkpoints
    assert kept is not None and [(c.row, c.pool, c.region_bytes) for c in kept] == [(0, 0, 2 * MIB)]
    assert search == LimitSearch(MIB, True, ((2 * MIB, True), (MIB, True)), 1, 2, 192)


class _OthersFirst:
    """TF's retry after row 1 fails: rows 2-4 are served, then row 1 again (and it does not wait)."""

    def __init__(self, row: int) -> None:
        assert row == 1

    def runs(self) -> Iterator[tuple[int, int]]:
        yield 2, 5
        yield 1, 2

    def blocked(self, row: int) -> bool:
        return False


@pytest.mark.parametrize("replay", ["python", "compiled"])
def test_a_retry_that_makes_more_regions_than_the_model_has_slots_for_is_refused(monkeypatch: pytest.MonkeyPatch,
                                                                                 replay: str) -> None:
    if replay == "compiled" and not bfc_compiled.available():
        unavailable("numba is not installed (pip install -e '.[test]' installs it)")
    # GIVEN room for three regions, 3 MiB (region 0), 2 GiB (above the 1 GiB limit: fails), then 5, 9, 17 MiB, each
    # outgrowing every free chunk and the growth size: regions 1, 2 and a fourth
    monkeypatch.setattr(bfc, "_REGION_SLOTS", 3)
    monkeypatch.setenv("MEMTRACE_REPLAY", replay)
    requests = seq(("a", 3 * MIB), ("a", 2 << 30), ("a", 5 * MIB), ("a", 9 * MIB), ("a", 17 * MIB))
    # WHEN row 1 fails and TF's retry serves rows 2-4 first
    # THEN the fourth region is refused, not laid over another region's addresses
    with pytest.raises(ValueError, match="more regions than the model holds"):
        bfc._Run(requests, BFCOptions(1 << 30), record=False, retry=_OthersFirst)


# Sequences whose replays tests/test_bfc.py works by hand (the Python loop's there)
HAND_WORKED_SEQUENCES = [COLLECTION_BESIDE_THE_CUT_REGION, MOVING_CHUNK_TOO_SMALL_TO_THE_CUT_BOUND,
                         CHUNK_CHOSEN_OVER_THE_MOVING_ONE, MOVING_CHUNK_AT_ADDRESS_0,
                         MOVING_CHUNK_FREE_AT_ADDRESS_0_BESIDE_THE_CHOSEN, REGION_MADE_AFTER_COLLECTION_SPLIT_AND_JOINED,
                         HOLE_SPLIT_BY_THE_FRACTION_BESIDE_THE_MOVING_CHUNK, CHUNK_KEPT_WHOLE_BY_THE_FRACTION,
                         MOVING_REGION_GIVEN_BACK_BEFORE_ONE_THAT_DOES_NOT_MOVE, REGION_OF_EXACTLY_THE_REQUEST_AT_ADDRESS_0]


def test_the_compiled_loop_cuts_a_region_to_the_256_bytes_below_a_limit_that_is_not_a_multiple_of_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a limit a byte over 1 MiB, without growth: the one region is what the limit leaves, in TF's 256 B units
    monkeypatch.setenv("MEMTRACE_REPLAY", "compiled")
    simulation = bfc.simulate(seq(("a", 256)), BFCOptions(MIB + 1, allow_growth=False))
    # THEN it is 1 MiB
    assert simulation.regions == ((0, MIB),)


@pytest.mark.parametrize(("events", "options"), HAND_WORKED_SEQUENCES)
def test_the_compiled_loop_replays_and_proves_the_sequences_worked_by_hand(
        monkeypatch: pytest.MonkeyPatch, events: list[tuple] | Requests, options: BFCOptions) -> None:
    # the same limits proven, events replayed, peaks kept and states kept before every row by both loops, each worked
    # by hand in tests/test_bfc.py
    monkeypatch.setattr(bfc, "_SNAPSHOT_ROWS", 1)
    requests = events if isinstance(events, Requests) else seq(*events)

    def replayed() -> tuple[Any, ...]:
        taken: list[bfc._Snapshot] = []
        run = bfc._Run(seq_copy(requests), options, record=False, track=True, snapshots=taken)
        return (bfc.proven_limits(seq_copy(requests), options), columns(bfc.simulate(seq_copy(requests), options)),
                said(run), [snapshot(z) for z in taken])

    reference, ours = both(monkeypatch, replayed)
    assert reference == ours


@pytest.mark.parametrize(("fraction", "remainder"), [*FRACTION_EDGE_CASES, (1.0, 0), (1e-12, 5)])
def test_the_compiled_loops_fraction_edge_is_the_largest_limit_whose_split_threshold_is_within_the_remainder(
        fraction: float, remainder: int) -> None:
    # the split threshold is int(fraction * limit) (tests/test_bfc.py): the edge is the largest limit L with
    # int(fraction * L) <= remainder
    edge = bfc_compiled._fraction_edge(fraction, remainder)
    assert int(fraction * edge) <= remainder < int(fraction * (edge + 1))


def _tail_split_cases() -> list[tuple[int, int, int, int, int, float]]:
    """(x, tsize, dlo, dhi, limit, fraction): the split's answer changing 1 byte, a few bytes and far from here,
    either way, inside the bounds given and beyond them; and random ones."""
    # (x 100 under a limit of 1,000 and a fraction of 0.5: split from tsize 200, twice x; the threshold 500 + d / 2)
    cases = [(100, 199, -50, 50, 1000, 0.5), (100, 200, -50, 50, 1000, 0.5), (100, 197, -50, 50, 1000, 0.5),
             (100, 203, -50, 50, 1000, 0.5), (100, 150, -50, 2, 1000, 0.5), (100, 250, -3, 50, 1000, 0.5),
             (MIB, MIB + 4096, -MIB, MIB, 64 * MIB, 0.0001), (MIB, 3 * MIB // 2, -MIB, MIB, 512 * MIB, 0.001)]
    rng = np.random.default_rng(7)
    for _ in range(200):
        x = int(rng.integers(256, 1 << 22))
        tsize = int(rng.integers(0, 3 * x))
        limit = int(rng.integers(tsize + x, 1 << 34))
        cases.append((x, tsize, -int(rng.integers(0, tsize + 1)), int(rng.integers(0, 1 << 30)), limit,
                      float(rng.choice([0.0001, 0.001, 0.01, 0.1, 0.5]))))
    return cases


def test_the_compiled_loops_tail_split_bound_is_where_the_moving_chunk_is_split_as_it_is_here() -> None:
    # the chunk that moves with the limit (tsize bytes here, tsize + d under a limit d larger) is split for x where
    # it is at least twice x or its remainder at least int(fraction x limit) (BFC.md): both grow with d, so the
    # answer changes once; the bound returned is the last d before it changes (or the bound given, if nearer)
    for x, tsize, dlo, dhi, limit, fraction in _tail_split_cases():
        def split(d: int) -> bool:
            return tsize + d >= 2 * x or tsize + d - x >= int(fraction * (limit + d))  # noqa: B023

        low, high = bfc_compiled._tail_split_bound(x, tsize, dlo, dhi, limit, fraction)
        case = (x, tsize, dlo, dhi, limit, fraction)
        if split(0):
            assert high == dhi and dlo <= low <= 0 and split(low), case
            assert low == dlo or not split(low - 1), case
        else:
            assert low == dlo and 0 <= high <= dhi and not split(high), case
            assert high == dhi or split(high + 1), case


def test_the_compiled_loops_keep_narrows_to_where_the_comparison_stays_as_it_is() -> None:
    # _keep(value, slope, low, high): the offsets d in [low, high] where value + slope * d >= 0 is what it is at 0,
    # an interval around 0 (value + slope * d is linear in d): found here by trying every d
    for value in range(-9, 10):
        for slope in range(-3, 4):
            for low, high in ((-20, 20), (-3, 7), (0, 0), (-20, 0), (0, 20)):
                alike = [d for d in range(low, high + 1) if (value + slope * d >= 0) == (value >= 0)]
                assert bfc_compiled._keep(value, slope, low, high) == (min(alike), max(alike)), (value, slope)


def test_a_machine_takes_a_state_of_more_chunks_and_regions_than_its_first_room_and_gives_it_back() -> None:
    # GIVEN 100 regions of 1,040 KiB (region r at r << 44), each 65 chunks of 16 KiB, in use (33 a region: rows
    # 0..3,299) and free (32) in turn from the first; in key order the free chunks are by address (all one size);
    # region 99 moves with the limit; garbage collection on, the pool the whole limit
    chunk, region, regions = 16 * KIB, 65 * 16 * KIB, 100
    used_addresses = np.array([(r << 44) + i * chunk for r in range(regions) for i in range(0, 65, 2)], dtype=np.int64)
    free_addresses = np.array([(r << 44) + i * chunk for r in range(regions) for i in range(1, 65, 2)], dtype=np.int64)
    used = np.arange(len(used_addresses), dtype=np.int64)
    in_region_50 = int(np.flatnonzero(used_addresses == 50 << 44)[0])
    # then 16 KiB (row 3,300); the frees of row 0, then of every other allocation from the last, but for region 50's
    # first chunk (rows 3,301..6,599); then 2 MiB, which no free chunk holds, nor the pool (row 6,600)
    frees = [0, *range(3300, 0, -1)]
    frees.remove(in_region_50)
    events = np.array([*[chunk] * 3301, *[~row for row in frees], 2 * MIB], dtype=np.int64)
    machine = bare_machine(events, regions * region, gc=True, record=True, first_row=3300)
    sizes = np.full(len(used), chunk, dtype=np.int64)
    # WHEN it is loaded (more than the 4,096 chunks and 64 regions a machine first has room for)
    machine.load(sizes[:3200], free_addresses, used, used_addresses, sizes, dict.fromkeys(range(regions), region),
                 [33 * r for r in range(regions)], {99: 1},
                 {"POOL": regions * region, "IN_USE": 3300 * chunk, "PEAK": 3300 * chunk,
                  "MAX_POOL": regions * region, "GROWTH": 128 * MIB, "KEPT_WHOLE": -1, "TFREE": -1, "TEND": -1})
    # THEN it reads back as it was given
    free_sizes, free_at = machine.free_chunks()
    assert free_sizes.tolist() == sizes[:3200].tolist() and free_at.tolist() == free_addresses.tolist()
    assert [column.tolist() for column in machine.used_chunks()] == [used.tolist(), used_addresses.tolist(),
                                                                     sizes.tolist()]
    assert machine.regions() == dict.fromkeys(range(regions), region) and machine.region_slopes() == {99: 1}
    assert machine.region_rows() == [33 * r for r in range(regions)]
    # AND 16 KiB takes the first free chunk in key order, region 0's second (best fit, the lowest address)
    assert machine.run(3300, 3301) == bfc_compiled.DONE and machine.live()[3300] == chunk
    # AND once the allocations are freed, every region but region 50 is one free chunk again: each chunk freed joins
    # the free ones beside it in its region, none in another (row 0's, free first, is no region's neighbour)
    assert machine.run(3301, len(events) - 1) == bfc_compiled.DONE
    free_sizes, free_at = machine.free_chunks()
    whole = [r << 44 for r in range(regions) if r != 50]
    assert sorted(zip(free_sizes.tolist(), free_at.tolist()))[-99:] == [(region, at) for at in whole]
    assert machine.scalar("IN_USE") == chunk and machine.used_chunks()[1].tolist() == [50 << 44]
    # AND 2 MiB: collection gives back the 99 wholly free regions (region 50 holds an allocation) and makes region
    # 100 of the room they leave
    assert machine.run(len(events) - 1, len(events)) == bfc_compiled.DONE
    assert machine.regions() == {50: region, 100: 99 * region}
    assert sorted(r for r, _ in machine.given_back()) == [r for r in range(regions) if r != 50]


def test_a_machine_takes_a_state_just_past_its_first_room() -> None:
    # GIVEN 66 regions of 16 KiB chunks, all in use: 62 in each of the first 65, 67 in the last (4,097 chunks: one
    # past the first room of 4,096; 66 regions: two past the first room of 64)
    chunk = 16 * KIB
    counts = [62] * 65 + [67]
    addresses = np.array([(r << 44) + i * chunk for r, count in enumerate(counts) for i in range(count)],
                         dtype=np.int64)
    rows = np.arange(len(addresses), dtype=np.int64)
    sizes = np.full(len(addresses), chunk, dtype=np.int64)
    machine = bare_machine(np.full(len(rows), chunk, dtype=np.int64), 1 << 40, first_row=len(rows))
    nothing = np.zeros(0, dtype=np.int64)
    regions = {r: count * chunk for r, count in enumerate(counts)}
    # WHEN it is loaded
    machine.load(nothing, nothing, rows, addresses, sizes, regions, list(range(66)), {},
                 {"POOL": sum(regions.values()), "IN_USE": int(sizes.sum()), "GROWTH": 128 * MIB, "KEPT_WHOLE": -1,
                  "TFREE": -1, "TEND": -1})
    # THEN it reads back whole
    assert [column.tolist() for column in machine.used_chunks()] == [rows.tolist(), addresses.tolist(), sizes.tolist()]
    assert machine.regions() == regions and machine.chunks == 4097


def test_a_replay_that_outgrows_the_machines_first_room_grows_it_and_replays_alike(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN 10,000 allocations of 256 B (region 0, 2 MiB, holds 8,192; region 1, 4 MiB, the other 1,808), every other
    # one freed from the first (5,000 free chunks between chunks in use: none join), then 512 B
    events: list[tuple] = [("a", 256)] * 10_000 + [("f", row) for row in range(0, 10_000, 2)] + [("a", 512)]
    options = options_for(True, False, 0.0, 1 << 30)
    # WHEN replayed by both loops, recording every event (the compiled loop's tables first hold 4,096 chunks and keys)
    recorded = both(monkeypatch, lambda: columns(bfc.simulate(seq(*events), options)))
    # THEN they say the same, event by event; 512 B fits none of the 256 B holes and takes region 1's free end, after
    # its 1,808 chunks: 5,000 x 256 B + 512 B in use
    assert recorded[0] == recorded[1]
    simulation = bfc.simulate(seq(*events), options)
    assert (simulation.region[-1], simulation.offset[-1], simulation.bytes_in_use[-1]) == (1, 1808 * 256,
                                                                                           5000 * 256 + 512)


def test_a_region_made_and_split_where_the_machine_has_room_for_one_more_chunk_grows_its_room_first(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN 4,094 allocations of 256 B (region 0, 2 MiB, split each time: 4,095 chunks, the first room 4,096 less one),
    # then 1.5 MiB: the 1 MiB and 1 KiB left in region 0 is too small, so region 1 (4 MiB) is made and split, two more
    events: list[tuple] = [("a", 256)] * 4094 + [("a", 3 * MIB // 2)]
    options = options_for(True, False, 0.0, 1 << 30)
    # WHEN replayed by both loops, recording every event
    recorded = both(monkeypatch, lambda: columns(bfc.simulate(seq(*events), options)))
    # THEN they say the same, event by event: 1.5 MiB at region 1's start, 4,097 chunks at the end
    assert recorded[0] == recorded[1]
    simulation = bfc.simulate(seq(*events), options)
    assert simulation.regions == ((0, 2 * MIB), (1, 4 * MIB)) and len(simulation.chunks) == 4097
    assert (simulation.region[-1], simulation.offset[-1], simulation.chunk_bytes[-1]) == (1, 0, 3 * MIB // 2)


def test_a_machine_loaded_with_62_regions_made_makes_three_more() -> None:
    # GIVEN a machine loaded where 62 regions were made (the first room of 64 less two) and only region 61, 2 MiB,
    # is left, wholly in use (row 0); the growth size 4 MiB; then 4, 8 and 16 MiB (rows 1-3), none of which fits
    machine = bare_machine(np.array([2 * MIB, 4 * MIB, 8 * MIB, 16 * MIB], dtype=np.int64), 1 << 40)
    nothing = np.zeros(0, dtype=np.int64)
    machine.load(nothing, nothing, np.array([0]), np.array([61 << 44]), np.array([2 * MIB]), {61: 2 * MIB},
                 [0] * 62, {}, {"POOL": 2 * MIB, "IN_USE": 2 * MIB, "GROWTH": 4 * MIB, "KEPT_WHOLE": -1,
                                "TFREE": -1, "TEND": -1})
    # WHEN they are replayed
    assert machine.run(1, 4) == bfc_compiled.DONE
    # THEN each makes a region the size of the growth size (doubling after each): regions 62-64, at their slots
    assert machine.made_since(62) == [(62, 4 * MIB), (63, 8 * MIB), (64, 16 * MIB)]
    assert machine.regions() == {61: 2 * MIB, 62: 4 * MIB, 63: 8 * MIB, 64: 16 * MIB}
    assert machine.live() == {0: 61 << 44, 1: 62 << 44, 2: 63 << 44, 3: 64 << 44}
    assert machine.region_rows() == [0] * 62 + [1, 2, 3]


def test_a_machine_that_grows_its_room_for_regions_keeps_every_region_given_back() -> None:
    # GIVEN a recording machine loaded where 62 regions were made and 42 are left (regions 20-61, 1 MiB each, wholly
    # free), the pool 42 MiB of a 43 MiB limit, the growth size 4 MiB, collection on; then 2 MiB and 6 MiB (rows 0, 1)
    machine = bare_machine(np.array([2 * MIB, 6 * MIB], dtype=np.int64), 43 * MIB, gc=True, record=True)
    nothing = np.zeros(0, dtype=np.int64)
    left = range(20, 62)
    machine.load(np.full(42, MIB), np.array([r << 44 for r in left]), nothing, nothing, nothing, dict.fromkeys(left, MIB),
                 [0] * 62, {}, {"POOL": 42 * MIB, "GROWTH": 4 * MIB, "KEPT_WHOLE": -1, "TFREE": -1, "TEND": -1})
    # WHEN they are replayed: 2 MiB fits no free chunk nor the 1 MiB of room, so collection gives back the 42 regions
    # and region 62 is made (4 MiB); 6 MiB fits none of its 2 MiB left, and region 63 (8 MiB) is made: the 64th, past
    # the machine's first room for regions, which it grows first
    assert machine.run(0, 2) == bfc_compiled.DONE
    # THEN every region given back is still listed, with the row that gave it back
    assert machine.given_back() == [(r, 0) for r in left]
    assert machine.made_since(62) == [(62, 4 * MIB), (63, 8 * MIB)]


def test_without_numba_the_compiled_loop_is_not_available_and_that_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN numba not installed (as without the test extras), and the answer not yet found
    monkeypatch.setattr(bfc_compiled, "numba", None)
    monkeypatch.setattr(bfc_compiled, "_usable", [])
    # THEN the loop is not available, and that answer is kept for the process
    assert bfc_compiled.available() is False and bfc_compiled._usable == [False]


@pytest.mark.parametrize("replay", ["python", "compiled"])
def test_collection_makes_room_for_a_request_of_exactly_the_room_it_leaves_and_forgets_what_it_gave_back(
        monkeypatch: pytest.MonkeyPatch, replay: str) -> None:
    monkeypatch.setenv("MEMTRACE_REPLAY", replay)
    options = BFCOptions(7 * MIB, garbage_collection=True)
    # GIVEN growth and collection under 7 MiB: 2 MiB (region 0, 2 MiB), 1.5 MiB (region 1, 4 MiB, split: 2.5 MiB
    # free; 1 MiB of room left), the 2 MiB freed (region 0 wholly free), 3 MiB: no free chunk holds it, nor the room;
    # collection would leave 1 + 2 = 3 MiB, exactly the request; then 1 MiB
    events = [("a", 2 * MIB), ("a", 3 * MIB // 2), ("f", 0), ("a", 3 * MIB), ("a", MIB)]
    simulation = bfc.simulate(seq(*events), options)
    # THEN region 0 is given back and region 2 made of the 3 MiB left, all 3 MiB's; 1 MiB takes region 1's free
    # chunk (region 0's is gone with it), after its 1.5 MiB
    assert simulation.fits and simulation.regions == ((1, 4 * MIB), (2, 3 * MIB))
    assert simulation.given_back == ((0, 3),)
    assert (simulation.region[-1], simulation.offset[-1]) == (1, 3 * MIB // 2)
    # AND where region 1 is the one given back (4 MiB freed, then 5 MiB: 1 + 4 MiB left, exactly), region 2 (5 MiB)
    # is made and region 0 kept; once region 0's 2 MiB is freed, 1 MiB takes its start
    events = [("a", 2 * MIB), ("a", 4 * MIB), ("f", 1), ("a", 5 * MIB), ("f", 0), ("a", MIB)]
    simulation = bfc.simulate(seq(*events), options)
    assert simulation.fits and simulation.regions == ((0, 2 * MIB), (2, 5 * MIB))
    assert simulation.given_back == ((1, 3),)
    assert (simulation.region[-1], simulation.offset[-1]) == (0, 0)
