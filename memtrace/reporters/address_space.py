"""The allocator's address space over time as a picture (inline SVG), like PyTorch's allocator state history.

Time runs left to right, each idle stretch (a gap between two events longer than about 2% of
what is drawn) cut short and marked, so that a Keras profile's long start-up and the pauses
between batches take little room and the chunks the whole width; drag across the picture to zoom
into a time range, double-click (or the button) to see it all again (``assets/address_space.js``).
The regions run top to bottom in address order, numbered from 1 as the out-of-memory page numbers
them (region 1 the lowest addresses), each a band of its own (the space between regions is not
drawn: it is not the allocator's), its offsets growing downwards.

Every chunk is a box from its allocation to its free, coloured by group: the layer's name scope
(``sequential_1/conv_b_1``, under ``gradient_tape/`` for the backward pass) where the names show a
Keras model, the op's scope elsewhere, or with ``group_by="layer"`` the Keras layer and phase
(:mod:`memtrace.trace.layers`). Light grey is free space and nothing else: the groups beyond the
legend's first twelve are hatched in grey on white, and chunks whose op the trace does not say are
hatched in brown, each with its own legend entry. The peak (the first event at the most bytes in
use) is a dashed line; a failed request is a red line, with the request drawn at the same scale
beside the regions. Every name from a trace goes through :func:`esc`; a picture of many chunks
keeps the largest (by bytes times drawn time) and says how many it left out.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO

import numpy as np

from ..allocator.address_space import AddressSpace
from ..trace.data import NO_OP
from ..trace.layers import LayerNames, input_data_of, layer_of, scope_of, shows_keras
from ..units import format_bytes, format_us
from ..version import __version__
from .common import asset, esc

WIDTH, HEIGHT = 900, 420  # the plot, in SVG user units
LEFT, RIGHT, TOP, BOTTOM = 110, 60, 46, 44
BAND_GAP = 10  # between two regions' bands
MAX_BOXES = 4_000  # about 1.5 MB of SVG
LEGEND = 12
IDLE_SHARE = 0.02  # of the drawn time: at most this much for one idle stretch
FREE = "#e5e7eb"  # light grey: free space, and only that
OTHER_INK, UNKNOWN_INK, UNKNOWN_PAPER = "#4b5563", "#92400e", "#fde68a"


# -- time as the picture draws it ---------------------------------------------------------------


@dataclass(frozen=True)
class TimeAxis:
    """Real time with each idle stretch cut to ``cap_ns``: a gap between two events longer than that
    is drawn ``cap_ns`` long. ``breaks`` are those gaps: (drawn start, real start, real length), in ns."""

    drawn_ns: tuple[int, ...]  # per event, where it is drawn
    total_ns: int  # the drawn length of the whole
    cap_ns: int
    breaks: tuple[tuple[int, int, int], ...]

    def stretches(self) -> list[tuple[float, float, float]]:
        """The uncut stretches: (drawn start, drawn end, real start), in order."""
        found, start, real_start = [], 0.0, 0.0
        for cut_start, cut_real, cut_length in self.breaks:
            found.append((start, float(cut_start), real_start))
            start, real_start = float(cut_start + self.cap_ns), float(cut_real + cut_length)
        found.append((start, float(self.total_ns), real_start))
        return found

    def real(self, drawn: float) -> float:
        """The real time at a drawn time (inside a cut stretch: spread evenly over it)."""
        shift = 0
        for start, real_start, length in self.breaks:
            if drawn < start:
                break
            if drawn < start + self.cap_ns:
                return real_start + (drawn - start) * length / self.cap_ns
            shift = real_start + length - (start + self.cap_ns)
        return drawn + shift


def idle_cap(gaps: Sequence[int], share: float = IDLE_SHARE) -> int:
    """The longest a gap may be drawn: the largest ``c`` with ``c <= share' * sum(min(g, c))`` (no gap
    takes more than that share of the drawn time), where ``share'`` is ``share``, or more where there
    are few gaps (``1.5 / gaps``: fewer than 1 / share gaps could not meet ``share`` at all). No gap
    longer than that: the longest gap, nothing is cut."""
    if not len(gaps):
        return 0
    lengths = np.asarray(gaps, dtype=np.float64)
    share = max(share, 1.5 / len(lengths))
    longest = int(lengths.max())
    if longest <= share * lengths.sum():
        return longest
    low, high = 0.0, float(longest)
    for _ in range(64):  # h(c) = share * sum(min(g, c)) - c is concave, h(0) = 0: its root by bisection
        middle = (low + high) / 2
        low, high = (middle, high) if share * np.minimum(lengths, middle).sum() >= middle else (low, middle)
    return max(int(low), 1)


def time_axis(time_ns: Sequence[int], share: float = IDLE_SHARE) -> TimeAxis:
    """Where each event is drawn: real time, with every gap longer than :func:`idle_cap` cut to it."""
    times = [max(t, 0) for t in time_ns]
    for i in range(1, len(times)):  # never backwards (a trace's clock is per op)
        times[i] = max(times[i], times[i - 1])
    gaps = [b - a for a, b in itertools.pairwise(times)]
    cap = idle_cap(gaps, share)
    drawn, breaks, at = [times[0] if times else 0], [], times[0] if times else 0
    for i, gap in enumerate(gaps):
        if gap > cap:
            breaks.append((at, times[i], gap))
        at += min(gap, cap)
        drawn.append(at)
    return TimeAxis(tuple(drawn), max(at, 1), max(cap, 1), tuple(breaks))


def ticks(axis: TimeAxis, low: float, high: float, target: int = 6) -> list[tuple[float, str]]:
    """(drawn time, label) of round real times inside the drawn range, about ``target`` of them: a round
    step in each uncut stretch, none inside a cut one, none crowding the one before. The page's script
    (``assets/address_space.js``) does the same on zoom."""
    span = max(high - low, 1.0)
    step = next(m * 10**k for k in range(19) for m in (1, 2, 5) if m * 10**k * target >= span)
    found: list[tuple[float, str]] = []
    for d0, d1, r0 in axis.stretches():
        a, b = max(d0, low), min(d1, high)
        if a > b:
            continue
        real = math.ceil((r0 + (a - d0)) / step) * step
        while real <= r0 + (b - d0):
            drawn = d0 + (real - r0)
            if not found or drawn - found[-1][0] >= span / (target * 1.6):
                found.append((drawn, tick_label(real, step)))
            real += step
    return found


def tick_label(real_ns: int, step_ns: int) -> str:
    """A tick's time in the unit of its size, with the decimals its step needs (``805.5 ms``)."""
    for unit, power in (("s", 9), ("ms", 6), ("us", 3), ("ns", 0)):
        if real_ns >= 10**power or step_ns * 10 >= 10**power or power == 0:
            decimals = max(0, power - (len(str(step_ns)) - 1))  # a step is 1, 2 or 5 times a power of ten
            return f"{real_ns / 10**power:.{decimals}f} {unit}"
    raise AssertionError("unreachable: the last unit takes every time")


