"""The address space over time (``memtrace fit --html``, and ``memtrace report`` for a profile).

Evidence: a hand-worked sequence; the JAX H100 profile, whose every chunk address, size and
free the picture's boxes must equal (walked from the profile with protobuf alone); a headless
Chromium that opens the pages without a script error and draws them (as tests/test_report_browser.py).
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import numpy as np
import pytest

import memtrace
from memtrace.allocator import bfc
from memtrace.allocator.address_space import Box, address_space, lay_out
from memtrace.cli import main

from .pngimage import read_png
from .test_report import Page
from .test_report_browser import console_errors, run_chromium
from .test_xplane import _event, _space, _write
from .xspace_events import memory_events

FIXTURES = Path(__file__).parent.parent / "fixtures"
JAX = FIXTURES / "profiles" / "jax_gpu.xplane.pb.gz"
OOM50 = FIXTURES / "oom" / "cpu_regions_50mib.xplane.pb.gz"
CPU = "bfc_cpu_allocator_for_gpu"
MIB = 1 << 20


def test_hand_worked_boxes_peak_and_failure() -> None:
    # GIVEN one region of 4 KiB (no growth): 256 at 0, 512 at 256, the first freed, 200 (-> 256) takes
    # the freed chunk at 0 (the smallest free chunk that fits), then 4,000 (-> 4,096) cannot fit
    requests = bfc.Requests.from_events([("a", 256, "x/a"), ("a", 512, "x/b"), ("f", 0), ("a", 200, "y/c"),
                                         ("a", 4000, "y/d")])
    space = lay_out(requests, bfc.BFCOptions(4096, allow_growth=False), "hand")
    assert space.regions == ((0, 4096),)
    assert space.boxes == (Box(0, 0, 256, 256, 0, 2, "x/a"), Box(0, 256, 512, 512, 1, None, "x/b"),
                           Box(0, 0, 256, 200, 3, None, "y/c"))
    # bytes in use after each event: 256, 768, 512, 768: the first highest is event 1
    assert (space.peak_event, space.peak_in_use_bytes) == (1, 768)
    assert (space.failed_event, space.failed_request_bytes, space.failed_op) == (4, 4096, "y/d")
    assert space.events == 4
    # AND a layout of requests alone is the model's, never called an allocator's own
    assert space.exact is False


def test_a_profile_after_the_allocators_birth_is_laid_out_in_the_regions_order_of_making(tmp_path: Path) -> None:
    from .memory_profiles import write_profile

    # GIVEN a profile that starts after the allocator's birth (4 MiB in use before it) whose chunks lie lower and
    # lower (1 MiB, 3 MiB 8 MiB below, 16 MiB 40 MiB below)
    high = 1 << 40
    events = [(True, MIB, MIB, high, 5 * MIB, 0.0, "a"), (True, 3 * MIB, 3 * MIB, high - 8 * MIB, 8 * MIB, 0.0, "b"),
              (True, 16 * MIB, 16 * MIB, high - 40 * MIB, 24 * MIB, 0.0, "c")]
    space = address_space(memtrace.load(write_profile(tmp_path / "later.xplane.pb", events)), CPU)
    # THEN the model lays its requests out from an empty allocator in regions ascending as made (2, 4 and 16 MiB, as
    # TF grows): the profile's addresses, of an allocator already holding chunks, say nothing of their order
    assert space.regions == ((0, 2 * MIB), (1, 4 * MIB), (2, 16 * MIB))
    assert not space.exact and "the trace starts after the allocator's birth" in space.note


def test_a_free_of_a_chunk_the_sequence_never_made_ends_no_box_and_nothing_in_use_has_no_peak() -> None:
    # GIVEN a sequence that first frees a chunk it never made (a profile after the allocator's birth drops its
    # allocation), then allocates x, never freed
    requests = bfc.Requests.from_events([("f", -1), ("a", 256, "x")])
    space = lay_out(requests, bfc.BFCOptions(4096, allow_growth=False), "hand")
    # THEN x's box lasts to the end (the free before it frees nothing of the sequence's), its peak at event 1
    assert space.boxes == (Box(0, 0, 256, 256, 1, None, "x"),)
    assert (space.peak_event, space.peak_in_use_bytes) == (1, 256)
    # AND a sequence that never holds a byte (a 0-byte request) has no peak event
    nothing = lay_out(bfc.Requests.from_events([("a", 0, "empty")]), bfc.BFCOptions(4096, allow_growth=False), "hand")
    assert (nothing.peak_event, nothing.peak_in_use_bytes, nothing.boxes) == (None, 0, ())


def test_a_layouts_clock_holds_the_failed_request_and_a_layout_that_fits_names_none(tmp_path: Path) -> None:
    # GIVEN the hand-worked sequence above (it fails at event 4) and the same without its last request
    events = [("a", 256, "x/a"), ("a", 512, "x/b"), ("f", 0), ("a", 200, "y/c"), ("a", 4000, "y/d")]
    options = bfc.BFCOptions(4096, allow_growth=False)
    failing = lay_out(bfc.Requests.from_events(events), options, "hand")
    fitting = lay_out(bfc.Requests.from_events(events[:-1]), options, "hand")
    # THEN the failing one's clock runs to the failed request (times are the row numbers), the other's to its last
    # event, and it names no failed request (no bytes, no op)
    assert (failing.events, failing.time_ns) == (4, (0, 1, 2, 3, 4))
    assert (fitting.events, fitting.time_ns) == (4, (0, 1, 2, 3))
    assert (fitting.failed_event, fitting.failed_request_bytes, fitting.failed_op) == (None, 0, "")
    # AND a profile's layout under a limit given is laid out under that limit (not TF's default)
    space = address_space(memtrace.load(OOM50), CPU, limit=48 * MIB)
    assert space.options.limit_bytes == 48 * MIB and "under a limit of 50,331,648 bytes" in space.note


def test_a_region_garbage_collection_gives_back_keeps_its_band(tmp_path: Path) -> None:
    # GIVEN growth under 6 MiB with garbage collection: 1.5 MiB takes region 0 (2 MiB) whole and is freed;
    # 5 MiB does not fit the 4 MiB left, so region 0 (wholly free) is given back and region 1 is 6 MiB, handed
    # out whole (the 1 MiB left is under the request and under 128 MiB: no split)
    requests = bfc.Requests.from_events([("a", 3 * MIB // 2, "first"), ("f", 0), ("a", 5 * MIB, "big")])
    space = lay_out(requests, bfc.BFCOptions(6 * MIB, allow_growth=True, garbage_collection=True), "hand")
    # THEN both regions are in the picture, region 0 given back at event 2 (the request that needed room)
    assert space.regions == ((0, 2 * MIB), (1, 6 * MIB)) and space.given_back == ((0, 2),)
    assert space.boxes == (Box(0, 0, 2 * MIB, 3 * MIB // 2, 0, 1, "first"), Box(1, 0, 6 * MIB, 5 * MIB, 2, None, "big"))
    assert space.pool_bytes == 6 * MIB and space.failed_event is None
    # AND fit --html draws it (on a GPU profile, whose allocator collects garbage), as the text answers
    from .memory_profiles import write_profile

    base = 0x7000_0000_0000
    profile = write_profile(tmp_path / "gc.xplane.pb", [
        (True, 3 * MIB // 2, 2 * MIB, base, 2 * MIB, 0.0, "first"), (False, 0, 2 * MIB, base, 0, 0.0, ""),
        (True, 5 * MIB, 5 * MIB, base + 8 * MIB, 5 * MIB, 0.0, "big")], allocator="GPU_0_bfc")
    page = tmp_path / "gc.html"
    assert main(["fit", str(profile), "--allow-growth", "--limit", "6MiB", "--html", "-o", str(page)]) == 0
    html = page.read_text()
    assert "2 region(s), 1 given back by garbage collection, 6 MiB in all at the end" in html
    # (region 0, made first at the lower address, is region 1 to a person, as the out-of-memory page numbers them)
    assert "region 1 given back by garbage collection at event 2 (" in html and "region 1: 2 MiB" in html


def test_the_jax_profiles_boxes_are_its_own_chunks() -> None:
    events = memory_events(JAX, "GPU_0_bfc")
    space = address_space(memtrace.load(JAX), "GPU_0_bfc")
    assert space.exact and len(space.regions) == 1
    base = int(events[0]["addr"])  # type: ignore[call-overload]
    live: dict[int, int] = {}
    theirs = []
    for row, e in enumerate(events):
        if e["alloc"]:
            live[int(e["addr"])] = len(theirs)  # type: ignore[call-overload]
            theirs.append([int(e["addr"]) - base, int(e["allocation_bytes"]), row, None])  # type: ignore[call-overload]
        else:
            theirs[live.pop(int(e["addr"]))][3] = row  # type: ignore[call-overload]
    ours = [[b.offset, b.size_bytes, b.start_event, b.end_event] for b in space.boxes]
    assert len(ours) == 80 and ours == theirs
    in_use = [int(e["bytes_allocated"]) for e in events]  # type: ignore[call-overload]
    assert space.peak_event == in_use.index(max(in_use)) and space.peak_in_use_bytes == 184_549_632
    assert space.failed_event is None


def test_fit_html_draws_every_chunk_the_peak_and_the_failure(tmp_path: Path) -> None:
    page = tmp_path / "fit.html"
    # the 50 MiB run under 49 MiB: TensorFlow ran out there (fixtures/oom/cpu_regions_49mib.log)
    assert main(["fit", str(OOM50), "--limit", "49MiB", "--html", "-o", str(page)]) == 1
    dom = Page(page.read_text())
    assert len(dom.find("svg", "address-space")) == 1
    titles = [t.text for t in dom.find("title")]
    chunks = [t for t in titles if ": chunk " in t]
    space = address_space(memtrace.load(OOM50), CPU, limit=49 * MIB)
    assert len(chunks) == len(space.boxes) == 13 and sum(t.startswith("Fill") for t in chunks) >= 4
    assert len(dom.find("line", "peak")) == 1 and len(dom.find("line", "failure")) == 1
    assert "out of memory: 20 MiB for Fill" in page.read_text()
    assert "coloured by op, by bytes allocated" in page.read_text()  # (every op is Fill or unknown)
    assert len(dom.find("rect", "free")) == 4  # one band per region: 2, 4, 8 and 16 MiB
    assert len(dom.find("script")) == 2  # the error guard and the zoom (assets/address_space.js)


def test_names_from_the_trace_are_escaped(tmp_path: Path) -> None:
    hostile = '<img src=x onerror="alert(1)">/op'
    events = [_event("alloc", 10, 256, 256, 0x1000, hostile), _event("alloc", 20, 512, 768, 0x1100, "b/ok"),
              _event("dealloc", 30, 256, 512, 0x1000)]
    trace = _write(tmp_path, _space(events))
    page = tmp_path / "fit.html"
    assert main(["fit", str(trace), "--html", "-o", str(page)]) == 0
    text = page.read_text()
    assert "<img" not in text and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in text
    assert not Page(text).find("img")


def test_the_pages_open_in_chromium_and_show_the_picture(tmp_path: Path) -> None:
    fit_page = tmp_path / "fit.html"
    assert main(["fit", str(OOM50), "--limit", "49MiB", "--html", "-o", str(fit_page)]) == 1
    shot = tmp_path / "fit.png"
    done = run_chromium(tmp_path, "--window-size=1200,900", f"--screenshot={shot}", fit_page.as_uri())
    assert not console_errors(done.stderr)
    image = read_png(shot)[:, :, :3].astype(np.int64)

    def pixels_near(colour: tuple[int, int, int]) -> int:
        return int((np.abs(image - np.array(colour)).sum(axis=2) < 30).sum())

    assert pixels_near((0xE5, 0xE7, 0xEB)) > 20_000  # free space (holes) in the regions' bands
    assert pixels_near((0xDC, 0x26, 0x26)) > 300  # the failed request, drawn to scale, and its line
    assert len(np.unique(image.reshape(-1, 3), axis=0)) > 50
    # AND the report of a profile carries the same picture, and its script still runs clean
    report = tmp_path / "report.html"
    assert main(["report", str(OOM50), "-o", str(report)]) == 0
    done = run_chromium(tmp_path, "--window-size=1280,1000", "--dump-dom", report.as_uri() + "#selftest")
    assert not console_errors(done.stderr)
    dom = Page(done.stdout)
    (root,) = dom.find("html")
    assert "data-errors" not in root.attrs
    assert len(dom.find("svg", "address-space")) == 1


def test_a_stepstats_report_has_no_address_space(tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    assert main(["report", str(FIXTURES / "alexnet_train_gpu.pbtxt"), "-o", str(report)]) == 0
    assert not Page(report.read_text()).find("svg", "address-space")


@pytest.mark.parametrize("args", [["--html"], ["--html", "--json", "-o", "x.html"]])
def test_fit_html_needs_an_output_file(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fit", str(JAX), *args]) == 2
    assert capsys.readouterr().err.count("\n") == 1


# -- fit SMALL --vs LARGE --html: the address space of a batch predicted from two recordings -----------------

BATCHES = FIXTURES / "batches"
_CHUNK = re.compile(r"chunk .* \(([\d,]+) B, requested ([\d,]+) B\) at offset ([\d,]+) of region (\d+); "
                    r"allocated at event ([\d,]+) \([^)]*\), (?:freed at event ([\d,]+)|never freed)")


def _sections(text: str) -> list[str]:
    return text.split("<section>")[1:]


def _drawn(section: str) -> list[tuple[int, ...]]:
    """Each drawn chunk of a section as (offset, region, size, requested, start event, end event or -1)."""
    def number(s: str | None) -> int:
        return -1 if s is None else int(s.replace(",", ""))
    return sorted((number(m[3]), number(m[4]), number(m[1]), number(m[2]), number(m[5]), number(m[6]))
                  for m in (_CHUNK.search(t.text) for t in Page(section).find("title")) if m)


def _replayed(requests: bfc.Requests, options: bfc.BFCOptions) -> list[tuple[int, ...]]:
    """The same, from the BFC model's replay of the requests (each free found from the requests' own pairing).
    From an empty allocator with growth, regions lie at ascending addresses in the order they were made, so
    the picture's numbers (1 the lowest addresses) are the model's region ids plus one."""
    sim = bfc.simulate(requests, options)
    done = len(sim.bytes_in_use)
    freed_at = {int(requests.frees[row]): row for row in range(done) if not requests.is_alloc[row] and requests.frees[row] >= 0}
    return sorted((int(sim.offset[row]), int(sim.region[row]) + 1, int(sim.chunk_bytes[row]),
                   int(requests.requested_bytes[row]), row, freed_at.get(row, -1))
                  for row in range(done) if requests.is_alloc[row] and sim.region[row] >= 0)


def test_fit_vs_html_draws_the_largest_batch_that_fits_and_the_first_that_does_not(tmp_path: Path) -> None:
    from memtrace.allocator.batch_size import batch_scaling
    from memtrace.allocator.requests import requests_for

    small, large = BATCHES / "cnn_b16.xplane.pb.gz", BATCHES / "cnn_b64.xplane.pb.gz"
    page = tmp_path / "batch.html"
    # GIVEN the CNN at batch 16 and 64, asked for the largest batch under 16 MiB (36: see tests/test_batch_fit.py)
    assert main(["fit", str(small), "--vs", str(large), "--limit", "16MiB", "--no-alternatives", "--html",
                 "-o", str(page)]) == 0
    text = page.read_text()
    dom = Page(text)
    # THEN a page says it is a prediction from two recordings, with one picture per batch: 36 fits, 37 fails
    [h1] = dom.find("h1")
    assert h1.text == (f"memtrace fit: predicted from two recordings, {small} (batch 16) and {large} (batch 64)")
    assert [h.text for h in dom.find("h2")] == [f"{CPU}, batch 36", f"{CPU}, batch 37"]
    assert len(dom.find("svg", "address-space")) == 2 and len(dom.find("script")) == 2
    fits, fails = _sections(text)
    assert "A prediction from two recordings, not a recorded layout" in fits
    assert not Page(fits).find("line", "failure") and len(Page(fails).find("line", "failure")) == 1
    # the request fit --vs says fails at batch 37 (37 x 30 x 30 x 32 float32: 4.06 MiB, tests/test_batch_fit.py)
    assert f"out of memory: {37 * 30 * 30 * 32 * 4 / MIB:.2f} MiB for gradient_tape/sequential_1/max_pooling2d_1/" \
           "MaxPool2d/MaxPoolGrad" in fails
    # AND every box is a chunk of the BFC model's replay of that batch's predicted requests, no more, no fewer
    model = batch_scaling(requests_for(memtrace.load(small), CPU).requests,
                        requests_for(memtrace.load(large), CPU).requests, (16, 64))
    options = bfc.BFCOptions(16 * MIB, allow_growth=True, garbage_collection=False)
    for batch, section in ((36, fits), (37, fails)):
        ours = _drawn(section)
        assert ours == _replayed(model.requests_at(batch), options) and len(ours) > 500


def test_fit_vs_html_batch_n_and_names_escaped(tmp_path: Path) -> None:
    # GIVEN two hand-made recordings at batch 1 and 2 whose ops carry markup; sizes double with the batch
    hostile = '<img src=x onerror="alert(1)">/op'

    def recording(batch: int) -> Path:
        a, b = 1024 * batch, 256
        events = [_event("alloc", 10, a, a, 0x1000, hostile), _event("alloc", 20, b, a + b, 0x9000, "ok/b"),
                  _event("dealloc", 30, a, b, 0x1000), _event("dealloc", 40, b, 0, 0x9000)]
        return _write(tmp_path, _space(events), f"b{batch}.xplane.pb")

    small, large = recording(1), recording(2)
    page = tmp_path / "batch.html"
    assert main(["fit", str(small), "--vs", str(large), "--batch-sizes", "1,2", "--batch", "4", "--html",
                 "-o", str(page)]) == 0
    text = page.read_text()
    # THEN the names are text, never markup; batch 4's chunks: 4,096 B for the hostile op, 256 B for the other
    assert "<img" not in text and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in text
    assert not Page(text).find("img")
    assert [h.text for h in Page(text).find("h2")] == ["cpu_bfc, batch 4"]
    [section] = _sections(text)
    assert [(size, requested) for _, _, size, requested, _, _ in _drawn(section)] == [(4096, 4096), (256, 256)]
    assert "under its smallest limit (1,048,576 bytes)" in section


@pytest.mark.parametrize(("args", "says"), [
    (["--html", "-o", "OUT"], "give --batch N, or --limit SIZE"),
    (["--html", "--batch", "4"], "needs -o/--output FILE"),
])
def test_fit_vs_html_refuses_what_it_cannot_draw(args: list[str], says: str, capsys: pytest.CaptureFixture[str],
                                                 tmp_path: Path) -> None:
    small, large = BATCHES / "cnn_b16.xplane.pb.gz", BATCHES / "cnn_b64.xplane.pb.gz"
    out = tmp_path / "x.html"
    assert main(["fit", str(small), "--vs", str(large), *[str(out) if a == "OUT" else a for a in args]]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err and not out.exists()


# -- pictures that show the answer (issue 35, items 1-6) ---------------------------------------------------------

CNN = FIXTURES / "fit" / "cnn.xplane.pb.gz"  # a Keras run from the allocator's birth: 0.95 s of start-up, 3 steps


def test_time_axis_cuts_idle_stretches_short_by_hand() -> None:
    from memtrace.reporters.address_space import TimeAxis, idle_cap, tick_label, ticks, time_axis

    # GIVEN events at 0, 1, 2, 3 and 1,000 ns: four gaps, so no gap may take more than 1.5 / 4 of what is drawn;
    # the largest c with c <= 0.375 * (1 + 1 + 1 + c) is 1.8: the idle 997 ns are drawn 1 ns long (whole ns)
    assert idle_cap([1, 1, 1, 997]) == 1
    axis = time_axis([0, 1, 2, 3, 1000])
    assert axis == TimeAxis((0, 1, 2, 3, 4), 4, 1, ((3, 3, 997),))
    assert axis.real(3.5) == 501.5 and axis.real(4) == 1000 and axis.real(2) == 2
    # gaps of a fiftieth or less of the whole are never cut
    assert time_axis(list(range(0, 200, 2))).breaks == ()
    # ticks are round real times in the uncut stretches, labelled in the step's unit
    assert [label for _, label in ticks(axis, 0, 4, target=2)] == ["0 ns", "2 ns", "1.000 us"]
    assert tick_label(1_034_100_000, 100_000) == "1.0341 s" and tick_label(805_000_000, 5_000_000) == "805 ms"


def test_the_picture_opens_on_the_steps_of_a_keras_run() -> None:
    from memtrace.reporters.address_space import focus, time_axis

    space = address_space(memtrace.load(CNN), CPU)
    axis = time_axis(space.time_ns)
    opening = focus(space, axis)
    assert opening is not None
    low, high = axis.real(opening[0]), axis.real(opening[1])
    # the start-up ends with 161.7 ms without an event (at 786 ms) and 25 ms of variables; the three
    # train_on_batch steps come after 0.95 s (fixtures/fit/cnn.json): the view holds them and the peak
    peak = space.time_ns[space.peak_event]  # type: ignore[index]
    assert 0.9e9 < low < 0.96e9 and low < peak < high


def test_grey_is_free_and_nothing_else(tmp_path: Path) -> None:
    from memtrace.reporters.address_space import FREE, PALETTE

    page = tmp_path / "fit.html"
    assert main(["fit", str(CNN), "--html", "-o", str(page)]) == 0
    text = page.read_text()
    fills = set(re.findall(r'<rect x="[^"]*" y="[^"]*" width="[^"]*" height="[^"]*"(?: data-w="[^"]*")? fill="([^"]*)"', text))
    # every chunk is a colour of the palette (none grey), or one of the two hatches the legend names
    assert fills <= set(PALETTE) | {"url(#more-0)", "url(#unknown-0)"} and {"url(#more-0)", "url(#unknown-0)"} <= fills
    legend = re.sub(r"<[^>]+>", "", text.split('<ul class="legend">')[1].split("</ul>")[0]).split("\n")
    assert legend[1] == "free" and any("more groups" in line for line in legend)
    assert any(line.startswith("in use, op unknown") for line in legend)
    assert f'fill="{FREE}"' in text and text.count(f'fill="{FREE}"') == len(Page(text).find("rect", "free"))


def test_with_group_by_layer_the_legend_speaks_layers(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    assert main(["report", str(CNN), "--group-by", "layer", "-o", str(page)]) == 0
    keys = re.findall(r"<code>([^<]*)</code>", page.read_text().split('<ul class="legend">')[1].split("</ul>")[0])
    # the conv_b backward pass first (its 21.3 MiB gradients, three steps), then conv_a's; no whole scopes
    assert keys[:2] == ["conv_b (backward)", "conv_a (backward)"] and "(input data) (other)" in keys
    assert not any("/" in key for key in keys)
    # AND the icicle's op row names the op within its layer, not the shared StatefulPartitionedCall/... prefix
    assert 'title="backward/conv_b/convolution/Conv2DBackpropInput' in page.read_text()


def test_each_page_leads_with_the_answer_its_text_leads_with(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from .helpers import run

    fit_page, vs_page = tmp_path / "fit.html", tmp_path / "vs.html"
    assert main(["fit", str(OOM50), "--limit", "49MiB", "--html", "-o", str(fit_page)]) == 1
    [answer] = Page(fit_page.read_text()).find("p", "answer")
    _, text, _ = run(capsys, "fit", str(OOM50), "--limit", "49MiB")
    assert "smallest limit: 50 MiB" in text and "under 49 MiB: does NOT fit" in text
    assert answer.text.startswith(f"{CPU}: the smallest limit is 50 MiB; under 49 MiB it does NOT fit: Fill asks for 20 MiB")
    small, large = BATCHES / "cnn_b16.xplane.pb.gz", BATCHES / "cnn_b64.xplane.pb.gz"
    assert main(["fit", str(small), "--vs", str(large), "--limit", "16MiB", "--no-alternatives", "--html",
                 "-o", str(vs_page)]) == 0
    _, text, _ = run(capsys, "fit", str(small), "--vs", str(large), "--limit", "16MiB", "--no-alternatives")
    flat = " ".join(text.split())
    assert "under 16 MiB the largest batch is 36 in the prediction" in flat
    assert "every plausible run fits up to batch 36; some fits up to batch 42" in flat
    answers = [p.text for p in Page(vs_page.read_text()).find("p", "answer")]
    assert len(answers) == 2 and all(
        "the largest batch is 36 (every plausible run fits up to batch 36, some up to 42)" in a for a in answers)
    assert answers[0].startswith(f"{CPU}: under 16 MiB the largest batch is 36")
    assert "batch 36 needs 14 MiB" in answers[0] and "batch 37 needs 17 MiB" in answers[1] and "batch 37 needs 17 MiB" in flat


def test_the_report_legend_counts_the_snapshots_its_header_counts(tmp_path: Path) -> None:
    # GIVEN the report of 3,270 snapshots drawn as 100 (each bucket's largest disagreement)
    page = tmp_path / "report.html"
    assert main(["report", str(CNN), "--points", "100", "-o", str(page)]) == 0
    text = page.read_text()
    matched = memtrace.load(CNN).peak(CPU).reconciliation
    assert f"{matched.matched} of {matched.snapshots}" in text  # the header
    agreeing = int(re.search(r"agreeing with the replay \(([\d,]+)\)", text).group(1).replace(",", ""))  # type: ignore[union-attr]
    off = int(re.search(r"snapshot disagreeing \(([\d,]+)\)", text).group(1).replace(",", ""))  # type: ignore[union-attr]
    assert (agreeing, off) == (matched.matched, matched.snapshots - matched.matched) == (3270, 0)


def test_the_largest_hole_beside_the_request_is_the_one_fit_finds(tmp_path: Path) -> None:
    from memtrace.allocator.fit import fit
    from memtrace.reporters.address_space import largest_hole

    # the 2 MiB region at the failure holds 256 + 262,144 in use, 262,144 free, 262,144 in use: the rest,
    # 2,097,152 - 786,688 = 1,310,464 B, is the largest hole; fit's memory map says the same
    space = address_space(memtrace.load(OOM50), CPU, limit=49 * MIB)
    failure = fit(memtrace.load(OOM50), CPU, limit=49 * MIB, alternatives=False).failure
    assert failure is not None and failure.largest_free_bytes == 1_310_464
    assert largest_hole(space) == (0, 786_688, 1_310_464)
    page = tmp_path / "fit.html"
    assert main(["fit", str(OOM50), "--limit", "49MiB", "--html", "-o", str(page)]) == 1
    [hole] = Page(page.read_text()).find("rect", "hole")
    [request] = Page(page.read_text()).find("rect", "request")
    # drawn side by side at one scale: the request 16 times the hole's height (20 MiB against 1.25 MiB)
    assert float(request.attrs["height"]) / float(hole.attrs["height"]) == pytest.approx(20 * MIB / 1_310_464, rel=0.01)


def _share_of_width_with_chunks(shot: Path) -> float:
    """The share of the picture's columns in which chunks fill at least a quarter of its bands: the bands are
    the largest block of rows with the free space's light grey; a chunk pixel is neither that grey nor white."""
    image = read_png(shot)[:, :, :3].astype(np.int64)
    free = np.abs(image - np.array([0xE5, 0xE7, 0xEB])).sum(axis=2) <= 6
    rows = np.flatnonzero(free.sum(axis=1) >= 200)
    blocks, start = [], rows[0]
    for a, b in itertools.pairwise(rows):
        if b - a > 20:
            blocks.append((start, a))
            start = b
    blocks.append((start, rows[-1]))
    y0, y1 = max(blocks, key=lambda block: block[1] - block[0])
    columns = np.flatnonzero(free[y0:y1 + 1].sum(axis=0) >= 3)
    box = image[y0:y1 + 1, columns[0]:columns[-1] + 1]
    chunk = ~free[y0:y1 + 1, columns[0]:columns[-1] + 1] & ~(box >= 245).all(axis=2)
    return float((chunk.mean(axis=0) >= 0.25).mean())


