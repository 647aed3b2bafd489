"""Memory budgets: how they are written, how they are measured, and `memtrace check`'s exit codes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import memtrace
from memtrace.analyses.check import (
    Budget,
    check,
    load_budget_file,
    parse_assignment,
    parse_limit,
    peak_contributors,
)
from memtrace.cli import main
from memtrace.errors import UsageError

from .conftest import ALEXNET, FIXTURES, PTB
from .helpers import run

# From docs/peak.md, where 97 of 97 snapshots confirm them: GPU_0_bfc of the AlexNet step.
ALEXNET_PEAK = 1_325_898_496
ALEXNET_PEAK_DELTA = 1_238_944_256


@pytest.fixture(scope="module")
def alexnet() -> memtrace.Trace:
    return memtrace.load(ALEXNET)


# -- writing limits -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("metric", "value", "limit", "unit"),
    [
        ("max_peak", "1234", 1234, "bytes"),
        ("max_peak", "300MB", 300_000_000, "bytes"),
        ("max_peak", "1.5GiB", 1_610_612_736, "bytes"),
        ("max_peak", "64KiB", 65_536, "bytes"),
        ("max_peak", 4096, 4096, "bytes"),
        ("max_peak_delta", "1.3GiB", round(1.3 * 2**30), "bytes"),
        ("max_waste", "5%", 0.05, "fraction"),
        ("max_waste", "0.5 %", 0.005, "fraction"),
        ("max_waste", "64KiB", 65_536, "bytes"),
    ],
)
def test_limits_read_as_people_write_them(metric: str, value: object, limit: float, unit: str) -> None:
    assert parse_limit(metric, value, "here") == (limit, unit)


@pytest.mark.parametrize(
    ("metric", "value", "says"),
    [
        ("max_peak", "lots", "not a size"),
        ("max_peak", "5%", "not a percentage"),
        ("max_peak", -1, "negative"),
        ("max_peak", 1.5, "whole number"),
        ("max_peak", True, "whole number"),
        ("max_waste", 5, "ambiguous"),
        ("max_waste", "2.5", "ambiguous"),
        ("max_waste", "5 percent", "not a size"),
        ("max_heap", "1GiB", "unknown budget"),
    ],
)
def test_malformed_limits_are_usage_errors(metric: str, value: object, says: str) -> None:
    with pytest.raises(UsageError, match=says):
        parse_limit(metric, value, "here")


def test_assignment_from_the_command_line() -> None:
    assert parse_assignment("max_peak", "GPU_0_bfc=1.3GiB", "--max-peak") == Budget(
        "GPU_0_bfc", "max_peak", round(1.3 * 2**30), "bytes", "--max-peak"
    )


@pytest.mark.parametrize("text", ["GPU_0_bfc", "=1GiB", "GPU_0_bfc=", "GPU_0_bfc=lots"])
def test_malformed_assignment_names_the_option(text: str) -> None:
    with pytest.raises(UsageError, match="--max-peak"):
        parse_assignment("max_peak", text, "--max-peak")


# -- budget files ---------------------------------------------------------------------------------


def write(tmp_path: Path, text: str | bytes, name: str = "budget.toml") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def test_budget_file_one_table_per_allocator(tmp_path: Path) -> None:
    path = write(tmp_path, '[GPU_0_bfc]\nmax_peak = "1.3GiB"\nmax_waste = "5%"\n\n["cuda_host.bfc"]\nmax_peak = 4096\n')
    assert load_budget_file(path) == [
        Budget("GPU_0_bfc", "max_peak", round(1.3 * 2**30), "bytes", str(path)),
        Budget("GPU_0_bfc", "max_waste", 0.05, "fraction", str(path)),
        Budget("cuda_host.bfc", "max_peak", 4096, "bytes", str(path)),
    ]


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ('[GPU_0_bfc\nmax_peak = "1GiB"\n', r"not valid TOML: .*line 1"),
        ('max_peak = "1GiB"\n', "is not a table"),
        ("[GPU_0_bfc]\n", "states no budget"),
        ("", "states no budget"),
        ('[GPU_0_bfc]\nmax_peek = "1GiB"\n', "unknown budget 'max_peek'"),
        ('[GPU_0_bfc]\nmax_peak = "lots"\n', r"\[GPU_0_bfc\]: not a size: 'lots'"),
        ("[GPU_0_bfc]\nmax_waste = 5\n", "ambiguous"),
        ("[GPU_0_bfc.inner]\nmax_peak = 1\n", "unknown budget 'inner'"),
        (b"\xff\xfe[GPU]", "not UTF-8|not valid TOML"),
    ],
    ids=["syntax", "top-level-value", "empty-table", "empty-file", "unknown-key", "bad-size", "bare-number-waste",
         "nested-table", "binary"],
)
def test_budget_file_errors_name_the_file(tmp_path: Path, content: str | bytes, says: str) -> None:
    path = write(tmp_path, content)
    with pytest.raises(UsageError, match=says) as caught:
        load_budget_file(path)
    assert str(caught.value).startswith(str(path))


def test_missing_budget_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such budget file"):
        load_budget_file(tmp_path / "nope.toml")
    with pytest.raises(UsageError, match="is a directory"):
        load_budget_file(tmp_path)


# -- measuring ------------------------------------------------------------------------------------


def test_peak_limit_is_inclusive(alexnet: memtrace.Trace) -> None:
    at = check(alexnet, [Budget("GPU_0_bfc", "max_peak", ALEXNET_PEAK, "bytes", "t")])
    below = check(alexnet, [Budget("GPU_0_bfc", "max_peak", ALEXNET_PEAK - 1, "bytes", "t")])
    assert at.passed and at.outcomes[0].margin == 0
    assert not below.passed and below.outcomes[0].margin == -1
    assert at.outcomes[0].note.startswith("absolute: baseline 82.9 MiB")


def test_peak_delta_leaves_the_baseline_out(alexnet: memtrace.Trace) -> None:
    result = check(alexnet, [Budget("GPU_0_bfc", "max_peak_delta", 2**30, "bytes", "t")])
    assert result.outcomes[0].measured == ALEXNET_PEAK_DELTA
    assert result.outcomes[0].margin == 2**30 - ALEXNET_PEAK_DELTA


def test_waste_is_allocated_minus_requested_over_allocated(alexnet: memtrace.Trace) -> None:
    """Worked out here from the outputs table: one entry per BFC allocation id, sizes tracked."""
    outputs = alexnet.outputs
    index = alexnet.allocator_index("GPU_0_bfc")
    sizes: dict[int, tuple[int, int]] = {}
    for row in np.flatnonzero(outputs.allocator == index).tolist():
        if outputs.allocation_id[row] and outputs.allocated_bytes[row] > 0:
            sizes.setdefault(int(outputs.allocation_id[row]), (int(outputs.requested_bytes[row]), int(outputs.allocated_bytes[row])))
    requested = sum(r for r, _ in sizes.values())
    allocated = sum(a for _, a in sizes.values())
    assert (len(sizes), allocated - requested, allocated) == (59, 143_328_768, 2_305_949_696)
    result = check(alexnet, [Budget("GPU_0_bfc", "max_waste", 0.05, "fraction", "t")])
    assert result.outcomes[0].measured == (allocated - requested) / allocated
    assert not result.passed
    in_bytes = check(alexnet, [Budget("GPU_0_bfc", "max_waste", 143_328_768, "bytes", "t")])
    assert in_bytes.passed and in_bytes.outcomes[0].measured == 143_328_768 and in_bytes.outcomes[0].margin == 0
    assert in_bytes.outcomes[0].contributors[0].name == "lrn1/LRN"


def test_waste_of_an_allocator_without_sizes_cannot_pass_silently(alexnet: memtrace.Trace) -> None:
    with pytest.raises(UsageError, match="max_waste of cpu cannot be measured"):
        check(alexnet, [Budget("cpu", "max_waste", 0.05, "fraction", "t")])


def test_unknown_allocator_lists_the_ones_the_trace_has(alexnet: memtrace.Trace) -> None:
    with pytest.raises(UsageError, match=r"no allocator 'GPU_1_bfc' in this trace \(it has: cpu, GPU_0_bfc, cuda_host_bfc\)"):
        check(alexnet, [Budget("GPU_1_bfc", "max_peak", 1, "bytes", "t")])


def test_a_budget_stated_twice_is_a_usage_error(alexnet: memtrace.Trace) -> None:
    twice = [Budget("GPU_0_bfc", "max_peak", 1, "bytes", "file.toml"), Budget("GPU_0_bfc", "max_peak", 2, "bytes", "--max-peak")]
    with pytest.raises(UsageError, match=r"stated twice \(file.toml and --max-peak\)"):
        check(alexnet, twice)


def test_top_contributors_sum_each_nodes_live_allocations(alexnet: memtrace.Trace) -> None:
    p = alexnet.peak("GPU_0_bfc")
    by_node: dict[str, int] = {}
    for a in p.live_at_peak:
        by_node[a.node] = by_node.get(a.node, 0) + a.bytes
    # The backprop-input node holds its cuDNN workspace (temp) and its output at the peak.
    assert by_node["gradients/conv4/Conv2D_grad/Conv2DBackpropInput"] == 202_899_456 + 92_143_616
    top = peak_contributors(p)
    assert [(c.name, c.kinds, c.bytes) for c in top] == [
        ("gradients/conv4/Conv2D_grad/Conv2DBackpropInput", ("temp", "output"), 295_043_072),
        ("lrn1/LRN", ("output",), 154_830_336),
        # tied with conv1/Conv2D at 102,760,448 bytes: the name breaks the tie
        ("conv1-0-0-TransposeNCHWToNHWC-LayoutOptimizer", ("output",), 102_760_448),
    ]
    assert sorted(by_node.values(), reverse=True)[:3] == [c.bytes for c in top]


# -- memtrace check -------------------------------------------------------------------------------


def test_check_passes_with_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "check", str(ALEXNET), "--max-peak", "GPU_0_bfc=1.3GiB", "--max-waste", "GPU_0_bfc=6.5%")
    assert code == 0 and err == ""
    rows = [line.split() for line in out.splitlines() if line.startswith("GPU_0_bfc")]
    assert rows[0][:2] == ["GPU_0_bfc", "max_peak"] and rows[0][-1] == "PASS" and "(1,325,898,496" in rows[0]
    assert rows[1][:2] == ["GPU_0_bfc", "max_waste"] and rows[1][-1] == "PASS" and "6.22%" in rows[1]
    assert out.rstrip().endswith("PASS: 2 of 2 budgets passed")


def test_check_fails_with_exit_1_and_explains(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "check", str(ALEXNET), "--max-peak", "GPU_0_bfc=1.2GiB", "--max-peak", "cuda_host_bfc=4KiB")
    assert code == 1
    assert "GPU_0_bfc max_peak: 1.23 GiB (1,325,898,496 B) is over the limit 1.2 GiB (1,288,490,189 B)" in out
    assert "gradients/conv4/Conv2D_grad/Conv2DBackpropInput temp/output: 281 MiB (22.3%)" in out
    assert "live before the step (baseline): 82.9 MiB" in out
    assert out.rstrip().endswith("FAIL: 1 of 2 budgets passed")


def test_check_json_lists_every_budget(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "check", str(ALEXNET), "--json", "--max-peak", f"GPU_0_bfc={ALEXNET_PEAK}",
                       "--max-peak-delta", "GPU_0_bfc=1GiB", "--max-waste", "GPU_0_bfc=5%")
    document = json.loads(out)
    assert code == 1 and document["schema"] == "memtrace.check/1" and document["passed"] is False
    assert [(b["metric"], b["limit"], b["measured"], b["margin"], b["passed"]) for b in document["budgets"]] == [
        ("max_peak", ALEXNET_PEAK, ALEXNET_PEAK, 0, True),
        ("max_peak_delta", 2**30, ALEXNET_PEAK_DELTA, 2**30 - ALEXNET_PEAK_DELTA, False),
        ("max_waste", 0.05, 143_328_768 / 2_305_949_696, 0.05 - 143_328_768 / 2_305_949_696, False),
    ]
    assert set(document["budgets"][0]) == {
        "allocator", "metric", "unit", "limit", "measured", "margin", "passed", "source", "note", "contributors",
    }
    # a float32 [128,56,56,64] tensor (128 * 56 * 56 * 64 * 4 = 102,760,448 B) in an unsplit chunk
    assert document["budgets"][0]["contributors"][1] == {"name": "lrn1/LRN", "kinds": ["output"], "bytes": 154_830_336,
                                                         "requested_bytes": 128 * 56 * 56 * 64 * 4}


@pytest.mark.parametrize(
    ("text", "limit"), [("1234", 1234), ("300MB", 300_000_000), ("1.5GiB", 1_610_612_736), ("64KiB", 65_536)]
)
def test_check_every_size_form(capsys: pytest.CaptureFixture[str], text: str, limit: int) -> None:
    code, out, _ = run(capsys, "check", str(ALEXNET), "--json", "--max-peak", f"GPU_0_bfc={text}")
    assert code == (0 if limit >= ALEXNET_PEAK else 1)
    assert json.loads(out)["budgets"][0]["limit"] == limit


def test_check_budget_file_and_options_together(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, '[GPU_0_bfc]\nmax_peak = "1.3GiB"\n[cuda_host_bfc]\nmax_waste = "95%"\n')
    code, out, _ = run(capsys, "check", str(ALEXNET), "--budget", str(path), "--max-peak", "cpu=1MiB", "--json")
    budgets = json.loads(out)["budgets"]
    assert code == 0
    assert [(b["allocator"], b["metric"], b["source"]) for b in budgets] == [
        ("GPU_0_bfc", "max_peak", str(path)), ("cuda_host_bfc", "max_waste", str(path)), ("cpu", "max_peak", "--max-peak"),
    ]
    assert budgets[1]["measured"] == 0.9375  # 11 host constants of 16 requested bytes, each in 256 bytes


def test_check_output_file_still_exits_1(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "check.json"
    code, out, _ = run(capsys, "check", str(PTB), "--max-peak", "GPU_0_bfc=1MB", "--json", "-o", str(target))
    assert code == 1 and out == ""
    assert json.loads(target.read_text())["budgets"][0]["measured"] == 77_062_912


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--max-peak", "GPU_0_bfc=lots"], "not a size: 'lots'"),
        (["--max-peak", "GPU_0_bfc"], "write ALLOCATOR=LIMIT"),
        (["--max-peak", "GPU_0_bfc=5%"], "takes a size"),
        (["--max-waste", "GPU_0_bfc=5"], "ambiguous: write 5% .* or 5B"),
        (["--max-peak", "GPU_9=1GiB"], "no allocator 'GPU_9'"),
        (["--max-peak", "GPU_0_bfc=1GiB", "--max-peak", "GPU_0_bfc=2GiB"], "stated twice"),
        ([], "no budget to check"),
        (["--budget", "/nonexistent/budget.toml"], "/nonexistent/budget.toml: no such budget file"),
        (["--max-waste", "cpu=5%"], "cannot be measured"),
    ],
    ids=["malformed-size", "no-equals", "percent-peak", "bare-waste", "unknown-allocator", "twice", "nothing", "no-file",
         "unmeasurable"],
)
def test_check_usage_errors_exit_2_in_one_line(capsys: pytest.CaptureFixture[str], argv: list[str], says: str) -> None:
    code, out, err = run(capsys, "check", str(ALEXNET), *argv)
    assert code == 2 and out == ""
    assert err.startswith("memtrace: error: ") and err.count("\n") == 1
    assert re.search(says, err), err


def test_check_unknown_allocator_says_which_it_has(capsys: pytest.CaptureFixture[str]) -> None:
    _, _, err = run(capsys, "check", str(ALEXNET), "--max-peak", "GPU_9=1GiB")
    assert "(it has: cpu, GPU_0_bfc, cuda_host_bfc)" in err


def test_check_unreadable_trace_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "check", str(tmp_path / "missing.pbtxt"), "--max-peak", "GPU_0_bfc=1GiB")
    assert code == 2 and "missing.pbtxt: no such file" in err


def test_check_relative_peak_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    """The outputs-only tiny trace has no snapshots: its peak is relative to the step start."""
    code, out, _ = run(capsys, "check", str(FIXTURES / "tiny" / "outputs_only.pbtxt"), "--max-peak", "host=1", "--json")
    budget = json.loads(out)["budgets"][0]
    assert code == 1 and budget["note"] == "relative to the step start: no snapshot gives a baseline"


def test_names_from_the_trace_are_escaped_in_explanations(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, 'dev_stats { device: "/device:GPU:0" node_stats { node_name: "evil\\033[31m" '
                 "all_start_micros: 10 all_end_rel_micros: 5 memory { allocator_name: \"bfc\" "
                 "allocation_records { alloc_micros: 11 alloc_bytes: 256 } } } }", "evil.pbtxt")
    code, out, _ = run(capsys, "check", str(path), "--max-peak", "bfc=255")
    assert code == 1 and "\x1b" not in out
    assert "    evil\\x1b[31m persistent: 256 B (100.0%)\n" in out  # never freed in the step


# -- as a new user meets check ----------------------------------------------------------------------


def test_check_help_keeps_the_budget_file_example_valid_toml(capsys: pytest.CaptureFixture[str]) -> None:
    from memtrace.analyses.check import tomllib  # tomli on Python 3.10

    assert main(["check", "--help"]) == 0
    help_text = capsys.readouterr().out
    example = help_text.split("Budget file (TOML)", 1)[1].split("\n", 1)[1]
    assert tomllib.loads("\n".join(line[4:] for line in example.splitlines())) == {
        "GPU_0_bfc": {"max_peak": "1.3GiB", "max_peak_delta": "1.2GiB", "max_waste": "5%", "fits": "15GiB"},
        "CPU:0": {"max_peak": "300MiB"},
    }


def test_check_to_a_file_says_the_verdict_on_stderr(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "check.txt"
    assert main(["check", str(ALEXNET), "--max-peak", "GPU_0_bfc=1GiB", "-o", str(target)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"memtrace check: FAIL: 0 of 1 budget passed (failed: GPU_0_bfc max_peak); the report is in {target}\n"
    assert main(["check", str(ALEXNET), "--max-peak", "GPU_0_bfc=2GiB", "-o", str(target)]) == 0
    assert capsys.readouterr() == ("", "")


def test_a_decimal_unit_is_accepted_and_said_to_be_decimal(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(ALEXNET), "--max-peak", "GPU_0_bfc=1.3G"]) == 1
    out = capsys.readouterr().out
    assert "note: 1.3G is decimal (G = 10^9 bytes): 1,300,000,000 B; write 1.3GiB for binary (2^30)" in out.splitlines()
    assert main(["check", str(ALEXNET), "--max-peak", "GPU_0_bfc=1.3G", "--json"]) == 1
    (entry,) = json.loads(capsys.readouterr().out)["budgets"]
    assert entry["limit"] == 1_300_000_000 and entry["limit_note"].startswith("1.3G is decimal")
    assert main(["check", str(ALEXNET), "--max-peak", "GPU_0_bfc=1.3GiB"]) == 0
    assert "note:" not in capsys.readouterr().out


# -- hostile budgets (issue 17): refused in one line, never a traceback, never an infinite limit --


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ('[GPU_0_bfc]\nmax_peak = "' + "9" * 400 + '"\n', "size too large: '99999999999999999999...99999999' (400 characters)"),
        ("[GPU_0_bfc]\nmax_peak = " + "9" * 400 + "\n", "max_peak too large: a number of 400 digits"),
        ('[GPU_0_bfc]\nmax_waste = "' + "9" * 400 + '%"\n', "percentage too large"),
        ("[GPU_0_bfc]\nmax_peak = " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
    ],
    ids=["400-digit-size", "400-digit-integer", "400-digit-percentage", "arrays-5000-deep"],
)
def test_hostile_budget_files_are_one_line_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str,
                                                  says: str) -> None:
    budget = tmp_path / "b.toml"
    budget.write_text(content)
    code, out, err = run(capsys, "check", str(ALEXNET), "--budget", str(budget), "--json")
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"memtrace: error: {budget}: ") and says in err


def test_a_percentage_for_a_size_names_the_file_once(tmp_path: Path) -> None:
    budget = tmp_path / "b.toml"
    budget.write_text('[x]\nmax_peak = "5%"\n')
    with pytest.raises(UsageError) as raised:
        load_budget_file(budget)
    assert str(raised.value) == f"{budget}: [x]: max_peak takes a size (e.g. 1.3GiB), not a percentage: '5%'"


def test_pib_is_read_as_it_is_printed() -> None:
    assert parse_limit("max_peak", "2PiB", "x") == (2 * 1024**5, "bytes")
    assert parse_limit("max_peak", "1.5PB", "x") == (1_500_000_000_000_000, "bytes")


def test_diff_max_increase_of_400_digits_is_refused_not_infinite(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "diff", str(ALEXNET), str(ALEXNET), "--max-increase", "9" * 400 + "%", "--json")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("memtrace: error: --max-increase: percentage too large")
