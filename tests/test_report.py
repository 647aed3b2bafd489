"""The HTML report: rendered for every fixture and checked by its structure, not by its looks.

GIVEN a trace, WHEN ``memtrace report`` writes the page, THEN it has a chart per allocator whose
peak label is the peak, its embedded data keeps the peak however much it is downsampled, it
fetches nothing from anywhere, and names from the trace stay text.
"""

from __future__ import annotations

import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

import memtrace
from memtrace.analyses.report import gather
from memtrace.analyses.timeline import bucket_extrema, snapshots
from memtrace.cli import main
from memtrace.reporters import report as report_page
from memtrace.units import format_bytes, format_us

from .conftest import ALEXNET, PTB, REAL_TRACES, TINY

HOSTILE = TINY / "hostile_names.pbtxt"
EVERY_FIXTURE = [*REAL_TRACES, *sorted(TINY.glob("*.pbtxt"))]


class Element:
    def __init__(self, tag: str, attrs: dict[str, str]):
        self.tag, self.attrs, self.text = tag, attrs, ""


class Page(HTMLParser):
    """Every element with its attributes and its own text, in document order."""

    VOID: ClassVar[set[str]] = {"meta", "br", "line", "circle", "rect", "path", "input", "img", "link"}

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []
        self._open: list[Element] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.elements.append(element)
        if tag not in self.VOID:
            self._open.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append(Element(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self._open) - 1, -1, -1):
            if self._open[i].tag == tag:
                del self._open[i:]
                break

    def handle_data(self, data: str) -> None:
        if self._open:
            self._open[-1].text += data

    def find(self, tag: str, cls: str | None = None) -> list[Element]:
        return [e for e in self.elements if e.tag == tag and (cls is None or cls in e.attrs.get("class", "").split())]

    def all_text(self) -> str:
        return "".join(e.text for e in self.elements if e.tag not in ("script", "style"))


def render(tmp_path: Path, trace: Path, *extra: str) -> tuple[str, Page]:
    target = tmp_path / "report.html"
    assert main(["report", str(trace), "-o", str(target), *extra]) == 0
    text = target.read_text(encoding="utf-8")
    return text, Page(text)


def embedded(page: Page) -> dict:
    (block,) = [e for e in page.find("script") if e.attrs.get("id") == "memtrace-data"]
    assert block.attrs["type"] == "application/json"
    return json.loads(block.text)


def assert_self_contained(text: str, page: Page) -> None:
    """Nothing on the page can make the browser fetch: no src, no links out, no url() but #fragments."""
    for element in page.elements:
        assert "src" not in element.attrs, element.tag
        href = element.attrs.get("href")
        assert href is None or href.startswith("#"), href
        assert element.tag not in ("link", "img", "iframe", "object", "embed", "base", "form")
    assert not re.search(r"https?:|//[a-z]", text, re.IGNORECASE)
    assert "@import" not in text
    assert all(u.startswith("url(#") for u in re.findall(r"url\([^)]*\)", text))
    assert len(page.find("script")) == 3  # the error guard, the data, the chart script


@pytest.mark.parametrize("path", EVERY_FIXTURE, ids=lambda p: p.name)
def test_report_for_every_fixture(tmp_path: Path, path: Path) -> None:
    text, page = render(tmp_path, path)
    assert_self_contained(text, page)
    trace = memtrace.load(path)
    data = embedded(page)
    drawn = [data["charts"][int(f.attrs["data-chart"])] for f in page.find("figure", "chart")]
    charts = {c["allocator"]: c for c in drawn}
    labels = page.find("text", "peak-label")
    for p in trace.peaks():
        events = len(trace.timeline(p.allocator).time_us)
        assert (p.allocator in charts) == (events > 0)
        if not events:
            continue
        chart = charts[p.allocator]
        # The drawn curve is the timeline, and downsampling kept its maximum: the peak; where the
        # allocator never rose in the step, the curve never rose above where it began.
        assert chart["b"] and max(chart["b"]) == (p.peak_bytes if p.peak_node else chart["b"][0])
        assert chart["baseline"] == p.baseline_bytes
        if p.peak_node is not None:
            (label,) = [lab for lab in labels if int(lab.attrs["data-peak-bytes"]) == p.peak_bytes
                        and int(lab.attrs["data-peak-time-us"]) == p.peak_time_us]
            assert label.text == f"peak {format_bytes(p.peak_bytes)} at {format_us(p.peak_time_us * 1000)}"
            assert chart["peak"] == {"t": p.peak_time_us, "b": p.peak_bytes, "n": data["names"].index(p.peak_node)}
        assert len(chart["snaps"]["t"]) == p.reconciliation.snapshots  # every fixture has < 1500
        if p.baseline_bytes is not None:
            assert sum(chart["snaps"]["ok"]) == p.reconciliation.matched
    assert len(page.find("figure", "chart")) == len(charts)
    assert len(page.find("path", "curve")) == len(charts)