@pytest.mark.parametrize("page", ["fit", "report", "fit-vs"])
def test_keras_pages_give_the_chunks_the_width_at_1400_pixels(tmp_path: Path, page: str) -> None:
    # GIVEN a Keras run with 0.95 s of start-up before three steps of 0.03 s, drawn in Chromium 1400 px wide
    target = tmp_path / f"{page}.html"
    command = {"fit": ["fit", str(CNN), "--html"], "report": ["report", str(CNN), "--group-by", "layer"],
               "fit-vs": ["fit", str(BATCHES / "cnn_b16.xplane.pb.gz"), "--vs", str(BATCHES / "cnn_b64.xplane.pb.gz"),
                          "--limit", "16MiB", "--no-alternatives", "--html"]}[page]
    assert main([*command, "-o", str(target)]) in (0, 1)
    shot = tmp_path / "shot.png"
    done = run_chromium(tmp_path, "--window-size=1400,1800", f"--screenshot={shot}", target.as_uri())
    assert not console_errors(done.stderr)
    # THEN the chunks fill a good share of the picture's width (the picture with events on the axis, the
    # start-up nine tenths of it: under 3%; with time, idle cut short and the view on the steps: 32% to 60%)
    assert _share_of_width_with_chunks(shot) > 0.2


def test_the_script_zooms_and_its_axis_says_what_the_servers_would(tmp_path: Path) -> None:
    import json

    from memtrace.reporters.address_space import LEFT, RIGHT, WIDTH, ticks, time_axis

    page = tmp_path / "fit.html"
    assert main(["fit", str(CNN), "--html", "-o", str(page)]) == 0
    done = run_chromium(tmp_path, "--window-size=1400,1000", "--dump-dom", page.as_uri() + "#selftest")
    assert not console_errors(done.stderr)
    dom = Page(done.stdout)
    (root,) = dom.find("html")
    assert "data-errors" not in root.attrs and root.attrs["data-address-spaces"] == "1"
    (figure,) = dom.find("figure", "address-space")
    found = json.loads(figure.attrs["data-selftest"])
    a, b = found["view"]
    x, w, zoomed_x, zoomed_w = found["first"]
    # the first chunk moved and stretched as the view [a, b] of the picture's width says
    assert zoomed_x == pytest.approx(LEFT + (x - a) * WIDTH / (b - a), abs=0.002)
    assert zoomed_w == pytest.approx(max(w * WIDTH / (b - a), 0.6), abs=0.002)
    # and the zoomed axis has the ticks the server's function gives for the same drawn span
    space = address_space(memtrace.load(CNN), CPU)
    axis = time_axis(space.time_ns)
    low, high = (a - LEFT) / WIDTH * axis.total_ns, (b - LEFT) / WIDTH * axis.total_ns
    assert [label for _, label in found["ticks"]] == [label for _, label in ticks(axis, low, high)]
    # AND the labels above the plot stay inside the picture, zoomed or not (about 6 units a character)
    for shown in (dom, Page(page.read_text())):
        for label in shown.find("text", "peak-note") + shown.find("text", "failure-note"):
            if label.attrs.get("visibility") == "hidden":  # its line is outside the zoomed view
                continue
            at, room = float(label.attrs["x"]), 6 * len(label.text)
            start = {"start": at, "end": at - room, "middle": at - room / 2}[label.attrs["text-anchor"]]
            assert 0 <= start and start + room <= LEFT + WIDTH + RIGHT, (label.text, start, room)


