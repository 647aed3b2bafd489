"""Does ``fit``'s answer hold for the runs to come? Held-out runs of two JAX programs on an H200 (fixtures/gpu-heldout).

GIVEN two programs the model was never tuned on (an MLP written again from fixtures/gpu-h200's README, and a
transformer that XLA rematerializes under a tight limit), each recorded through ``memtrace run`` under an ample
limit, then run 172 times under ladders of limits (and a one-array program 48 times) with XLA's own
``memory_stats()`` after each run
(``scripts/record_jax_ladder.py``), WHEN memtrace fits the recordings and ``memtrace run --limit`` sets the limits
THEN the pool XLA makes is the one the model of it says, ``run --limit`` gets the pool it asks for, the MLP's
smallest limit parts every held-out run that fitted from every one that ran out, and the transformer shows why an
answer is for the programs XLA compiled for the recorded limit (and says so).
"""

from __future__ import annotations

import argparse
import json

import pytest

import memtrace
from memtrace.allocator.defaults import XLA_POOL_STEP_BYTES, xla_fraction_for, xla_pool_bytes
from memtrace.allocator.fit import fit
from memtrace.allocator.oom import analyse_all
from memtrace.allocator.oom_fit import avoidance
from memtrace.cli import main
from memtrace.commands import run as run_command
from memtrace.read.oom import load_oom_dumps

from .conftest import ROOT

HELDOUT = ROOT / "fixtures" / "gpu-heldout"
LADDER = json.loads((HELDOUT / "ladder.json").read_text())
GPU_BYTES = LADDER["gpu_bytes"]
GPU = "GPU_0_bfc"
MIB = 1 << 20


def runs(program: str) -> list[dict]:
    return [r for r in LADDER["runs"] if r["program"] == program]


def test_xlas_pool_is_the_fraction_as_a_32_bit_float_times_the_gpu_rounded_up_to_2_mib() -> None:
    # every held-out run's fraction (from its log, or the rule memtrace used then) against the pool XLA reported
    assert len(LADDER["runs"]) == 220
    for r in LADDER["runs"]:
        assert xla_pool_bytes(GPU_BYTES, float(r["fraction"])) == r["bytes_limit"], r
    # the fraction read as a 64-bit float and truncated (what memtrace assumed before) misses most of them
    truncated = sum(int(GPU_BYTES * float(r["fraction"])) == r["bytes_limit"] for r in LADDER["runs"])
    assert truncated < 100
    # the old fraction asked 896 MiB and XLA made 898: a whole step more (this is how the ladder found it)
    asked_896 = [r for r in LADDER["runs"] if r["session"] == 2 and r["limit_mib"] == 896]
    assert {r["bytes_limit"] for r in asked_896} == {898 * MIB}