def test_alexnet_report_content(tmp_path: Path) -> None:
    _, page = render(tmp_path, ALEXNET)
    label = page.find("text", "peak-label")[0]  # GPU_0_bfc comes first: the largest peak
    # 1,325,898,496 bytes at 1,387 us: the peak docs/peak.md checks against the 97 snapshots.
    assert label.attrs["data-peak-bytes"] == "1325898496" and label.attrs["data-peak-time-us"] == "1387"
    assert label.text == "peak 1.23 GiB at 1.39 ms"
    baselines = page.find("line", "baseline")
    assert baselines[0].attrs["data-baseline-bytes"] == "86954240"
    assert len(page.find("circle", "snap")) == 97 and not page.find("circle", "off")
    words = page.all_text()
    assert "97 of 97 snapshots agree" in words
    assert "Live at the peak" in words and "Top ops by bytes held at the peak" in words and "Fragmentation" in words
    live_rows = page.find("table", "live")
    assert live_rows and "gradients/conv4/Conv2D_grad/Conv2DBackpropInput" in words


def test_top_ops_rank_by_bytes_held_at_the_peak(tmp_path: Path) -> None:
    # tfprof's peak puts conv2/Conv2D first (618 MiB) though it holds 0 B at the allocator's peak;
    # the report ranks by what each op holds then: the conv4 gradient (281 MiB), then lrn1/LRN.
    _, page = render(tmp_path, ALEXNET)
    (ops_table,) = page.find("table", "ops")
    after = page.elements[page.elements.index(ops_table):]
    ops_cells = [e.text for e in after if e.tag == "code"]
    assert ops_cells[:2] == ["gradients/conv4/Conv2D_grad/Conv2DBackpropInput", "lrn1/LRN"]
    report_data = gather(memtrace.load(ALEXNET))
    at_peak = [r.at_peak_bytes for r in report_data.ops.rows]
    assert at_peak == sorted(at_peak, reverse=True) and at_peak[0] == 295_043_072


def test_charts_open_where_the_bytes_move(tmp_path: Path) -> None:
    # AlexNet's GPU bytes rise and fall in the first 6.8 ms of a 220 ms step: the chart opens there
    # (with the peak at 1.39 ms inside), and the button to show the whole step is shown.
    report_data = gather(memtrace.load(ALEXNET))
    focus = {v.peak.allocator: v.focus_us for v in report_data.allocators}
    assert focus == {"GPU_0_bfc": (0, 6815), "cuda_host_bfc": (0, 6844), "cpu": None}
    # PTB's GPU bytes move all through the step: nothing to zoom into.
    assert {v.peak.allocator: v.focus_us for v in gather(memtrace.load(PTB)).allocators}["GPU_0_bfc"] is None
    text, page = render(tmp_path, ALEXNET)
    data = json.loads(text.split('id="memtrace-data">')[1].split("</script>")[0])
    gpu = data["charts"][0]
    assert (gpu["v0"], gpu["v1"], gpu["t0"], gpu["t1"]) == (0, 6815, 0, 219951)
    resets = page.find("button", "reset")
    assert "hidden" not in resets[0].attrs
    assert "Opens on 0 us to 6.82 ms of the 220 ms step" in page.all_text()


