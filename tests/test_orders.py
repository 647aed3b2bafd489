"""The orders a run may take (``memtrace.allocator.orders``): units, the partial order, sampled orders,
TF's retry, and the band, on sequences worked out by hand and on real recordings.

GIVEN a recording's events on its threads WHEN memtrace derives the orders a runtime could have
taken and replays them THEN every order keeps what data and program order force, a failing request
waits for other threads' frees as TensorFlow's retry does (and only for what does not depend on it),
and the band's edges are what the sampled orders need.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

import memtrace
from memtrace.allocator import bfc, orders
from memtrace.allocator.bfc import BFCOptions, Requests
from memtrace.allocator.fit import fit
from memtrace.cli import main
from tests.test_bfc import random_events

FIXTURES = Path(__file__).parent.parent / "fixtures"
FIT = FIXTURES / "fit"
BATCHES = FIXTURES / "batches"
BFC = "bfc_cpu_allocator_for_gpu"
MIB = 1 << 20
NO_GROWTH = BFCOptions(0, allow_growth=False)


def graph(events: list[tuple[str, int] | tuple[str, int, str]], threads: list[int], window_ns: int) -> orders.OrderGraph:
    """A hand-made recording: ``events`` as ``Requests.from_events`` takes them (times are the row numbers)."""
    return orders.order_graph(Requests.from_events(events), np.array(threads), window_ns=window_ns)


def preds(g: orders.OrderGraph) -> list[list[int]]:
    return [g.preds[g.pred_offsets[u]:g.pred_offsets[u + 1]].tolist() for u in range(g.units)]


# -- the partial order ------------------------------------------------------------------------------


def test_units_are_runs_of_one_thread_and_one_op_and_follow_their_thread_and_their_data() -> None:
    # rows: 0-1 thread 1 allocates twice for op a; 2 thread 2 allocates for b; 3 thread 1 frees row 0;
    # 4 thread 1 allocates for c; 5-6 thread 2 frees its own row 2, then thread 1's row 1
    g = graph([("a", 1024, "a"), ("a", 2048, "a"), ("a", 512, "b"), ("f", 0), ("a", 256, "c"), ("f", 2), ("f", 1)],
              [1, 1, 2, 1, 1, 2, 2], window_ns=10)
    # units: rows 0-1 (one op on one thread), 2 (another thread), 3 (thread 1 again: a free after thread 2's
    # event), 4 (a new op), 5-6 (thread 2's frees)
    assert g.unit_rows.tolist() == [0, 2, 3, 4, 5, 7] and g.threads == 2
    # thread 1: 0 -> 2 -> 3; thread 2: 1 -> 4; data: row 3 frees row 0 (unit 0), row 5 frees row 2 (unit 1),
    # row 6 frees row 1 (unit 0)
    assert preds(g) == [[], [], [0], [2], [0, 1]]
    assert g.reorderable()  # units 0 and 1 are 2 ns apart, neither follows the other
    assert not graph([("a", 1024, "a"), ("a", 512, "b"), ("f", 0)], [1, 1, 1], window_ns=10).reorderable()
    # further apart than the window: every pair of neighbours keeps its order
    assert not graph([("a", 1024, "a"), ("a", 512, "b"), ("f", 0), ("f", 1)], [1, 2, 1, 2], window_ns=0).reorderable()


def test_unknown_ops_make_every_allocation_a_unit() -> None:
    # XLA's profiles name no op: the reader calls every allocation "(no op)"
    g = graph([("a", 256, "(no op)"), ("a", 256, "(no op)"), ("f", 0), ("a", 256)], [1, 1, 1, 1], window_ns=10)
    assert g.unit_rows.tolist() == [0, 1, 3, 4]


def test_sampled_orders_keep_the_partial_order_and_the_recorded_one_comes_first() -> None:
    events = [("a", 1024, "a"), ("a", 512, "b"), ("f", 0), ("a", 768, "c"), ("f", 1), ("f", 3)]
    g = graph(events, [1, 2, 1, 2, 1, 2], window_ns=3)
    drawn = orders.sample_orders(g, 24, seed=7)
    assert drawn[0].units.tolist() == list(range(g.units)) and drawn[0].requests is g.requests
    seen = {tuple(o.units.tolist()) for o in drawn}
    assert len(seen) > 1  # the window lets some neighbours swap
    for o in drawn:
        position = {u: k for k, u in enumerate(o.units.tolist())}
        assert all(position[p] < position[u] for u in range(g.units) for p in preds(g)[u])
        q = o.requests
        freed = np.flatnonzero(~q.is_alloc)
        assert (q.frees[freed] < freed).all()  # every free after its allocation, renumbered
        assert sorted(q.requested_bytes[q.is_alloc].tolist()) == [512, 768, 1024]
    # seeded: the same orders again
    assert [o.units.tolist() for o in orders.sample_orders(g, 24, seed=7)] == [o.units.tolist() for o in drawn]
    # a window of 0 keeps the recorded order: every order drawn is it
    still = orders.order_graph(g.requests, np.array([1, 2, 1, 2, 1, 2]), window_ns=0)
    assert {tuple(o.units.tolist()) for o in orders.sample_orders(still, 8)} == {tuple(range(still.units))}


# -- TF's retry -------------------------------------------------------------------------------------

# Thread 1 holds 1 KiB (row 0); thread 2 asks for 1 KiB (row 1) and frees it (row 2); thread 1 then frees its
# own (row 3). Under a 1 KiB limit without growth the recorded order runs out at row 1.
WAITS = [("a", 1024, "x"), ("a", 1024, "y"), ("f", 1), ("f", 0)]


def test_a_failing_request_waits_for_another_threads_free() -> None:
    g = graph(WAITS, [1, 2, 2, 1], window_ns=2)
    recorded = orders.sample_orders(g, 1)[0]
    at_1k = BFCOptions(1024, allow_growth=False)
    assert not bfc.fits(g.requests, at_1k)  # in the recorded order row 1 finds no room
    # with the retry, thread 2 waits; thread 1's free (2 ns later, within the window) runs and makes room
    assert bfc.fits(g.requests, at_1k, recorded.schedule())
    # a window of 1 ns: the free is too far away to run meanwhile, and the request fails for good
    narrow = orders.order_graph(g.requests, np.array([1, 2, 2, 1]), window_ns=1)
    assert not bfc.fits(g.requests, at_1k, orders.sample_orders(narrow, 1)[0].schedule())



def test_a_free_lets_the_waiting_request_go_before_the_next_unit() -> None:
    # rows: 0 thread 1 takes the 1 KiB region (x); 1 thread 2 asks for y, finds no room and waits; 2 thread 1 frees x;
    # 3 thread 3 asks for z; thread 2 then frees y (4), runs an op w that asks for nothing (5) and frees z (6): the
    # unit of w and z's free follows z and thread 2's free of y, which waits on y
    g = graph([("a", 1024, "x"), ("a", 1024, "y"), ("f", 0), ("a", 1024, "z"), ("f", 1), ("a", 0, "w"), ("f", 3)],
              [1, 2, 1, 3, 2, 2, 2], window_ns=100)
    assert preds(g) == [[], [], [0], [], [1], [3, 4]]
    at_1k = BFCOptions(1024, allow_growth=False)
    # THEN x's free hands the room to the waiting y first (TF's retry wakes on a free); z then waits for y's free.
    # Were z served first, y could never be (z's free follows y's thread) and the run would fail.
    assert bfc.fits(g.requests, at_1k, orders.sample_orders(g, 1)[0].schedule())


def test_a_request_that_fails_in_the_shared_rows_still_waits_for_another_threads_free() -> None:
    from memtrace.allocator.bfc import SharedStart, search_min_limit

    # rows: thread 1 takes x (1 KiB) and thread 2 y (512 B) in one region of the limit (no growth); thread 1 frees x
    # and asks for z (1.5 KiB); thread 2 frees y, thread 1 z. Under 2 KiB z finds two free pieces (1 KiB where x was,
    # 512 B after y) and no room for 1.5 KiB: in the recorded order the run needs 3 KiB (a tail of 1.5 KiB after y)
    events = [("a", 1024, "x"), ("a", 512, "y"), ("f", 0), ("a", 1536, "z"), ("f", 1), ("f", 3)]
    g = graph(events, [1, 2, 1, 1, 2, 1], window_ns=100)
    no_growth = BFCOptions(0, allow_growth=False)
    assert search_min_limit(g.requests, no_growth, 256).limit_bytes == 3072
    # THEN with TF's retry z waits for thread 2's free of y, which merges the two pieces: 2 KiB, the bytes z and y
    # hold at once; the same where the first four rows (the failure among them) are shared with another sequence
    order = orders.sample_orders(g, 1)[0]
    assert search_min_limit(order.requests, no_growth, 256, schedule=order.schedule()).limit_bytes == 2048
    shared = SharedStart(g.requests, no_growth, 4)
    assert search_min_limit(order.requests, no_growth, 256, schedule=order.schedule(), shared=shared).limit_bytes == 2048
    # AND asked alone at 2 KiB from those shared rows: the order fits with the retry, and not without it
    two_kib = BFCOptions(2048, allow_growth=False)
    assert bfc.fits(order.requests, two_kib, order.schedule(), shared)
    assert not bfc.fits(order.requests, two_kib, None, shared)
    assert bfc.fits(order.requests, BFCOptions(3072, allow_growth=False), None, shared)


def test_after_a_free_every_other_waiting_request_is_tried_again() -> None:
    # rows: thread 1 takes the whole 4 KiB region (big); threads 2, 3 and 4 ask for A (1 KiB, which thread 2 frees at
    # once), B (2 KiB) and C (2.25 KiB), and wait; thread 1 frees big. A is served and freed, then B and C are tried
    # again: B splits the region (4 KiB is twice 2 KiB), and C finds 2 KiB and never more (B is never freed)
    g = graph([("a", 4096, "big"), ("a", 1024, "A"), ("f", 1), ("a", 2048, "B"), ("a", 2304, "C"), ("f", 0)],
              [1, 2, 2, 3, 4, 1], window_ns=100)
    order = orders.sample_orders(g, 1)[0]
    # THEN the run does not fit 4 KiB (C waits in vain), and fits where C finds room beside B
    assert not bfc.fits(g.requests, BFCOptions(4096, allow_growth=False), order.schedule())
    assert bfc.fits(g.requests, BFCOptions(4608, allow_growth=False), order.schedule())

def test_a_waiting_request_holds_back_what_depends_on_it() -> None:
    # as above, but thread 1 frees thread 2's buffer (row 2 follows row 1's unit by data) and thread 2 frees
    # thread 1's (row 3 follows thread 2's unit on its thread): nothing can run while row 1 waits
    g = graph([("a", 1024, "x"), ("a", 1024, "y"), ("f", 1), ("f", 0)], [1, 2, 1, 2], window_ns=100)
    assert preds(g) == [[], [], [0, 1], [0, 1]]
    assert not bfc.fits(g.requests, BFCOptions(1024, allow_growth=False), orders.sample_orders(g, 1)[0].schedule())
    assert bfc.fits(g.requests, BFCOptions(2048, allow_growth=False), orders.sample_orders(g, 1)[0].schedule())


# -- the band ---------------------------------------------------------------------------------------

# 1 KiB then 512 B held, each freed (rows 0, 1; freed at rows 2, 3): the hand-made recording of the band's tests,
# on two threads (1, 2, 1, 2) or one
HOLDS: list[tuple[str, int] | tuple[str, int, str]] = [("a", 1024, "p"), ("a", 512, "q"), ("f", 0), ("f", 1)]


def test_the_band_over_orders_that_need_different_limits() -> None:
    # thread 1 holds 1 KiB then frees it (rows 0, 2); thread 2 holds 512 B then frees it (rows 1, 3).
    # Recorded, without growth (one region of the limit): under 1.5 KiB the 1 KiB request gets the whole
    # region (1,536 is less than twice 1,024: not split), and the 512 B find no room; 2 KiB splits: the
    # recorded order alone needs 2 KiB.
    g = graph(HOLDS, [1, 2, 1, 2], window_ns=100)
    band = orders.order_band([orders.Recording("hand-made", g)], NO_GROWTH, orders=16, granularity=256)
    # With the retry, under 1.5 KiB the 512 B wait for thread 1's free: the recorded order needs 1.5 KiB (the
    # search looks no lower than the bytes it holds at once); with thread 1's free before thread 2's
    # allocation, 1 KiB.
    needs = sorted({o.min_limit_bytes for o in band.orders})
    assert needs == [1024, 1536] and band.recorded_limits == (2048,)
    assert (band.first_fit_bytes, band.always_fits_bytes) == (1024, 1536)
    # the orders disagree: below the fewest bytes any order holds at once (1 KiB) none fits
    assert band.never_fits_below_bytes == 1024 and not band.narrow and not band.fixed
    k = sum(o.min_limit_bytes == 1024 for o in band.orders)
    assert band.steps() == [(1024, k), (1536, 16)] and 0 < k < 16
    assert band.share(1280) == k / 16
    # under a limit every order is replayed there, with the retry: at 1 KiB the recorded order's 512 B
    # waits for thread 1's free, so every order runs
    at = orders.order_band([orders.Recording("hand-made", g)], NO_GROWTH, orders=16, granularity=256, limit=1024)
    assert at.fitting_at_limit == 16 and at.all_fit
    below = orders.order_band([orders.Recording("hand-made", g)], NO_GROWTH, orders=16, granularity=256, limit=768)
    assert below.fitting_at_limit == 0 and below.all_fit is False
    # one order asked for: the recorded one alone, which needs 1.5 KiB with the retry (its 512 B wait); none: refused
    one = orders.order_band([orders.Recording("hand-made", g)], NO_GROWTH, orders=1, granularity=256)
    assert [o.min_limit_bytes for o in one.orders] == [1536] and one.recorded_limits == (2048,)
    with pytest.raises(ValueError, match="at least one order"):
        orders.order_band([orders.Recording("hand-made", g)], NO_GROWTH, orders=0, granularity=256)


def test_one_chain_is_one_order_and_a_narrow_band() -> None:
    # the sequence above on one thread: nothing can run while the 512 B wait, so 2 KiB (see above)
    g = graph(HOLDS, [1, 1, 1, 1], window_ns=100)
    band = orders.order_band([orders.Recording("one thread", g)], NO_GROWTH, orders=16, granularity=256)
    assert band.fixed and band.narrow and len(band.orders) == 1
    assert (band.never_fits_below_bytes, band.first_fit_bytes, band.always_fits_bytes) == (2048, 2048, 2048)


# -- real recordings --------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "boundary_mib"), [("cnn", 28), ("lstm", 7), ("transformer", 11)])
def test_one_thread_programs_have_a_narrow_band_at_tensorflows_boundary(name: str, boundary_mib: int) -> None:
    # fixtures/fit: one inter-op and one intra-op thread, oneDNN off; TF's own ladder agreed run after run
    evidence = json.loads((FIT / f"{name}.json").read_text())
    assert evidence["boundary"]["fits_mib"] == boundary_mib
    result = fit(memtrace.load(FIT / f"{name}.xplane.pb.gz"), BFC, alternatives=False)
    band = result.band
    assert band is not None and band.narrow and len(band.orders) == orders.DEFAULT_ORDERS
    assert band.never_fits_below_bytes == band.always_fits_bytes == result.min_limit_bytes == boundary_mib * MIB
    for run in evidence["ladder"]:  # every run of TF's ladder is on the side of the band it should be
        assert (run["outcome"] == "completed") == (run["limit_mib"] * MIB >= band.always_fits_bytes)


def test_two_recordings_of_one_step_make_one_band_with_each_ones_own_limit(capsys: pytest.CaptureFixture[str]) -> None:
    # the LSTM at batch 48 recorded twice: one run kept the recurrent gradient of all 16 steps alive at once
    # (fixtures/README.md). TensorFlow itself ran out at 7 MiB and completed at 8 (batches/ladders.json).
    first, again = str(BATCHES / "lstm_b48.xplane.pb.gz"), str(BATCHES / "lstm_b48_rerun.xplane.pb.gz")
    assert main(["fit", first, again, "--no-alternatives", "--json"]) == 0
    (doc,) = json.loads(capsys.readouterr().out)["allocators"]
    band = doc["band"]
    assert band["recorded_min_limit_bytes"] == [5 * MIB, 8 * MIB] and band["recordings"] == [first, again]
    assert [r["min_limit_bytes"] for r in doc["recordings"]] == [5 * MIB, 8 * MIB]
    assert band["first_fit_bytes"] == 5 * MIB and band["always_fits_bytes"] == 8 * MIB
    assert band["never_fits_below_bytes"] <= 5 * MIB and band["orders"] == 2 * orders.DEFAULT_ORDERS
    ladder = json.loads((BATCHES / "ladders.json").read_text())["limits"]
    tf = next(x for x in ladder if (x["model"], x["batch"]) == ("lstm", 48))
    assert band["never_fits_below_bytes"] <= tf["ran_out_mib"] * MIB < band["always_fits_bytes"] <= tf["min_limit_mib"] * MIB
    assert main(["fit", first, again, "--no-alternatives"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "2 recordings of one step" in text and "each recording's own order needs: 5 MiB (lstm_b48.xplane.pb.gz), 8 MiB" in text
    assert "spread 3 MiB" in text
    # under 7 MiB only the orders of the first recording run: it does not fit
    assert main(["fit", first, again, "--no-alternatives", "--limit", "7MiB", "--json"]) == 1
    (doc,) = json.loads(capsys.readouterr().out)["allocators"]
    assert doc["fits"] is True and doc["fits_every_order"] is False  # the first recording's own order fits
    assert doc["band"]["fitting_orders_at_limit"] == orders.DEFAULT_ORDERS


def test_orders_zero_is_the_recorded_order_alone(capsys: pytest.CaptureFixture[str]) -> None:
    profile = str(FIT / "cnn.xplane.pb.gz")
    assert main(["fit", profile, "--no-alternatives", "--orders", "0", "--json"]) == 0
    (doc,) = json.loads(capsys.readouterr().out)["allocators"]
    assert doc["band"] is None and doc["fits_every_order"] is None
    assert main(["fit", profile, "--no-alternatives", "--orders", "0"]) == 0
    text = capsys.readouterr().out
    assert "smallest limit: 28 MiB\n" in text and "orders a run may take" not in text
    assert main(["fit", profile, str(FIT / "lstm.xplane.pb.gz"), "--orders", "0"]) == 2
    assert "--orders 0 replays only one recorded order" in capsys.readouterr().err
    assert main(["fit", profile, "--orders", "-1"]) == 2
    assert main(["fit", profile, "--window", "soon"]) == 2


# -- the recordings of TensorFlow's default threads (fixtures/orders) and its ladder ---------------------

ORDERS = FIXTURES / "orders"


def ladder(config: str) -> list[tuple[int, int, int]]:
    """TensorFlow's own runs under one limit each: (limit MiB, runs, runs that completed)."""
    document = json.loads((ORDERS / "ladders.json").read_text())
    return [(s["limit_mib"], s["runs"], s["completed"]) for s in document["configs"][config]["ladder"]]


