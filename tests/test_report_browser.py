"""The report in a real browser: headless Chromium runs its script, and a screenshot shows a page.

Needs Debian's ``chromium`` (``.ci/run`` installs it). Where it is missing the tests skip, except
under CI (``CI`` or ``MEMTRACE_CI`` set), where a missing browser fails them: the check must not
vanish silently.

The page exercises itself when its URL ends in ``#selftest`` (hover at the peak, a redraw of
the whole step, a drag to zoom) and writes what it saw into ``data-`` attributes; any script
error is recorded on ``<html data-errors>`` by a guard that runs first, and Chromium's console
log (``--enable-logging=stderr``) must show no uncaught error either.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

import memtrace
from memtrace.cli import main

from .conftest import ALEXNET, PTB, TINY, require_program
from .pngimage import read_png
from .test_report import Page

HOSTILE = TINY / "hostile_names.pbtxt"


def chromium() -> str:
    """Headless Chromium (apt-get install chromium); .ci/run installs Debian's, so in CI its absence fails."""
    return require_program("chromium", "chromium-browser", "google-chrome")


def run_chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # The background-networking flags keep it from waiting on a network that is not there.
    command = [
        chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--hide-scrollbars", f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0", *args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def report(tmp_path: Path, trace: Path) -> Path:
    target = tmp_path / "report.html"
    assert main(["report", str(trace), "-o", str(target)]) == 0
    return target


def console_errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line and "Uncaught" in line]


@pytest.mark.parametrize("path", [ALEXNET, PTB, HOSTILE], ids=lambda p: p.name)
def test_report_script_runs_in_chromium(tmp_path: Path, path: Path) -> None:
    page_file = report(tmp_path, path)
    done = run_chromium(tmp_path, "--window-size=1280,1000", "--dump-dom", page_file.as_uri() + "#selftest")
    assert not console_errors(done.stderr)
    dom = Page(done.stdout)
    (root,) = dom.find("html")
    assert "data-errors" not in root.attrs
    figures = dom.find("figure", "chart")
    assert figures and root.attrs["data-ready"] == str(len(figures))
    assert len(dom.find("script")) == 3 and not dom.find("img") and not dom.find("b")
    trace = memtrace.load(path)
    peaks = {p.peak_bytes: p for p in trace.peaks() if p.peak_node is not None}
    for figure in figures:
        if "data-at-peak" not in figure.attrs:
            continue
        # The tooltip at the peak shows the exact peak bytes, as JavaScript formats them.
        peak = next(p for b, p in peaks.items() if f"({b:,} bytes)" in figure.attrs["data-at-peak"])
        assert f"({peak.peak_time_us:,} us)" in figure.attrs["data-at-peak"]
        assert peak.peak_node is not None and f"after {peak.peak_node}" in figure.attrs["data-at-peak"]
        assert " bytes)" in figure.attrs["data-hover"]  # a real mouse event reached the chart
        assert figure.attrs["data-redraw"] == "same"  # the script's drawing matches the server's
        assert figure.attrs["data-zoomed"].endswith("reset-shown")  # a drag zoomed in
        start, end = (float(v) for v in figure.attrs["data-zoomed"].split()[0].split(","))
        assert 0 <= start < end
    assert len([f for f in figures if "data-at-peak" in f.attrs]) == len(peaks)


def test_report_screenshot_shows_the_chart(tmp_path: Path) -> None:
    page_file = report(tmp_path, ALEXNET)
    shot = tmp_path / "shot.png"
    done = run_chromium(tmp_path, "--window-size=1000,900", f"--screenshot={shot}", page_file.as_uri())
    assert not console_errors(done.stderr)
    image = read_png(shot)[:, :, :3].astype(np.int64)
    assert image.shape == (900, 1000, 3)
    background = np.array([0xF8, 0xFA, 0xFC])
    assert (np.abs(image - background).sum(axis=2) > 30).mean() > 0.05  # something is drawn
    assert len(np.unique(image.reshape(-1, 3), axis=0)) > 100  # text and shapes, not a flat fill

    def pixels_near(colour: tuple[int, int, int]) -> int:
        return int((np.abs(image - np.array(colour)).sum(axis=2) < 40).sum())

    assert pixels_near((0x25, 0x63, 0xEB)) > 200  # the curve's blue
    assert pixels_near((0xDC, 0x26, 0x26)) > 20  # the peak's red