def test_ptb_report_draws_disagreeing_snapshots(tmp_path: Path) -> None:
    _, page = render(tmp_path, PTB, "--allocator", "GPU_0_bfc")
    trace = memtrace.load(PTB)
    rec = trace.peak("GPU_0_bfc").reconciliation
    assert (rec.snapshots, rec.matched) == (556, 364)
    assert len(page.find("circle", "ok")) == 364 and len(page.find("circle", "off")) == 556 - 364
    assert len(page.find("figure", "chart")) == 1


def test_hostile_names_render_as_text(tmp_path: Path) -> None:
    text, page = render(tmp_path, HOSTILE)
    assert_self_contained(text, page)
    # The names became no element: one script per block we wrote, no <b>, no <img>.
    assert not page.find("b") and not page.find("img")
    for raw in ("<script>alert", "<img", "<b>alloc", "\x1b"):
        assert raw not in text
    words = page.all_text()
    assert "<script>alert(1)</script>" in words
    assert '"quotes" & ampersands </script><img src=x onerror=alert(2)>' in words
    assert '<b>alloc</b> & "q"' in words
    assert "escape\\x1b[31m-red" in words  # the control character is shown, not sent
    data = embedded(page)  # "</script>" inside the JSON is \u003c/script\u003e: the block did not end early
    assert "<script>alert(1)</script>" in data["names"]
    assert data["charts"][0]["allocator"] == '<b>alloc</b> & "q"'
    # The numbers worked out by hand in the fixture.
    (label,) = page.find("text", "peak-label")
    assert label.attrs["data-peak-bytes"] == "8072" and label.attrs["data-peak-time-us"] == "60"
    assert data["charts"][0]["b"] == [6024, 8072, 7048]


def test_tiny_report_numbers(tmp_path: Path) -> None:
    _, page = render(tmp_path, TINY / "producer_free.pbtxt")
    data = embedded(page)
    (chart,) = data["charts"]
    assert chart["t"] == [10, 15, 30, 105, 200] and chart["b"] == [11024, 12048, 11024, 13072, 12048]
    assert chart["start"] == 10000 and chart["snaps"]["t"] == [40, 200] and chart["snaps"]["b"] == [11024, 12048]
    (label,) = page.find("text", "peak-label")
    assert label.text == "peak 12.8 KiB at 105 us"


def test_bucket_extrema_keeps_maxima_minima_and_ends() -> None:
    time = np.arange(12, dtype=np.int64)
    values = np.array([5, 1, 9, 2, 2, 8, 0, 7, 3, 3, 6, 4], dtype=np.int64)
    keep = bucket_extrema(time, values, 3)  # buckets: times 0-3, 4-7, 8-11
    # max 9 (2) and min 1 (1); max 8 (5) and min 0 (6); max 6 (10) and first min 3 (8); the ends 0 and 11.
    assert keep.tolist() == [0, 1, 2, 5, 6, 8, 10, 11]
    assert values[keep].max() == 9 and values[keep].min() == 0


def test_snapshots_reconcile_point_by_point() -> None:
    trace = memtrace.load(PTB)
    taken = snapshots(trace, "GPU_0_bfc")
    assert len(taken.time_us) == 556 and int(taken.agrees.sum()) == 364
    assert np.all(np.diff(taken.time_us) >= 0)


