"""A Keras user's step (issue 27): tensor bytes beside chunk bytes, no negative rows, layers and phases.

Checked on the real TF 2 profiles of Keras models in ``fixtures/profiles`` against what the
profile itself says (its events, the reader's own oddities), independently of the analyses.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import memtrace
from memtrace.cli import main

from .conftest import FIXTURES
from .helpers import run

PROFILES = FIXTURES / "profiles"
CNN = PROFILES / "keras_cnn.xplane.pb.gz"
MLP = PROFILES / "keras_mlp.xplane.pb.gz"
LSTM = PROFILES / "keras_lstm.xplane.pb.gz"
CPU_BFC = "bfc_cpu_allocator_for_gpu"


SIZE = re.compile(r"-[0-9.]+ (B|KiB|MiB|GiB)\b")


# -- frees of chunks allocated before the profile: counted apart, never negative rows ----------


def test_frees_from_before_the_profile_are_a_line_not_negative_rows(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the CNN profile, whose reader found 4 frees of chunks allocated before it (its own
    # oddity, worked out from the events' addresses), 4 of them before the peak
    trace = memtrace.load(CNN)
    (earlier,) = [o for o in trace.oddities if o.kind == "free-of-earlier-allocation"]
    assert earlier.count == 4
    # WHEN peak, ops and diff are printed
    for argv in (["peak", str(CNN)], ["peak", str(CNN), "--group-by", "scope"], ["ops", str(CNN), "--by", "type"],
                 ["ops", str(CNN), "--by", "node", "--sort", "at_peak"]):
        code, out, _ = run(capsys, *argv)
        assert code == 0
        # THEN no row has a negative size
        assert not SIZE.search(out), (argv, SIZE.search(out))
    # (a diff's changes may be negative, but no row is the frees': no "(free)" and no op-less "(unknown)")
    code, out, _ = run(capsys, "diff", str(MLP), str(CNN), "--top", "100")
    assert code == 0 and "(free)" not in out and "(unknown)" not in out
    code, out, _ = run(capsys, "peak", str(CNN))
    # the 4 frees (256 + 256 + 256 + 15,872 B, the events' sizes) are one line; the table's total is
    # what the step allocated and held, 16,640 B more than the peak's delta of 179,456 B
    assert ("  live at the peak: 175 KiB (179,456 bytes): 192 KiB in 13 allocations made during the profile, "
            "less 16.2 KiB freed of 4 chunks allocated before it") in out.replace("\n    ", " ")
    total = next(line for line in out.splitlines() if line.startswith("  total "))
    assert total.split()[1:3] == ["192", "KiB"] and 179_456 + 16_640 == 196_096
    code, out, _ = run(capsys, "ops", str(CNN))
    assert "'at peak' leaves out 16.2 KiB of chunks from before the step freed before the peak" in out
    # JSON keeps the frees, so that the live set still adds up to the peak's delta
    code, out, _ = run(capsys, "peak", str(CNN), "--json")
    (entry,) = json.loads(out)["allocators"]
    assert sum(a["bytes"] for a in entry["live_at_peak"]) == entry["peak_delta_bytes"] == 179_456
    assert sorted(a["bytes"] for a in entry["live_at_peak"] if a["kind"] == "freed-from-before-step") == [-15_872, -256, -256, -256]


# -- tensor bytes beside chunk bytes -----------------------------------------------------------

ITEMSIZE = {"float32": 4, "int64": 8, "uint8": 1, "int32": 4, "float16": 2, "bool": 1, "float64": 8}


def test_requested_bytes_are_the_tensors_and_diff_splits_growth_into_tensors_and_rounding(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN each live tensor's dtype and shape, which say its bytes independently of the allocator
    sides = {}
    for name, path in (("base", MLP), ("new", CNN)):
        code, out, _ = run(capsys, "peak", str(path), "--json")
        (entry,) = json.loads(out)["allocators"]
        held = [a for a in entry["live_at_peak"] if a["kind"] != "freed-from-before-step"]
        for a in held:
            if a["dtype"] in ITEMSIZE and a["shape"] is not None:
                size = ITEMSIZE[a["dtype"]]
                for d in a["shape"]:
                    size *= d
                assert a["requested_bytes"] == size, a
        sides[name] = (sum(a["bytes"] for a in held), sum(a["requested_bytes"] for a in held))
    # the CNN's conv2d output, float32 [8,14,14,8] = 50,176 B, sits in an unsplit 91,136 B chunk
    code, out, _ = run(capsys, "peak", str(CNN))
    relu = next(line for line in out.splitlines() if "conv2d_1/Relu" in line).split()
    assert relu[3:7] == ["89", "KiB", "49", "KiB"] and 91_136 / 1024 == 89 and 50_176 / 1024 == 49
    # WHEN the two are diffed THEN the JSON carries both sides' chunks and tensors
    code, out, _ = run(capsys, "diff", str(MLP), str(CNN), "--json")
    (change,) = json.loads(out)["allocators"]
    assert (change["base_live_allocated_bytes"], change["base_live_requested_bytes"]) == sides["base"] == (30_976, 25_496)
    assert (change["new_live_allocated_bytes"], change["new_live_requested_bytes"]) == sides["new"] == (196_096, 144_348)
    # and the text says what grew in tensors and what in rounding: 118,852 B of tensors (116 KiB)
    # and (196,096 - 144,348) - (30,976 - 25,496) = 46,268 B of chunk beyond them (45.2 KiB)
    code, out, _ = run(capsys, "diff", str(MLP), str(CNN))
    assert code == 0
    assert ("bfc_cpu_allocator_for_gpu at the peak: chunks +161 KiB = tensors +116 KiB (24.9 KiB -> 141 KiB) + "
            "rounding and unsplit chunks 45.2 KiB") in out.replace("\n    ", " ")


def test_check_says_which_step_and_the_tensors_in_each_contributors_chunks(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "check", str(CNN), "--step", "2", "--max-peak", "CPU:0=290KiB")
    assert code == 1
    assert out.splitlines()[0] == f"memtrace check {CNN} (step 2)"
    # the pooling gradient's float32 [8,14,14,8] tensor (50,176 B = 49 KiB) in a 55.5 KiB chunk
    assert ("    gradient_tape/sequential_1_1/max_pooling2d_1/MaxPool2d/MaxPoolGrad output: 55.5 KiB (18.9%), "
            "tensors 49 KiB in the chunks") in out.replace("\n      ", " ")
    code, out, _ = run(capsys, "check", str(CNN), "--step", "2", "--max-peak", "CPU:0=290KiB", "--json")
    document = json.loads(out)
    assert document["step"] == 2
    assert document["budgets"][0]["contributors"][0]["requested_bytes"] == 8 * 14 * 14 * 8 * 4


# -- layers and phases -------------------------------------------------------------------------

# The models scripts/record_traces.py builds, with the names Keras gave them (printed by
# keras_models() in TensorFlow 2.21: model.name, [layer.name], optimizer.name).
KERAS_NAMES = {
    MLP: ("sequential", ["dense", "dense_1"], "adam"),
    CNN: ("sequential_1", ["conv2d", "max_pooling2d", "flatten", "dense_2"], "adam_1"),
    LSTM: ("sequential_2", ["lstm", "dense_3"], "adam_2"),
}
# The bytes of each model's x and y batch, as scripts/record_traces.py makes them (float32 x, int64 y):
# mlp (32, 20) and 32 labels, cnn (8, 16, 16, 3) and 8, lstm (8, 10, 8) and 8.
INPUT_BYTES = {MLP: {32 * 20 * 4, 32 * 8}, CNN: {8 * 16 * 16 * 3 * 4, 8 * 8}, LSTM: {8 * 10 * 8 * 4, 8 * 8}}


def by_hand(node: str, model: str, layers: list[str], optimizer: str, requested: int | None = None,
            inputs: set[int] | frozenset[int] = frozenset()) -> tuple[str, str]:
    """The test's own reading of a node name: the phase by its first scope, the layer by the
    scope under the model's, which Keras spells with one more `_N` than the user's name; a copy no op
    made of exactly the bytes of the batch's x or y is the input data."""
    parts = node.split("/")
    if node in ("(free)",):
        return "(freed before the step)", "other"
    if node == "(no op)" and requested in inputs:
        return "(input data)", "other"
    if parts[0] == optimizer:
        return optimizer, "optimizer"
    phase = "forward"
    if parts[0] == "gradient_tape":
        phase, parts = "backward", parts[1:]
    if len(parts) >= 3 and re.fullmatch(re.escape(model) + r"_[0-9]+", parts[0]):
        (layer,) = [name for name in layers if re.fullmatch(re.escape(name) + r"_[0-9]+", parts[1])]
        return layer, phase
    return (parts[0] if len(parts) > 1 else "(no layer)"), "other"