def test_regions_are_numbered_from_the_lowest_address_as_the_profile_places_them(tmp_path: Path) -> None:
    # GIVEN the Keras run's profile, whose chunk addresses the model reproduces, and its raw events (protobuf alone)
    events = memory_events(CNN, CPU)
    page = tmp_path / "fit.html"
    assert main(["fit", str(CNN), "--html", "-o", str(page)]) == 0
    text = page.read_text()
    # WHEN each drawn chunk is placed by its event's own address
    lowest: dict[int, int] = {}
    for title in (t.text for t in Page(text).find("title")):
        found = _CHUNK.search(title)
        if found:
            region, event = int(found[4]), int(found[5].replace(",", ""))
            address = int(events[event]["addr"]) - int(found[3].replace(",", ""))  # the region's base
            assert lowest.setdefault(region, address) == address  # one base per region
    # THEN region 1 has the lowest base, and the numbers rise with the addresses, top to bottom on the page
    assert sorted(lowest) == [1, 2, 3] and [lowest[1], lowest[2], lowest[3]] == sorted(lowest.values())
    labels = re.findall(r'text-anchor="end" font-size="11">(region \d+: [^<]*)</text>', text)
    assert labels == ["region 1: 32 MiB", "region 2: 4 MiB", "region 3: 2 MiB"]