def big_trace(path: Path, nodes: int) -> int:
    """A step of ``nodes`` ops, four records each (an output, a temporary and their frees); returns records."""
    from memtrace.read._proto import tf_trace_pb2 as pb

    step = pb.StepStats()
    device = step.dev_stats.add(device="/job:localhost/replica:0/task:0/device:GPU:0")
    t = 1000
    for i in range(nodes):
        node = device.node_stats.add(
            node_name=f"layer{i % 97}/op{i}", all_start_micros=t, op_start_rel_micros=1, op_end_rel_micros=3,
            all_end_rel_micros=4, timeline_label=f"layer{i % 97}/op{i} = MatMul(a, b)",
        )
        memory = node.memory.add(allocator_name="GPU_0_bfc", allocator_bytes_in_use=((i * 7919) % 5000 + 1) * 256)
        size = 256 * (1 + (i * 31) % 400)
        for when, size_bytes in ((1, size), (2, 256), (3, -256), (5 + (i % 50) * 3, -size)):
            memory.allocation_records.add(alloc_micros=t + when, alloc_bytes=size_bytes)
        t += 3
    path.write_bytes(step.SerializeToString())
    return 4 * nodes


def test_report_of_a_big_trace_stays_bounded(tmp_path: Path) -> None:
    source = tmp_path / "big.pb"
    assert big_trace(source, 50_000) == 200_000
    trace = memtrace.load(source)
    data = gather(trace, points=1500)
    (view,) = data.allocators
    assert view.events == 200_000 and len(view.timeline.time_us) <= 2 * 1500 + 2
    assert view.snapshot_count == 50_000 and len(view.snapshots.time_us) <= 1500
    assert int(view.timeline.live_bytes.max()) == view.peak.peak_bytes
    out = io.StringIO()
    report_page.render_html(data, out)
    text = out.getvalue()
    page = Page(text)
    assert len(text) < 1_000_000
    (chart,) = embedded(page)["charts"]
    assert max(chart["b"]) == view.peak.peak_bytes and len(chart["t"]) == len(view.timeline.time_us)
    assert "200,000 events" in page.all_text()


def test_report_needs_an_output_and_a_readable_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(ALEXNET)]) == 2
    assert "-o/--output" in capsys.readouterr().err
    target = tmp_path / "r.html"
    assert main(["report", str(tmp_path / "missing.pbtxt"), "-o", str(target)]) == 2
    assert capsys.readouterr().err.count("\n") == 1 and not target.exists()
    assert main(["report", str(ALEXNET), "-o", str(target), "--allocator", "nope"]) == 2
    assert "no allocator 'nope'" in capsys.readouterr().err and not target.exists()


def test_fragmentation_table_stays_in_its_card_and_says_the_heap_caveat(tmp_path: Path) -> None:
    text, _ = render(tmp_path, PTB)
    assert '<div class="fit"><table class="frag">' in text  # scrolls inside the card instead of overflowing it
    assert ".fit{overflow-x:auto}" in text
    assert ("cpu_pool</code>, <code>cpu</code>: not a BFC allocator, so its memory may come from the system heap "
            "and the address span at the peak can cross unrelated memory.") in text


def test_a_step_of_a_century_keeps_the_page_small(tmp_path: Path) -> None:
    """Two nodes 126 years apart once made a 245 MB page of 1.8 million axis ticks."""
    trace = tmp_path / "far.pbtxt"
    record = 'memory {{ allocator_name: "GPU_0_bfc" allocation_records {{ alloc_micros: {t} alloc_bytes: {b} }} }}'
    trace.write_text('dev_stats { device: "/job:localhost/replica:0/task:0/device:GPU:0"\n'
                     f'  node_stats {{ node_name: "a" all_start_micros: 1 {record.format(t=1, b=256)} }}\n'
                     f'  node_stats {{ node_name: "b" all_start_micros: 4000000000000000 '
                     f'{record.format(t=4000000000000000, b=-256)} }}\n}}\n')
    page = tmp_path / "far.html"
    assert main(["report", str(trace), "-o", str(page)]) == 0
    html = page.read_text()
    assert len(html) < 100_000
    assert 3 <= html.count('<line class="xtick"') <= 10


@pytest.mark.parametrize("span_us", [10**10, 10**12, 4 * 10**15, 9 * 10**18])
def test_time_ticks_keep_growing_with_the_span(span_us: int) -> None:
    ticks = report_page._ticks(0, span_us, report_page._TIME_STEPS)
    assert 2 <= len(ticks) <= 11 and ticks[0] == 0