FOCUS_EVENTS = 16  # a picture of fewer events opens whole
FOCUS_SHARES = (0.9, 0.75)  # of what comes and goes, what the opening view holds: the first that leaves a view


def focus(space: AddressSpace, axis: TimeAxis) -> tuple[float, float, float] | None:
    """Where the picture opens, in drawn time, and the share of what comes and goes it holds; None where
    the whole picture is the view anyway.

    What comes and goes: each chunk counted at its allocation and at its free (or the end) by its
    bytes squared (a few large chunks decide whether a step fits, not many small ones), times the
    share of the picture it does not live (what stays from the start-up to the end counts little).
    The view is the shortest span of events that holds 90% of it (else 75%), widened to hold the
    peak and the failure and padded by a tenth (a tenth of the picture wide at least), where that is
    less than 70% of the picture. As the
    report's memory chart opens where the bytes move (:func:`memtrace.analyses.report.focus_window`):
    a Keras profile's start-up allocates its weights and the optimizer's slots once, over a long time
    (they stay, and cross the opening view as bars), its steps allocate and free much in a short one.
    """
    last = len(axis.drawn_ns) - 1
    if last < FOCUS_EVENTS:  # a handful of events reads whole
        return None
    moved = [0.0] * (last + 1)
    for b in space.boxes:
        start, stop = min(b.start_event, last), last if b.end_event is None else min(b.end_event, last)
        lives = (axis.drawn_ns[stop] - axis.drawn_ns[start]) / axis.total_ns
        moved[start] += float(b.size_bytes) ** 2 * max(0.0, 1 - lives)
        moved[stop] += float(b.size_bytes) ** 2 * max(0.0, 1 - lives)
    whole = sum(moved)
    anchors = [e for e in (space.peak_event, space.failed_event) if e is not None]
    for share in FOCUS_SHARES if whole else (0.0,):
        if whole:
            first, final = _shortest(moved, axis.drawn_ns, share * whole)
        else:  # nothing comes and goes: around the peak and the failure
            first = final = anchors[0] if anchors else 0
        for event in anchors:
            first, final = min(first, event), max(final, min(event + 1, last))
        # padded by a tenth, and at least a tenth of the whole wide (a view of one event says nothing)
        pad = max((axis.drawn_ns[final] - axis.drawn_ns[first]) / 10,
                  (axis.total_ns / 10 - (axis.drawn_ns[final] - axis.drawn_ns[first])) / 2)
        low, high = max(0.0, axis.drawn_ns[first] - pad), min(float(axis.total_ns), axis.drawn_ns[final] + pad)
        if high - low < 0.7 * axis.total_ns:
            return low, high, share
    return None


