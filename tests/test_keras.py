"""A Keras user's step (issue 27): tensor bytes beside chunk bytes, no negative rows, layers and phases.

Checked on the real TF 2 profiles of Keras models in ``fixtures/profiles`` against what the
profile itself says (its events, the reader's own oddities), independently of the analyses.
"""

from __future__ import annotations

import json
import re

import pytest

import memtrace
from memtrace.cli import main

from .conftest import FIXTURES

PROFILES = FIXTURES / "profiles"
CNN = PROFILES / "keras_cnn.xplane.pb.gz"
MLP = PROFILES / "keras_mlp.xplane.pb.gz"
LSTM = PROFILES / "keras_lstm.xplane.pb.gz"
CPU_BFC = "bfc_cpu_allocator_for_gpu"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


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
        code, out = run(capsys, *argv)
        assert code == 0
        # THEN no row has a negative size
        assert not SIZE.search(out), (argv, SIZE.search(out))
    # (a diff's changes may be negative, but no row is the frees': no "(free)" and no op-less "(unknown)")
    code, out = run(capsys, "diff", str(MLP), str(CNN), "--top", "100")
    assert code == 0 and "(free)" not in out and "(unknown)" not in out
    code, out = run(capsys, "peak", str(CNN))
    # the 4 frees (256 + 256 + 256 + 15,872 B, the events' sizes) are one line; the table's total is
    # what the step allocated and held, 16,640 B more than the peak's delta of 179,456 B
    assert ("  live at the peak: 175 KiB (179,456 bytes): 192 KiB in 13 allocations made during the step, "
            "less 16.2 KiB freed of 4 chunks allocated before it") in out.replace("\n    ", " ")
    total = next(line for line in out.splitlines() if line.startswith("  total "))
    assert total.split()[1:3] == ["192", "KiB"] and 179_456 + 16_640 == 196_096
    code, out = run(capsys, "ops", str(CNN))
    assert "'at peak' leaves out 16.2 KiB freed before the peak of chunks allocated before the step" in out
    # JSON keeps the frees, so that the live set still adds up to the peak's delta
    code, out = run(capsys, "peak", str(CNN), "--json")
    (entry,) = json.loads(out)["allocators"]
    assert sum(a["bytes"] for a in entry["live_at_peak"]) == entry["peak_delta_bytes"] == 179_456
    assert sorted(a["bytes"] for a in entry["live_at_peak"] if a["kind"] == "freed-from-before-step") == [-15_872, -256, -256, -256]


# -- tensor bytes beside chunk bytes -----------------------------------------------------------

ITEMSIZE = {"float32": 4, "int64": 8, "uint8": 1, "int32": 4, "float16": 2, "bool": 1, "float64": 8}


def test_requested_bytes_are_the_tensors_and_diff_splits_growth_into_tensors_and_rounding(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN each live tensor's dtype and shape, which say its bytes independently of the allocator
    sides = {}
    for name, path in (("base", MLP), ("new", CNN)):
        code, out = run(capsys, "peak", str(path), "--json")
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
    code, out = run(capsys, "peak", str(CNN))
    relu = next(line for line in out.splitlines() if "conv2d_1/Relu" in line).split()
    assert relu[3:7] == ["89", "KiB", "49", "KiB"] and 91_136 / 1024 == 89 and 50_176 / 1024 == 49
    # WHEN the two are diffed THEN the JSON carries both sides' chunks and tensors
    code, out = run(capsys, "diff", str(MLP), str(CNN), "--json")
    (change,) = json.loads(out)["allocators"]
    assert (change["base_live_allocated_bytes"], change["base_live_requested_bytes"]) == sides["base"] == (30_976, 25_496)
    assert (change["new_live_allocated_bytes"], change["new_live_requested_bytes"]) == sides["new"] == (196_096, 144_348)
    # and the text says what grew in tensors and what in rounding: 118,852 B of tensors (116 KiB)
    # and (196,096 - 144,348) - (30,976 - 25,496) = 46,268 B of chunk beyond them (45.2 KiB)
    code, out = run(capsys, "diff", str(MLP), str(CNN))
    assert code == 0
    assert ("bfc_cpu_allocator_for_gpu at the peak: chunks +161 KiB = tensors +116 KiB (24.9 KiB -> 141 KiB) + "
            "rounding and unsplit chunks 45.2 KiB") in out.replace("\n    ", " ")


def test_check_says_which_step_and_the_tensors_in_each_contributors_chunks(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, "check", str(CNN), "--step", "2", "--max-peak", "CPU:0=290KiB")
    assert code == 1
    assert out.splitlines()[0] == f"memtrace check {CNN} (step 2)"
    # the pooling gradient's float32 [8,14,14,8] tensor (50,176 B = 49 KiB) in a 55.5 KiB chunk
    assert ("    gradient_tape/sequential_1_1/max_pooling2d_1/MaxPool2d/MaxPoolGrad output: 55.5 KiB (18.9%), "
            "tensors 49 KiB in the chunks") in out.replace("\n      ", " ")
    code, out = run(capsys, "check", str(CNN), "--step", "2", "--max-peak", "CPU:0=290KiB", "--json")
    document = json.loads(out)
    assert document["step"] == 2
    assert document["budgets"][0]["contributors"][0]["requested_bytes"] == 8 * 14 * 14 * 8 * 4