def test_the_oom_page_of_a_keras_run_leads_with_its_verdict_in_chromium(tmp_path: Path) -> None:
    # GIVEN the dump of a Keras fit that ran out (fixtures/oom/cpu_keras_fit.log), drawn 1400 px wide
    page = tmp_path / "oom.html"
    assert main(["oom", str(FIXTURES / "oom" / "cpu_keras_fit.log"), "--html", "-o", str(page)]) == 0
    [answer] = Page(page.read_text()).find("p", "answer")
    assert answer.text.startswith("Enough bytes were free in total, but no free chunk")
    shot = tmp_path / "oom.png"
    done = run_chromium(tmp_path, "--window-size=1400,1100", f"--screenshot={shot}", page.as_uri())
    assert not console_errors(done.stderr)
    image = read_png(shot)[:, :, :3].astype(np.int64)

    def pixels_near(colour: tuple[int, int, int]) -> int:
        return int((np.abs(image - np.array(colour)).sum(axis=2) < 30).sum())

    def longest_run(colour: tuple[int, int, int]) -> int:
        """The longest row of pixels of this colour: the width of the widest bar drawn in it."""
        near = np.abs(image - np.array(colour)).sum(axis=2) < 30
        best = 0
        for row in near[near.any(axis=1)]:
            edges = np.flatnonzero(np.diff(np.concatenate(([0], row.astype(np.int8), [0]))))
            best = max(best, int((edges[1::2] - edges[::2]).max()))
        return best

    # THEN the request (a red outline, 32 MiB) is drawn beside the largest hole (green, 8 MiB): four times as wide
    assert pixels_near((0x16, 0xA3, 0x4A)) > 2_000
    assert longest_run((0xDC, 0x26, 0x26)) == pytest.approx(4 * longest_run((0x16, 0xA3, 0x4A)), rel=0.03)


