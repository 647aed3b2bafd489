"""``memtrace fit`` and ``memtrace oom`` on a real GPU: JAX 0.11.2 on an H200 (fixtures/gpu-h200).

GIVEN XLA's own recordings of one MLP training step (every allocator decision from the allocator's
birth, under 928, 930 and 9,538 MiB and six times under 2 GB), XLA's log of the run that ran out of
memory (with its BFC dump) and the run's outcomes under a ladder of limits, WHEN memtrace replays
them through the partitioned model THEN every address, chunk size, bytes-in-use and fragmentation
value is the allocator's own, the 928 MiB run fails where and how XLA's log says, and the advice
names JAX's settings, not TensorFlow's.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import memtrace
from memtrace.allocator import bfc
from memtrace.allocator.fit import _partitioning_check, fit
from memtrace.allocator.oom import analyse_all
from memtrace.allocator.oom_fit import avoidance
from memtrace.allocator.reproduce import reproduce
from memtrace.allocator.requests import requests_for
from memtrace.cli import main
from memtrace.read.oom import load_oom_dumps

from .conftest import ROOT

H200 = ROOT / "fixtures" / "gpu-h200"
OOM = ROOT / "fixtures" / "oom"
GPU = "GPU_0_bfc"
MIB = 1 << 20
ORDERS = [H200 / "orders" / f"mlp_o{i}.xplane.pb.gz" for i in range(6)]
REGION_BASE = 0x302000000  # the pool's address in mlp_928.log's dump
PREALLOCATE_OFF = "XLA_PYTHON_CLIENT_PREALLOCATE=false (growth, and no partitioning)"


def load(path: Path) -> memtrace.Trace:
    return memtrace.load(path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# -- the model against the allocator's own decisions ------------------------------------------------


@pytest.mark.parametrize("path", [H200 / "mlp_930.xplane.pb.gz", H200 / "mlp_928.xplane.pb.gz",
                                  H200 / "mlp_9538.xplane.pb.gz", *ORDERS], ids=lambda p: p.name.split(".")[0])
def test_every_recording_is_reproduced_under_its_own_limit(path: Path) -> None:
    result = fit(load(path), GPU, alternatives=False)
    p = result.reproduced
    assert p is not None and result.options.partitioned and result.options.gap_split == "heuristic"
    assert p.exact, p.first_difference
    assert p.limit_bytes == load(path).recorded_limit(GPU)


def test_only_the_partitioned_model_reproduces_the_tight_limit_run() -> None:
    # mlp_930 under its own 930 MiB: event 110 takes the 192 MiB lower hole although a 66 MiB chunk at the top fits
    # better (only a partitioned pool does: the top is the central gap, carved only when no own hole fits), and
    # event 101 gets the whole 66 MiB gap for a 64 MiB request (JAX 0.11.2's gap heuristic; the source splits it)
    found = requests_for(load(H200 / "mlp_930.xplane.pb.gz"), GPU)
    limit = 975_175_680
    classic = reproduce(found, bfc.BFCOptions(limit, allow_growth=False))
    exact_gap = reproduce(found, bfc.BFCOptions(limit, allow_growth=False, partitioned=True))
    assert (classic.addresses_equal, classic.chunks_equal, classic.bytes_in_use_equal) == (60, 66, 110)
    assert classic.first_difference is not None and classic.first_difference.startswith("event 110 ")
    assert (exact_gap.addresses_equal, exact_gap.chunks_equal, exact_gap.bytes_in_use_equal) == (78, 75, 150)
    assert exact_gap.first_difference is not None and exact_gap.first_difference.startswith("event 101 ")


def test_the_state_after_the_last_event_is_the_allocators_own() -> None:
    # each log ends with jax's memory_stats() after the run: bytes in use and the largest free block (gap included)
    for name, in_use, largest in (("mlp_930", 0, 975_175_680), ("mlp_928", 469_762_048, 503_316_224)):
        found = requests_for(load(H200 / f"{name}.xplane.pb.gz"), GPU)
        limit = load(H200 / f"{name}.xplane.pb.gz").recorded_limit(GPU)
        sim = bfc.simulate(found.requests, bfc.BFCOptions(limit or 0, allow_growth=False, partitioned=True,
                                                          lower_end=bfc.EndPolicy(gap_split="heuristic")))
        stats = json.loads((H200 / f"{name}.log").read_text().split("RESULT ", 1)[1].splitlines()[0])["stats"]
        assert (stats["bytes_in_use"], stats["largest_free_block_bytes"]) == (in_use, largest)
        assert (int(sim.bytes_in_use[-1]), int(sim.largest_free_bytes[-1])) == (in_use, largest)


# -- the smallest limit -----------------------------------------------------------------------------------


def test_the_smallest_limit_of_each_order_partitioned_and_classic() -> None:
    expected = {"mlp_930": (929, 993), "mlp_9538": (897, 961), "mlp_o0": (961, 1025), "mlp_o1": (961, 1025),
                "mlp_o2": (929, 993), "mlp_o3": (961, 961), "mlp_o4": (929, 1057), "mlp_o5": (961, 1025)}
    for path in [H200 / "mlp_930.xplane.pb.gz", H200 / "mlp_9538.xplane.pb.gz", *ORDERS]:
        name = path.name.split(".")[0]
        trace = load(path)
        partitioned = fit(trace, GPU, alternatives=False)
        classic = fit(trace, GPU, alternatives=False, partitioned=False)
        assert (partitioned.min_limit_bytes // MIB, classic.min_limit_bytes // MIB) == expected[name], name
        assert partitioned.monotone and partitioned.below_step_bytes == MIB


def test_928_mib_fails_on_the_lower_end_request_xlas_log_names() -> None:
    trace = load(H200 / "mlp_930.xplane.pb.gz")
    assert fit(trace, GPU, limit=929 * MIB, alternatives=False).fits
    result = fit(trace, GPU, limit=928 * MIB, alternatives=False)
    f = result.failure
    assert not result.fits and f is not None
    # mlp_928.log: "ran out of memory trying to allocate 64.00MiB (rounded to 67109120) from the lower end"
    assert (f.row, f.requested_bytes, f.request_bytes, f.end) == (101, 67_108_880, 67_109_120, "lower")
    assert (f.in_use_bytes, f.pool_bytes, f.largest_free_bytes, f.usable_largest_free_bytes) == (
        973_078_528, 973_078_528, 0, 0)
    assert f.verdict == "exhausted" and {c.tag for c in f.chunks} == {"lower"}


def test_the_ladder_of_real_runs_is_what_the_orders_give() -> None:
    # The program run again and again under one limit: 930 MiB fit 4 of 6 times, 936 4 of 6, 944 3 of 5,
    # 956 5 of 6, 962 5 of 5 (fixtures/gpu-h200/README.md). The recorded orders need 929 or 961 MiB, so every limit
    # of the ladder below 961 fits with some orders and not others, and 962 fits with all of them.
    needs = {fit(load(path), GPU, alternatives=False).min_limit_bytes // MIB for path in ORDERS}
    assert needs == {929, 961}
    for limit_mib, mixed in ((930, True), (936, True), (944, True), (956, True), (962, False)):
        outcomes = {need <= limit_mib for need in needs}
        assert (outcomes == {True, False}) == mixed and (mixed or outcomes == {True}), limit_mib


# -- the answer's words ---------------------------------------------------------------------------------


def test_fit_says_the_options_whose_default_and_xlas_three_effects(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "fit", str(H200 / "mlp_930.xplane.pb.gz"), "--allocator", GPU, "--no-alternatives")
    text = " ".join(out.split())
    assert code == 0
    assert "reproduces 78 of 78 addresses" in text  # (the shared before-stop hook checks this line)
    assert "spatial partitioning on (a small central gap handed out whole, as JAX 0.11.2)" in text
    assert "options not given are XLA's GPU allocator (JAX 0.11.2)" in text and "smallest limit: 929 MiB" in text
    for effect in ("partitioned allocator (applies)", "compiled for the limit (applies)", "order of frees (applies)"):
        assert effect in text
    code, out, _ = run(capsys, "fit", str(H200 / "mlp_930.xplane.pb.gz"), "--allocator", GPU, "--json")
    [entry] = json.loads(out)["allocators"]
    assert entry["options"]["partitioned"] is True and entry["options"]["gap_split"] == "heuristic"
    assert {name: e["applies"] for name, e in entry["effects"].items()} == {
        "partitioned_allocator": True, "compiled_for_limit": True, "order_of_frees": True}
    assert "975,175,680 bytes" in entry["effects"]["compiled_for_limit"]["words"]
    assert entry["settings"] == "XLA (JAX) GPU"
    # what would help: XLA's own settings, each replayed; no TF setting, no growth alongside partitioning
    helps = {a["change"]: (a["min_limit_bytes"] // MIB, a["setting"]) for a in entry["alternatives"]}
    assert helps == {
        "spatial partitioning off": (993, "XLA_FLAGS=--xla_gpu_enable_allocator_spatial_partitioning=false"),
        "allow_growth on, spatial partitioning off": (962, PREALLOCATE_OFF)}
    assert all(not a["options"]["allow_growth"] or not a["options"]["partitioned"] for a in entry["alternatives"])
    # a TF profile's answer has no XLA effects, and names TF's settings
    code, out, _ = run(capsys, "fit", str(ROOT / "fixtures" / "profiles" / "keras_mlp.xplane.pb.gz"), "--json")
    [tf] = json.loads(out)["allocators"]
    assert tf["effects"] == {} and tf["settings"] == "TF CPU" and tf["options"]["partitioned"] is False


def test_partitioning_can_be_turned_off_and_bad_options_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    mlp = str(H200 / "mlp_930.xplane.pb.gz")
    code, out, _ = run(capsys, "fit", mlp, "--no-partitioning", "--no-alternatives")
    text = " ".join(out.split())
    assert "reproduces 60 of 78 addresses" in text and "smallest limit: 993 MiB" in text
    assert "partitioned allocator (does not apply)" in text
    code, out, _ = run(capsys, "fit", mlp, "--gap-split", "exact", "--no-alternatives")
    assert "reproduces 78 of 78 addresses" in " ".join(out.split()) and "(75 of 78 chunk sizes" in " ".join(out.split())
    cpu = str(ROOT / "fixtures" / "profiles" / "keras_mlp.xplane.pb.gz")
    for argv, words in (
            ([mlp, "--partitioning", "--allow-growth"], "--partitioning needs allow_growth off"),
            ([mlp, "--gap-split", "best"], "--gap-split must be heuristic or exact"),
            ([mlp, "--no-partitioning", "--gap-split", "exact"], "--gap-split applies to a partitioned pool only"),
            ([cpu, "--partitioning"], "spatial partitioning needs allow_growth off"),
            ([cpu, "--gap-split", "exact"], "no allocator here is one by default")):
        code, out, err = run(capsys, "fit", *argv)
        assert (code, out) == (2, "") and err.count("\n") == 1 and words in err, argv
    # growth asked of XLA's GPU allocator turns partitioning off, as XLA does, and says so
    result = load(H200 / "mlp_930.xplane.pb.gz").fit(GPU, allow_growth=True, alternatives=False)
    assert not result.options.partitioned and result.min_limit_bytes == 962 * MIB
    assert any("XLA partitions its pool only when it preallocates it" in note for note in result.assumptions)


def test_partitioning_off_offers_it_on_as_an_alternative_and_the_gap_split_is_named() -> None:
    trace = load(H200 / "mlp_930.xplane.pb.gz")
    # GIVEN the tight-limit run fitted with partitioning off (as an XLA before the flag would be)
    off = fit(trace, GPU, partitioned=False, orders=0)
    # THEN turning it on is offered, with the setting that does it, beside preallocation off
    assert [a.change for a in off.alternatives] == ["spatial partitioning on", "allow_growth on"]
    assert off.alternatives[0].options.partitioned and not off.options.partitioned
    # AND fitted with growth (preallocation off), turning growth off is offered, and replayed without it
    grown = fit(trace, GPU, allow_growth=True, orders=0)
    [growth_off] = [a for a in grown.alternatives if a.change == "allow_growth off"]
    assert grown.options.allow_growth and not growth_off.options.allow_growth
    # AND by default the gap split is JAX 0.11.2's heuristic, named in the partitioned allocator's effect
    [partitioned] = [e for e in fit(trace, GPU, orders=0, alternatives=False).effects
                     if e.name == "partitioned_allocator"]
    assert "handed out whole when under twice the request, as JAX 0.11.2 does" in partitioned.words
    exact = fit(trace, GPU, orders=0, alternatives=False, gap_split="exact")
    [partitioned] = [e for e in exact.effects if e.name == "partitioned_allocator"]
    assert "split exactly, as openxla/xla's source does" in partitioned.words


def test_a_profile_that_agrees_only_with_partitioning_off_says_so() -> None:
    # a from-birth profile whose recorded decisions are classic BFC's (as an XLA before the flag would write them)
    found = requests_for(load(H200 / "mlp_930.xplane.pb.gz"), GPU)
    limit = 1100 * MIB  # where classic BFC serves every request too
    classic = bfc.simulate(found.requests, bfc.BFCOptions(limit, allow_growth=False))
    assert classic.fits
    older = replace(found, addresses=classic.offset + REGION_BASE, chunk_bytes=classic.chunk_bytes,
                    bytes_in_use=classic.bytes_in_use,
                    fragmentation=np.array([float(f"{v:.6g}") for v in classic.fragmentation.tolist()]))
    options = bfc.BFCOptions(limit, allow_growth=False, partitioned=True, lower_end=bfc.EndPolicy(gap_split="heuristic"))
    checked = reproduce(older, options)
    assert not checked.exact
    [note] = _partitioning_check(older, options, checked, None)
    assert "only with spatial partitioning off" in note and "--no-partitioning" in note
    assert _partitioning_check(older, options, checked, True) == []  # asked for: no second guess
    # AND a profile neither model reproduces (one chunk 256 bytes off where classic BFC put it) gets no such note
    moved = older.addresses.copy()
    moved[0] += 256
    neither = replace(older, addresses=moved)
    checked = reproduce(neither, options)
    assert not checked.exact and not reproduce(neither, replace(options, partitioned=False)).exact
    assert _partitioning_check(neither, options, checked, None) == []


def test_fit_says_when_a_profile_agrees_only_with_partitioning_off() -> None:
    # GIVEN the tight-limit run's profile with every decision made classic BFC's under 1,100 MiB (as an XLA before the
    # flag would write them): each allocation's address and chunk, the bytes in use and the fragmentation after each
    # event, and the limit its events show
    trace = load(H200 / "mlp_930.xplane.pb.gz")
    found = requests_for(trace, GPU)
    limit = 1100 * MIB
    classic = bfc.simulate(found.requests, bfc.BFCOptions(limit, allow_growth=False))
    index = trace.allocators.index(GPU)
    rows = np.flatnonzero(trace.memory.allocator == index)
    out_of_node = np.full(len(trace.nodes), -1, dtype=np.int64)
    out_rows = np.flatnonzero(trace.outputs.allocator == index)
    out_of_node[trace.outputs.node[out_rows]] = out_rows
    out = out_of_node[trace.memory.node[rows]]
    alloc = found.requests.is_alloc
    ptr, chunk = trace.outputs.ptr.copy(), trace.outputs.allocated_bytes.copy()
    ptr[out[alloc]] = (classic.offset + REGION_BASE)[alloc]
    chunk[out[alloc]] = classic.chunk_bytes[alloc]
    in_use, fragmentation = trace.memory.bytes_in_use.copy(), trace.memory.fragmentation.copy()
    in_use[rows] = classic.bytes_in_use
    fragmentation[rows] = [float(f"{v:.6g}") for v in classic.fragmentation.tolist()]
    older = replace(trace, outputs=replace(trace.outputs, ptr=ptr, allocated_bytes=chunk),
                    memory=replace(trace.memory, bytes_in_use=in_use, fragmentation=fragmentation),
                    recorded_limits=((GPU, limit),))
    # WHEN it is fitted with XLA's default (partitioning on)
    answer = fit(older, GPU, orders=0, alternatives=False)
    # THEN the self-check is not exact, and the answer says the profile agrees with the model only with it off
    assert answer.reproduced is not None and not answer.reproduced.exact
    assert any("only with spatial partitioning off" in note and "--no-partitioning" in note
               for note in answer.assumptions)


# -- memtrace oom on XLA's dump ---------------------------------------------------------------------


def test_oom_reads_xlas_dump_lines() -> None:
    [event] = analyse_all(load_oom_dumps(str(H200 / "mlp_928.log")))
    d = event.dump
    assert (d.runtime, d.request_end, d.request_bytes, d.limit_bytes, d.limit_exact) == (
        "XLA", "lower", 67_109_120, 973_078_528, True)  # the limit from "XLA backend allocating ... (973078528 bytes)"
    assert [(c.address - REGION_BASE, c.size_bytes, c.tag) for c in d.chunks][-1] == (838_861_312, 134_217_216, "lower")
    assert d.chunks[0].annotation == "xla.execute{executable=jit__threefry_seed}"
    assert (d.usable_largest_free_bytes, d.growth_disabled, d.partitioned) == (0, True, None)
    assert d.compile_budget is not None and (d.compile_budget.target_bytes, d.compile_budget.reached_bytes,
                                             d.compile_budget.original_bytes) == (498_283_318, 603_979_836, 671_088_700)
    assert event.usable_largest_free_bytes == 0 and event.verdict == "exhausted"
    # who held the pool, by the chunks' annotations: jit_step's 2 x 256 B + 5 x 64 MiB + the 128 MiB - 512 B chunk ...
    assert [(t.op, t.bytes) for t in event.by_annotation] == [
        ("xla.execute{executable=jit_step}", 469_762_048), ("xla.execute{executable=jit_multiply}", 6 * 64 * MIB),
        ("xla.execute{executable=jit_broadcast_in_dim}", 67_108_608 + 32 * MIB),
        ("xla.execute{executable=jit__threefry_seed}", 256)]
    words = " ".join(event.explanation)
    assert "XLA compiled the program for this limit: its rematerialization aimed at 475 MiB" in words
    advice = " ".join(event.advice)
    assert "XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async" in advice and "XLA_PYTHON_CLIENT_MEM_FRACTION" in advice
    assert "Set TF_GPU_ALLOCATOR" not in advice and "allow_growth" not in advice


def test_oom_knows_which_free_chunks_a_partitioned_request_could_use() -> None:
    # the H100 run's second OOM: 428 MiB free (as the summary writes it; the chunk lines add up to 256 B less), in
    # 32 MiB lower holes and a 44 MiB central gap; 64 MiB asked
    first, second = analyse_all(load_oom_dumps(str(OOM / "jax_h100_fragmented.log")))
    assert second.dump.partitioned is True and second.dump.request_end == "lower"
    assert (second.free_bytes, second.largest_free_bytes) == (448_790_272, 46_136_832)
    assert (second.usable_largest_free_bytes, second.other_end_free_bytes) == (46_136_832, 0)
    assert second.dump.central_gap_bytes == 44 * MIB and second.dump.usable_largest_free_bytes == 44 * MIB
    assert {c.tag for c in second.dump.chunks if not c.in_use} == {"lower", "central_gap"}
    assert second.verdict == "fragmentation"
    assert any("may use only that end's own holes and the central gap" in w for w in second.explanation)
    assert any(a.startswith("Set XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async") for a in second.advice)
    assert first.dump.runtime == "XLA"


def test_oom_trace_replays_the_928_mib_run_into_xlas_dump() -> None:
    [event] = analyse_all(load_oom_dumps(str(H200 / "mlp_928.log")))
    a = avoidance(event, load(H200 / "mlp_928.xplane.pb.gz"))
    f = a.result.failure
    assert a.appended and a.same_request and a.same_state and f is not None and f.end == "lower"
    # the model's map at the failure is the dump's, chunk by chunk (offset in the pool, size, in use, tag)
    model = [(c.offset, c.size_bytes, c.in_use, c.tag) for c in f.chunks]
    logged = [(c.address - REGION_BASE, c.size_bytes, c.in_use, c.tag) for c in event.dump.chunks]
    assert model == logged and len(logged) == 17
    assert a.result.min_limit_bytes == 929 * MIB and a.result.options.partitioned
    assert {e.name for e in a.effects if e.applies} == {"partitioned_allocator", "compiled_for_limit", "order_of_frees"}
    assert all("TF_" not in alt.setting for alt in a.result.alternatives)


def test_oom_trace_text_and_json_name_the_runtimes_settings(capsys: pytest.CaptureFixture[str]) -> None:
    log, profile = str(H200 / "mlp_928.log"), str(H200 / "mlp_928.xplane.pb.gz")
    code, out, _ = run(capsys, "oom", log, "--trace", profile)
    text = " ".join(out.split())
    assert code == 0
    assert "spatial partitioning on (a small central gap handed out whole, as JAX 0.11.2)" in text
    assert "XLA: compiled for the limit (applies)" in text
    assert "[XLA (JAX) GPU: XLA_FLAGS=--xla_gpu_enable_allocator_spatial_partitioning=false]" in text
    assert "garbage_collection" not in text and "Set TF_GPU_ALLOCATOR" not in text
    code, out, _ = run(capsys, "oom", log, "--trace", profile, "--json")
    [entry] = json.loads(out)["events"]
    assert (entry["runtime"], entry["request_end"], entry["usable_largest_free_bytes"]) == ("XLA", "lower", 0)
    assert entry["compile_budget"] == {"target_bytes": 498_283_318, "reached_bytes": 603_979_836,
                                       "original_bytes": 671_088_700}
    assert entry["regions"][0]["chunks"][0]["tag"] == "lower"
    avoided = entry["avoided_by"]
    assert avoided["options"]["partitioned"] is True and avoided["same_state"] is True
    assert set(avoided["effects"]) == {"partitioned_allocator", "compiled_for_limit", "order_of_frees"}


# -- advice for the runtime and device that wrote the dump (issue 35, item 7) -----------------------------


def test_a_cpu_dump_gets_cpu_advice_in_text_and_html(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    log = str(OOM / "cpu_fragmented.log")
    code, out, _ = run(capsys, "oom", log)
    assert code == 0 and "TF_GPU_ALLOCATOR" not in out and "cuda" not in out
    assert "TF_CPU_ALLOCATOR_USE_BFC=true is set" in " ".join(out.split())
    assert "TF_CPU_BFC_MEM_LIMIT_IN_MB" in out  # the first OOM is exhausted: raise the limit TF's way
    page = tmp_path / "oom.html"
    assert main(["oom", log, "--html", "-o", str(page)]) == 0
    assert "TF_GPU_ALLOCATOR" not in page.read_text() and "TF_CPU_ALLOCATOR_USE_BFC" in page.read_text()
    # a TF GPU dump keeps TF's GPU setting; an XLA one gets JAX's
    [gpu] = analyse_all(load_oom_dumps(str(OOM / "public_tf2_rtx3070ti_cifar10.log")))
    assert gpu.dump.runtime == "TensorFlow" and any(a.startswith("Set TF_GPU_ALLOCATOR=cuda_malloc_async") for a in gpu.advice)
    assert not any("XLA" in a for a in gpu.advice)
    [_, jax] = analyse_all(load_oom_dumps(str(OOM / "jax_h100_fragmented.log")))
    assert not any(a.startswith("Set TF_GPU_ALLOCATOR") for a in jax.advice)


def test_fit_alternatives_name_the_settings_of_the_allocators_runtime(capsys: pytest.CaptureFixture[str]) -> None:
    # TF's GPU allocator: TF's environment variables and option; TF's CPU BFC allocator: none exists
    _, out, _ = run(capsys, "fit", str(ROOT / "fixtures" / "alexnet_train_gpu.pbtxt"), "--allocator", GPU, "--json")
    [entry] = json.loads(out)["allocators"]
    settings = {a["change"]: a["setting"] for a in entry["alternatives"]}
    assert settings["allow_growth on"] == "TF_FORCE_GPU_ALLOW_GROWTH=true"
    assert settings["garbage_collection off"] == "TF_ENABLE_GPU_GARBAGE_COLLECTION=false"
    assert settings["fragmentation_fraction 0.1"] == "GPUOptions.experimental.internal_fragmentation_fraction=0.1"
    _, out, _ = run(capsys, "fit", str(ROOT / "fixtures" / "profiles" / "keras_mlp.xplane.pb.gz"))
    assert "(TF CPU has no setting for any of these" in " ".join(out.split()) and "TF_GPU" not in out



def test_an_xla_profile_fitted_with_growth_names_preallocation_as_the_way_back(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the H200 MLP fitted as if JAX had grown its pool (XLA_PYTHON_CLIENT_PREALLOCATE=false: no partitioning)
    _, out, _ = run(capsys, "fit", str(H200 / "mlp_930.xplane.pb.gz"), "--allocator", GPU, "--allow-growth",
                    "--orders", "0", "--json")
    [entry] = json.loads(out)["allocators"]
    # THEN the one alternative is JAX's default, one preallocated pool, with the setting that gives it
    assert [(a["change"], a["setting"]) for a in entry["alternatives"]] == [
        ("allow_growth off", "XLA_PYTHON_CLIENT_PREALLOCATE=true (the default: one preallocated pool)")]

def test_the_picture_is_the_allocators_own_layout() -> None:
    # fit --html and report lay an XLA profile's chunks out partitioned, under the limit it was recorded under
    from memtrace.allocator.address_space import address_space

    space = address_space(load(H200 / "mlp_930.xplane.pb.gz"), GPU)
    assert space.exact and "under a limit of 975,175,680 bytes" in space.note