@pytest.mark.parametrize("path", [MLP, CNN, LSTM], ids=lambda p: p.name.split(".")[0])
def test_peak_groups_by_layer_and_phase_as_worked_by_hand(capsys: pytest.CaptureFixture[str], path: Path) -> None:
    model, layers, optimizer = KERAS_NAMES[path]
    code, out, _ = run(capsys, "peak", str(path), "--json")
    (entry,) = json.loads(out)["allocators"]
    expected: dict[tuple[str, str], list[int]] = {}
    for a in entry["live_at_peak"]:
        key = by_hand(a["node"], model, layers, optimizer, a["requested_bytes"], INPUT_BYTES[path])
        sums = expected.setdefault(key, [0, 0, 0])
        sums[0] += 1
        sums[1] += a["bytes"]
        sums[2] += a["bytes"] if a["requested_bytes"] is None or a["bytes"] < 0 else a["requested_bytes"]
    code, out, _ = run(capsys, "peak", str(path), "--json", "--group-by", "layer")
    assert code == 0
    (grouped,) = json.loads(out)["allocators"]
    groups = {(g["layer"], g["phase"]): [g["count"], g["bytes"], g["requested_bytes"]] for g in grouped["groups"]}
    assert groups == expected
    assert sum(g["bytes"] for g in grouped["groups"]) == grouped["peak_delta_bytes"]
    assert ("(input data)", "other") in groups  # train_on_batch copies its numpy batch into the allocator
    assert {g["phase"] for g in grouped["groups"]} <= {"forward", "backward", "optimizer", "other"}


