"""``memtrace fit``'s answers held to TensorFlow's own: programs recorded from the allocator's birth.

``fixtures/fit/PROGRAM.*`` (``scripts/record_fit.py``): each program's profile from the allocator's
birth under TF's default limit, and a ladder of ``TF_CPU_BFC_MEM_LIMIT_IN_MB`` runs (TF's outcome,
its "ran out of memory" line and ``MemoryDump`` state for each OOM). ``tests/test_fit_recorded.py``
holds ``memtrace.bfc`` to every recorded program; this file holds ``memtrace fit``, the command and
the analysis, to them: the self-check, the smallest limit against TF's own boundary, every ladder
run's outcome and failing request.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import memtrace
from memtrace.cli import main
from memtrace.fit import fit

from .conftest import FIXTURES

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
