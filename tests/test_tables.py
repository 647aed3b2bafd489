"""Text fits the terminal: no command writes a line wider than ``COLUMNS`` (or 100 off a terminal)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memtrace.cli import main
from memtrace.reporters.tables import fit_line, fit_table, output_width, shorten_middle

from .conftest import ALEXNET, PTB, REAL_TRACES, TINY

TRACES = [*REAL_TRACES, *sorted(TINY.glob("*.pbtxt"))]
COMMANDS = [
    ["summary"], ["peak"], ["peak", "--group-by", "scope:2"], ["peak", "--top", "50"], ["timeline"],
    ["ops"], ["ops", "--by", "node"], ["ops", "--by", "scope", "--depth", "3"], ["frag"], ["frag", "--top", "50"],
    ["fit", "--limit", "1KiB", "--no-alternatives"],
]


def widest_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str]:
    main(argv)
    out, _ = capsys.readouterr()
    lines = out.splitlines() or [""]
    # A table is fitted, never wrapped: its rule (dashes under the headers) is one line.
    rules = [i for i, line in enumerate(lines) if line.strip() and not line.strip(" -")]
    assert not any(i + 1 in rules for i in rules), f"{argv[0]}: a table was wrapped:\n{out}"
    return max(len(line) for line in lines), max(lines, key=len)


@pytest.mark.parametrize("width", [60, 80, 100, 200])
@pytest.mark.parametrize("trace", TRACES, ids=lambda p: p.name)
def test_no_command_writes_wider_than_the_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, trace: Path, width: int
) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    for command in COMMANDS:
        widest, line = widest_line(capsys, [*command, str(trace)])
        assert widest <= width, f"{command}: {line!r}"


@pytest.mark.parametrize("width", [60, 80, 100, 200])
def test_check_diff_and_tensor_fit_the_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, width: int
) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    for argv in (
        ["check", str(ALEXNET), "--max-peak", "GPU_0_bfc=1GiB", "--max-waste", "GPU_0_bfc=1%"],
        ["check", str(PTB), "--max-peak", "GPU_0_bfc=1GiB"],
        ["diff", str(ALEXNET), str(PTB)],
        ["diff", str(PTB), str(ALEXNET), "--top", "50"],
        ["tensor", str(ALEXNET), "GPU_0_bfc:183"],
        ["tensor", str(PTB), "Train/Model/gradients/Train/Model/xw_plus_b/MatMul_grad/MatMul_1"],
    ):
        widest, line = widest_line(capsys, argv)
        assert widest <= width, f"{argv[0]}: {line!r}"


def test_json_is_never_narrowed(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    widest, _ = widest_line(capsys, ["peak", "--json", str(PTB)])
    assert widest > 60


def test_width_is_columns_else_100_off_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "72")
    assert output_width() == 72
    monkeypatch.delenv("COLUMNS")
    assert output_width() == 100  # pytest captures stdout: not a terminal


def test_names_shorten_in_the_middle_keeping_the_end() -> None:
    name = "Train/Model/gradients/Train/Model/RNN/cell_1/lstm_cell/LSTMBlockCell_grad/MatMul_1"
    assert shorten_middle(name, 30) == "Train/M…lockCell_grad/MatMul_1"
    assert shorten_middle("short", 30) == "short"


def test_fit_table_drops_named_columns_before_shortening_names_below_40() -> None:
    rows = [("a/very/long/scope/name/that/goes/on/and/on/and/on/MatMul", "12 MiB", "12,582,912", "float32 [1,2]")]
    text = fit_table(rows, ("node", "size", "bytes", "tensor"), ("left", "right", "right", "left"),
                     width=70, drop=("bytes", "tensor"))
    lines = text.splitlines()
    assert lines[0].split() == ["node", "size", "tensor"]
    assert all(len(line) <= 70 for line in lines)
    assert lines[2].split()[0].endswith("and/on/MatMul")


def test_fit_line_wraps_prose_at_spaces_with_an_indent() -> None:
    assert fit_line("  baseline  10.2 MiB live before the step: 364 of 556 snapshots agree", 40) == [
        "  baseline  10.2 MiB live before the",
        "    step: 364 of 556 snapshots agree",
    ]


@pytest.mark.parametrize("width", [60, 100, 200])
def test_oom_and_trend_fit_the_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, width: int, tmp_path: Path
) -> None:
    from .conftest import OOM

    monkeypatch.setenv("COLUMNS", str(width))
    for log in sorted(OOM.glob("*.log")) + sorted(OOM.glob("*.md")):
        widest, line = widest_line(capsys, ["oom", str(log)])
        assert widest <= width, f"oom {log.name}: {line!r}"
    pytest.importorskip("pyarrow")
    pytest.importorskip("dask")
    assert main(["batch", str(TINY / "live_groups.pbtxt"), str(TINY / "producer_free.pbtxt"), "-o", str(tmp_path / "t"),
                 "--workers", "1"]) == 0
    capsys.readouterr()
    widest, line = widest_line(capsys, ["trend", str(tmp_path / "t")])
    assert widest <= width, f"trend: {line!r}"
