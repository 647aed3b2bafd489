"""The BFC model against TensorFlow itself: whole programs recorded from the allocator's birth, and limit ladders.

GIVEN the programs ``scripts/record_fit.py`` recorded on TensorFlow's CPU BFC allocator (a Keras CNN,
an LSTM, a ``tf.function`` transformer block and an eager program), each with a ladder of
``TF_CPU_BFC_MEM_LIMIT_IN_MB`` runs (outcome, the failing request from TF's log line, the
allocator's ``MemoryDump`` at the failure), WHEN memtrace's model replays the requests, THEN it
reproduces every chunk address, chunk size, bytes-in-use and fragmentation value TF wrote, and
predicts every run's outcome, failing request and state.

The first tests check the fixtures against themselves (TF's counters, its profile, its dumps) and
need no model; the rest need ``memtrace.allocator.bfc`` / ``memtrace.allocator.fit`` (the interface of
``FIT_INTERFACE.md``), and fail under MEMTRACE_CI where they are missing.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memtrace
from memtrace.allocator import bfc
from memtrace.allocator.requests import requests_for

from .conftest import FIXTURES
from .xspace_events import memory_events

FIT = FIXTURES / "fit"
PROGRAMS = sorted(p.stem for p in FIT.glob("*.json"))
BFC = "bfc_cpu_allocator_for_gpu"
MIB = 1 << 20
DEFAULT_LIMIT = 65536 * MIB  # TF_CPU_BFC_MEM_LIMIT_IN_MB's default


def evidence(name: str) -> dict[str, Any]:
    return json.loads((FIT / f"{name}.json").read_text())  # type: ignore[no-any-return]


def test_there_are_four_programs_at_least() -> None:
    assert {"cnn", "lstm", "transformer", "eager"} <= set(PROGRAMS)


# -- the fixtures against themselves (TF's counters, profiles and dumps): no model needed --------------


@pytest.mark.parametrize("name", PROGRAMS)
def test_each_profile_starts_at_the_allocators_birth_and_peaks_at_its_counter(name: str) -> None:
    e = evidence(name)
    for run in [e["birth"], *e["ladder"]]:
        if run["profile"] is None:
            continue
        events = memory_events(FIT / run["profile"])
        assert {x["allocator_name"] for x in events} == {BFC}
        assert events[0]["alloc"] and events[0]["bytes_allocated"] == events[0]["allocation_bytes"]  # birth
        assert len(events) == run["events"]
        if run["outcome"] == "completed":  # the allocator's own peak counter since its birth
            assert max(x["bytes_allocated"] for x in events) == run["counters"]["peak"]
            assert events[-1]["bytes_allocated"] == run["counters"]["current"]


@pytest.mark.parametrize("name", PROGRAMS)
def test_the_ladder_brackets_the_boundary_and_each_oom_has_its_log_line_and_dump(name: str) -> None:
    e = evidence(name)
    by_limit = {r["limit_mib"]: r for r in e["ladder"]}
    low, high = e["boundary"]["oom_mib"], e["boundary"]["fits_mib"]
    assert high == low + 1 and by_limit[low]["outcome"] == "oom" and by_limit[high]["outcome"] == "completed"
    for run in e["ladder"]:
        assert run["limit_bytes"] == run["limit_mib"] * MIB
        if run["outcome"] == "completed":
            assert run["failure"] is None and run["exit_code"] == 0
            assert run["counters"]["peak"] <= run["limit_bytes"]
            continue
        failure, dump = run["failure"], run["dump"]
        assert failure["allocator"] == BFC and failure["request_bytes"] % 256 == 0 and failure["op"]
        # TF's own stats in the dump agree with its chunk list, and the request did not fit in any free chunk.
        assert dump["stats"]["bytes_in_use"] == dump["in_use_bytes"]
        assert dump["largest_free_bytes"] < failure["request_bytes"]
        assert dump["pool_bytes"] == sum(dump["regions"]) <= run["limit_bytes"]
        assert dump["in_use_bytes"] + dump["free_chunk_bytes"] == dump["pool_bytes"]
        assert dump["same_as_first"]  # nothing changed while TF retried: one thread


def failure_row(events: list[dict[str, Any]], dump: dict[str, Any]) -> int:
    """The last event before the failed request, in an OOM run's profile.

    TF writes no event for the failed request, and the profile goes on after it (ops already scheduled
    still run, TF frees the failed op's inputs when it gives up). TF counts the allocations that
    succeeded (the dump's ``num_allocs``): the failure comes after that many, and after the frees that
    followed them up to the dump's bytes in use.
    """
    allocs = [i for i, x in enumerate(events) if x["alloc"]]
    last_alloc = allocs[dump["stats"]["num_allocs"] - 1]
    return next(i for i in range(last_alloc, len(events)) if events[i]["bytes_allocated"] == dump["in_use_bytes"])


@pytest.mark.parametrize("name", PROGRAMS)
def test_a_kept_oom_profile_holds_every_allocation_before_the_failure_and_tfs_dump_state(name: str) -> None:
    e = evidence(name)
    kept = [r for r in e["ladder"] if r["outcome"] == "oom" and r["profile"]]
    assert kept, "the OOM runs keep their profiles"
    for run in kept:
        events = memory_events(FIT / run["profile"])
        dump = run["dump"]
        assert sum(x["alloc"] for x in events) >= dump["stats"]["num_allocs"]  # TF's own count of allocations
        row = failure_row(events, dump)  # (raises StopIteration where no event leaves the dump's state)
        assert max(x["bytes_allocated"] for x in events[: row + 1]) == dump["stats"]["peak_bytes_in_use"]


def test_the_eager_program_repeats_exactly() -> None:
    # The same eager program under a limit it fits in makes the same requests as without one.
    e = evidence("eager")
    reference = [(x["alloc"], x["requested_bytes"], x["allocation_bytes"], x.get("tf_op", ""))
                 for x in memory_events(FIT / e["birth"]["profile"])]
    for run in e["ladder"]:
        if run["outcome"] == "completed" and run["profile"]:
            events = memory_events(FIT / run["profile"])
            assert [(x["alloc"], x["requested_bytes"], x.get("tf_op", "")) for x in events] == \
                   [(a, r, op) for a, r, _, op in reference]


# -- the model against the fixtures ------------------------------------------------------------------


def requests_of(profile: Path) -> Any:
    return requests_for(memtrace.load(profile), BFC).requests


def region_bases(requests: Any, sim: Any, events: list[dict[str, Any]]) -> list[int]:
    """Each model region's base address in the profile: a region begins with the allocation that made it."""
    return [int(events[row]["addr"]) for row in sim.region_rows]


def simulate_in_address_order(bfc: Any, requests: Any, limit: int, events: list[dict[str, Any]]) -> Any:
    """The replay with the regions' address order (which decides ties between equal free chunks) as the profile has it.

    The system (mmap) places the regions; the model lays them out ascending or descending. ``events`` are
    the profile the requests come from: the order is the one under which every chunk lies at its
    region's base plus the model's offset (for a ladder run predicted from the from-birth profile, the
    from-birth run's order: the run's own is unknown).
    """
    replays = [bfc.simulate(requests, bfc.BFCOptions(limit_bytes=limit, regions_descending=d)) for d in (False, True)]

    def consistent(sim: Any) -> bool:
        bases = region_bases(requests, sim, events)
        rows = [row for row in range(min(len(sim.region), len(events))) if requests.is_alloc[row]]
        return all(bases[sim.region[row]] + int(sim.offset[row]) == events[row]["addr"] for row in rows)

    found = next((sim for sim in replays if consistent(sim)), None)
    if found is not None:
        return found
    # Neither order (a first region in the heap, the next ones mmap'ed lower): rank each region by
    # the address the profile gives its first chunk, and replay with the regions in that order.
    bases = region_bases(requests, replays[0], events)
    ranks = tuple(sorted(bases).index(base) for base in bases)
    return bfc.simulate(requests, bfc.BFCOptions(limit_bytes=limit, regions_descending=True, region_order=ranks))


def layout(chunks: list[tuple[int, int, int, bool]]) -> list[tuple[tuple[int, int, bool], ...]]:
    """Each region's chunks as (offset, size, in_use) in offset order, the regions sorted: independent of how
    either side numbers its regions."""
    regions: dict[int, list[tuple[int, int, bool]]] = {}
    for region, offset, size, in_use in chunks:
        regions.setdefault(region, []).append((offset, size, bool(in_use)))
    return sorted(tuple(sorted(c)) for c in regions.values())


def completed_profiles() -> list[Any]:
    """(program, run) of every completed run with a profile: the one under TF's default limit and the ladder's."""
    found = []
    for name in PROGRAMS:
        e = evidence(name)
        for run in [e["birth"], *e["ladder"]]:
            if run["profile"] and run["outcome"] == "completed":
                found.append(pytest.param(name, run, id=run["profile"]))
    return found


# The model lays regions out ascending or descending, or in the rank order the profile shows: the
# 12 MiB transformer run's first region lies in the heap (0x5563...), the next two at descending
# mmap addresses, so neither direction reproduces its 6,054 addresses (26 differ) and ranks do.
TRANSFORMER_12MIB = "transformer.12mib.xplane.pb.gz"


@pytest.mark.parametrize(("name", "run"), completed_profiles())
def test_the_model_reproduces_each_from_birth_profile_address_by_address(name: str, run: dict[str, Any]) -> None:
    limit = run["limit_bytes"] or DEFAULT_LIMIT
    events = memory_events(FIT / run["profile"])
    requests = requests_of(FIT / run["profile"])
    assert requests.is_alloc.tolist() == [x["alloc"] for x in events]
    allocs = [x for x in events if x["alloc"]]
    assert requests.requested_bytes[requests.is_alloc].tolist() == [x["requested_bytes"] for x in allocs]
    sim = simulate_in_address_order(bfc, requests, limit, events)
    assert sim.fits and sim.failed_at is None
    # Every chunk TF handed out: its size, and its address: one base per region (the system's mmap) plus
    # the model's offset, the base being where the allocation that made the region lies.
    rows = np.flatnonzero(requests.is_alloc)
    assert sim.chunk_bytes[rows].tolist() == [x["allocation_bytes"] for x in allocs]
    bases = region_bases(requests, sim, events)
    assert [bases[sim.region[row]] + int(sim.offset[row]) for row in rows] == [x["addr"] for x in allocs]
    assert len(set(bases)) == len(bases)
    # Bytes in use after every event, and TF's fragmentation metric, which the profiler writes with six
    # significant digits (NaN where the pool is exactly full).
    assert sim.bytes_in_use.tolist() == [x["bytes_allocated"] for x in events]
    ours = [float(f"{v:.6g}") for v in sim.fragmentation.tolist()]
    theirs = [x["fragmentation"] for x in events]
    assert all((math.isnan(a) and math.isnan(b)) or a == b for a, b in zip(ours, theirs, strict=True))
    assert sim.peak_in_use_bytes == run["counters"]["peak"]



def test_a_run_whose_regions_lie_in_neither_order_needs_their_ranks() -> None:
    # GIVEN the 12 MiB transformer run, replayed with its regions ascending and descending
    [run] = [r for r in evidence("transformer")["ladder"] if r["profile"] == TRANSFORMER_12MIB]
    events = memory_events(FIT / TRANSFORMER_12MIB)
    requests = requests_of(FIT / TRANSFORMER_12MIB)
    rows = np.flatnonzero(requests.is_alloc)
    for descending in (False, True):
        sim = bfc.simulate(requests, bfc.BFCOptions(limit_bytes=run["limit_bytes"], regions_descending=descending))
        bases = region_bases(requests, sim, events)
        wrong = sum(bases[sim.region[row]] + int(sim.offset[row]) != events[row]["addr"] for row in rows)
        # THEN neither direction puts every chunk where TF did (the test above needs the ranks)
        assert wrong > 0, descending

# Programs whose requests are the same run after run (tested above): for them the from-birth profile
# predicts the failing request and the allocator's state at each failure. A tf.function program's
# requests vary by a few events between runs (an extra 384 KiB buffer, a forward op before or after a
# cast), so another run's profile predicts its outcomes but not always which request fails first: its
# OOMs' requests and states are checked against each run's own requests (the next test).
REPEATING = {"eager"}


@pytest.mark.parametrize("name", PROGRAMS)
def test_the_model_predicts_every_ladder_run(name: str) -> None:
    # From the from-birth profile's requests alone: which runs TF completed, and for each OOM the request
    # that failed (rounded bytes and op) and, for a program that repeats exactly, the state in TF's dump.
    e = evidence(name)
    events = memory_events(FIT / e["birth"]["profile"])
    requests = requests_of(FIT / e["birth"]["profile"])
    for run in e["ladder"]:
        sim = simulate_in_address_order(bfc, requests, run["limit_bytes"], events)
        assert sim.fits == (run["outcome"] == "completed"), f"{name} at {run['limit_mib']} MiB"
        if not sim.fits and name in REPEATING:
            check_failure(requests, sim, run)


def check_failure(requests: Any, sim: Any, run: dict[str, Any]) -> None:
    failure, dump = run["failure"], run["dump"]
    row = sim.failed_at
    where = f"at {run['limit_mib']} MiB"
    assert requests.is_alloc[row]
    assert -(-int(requests.requested_bytes[row]) // 256) * 256 == failure["request_bytes"], where
    assert requests.op_names[requests.op[row]] == failure["op"], where
    ours = [(c.region, c.offset, c.size_bytes, c.in_use) for c in sim.chunks]
    theirs = [(r, o, size, u) for r, o, size, u, *_ in dump["chunks"]]
    assert layout(ours) == layout(theirs), where
    assert sorted(size for _, size in sim.regions) == sorted(dump["regions"]), where
    assert sim.in_use_bytes == dump["in_use_bytes"] and sim.largest_free_chunk_bytes == dump["largest_free_bytes"], where
    # The client's requested bytes of every chunk in use, as the dump lists them.
    assert sorted(c.requested_bytes for c in sim.chunks if c.in_use) == \
           sorted(req for _, _, _, u, req, _ in dump["chunks"] if u), where


@pytest.mark.parametrize("name", PROGRAMS)
def test_the_oom_runs_own_profile_fails_at_the_logged_request_in_the_dumps_state(name: str) -> None:
    # The OOM run's own requests up to the failure, then the request TF's log names.
    e = evidence(name)
    oom = [run for run in e["ladder"] if run["outcome"] == "oom"]
    # Every OOM run keeps its profile, but one the recorder had to stop (its ops went on failing, 10 s each).
    assert all(run["profile"] or run["exit_code"] == 128 + 9 for run in oom)
    for run in oom:
        if not run["profile"]:
            continue
        r = requests_of(FIT / run["profile"])
        events = memory_events(FIT / run["profile"])
        cut = failure_row(events, run["dump"]) + 1
        names = tuple(r.op_names) + (run["failure"]["op"],)
        failing = type(r)(is_alloc=np.append(r.is_alloc[:cut], True),
                          requested_bytes=np.append(r.requested_bytes[:cut], run["failure"]["request_bytes"]),
                          frees=np.append(r.frees[:cut], -1),
                          op=np.append(r.op[:cut], len(names) - 1).astype(r.op.dtype),
                          time_ns=np.append(r.time_ns[:cut], r.time_ns[cut - 1] + 1), op_names=names)
        sim = simulate_in_address_order(bfc, failing, run["limit_bytes"], events)
        assert not sim.fits and sim.failed_at == cut
        check_failure(failing, sim, run)
