"""``memtrace oom LOG --trace PROFILE``: what would have avoided the failure, against TensorFlow's own runs.

fixtures/oom/cpu_regions.py, one eager program on TF's CPU BFC allocator recorded from its birth,
run by TensorFlow 2.21 under TF_CPU_BFC_MEM_LIMIT_IN_MB = 40, 49 and 50: TensorFlow ran out of
memory at 40 MiB (exhausted) and 49 MiB (fragmentation: no region could grow large enough) on the
same 20 MiB Fill, and completed at 50 MiB. The model, given a failed run's profile and its dump,
must fail at the same request in the dump's state and name 50 MiB as the smallest limit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import memtrace
from memtrace.allocator.bfc import Requests
from memtrace.allocator.oom import analyse_all
from memtrace.allocator.oom_fit import avoidance
from memtrace.cli import main
from memtrace.errors import UsageError
from memtrace.read.oom import load_oom_dumps

OOM = Path(__file__).parent.parent / "fixtures" / "oom"
ORDERS = Path(__file__).parent.parent / "fixtures" / "orders"
ALLOCATOR = "bfc_cpu_allocator_for_gpu"
MIB = 1 << 20


@pytest.mark.parametrize(("limit_mib", "verdict", "free_bytes"), [(40, "exhausted", 12_058_368),
                                                                   (49, "fragmentation", 21_495_552)])
def test_the_model_fails_where_tensorflow_did_and_names_the_limit_that_completed(
        limit_mib: int, verdict: str, free_bytes: int) -> None:
    # GIVEN TensorFlow's dump of the failed run and the profile of that same run
    [event] = analyse_all(load_oom_dumps(OOM / f"cpu_regions_{limit_mib}mib.log"))
    assert (event.request_bytes, event.limit_bytes, event.dump.op) == (20 * MIB, limit_mib * MIB, "Fill")
    trace = memtrace.load(OOM / f"cpu_regions_{limit_mib}mib.xplane.pb.gz")
    # WHEN the run is replayed under the dump's limit
    a = avoidance(event, trace)
    # THEN the model runs out at the dump's request, in the dump's state (its chunk map), with its verdict
    failure = a.result.failure
    assert a.appended and a.same_request and a.same_state and failure is not None
    assert (failure.op, failure.request_bytes, failure.in_use_bytes) == ("Fill", 20 * MIB, 29_884_672)
    assert (failure.free_bytes, failure.largest_free_bytes, failure.verdict) == (free_bytes, 1_310_464, verdict)
    assert event.verdict == verdict
    # AND the smallest limit that gets past it is 50 MiB: TensorFlow completed the run at 50 MiB
    assert a.result.min_limit_bytes == 50 * MIB


def test_the_run_that_completed_replays_under_its_limit_and_not_below() -> None:
    from memtrace.allocator.fit import fit

    trace = memtrace.load(OOM / "cpu_regions_50mib.xplane.pb.gz")
    assert "ran out of memory" not in (OOM / "cpu_regions_50mib.log").read_text()
    at_50 = fit(trace, ALLOCATOR, limit=50 * MIB, recorded_limit=50 * MIB)
    # exact, the last region included: TF cut it to what the limit left (20 MiB, not 32), so the
    # 20 MiB Fill got a 20 MiB chunk; under TF's default limit the model would hand out 32 MiB
    assert at_50.fits and at_50.reproduced is not None and at_50.reproduced.exact
    unlimited = fit(trace, ALLOCATOR, limit=50 * MIB, recorded_limit=65536 * MIB)
    assert unlimited.reproduced is not None and unlimited.reproduced.chunks_equal == 20
    # (without recorded_limit the self-check takes the limit the profile's events show: 50 MiB)
    shown = fit(trace, ALLOCATOR, limit=50 * MIB).reproduced
    assert shown is not None and shown.exact and shown.limit_bytes == 50 * MIB
    at_49 = fit(trace, ALLOCATOR, limit=49 * MIB)
    assert not at_49.fits and at_49.failure is not None
    assert (at_49.failure.op, at_49.failure.request_bytes) == ("Fill", 20 * MIB)


def test_oom_with_trace_says_what_would_have_avoided_it(capsys: pytest.CaptureFixture[str]) -> None:
    log, profile = OOM / "cpu_regions_49mib.log", OOM / "cpu_regions_49mib.xplane.pb.gz"
    assert main(["oom", str(log), "--trace", str(profile)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "the model runs out of memory at the same request (20 MiB (20,971,520 bytes) for op Fill) in the dump's state" in text
    assert "a limit of at least 50 MiB (52,428,800 bytes) (same options)" in text
    # without growth one region of the limit holds it all: 42 MiB would do, so 49 MiB does
    assert "allow_growth off: a limit of at least 42 MiB (44,040,192 bytes) (avoids it under the same limit)" in text
    assert main(["oom", str(log), "--trace", str(profile), "--json"]) == 0
    avoided = json.loads(capsys.readouterr().out)["events"][0]["avoided_by"]
    assert (avoided["same_state"], avoided["min_limit_bytes"], avoided["limit_bytes"]) == (True, 50 * MIB, 49 * MIB)
    assert {alt["change"]: alt["fits"] for alt in avoided["alternatives"]}["allow_growth off"] is True


def test_oom_trace_errors_are_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    log = OOM / "cpu_regions_40mib.log"
    jax = OOM.parent / "profiles" / "jax_gpu.xplane.pb.gz"
    assert main(["oom", str(log), "--trace", str(jax)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no allocator 'bfc_cpu_allocator_for_gpu'" in err
    assert main(["oom", str(log), "--allocator", "x"]) == 2
    assert "--allocator needs --trace" in capsys.readouterr().err
    missing = tmp_path / "none.xplane.pb"
    assert main(["oom", str(log), "--trace", str(missing)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_a_dump_that_names_no_allocator_asks_for_one(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # GIVEN TF's log without the lines that name the allocator (a console capture that lost them)
    log = tmp_path / "unnamed.log"
    log.write_text("".join(line for line in (OOM / "cpu_regions_40mib.log").read_text().splitlines(keepends=True)
                           if "Allocator (" not in line and "BFCAllocator dump for" not in line))
    trace = OOM / "cpu_regions_40mib.xplane.pb.gz"
    assert main(["oom", str(log), "--trace", str(trace)]) == 2
    err = capsys.readouterr().err
    # THEN the line says what is missing and what to do, naming the dump and what the trace has
    assert err.count("\n") == 1 and "None" not in err
    assert err.startswith(f"memtrace: error: {log}: the dump does not name the allocator that ran out: name it with "
                          "--allocator") and "bfc_cpu_allocator_for_gpu" in err
    # AND named, the replay answers
    assert main(["oom", str(log), "--trace", str(trace), "--allocator", "bfc_cpu_allocator_for_gpu", "--json"]) in (0, 2)
    assert json.loads(capsys.readouterr().out)["events"][0]["avoided_by"]["allocator"] == "bfc_cpu_allocator_for_gpu"


def test_oom_html_with_trace_has_the_replay(tmp_path: Path) -> None:
    from .test_report import Page

    page = tmp_path / "oom.html"
    log, profile = OOM / "cpu_regions_40mib.log", OOM / "cpu_regions_40mib.xplane.pb.gz"
    assert main(["oom", str(log), "--trace", str(profile), "--html", "-o", str(page)]) == 0
    dom = Page(page.read_text())
    assert [h.text for h in dom.find("h3")].count("Replayed through the BFC model") == 1
    items = [li.text for li in dom.find("li")]
    assert "a limit of at least 50 MiB (52,428,800 bytes) (same options)" in items
    assert not dom.find("script")


@pytest.mark.parametrize(("log", "profile"), [
    (OOM / "cpu_regions_40mib.log", OOM / "cpu_regions_40mib.xplane.pb.gz"),
    (OOM / "cpu_regions_49mib.log", OOM / "cpu_regions_49mib.xplane.pb.gz"),
    (ORDERS / "default.oom.86mib.log", ORDERS / "default.oom.86mib.xplane.pb.gz"),
    (ORDERS / "steady.oom.112mib.log", ORDERS / "steady.oom.112mib.xplane.pb.gz"),
])
def test_the_failures_regions_are_numbered_in_the_address_order_of_tensorflows_dump(log: Path, profile: Path) -> None:
    # GIVEN TensorFlow's dump (its regions in address order: on CPU the first, 2 MiB, from the heap, the later ones
    # mmapped, each below the one before, or not) and the profile of the same run
    [event] = analyse_all(load_oom_dumps(log))
    failure = avoidance(event, memtrace.load(profile)).result.failure
    assert failure is not None
    # THEN the model's regions, numbered 1.. as the text and the page number them, have the dump's sizes in its order
    size = dict(failure.regions)
    assert [size[region] for region, _ in sorted(failure.numbers, key=lambda pair: pair[1])] == \
        [region.size_bytes for region in event.dump.regions]


def test_the_dumps_request_goes_first_after_the_last_allocation_where_the_state_is_the_dumps() -> None:
    from dataclasses import replace

    from memtrace.allocator import bfc
    from memtrace.allocator.oom_fit import _with_failed_request, failed_request_place

    # GIVEN a failed run's profile by hand: x (256 B), y (512 B, the last allocation), a free of a tensor from before
    # the profile (it frees nothing the profile holds), x and y freed: bytes in use after each 256, 768, 768, 512, 0
    requests = bfc.Requests.from_events([("a", 256, "x"), ("a", 512, "y"), ("f", -1), ("f", 0), ("f", 1)])
    replay = bfc.simulate(requests, bfc.BFCOptions(1 << 20, allow_growth=False))
    # AND a dump of 768 bytes in use (its pool and chunk map left out) failing on 1,000 bytes
    [real] = analyse_all(load_oom_dumps(OOM / "cpu_regions_40mib.log"))
    event = replace(real, in_use_bytes=768, pool_bytes=None, largest_free_bytes=None, request_bytes=1000)
    # THEN the request goes after 2 events: the first state after the last allocation that is the dump's (after 3
    # events is one too; the failure comes first, then the unwinding frees)
    assert failed_request_place(requests, replay, event) == 2
    moved, where = _with_failed_request(requests, replay, event)
    assert where == ("after event 2 of 5, after the trace's last allocation, where the model's state is the dump's "
                     "(768 bytes in use)")
    assert moved.requested_bytes.tolist() == [256, 512, 1000, 0, 0, 0]
    assert moved.op_names[int(moved.op[2])] == "Fill"


def test_a_dump_cut_off_before_its_limit_asks_for_one(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN an excerpt of a dump pasted into an issue (tensorflow#22586): chunks, no "Limit:" line
    log = OOM / "issue_tf22586_excerpt.log"
    trace = OOM / "cpu_regions_40mib.xplane.pb.gz"
    code = main(["oom", str(log), "--trace", str(trace), "--allocator", ALLOCATOR])
    out, err = capsys.readouterr()
    # THEN one line, exit 2: the limit is needed to replay, and --limit gives it
    assert (code, out) == (2, "")
    assert err == f"memtrace: error: {log}: the dump does not say the allocator's limit: give it with --limit\n"


def test_the_dumps_request_goes_before_allocations_that_ran_while_it_waited() -> None:
    from dataclasses import replace

    import numpy as np

    from memtrace.allocator import bfc
    from memtrace.allocator.oom_fit import _with_failed_request

    # GIVEN the hand-made run of test_the_dumps_request_goes_first_after_the_last_allocation_...: bytes in use after
    # each event 256, 768, 768, 512, 0; and a dump of 256 bytes in use, the state after x alone
    requests = bfc.Requests.from_events([("a", 256, "x"), ("a", 512, "y"), ("f", -1), ("f", 0), ("f", 1)])
    replay = bfc.simulate(requests, bfc.BFCOptions(1 << 20, allow_growth=False))
    [real] = analyse_all(load_oom_dumps(OOM / "cpu_regions_40mib.log"))
    event = replace(real, in_use_bytes=256, pool_bytes=None, largest_free_bytes=None, request_bytes=1000)
    # THEN no state after the last allocation is the dump's: the request goes after x, before y (which ran while it
    # waited), and y's free still frees y, one row further on
    moved, where = _with_failed_request(requests, replay, event)
    assert moved.requested_bytes.tolist() == [256, 1000, 512, 0, 0, 0]
    assert moved.frees.tolist() == [-1, -1, -1, -1, 0, 2]
    assert where == ("after event 1 of 5, where the model's state is the dump's (256 bytes in use): the 1 "
                     "allocations after it in the trace are other threads' ops, run while the request waited for memory "
                     "(TensorFlow retries a failed request for up to 10 s; the dump is of its last attempt) or after it "
                     "failed")
    # AND where the trace's clock stops for 10.5 s right after x (TF's retry), that is said
    waited = replace(requests, time_ns=np.array([0, 10_500_000_000, 10_500_000_001, 10_500_000_002, 10_500_000_003]))
    _, where = _with_failed_request(waited, replay, event)
    assert where == ("after event 1 of 5, where the model's state is the dump's (256 bytes in use) and the trace's clock "
                     "stops for 10.5 s: TensorFlow's retry waited there for memory (up to 10 s) before it gave up; the "
                     "1 allocations after it came after the failure")


def test_a_profile_after_the_allocators_birth_teaches_the_model_no_region_order(tmp_path: Path) -> None:
    from .memory_profiles import write_profile

    # GIVEN a profile that starts after the allocator's birth (4 MiB in use before it) whose chunks lie lower and
    # lower (1 MiB, 3 MiB 8 MiB below, 16 MiB 40 MiB below), and the 40 MiB run's dump (20 MiB asked, none left)
    mib, high = 1 << 20, 1 << 40
    events = [(True, mib, mib, high, 5 * mib, 0.0, "a"), (True, 3 * mib, 3 * mib, high - 8 * mib, 8 * mib, 0.0, "b"),
              (True, 16 * mib, 16 * mib, high - 40 * mib, 24 * mib, 0.0, "c")]
    trace = memtrace.load(write_profile(tmp_path / "later.xplane.pb", events))
    [event] = analyse_all(load_oom_dumps(OOM / "cpu_regions_40mib.log"))
    failure = avoidance(event, trace).result.failure
    # THEN the model replays from an empty allocator: its regions (2, 4 and 16 MiB, as TF grows) are not the
    # profile's, whose addresses say nothing of their order; they are numbered as made
    assert failure is not None and failure.regions == ((0, 2 * mib), (1, 4 * mib), (2, 16 * mib))
    assert failure.numbers == ((0, 1), (1, 2), (2, 3))


def test_a_trace_that_runs_out_itself_is_replayed_as_it_is_and_says_where_it_differs_from_the_dump() -> None:
    from dataclasses import replace

    # GIVEN TensorFlow's dump of the run that failed under 40 MiB and the profile of that run, with the dump's limit
    # taken down to 20 MiB (the profile's own requests then run out before its end) and to 30 MiB
    [event] = analyse_all(load_oom_dumps(OOM / "cpu_regions_40mib.log"))
    trace = memtrace.load(OOM / "cpu_regions_40mib.xplane.pb.gz")
    at_20 = avoidance(replace(event, limit_bytes=20 * MIB), trace)
    # THEN under 20 MiB nothing is added (the trace fails by itself), at a request that is not the dump's (12 MiB)
    failure = at_20.result.failure
    assert failure is not None and (failure.op, failure.request_bytes) == ("Fill", 12 * MIB)
    assert (at_20.appended, at_20.same_request, at_20.same_state) == (False, False, False)
    # AND under 30 MiB the dump's request is added and the model fails on it, in another state than the dump's (more
    # room under the larger limit)
    at_30 = avoidance(replace(event, limit_bytes=30 * MIB), trace)
    failure = at_30.result.failure
    assert failure is not None and (failure.request_bytes, failure.free_bytes) == (20 * MIB, 1_572_608)
    assert (at_30.appended, at_30.same_request, at_30.same_state) == (True, True, False)


def test_an_allocator_the_trace_lacks_is_refused_naming_those_it_has() -> None:
    [event] = analyse_all(load_oom_dumps(OOM / "cpu_regions_40mib.log"))
    path = OOM / "cpu_regions_40mib.xplane.pb.gz"
    with pytest.raises(UsageError) as refused:
        avoidance(event, memtrace.load(path), "GPU_0_bfc")
    assert str(refused.value) == (f"{path}: no allocator 'GPU_0_bfc' in this trace (it has: {ALLOCATOR}); name the one "
                                  "that ran out with --allocator")


def test_the_dumps_state_is_matched_before_the_first_event_and_by_the_bytes_in_use_alone_where_nothing_else_matches(
        ) -> None:
    from dataclasses import replace

    from memtrace.allocator import bfc
    from memtrace.allocator.oom_fit import failed_request_place

    # GIVEN a run by hand, growth on (a region of 2 MiB): a takes 1 MiB, a is freed, b takes 1 MiB. The states before
    # each event and after the last (in use, pool, largest free chunk): nothing; 1 MiB, 2 MiB, 1 MiB; 0, 2 MiB, 2 MiB;
    # 1 MiB, 2 MiB, 1 MiB
    requests = bfc.Requests.from_events([("a", MIB, "a"), ("f", 0), ("a", MIB, "b")])
    replay = bfc.simulate(requests, bfc.BFCOptions(64 * MIB))
    [real] = analyse_all(load_oom_dumps(OOM / "cpu_regions_40mib.log"))
    # THEN a dump of nothing in use, no pool and no free chunk is before the first event (the state after a's free has
    # its pool)
    empty = replace(real, in_use_bytes=0, pool_bytes=0, largest_free_bytes=0, request_bytes=128 * MIB)
    assert failed_request_place(requests, replay, empty) == 0
    # AND a dump whose pool no state has is placed by its bytes in use alone: the first such state after the last
    # allocation
    other_pool = replace(real, in_use_bytes=MIB, pool_bytes=3 * MIB, largest_free_bytes=None, request_bytes=64 * MIB)
    assert failed_request_place(requests, replay, other_pool) == 3


def test_tensorflows_retry_is_a_gap_of_9_to_20_seconds_in_the_traces_clock() -> None:
    import numpy as np

    from memtrace.allocator import bfc
    from memtrace.allocator.oom_fit import _retry_gap

    # GIVEN events whose clock stops for 9 s, 20 s, 20 s and a nanosecond, and 9 s less a nanosecond
    requests = bfc.Requests.from_events([("a", 256), ("a", 256), ("a", 256), ("a", 256), ("a", 256)])
    times = np.cumsum([0, 9_000_000_000, 20_000_000_000, 20_000_000_001, 8_999_999_999])
    requests = replace_times(requests, times)
    # THEN TensorFlow's retry (10 s, give or take) is the first two, not the others, nor before the first event or
    # after the last
    assert [_retry_gap(requests, at) for at in range(6)] == [0, 9_000_000_000, 20_000_000_000, 0, 0, 0]


def replace_times(requests: Requests, times: Any) -> Requests:
    from dataclasses import replace

    import numpy as np

    return replace(requests, time_ns=np.asarray(times, dtype=np.int64))


def test_the_dumps_request_is_added_with_the_time_of_the_event_before_it_and_its_op() -> None:
    from memtrace.allocator import bfc
    from memtrace.allocator.oom_fit import _with_request

    # GIVEN x (256 B) at 5 ns, freed at 7 ns
    requests = replace_times(bfc.Requests.from_events([("a", 256, "x"), ("f", 0)]), [5, 7])
    # THEN a request added first, of no known op, comes at 0 ns with op -1 (unknown), and x's free still frees x
    first = _with_request(requests, 0, 1024, None)
    assert (first.requested_bytes.tolist(), first.time_ns.tolist(), first.op.tolist(), first.frees.tolist()) == (
        [1024, 256, 0], [0, 5, 7], [-1, 0, -1], [-1, -1, 1])
    # AND one added last, for a new op, at the time of the event before it, its op named
    last = _with_request(requests, 2, 1024, "Fill")
    assert (last.time_ns.tolist(), last.op_names[int(last.op[2])], last.frees.tolist()) == ([5, 7, 7], "Fill",
                                                                                          [-1, 0, -1])
