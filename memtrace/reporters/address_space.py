"""The allocator's address space over time as a picture (inline SVG), like PyTorch's allocator state history.

Time (events, in order) runs left to right, addresses bottom to top, each region a band of its
own (the space between regions is not drawn: it is not the allocator's). Every chunk is a box
from its allocation to its free, coloured by layer (the op's name scope) where names have scopes,
else by op; what no box covers is free (holes, light grey). The peak (the first event at the most
bytes in use) is a dashed line; a failed request is a red line, with the request drawn at the
same scale beside the regions. Every name from a trace goes through :func:`esc`; a picture
of many chunks keeps the largest (by bytes times events) and says how many it left out.
"""

from __future__ import annotations

from collections import Counter
from typing import IO

from ..allocator.address_space import AddressSpace, Box
from ..units import format_bytes
from ..version import __version__
from .common import asset, esc

WIDTH, HEIGHT = 900, 420  # the plot, in SVG user units
LEFT, RIGHT, TOP, BOTTOM = 110, 60, 40, 40
BAND_GAP = 10  # between two regions' bands
MAX_BOXES = 4_000  # about 1.5 MB of SVG
LEGEND = 12
OTHER = "#9ca3af"


def group_of(op: str, by_layer: bool) -> str:
    """What a chunk is coloured by: its op's name scope (``model/dense_1`` of ``model/dense_1/MatMul``), or the op."""
    if not op:
        return "(unknown op)"
    return op.rpartition("/")[0] or op if by_layer else op


def size_class(size_bytes: int) -> str:
    """A chunk's size class, where every op is the same (or unknown): ``<= 16 MiB``."""
    return "<= " + format_bytes(1 << max(size_bytes - 1, 1).bit_length())


# Distinct colours for the legend's groups, largest first (no red: red marks the failure).
PALETTE = ("#2563eb", "#16a34a", "#f59e0b", "#7c3aed", "#0891b2", "#db2777", "#65a30d", "#ea580c", "#4f46e5",
           "#0d9488", "#a16207", "#9333ea")


