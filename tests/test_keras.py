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