def test_the_band_of_one_default_thread_recording_holds_every_limit_where_runs_disagreed() -> None:
    result = fit(memtrace.load(ORDERS / "default.r1.xplane.pb.gz"), BFC, alternatives=False)
    band = result.band
    assert band is not None and result.min_limit_bytes == 113 * MIB and not band.narrow
    disagreed = [limit for limit, runs, done in ladder("default") if 0 < done < runs]
    assert disagreed and min(disagreed) == 84 and max(disagreed) == 116
    assert all(band.never_fits_below_bytes <= limit * MIB < band.always_fits_bytes for limit in disagreed)
    # the bottom edge: the fewest bytes alive at once in a sampled order, rounded up; no run fitted below it
    assert band.never_fits_below_bytes == 83 * MIB
    assert all(done == 0 for limit, runs, done in ladder("default") if limit * MIB < band.never_fits_below_bytes)


def test_the_steady_recordings_make_a_band_of_one_limit_where_every_run_agreed() -> None:
    traces = [memtrace.load(ORDERS / f"steady.r{k}.xplane.pb.gz") for k in (1, 2)]
    result = traces[0].fit(BFC, alternatives=False, others=traces[1:])
    band = result.band
    assert band is not None and band.narrow and len(band.orders) == 2 * orders.DEFAULT_ORDERS
    assert band.never_fits_below_bytes == band.always_fits_bytes == 113 * MIB and band.recorded_limits == (113 * MIB,) * 2
    for limit, runs, done in ladder("steady"):
        assert done == (runs if limit >= 113 else 0)