def _shortest(moved: list[float], drawn_ns: Sequence[int], need: float) -> tuple[int, int]:
    """The events (first, last) of the shortest drawn span whose events hold ``need`` of ``moved``."""
    last = len(moved) - 1
    found, best = (0, last), float("inf")
    held, j = 0.0, -1  # the events i..j hold `held`; for each i, the least j that holds enough
    for i in range(last + 1):
        while held < need and j < last:
            j += 1
            held += moved[j]
        if held < need:
            break
        if drawn_ns[j] - drawn_ns[i] < best:
            best, found = drawn_ns[j] - drawn_ns[i], (i, j)
        held -= moved[i]
    return found


# -- groups and their looks ---------------------------------------------------------------------


def unknown_op(op: str) -> bool:
    """A chunk whose op the trace does not say (a profile's ``(no op)``, or none at all)."""
    return op in ("", NO_OP)


def size_class(size_bytes: int) -> str:
    """A chunk's size class, where every op is the same (or unknown): ``<= 16 MiB``."""
    return "<= " + format_bytes(1 << max(size_bytes - 1, 1).bit_length())


# Distinct colours for the legend's groups, largest first (no red: red marks the failure; no grey: grey is free).
PALETTE = ("#2563eb", "#16a34a", "#f59e0b", "#7c3aed", "#0891b2", "#db2777", "#65a30d", "#ea580c", "#4f46e5",
           "#0d9488", "#a16207", "#9333ea")
UNKNOWN = "(op unknown)"


def grouping(space: AddressSpace, group_by: str = "scope", layer_names: LayerNames | None = None,
             batch: int | None = None) -> tuple[str, dict[int, str]]:
    """What the chunks are grouped by, in words, and each chunk's group (by index into ``space.boxes``): its
    layer and phase (``group_by="layer"``), the layer's name scope where the names show a Keras model,
    else the op's scope or op; by size where every op is the same. Chunks of unknown ops are
    :data:`UNKNOWN` (unless, by layer, the sizes say they are input data)."""
    ops = {b.op for b in space.boxes}
    known = sorted(op for op in ops if not unknown_op(op))
    by_size = len(ops) == 1  # one op (or none known): colour by size instead
    keras = shows_keras(known)
    scoped = any("/" in op for op in known)
    names: dict[str, str] = {}
    if group_by == "layer":
        for op in known:
            where = layer_of(op, layer_names)
            names[op] = f"{where.layer} ({where.phase})"
        what = "Keras layer and phase of the step"
    elif keras:
        names = {op: scope_of(op, None, layers=True) for op in known}
        what = "layer (its name scope; gradient_tape/ is the backward pass)"
    else:
        names = {op: op.rpartition("/")[0] or op if scoped else op for op in known}
        what = "name scope" if scoped else "op"
    if by_size:
        what = "chunk size (every op is the same or unknown)"
    groups = {}
    for index, b in enumerate(space.boxes):
        if by_size:
            groups[index] = size_class(b.size_bytes)
        elif unknown_op(b.op):
            data = input_data_of(NO_OP, b.requested_bytes, None, batch) if group_by == "layer" else None
            groups[index] = f"{data.layer} ({data.phase})" if data is not None else UNKNOWN
        else:
            groups[index] = names[b.op]
    return what, groups