def test_icicle_opens_a_scope_on_click(tmp_path: Path) -> None:
    # GIVEN the PTB report, WHEN its self-test clicks a bar of the live set's icicle,
    # THEN that bar fills the width and only the bars inside it (and above it) stay shown.
    page_file = report(tmp_path, PTB)
    done = run_chromium(tmp_path, "--window-size=1280,1000", "--dump-dom", page_file.as_uri() + "#selftest")
    dom = Page(done.stdout)
    boxes = [b for b in dom.find("div", "icicle") if "data-selftest" in b.attrs]
    assert boxes
    opened, width, shown = boxes[0].attrs["data-selftest"].rsplit(" ", 2)
    a, b, depth = opened.split(",")
    assert float(b) > float(a) and int(depth) >= 1
    assert width == "100%"
    assert 1 < int(shown) < len([d for d in dom.find("div", "ic")])


def test_the_scripts_time_ticks_keep_growing_with_the_span(tmp_path: Path) -> None:
    # GIVEN the page's own tick function (the lines that define STEPS and ticks, taken from the script),
    # WHEN Chromium runs it on spans up to a century of microseconds, THEN a handful of ticks each time.
    from memtrace.reporters.common import asset

    lines = asset("report.js").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("var STEPS="))
    end = next(i for i, line in enumerate(lines) if i > start and "return out;}" in line)
    spans = [10**4, 10**10, 4 * 10**15, 9 * 10**18]
    page = tmp_path / "ticks.html"
    page.write_text("<!DOCTYPE html><html><body><script>\n" + "\n".join(lines[start:end + 1]) + "\n"
                    f"document.body.setAttribute('data-counts', [{', '.join(map(str, spans))}]"
                    ".map(function(s){return ticks(0, s).length;}).join(' '));\n</script></body></html>\n")
    done = run_chromium(tmp_path, "--dump-dom", page.as_uri())
    assert not console_errors(done.stderr)
    (body,) = Page(done.stdout).find("body")
    counts = [int(c) for c in body.attrs["data-counts"].split()]
    assert len(counts) == len(spans) and all(2 <= c <= 11 for c in counts), counts


def test_step_marks_of_a_profile_follow_the_zoom(tmp_path: Path) -> None:
    # GIVEN the report of a profile of three steps, zoomed by its URL to 1,000..5,000 us
    from .test_keras import CNN

    page = report(tmp_path, CNN)
    steps = memtrace.load(CNN).steps
    starts = [(s.start_ns - steps[0].start_ns) // 1000 for s in steps]
    done = run_chromium(tmp_path, "--dump-dom", f"{page.as_uri()}#zoom=1000,5000")
    marks = re.findall(r'<g class="step-mark" data-t="([0-9]+)" visibility="(\w+)"><line x1="(-?[0-9.]+)"', done.stdout)
    assert [int(t) for t, _, _ in marks] == starts
    # THEN each mark sits where the zoomed axis puts its time, hidden where outside the view
    chart = json.loads(re.search(r'id="memtrace-data">(.*?)</script>', done.stdout, re.DOTALL).group(1))["charts"][0]  # type: ignore[union-attr]
    left, right = chart["geometry"]["left"], chart["geometry"]["right"]
    for (t, shown, x), start in zip(marks, starts):
        assert float(x) == pytest.approx(left + (start - 1000) / 4000 * (right - left), abs=0.06)
        assert shown == ("visible" if 1000 <= start <= 5000 else "hidden")