def svg(space: AddressSpace) -> str:
    """The picture as an inline ``<svg>`` element, with its legend as HTML after it."""
    boxes = list(space.boxes)
    end = space.events + (space.failed_event is not None)
    last = max(end, 1)
    kept = boxes
    if len(boxes) > MAX_BOXES:
        def area(b: Box) -> int:
            return b.size_bytes * (((b.end_event if b.end_event is not None else last) - b.start_event) or 1)
        kept = sorted(boxes, key=area, reverse=True)[:MAX_BOXES]
    by_layer = any("/" in b.op for b in boxes)
    by_size = len({b.op for b in boxes}) == 1  # one op (or none known): colour by size instead

    def key(b: Box) -> str:
        return size_class(b.size_bytes) if by_size else group_of(b.op, by_layer)

    weight: Counter[str] = Counter()
    for b in boxes:
        weight[key(b)] += b.size_bytes
    shown = [name for name, _ in weight.most_common(LEGEND)]
    colours = dict(zip(shown, PALETTE))

    # Bands: each region its share of the height (at least 12 units), low addresses at the bottom.
    # Without growth, one region of the whole limit (a GPU's) can be far larger than its chunks ever
    # reach: it is drawn up to its highest chunk. (With growth, a region's free tail is a real hole.)
    reach: dict[int, int] = {}
    for b in boxes:
        reach[b.region] = max(reach.get(b.region, 0), b.offset + b.size_bytes)
    regions = [(region, size if space.options.allow_growth or reach.get(region, 0) * 2 > size
                else max(reach.get(region, 0) * 21 // 20, 1)) for region, size in space.regions]
    cropped = {region for (region, size), (_, drawn) in zip(space.regions, regions) if drawn != size}
    room = HEIGHT - BAND_GAP * max(len(regions) - 1, 0)
    total = max(sum(size for _, size in space.regions), 1)  # (those given back included: each has its band)
    heights = [max(12.0, room * size / total) for _, size in regions]
    scale_h = room / sum(heights) if sum(heights) else 1.0
    heights = [h * scale_h for h in heights]
    band: dict[int, tuple[float, float, int]] = {}  # region -> (bottom y, height, size)
    y: float = TOP + HEIGHT
    for (region, size), h in zip(regions, heights):
        band[region] = (y, h, size)
        y -= h + BAND_GAP

    def x(event: float) -> float:
        return LEFT + WIDTH * event / last

    given_back = dict(space.given_back)

    parts = [(f'<svg class="address-space" viewBox="0 0 {LEFT + WIDTH + RIGHT} {TOP + HEIGHT + BOTTOM}" '
              f'role="img" aria-label="address space of {esc(space.allocator)} over time" '
              'xmlns="http://www.w3.org/2000/svg">\n')]
    for region, size in regions:
        bottom, h, _ = band[region]
        parts.append(f'<rect class="free" x="{LEFT}" y="{bottom - h:.2f}" width="{WIDTH}" height="{h:.2f}" '
                     f'fill="#e5e7eb"><title>region {region}: {esc(format_bytes(dict(space.regions)[region]))}; grey is '
                     'free</title></rect>\n')
        whole = dict(space.regions)[region]
        label = f"region {region} · {format_bytes(whole)}"
        parts.append(f'<text x="{LEFT - 6}" y="{bottom - h / 2 + 4:.2f}" text-anchor="end" font-size="11">'
                     f'{esc(label)}</text>\n')
        if region in cropped:
            parts.append(f'<text x="{LEFT - 6}" y="{bottom - h / 2 + 18:.2f}" text-anchor="end" font-size="10" '
                         f'fill="#6b7280">drawn to {esc(format_bytes(size))}</text>\n')
        if region in given_back:  # garbage collection gave it back: from then on it is no longer the allocator's
            gone = x(given_back[region])
            parts.append(f'<rect class="given-back" x="{gone:.2f}" y="{bottom - h:.2f}" width="{LEFT + WIDTH - gone:.2f}" '
                         f'height="{h:.2f}" fill="#ffffff" stroke="#9ca3af" stroke-dasharray="2 2"><title>region {region} '
                         f'given back by garbage collection at event {given_back[region]:,}</title></rect>\n')
    for b in kept:
        bottom, h, size = band[b.region]
        top_y = bottom - h * (b.offset + b.size_bytes) / size
        height = max(h * b.size_bytes / size, 0.6)
        stop = b.end_event if b.end_event is not None else end
        width = max(x(stop) - x(b.start_event), 0.6)
        name = key(b)
        fill = colours.get(name, OTHER)
        freed = f"freed at event {b.end_event:,}" if b.end_event is not None else "never freed"
        parts.append(
            f'<rect x="{x(b.start_event):.2f}" y="{top_y:.2f}" width="{width:.2f}" height="{height:.2f}" fill="{fill}" '
            'stroke="#fff" stroke-width="0.4">'
            f'<title>{esc(b.op or "(unknown op)")}: chunk {esc(format_bytes(b.size_bytes))} ({b.size_bytes:,} B, '
            f'requested {b.requested_bytes:,} B) at offset {b.offset:,} of region {b.region}; allocated at event '
            f'{b.start_event:,}, {freed}</title></rect>\n')
    axis_y = TOP + HEIGHT + 14
    for i in range(5):
        event = round(last * i / 4)
        at = space.time_ns[min(event, len(space.time_ns) - 1)] if space.time_ns else 0
        parts.append(f'<text x="{x(event):.2f}" y="{axis_y}" text-anchor="middle" font-size="10">event {event:,}'
                     f'</text>\n<text x="{x(event):.2f}" y="{axis_y + 12}" text-anchor="middle" font-size="10" '
                     f'fill="#6b7280">{at / 1e6:.3f} ms</text>\n')
    if space.peak_event is not None:
        px = x(space.peak_event + 0.5)
        parts.append(f'<line class="peak" x1="{px:.2f}" y1="{TOP - 6}" x2="{px:.2f}" y2="{TOP + HEIGHT}" '
                     'stroke="#111827" stroke-dasharray="4 3"/>\n'
                     f'<text x="{px + 3:.2f}" y="{TOP - 10}" font-size="11">peak {esc(format_bytes(space.peak_in_use_bytes))} '
                     f'in use (event {space.peak_event:,})</text>\n')
    if space.failed_event is not None:
        fx = x(space.failed_event + 0.5)
        what = f"out of memory: {format_bytes(space.failed_request_bytes)} for {space.failed_op or '(unknown op)'}"
        parts.append(f'<line class="failure" x1="{fx:.2f}" y1="{TOP - 6}" x2="{fx:.2f}" y2="{TOP + HEIGHT}" '
                     f'stroke="#dc2626" stroke-width="2"><title>{esc(what)}</title></line>\n')
        # the request at the scale of the largest region, beside the bands
        largest = max((size for _, size in regions), default=1)
        bottom, h, size = next(band[r] for r, s in regions if s == largest) if regions else (TOP + HEIGHT, HEIGHT, 1)
        rh = min(h * space.failed_request_bytes / size, HEIGHT)
        parts.append(f'<rect class="request" x="{LEFT + WIDTH + 12}" y="{TOP + HEIGHT - rh:.2f}" width="18" '
                     f'height="{rh:.2f}" fill="#dc2626"><title>{esc(what)}</title></rect>\n'
                     f'<text x="{fx - 4:.2f}" y="{TOP - 26}" text-anchor="end" font-size="11" fill="#dc2626">'
                     f'{esc(what)} (the request, to scale, at the right)</text>\n')
    parts.append("</svg>\n")
    legend = "".join(f'<li><span class="swatch" style="background:{colours[name]}"></span><code>{esc(name)}</code> '
                     f'{esc(format_bytes(weight[name]))}</li>\n' for name in shown)
    if len(weight) > len(shown):
        legend += f'<li><span class="swatch" style="background:{OTHER}"></span>{len(weight) - len(shown):,} more</li>\n'
    left_out = (f'<p class="note">{len(boxes) - len(kept):,} of {len(boxes):,} chunks, the smallest by bytes times '
                "events, are not drawn.</p>\n" if len(kept) < len(boxes) else "")
    coloured = ("chunk size (every op is the same or unknown)" if by_size
                else "layer (the op's name scope)" if by_layer else "op")
    return ("".join(parts) + f'<p class="note">Coloured by {coloured}, by bytes allocated; grey is free. '
            f"{esc(space.note[0].upper() + space.note[1:])}.</p>\n" + left_out
            + f'<ul class="legend">\n{legend}</ul>\n')


def render_html(spaces: list[AddressSpace], out: IO[str], title: str) -> None:
    """A self-contained page: one picture per allocator (``memtrace fit --html``)."""
    out.write(f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{esc(title)}</title>\n'
              f"<style>body{{font-family:system-ui,sans-serif;margin:24px;color:#111827}}{asset('address_space.css')}</style>\n"
              f"</head>\n<body>\n<h1>{esc(title)}</h1>\n")
    for space in spaces:
        o = space.options
        out.write(f"<section>\n<h2>{esc(space.allocator)}</h2>\n<p>Limit {esc(format_bytes(o.limit_bytes))}, "
                  f"allow_growth {'on' if o.allow_growth else 'off'}, garbage collection "
                  f"{'on' if o.garbage_collection else 'off'}: {len(space.regions)} region(s), "
                  + (f"{len(space.given_back):,} given back by garbage collection, " if space.given_back else "")
                  + f"{esc(format_bytes(space.pool_bytes))} in all{' at the end' if space.given_back else ''}; peak {esc(format_bytes(space.peak_in_use_bytes))} "
                  f"in use; {space.events:,} events"
                  + (", then out of memory" if space.failed_event is not None else "") + ".</p>\n")
        out.write(svg(space))
        out.write("</section>\n")
    out.write(f"<footer>Made by memtrace {esc(__version__)}.</footer>\n</body>\n</html>\n")