def _patterns(number: int) -> str:
    """The hatches of the picture ``number`` on its page (pattern ids are per page)."""
    return (f'<defs><pattern id="more-{number}" width="6" height="6" patternUnits="userSpaceOnUse" '
            f'patternTransform="rotate(45)"><rect width="6" height="6" fill="#ffffff"/>'
            f'<rect width="2" height="6" fill="{OTHER_INK}"/></pattern>'
            f'<pattern id="unknown-{number}" width="6" height="6" patternUnits="userSpaceOnUse" '
            f'patternTransform="rotate(-45)"><rect width="6" height="6" fill="{UNKNOWN_PAPER}"/>'
            f'<rect width="3" height="6" fill="{UNKNOWN_INK}"/></pattern>'
            f'<clipPath id="plot-{number}"><rect x="{LEFT}" y="0" width="{WIDTH}" height="{TOP + HEIGHT + 4}"/>'
            "</clipPath></defs>\n")


_SWATCH_MORE = f"background:repeating-linear-gradient(45deg,{OTHER_INK} 0 2px,#ffffff 2px 5px)"
_SWATCH_UNKNOWN = f"background:repeating-linear-gradient(-45deg,{UNKNOWN_INK} 0 3px,{UNKNOWN_PAPER} 3px 6px)"


# -- the picture --------------------------------------------------------------------------------


def region_numbers(space: AddressSpace) -> dict[int, int]:
    """The model's region id -> the number a person reads: 1, 2, ... in address order (the lowest first),
    as the out-of-memory page numbers the regions of a dump."""
    return {region: number for number, (region, _) in enumerate(space.regions, 1)}


