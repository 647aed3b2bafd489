"""Rendering out-of-memory post-mortems as text, JSON (``memtrace.oom/1``) or one self-contained HTML page.

The page (:func:`render_html`) draws a memory map and takes nothing from the network: its style is
inlined and the map is inline SVG. Each region is a bar, its chunks drawn to one common scale (in
use, free, and the largest free chunk marked); the failed request is drawn at the same scale beside
the largest hole, so the eye sees at once whether it could have fit. Every name from the input goes
through :func:`~.common.esc`. Huge dumps stay small: runs of chunks in one state are drawn as one
bar, and a region with more runs than pixels is drawn column by column.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import IO, Any

from ..allocator.dump import BinSummary, Region
from ..allocator.oom import OomEvent, describe_lost, largest_free_region
from ..units import format_bytes, plural
from ..version import __version__
from .common import asset, clean, esc, table

SCHEMA = "memtrace.oom/1"


# -- JSON ---------------------------------------------------------------------------------------


def to_json(events: list[OomEvent]) -> dict[str, Any]:
    """The contract other tools read: one entry per OOM event, in file order."""
    return {"schema": SCHEMA, "events": [_event_json(e) for e in events]}


def _event_json(e: OomEvent) -> dict[str, Any]:
    d = e.dump
    return {
        "path": d.path,
        "source": d.source,
        "line": d.line,
        "allocator": d.allocator,
        "request_bytes": e.request_bytes,
        "request_exact": d.request_exact,
        "op": d.op,
        "shape": d.shape,
        "dtype": d.dtype,
        "device": d.device,
        "limit_bytes": e.limit_bytes,
        "limit_exact": d.limit_exact,
        "pool_bytes": e.pool_bytes,
        "in_use_bytes": e.in_use_bytes,
        "requested_in_use_bytes": e.requested_in_use_bytes,
        "free_in_pool_bytes": e.free_in_pool_bytes,
        "growth_bytes": e.growth_bytes,
        "free_bytes": e.free_bytes,
        "largest_free_bytes": e.largest_free_bytes,
        "free_chunks": e.free_chunks,
        "runtime": d.runtime,
        "request_end": d.request_end,
        "partitioned": d.partitioned,
        "usable_largest_free_bytes": e.usable_largest_free_bytes,
        "other_end_free_bytes": e.other_end_free_bytes,
        "central_gap_bytes": d.central_gap_bytes,
        "compile_budget": None if d.compile_budget is None else {
            "target_bytes": d.compile_budget.target_bytes, "reached_bytes": d.compile_budget.reached_bytes,
            "original_bytes": d.compile_budget.original_bytes},
        "by_annotation": [{"annotation": t.op, "bytes": t.bytes} for t in e.by_annotation],
        "missing_bytes": e.missing_bytes,
        "lost_exceeds_missing": e.lost_exceeds_missing,
        "lost_chunks": [{"address": c.address, "size_bytes": c.size_bytes, "requested_bytes": c.requested_bytes,
                         "lost_bytes": c.lost_bytes, "chunks": c.chunks, "op": c.op, "exact": c.exact}
                        for c in e.lost_chunks],
        "regions": [_region_json(r) for r in d.regions],
        "regions_listed": d.regions_listed,
        "in_use_by_size": [{"size_bytes": s.size_bytes, "chunks": s.chunks, "total_bytes": s.total_bytes}
                           for s in e.by_size],
        "bins": [_bin_json(b) for b in d.bins],
        "live_tensors": [{"op": t.op, "bytes": t.bytes} for t in e.top_holders],
        "verdict": e.verdict,
        "explanation": list(e.explanation),
        "advice": list(e.advice),
        "missing": list(d.missing),
        "time_s": d.time_s,
        "ended_run": d.ended_run,
    }


def _region_json(r: Region) -> dict[str, Any]:
    return {
        "address": r.address,
        "size_bytes": r.size_bytes,
        "in_use_bytes": sum(c.size_bytes for c in r.chunks if c.in_use),
        "free_bytes": sum(c.size_bytes for c in r.chunks if not c.in_use),
        "chunks": [{"address": c.address, "size_bytes": c.size_bytes, "in_use": c.in_use,
                    "requested_bytes": c.requested_bytes, "op": c.op, "tag": c.tag, "annotation": c.annotation}
                   for c in r.chunks],
    }


def _bin_json(b: BinSummary) -> dict[str, Any]:
    return {
        "bin_bytes": b.bin_bytes,
        "chunks": b.chunks,
        "chunks_in_use": b.chunks_in_use,
        "allocated_bytes": b.allocated_bytes,
        "in_use_bytes": b.in_use_bytes,
        "requested_in_use_bytes": b.requested_in_use_bytes,
        "exact": b.exact,
    }


# -- text ---------------------------------------------------------------------------------------


def render_text(events: list[OomEvent], out: IO[str], top: int = 10,
                after: Sequence[Callable[[IO[str]], None]] = ()) -> None:
    """Each event: the facts, the verdict, the words, then in-use chunks by size and bin, live tensors
    (then what ``after`` has for the event: ``memtrace oom --trace``'s replay)."""
    for number, e in enumerate(events, 1):
        if number > 1:
            out.write("\n")
        _render_event(number, len(events), e, out, top, events)
        if number <= len(after):
            after[number - 1](out)


def _size(value: int | None, exact: bool = True) -> str:
    if value is None:
        return "unknown"
    return format_bytes(value) + ("" if exact else " (as logged, rounded)")


def facts(e: OomEvent) -> list[tuple[str, str]]:
    """The event's numbers as (label, value) rows, for the text and the HTML report alike (names not yet escaped)."""
    d = e.dump
    request = _size(e.request_bytes, d.request_exact)
    if e.request_bytes is not None:
        request += f" ({e.request_bytes} bytes)"
    if d.request_end is not None:
        request += f" from the {d.request_end} end"
    if d.op:
        request += f" by op {d.op}"
    if d.shape is not None:
        request += f", tensor shape [{d.shape}]" + (f" {d.dtype}" if d.dtype else "")
    rows = [
        ("request", request),
        ("limit", _size(e.limit_bytes, d.limit_exact)),
        ("pool", _size(e.pool_bytes) + (f" in {plural(len(d.regions), 'region')}" if d.regions else "")
         + ("" if d.regions_listed or not d.regions else " (inferred from chunk addresses)")),
        ("in use", format_bytes(e.in_use_bytes)
         + (f" (client-requested {format_bytes(e.requested_in_use_bytes)}, "
            f"{format_bytes(e.in_use_bytes - e.requested_in_use_bytes)} lost inside chunks)"
            if e.requested_in_use_bytes is not None else "")),
        ("free in pool", _size(e.free_in_pool_bytes)
         + (f" in {plural(e.free_chunks, 'chunk')}" if e.free_chunks is not None else "")),
        ("room to grow", _size(e.growth_bytes, d.limit_exact)),
        ("free in all", _size(e.free_bytes)),
        ("largest free", _size(e.largest_free_bytes)),
    ]
    if e.usable_largest_free_bytes is not None:
        exact = d.usable_exact or any(c.tag for c in d.chunks)  # from the chunk map, or the summary line
        usable = (_size(e.usable_largest_free_bytes, exact)
                  + f" (of the {d.request_end} end's own holes and the central gap)")
        if e.other_end_free_bytes:
            usable += f"; {format_bytes(e.other_end_free_bytes)} free in the other end's holes"
        rows.append(("usable by it", usable))
    if e.verdict == "exhausted":
        rows.append(("missing", format_bytes(e.missing_bytes)))
    return rows


def which_ended(events: Sequence[OomEvent], number: int) -> str | None:
    """For an event of a log with several (``number`` counts from 1 among ``events``): whether it is the
    failure that ended the run, as the log's last uncaught error says, and when it came after the
    log's first; None for a log of one event."""
    e = events[number - 1]
    siblings = [(n, other) for n, other in enumerate(events, 1) if other.dump.path == e.dump.path]
    if len(siblings) < 2:
        return None
    d = e.dump
    first = siblings[0][1].dump
    after = (f"{d.time_s - first.time_s:.1f} s after OOM {siblings[0][0]}; " if d.time_s is not None and
             first.time_s is not None and first is not d else "")
    ended = [n for n, other in siblings if other.dump.ended_run]
    if d.ended_run:
        return (f"{after}this failure ended the run: the program's last error reports its request (the "
                f"{len(siblings) - 1} other{'s' if len(siblings) > 2 else ''} in the log did not end it)")
    if ended:
        return f"{after}not the failure that ended the run: OOM {ended[0]} of {len(events)} did (the program's last error reports it)"
    if siblings[0][1] is not e:
        return after.removesuffix("; ") or None
    return (f"the first of {len(siblings)} failures in this log; which of them ended the run the log does not say (no "
            "uncaught error follows its dumps: the program caught them, or the capture stops early)")


def _render_event(number: int, count: int, e: OomEvent, out: IO[str], top: int,
                  events: Sequence[OomEvent] = ()) -> None:
    d = e.dump
    where = f"{clean(d.path)}:{d.line}" if d.line is not None else clean(d.path)
    out.write(f"OOM {number} of {count}  {where}  allocator {clean(d.allocator or '(unnamed)')}\n")
    ended = which_ended(events, number) if events else None
    if ended is not None:
        out.write(f"{clean(ended)}\n")
    verdict = (e.verdict or "unknown").upper()
    if e.lost_exceeds_missing:
        verdict += (f" (yet {format_bytes(e.internal_waste_bytes or 0)} lost inside chunks, more than the "
                    f"{format_bytes(e.missing_bytes)} missing)")
    out.write(f"verdict: {verdict}\n\n")
    rows = [(key, clean(value)) for key, value in facts(e)]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        out.write(f"  {key:<{width}}  {value}\n")
    out.write("\n")
    for sentence in e.explanation:
        out.write(f"{sentence}\n")
    if e.advice:
        out.write("\nWhat helps:\n")
        for item in e.advice:
            out.write(f"  - {item}\n")
    if e.top_holders:
        out.write("\nLive tensors by op (report_tensor_allocations_upon_oom):\n")
        shown = [(clean(t.op), format_bytes(t.bytes)) for t in e.top_holders[:top]]
        out.write(table(shown, ["op", "bytes"], ["left", "right"]) + "\n")
        if d.live_tensors_remaining:
            nodes, nbytes = d.live_tensors_remaining
            out.write(f"  and {nodes} more nodes with {format_bytes(nbytes)}\n")
    if e.by_size:
        out.write("\nIn-use chunks by size:\n")
        sizes = [(format_bytes(s.size_bytes), s.chunks, format_bytes(s.total_bytes)) for s in e.by_size[:top]]
        out.write(table(sizes, ["chunk size", "chunks", "total"], ["right", "right", "right"]) + "\n")
        if len(e.by_size) > top:
            out.write(f"  ... {len(e.by_size) - top} more sizes\n")
    used_bins = [b for b in d.bins if b.chunks]
    if used_bins:
        out.write("\nBins (chunks of at least the bin size):\n")
        shown_bins = [(format_bytes(b.bin_bytes), b.chunks, b.chunks_in_use, format_bytes(b.allocated_bytes),
                       format_bytes(b.in_use_bytes),
                       format_bytes(b.requested_in_use_bytes) if b.requested_in_use_bytes is not None else "-")
                      for b in used_bins]
        out.write(table(shown_bins, ["bin", "chunks", "in use", "allocated", "in use bytes", "client-requested"],
                        ["right"] * 6) + "\n")


# -- the page ----------------------------------------------------------------------------------

WIDTH = 900  # SVG user units for the widest bar
LABEL = 150  # left margin for the region labels
BAR, GAP = 22, 14
COLOURS = {"in_use": "#2563eb", "free": "#d1d5db", "hole": "#16a34a", "request": "#dc2626", "mixed": "#93c5fd",
           "lost": "#fde68a"}


def render_html(events: list[OomEvent], out: IO[str], extra: Sequence[str] = ()) -> None:
    """Write the whole page: one section per OOM event, in file order (each ending with its ``extra``
    HTML, where given: ``memtrace oom --trace``'s replay)."""
    title = "memtrace oom: " + ", ".join(sorted({e.dump.path for e in events}))
    out.write(f"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{esc(title)}</title>\n"
              f"<style>{asset('oom.css')}</style>\n</head>\n<body>\n<h1>Why did it run out of memory?</h1>\n")
    for number, event in enumerate(events, 1):
        out.write(_section(number, len(events), event, extra[number - 1] if number <= len(extra) else "", events))
    out.write(f"<footer>Made by memtrace {esc(__version__)} from the BFC allocator's own dump.</footer>\n"
              "</body>\n</html>\n")


def verdict_sentence(e: OomEvent) -> str:
    """The sentence of the explanation that gives the verdict its reason (what the text says under ``verdict:``)."""
    reasons = ("Enough bytes were free", "Not enough bytes were free", "The dump does not say")
    return next((s for s in e.explanation if s.startswith(reasons)), e.explanation[0] if e.explanation else "")


def _section(number: int, count: int, e: OomEvent, extra: str = "", events: Sequence[OomEvent] = ()) -> str:
    d = e.dump
    where = f"{d.path}:{d.line}" if d.line is not None else d.path
    verdict = e.verdict or "unknown"
    heading = (f'<section class="event">\n<h2>OOM {number} of {count}: <span class="verdict {esc(verdict)}">'
               f"{esc(verdict)}</span></h2>\n")
    # What the text leads with: the verdict, in its sentence, and (a log of several) which failure ended the run.
    ended = which_ended(events, number) if events else None
    heading += (f'<p class="answer">{esc(verdict_sentence(e))}</p>\n' if verdict_sentence(e) else "") + (
        f'<p class="answer">{esc(ended[0].upper() + ended[1:])}.</p>\n' if ended else "")
    heading += (f"<p class=\"where\"><code>{esc(where)}</code> allocator "
                f"<code>{esc(d.allocator or '(unnamed)')}</code></p>\n")
    parts = [heading]
    rows = facts(e)
    parts.append("<table class=\"facts\">\n" + "".join(
        f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>\n" for k, v in rows) + "</table>\n")
    parts.append("".join(f"<p>{esc(s)}</p>\n" for s in e.explanation))
    if e.advice:
        parts.append("<h3>What helps</h3>\n<ul>\n" + "".join(f"<li>{esc(a)}</li>\n" for a in e.advice) + "</ul>\n")
    if d.regions:
        parts.append("<h3>Memory map</h3>\n" + _memory_map(e))
    if e.top_holders:
        parts.append("<h3>Live tensors by op</h3>\n<table>\n<tr><th>op</th><th>bytes</th></tr>\n" + "".join(
            f"<tr><td><code>{esc(t.op)}</code></td><td class=\"num\">{esc(format_bytes(t.bytes))}</td></tr>\n"
            for t in e.top_holders[:50]) + "</table>\n")
    if e.by_size:
        parts.append("<h3>In-use chunks by size</h3>\n<table>\n<tr><th>chunk size</th><th>chunks</th><th>total</th>"
                     "</tr>\n" + "".join(
                         f"<tr><td class=\"num\">{esc(format_bytes(s.size_bytes))}</td><td class=\"num\">{s.chunks}"
                         f"</td><td class=\"num\">{esc(format_bytes(s.total_bytes))}</td></tr>\n"
                         for s in e.by_size[:50]) + "</table>\n")
    parts.append(extra + "</section>\n")
    return "".join(parts)


def _segments(region: Region) -> list[tuple[int, int, str, int]]:
    """(offset, bytes, state, chunks) runs of chunks in one state, in address order."""
    runs: list[tuple[int, int, str, int]] = []
    offset = 0
    for chunk in region.chunks:
        state = "in_use" if chunk.in_use else "free"
        if runs and runs[-1][2] == state:
            start, size, _, n = runs[-1]
            runs[-1] = (start, size + chunk.size_bytes, state, n + 1)
        else:
            runs.append((offset, chunk.size_bytes, state, 1))
        offset += chunk.size_bytes
    return runs


def _memory_map(e: OomEvent) -> str:
    regions = e.dump.regions
    request = e.request_bytes or 0
    widest = max([r.size_bytes for r in regions] + [request, 1])
    scale = WIDTH / widest
    hole = largest_free_region(regions)
    rows: list[str] = []
    y = 4
    for index, region in enumerate(regions):
        width = max(1.0, region.size_bytes * scale)
        rows.append(f'<text x="{LABEL - 8}" y="{y + BAR * 0.7:.1f}" text-anchor="end">region {index + 1}: '
                    f"{esc(format_bytes(region.size_bytes))}</text>")
        rows.append(f'<rect x="{LABEL}" y="{y}" width="{width:.2f}" height="{BAR}" fill="#f3f4f6" stroke="#6b7280"/>')
        runs = _segments(region)
        if len(runs) <= WIDTH:
            for start, size, state, n in runs:
                rows.append(f'<rect x="{LABEL + start * scale:.2f}" y="{y}" width="{max(0.5, size * scale):.2f}" '
                            f'height="{BAR}" fill="{COLOURS[state]}"><title>{n} {state.replace("_", " ")} chunks, '
                            f"{esc(format_bytes(size))}</title></rect>")
        else:
            rows.extend(_columns(region, y, scale))
        rows.extend(_lost_inside(e, region, y, scale))
        if hole is not None and hole[0] == index:
            offset = sum(c.size_bytes for c in region.chunks[: hole[1]])
            size = region.chunks[hole[1]].size_bytes
            hx = LABEL + offset * scale
            rows.append(f'<rect x="{hx:.2f}" y="{y}" width="{max(1.0, size * scale):.2f}" height="{BAR}" '
                        f'fill="{COLOURS["hole"]}"><title>largest free chunk: {esc(format_bytes(size))}</title></rect>')
            if request:
                y += BAR + 4
                # Under the hole, kept inside the drawing: a hole at the region's end would push the
                # request (larger than the hole) and its label past the right edge.
                width = max(1.0, request * scale)
                rx = min(hx, LABEL + WIDTH - width)
                middle = rx + width / 2
                anchor = "end" if middle > LABEL + WIDTH * 0.7 else "start" if middle < LABEL + WIDTH * 0.3 else "middle"
                tx = {"start": rx, "middle": middle, "end": rx + width}[anchor]
                rows.append(f'<rect x="{rx:.2f}" y="{y}" width="{width:.2f}" height="{BAR // 2}" '
                            f'fill="none" stroke="{COLOURS["request"]}" stroke-width="2"/>')
                rows.append(f'<text x="{tx:.2f}" y="{y + BAR // 2 + 12}" text-anchor="{anchor}" class="request">the '
                            f"request: {esc(format_bytes(request))}, beside the largest hole: {esc(format_bytes(size))}</text>")
                y += BAR // 2 + 16
        y += BAR + GAP
    if hole is None and request:
        rows.append(f'<rect x="{LABEL}" y="{y}" width="{max(1.0, request * scale):.2f}" height="{BAR // 2}" '
                    f'fill="none" stroke="{COLOURS["request"]}" stroke-width="2"/>')
        rows.append(f'<text x="{LABEL}" y="{y + BAR // 2 + 12}" class="request">the request: '
                    f"{esc(format_bytes(request))}; no chunk is free</text>")
        y += BAR // 2 + 20
    legend = (f'<p class="legend"><span style="background:{COLOURS["in_use"]}"></span>in use '
              f'<span style="background:{COLOURS["free"]}"></span>free '
              f'<span style="background:{COLOURS["hole"]}"></span>largest free chunk '
              f'<span style="border:2px solid {COLOURS["request"]}"></span>the failed request '
              f'<span style="background:{COLOURS["mixed"]}"></span>in use and free mixed at this scale'
              + (f' <span style="background:{COLOURS["lost"]}"></span>in use, beyond the tensor: lost inside the chunk'
                 if any(c.address is not None for c in e.lost_chunks) else "")
              + "</p>\n")
    return (f'<svg class="map" viewBox="0 0 {LABEL + WIDTH + 10} {y}" role="img" '
            f'aria-label="memory map, one bar per region">\n' + "\n".join(rows) + "\n</svg>\n" + legend)


def _lost_inside(e: OomEvent, region: Region, y: int, scale: float) -> list[str]:
    """The chunks that lose most inside them, drawn half filled: the tensor's bytes in the in-use
    colour, the rest of the chunk (lost until the tensor is freed) in the colour of loss."""
    start = region.address
    if start is None:
        return []
    end = start + region.size_bytes
    rects = []
    for c in e.lost_chunks:
        if c.address is None or not start <= c.address < end:
            continue
        x = LABEL + (c.address - start + c.requested_bytes) * scale
        rects.append(f'<rect class="lost" x="{x:.2f}" y="{y}" width="{max(0.5, c.lost_bytes * scale):.2f}" '
                     f'height="{BAR}" fill="{COLOURS["lost"]}" stroke="{COLOURS["in_use"]}" stroke-width="1">'
                     f"<title>{esc(describe_lost(c))}</title></rect>")
    return rects


def _columns(region: Region, y: int, scale: float) -> list[str]:
    """A region with more runs than pixels, drawn one pixel column at a time by its in-use share."""
    columns = max(1, int(region.size_bytes * scale))
    in_use = [0.0] * columns
    offset = 0
    for chunk in region.chunks:
        if chunk.in_use:
            first = int(offset * scale)
            last = min(columns - 1, int((offset + chunk.size_bytes - 1) * scale))
            for column in range(first, last + 1):
                lo, hi = column / scale, (column + 1) / scale
                in_use[column] += max(0.0, min(hi, offset + chunk.size_bytes) - max(lo, offset))
        offset += chunk.size_bytes
    rects = []
    for column, used in enumerate(in_use):
        share = used * scale
        state = "in_use" if share > 0.95 else "free" if share < 0.05 else "mixed"
        rects.append(f'<rect x="{LABEL + column}" y="{y}" width="1" height="{BAR}" fill="{COLOURS[state]}"/>')
    return rects