def test_run_limit_gets_the_largest_step_within_the_limit_on_the_gpu() -> None:
    # session 3 ran with the fraction memtrace run --limit now sets: XLA made the step asked for, every time
    third = [r for r in LADDER["runs"] if r["session"] == 3]
    assert len(third) == 60
    for r in third:
        limit = r["limit_mib"] * MIB
        assert r["bytes_limit"] == limit // XLA_POOL_STEP_BYTES * XLA_POOL_STEP_BYTES, r
        given = argparse.Namespace(limit=f"{r['limit_mib']}MiB", card=None, cpu_bfc=False, compute_capability="8.0")
        updates, _ = run_command.limit_environment(given, "jax", {}, gpu_memory_bytes=GPU_BYTES)
        assert updates["XLA_PYTHON_CLIENT_MEM_FRACTION"] == r["fraction"]  # the fraction that run was given
    # and by the model of XLA's pool, every whole-MiB limit on this GPU gets its step (the 32-bit fraction's
    # error stays far inside half a step)
    for mib in range(2, GPU_BYTES // MIB + 1):
        pool = mib * MIB // XLA_POOL_STEP_BYTES * XLA_POOL_STEP_BYTES
        assert xla_pool_bytes(GPU_BYTES, xla_fraction_for(pool, GPU_BYTES)) == pool, mib


def test_the_mlps_smallest_limit_parts_the_held_out_runs_that_fit_from_those_that_ran_out() -> None:
    recordings = [memtrace.load(HELDOUT / f"mlp_ample_{n}.xplane.pb.gz") for n in (1, 2, 3)]
    for trace in recordings:  # each recorded under 4 GiB: XLA's own decisions, every one
        result = fit(trace, GPU, alternatives=False)
        assert result.reproduced is not None and result.reproduced.exact
        assert result.min_limit_bytes == 897 * MIB and result.compiled_for_bytes == 4096 * MIB
    # XLA's pools come in 2 MiB steps: 896 MiB is the largest that is too small, 898 MiB the smallest that fits
    mlp = runs("mlp")
    assert len(mlp) == 107
    ran = sorted({r["bytes_limit"] // MIB for r in mlp if r["outcome"] == "ok"})
    out = sorted({r["bytes_limit"] // MIB for r in mlp if r["outcome"] == "oom"})
    assert {r["outcome"] for r in mlp} == {"ok", "oom"}
    assert max(out) == 896 and min(ran) == 898
    assert all((r["outcome"] == "ok") == (r["bytes_limit"] >= 897 * MIB) for r in mlp)
    assert sum(r["outcome"] == "ok" for r in mlp) == 49 and sum(r["bytes_limit"] == 896 * MIB for r in mlp) == 18


@pytest.mark.parametrize("name, request_bytes, verdict, smallest_mib", [
    ("mlp_pool896_oom", 67_108_864, "exhausted", 897), ("transformer_pool1550_oom", 1_124_074_496, "exhausted", 1557)])
def test_held_out_runs_that_ran_out_are_replayed_into_xlas_own_dump(name: str, request_bytes: int, verdict: str,
                                                                   smallest_mib: int) -> None:
    # XLA's log of a held-out run that ran out (its BFC dump), against the model's replay of the run's own profile
    [event] = analyse_all(load_oom_dumps(str(HELDOUT / f"{name}.log")))
    assert event.request_bytes == request_bytes and event.verdict == verdict
    a = avoidance(event, memtrace.load(HELDOUT / f"{name}.xplane.pb.gz"))
    f = a.result.failure
    assert a.appended and a.same_request and a.same_state and f is not None and f.end == "lower"
    assert a.result.min_limit_bytes == smallest_mib * MIB


def test_an_answer_is_for_the_programs_xla_compiled_for_the_recorded_limit(
        capsys: pytest.CaptureFixture[str]) -> None:
    transformer = runs("transformer")
    by_pool: dict[int, set[str]] = {}
    for r in transformer:
        by_pool.setdefault(r["bytes_limit"] // MIB, set()).add(r["outcome"])
    # every pool from 1,616 MiB up ran; 1,550 MiB and below ran out, every time
    assert all(outcomes == {"ok"} for pool, outcomes in by_pool.items() if pool >= 1616)
    assert all(outcomes == {"oom"} for pool, outcomes in by_pool.items() if pool <= 1550)
    assert by_pool[1550] == {"oom"} and len([r for r in transformer if r["bytes_limit"] == 1550 * MIB]) == 5
    # the recording under 1,616 MiB: its programs need 1,525 MiB, every sampled order runs from 1,541 MiB;
    # yet the programs XLA compiled for 1,550 MiB ran out: another limit, other programs
    result = fit(memtrace.load(HELDOUT / "transformer_pool1616.xplane.pb.gz"), GPU, alternatives=False)
    assert result.reproduced is not None and result.reproduced.exact
    assert result.min_limit_bytes == 1525 * MIB and result.band is not None
    assert result.band.always_fits_bytes == 1541 * MIB < 1550 * MIB
    assert result.compiled_for_bytes == 1616 * MIB
    # and the recording under 8 GiB needs more than the programs compiled for 1,616 MiB ran in
    ample = fit(memtrace.load(HELDOUT / "transformer_ample_1.xplane.pb.gz"), GPU, alternatives=False)
    assert ample.min_limit_bytes is not None and ample.min_limit_bytes > 2600 * MIB
    assert ample.compiled_for_bytes == 8192 * MIB
    # the text says whose programs each answer is for
    code = main(["fit", str(HELDOUT / "transformer_pool1616.xplane.pb.gz"), "--allocator", GPU,
                 "--limit", "1550MiB", "--no-alternatives"])
    text = capsys.readouterr().out
    assert code == 0
    assert "smallest limit: 1,525 MiB under the recorded order, for the programs XLA compiled for 1,616 MiB" in text
    assert "under 1,550 MiB: fits (the recorded order, for the programs XLA compiled for 1,616 MiB)" in text
    assert "the programs XLA compiled for 1,550 MiB ran out of memory in 5 runs of 5" in " ".join(text.split())
    code = main(["fit", str(HELDOUT / "transformer_pool1616.xplane.pb.gz"), "--allocator", GPU, "--json"])
    entry = json.loads(capsys.readouterr().out)["allocators"][0]
    assert entry["effects"]["compiled_for_limit"]["limit_bytes"] == 1616 * MIB