def svg(space: AddressSpace, number: int = 0, group_by: str = "scope", layer_names: LayerNames | None = None,
        batch: int | None = None) -> str:
    """The picture as a ``<figure>`` holding an inline ``<svg>``, with its legend after it. ``number``
    tells the pictures of one page apart; ``group_by`` "layer" colours by Keras layer and phase (the
    names of ``layer_names`` where given; ``batch``: the batch the layers run on, for the input data)."""
    boxes = list(space.boxes)
    end = space.events + (space.failed_event is not None)
    times = list(space.time_ns[: end + 1]) or [0]
    while len(times) < end + 1:  # the end, where the chunks still in use stop: a hundredth past the last event
        times.append(times[-1] + max((times[-1] - times[0]) // 100, 1))
    axis = time_axis(times)
    scale = WIDTH / axis.total_ns

    def x_of(event: int) -> float:
        return LEFT + scale * axis.drawn_ns[min(event, len(axis.drawn_ns) - 1)]

    def x_at(drawn: float) -> float:
        return LEFT + scale * drawn

    grouped_by, groups = grouping(space, group_by, layer_names, batch)
    weight: Counter[str] = Counter()
    for index, b in enumerate(boxes):
        weight[groups[index]] += b.size_bytes
    named = [(name, size) for name, size in weight.most_common() if name != UNKNOWN]
    shown = [name for name, _ in named[:LEGEND]]
    colours = dict(zip(shown, PALETTE))
    kept = list(range(len(boxes)))
    if len(boxes) > MAX_BOXES:
        def area(index: int) -> float:
            b = boxes[index]
            stop = b.end_event if b.end_event is not None else end
            return b.size_bytes * max(x_of(stop) - x_of(b.start_event), 0.01)
        kept = sorted(sorted(kept, key=area, reverse=True)[:MAX_BOXES])

    # Bands: each region its share of the height (at least 12 units), in address order from the top.
    # Without growth, one region of the whole limit (a GPU's) can be far larger than its chunks ever
    # reach: it is drawn down to its lowest chunk. (With growth, a region's free tail is a real hole.)
    reach: dict[int, int] = {}
    for b in boxes:
        reach[b.region] = max(reach.get(b.region, 0), b.offset + b.size_bytes)
    regions = [(region, size if space.options.allow_growth or reach.get(region, 0) * 2 > size
                else max(reach.get(region, 0) * 21 // 20, 1)) for region, size in space.regions]
    cropped = {region for (region, size), (_, drawn) in zip(space.regions, regions) if drawn != size}
    numbers = region_numbers(space)
    room = HEIGHT - BAND_GAP * max(len(regions) - 1, 0)
    total = max(sum(size for _, size in space.regions), 1)  # (those given back included: each has its band)
    heights = [max(12.0, room * size / total) for _, size in regions]
    scale_h = room / sum(heights) if sum(heights) else 1.0
    heights = [h * scale_h for h in heights]
    band: dict[int, tuple[float, float, int]] = {}  # region -> (top y, height, drawn size)
    y: float = TOP
    for (region, size), h in zip(regions, heights):
        band[region] = (y, h, size)
        y += h + BAND_GAP

    parts = [(f'<svg class="address-space" viewBox="0 0 {LEFT + WIDTH + RIGHT} {TOP + HEIGHT + BOTTOM}" '
              f'role="img" aria-label="address space of {esc(space.allocator)} over time" '
              'xmlns="http://www.w3.org/2000/svg">\n'), _patterns(number)]
    whole_sizes = dict(space.regions)
    for region, _ in regions:
        top, h, _ = band[region]
        parts.append(f'<rect class="free" x="{LEFT}" y="{top:.2f}" width="{WIDTH}" height="{h:.2f}" fill="{FREE}">'
                     f'<title>region {numbers[region]}: {esc(format_bytes(whole_sizes[region]))}; light grey is free'
                     '</title></rect>\n')
        label = f"region {numbers[region]}: {format_bytes(whole_sizes[region])}"
        parts.append(f'<text x="{LEFT - 6}" y="{top + min(h / 2, 14) + 4:.2f}" text-anchor="end" font-size="11">'
                     f'{esc(label)}</text>\n')
        if region in cropped:
            parts.append(f'<text x="{LEFT - 6}" y="{top + min(h / 2, 14) + 18:.2f}" text-anchor="end" '
                         f'font-size="10" fill="#6b7280">drawn to {esc(format_bytes(dict(regions)[region]))}'
                         '</text>\n')
    parts.append(f'<g class="chunks" clip-path="url(#plot-{number})">\n')
    for region, event in space.given_back:  # garbage collection gave it back: from then on it is not the allocator's
        top, h, _ = band[region]
        gone = x_of(event)
        parts.append(f'<rect class="given-back" x="{gone:.3f}" y="{top:.2f}" width="{LEFT + WIDTH - gone:.3f}" '
                     f'height="{h:.2f}" fill="#ffffff" stroke="#9ca3af" stroke-dasharray="2 2" '
                     f'vector-effect="non-scaling-stroke"><title>region {numbers[region]} given back by garbage '
                     f'collection at event {event:,} ({format_us(times[event])})</title></rect>\n')
    for index in kept:
        b = boxes[index]
        top, h, size = band[b.region]
        y_box = top + h * b.offset / size
        height = max(h * b.size_bytes / size, 0.6)
        stop = b.end_event if b.end_event is not None else end
        x0, x1 = x_of(b.start_event), x_of(stop)
        width = x1 - x0
        group = groups[index]
        fill = f"url(#unknown-{number})" if group == UNKNOWN else colours.get(group, f"url(#more-{number})")
        freed = (f"freed at event {b.end_event:,} ({format_us(times[b.end_event])})" if b.end_event is not None
                 else "never freed")
        exact = f' data-w="{width:.3f}"' if width < 0.6 else ""
        parts.append(
            f'<rect x="{x0:.3f}" y="{y_box:.2f}" width="{max(width, 0.6):.3f}" height="{height:.2f}"{exact} '
            f'fill="{fill}" stroke="#fff" stroke-width="0.4" vector-effect="non-scaling-stroke">'
            f'<title>{esc(b.op if not unknown_op(b.op) else "(op unknown)")} ({esc(group)}): chunk '
            f'{esc(format_bytes(b.size_bytes))} ({b.size_bytes:,} B, requested {b.requested_bytes:,} B) at offset '
            f'{b.offset:,} of region {numbers[b.region]}; allocated at event {b.start_event:,} '
            f'({format_us(times[b.start_event])}), {freed}</title></rect>\n')
    for cut_start, _, length in axis.breaks:  # the idle stretches, drawn short
        parts.append(f'<rect class="idle" x="{x_at(cut_start):.3f}" y="{TOP + HEIGHT + 1}" '
                     f'width="{max(scale * axis.cap_ns, 0.6):.3f}" height="5" fill="#9ca3af">'
                     f'<title>{esc(format_us(length))} without an allocation or a free, drawn short</title></rect>\n')
    for step, start in space.step_starts_ns:
        at = _drawn_at(axis, times, start)
        if at is not None:
            parts.append(f'<g class="step-mark" data-x="{x_at(at):.3f}"><line x1="{x_at(at):.3f}" '
                         f'x2="{x_at(at):.3f}" y1="{TOP}" y2="{TOP + HEIGHT}" stroke="#64748b" stroke-dasharray="2 4"/>'
                         f'<text x="{x_at(at) + 3:.3f}" y="{TOP + 10}" fill="#475569" font-size="11">step {step}</text>'
                         '</g>\n')
    if space.peak_event is not None:
        px = (x_of(space.peak_event) + x_of(space.peak_event + 1)) / 2
        parts.append(f'<line class="peak" x1="{px:.3f}" y1="{TOP - 4}" x2="{px:.3f}" y2="{TOP + HEIGHT}" '
                     'stroke="#111827" stroke-dasharray="4 3" vector-effect="non-scaling-stroke"/>\n')
    if space.failed_event is not None:
        fx = x_of(space.failed_event)
        what = f"out of memory: {format_bytes(space.failed_request_bytes)} for {space.failed_op or '(op unknown)'}"
        parts.append(f'<line class="failure" x1="{fx:.3f}" y1="{TOP - 4}" x2="{fx:.3f}" y2="{TOP + HEIGHT}" '
                     f'stroke="#dc2626" stroke-width="2" vector-effect="non-scaling-stroke"><title>{esc(what)}</title>'
                     '</line>\n')
    parts.append("</g>\n")
    # Labels above the plot, outside the zoomed group: anchored so that they stay inside the picture.
    if space.peak_event is not None:
        px = (x_of(space.peak_event) + x_of(space.peak_event + 1)) / 2
        label = (f"peak {format_bytes(space.peak_in_use_bytes)} in use at {format_us(times[space.peak_event])} "
                 f"(event {space.peak_event:,})")
        parts.append(_label(px, TOP - 8, label, "peak-note", "#111827"))
    if space.failed_event is not None:
        fx = x_of(space.failed_event)
        what = f"out of memory: {format_bytes(space.failed_request_bytes)} for {space.failed_op or '(op unknown)'}"
        hole = largest_hole(space)
        beside = (f"; beside it in green the largest free chunk then, {format_bytes(hole[2])}" if hole is not None
                  else "; no chunk was free")
        parts.append(_label(fx, TOP - 24, f"{what} (in red at the right, to scale{beside})", "failure-note",
                            "#dc2626"))
        # The request and the largest hole at the failure, side by side at the right and to the bands' scale
        # (as the out-of-memory page draws them): the hole at its place, the request beside it, moved up as
        # far as it must to stay inside the picture.
        largest = max((size for _, size in regions), default=1)
        top, h, size = next(band[r] for r, s in regions if s == largest) if regions else (TOP, HEIGHT, 1)
        if hole is not None:
            top, h, size = band[hole[0]]
            top += h * hole[1] / size
            parts.append(f'<rect class="hole" x="{LEFT + WIDTH + 6}" y="{top:.2f}" width="10" '
                         f'height="{max(h * hole[2] / size, 0.6):.2f}" fill="#16a34a"><title>the largest free chunk '
                         f'at the failure: {esc(format_bytes(hole[2]))} ({hole[2]:,} B) at offset {hole[1]:,} of region '
                         f"{numbers[hole[0]]}</title></rect>\n")
        rh = min(h * space.failed_request_bytes / size, float(HEIGHT))
        parts.append(f'<rect class="request" x="{LEFT + WIDTH + 20}" y="{min(top, TOP + HEIGHT - rh):.2f}" width="14" '
                     f'height="{max(rh, 0.6):.2f}" fill="#dc2626"><title>{esc(what)}</title></rect>\n')
    parts.append('<g class="xticks">\n')
    for drawn, text in ticks(axis, 0, axis.total_ns):
        parts.append(f'<line x1="{x_at(drawn):.3f}" x2="{x_at(drawn):.3f}" y1="{TOP + HEIGHT + 6}" '
                     f'y2="{TOP + HEIGHT + 10}" stroke="#6b7280"/><text x="{x_at(drawn):.3f}" y="{TOP + HEIGHT + 22}" '
                     f'text-anchor="middle" font-size="10">{esc(text)}</text>\n')
    parts.append("</g>\n")
    parts.append(f'<text x="{LEFT + WIDTH}" y="{TOP + HEIGHT + 38}" text-anchor="end" font-size="10" fill="#4b5563">'
                 "time (grey marks on the axis: idle stretches, drawn short)</text>\n")
    parts.append(f'<rect class="selection" x="0" y="{TOP}" width="0" height="{HEIGHT}" fill="#2563eb" '
                 'fill-opacity="0.15" visibility="hidden"/>\n')
    parts.append("</svg>\n")
    data: dict[str, object] = {"left": LEFT, "width": WIDTH, "total": axis.total_ns, "cap": axis.cap_ns,
                               "breaks": [list(b) for b in axis.breaks], "target": 6}
    opening = focus(space, axis)
    opens = ""
    if opening is not None:
        data["focus"] = [round(x_at(opening[0]), 3), round(x_at(opening[1]), 3)]
        opens = (f"Opens on {format_us(int(axis.real(opening[0])))} to {format_us(int(axis.real(opening[1])))}"
                 f" of the {format_us(times[-1])}: where the chunks come and go ({opening[2]:.0%} of them, weighed by "
                 "bytes, the largest and the briefest most), the peak"
                 + (" and the failure" if space.failed_event is not None else "")
                 + "; the button or a double click shows all of it. ")
    legend = [f'<li><span class="swatch" style="background:{FREE}"></span>free</li>\n']
    legend += [f'<li><span class="swatch" style="background:{colours[name]}"></span><code>{esc(name)}</code> '
               f'{esc(format_bytes(weight[name]))}</li>\n' for name in shown]
    rest = named[LEGEND:]
    if rest:
        legend.append(f'<li><span class="swatch" style="{_SWATCH_MORE}"></span>{len(rest):,} more groups, '
                      f'{esc(format_bytes(sum(size for _, size in rest)))} (hatched grey)</li>\n')
    if weight.get(UNKNOWN):
        legend.append(f'<li><span class="swatch" style="{_SWATCH_UNKNOWN}"></span>in use, op unknown (no op in '
                      f'the trace) {esc(format_bytes(weight[UNKNOWN]))}</li>\n')
    left_out = (f'<p class="note">{len(boxes) - len(kept):,} of {len(boxes):,} chunks, the smallest by bytes times '
                "time, are not drawn.</p>\n" if len(kept) < len(boxes) else "")
    return (f'<figure class="address-space" data-axis="{esc(json.dumps(data, separators=(",", ":")))}">\n'
            + "".join(parts)
            + '<button class="reset" type="button" hidden>show all of it</button>\n</figure>\n'
            + f'<p class="note">{esc(opens)}Regions top to bottom in address order (region 1: the lowest addresses), offsets '
            f"growing downwards; each chunk a box from its allocation to its free, coloured by {esc(grouped_by)}, by "
            f"bytes allocated. Drag across the picture to zoom into a time range; double-click to see all of it. "
            f"{esc(space.note[0].upper() + space.note[1:])}.</p>\n" + left_out
            + f'<ul class="legend">\n{"".join(legend)}</ul>\n')


def largest_hole(space: AddressSpace) -> tuple[int, int, int] | None:
    """At the failure (the end of the replay), the largest free chunk of the regions: (region, offset,
    bytes), the gaps between the chunks still in use; None where none is free (or nothing failed)."""
    if space.failed_event is None:
        return None
    alive: dict[int, list[tuple[int, int]]] = {}
    for b in space.boxes:
        if b.end_event is None:
            alive.setdefault(b.region, []).append((b.offset, b.size_bytes))
    best: tuple[int, int, int] | None = None
    gone = {region for region, _ in space.given_back}  # garbage collection gave these back: no longer the allocator's
    for region, size in space.regions:
        if region in gone:
            continue
        at = 0
        for offset, length in sorted(alive.get(region, [])) + [(size, 0)]:
            if offset > at and (best is None or offset - at > best[2]):
                best = (region, at, offset - at)
            at = max(at, offset + length)
    return best


def _drawn_at(axis: TimeAxis, times: list[int], real: int) -> float | None:
    """Where a real time (on the picture's clock) is drawn; None outside the events' span."""
    if not times or real < times[0] or real > times[-1]:
        return None
    for i in range(1, len(times)):
        if times[i] >= real:
            a, b = times[i - 1], times[i]
            da, db = axis.drawn_ns[i - 1], axis.drawn_ns[i]
            return da + (db - da) * ((real - a) / (b - a) if b > a else 0.0)
    return float(axis.drawn_ns[-1])


def _label(x: float, y: float, text: str, cls: str, colour: str) -> str:
    """A label above the plot that never runs past its edges: anchored at its start, its end or its
    middle as its place leaves room (about 6 units a character at this size)."""
    room = len(text) * 6.0
    if x + room <= LEFT + WIDTH + RIGHT - 4:
        anchor, at = "start", x + 3
    elif x - room >= 4:
        anchor, at = "end", x - 3
    else:
        anchor, at = "middle", min(max(x, room / 2 + 4), LEFT + WIDTH + RIGHT - room / 2 - 4)
    return (f'<text class="{cls}" x="{at:.2f}" y="{y}" text-anchor="{anchor}" font-size="11" fill="{colour}">'
            f"{esc(text)}</text>\n")


def render_html(spaces: list[AddressSpace], out: IO[str], title: str, leads: Sequence[str] = (),
                group_by: str = "scope", layer_names: LayerNames | None = None,
                batches: Sequence[int | None] = ()) -> None:
    """A self-contained page: one picture per allocator (``memtrace fit --html``), each section led by
    its sentence of ``leads`` (what the text output says first: the smallest limit, whether it fits)."""
    out.write(f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{esc(title)}</title>\n'
              f"<script>{asset('error_guard.js')}</script>\n"
              f"<style>body{{font-family:system-ui,sans-serif;margin:24px;color:#111827}}{asset('address_space.css')}"
              f"</style>\n</head>\n<body>\n<h1>{esc(title)}</h1>\n")
    for number, space in enumerate(spaces):
        o = space.options
        out.write(f"<section>\n<h2>{esc(space.allocator)}</h2>\n")
        if number < len(leads) and leads[number]:
            out.write(f'<p class="answer">{esc(leads[number])}</p>\n')
        out.write(f"<p>Limit {esc(format_bytes(o.limit_bytes))}, "
                  f"allow_growth {'on' if o.allow_growth else 'off'}, garbage collection "
                  f"{'on' if o.garbage_collection else 'off'}: {len(space.regions)} region(s), "
                  + (f"{len(space.given_back):,} given back by garbage collection, " if space.given_back else "")
                  + f"{esc(format_bytes(space.pool_bytes))} in all{' at the end' if space.given_back else ''}; peak {esc(format_bytes(space.peak_in_use_bytes))} "
                  f"in use; {space.events:,} events"
                  + (", then out of memory" if space.failed_event is not None else "") + ".</p>\n")
        out.write(svg(space, number, group_by, layer_names, batches[number] if number < len(batches) else None))
        out.write("</section>\n")
    out.write(f"<footer>Made by memtrace {esc(__version__)}.</footer>\n<script>{asset('address_space.js')}</script>\n"
              "</body>\n</html>\n")