def test_layer_groups_of_the_cnn_in_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "peak", str(CNN), "--group-by", "layer")
    assert code == 0
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["layer", "phase"]) + 2
    rows = [line.split() for line in lines[start:start + 2]]
    # conv2d's ReLU output (float32 [8,14,14,8], 50,176 B in a 91,136 B chunk) is the forward pass's
    # largest holding; the pooling gradient (50,176 B, a chunk of its size) the backward pass's
    assert rows[0] == ["conv2d", "forward", "x1", "89", "KiB", "49", "KiB", "91,136", "46.5%"]
    assert rows[1] == ["max_pooling2d", "backward", "x1", "49", "KiB", "49", "KiB", "50,176", "25.6%"]
    code, out, _ = run(capsys, "ops", str(CNN), "--group-by", "layer", "--json")
    names = [r["name"] for r in json.loads(out)["rows"]]
    assert names[:3] == ["conv2d (forward)", "adam_1 (optimizer)", "max_pooling2d (backward)"]
    # the older spelling is the same question
    assert run(capsys, "ops", str(CNN), "--by", "layer", "--json")[1] == out


def test_a_layer_names_file_beside_the_profile_is_read(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # GIVEN the MLP's profile with the recorder's layers.json beside it, naming its second Dense
    # layer "dense_1" (the scope "dense_1_2") and its first "dense" (the scope "dense_1")
    profile = tmp_path / "run" / "keras_mlp.xplane.pb.gz"
    profile.parent.mkdir()
    profile.write_bytes(MLP.read_bytes())
    (profile.parent / "layers.json").write_text(json.dumps({"model": "sequential", "layers": ["dense", "dense_1"],
                                                            "optimizer": "adam"}))
    code, out, _ = run(capsys, "peak", str(profile), "--json", "--group-by", "layer")
    assert code == 0
    groups = {(g["layer"], g["phase"]): g["bytes"] for g in json.loads(out)["allocators"][0]["groups"]}
    assert groups[("dense", "forward")] == 9_472 and groups[("dense_1", "backward")] == 8_192
    # a file that names the layers otherwise is believed: with only "dense_1" known, the scope
    # "dense_1" is that layer (not "dense" with a suffix), and so is "dense_1_2" (9,472 + 2,304 B forward)
    (profile.parent / "layers.json").write_text(json.dumps({"layers": ["dense_1"]}))
    code, out, _ = run(capsys, "peak", str(profile), "--json", "--group-by", "layer")
    groups = {(g["layer"], g["phase"]): g["bytes"] for g in json.loads(out)["allocators"][0]["groups"]}
    assert groups[("dense_1", "forward")] == 9_472 + 2_304 and groups[("dense_1", "backward")] == 8_192
    assert not any(layer == "dense" for layer, _ in groups)
    # and a broken one is one line naming it, exit 2
    (profile.parent / "layers.json").write_text("{not json")
    code = main(["peak", str(profile), "--group-by", "layer"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "layers.json: not a layer-names file" in err


@pytest.mark.parametrize("name", ["layers.json", "keras_mlp.layers.json"])
def test_the_layer_names_file_is_an_input_never_replaced(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                         name: str) -> None:
    # GIVEN a profile with its layer-names file, as layers.json in its directory or NAME.layers.json beside it
    profile = tmp_path / "run" / "keras_mlp.xplane.pb.gz"
    profile.parent.mkdir()
    profile.write_bytes(MLP.read_bytes())
    names = profile.parent / name
    names.write_text(json.dumps({"model": "sequential", "layers": ["dense", "dense_1"]}))
    before = names.read_bytes()
    # WHEN an output is asked to go where it is, naming the profile or its directory
    for argv in (["peak", str(profile), "--group-by", "layer", "-o", str(names)],
                 ["report", str(profile), "--group-by", "layer", "-o", str(names)],
                 ["report", str(profile.parent), "-o", str(names)], ["peak", str(profile), "--json", "-o", str(names)]):
        code, out, err = run(capsys, *argv)
        # THEN it is refused as the profile would be, and the layer names are still there
        assert (code, out) == (2, "") and err.count("\n") == 1 and "is the input" in err, argv
        assert names.read_bytes() == before


@pytest.mark.parametrize(("content", "says"), [
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"layers": [' + "[" * 50_000 + "]" * 50_000 + "]}", "nested too deeply"),
    ("1" * 5000, "not a layer-names file"),  # an integer of more digits than int() takes
    ('{"layers": ' + "9" * 5000 + "}", "not a layer-names file"),
    ('{"layers": [1, 2]}', "layers must be a list of names"),
    ('{"model": {"a": 1}}', "model and optimizer must be strings"),
    ("\xff\xfe", "not a layer-names file"),
])
def test_a_malformed_layer_names_file_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str,
                                                  says: str) -> None:
    profile = tmp_path / "keras_mlp.xplane.pb.gz"
    profile.write_bytes(MLP.read_bytes())
    (tmp_path / "layers.json").write_bytes(content.encode("latin-1"))
    code, out, err = run(capsys, "peak", str(profile), "--group-by", "layer")
    assert (code, out) == (2, "") and err.count("\n") == 1 and says in err and "layers.json" in err


def test_diff_by_layer_compares_the_layer_rows_of_both(capsys: pytest.CaptureFixture[str]) -> None:
    rows = {}
    for path in (MLP, CNN):
        _, out, _ = run(capsys, "ops", str(path), "--group-by", "layer", "--json")
        rows[path] = {r["name"]: r for r in json.loads(out)["rows"]}
    code, out, _ = run(capsys, "diff", str(MLP), str(CNN), "--group-by", "layer", "--json")
    assert code == 0
    document = json.loads(out)
    assert document["grouped_by"] == "layer"
    for change in document["ops"]:
        before, after = rows[MLP].get(change["name"]), rows[CNN].get(change["name"])
        assert change["base_peak_bytes"] == (before["peak_bytes"] if before else 0)
        assert change["new_at_peak_bytes"] == (after["at_peak_bytes"] if after else 0)
    # every layer that differs in peak, residual or at-peak bytes, and only those
    columns = ("peak_bytes", "residual_bytes", "at_peak_bytes")
    differs = {n for n in {*rows[MLP], *rows[CNN]}
               if any((rows[MLP].get(n) or {}).get(k, 0) != (rows[CNN].get(n) or {}).get(k, 0) for k in columns)}
    assert {c["name"] for c in document["ops"]} == differs


def test_report_icicle_by_phase_and_layer(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    _, out, _ = run(capsys, "peak", str(CNN), "--json", "--group-by", "layer")
    groups = json.loads(out)["allocators"][0]["groups"]
    by_phase: dict[str, int] = {}
    for g in groups:
        if g["bytes"] > 0:
            by_phase[g["phase"]] = by_phase.get(g["phase"], 0) + g["bytes"]
    assert by_phase["forward"] == 91_136 + 21_248  # conv2d's ReLU, the two pooling outputs
    page = tmp_path / "report.html"
    assert main(["report", str(CNN), "--group-by", "layer", "-o", str(page)]) == 0
    text = page.read_text()
    assert 'aria-label="live set at the peak by phase and layer"' in text
    for phase, size in by_phase.items():
        assert f'title="{phase}' in text and f"({size:,} bytes," in text
    # the default stays the name scopes
    assert main(["report", str(CNN), "-o", str(page)]) == 0
    assert 'aria-label="live set at the peak by name scope"' in page.read_text()


# -- reading it --------------------------------------------------------------------------------


def test_long_names_lose_the_wrappers_then_their_left_keeping_layer_and_op() -> None:
    from memtrace.reporters.tables import shorten_name

    name = "StatefulPartitionedCall/gradient_tape/small_cnn_1/hidden_1/MatMul/MatMul_1"
    assert shorten_name(name, 80) == name
    assert shorten_name(name, 60) == "gradient_tape/small_cnn_1/hidden_1/MatMul/MatMul_1"
    assert shorten_name(name, 45) == "gradient_tape/…/hidden_1/MatMul/MatMul_1"
    assert shorten_name(name, 30) == "…/hidden_1/MatMul/MatMul_1"
    assert shorten_name("StatefulPartitionedCall_3/sequential_1/pool_1/MaxPool2d/MaxPoolGrad", 41) == (
        "sequential_1/pool_1/MaxPool2d/MaxPoolGrad")
    assert shorten_name("CPU:0 (bfc_cpu_allocator_for_gpu)", 20) == "CPU:…ocator_for_gpu)"  # not a node name


def test_peak_table_keeps_the_layer_of_a_gradient_at_100_columns(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "peak", str(CNN))  # not a terminal: 100 columns
    assert code == 0 and max(len(line) for line in out.splitlines()) <= 100
    assert "  …/max_pooling2d_1/MaxPool2d/MaxPoolGrad " in out


def test_a_profile_of_three_steps_reads_as_a_profile_with_steps_from_zero(capsys: pytest.CaptureFixture[str],
                                                                         tmp_path: Path) -> None:
    trace = memtrace.load(CNN)
    steps = trace.steps  # the profile's own step markers
    assert [s.number for s in steps] == [0, 1, 2]
    first = steps[0].start_ns
    code, out, _ = run(capsys, "summary", str(CNN))
    lines = out.splitlines()
    assert lines[1].startswith("profile of 3 steps: ")
    table = lines[lines.index("Steps: peak per allocator, absolute") + 3:][:3]
    # each step from the first step's start, in the units of everything else (counters: steps.json)
    counters = json.loads((PROFILES / "keras_cnn.steps.json").read_text())["steps"]
    from memtrace.units import format_bytes, format_us

    for row, step, counted in zip(table, steps, counters):
        start = format_us((step.start_ns - first) // 1000 * 1000)
        assert row.split()[:3] == [str(step.number), *start.split()]
        assert row.endswith(format_bytes(counted["peak_bytes"]))
    assert table[0].split()[1:3] == ["0", "us"]
    code, out, _ = run(capsys, "peak", str(CNN))
    assert "into the profile (from records)" in out.splitlines()[0]
    # one step alone: its duration is the step's window, as the table says
    code, out, _ = run(capsys, "summary", str(CNN), "--step", "1")
    window = format_us(steps[1].end_ns - steps[1].start_ns)
    assert out.splitlines()[1].startswith(f"step: {window} ")
    row = out.splitlines()[out.splitlines().index("Steps (this trace is step 1 alone): peak per allocator, absolute") + 3]
    assert row.split()[3:5] == window.split()
    code, out, _ = run(capsys, "peak", str(CNN), "--step", "1")
    assert code == 0 and "into the step (from records)" in out.splitlines()[0]
    # the report marks where each step begins, and says "into the profile"
    page = tmp_path / "report.html"
    assert main(["report", str(CNN), "-o", str(page)]) == 0
    text = page.read_text()
    marks = re.findall(r'<g class="step-mark" data-t="(-?[0-9]+)"', text)
    assert [int(t) for t in marks] == [(s.start_ns - first) // 1000 for s in steps]
    assert "time into the profile" in text and ">step 2</text>" in text


def test_a_trace_prints_in_one_line_and_tensorflows_cpu_bfc_name_is_explained(capsys: pytest.CaptureFixture[str]) -> None:
    trace = memtrace.load(CNN)
    assert repr(trace) == str(trace) == (
        f"<Trace {str(CNN)!r}: XSpace (xplane+gzip), 272 nodes, 272 records, 136 outputs, "
        "allocators bfc_cpu_allocator_for_gpu, 3 steps>")
    for command in ("summary", "peak"):
        code, out, _ = run(capsys, command, str(CNN))
        assert code == 0
        assert "TensorFlow's name for its CPU BFC allocator (TF_CPU_ALLOCATOR_USE_BFC=true): CPU memory, no GPU" in (
            out.replace("\n    ", " ").replace("\n  ", " "))


def test_scopes_and_layers_of_fit_names_see_through_statefulpartitionedcall() -> None:
    # GIVEN names as Model.fit writes them (the issue's: one row "StatefulPartitionedCall x18" before)
    from dataclasses import replace

    from memtrace.analyses.peak import group_live_set

    trace = memtrace.load(CNN)
    found = trace.peak(CPU_BFC)
    template = found.live_at_peak[0]
    names = {"StatefulPartitionedCall/small_cnn_1/conv_b_1/Relu": 3 << 20,
             "StatefulPartitionedCall/gradient_tape/small_cnn_1/hidden_1/MatMul/MatMul_1": 2 << 20,
             "StatefulPartitionedCall/adam/Sqrt_9": 1 << 20}
    live = [replace(template, node=n, bytes=b, requested_bytes=b) for n, b in names.items()]
    whole = replace(found, live_at_peak=tuple(live), peak_delta_bytes=sum(names.values()))
    assert [(g.key, g.bytes) for g in group_live_set(trace, whole, "scope", 1)] == [
        ("small_cnn_1", 3 << 20), ("gradient_tape", 2 << 20), ("adam", 1 << 20)]
    assert [(g.layer, g.phase) for g in group_live_set(trace, whole, "layer")] == [
        ("conv_b", "forward"), ("hidden", "backward"), ("adam", "optimizer")]


# -- --group-by scope without a depth lands on layers (issue 27, item 6) --------------------------------


def test_scope_of_hand_worked() -> None:
    from memtrace.trace.layers import scope_of, shows_keras

    fit_names = ["StatefulPartitionedCall/small_cnn_1/conv_b_1/Relu",
                 "StatefulPartitionedCall/gradient_tape/small_cnn_1/hidden_1/MatMul/MatMul_1",
                 "StatefulPartitionedCall/adam/Sqrt_9", "StatefulPartitionedCall/compile_loss/mean/Sum", "Add_1"]
    assert shows_keras(fit_names) and shows_keras(["gradient_tape/model/dense/MatMul"])
    # the model's scope and the layer's; under gradient_tape/ the same; the optimizer's and the loss's first level;
    # a name without a scope is its own
    assert [scope_of(n, None, layers=True) for n in fit_names] == [
        "small_cnn_1/conv_b_1", "gradient_tape/small_cnn_1/hidden_1", "adam", "compile_loss", "Add_1"]
    # a depth given is kept as it is, and so is 1 where the names show no Keras model (a TF1 graph's)
    assert scope_of(fit_names[1], 3, layers=True) == "gradient_tape/small_cnn_1/hidden_1"
    assert scope_of(fit_names[0], None, layers=False) == "small_cnn_1"
    tf1 = ["conv1/weights/read", "gradients/conv1/Conv2D_grad/Conv2DBackpropFilter", "tower_0/conv1/Conv2D"]
    assert not shows_keras(tf1)


@pytest.mark.parametrize("path", [MLP, CNN, LSTM], ids=lambda p: p.name.split(".")[0])
def test_peak_by_scope_lands_on_the_layers_the_layer_grouping_finds(capsys: pytest.CaptureFixture[str],
                                                                     path: Path) -> None:
    model, _, optimizer = KERAS_NAMES[path]
    code, out, _ = run(capsys, "peak", str(path), "--json", "--group-by", "scope")
    assert code == 0
    (entry,) = json.loads(out)["allocators"]
    scopes = {g["key"]: g["bytes"] for g in entry["groups"]}
    assert sum(scopes.values()) == entry["peak_delta_bytes"]
    code, out, _ = run(capsys, "peak", str(path), "--json", "--group-by", "layer")
    (grouped,) = json.loads(out)["allocators"]
    by_layer = {(g["layer"], g["phase"]): g["bytes"] for g in grouped["groups"]}
    # THEN every forward and backward layer group is one scope group, the model's scope and the layer's
    # (Keras spells both with one more _N than the user), under gradient_tape/ for the backward pass
    for (layer, phase), size in by_layer.items():
        if phase in ("forward", "backward"):
            prefix = "gradient_tape/" if phase == "backward" else ""
            [key] = [k for k in scopes if re.fullmatch(re.escape(prefix + model) + r"_\d+/" + re.escape(layer) + r"_\d+", k)]
            assert scopes[key] == size
        elif phase == "optimizer":
            assert scopes[optimizer] == size
    assert any(phase == "backward" for _, phase in by_layer)  # the gradients are split by layer, not one bucket


def test_scope_default_of_the_cnn_in_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "peak", str(CNN), "--group-by", "scope")
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["scope", "count"]) + 2
    # conv2d's ReLU output chunk (91,136 B) and the pooling gradient's (50,176 B), as by layer above
    assert lines[start].split() == ["sequential_1_1/conv2d_1", "x1", "89", "KiB", "49", "KiB", "91,136", "46.5%"]
    assert lines[start + 1].split() == ["gradient_tape/sequential_1_1/max_pooling2d_1", "x1", "49", "KiB", "49", "KiB",
                                        "50,176", "25.6%"]
    # ops and diff group alike
    code, out, _ = run(capsys, "ops", str(CNN), "--group-by", "scope", "--json")
    names = {r["name"] for r in json.loads(out)["rows"]}
    assert {"sequential_1_1/conv2d_1", "gradient_tape/sequential_1_1/conv2d_1", "adam_1"} <= names
    assert run(capsys, "ops", str(CNN), "--by", "scope", "--json")[1] == out
    batches = FIXTURES / "batches"  # the same CNN at batch 16 and 64: every layer's bytes grow
    code, out, _ = run(capsys, "diff", str(batches / "cnn_b16.xplane.pb.gz"), str(batches / "cnn_b64.xplane.pb.gz"),
                    "--group-by", "scope", "--json")
    assert code == 0
    changed = {o["name"] for o in json.loads(out)["ops"]}
    assert any(re.fullmatch(r"sequential(_\d+)?/conv2d(_\d+)?", n) for n in changed)
    assert any(re.fullmatch(r"gradient_tape/sequential(_\d+)?/\w+", n) for n in changed)


@pytest.mark.parametrize("name", ["alexnet_train_gpu.pb", "ptb_lstm_train_gpu.pbtxt"])
def test_scope_default_of_a_tf1_graph_stays_one_level(capsys: pytest.CaptureFixture[str], name: str) -> None:
    path = str(FIXTURES / name)
    for command in (["peak", "--top", "50"], ["ops"]):
        default = run(capsys, command[0], path, "--group-by", "scope", *command[1:])
        assert default == run(capsys, command[0], path, "--group-by", "scope:1", *command[1:])


# -- check on a profile of several steps: the baseline is what was live before the profile -------------


def test_check_says_before_the_profile_where_the_trace_is_a_profile_of_steps(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "check", str(CNN), "--max-peak", "CPU:0=100KiB", "--max-peak-delta", "CPU:0=100KiB")
    text = " ".join(out.split())
    assert code == 1 and "before the step" not in text and "during the step" not in text
    assert "absolute: baseline 120 KiB live before the profile (272 of 272 snapshots agree)" in text
    assert "live before the profile (baseline): 120 KiB (40.6%)" in text
    assert "bytes allocated during the profile, baseline left out" in text
    assert "shares of the bytes allocated during the profile" in text
    code, out, _ = run(capsys, "check", str(CNN), "--step", "2", "--max-peak", "CPU:0=100KiB", "--json")
    assert "live before the step" in json.loads(out)["budgets"][0]["note"]


# -- what a new Keras user stumbled on (issue 35, item 3 and 10) ------------------------------------------------

FIT = FIXTURES / "fit"


def test_constant_folded_nodes_belong_to_their_layer_and_phase() -> None:
    # GIVEN the names Grappler's constant folding gave nodes of the backward pass (fixtures/fit/cnn's and transformer's)
    from memtrace.trace.layers import LayerPhase, layer_of, op_in_layer, scope_of

    folded = "ConstantFolding/StatefulPartitionedCall/gradient_tape/smallcnn_1/bn1_1/moments/truediv_1_recip"
    assert layer_of(folded) == LayerPhase("bn1", "backward")  # not a layer "gradient_tape" in phase forward
    assert layer_of("ConstantFolding/gradient_tape/sequential_1/conv_b_1/convolution/ShapeN-matshapes-0") == LayerPhase(
        "conv_b", "backward")
    assert scope_of("ConstantFolding/gradient_tape/sequential_1/conv_a_1/convolution/ShapeN-matshapes-1", None,
                    layers=True) == "gradient_tape/sequential_1/conv_a_1"
    # AND an op is named within its layer, the shared prefix left out
    assert op_in_layer(folded) == "moments/truediv_1_recip"
    assert op_in_layer("StatefulPartitionedCall/gradient_tape/smallcnn_1/bn1_1/moments/sub") == "moments/sub"
    assert op_in_layer("StatefulPartitionedCall/adam/Sqrt_9") == "Sqrt_9"
    assert op_in_layer("(no op)") == "(no op)"


def test_no_constant_folded_node_of_the_fixtures_is_a_layer_called_gradient_tape(capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("cnn", "transformer"):
        code, out, _ = run(capsys, "peak", str(FIT / f"{name}.xplane.pb.gz"), "--json", "--group-by", "layer")
        assert code == 0
        assert all(g["layer"] != "gradient_tape" for g in json.loads(out)["allocators"][0]["groups"])


def test_the_copies_of_the_input_batch_are_input_data_where_the_sizes_say_so(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the CNN of fixtures/fit/cnn.json: train_on_batch of x float32 (32, 32, 32, 3) and y int64 (32,),
    # three steps; its layers' outputs are 32 long
    from memtrace.trace.layers import batch_size

    trace = memtrace.load(FIT / "cnn.xplane.pb.gz")
    assert batch_size(trace) == 32
    assert batch_size(memtrace.load(FIXTURES / "alexnet_train_gpu.pbtxt")) is None  # no Keras model: no input data
    _, out, _ = run(capsys, "peak", str(FIT / "cnn.xplane.pb.gz"), "--json", "--group-by", "layer")
    (entry,) = json.loads(out)["allocators"]
    [data] = [g for g in entry["groups"] if g["layer"] == "(input data)"]
    # THEN the (no op) chunks of exactly x's and y's bytes live at the peak are the input data, nothing else
    copies = [a for a in entry["live_at_peak"] if a["node"] == "(no op)" and a["requested_bytes"] in (32 * 32 * 32 * 3 * 4, 32 * 8)]
    assert data["count"] == len(copies) == 2 and data["requested_bytes"] == 32 * 32 * 32 * 3 * 4 + 32 * 8
    [rest] = [g for g in entry["groups"] if g["layer"] == "(no layer)"]
    assert rest["count"] == sum(1 for a in entry["live_at_peak"] if a["node"] == "(no op)") - 2 + sum(
        1 for a in entry["live_at_peak"] if "/" not in a["node"] and a["node"] not in ("(no op)", "(free)"))