def test_fits_text_map_numbers_the_regions_as_its_page_does(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the eager program under 800 MiB (it runs out with four regions made, later ones at lower addresses)
    # WHEN fit writes its text and its page THEN region N is the same region in both: 1, 2, ... in address order.
    eager, page = FIXTURES / "fit" / "eager.xplane.pb.gz", tmp_path / "eager.html"
    assert main(["fit", str(eager), "--limit", "800MiB", "--no-alternatives"]) == 1
    text = capsys.readouterr().out
    rows = re.findall(r"^\s+(\d+)\s+[\d,]+\s+([\d.]+ [KMG]?i?B)\s+(?:in use|free)", text, re.MULTILINE)
    assert main(["fit", str(eager), "--limit", "800MiB", "--no-alternatives", "--html", "-o", str(page)]) == 1
    drawn = dict(re.findall(r"region (\d): (\d+ [KMG]iB)", page.read_text()))
    units = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    summed: dict[str, float] = {}
    for number, size in rows:
        value, unit = size.split()
        summed[number] = summed.get(number, 0.0) + float(value) * units[unit]
    assert sorted(drawn) == sorted(summed) == ["1", "2", "3", "4"]
    for number, size in drawn.items():  # each region's chunks add up to the region the page draws (3 digits shown)
        value, unit = size.split()
        assert abs(summed[number] - float(value) * units[unit]) <= 0.01 * float(value) * units[unit]
    assert drawn["1"] == "2 MiB"  # the first region (growth's 2 MiB) lies lowest: number 1 on both


def test_a_first_request_that_fails_lays_out_nothing() -> None:
    # GIVEN 8 KiB asked of an allocator without growth under a 4 KiB limit
    space = lay_out(bfc.Requests.from_events([("a", 8192, "big")]), bfc.BFCOptions(4096, allow_growth=False), "hand")
    # THEN no event was served: no chunk, nothing in use, the failure is the first event's 8 KiB
    assert (space.events, space.boxes, space.peak_event, space.peak_in_use_bytes) == (0, (), None, 0)
    assert (space.failed_event, space.failed_request_bytes, space.failed_op) == (0, 8192, "big")


def test_a_profile_after_the_allocators_birth_is_the_models_layout_not_the_allocators() -> None:
    # GIVEN a Keras profile that starts after the allocator's birth (chunks in use before it, addresses unknown)
    space = address_space(memtrace.load(FIXTURES / "profiles" / "keras_cnn.xplane.pb.gz"), CPU)
    # THEN the layout is the model's from an empty allocator, and says so
    assert not space.exact and "the trace starts after the allocator's birth" in space.note


def test_a_gpu_trace_without_a_limit_is_laid_out_in_twice_its_rounded_peak(tmp_path: Path) -> None:
    # GIVEN a GPU allocator (its limit depends on the card, the trace does not say it) whose step holds
    # 40 GiB and 256 bytes at once: more than half the 64 GiB the picture otherwise lays out in
    big = 40 << 30
    events = [_event("alloc", 10, big, big, 0x1000, "big/a", allocator="GPU_0_bfc"),
              _event("alloc", 20, 256, big + 256, 0x1000 + big, "small/b", allocator="GPU_0_bfc"),
              _event("dealloc", 30, big, 256, 0x1000, allocator="GPU_0_bfc")]
    space = address_space(memtrace.load(_write(tmp_path, _space(events))), "GPU_0_bfc")
    # THEN one region of twice the rounded peak (2 x (40 GiB + 256)), and the note says that limit
    assert space.regions == ((0, 2 * (big + 256)),)
    assert "in one region of a limit larger than the trace needs (85,899,346,432 bytes)" in space.note


def test_a_small_gpu_trace_without_a_limit_is_laid_out_in_one_region_of_64_gib(tmp_path: Path) -> None:
    # GIVEN a GPU allocator (its limit depends on the card, the trace does not say it) whose step holds 1 MiB at most
    events = [_event("alloc", 10, 1 << 20, 1 << 20, 0x1000, "a", allocator="GPU_0_bfc"),
              _event("dealloc", 30, 1 << 20, 0, 0x1000, allocator="GPU_0_bfc")]
    space = address_space(memtrace.load(_write(tmp_path, _space(events))), "GPU_0_bfc")
    # THEN one region of TF's CPU default limit, 64 GiB (far above twice what it needs), which the note says
    assert space.regions == ((0, 64 << 30),)
    assert "in one region of a limit larger than the trace needs (68,719,476,736 bytes)" in space.note


def test_a_gpu_layout_takes_tfs_garbage_collection_unless_told(tmp_path: Path) -> None:
    # GIVEN a small TF GPU trace: TF's GPU allocator collects garbage by default
    events = [_event("alloc", 10, 1 << 20, 1 << 20, 0x1000, "a", allocator="GPU_0_bfc"),
              _event("dealloc", 30, 1 << 20, 0, 0x1000, allocator="GPU_0_bfc")]
    trace = memtrace.load(_write(tmp_path, _space(events)))
    assert address_space(trace, "GPU_0_bfc").options.garbage_collection is True
    assert address_space(trace, "GPU_0_bfc", garbage_collection=False).options.garbage_collection is False


def test_step_markers_sit_where_each_steps_own_picture_puts_them() -> None:
    # GIVEN a Keras profile of three steps, drawn whole and one step at a time
    path = FIXTURES / "profiles" / "keras_cnn.xplane.pb.gz"
    whole = address_space(memtrace.load(path), CPU)
    first = 0  # the index, in the whole picture, of each step's first memory event
    for number in range(3):
        alone = address_space(memtrace.load(path, step=number), CPU)
        # THEN each step's picture marks its own step only, before its first memory event (time 0 there) ...
        ((marked, start),) = alone.step_starts_ns
        assert marked == number and start < 0
        # ... and the whole picture marks the step as far before that event as the step's own picture does
        assert whole.step_starts_ns[number][0] == number
        assert whole.time_ns[first] - whole.step_starts_ns[number][1] == -start
        first += len(alone.time_ns)
    assert first == len(whole.time_ns) and len(whole.step_starts_ns) == 3


def test_a_predicted_layout_is_never_called_the_allocators_own() -> None:
    from memtrace.allocator.address_space import predicted_address_space

    batches = FIXTURES / "batches"
    fitted = memtrace.fit_batches(batches / "cnn_b16.xplane.pb.gz", batches / "cnn_b64.xplane.pb.gz",
                                  batch_sizes=(16, 64), limit="16MiB", orders=0)
    space = predicted_address_space(fitted, 36, "b16", "b64")
    # THEN no trace recorded it: not exact, and the note says it is a prediction, under the limit asked
    assert not space.exact and space.boxes
    assert space.note.startswith("a prediction from two recordings, not a recorded layout: batch 36's requests")
    assert space.note.endswith("under a limit of 16,777,216 bytes")