def test_the_recorded_order_is_searched_to_the_mib_and_each_drawn_one_from_its_answer() -> None:
    # orders.py's speed rule, on the steady recording (TF's ladder: every run fitted from 113 MiB, none below): the
    # recorded order's search replays every limit below its boundary down to the rounded bytes alive at once; each
    # drawn order replays the recorded answer and the MiB below it, and where that brackets its boundary, stops
    result = fit(memtrace.load(ORDERS / "steady.r1.xplane.pb.gz"), BFC, alternatives=False)
    assert result.band is not None
    recorded, *drawn = result.band.orders
    assert recorded.recorded and len(drawn) == orders.DEFAULT_ORDERS - 1 and not any(o.recorded for o in drawn)
    lowest = -(-result.requested_peak_bytes // MIB)
    assert sorted(limit // MIB for limit, ok in recorded.tried if not ok) == list(range(lowest, 113))
    assert all(tuple(o.tried) == ((113 * MIB, True), (112 * MIB, False)) for o in drawn)


def test_asked_only_whether_a_limit_fits_the_steady_recording_says_what_tensorflows_runs_did() -> None:
    # fit --limit L --no-smallest: each sampled order replayed once under L, no limit searched; TF's ladder for the
    # steady configuration: every run completed from 113 MiB, none below
    trace = memtrace.load(ORDERS / "steady.r1.xplane.pb.gz")
    for limit, runs, done in ladder("steady"):
        result = trace.fit(BFC, limit * MIB, alternatives=False, smallest=False)
        assert result.band is None and result.orders_under is not None and result.min_limit_bytes is None
        assert result.orders_under.sampled == orders.DEFAULT_ORDERS
        assert result.verdict == (done == runs) and result.orders_under.fitting == (
            orders.DEFAULT_ORDERS if done == runs else 0)


def test_a_limit_passes_only_when_every_sampled_order_fits(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from memtrace.testing import assert_fits

    profile = str(ORDERS / "default.r1.xplane.pb.gz")
    # 116 MiB: the recorded order fits, and one run of TensorFlow's eight ran out there
    assert main(["check", profile, "--fits", "CPU:0=116MiB"]) == 1
    text = " ".join(capsys.readouterr().out.split())
    assert "the recorded order fits; 28 of 32 sampled orders fit (88%), and the limit passes only when every one" in text
    assert "does not fit under 116 MiB (121,634,816 B) (every sampled order fits from 121 MiB" in text
    assert main(["check", profile, "--fits", "CPU:0=116MiB", "--orders", "0"]) == 0
    capsys.readouterr()
    budget = tmp_path / "budget.toml"
    budget.write_text('["CPU:0"]\nfits = "116MiB"\n')
    assert main(["check", profile, "--budget", str(budget), "--json"]) == 1
    (outcome,) = json.loads(capsys.readouterr().out)["budgets"]
    assert outcome["measured"] == 121 * MIB and outcome["measured_as"] == "every sampled order fits from"
    with pytest.raises(AssertionError, match=r"28 of 32 sampled orders fit \(88%\)"):
        assert_fits(profile, "CPU:0", "116MiB")
    assert_fits(profile, "CPU:0", "116MiB", orders=0)
    assert_fits(profile, "CPU:0", "122MiB")
    assert main(["fit", profile, "--limit", "116MiB", "--no-alternatives", "--json"]) == 1
    (doc,) = json.loads(capsys.readouterr().out)["allocators"]
    assert doc["fits"] is True and doc["fits_every_order"] is False
    assert doc["band"]["fitting_orders_at_limit"] == 28 and doc["band"]["orders"] == 32


@pytest.mark.parametrize(("config", "limit_mib", "place", "after", "verdict"),
                         [("default", 86, 4116, 0, "exhausted"), ("steady", 112, 3750, 38, "fragmentation")])
def test_oom_trace_puts_the_failed_request_where_tensorflow_retried_it(
        config: str, limit_mib: int, place: int, after: int, verdict: str) -> None:
    from memtrace.allocator.oom import analyse_all
    from memtrace.allocator.oom_fit import avoidance, failed_request_place
    from memtrace.allocator.requests import requests_for
    from memtrace.read.oom import load_oom_dumps

    # GIVEN a run recorded from the allocator's birth that ran out of memory, its log and its MemoryDump
    stem = ORDERS / f"{config}.oom.{limit_mib}mib"
    [event] = analyse_all(load_oom_dumps(str(stem) + ".log"))
    (dumped,) = load_oom_dumps(str(stem) + ".memdump.pb")
    assert event.limit_bytes == limit_mib * MIB and event.in_use_bytes == dumped.stats.in_use_bytes
    trace = memtrace.load(str(stem) + ".xplane.pb.gz")
    requests = requests_for(trace, BFC).requests
    # the profile's clock stops for TensorFlow's 10 s retry right there, after the failing request's first try
    gap = requests.time_ns[place] - requests.time_ns[place - 1]
    assert 10e9 <= gap < 10.1e9 and int(np.count_nonzero(requests.is_alloc[place:])) == after
    # WHEN the run is replayed under the dump's limit THEN the dump's request goes there, and the model runs out
    # of memory at it in the dump's own state (not after the trace's last allocation, where it would not)
    replay = bfc.simulate(requests, BFCOptions(limit_mib * MIB, regions_descending=True))
    assert replay.fits and failed_request_place(requests, replay, event) == place
    a = avoidance(event, trace)
    failure = a.result.failure
    assert a.appended and a.same_request and a.same_state and failure is not None and failure.row == place
    assert (failure.in_use_bytes, failure.verdict) == (event.in_use_bytes, verdict)
    assert any("the trace's clock stops for 10.0 s: TensorFlow's retry waited there" in note for note in a.assumptions)


def test_a_band_over_its_budget_says_how_many_orders_it_replayed(monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # a budget of one replay: the recorded order and three drawn ones, no more
    monkeypatch.setattr(orders, "BAND_BUDGET_EVENTS", 1)
    profile = str(ORDERS / "default.r1.xplane.pb.gz")
    assert main(["fit", profile, "--no-alternatives", "--json"]) == 0
    (doc,) = json.loads(capsys.readouterr().out)["allocators"]
    assert (doc["band"]["orders"], doc["band"]["orders_asked"]) == (orders.MIN_ORDERS, orders.DEFAULT_ORDERS)
    assert main(["fit", profile, "--no-alternatives"]) == 0
    assert "4 of the 32 orders asked for: replaying more would take longer than the band's budget" in " ".join(
        capsys.readouterr().out.split())


GPU = FIXTURES / "gpu-h200"
# fixtures/gpu-h200/README.md: 930 MiB fit 4 of 6 times, 936 4 of 6, 944 3 of 5, 956 5 of 6, 962 5 of 5
GPU_DISAGREED_MIB = (930, 936, 944, 956)


@pytest.mark.parametrize("name", ["mlp_930", "orders/mlp_o0", "orders/mlp_o2"])
def test_the_band_of_one_gpu_recording_holds_every_limit_where_xlas_runs_disagreed(name: str) -> None:
    # GIVEN one recording of the MLP under XLA (its own order needs 929 or 961 MiB in the partitioned model)
    result = fit(memtrace.load(GPU / f"{name}.xplane.pb.gz"), "GPU_0_bfc", alternatives=False)
    band = result.band
    assert band is not None and result.options.partitioned and result.min_limit_bytes in (929 * MIB, 961 * MIB)
    # THEN the band holds every limit where XLA's runs disagreed, and ends where they all fitted (962)
    assert all(band.never_fits_below_bytes <= limit * MIB < band.always_fits_bytes for limit in GPU_DISAGREED_MIB)
    assert band.always_fits_bytes == 961 * MIB and band.never_fits_below_bytes == 897 * MIB
    # the orders it samples need what the recorded orders of this program needed: 897 (mlp_9538's), 929 or 961
    assert {o.min_limit_bytes // MIB for o in band.orders} <= {897, 929, 961}
    assert {929, 961} <= {o.min_limit_bytes // MIB for o in band.orders}


def test_where_the_dumps_failed_request_goes_worked_by_hand() -> None:
    from types import SimpleNamespace

    from memtrace.allocator.oom_fit import failed_request_place

    # GIVEN 1 KiB, 2 KiB, the 1 KiB freed, 1 KiB again (the last allocation), the rest freed: bytes in use after
    # each number of events 0..6: 0, 1024, 3072, 2048, 3072, 1024, 0
    def place(in_use: int, times: list[int]) -> int | None:
        requests = Requests(np.array([True, True, False, True, False, False]), np.array([1024, 2048, 0, 1024, 0, 0]),
                            np.array([-1, -1, 0, -1, 1, 3]), np.full(6, -1, dtype=np.int32), np.array(times), ())
        replay = bfc.simulate(requests, BFCOptions(MIB * 64))
        event = SimpleNamespace(in_use_bytes=in_use, pool_bytes=None, largest_free_bytes=None)
        return failed_request_place(requests, replay, event)  # type: ignore[arg-type]

    steady = [0, 1, 2, 3, 4, 5]
    # WHEN the dump's bytes in use are 3,072: after 2 events and after 4; the last allocation is event 3
    # THEN the first place after the last allocation (4), unless the clock stops for ~10 s before event 2 (TF's retry)
    assert place(3072, steady) == 4
    assert place(3072, [0, 1, 10 * 10**9 + 1, 10 * 10**9 + 2, 10 * 10**9 + 3, 10 * 10**9 + 4]) == 2
    # 2,048 only before the last allocation: there; 1,024 at 1 and 5: 5; 0 at 0 and 6 (the end): 6; 999: nowhere
    assert (place(2048, steady), place(1024, steady), place(0, steady), place(999, steady)) == (3, 5, 6, None)


def test_the_dumps_pool_and_largest_free_chunk_pick_among_equal_bytes_in_use_worked_by_hand() -> None:
    from types import SimpleNamespace

    from memtrace.allocator.oom_fit import failed_request_place

    # GIVEN 1 KiB (a 2 MiB region), 3 MiB (a 4 MiB region), the 3 MiB freed: 1 KiB in use after 1 event (pool
    # 2 MiB, largest free chunk 2 MiB - 1 KiB) and after 3 (pool 6 MiB, largest free 4 MiB)
    requests = Requests.from_events([("a", 1024), ("a", 3 * MIB), ("f", 1)])
    replay = bfc.simulate(requests, BFCOptions(64 * MIB))
    assert replay.pool_bytes.tolist() == [2 * MIB, 6 * MIB, 6 * MIB]

    def place(pool: int | None, largest: int | None) -> int | None:
        event = SimpleNamespace(in_use_bytes=1024, pool_bytes=pool, largest_free_bytes=largest)
        return failed_request_place(requests, replay, event)  # type: ignore[arg-type]

    # THEN the bytes in use alone give the place after the last allocation (3); the dump's pool or largest free
    # chunk, where it says them, pick the state they describe
    assert place(None, None) == 3
    assert place(2 * MIB, None) == 1 and place(None, 2 * MIB - 1024) == 1
    assert place(6 * MIB, None) == 3 and place(None, 4 * MIB) == 3


def test_the_retry_serves_every_row_once_and_the_failed_one_again_worked_by_hand() -> None:
    # GIVEN thread 1: 1 KiB (row 0), its free (row 2); thread 2: 512 B (row 1), its free (row 3); the recorded order
    g = graph(HOLDS, [1, 2, 1, 2], window_ns=100)
    schedule = bfc._ScheduleRows(orders.sample_orders(g, 1)[0].schedule()(0))
    served: list[int] = []
    for row in schedule:
        served.append(row)
        if row == 1 and served.count(1) == 1:
            assert schedule.blocked(1)  # WHEN the 512 B fail the first time
    # THEN thread 1 runs on (its free, row 2), the 512 B are tried again after that free, and only then does their
    # free (row 3, which follows them) come
    assert served == [0, 1, 2, 1, 3]
    # GIVEN thread 2's next op (128 B, row 2: it follows the 512 B on their thread), then 256 B on thread 3 (row 3),
    # and thread 1's free last (row 4)
    g = graph([("a", 1024, "p"), ("a", 512, "q"), ("a", 128, "s"), ("a", 256, "r"), ("f", 0)], [1, 2, 2, 3, 1],
              window_ns=100)
    schedule = bfc._ScheduleRows(orders.sample_orders(g, 1)[0].schedule()(0))
    served = []
    for row in schedule:
        served.append(row)
        if row == 1 and served.count(1) == 1:
            assert schedule.blocked(1)
    # THEN thread 2's next op is held back behind the waiting request, thread 3 and thread 1 run on, the 512 B are
    # tried again after thread 1's free, and the held-back op comes after them
    assert served == [0, 1, 3, 4, 1, 2]


def random_recording(seed: int, events: int) -> orders.OrderGraph:
    """A random recording on four threads: ops of 256 B to 64 KiB, about half of them freed, a window of 1 to 19 ns."""
    rng = np.random.default_rng(seed)
    made = random_events(rng, events, lambda rng: ("a", int(2 ** rng.uniform(8, 16)), f"op{int(rng.integers(0, 40))}"))
    return graph(made, rng.integers(1, 5, len(made)).tolist(), window_ns=int(rng.integers(1, 20)))


def test_a_replay_that_switches_to_the_retry_at_its_first_failure_ends_as_one_served_by_it_from_the_start() -> None:
    # GIVEN random recordings on four threads (ops of 256 B to 64 KiB, about half freed) and orders drawn from them,
    # replayed under limits around their peak (one region, and growth)
    switched = 0
    for seed in range(30):
        g = random_recording(seed, 120)
        peak = g.requests.peak_rounded_live_bytes()
        for order in orders.sample_orders(g, 3, seed):
            for limit in (peak // 256 * 256, int(peak * 1.1) // 256 * 256, int(peak * 1.4) // 256 * 256):
                for growth in (False, True):
                    options = BFCOptions(limit, allow_growth=growth)
                    # WHEN it is replayed in order until a request fails and from there as the retry serves it, and
                    # again served by the retry from the first request
                    ours = bfc._Run(order.requests, options, record=False, retry=order.schedule())
                    served = bfc._Run(order.requests, options, record=False, schedule=order.schedule())
                    # THEN both end alike: where they fail (if they do) and the allocator's state
                    assert (ours.failed_at, ours.used, ours.addr_of, ours.regions, ours._end) == (
                        served.failed_at, served.used, served.addr_of, served.regions, served._end), (seed, limit)
                    plain = bfc._Run(order.requests, options, record=False)
                    switched += plain.failed_at is not None
    # AND many of them did fail in order (the retry took over)
    assert switched > 100


def test_a_resized_order_takes_one_size_per_request() -> None:
    g = graph(WAITS, [1, 2, 2, 1], window_ns=2)
    order = orders.sample_orders(g, 1)[0]
    assert order.resized(np.array([2048, 512, 0, 0])).requests.requested_bytes.tolist() == [2048, 512, 0, 0]
    with pytest.raises(ValueError, match="one size per request row"):
        order.resized(np.array([2048, 512, 0]))


def test_the_default_scheduling_window_is_the_10_ms_docs_fit_md_calibrated() -> None:
    docs = (Path(__file__).parent.parent / "docs" / "fit.md").read_text()
    assert "the **scheduling window** (10 ms by default" in " ".join(docs.split())
    assert orders.order_graph(Requests.from_events(WAITS), np.array([1, 2, 2, 1])).window_ns == 10 * 1_000_000


def test_what_the_band_and_the_orders_under_a_limit_refuse() -> None:
    # GIVEN the hand-made recording of the band's test above
    g = graph(HOLDS, [1, 2, 1, 2], window_ns=100)
    recording = [orders.Recording("hand-made", g)]
    # WHEN asked for no order, or about no recording, THEN each is refused with what is missing
    for asked in (lambda r, n: orders.order_band(r, NO_GROWTH, orders=n, granularity=256),
                  lambda r, n: orders.orders_under_limit(r, NO_GROWTH, 2048, orders=n)):
        with pytest.raises(ValueError, match="at least one order"):
            asked(recording, 0)
        with pytest.raises(ValueError, match="no recording"):
            asked([], 4)
    # AND the orders under 2 KiB, one order asked for: the recorded one, which runs there (see the test above)
    under = orders.orders_under_limit(recording, NO_GROWTH, 2048, orders=1)
    assert (under.fitting, under.sampled, under.asked_orders, under.fixed) == (1, 1, 1, False)


def test_the_orders_under_a_limit_each_replayed_there_by_hand() -> None:
    # GIVEN the band's hand-made recording on two threads (its orders need 1 KiB or 1.5 KiB; with the retry every
    # one runs under 1 KiB, none under 768 B: see the band's test above) and the same events on one thread
    two = orders.Recording("two threads", graph(HOLDS, [1, 2, 1, 2], window_ns=100))
    one = orders.Recording("one thread", graph(HOLDS, [1, 1, 1, 1], window_ns=100))
    # WHEN 16 orders of each are replayed once under a limit
    at, below = (orders.orders_under_limit([two], NO_GROWTH, limit, orders=16) for limit in (1024, 768))
    # THEN each counts the orders that run there, of the 16 drawn, and says they may change
    assert (at.fitting, at.sampled, at.asked_orders, at.fixed, at.all_fit) == (16, 16, 16, False, True)
    assert (below.fitting, below.sampled, below.fixed) == (0, 16, False)
    # AND one thread's recording is one order (fixed), which needs 2 KiB (nothing runs while its 512 B wait)
    chain = orders.orders_under_limit([one], NO_GROWTH, 2048, orders=16)
    assert (chain.fitting, chain.sampled, chain.asked_orders, chain.fixed) == (1, 1, 1, True)
    assert orders.orders_under_limit([one], NO_GROWTH, 1792, orders=16).fitting == 0
    # AND two recordings together: the orders of both, asked and replayed, and not fixed (one can change)
    both = orders.orders_under_limit([two, one], NO_GROWTH, 2048, orders=16)
    assert (both.fitting, both.sampled, both.asked_orders, both.fixed) == (17, 17, 17, False)


def test_where_units_begin_and_what_they_follow_around_a_free_of_an_unknown_allocation() -> None:
    # GIVEN thread 1 frees an allocation made before the recording (row 0), then allocates for op p (row 1), thread 2
    # allocates for q (row 2), and thread 1 frees row 1 (row 3)
    g = graph([("f", -1), ("a", 1024, "p"), ("a", 512, "q"), ("f", 1)], [1, 1, 2, 1], window_ns=10)
    # THEN the first allocation begins a unit of its own (it is not the free's), as does each change of thread
    assert g.unit_rows.tolist() == [0, 1, 2, 3, 4]
    # AND the free of the unknown allocation follows nothing: thread 1's units follow each other, row 3 row 1's
    assert preds(g) == [[], [0], [], [1]]


def test_two_units_a_window_apart_may_swap() -> None:
    # two allocations on two threads, 1 ns apart (times are the rows): within a window of 1 ns they may swap (two
    # units are enough), within 0 ns not
    events: list[tuple[str, int] | tuple[str, int, str]] = [("a", 1024, "p"), ("a", 512, "q")]
    assert graph(events, [1, 2], window_ns=1).reorderable()
    assert not graph(events, [1, 2], window_ns=0).reorderable()
    # AND a recording whose threads are not one per request row is refused (the threads say who ran each row)
    with pytest.raises(ValueError, match="one thread per request row"):
        orders.order_graph(Requests.from_events([("a", 1024, "p"), ("f", 0)]), np.array([1]))


def test_drawn_orders_start_from_the_state_where_the_first_of_them_parts_from_the_recorded_one() -> None:
    # GIVEN thread 1 allocates x (row 0), then y (row 1), while thread 2 frees x (row 2): both follow row 0, so
    # rows 1 and 2 may swap (2 ns apart, within the window), row 0 comes first in every order
    g = graph([("a", 1024, "x"), ("a", 512, "y"), ("f", 0)], [1, 1, 2], window_ns=10)
    sampled = orders.sample_orders(g, 16)
    assert all(o.units[0] == 0 for o in sampled) and any(o.units.tolist() == [0, 2, 1] for o in sampled)
    # WHEN the band draws them
    drawn = orders._drawn(g, 16, 0, NO_GROWTH)
    # THEN their replays share the recorded order's first row, and start from its state there
    assert drawn.shared is not None and drawn.shared.rows == 1
    # AND so with one order drawn beside the recorded one, where it is the one that parts (seed 1: rows 2, 1)
    one = orders._drawn(g, 2, 1, NO_GROWTH)
    assert one.orders[1].units.tolist() == [0, 2, 1] and one.shared is not None and one.shared.rows == 1
    # AND the same events on one thread are one order, with nothing to share
    assert orders._drawn(graph([("a", 1024, "x"), ("a", 512, "y"), ("f", 0)], [1, 1, 1], window_ns=10), 16, 0,
                         NO_GROWTH).shared is None


def test_the_orders_under_a_limit_stop_drawing_where_their_budget_is_spent(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN six threads that each allocate once, all within the window: 720 orders, each replay 6 events
    g = graph([("a", 256, f"op{i}") for i in range(6)], list(range(6)), window_ns=100)
    assert len({o.units.tobytes() for o in orders.sample_orders(g, 6)}) == 6  # the first orders drawn all differ
    recording = [orders.Recording("six threads", g)]
    # WHEN the band's budget is exactly what MIN_ORDERS replays cost, THEN MIN_ORDERS orders are replayed
    monkeypatch.setattr(orders, "BAND_BUDGET_EVENTS", orders.MIN_ORDERS * 6)
    under = orders.orders_under_limit(recording, NO_GROWTH, 2048, orders=16)
    assert (under.sampled, under.asked_orders) == (orders.MIN_ORDERS, 16)
    # AND one event more buys one more order (its replay is what spends the budget)
    monkeypatch.setattr(orders, "BAND_BUDGET_EVENTS", orders.MIN_ORDERS * 6 + 1)
    assert orders.orders_under_limit(recording, NO_GROWTH, 2048, orders=16).sampled == orders.MIN_ORDERS + 1
    # AND two recordings share the budget: each has half of it
    monkeypatch.setattr(orders, "BAND_BUDGET_EVENTS", 2 * orders.MIN_ORDERS * 6)
    both = orders.orders_under_limit(recording * 2, NO_GROWTH, 2048, orders=16)
    assert (both.sampled, both.asked_orders) == (2 * orders.MIN_ORDERS, 32)
    # AND the band, whose orders each cost the limits their search tried (each a whole replay): a budget of what
    # its first MIN_ORDERS orders' searches cost buys those, one event more buys the next order
    monkeypatch.setattr(orders, "BAND_BUDGET_EVENTS", 10**9)
    whole = orders.order_band(recording, NO_GROWTH, orders=16, granularity=256)
    cost = sum(len(o.tried) * 6 for o in whole.orders[:orders.MIN_ORDERS])
    for budget, replayed in ((cost, orders.MIN_ORDERS), (cost + 1, orders.MIN_ORDERS + 1)):
        monkeypatch.setattr(orders, "BAND_BUDGET_EVENTS", budget)
        band = orders.order_band(recording, NO_GROWTH, orders=16, granularity=256)
        assert (len(band.orders), band.asked_orders) == (replayed, 16)


def test_units_out_of_time_order_let_the_retry_run_what_the_window_holds() -> None:
    # GIVEN one region of 1 KiB, and units whose times go back (a recording's clock is per thread): thread 1
    # allocates 768 B at 100 ns (row 0), 512 B at 50 ns (row 1, which fails: 256 B left) and 256 B at 30 ns
    # (row 2, another op); thread 2 frees row 0 at 45 ns (row 3). Rows 1 and 2 follow what comes before them on
    # their thread, and row 3 is 15 ns after row 2 (beyond the 10 ns window): the recorded order is the only one
    events: list[tuple[str, int] | tuple[str, int, str]] = [("a", 768, "a"), ("a", 512, "b"), ("a", 256, "c"),
                                                             ("f", 0)]
    requests = dataclasses.replace(Requests.from_events(events), time_ns=np.array([100, 50, 30, 45], dtype=np.int64))
    g = orders.order_graph(requests, np.array([1, 1, 1, 2]), window_ns=10)
    assert not g.reorderable()
    # WHEN it runs under 1 KiB
    under = orders.orders_under_limit([orders.Recording("clock goes back", g)], BFCOptions(1024, allow_growth=False),
                                      1024, orders=4)
    # THEN row 1 waits while thread 2's free (45 ns, within 10 ns of the waiting unit's 50) runs: it fits, where the
    # rows in order fail
    assert (under.fitting, under.sampled, under.fixed) == (1, 1, True)
    assert not bfc.fits(requests, BFCOptions(1024, allow_growth=False))


def test_an_empty_recording_has_no_unit_no_thread_and_one_empty_order() -> None:
    g = orders.order_graph(Requests.from_events([]), None)
    assert (g.units, g.threads, g.unit_rows.tolist(), g.unit_time_ns.tolist(), g.pred_offsets.tolist()) == (
        0, 0, [0], [], [0])
    assert not g.reorderable() and orders.sample_orders(g, 1)[0].units.tolist() == []


def test_an_orders_limits_and_the_bands_steps_by_hand() -> None:
    # GIVEN two orders: one whose smallest limit is 1 KiB and which failed at 1.5 KiB when tried (fitting is not
    # monotone for it), one whose smallest limit, 1.25 KiB, was proven without a replay of its own (none tried)
    first = orders.OrderLimit(0, True, 1024, ((1536, False),), 256)
    second = orders.OrderLimit(0, False, 1280, (), 256)
    # THEN an order runs where it was tried as it did there, elsewhere from its smallest limit up
    assert [first.fits(limit) for limit in (768, 1024, 1536, 1792)] == [False, True, False, True]
    assert (second.fits(1024), second.fits(1280)) == (False, True)
    # AND every limit tried ran from one granule above the largest that failed (from the smallest, if none did)
    assert (first.always_from_bytes, second.always_from_bytes) == (1792, 1280)
    # AND the band's steps count them at every smallest limit, every limit from which one always runs, and every
    # limit tried in between
    g = graph(HOLDS, [1, 2, 1, 2], window_ns=100)
    band = dataclasses.replace(orders.order_band([orders.Recording("hand-made", g)], NO_GROWTH, orders=2,
                                                 granularity=256),
                               orders=(first, second), never_fits_below_bytes=1024, always_fits_bytes=1792)
    assert band.steps() == [(1024, 1), (1280, 2), (1536, 1), (1792, 2)]


def test_a_recordings_own_options_decide_its_orders_under_a_limit() -> None:
    # GIVEN one thread that holds 1 KiB and then 512 B, in one region of 1.75 KiB (growth off): under TF's 128 MiB
    # rule the 1 KiB take the whole region (1,792 < twice 1,024) and the 512 B find no room; with a split fraction
    # of 0.1 the 768 B left (>= 179 B) are split off and the 512 B fit there
    g = graph(HOLDS, [1, 1, 1, 1], window_ns=100)
    own = BFCOptions(0, allow_growth=False, fragmentation_fraction=0.1)
    # WHEN it carries its own options, THEN they decide, not the band's
    assert orders.orders_under_limit([orders.Recording("own", g, own)], NO_GROWTH, 1792).fitting == 1
    assert orders.orders_under_limit([orders.Recording("band's", g)], NO_GROWTH, 1792).fitting == 0


def test_allocations_for_no_op_each_begin_a_unit() -> None:
    # a profile row with no op at all (op -1): every such allocation is a unit, as an unknown op's is
    g = graph([("a", 256), ("a", 256), ("f", 0)], [1, 1, 1], window_ns=10)
    assert g.unit_rows.tolist() == [0, 1, 3]


def test_a_request_still_waiting_when_nothing_is_left_to_run_fails() -> None:
    # GIVEN one region of 1 KiB: 768 B take all of it (1,024 < twice 768: not split), so the 512 B of op b wait;
    # thread 2's 256 B, which nothing orders after them, run meanwhile and find no room either; nothing frees
    g = graph([("a", 768, "a"), ("a", 512, "b"), ("a", 256, "c")], [1, 1, 2], window_ns=100)
    # THEN with every unit tried and no free to come, the oldest waiting request is tried a last time and fails
    assert orders.orders_under_limit([orders.Recording("stuck", g)], NO_GROWTH, 1024, orders=1).fitting == 0


def test_a_unit_held_back_runs_once_what_it_follows_finishes_even_at_the_windows_edge() -> None:
    # GIVEN every event at the same time and a window of 0 ns (so each unit lies at the window's edge): thread 1
    # holds 768 B (row 0, the whole 1 KiB region) and asks for 512 B (row 1: it waits); thread 2 frees those 512 B
    # (row 2, held back until row 1 is served) and then asks for 2 KiB (row 3, which never fits); thread 3 frees
    # row 0 (row 4), which lets row 1 through
    events: list[tuple[str, int] | tuple[str, int, str]] = [("a", 768, "a"), ("a", 512, "b"), ("f", 1),
                                                             ("a", 2048, "c"), ("f", 0)]
    requests = dataclasses.replace(Requests.from_events(events), time_ns=np.zeros(5, dtype=np.int64))
    g = orders.order_graph(requests, np.array([1, 1, 2, 2, 3]), window_ns=0)
    # THEN thread 2 runs once row 1 is served, and its 2 KiB fail: the run does not fit
    assert orders.orders_under_limit([orders.Recording("edge", g)], NO_GROWTH, 1024, orders=1).fitting == 0


def test_a_limit_asked_about_counts_where_an_order_failed_there_above_its_smallest() -> None:
    # GIVEN the eager program, which TF ran out under 1,000 MiB (fixtures/fit/eager.1000mib.log) though it fitted
    # from 814 MiB: fitting is not monotone
    assert "out of memory" in (FIT / "eager.1000mib.log").read_text().lower()
    result = fit(memtrace.load(FIT / "eager.xplane.pb.gz"), BFC, limit=1000 * MIB, alternatives=False)
    band = result.band
    # WHEN the band is asked about 1,000 MiB, THEN every order's replay there fails, as TF's run did, and the band's
    # share and steps say so (not its smallest limit, 814 MiB, below it)
    assert band is not None and band.fitting_at_limit == 0 and band.share(1000 * MIB) == 0.0
    assert all((1000 * MIB, False) in o.tried and o.min_limit_bytes == 814 * MIB for o in band.orders)
