"""``memtrace fit``'s answers held to TensorFlow's own: programs recorded from the allocator's birth.

``fixtures/fit/PROGRAM.*`` (``scripts/record_fit.py``): each program's profile from the allocator's
birth under TF's default limit, and a ladder of ``TF_CPU_BFC_MEM_LIMIT_IN_MB`` runs (TF's outcome,
its "ran out of memory" line and ``MemoryDump`` state for each OOM). ``tests/test_fit_recorded.py``
holds ``memtrace.allocator.bfc`` to every recorded program; this file holds ``memtrace fit``, the command and
the analysis, to them: the self-check, the smallest limit against TF's own boundary, every ladder
run's outcome and failing request. ``fixtures/fit/eager.1000mib.*`` (``scripts/record_nonmonotone.py``):
TF's run of the eager program under 1,000 MiB, above its boundary, where the model says it runs out
of memory again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import memtrace
from memtrace.allocator.fit import fit
from memtrace.cli import main
from memtrace.read.oom import load_oom_dumps

from .conftest import FIXTURES
from .xspace_events import memory_events

FIT = FIXTURES / "fit"
PROGRAMS = sorted(p.name.removesuffix(".json") for p in FIT.glob("*.json"))
BFC = "bfc_cpu_allocator_for_gpu"
MIB = 1 << 20
# Programs that make the same requests every run, so that the birth profile predicts even the
# allocator's state at another run's failure; a tf.function program varies by a few events.
REPEATING = {"eager"}


def evidence(name: str) -> dict[str, Any]:
    return json.loads((FIT / f"{name}.json").read_text())  # type: ignore[no-any-return]


def birth(name: str) -> memtrace.Trace:
    return memtrace.load(FIT / evidence(name)["birth"]["profile"])


def test_there_are_recorded_programs() -> None:
    assert PROGRAMS


@pytest.mark.parametrize("name", PROGRAMS)
def test_the_self_check_reproduces_every_event(name: str) -> None:
    e = evidence(name)
    result = fit(birth(name), BFC, alternatives=False)
    p = result.reproduced
    assert p is not None and p.exact and p.first_difference is None
    assert p.events == e["birth"]["events"] and p.regions_descending  # mmap put later regions lower
    assert result.requested_peak_bytes <= e["birth"]["counters"]["peak"]
    assert result.requested_peak_bytes == rounded_requested_peak(FIT / e["birth"]["profile"])


def rounded_requested_peak(profile: Path) -> int:
    """The most bytes ever alive at once, each request rounded up to 256 bytes, from the profile read with
    protobuf alone: an allocation is alive from its event until the deallocation of its address (a deallocation
    of an address nothing alive holds changes nothing)."""
    alive: dict[int, int] = {}
    live = peak = 0
    for event in memory_events(profile, BFC):
        if event["alloc"]:
            if event["requested_bytes"] > 0:
                alive[event["addr"]] = -(-event["requested_bytes"] // 256) * 256
                live += alive[event["addr"]]
                peak = max(peak, live)
        else:
            live -= alive.pop(event["addr"], 0)
    return peak


RUNS = [(name, run) for name in PROGRAMS for run in [evidence(name)["birth"], *evidence(name)["ladder"]]
        if run["profile"]]


@pytest.mark.parametrize(("name", "run"), RUNS, ids=[run["profile"] for _, run in RUNS])
def test_every_recorded_run_is_reproduced_under_its_own_limit(name: str, run: dict[str, Any]) -> None:
    # Completed runs and out-of-memory ones (the failed request left no event and changed nothing),
    # whatever order the system gave the regions' addresses (the transformer at 12 MiB: the first in
    # the heap, the next two mmap'ed lower, neither ascending nor descending).
    trace = memtrace.load(FIT / run["profile"])
    p = fit(trace, BFC, recorded_limit=run["limit_bytes"] or 65536 * MIB, alternatives=False).reproduced
    assert p is not None and p.exact, (name, run["limit_mib"], p)
    assert p.events == run["events"] and p.allocations == len(trace.outputs)


@pytest.mark.parametrize("name", PROGRAMS)
def test_the_smallest_limit_is_tfs_own_boundary_and_every_ladder_run_is_predicted(name: str) -> None:
    e = evidence(name)
    trace = birth(name)
    boundary = e["boundary"]  # TF's ladder: oom_mib ran out of memory, fits_mib = oom_mib + 1 completed
    assert fit(trace, BFC, alternatives=False).min_limit_bytes == boundary["fits_mib"] * MIB == (
        boundary["oom_mib"] + 1) * MIB
    for run in e["ladder"]:
        result = fit(trace, BFC, limit=run["limit_bytes"], alternatives=False)
        assert result.fits == (run["outcome"] == "completed"), f"{name} at {run['limit_mib']} MiB"
        # The request TF's log names: at every limit for a program that repeats its requests exactly; a
        # tf.function program's requests vary by a few events from run to run, and far below the boundary
        # its runs fail elsewhere than the birth run's requests would, so there only at the boundary.
        f = result.failure
        if f is not None and (name in REPEATING or run["limit_mib"] == boundary["oom_mib"]):
            assert (f.request_bytes, f.op) == (run["failure"]["request_bytes"], run["failure"]["op"]), run["limit_mib"]


@pytest.mark.parametrize("name", sorted(REPEATING))
def test_under_tfs_failing_limit_the_state_is_tfs(name: str) -> None:
    e = evidence(name)
    for run in e["ladder"]:
        if run["outcome"] != "oom":
            continue
        f = fit(birth(name), BFC, limit=run["limit_bytes"], alternatives=False).failure
        dump = run["dump"]
        assert f is not None and (f.in_use_bytes, f.largest_free_bytes, f.pool_bytes) == (
            dump["in_use_bytes"], dump["largest_free_bytes"], dump["pool_bytes"])
        assert f.free_bytes == dump["free_chunk_bytes"] + run["limit_bytes"] - dump["pool_bytes"]


def test_fitting_is_not_monotone_and_tf_agrees() -> None:
    # GIVEN the model's answer that 1,000 MiB, above the eager program's boundary, runs out again
    result = fit(birth("eager"), BFC, limit=1000 * MIB, alternatives=False)
    assert not result.fits and not result.monotone and result.counterexample is not None
    f = result.failure
    assert f is not None
    # THEN TF, run under 1,000 MiB, ran out at that request, in that state (its log line and MemoryDump)
    (logged,) = [d for d in load_oom_dumps(str(FIT / "eager.1000mib.log")) if d.request_bytes == f.request_bytes]
    (dumped,) = load_oom_dumps(str(FIT / "eager.1000mib.memdump.pb"))
    assert (f.request_bytes, f.op) == (logged.request_bytes, logged.op) == (314_570_752, "Fill")
    assert f.in_use_bytes == dumped.stats.in_use_bytes == sum(c.size_bytes for c in dumped.chunks if c.in_use)
    assert f.largest_free_bytes == max(c.size_bytes for c in dumped.chunks if not c.in_use) == 314_561_024
    assert f.pool_bytes == sum(r.size_bytes for r in dumped.regions) == 1000 * MIB
    ours = sorted((c.size_bytes, c.in_use, c.requested_bytes if c.in_use else None) for c in f.chunks)
    theirs = sorted((c.size_bytes, c.in_use, c.requested_bytes) for c in dumped.chunks)
    assert ours == theirs and f.verdict == "fragmentation"




def test_the_search_probes_two_limits_above_its_answer_and_finds_tfs_own_counterexample() -> None:
    from memtrace.allocator.bfc import BFCOptions, search_min_limit
    from memtrace.allocator.requests import requests_for

    # GIVEN the eager program's requests, searched to the MiB: bisection between the lower bound (640 MiB) and the
    # unlimited replay's largest pool (2,050 MiB), then the limits below its boundary from the lower bound up
    search = search_min_limit(requests_for(birth("eager"), BFC).requests, BFCOptions(0))
    assert search.limit_bytes == 814 * MIB and search.exhaustive
    # THEN two limits are probed evenly between the answer and the largest that fits (a third of the way each: 1,226
    # and 1,638 MiB); 1,226 runs out, as 1,000 does where TF itself ran out (eager.1000mib.log)
    assert (1226 * MIB, False) in search.tried and (1638 * MIB, True) in search.tried
    assert not search.monotone and search.counterexample() is not None

@pytest.mark.parametrize("budget", [5_000_000, 9_520])
def test_a_search_from_a_hint_still_finds_tfs_boundary_below_where_bisection_stops(budget: int) -> None:
    from memtrace.allocator.bfc import BFCOptions, search_min_limit
    from memtrace.allocator.requests import requests_for

    # GIVEN the eager program's requests from the allocator's birth, searched from a hint far above the boundary (as
    # the band over orders searches each order), every limit replayed from the first request
    requests = requests_for(birth("eager"), BFC).requests
    search = search_min_limit(requests, BFCOptions(0), hint=2000 * MIB, budget_events=budget)
    # THEN bisection stops at 1,326 MiB (1,325 runs out: fitting is not monotone), and the scan up from the lower
    # bound finds TF's own boundary, 814 MiB (its ladder: out of memory at 813, fits at 814)
    e = evidence("eager")
    assert (e["boundary"]["oom_mib"], e["boundary"]["fits_mib"]) == (813, 814)
    assert search.limit_bytes == 814 * MIB and not search.monotone
    assert (1325 * MIB, False) in search.tried and (1326 * MIB, True) in search.tried
    # AND the widest counterexample to monotony it tried: the largest limit that fails above one that fits, and the
    # smallest that fits (1,226 MiB fails too, but 1,325 is larger)
    assert search.counterexample() == (1325 * MIB, 814 * MIB)
    below = sorted(limit // MIB for limit, ok in search.tried if limit < 814 * MIB)
    if budget == 5_000_000:  # every limit from the lower bound (640 MiB) up, each replayed and failing
        assert search.exhaustive and below == list(range(640, 814))
    else:  # past the budget (20 replays of its 476 events): every 35th, 815 fits, then the 34 the step skipped below it
        assert search.below_step == 35 and not search.exhaustive
        assert below == [*range(640, 781, 35), *range(781, 814)] and (815 * MIB, True) in search.tried
    assert not any(ok for limit, ok in search.tried if limit < 814 * MIB)

@pytest.mark.parametrize("name", PROGRAMS)
def test_the_command_says_it_in_one_line(capsys: pytest.CaptureFixture[str], name: str) -> None:
    e = evidence(name)
    profile = str(FIT / e["birth"]["profile"])
    events = e["birth"]["events"]
    allocations = len(birth(name).outputs)  # a profile's outputs are its allocations, one each
    code = main(["fit", profile, "--no-alternatives"])
    out = capsys.readouterr().out
    assert code == 0
    assert (f"the model reproduces {allocations:,} of {allocations:,} addresses and {events:,} of {events:,} "
            "fragmentation values, and every chunk size and bytes-in-use value") in " ".join(out.split())
    assert f"smallest limit: {e['boundary']['fits_mib']:,} MiB" in out
    oom = next(r for r in e["ladder"] if r["limit_mib"] == e["boundary"]["oom_mib"])
    code = main(["fit", profile, "--limit", f"{oom['limit_mib']}MiB", "--no-alternatives", "--json"])
    doc = json.loads(capsys.readouterr().out)["allocators"][0]
    assert code == 1 and doc["fits"] is False and doc["reproduced"]["addresses_equal"] == allocations
    assert (doc["failure"]["request_bytes"], doc["failure"]["op"]) == (oom["failure"]["request_bytes"],
                                                                       oom["failure"]["op"])
