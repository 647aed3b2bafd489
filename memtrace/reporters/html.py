"""Rendering the report as one self-contained HTML page: charts, live set, top ops, fragmentation.

The page needs nothing from the network: the styles and the script are inline, the charts are
SVG drawn here, and the data the script reads for hover and click is embedded as JSON. Every
name from a trace is data: in the markup it goes through :func:`esc`, in the embedded JSON every
``<``, ``>`` and ``&`` is a ``\\u`` escape (so ``</script>`` in a name cannot end the block), and
the script writes names with ``textContent`` only.
"""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Callable, Sequence
from typing import IO, Any

from .. import __version__
from ..frag import AllocatorFragmentation, Anomaly
from ..layers import LayerNames, layer_of
from ..ops import OpRow
from ..peak import AllocatorPeak, RepeatedAllocation, repeated_allocations, split_freed_before_step
from ..report import AllocatorView, ReportData, UnknownView
from ..units import format_bytes, format_us, plural
from . import icicle
from .common import clean, oddity_name, strict_json

# Chart geometry, in SVG user units (the SVG scales to the page width).
WIDTH, HEIGHT = 960, 300
LEFT, RIGHT, TOP, BOTTOM = 84, 18, 34, 40
KIND_COLOURS = {
    "baseline": "#9ca3af", "output": "#2563eb", "temp": "#f59e0b", "persistent": "#7c3aed", "unknown": "#64748b",
}


def esc(text: str) -> str:
    """A name from a trace, safe in HTML text and attribute values (control characters shown escaped)."""
    return html.escape(clean(text), quote=True)


def embed_json(document: Any) -> str:
    """JSON for a ``<script type="application/json">`` block: no ``<``, ``>`` or ``&`` survive literally."""
    text = strict_json(document, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render(report: ReportData, out: IO[str], top: int = 20) -> None:
    """Write the whole page; ``top`` bounds the live-set and op tables."""
    names = _Names()
    charts = [_chart_data(v, report.step_duration_us, names) for v in report.allocators]
    s = report.summary
    style = _STYLE
    if any(v.address_space is not None for v in report.allocators):
        from .address_space import STYLE

        style += STYLE
    out.write(_HEAD.format(title=esc(f"memtrace report: {s.path}"), style=style, guard=_ERROR_GUARD))
    out.write('<header>\n<h1>memtrace report</h1>\n')
    out.write(f'<p class="trace"><code>{esc(s.path)}</code></p>\n')
    out.write(_facts(report))
    out.write(_overview(report.allocators, report.unknown))
    out.write("</header>\n<main>\n")
    for number, unknown in enumerate(report.unknown):
        out.write(_unknown_section(number, unknown))
    path_of = _layer_path(report.layer_names) if report.by_layer else None
    for number, view in enumerate(report.allocators):
        out.write(_allocator_section(number, view, charts[number], top, path_of, report))
    out.write(_ops_section(report, top))
    out.write(_frag_section(report))
    out.write("</main>\n")
    out.write(
        f'<footer>Made by memtrace {esc(__version__)}. Times are relative to the step start; bytes are absolute '
        "where the allocator's snapshots give a baseline, else relative to the step start.</footer>\n"
    )
    document = {"names": names.table, "charts": charts}
    out.write(f'<script type="application/json" id="memtrace-data">{embed_json(document)}</script>\n')
    script = _SCRIPT if report.span == "step" else _SCRIPT.replace("' into the step ('", f"' into the {report.span} ('")
    out.write(f"<script>{script}</script>\n")
    if report.step_marks:
        out.write(f"<script>{_STEP_MARKS_SCRIPT}</script>\n")
    out.write("</body>\n</html>\n")


def to_json(report: ReportData, top: int = 20) -> dict[str, Any]:
    """What the page shows, as data (``memtrace.report/1``): per allocator its peak and top live rows
    (repeats folded), the view the chart opens on, the drawn timeline and snapshots; the top ops by
    bytes held at the peak; per allocator its fragmentation numbers. An allocator whose bytes add up
    past int64 comes first, its peak, live set, timeline and snapshots null and ``unknown`` saying
    why; its fragmentation numbers are measured."""
    names = _Names()
    allocators: list[dict[str, Any]] = [
        {"allocator": u.unknown.allocator, "source": u.unknown.source, "peak_bytes": None, "peak_delta_bytes": None,
         "baseline_bytes": None, "peak_time_us": None, "peak_node": None, "live_at_peak": None, "opens_on_us": None,
         "timeline": None, "snapshots": None, "fragmentation": _fragmentation_json(u.fragmentation),
         "unknown": u.unknown.reason}
        for u in report.unknown
    ]
    for view in report.allocators:
        p, chart = view.peak, _chart_data(view, report.step_duration_us, names)
        allocators.append({
            "allocator": p.allocator, "source": p.source, "peak_bytes": p.peak_bytes,
            "peak_delta_bytes": p.peak_delta_bytes, "baseline_bytes": p.baseline_bytes,
            "peak_time_us": p.peak_time_us, "peak_node": p.peak_node,
            "live_at_peak": [
                {"node": r.node, "count": r.count, "kind": r.kind, "bytes": r.bytes, "dtype": r.dtype, "shape": r.shape}
                for r in repeated_allocations(p.live_at_peak)[:top]
            ],
            "opens_on_us": [chart["v0"], chart["v1"]],
            "timeline": {"time_us": chart["t"], "bytes": chart["b"], "events": view.events},
            "snapshots": {"time_us": chart["snaps"]["t"], "bytes_in_use": chart["snaps"]["b"],
                          "replay_bytes": chart["snaps"]["r"], "agrees": chart["snaps"]["ok"],
                          "count": view.snapshot_count},
            "fragmentation": _fragmentation_json(view.fragmentation),
        })
    ops = [
        {"name": r.name, "op_type": r.op_type, "occurrences": r.occurrences, "at_peak_bytes": r.at_peak_bytes,
         "requested_bytes": r.requested_bytes, "peak_bytes": r.peak_bytes, "waste_bytes": r.waste_bytes}
        for r in report.ops.rows[:top]
    ]
    return {"schema": "memtrace.report/1", "trace": report.summary.path, "step_duration_us": report.step_duration_us,
            "allocators": allocators, "top_ops": ops}


def _fragmentation_json(f: AllocatorFragmentation) -> dict[str, Any]:
    return {"bfc": f.bfc, "buffers": f.total.tensors, "requested_bytes": f.total.requested_bytes,
            "allocated_bytes": f.total.allocated_bytes, "waste_bytes": f.total.waste_bytes}


# -- small pieces -------------------------------------------------------------------------------


class _Names:
    """Node names the embedded data refers to by index, each stored once."""

    def __init__(self) -> None:
        self.table: list[str] = []
        self._index: dict[str, int] = {}

    def __call__(self, name: str) -> int:
        if name not in self._index:
            self._index[name] = len(self.table)
            self.table.append(name)
        return self._index[name]


def _bytes(value: int | None) -> str:
    """A size for a table cell: human units, the exact count on hover."""
    if value is None:
        return '<span class="none">-</span>'
    return f'<span title="{value:,} bytes">{esc(format_bytes(value))}</span>'


def _us(value_us: int | None) -> str:
    if value_us is None:
        return '<span class="none">-</span>'
    return f'<span title="{value_us:,} us">{esc(format_us(value_us * 1000))}</span>'


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[bool], cls: str = "") -> str:
    """Cells are HTML already (escaped by their makers); numeric columns align right."""
    head = "".join(f'<th class="{"num" if n else ""}">{h}</th>' for h, n in zip(headers, numeric))
    body = "".join(
        "<tr>" + "".join(f'<td class="{"num" if n else ""}">{c}</td>' for c, n in zip(row, numeric)) + "</tr>\n"
        for row in rows
    )
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead>\n<tbody>\n{body}</tbody></table>\n'


# -- header -------------------------------------------------------------------------------------


def _facts(report: ReportData) -> str:
    s = report.summary
    canonical = sum(1 for d in s.devices if d.kind == "device")
    facts = [
        ("format", f"{esc(s.message)} ({esc(s.source_format)})"),
        ("step" if report.span == "step" else f"profile of {len(report.step_marks)} steps",
         f"{esc(format_us(s.duration_ns))} ({round(s.duration_ns / 1000):,} us)"),
        ("nodes", f"{s.nodes:,} executions, {s.outputs:,} outputs"),
        ("devices", f"{canonical} holding memory, {len(s.devices) - canonical} stream or memcpy pseudo-devices"),
        ("graph", esc(f"{s.graph_nodes:,} nodes from {s.graph_source}") if s.graph_source else "none in the trace"),
    ]
    if s.oddities:
        facts.append(("oddities", "; ".join(f"{esc(oddity_name(o))}: {o.count}" for o in s.oddities)))
    items = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
    return f'<dl class="facts">{items}</dl>\n'


def _overview(views: Sequence[AllocatorView], unknown: Sequence[UnknownView] = ()) -> str:
    if not views and not unknown:
        return '<p class="note">No allocator appears in this trace: it holds no memory information.</p>\n'
    none = '<span class="none">-</span>'
    rows = [
        [f'<a href="#allocator-unknown-{number}">{esc(u.unknown.allocator)}</a>', esc(u.unknown.source), none,
         f'<span title="{esc(u.unknown.reason)}">unknown (beyond int64)</span>', none, none]
        for number, u in enumerate(unknown)
    ]
    for number, v in enumerate(views):
        p = v.peak
        rec = p.reconciliation
        reconciled = f"{rec.matched} of {rec.snapshots}" if rec.snapshots else "no snapshots"
        rows.append([
            f'<a href="#allocator-{number}">{esc(p.allocator)}</a>',
            esc(p.source),
            f"{v.events:,}",
            _bytes(p.peak_bytes) if v.events else '<span class="none">-</span>',
            _bytes(p.baseline_bytes),
            reconciled,
        ])
    headers = ["allocator", "drawn from", "events", "peak", "baseline", "snapshots agreeing"]
    return "<h2>Allocators</h2>\n" + _table(headers, rows, [False, False, True, True, True, True], "overview")


# -- one allocator ------------------------------------------------------------------------------


def _unknown_section(number: int, view: UnknownView) -> str:
    """An allocator whose bytes add up past int64: why nothing is drawn, and where its waste is."""
    u = view.unknown
    return (
        f'<section class="allocator unknown" id="allocator-unknown-{number}">\n<h2>{esc(u.allocator)}</h2>\n'
        f'<p class="lead">Peak and live bytes unknown: {esc(u.reason)} (oddity bytes-beyond-int64). A running total '
        "of them would wrap around, so there is no chart and no live set; its waste, which needs no running total, "
        "is under Fragmentation.</p>\n</section>\n"
    )


def _layer_path(names: LayerNames | None) -> Callable[[str], list[str]]:
    """The icicle's rows for a node: the phase of the step, the Keras layer, the op (memtrace.layers)."""

    def path_of(node: str) -> list[str]:
        where = layer_of(node, names)
        return [where.phase, where.layer, node.split(":", 1)[0]]

    return path_of


def _allocator_section(number: int, view: AllocatorView, chart: dict[str, Any], top: int,
                       path_of: Callable[[str], list[str]] | None = None, report: ReportData | None = None) -> str:
    p = view.peak
    span, marks = (report.span, report.step_marks) if report is not None else ("step", ())
    parts = [f'<section class="allocator" id="allocator-{number}">\n<h2>{esc(p.allocator)}</h2>\n']
    parts.append(f'<p class="lead">{_lead(view, span)}</p>\n')
    if view.events:
        parts.append(_chart(number, view, chart, span, marks))
    else:
        parts.append('<p class="note">No allocation records and no output buffers: nothing to draw.</p>\n')
    if view.address_space is not None:
        from .address_space import svg

        parts.append("<h3>Address space over time</h3>\n" + svg(view.address_space))
    if p.peak_node is not None:
        parts.append(_live_set(p, top, number, path_of))
    parts.append("</section>\n")
    return "".join(parts)


def _lead(view: AllocatorView, span: str = "step") -> str:
    p = view.peak
    rec = p.reconciliation
    if not view.events:
        return "The trace says nothing about this allocator's memory."
    source = (
        "replayed from its allocation records" if p.source == "records"
        else "from output-buffer lifetimes (no allocation records: an upper bound)"
    )
    if p.peak_node is None:
        text = f"Never rises above its level at the step start ({source})."
    else:
        text = (
            f"Peak <strong>{_bytes(p.peak_bytes)}</strong> at {_us(p.peak_time_us)} into the {span}, "
            f"reached by <code>{esc(p.peak_node)}</code> ({source})."
        )
    if p.baseline_bytes is not None:
        text += (
            f" Baseline {_bytes(p.baseline_bytes)} was live before the step: {rec.matched} of {rec.snapshots} "
            f"snapshots agree with replay + baseline (largest disagreement {_bytes(rec.max_abs_error_bytes)})."
        )
    elif rec.snapshots:
        text += f" Baseline unknown: none of its {rec.snapshots} snapshots implies a plausible one; bytes are relative."
    else:
        text += " No snapshots: bytes are relative to the step start."
    return text


def _chart(number: int, view: AllocatorView, c: dict[str, Any], span: str = "step",
           marks: Sequence[tuple[int, int]] = ()) -> str:
    """The SVG: grid, axes, the step curve, baseline, snapshots, peak, and in a profile of several
    steps where each step begins (``marks``); the script redraws x on zoom."""
    p = view.peak
    x0, x1, y0, y1 = c["v0"], c["v1"], c["y0"], c["y1"]  # the opening view: where the bytes move

    def x(t: float) -> str:
        return f"{LEFT + (t - x0) / (x1 - x0) * (WIDTH - LEFT - RIGHT):.1f}"

    def y(b: float) -> str:
        return f"{TOP + (1 - (b - y0) / (y1 - y0)) * (HEIGHT - TOP - BOTTOM):.1f}"

    bottom, right = HEIGHT - BOTTOM, WIDTH - RIGHT
    svg = [
        f'<svg class="timeline" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        + f'aria-label="{esc(p.allocator)}: bytes over the step">',
        f'<defs><clipPath id="clip-{number}"><rect x="{LEFT}" y="0" width="{right - LEFT}" height="{bottom}"/>'
        + "</clipPath></defs>",
    ]
    unit_name, unit = _unit_of(p.peak_bytes if p.peak_node is not None else int(y1))
    steps = sorted({int(m * unit * 10.0**k) for k in range(-3, 4) for m in (1, 2, 5)} - {0})
    for tick in _ticks(y0, y1, steps):
        label = f"{tick / unit:g} {unit_name}" if tick else "0"
        svg.append(f'<line class="grid" x1="{LEFT}" x2="{right}" y1="{y(tick)}" y2="{y(tick)}"/>')
        svg.append(f'<text class="tick" x="{LEFT - 6}" y="{float(y(tick)) + 4:.1f}" text-anchor="end">{esc(label)}</text>')
    svg.append('<g class="xticks">')
    for tick in _ticks(x0, x1, _TIME_STEPS):
        svg.append(f'<line class="xtick" x1="{x(tick)}" x2="{x(tick)}" y1="{bottom}" y2="{bottom + 5}"/>')
        svg.append(f'<text class="tick" x="{x(tick)}" y="{bottom + 18}" text-anchor="middle">{esc(format_us(tick * 1000))}</text>')
    svg.append("</g>")
    svg.append(f'<text class="axis" x="{right}" y="{HEIGHT - 4}" text-anchor="end">time into the {span}</text>')
    svg.append(f'<line class="axisline" x1="{LEFT}" x2="{right}" y1="{bottom}" y2="{bottom}"/>')

    # The curve is a step function: flat from each point until the next one.
    # As the script draws it: the level reached before the view, then the points inside it.
    level, inside = c["start"], []
    for t, b in zip(c["t"], c["b"]):
        if t < x0:
            level = b
        elif t <= x1:
            inside.append((t, b))
    path = [f"M{x(x0)},{y(level)}"]
    path.extend(f"H{x(t)}V{y(b)}" for t, b in inside)
    path.append(f"H{x(x1)}")
    line = "".join(path)
    svg.append(f'<g class="plot" clip-path="url(#clip-{number})">')
    svg.append(f'<path class="area" d="{line}V{y(max(y0, 0))}H{x(x0)}Z"/>')
    svg.append(f'<path class="curve" d="{line}"/>')
    snaps = c["snaps"]
    for t, b, ok in zip(snaps["t"], snaps["b"], snaps["ok"]):
        svg.append(f'<circle class="snap {"ok" if ok else "off"}" cx="{x(t)}" cy="{y(b)}" r="3"/>')
    if p.peak_node is not None:
        svg.append(
            f'<line class="peak-line" x1="{x(p.peak_time_us)}" x2="{x(p.peak_time_us)}" '
            f'y1="{y(p.peak_bytes)}" y2="{bottom}"/>'
        )
        svg.append(f'<circle class="peak-dot" cx="{x(p.peak_time_us)}" cy="{y(p.peak_bytes)}" r="5"/>')
    svg.append("</g>")
    for step, start_us in marks:  # where each step of a profile begins; moved on zoom by _STEP_MARKS_SCRIPT
        shown = "visible" if x0 <= start_us <= x1 else "hidden"
        svg.append(f'<g class="step-mark" data-t="{start_us}" visibility="{shown}">'
                   f'<line x1="{x(start_us)}" x2="{x(start_us)}" y1="{TOP}" y2="{bottom}" stroke="#64748b" '
                   'stroke-dasharray="2 4"/>'
                   f'<text x="{float(x(start_us)) + 3:.1f}" y="{TOP + 10}" fill="#475569" font-size="11">step {step}</text></g>')

    level = p.baseline_bytes if p.baseline_bytes is not None else 0
    label = (
        f"baseline {format_bytes(level)} (live before the step)" if p.baseline_bytes is not None
        else "level at the step start (baseline unknown)"
    )
    svg.append(
        f'<line class="baseline" x1="{LEFT}" x2="{right}" y1="{y(level)}" y2="{y(level)}" '
        f'data-baseline-bytes="{"" if p.baseline_bytes is None else p.baseline_bytes}"/>'
    )
    svg.append(f'<text class="baseline-label" x="{LEFT + 6}" y="{float(y(level)) - 5:.1f}">{esc(label)}</text>')
    if p.peak_node is not None:
        px = float(x(p.peak_time_us))
        anchor, dx = ("end", -9) if px > (LEFT + right) / 2 else ("start", 9)
        svg.append(
            f'<text class="peak-label" x="{px + dx:.1f}" y="{max(float(y(p.peak_bytes)) - 8, 14):.1f}" '
            f'text-anchor="{anchor}" data-peak-bytes="{p.peak_bytes}" data-peak-time-us="{p.peak_time_us}">'
            f"peak {esc(format_bytes(p.peak_bytes))} at {esc(format_us(p.peak_time_us * 1000))}</text>"
        )
    svg.append(
        f'<rect class="selection" x="0" y="{TOP}" width="0" height="{bottom - TOP}" visibility="hidden"/>'
        f'<g class="cursor" visibility="hidden"><line x1="0" x2="0" y1="{TOP}" y2="{bottom}"/>'
        f'<circle cx="0" cy="0" r="4"/></g>'
        f'<rect class="hit" x="{LEFT}" y="{TOP}" width="{right - LEFT}" height="{bottom - TOP}" fill="transparent"/>'
        "</svg>"
    )

    total_snaps = view.snapshot_count
    drawn = (
        f", {len(snaps['t']):,} of {total_snaps:,} snapshots drawn (each time bucket's largest disagreement)"
        if total_snaps > len(snaps["t"]) else ""
    )
    agreeing = int(view.snapshots.agrees.sum())
    legend = [
        '<span class="key curve-key"></span>' + ("bytes in use (baseline + replay)" if p.baseline_bytes is not None
                                                 else "live bytes (relative to the step start)"),
        '<span class="key baseline-key"></span>' + ("baseline" if p.baseline_bytes is not None else "step-start level"),
    ]
    if p.peak_node is not None:
        legend.append('<span class="key peak-key"></span>peak')
    if total_snaps:
        legend.append(f'<span class="key snap-ok-key"></span>allocator snapshot agreeing with the replay ({agreeing:,})')
        legend.append(f'<span class="key snap-off-key"></span>snapshot disagreeing ({total_snaps - agreeing:,})')
    note = (
        f"{view.events:,} events, {len(c['t']):,} points drawn (each time bucket's maximum and minimum){drawn}. "
        if view.events > len(c["t"]) else f"{view.events:,} events{drawn}. "
    )
    if view.focus_us is not None:
        note = (
            f"Opens on {esc(format_us(x0 * 1000))} to {esc(format_us(x1 * 1000))} of the "
            f"{esc(format_us((c['t1'] - c['t0']) * 1000))} step, where the bytes move (98% of those allocated and "
            "freed, and the peak); the button or a double click shows the whole step. " + note
        )
    items = " ".join(f'<span class="legend-item">{item}</span>' for item in legend)
    return (
        f'<figure class="chart" data-chart="{number}">\n' + "".join(svg) + "\n"
        '<div class="tip" hidden></div><button class="reset" type="button"'
        + (" hidden" if view.focus_us is None else "") + ">show the whole step</button>\n"
        + f"<figcaption>{items}<br><span class=\"hint\">{note}"
        "Hover for time and bytes; click to pin; drag across the chart to zoom into a time range.</span>"
        "</figcaption>\n</figure>\n"
    )




def _unit_of(value: int) -> tuple[str, int]:
    """The binary unit ``format_bytes`` writes ``value`` in, and its size: the y axis speaks the peak label's unit."""
    name = format_bytes(value).split()[-1]
    return name, 1024 ** ("B", "KiB", "MiB", "GiB", "TiB", "PiB").index(name)
_TIME_STEPS = [m * 10**k for k in range(10) for m in (1, 2, 5)]


def _ticks(lo: float, hi: float, steps: Sequence[int], target: int = 5) -> list[int]:
    """Round tick values inside [lo, hi], about ``target`` of them."""
    span = hi - lo
    step = next((s for s in steps if s * target >= span), None)
    if step is None:  # a span beyond the table (a trace of years): the step keeps growing with it
        step = next(m * 10**k for k in itertools.count() for m in (1, 2, 5)
                    if m * 10**k > steps[-1] and m * 10**k * target >= span)
    first = math.ceil(lo / step) * step
    return list(range(int(first), int(hi) + 1, step))


def _chart_data(view: AllocatorView, duration_us: int, names: _Names) -> dict[str, Any]:
    """The drawn points and scales, shared by the SVG and the script (hover, click)."""
    p, tl, snaps = view.peak, view.timeline, view.snapshots
    times = tl.time_us.tolist()
    values = tl.live_bytes.tolist()
    start = p.baseline_bytes or 0
    t0 = min([0, *times[:1]])
    t1 = max([duration_us, *times[-1:], *snaps.time_us.tolist()[-1:]])
    if t1 <= t0:
        t1 = t0 + 1
    everything = [start, *values, *snaps.bytes_in_use.tolist()]
    low, high = min(0, *everything), max(everything)
    y1 = high + max((high - low) * 0.12, 1)
    v0, v1 = view.focus_us if view.focus_us is not None else (t0, t1)
    return {
        "allocator": p.allocator,
        "t0": t0, "t1": t1, "v0": max(v0, t0), "v1": min(v1, t1), "y0": low, "y1": y1, "start": start,
        "geometry": {"left": LEFT, "right": WIDTH - RIGHT, "top": TOP, "bottom": HEIGHT - BOTTOM},
        "t": times, "b": values, "n": [names(n) for n in view.event_nodes],
        "snaps": {
            "t": snaps.time_us.tolist(),
            "b": snaps.bytes_in_use.tolist(),
            "r": snaps.replay_bytes.tolist(),
            "ok": [bool(v) for v in snaps.agrees.tolist()],
            "n": [names(n) for n in view.snapshot_nodes],
        },
        "peak": None if p.peak_node is None else {"t": p.peak_time_us, "b": p.peak_bytes, "n": names(p.peak_node)},
        "baseline": p.baseline_bytes,
    }


# -- live set -----------------------------------------------------------------------------------


def _live_set(p: AllocatorPeak, top: int, number: int = 0, path_of: Callable[[str], list[str]] | None = None) -> str:
    live = p.live_at_peak
    whole = p.peak_bytes if p.baseline_bytes is not None else p.peak_delta_bytes
    by_kind: dict[str, int] = {}
    for a in live:
        if a.bytes > 0:
            by_kind[a.kind] = by_kind.get(a.kind, 0) + a.bytes
    segments = [("baseline", p.baseline_bytes or 0)] + sorted(by_kind.items(), key=lambda kv: -kv[1])
    shown = sum(b for _, b in segments) or 1
    bar = "".join(
        f'<div class="seg" style="width:{100 * b / shown:.3f}%;background:{KIND_COLOURS.get(kind, "#64748b")}" '
        f'title="{esc(kind)}: {esc(format_bytes(b))} ({b:,} bytes)"></div>'
        for kind, b in segments if b > 0
    )
    keys = " ".join(
        f'<span class="legend-item"><span class="key" style="background:{KIND_COLOURS.get(kind, "#64748b")}"></span>'
        f"{esc(kind)} {_bytes(b)} ({_percent(b, whole)})</span>"
        for kind, b in segments if b > 0
    )
    held, freed = split_freed_before_step(live)
    negative = sum(a.bytes for a in freed)
    if negative:
        keys += f' <span class="legend-item">minus {_bytes(-negative)} freed from before the step</span>'
    # Frees of chunks allocated before the step are said in the legend, never as rows.
    folded = repeated_allocations(held)
    rows = [_live_row(i + 1, r, sum(a.bytes for a in held)) for i, r in enumerate(folded[:top])]
    rest = folded[top:]
    more = (
        f'<p class="note">and {plural(sum(r.count for r in rest), "more allocation")} holding '
        f'{_bytes(sum(r.bytes for r in rest))}.</p>\n'
        if rest else ""
    )
    headers = ["#", "node", "count", "kind", "allocated", "requested", "share of live", "allocated at", "freed at", "tensor"]
    repeats = (
        '<p class="note">Allocations whose node names differ only in their numbers (an unrolled loop, a stack of '
        "layers) are one row, their numbers shown as <code>*</code>; <em>count</em> says how many.</p>\n"
        if any(r.count > 1 for r in folded) else ""
    )
    return (
        f'<h3>Live at the peak: {_bytes(p.peak_delta_bytes)} in {plural(len(held), "allocation")}</h3>\n'
        f'<div class="bar" role="img" aria-label="peak bytes by kind">{bar}</div>\n'
        f'<p class="keys">{keys}</p>\n'
        + icicle.render(live, number, path_of)
        + repeats
        + _table(headers, rows, [True, False, True, False, True, True, True, True, True, False], "live")
        + more
    )


def _live_row(rank: int, r: RepeatedAllocation, live_total: int) -> list[str]:
    a = r.first
    tensor = " ".join(
        part for part in (
            esc(a.dtype) if a.dtype else "",
            "[" + ",".join(str(d) for d in a.shape) + "]" if a.shape is not None else "",
            f"id {a.allocation_id}" if a.allocation_id is not None and r.count == 1 else "",
            f"slot {a.slot}" if a.slot is not None and r.count == 1 else "",
        ) if part
    )
    share = max(0.0, 100 * r.bytes / live_total) if live_total > 0 else 0.0
    first = "" if r.count == 1 else "first "
    return [
        str(rank),
        f"<code>{esc(r.node)}</code>",
        f"&times;{r.count}",
        f'<span class="kind" style="border-color:{KIND_COLOURS.get(a.kind, "#64748b")}">{esc(a.kind)}</span>',
        _bytes(r.bytes),
        _bytes(r.requested_bytes),
        f'<span class="minibar"><span style="width:{share:.2f}%"></span></span>{_percent(r.bytes, live_total)}',
        first + _us(a.alloc_time_us),
        (first + _us(a.free_time_us)) if a.free_time_us is not None else '<span class="none">not in the step</span>',
        tensor,
    ]


# -- ops and fragmentation ----------------------------------------------------------------------


def _ops_section(report: ReportData, top: int) -> str:
    rows: Sequence[OpRow] = report.ops.rows[:top]
    if not rows:
        return '<section id="ops"><h2>Top ops</h2><p class="note">No op on a memory-owning device.</p></section>\n'
    cells = [
        [
            f"<code>{esc(r.name)}</code>", esc(r.op_type or ""), f"{r.occurrences:,}",
            *(_bytes(getattr(r, c)) for c in (
                "at_peak_bytes", "requested_bytes", "peak_bytes", "residual_bytes", "output_bytes", "temp_bytes",
                "persistent_bytes", "waste_bytes",
            )),
        ]
        for r in rows
    ]
    headers = ["node", "op type", "count", "at peak", "allocated (tfprof)", "peak (tfprof)", "residual", "output", "temp",
               "persistent", "waste"]
    left_out = "".join(
        f' <em>At peak</em> leaves out <code>{esc(u.allocator)}</code>, whose peak is unknown (beyond int64).'
        for u in report.ops.unknown
    )
    return (
        '<section id="ops"><h2>Top ops by bytes held at the peak</h2>\n'
        f'<p class="lead">The {len(rows)} of {len(report.ops.rows):,} ops that hold the most in the live set at the '
        "allocators' peaks (<em>at peak</em>), as <code>memtrace ops --by node --sort at_peak</code> computes them; "
        "allocated (tfprof's requested bytes), peak, residual and output are TensorFlow's profiler's numbers, whose <em>peak</em> is each "
        f"op's own high-water mark, not what it holds at the allocator's peak.{left_out}</p>\n"
        + _table(headers, cells, [False, False] + [True] * 9, "ops")
        + "</section>\n"
    )


def _frag_section(report: ReportData) -> str:
    rows = []
    anomalies: list[tuple[str, Anomaly]] = [("trace", a) for a in report.anomalies]
    for f in [u.fragmentation for u in report.unknown] + [v.fragmentation for v in report.allocators]:
        t, e = f.total, f.external
        anomalies.extend((f.allocator, a) for a in f.anomalies)
        rows.append([
            esc(f.allocator) + (" (BFC)" if f.bfc else ""),
            f"{t.tensors:,}",
            _bytes(t.requested_bytes),
            _bytes(t.allocated_bytes),
            f"{_bytes(t.waste_bytes)} ({_percent(t.waste_bytes, t.allocated_bytes)})",
            _bytes(t.rounding_waste_bytes) if f.bfc else '<span class="none">-</span>',
            _bytes(t.unsplit_waste_bytes) if f.bfc else '<span class="none">-</span>',
            _bytes(f.at_peak.live.waste_bytes) if f.at_peak else '<span class="none">-</span>',
            _bytes(e.span_bytes) if e else '<span class="none">-</span>',
            f"{len(e.holes):,} ({_bytes(e.hole_bytes)})" if e else '<span class="none">-</span>',
            _bytes(e.largest_hole_bytes) if e else '<span class="none">-</span>',
        ])
    headers = [
        "allocator", "buffers", "requested", "allocated", "waste", "rounding", "unsplit chunks",
        "waste live at peak", "address span at peak", "holes at peak", "largest hole",
    ]
    text = [
        '<section id="frag"><h2>Fragmentation</h2>\n'
        + '<p class="lead">Internal: bytes allocated beyond the request, per unique output buffer (BFC rounds to 256 B '
        "and may hand out a chunk whole). External: at the peak, the address span of the live output buffers and "
        "the holes between them (only buffers the trace describes have addresses, so a hole may be in use). "
        "See <code>memtrace frag</code> for the details.</p>\n"
    ]
    text.append('<div class="fit">' + _table(headers, rows, [False] + [True] * 10, "frag") + "</div>\n" if rows else "")
    heap = [v.fragmentation.allocator for v in report.allocators
            if not v.fragmentation.bfc and v.fragmentation.external is not None]
    if heap:
        text.append(
            f'<p class="note">{", ".join(f"<code>{esc(n)}</code>" for n in heap)}: not a BFC allocator, so its memory may '
            "come from the system heap and the address span at the peak can cross unrelated memory.</p>\n"
        )
    if anomalies:
        items = "".join(
            f"<li><strong>{esc(owner)}</strong>: {esc(a.kind)} &times; {a.count}: {esc(a.detail)}"
            + (f' <span class="examples">(e.g. {esc("; ".join(a.examples))})</span>' if a.examples else "")
            + "</li>\n"
            for owner, a in anomalies
        )
        text.append(f"<h3>Anomalies</h3>\n<ul class=\"anomalies\">\n{items}</ul>\n")
    else:
        text.append('<p class="note">No anomalies.</p>\n')
    text.append("</section>\n")
    return "".join(text)


# -- the page's fixed parts ---------------------------------------------------------------------

_HEAD = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<script>{guard}</script>
<style>{style}</style>
</head>
<body>
"""

# Runs first: any script error on the page is written into the DOM, where a test can read it.
_ERROR_GUARD = (
    "(function(){var seen=[];function note(m){seen.push(String(m));"
    "document.documentElement.setAttribute('data-errors',seen.join(' | '));}"
    "window.addEventListener('error',function(e){note(e.message||'error');});"
    "window.addEventListener('unhandledrejection',function(e){note(e.reason);});})();"
)

_STYLE = """
:root{--ink:#1f2937;--muted:#6b7280;--line:#e5e7eb;--curve:#2563eb;--peak:#dc2626;--ok:#16a34a;--off:#ea580c}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:var(--ink);background:#f8fafc}
header,main,footer{max-width:1180px;margin:0 auto;padding:0 24px}
header{padding-top:20px}
h1{font-size:24px;margin:0 0 4px}
h2{font-size:19px;margin:28px 0 8px}
h3{font-size:15px;margin:18px 0 8px}
code{font:12.5px/1.3 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;word-break:break-all}
p.trace code{font-size:14px}
.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:10px 0}
.facts dt{color:var(--muted)}
.facts dd{margin:0}
section{background:#fff;border:1px solid var(--line);border-radius:8px;padding:4px 20px 16px;margin:18px 0}
.lead{margin:4px 0 10px}
.note,.hint,.none,.examples{color:var(--muted)}
table{border-collapse:collapse;width:100%;font-size:13px;margin:6px 0}
th,td{padding:4px 8px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{background:#f1f5f9;font-weight:600;white-space:nowrap}
td.num,th.num{text-align:right;white-space:nowrap}
.fit{overflow-x:auto}
table.frag th{white-space:normal;vertical-align:bottom}
figure.chart{position:relative;margin:8px 0 4px}
svg.timeline{width:100%;height:auto;display:block;font:12px system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif}
svg .grid{stroke:#eef2f7}
svg .axisline,svg .xtick{stroke:#94a3b8}
svg .tick{fill:var(--muted)}
svg .axis{fill:var(--muted);font-style:italic}
svg .area{fill:rgba(37,99,235,.12);stroke:none}
svg .curve{fill:none;stroke:var(--curve);stroke-width:1.6;stroke-linejoin:round}
svg .baseline{stroke:#6b7280;stroke-width:1.2;stroke-dasharray:6 4}
svg .baseline-label{fill:#4b5563;font-size:11.5px}
svg .snap.ok{fill:#fff;stroke:var(--ok);stroke-width:1.4}
svg .snap.off{fill:var(--off);stroke:#fff;stroke-width:.8}
svg .peak-line{stroke:var(--peak);stroke-dasharray:3 3}
svg .peak-dot{fill:var(--peak);stroke:#fff;stroke-width:1.5}
svg .peak-label{fill:var(--peak);font-weight:700;font-size:13px}
svg .cursor line{stroke:#111827;stroke-width:1;stroke-dasharray:2 2}
svg .cursor circle{fill:#111827}
svg .hit{cursor:crosshair}
.tip{position:absolute;top:4px;pointer-events:none;background:rgba(17,24,39,.92);color:#fff;padding:6px 9px;border-radius:6px;font-size:12.5px;line-height:1.4;max-width:420px;white-space:pre-line}
figure.pinned .tip{outline:2px solid #fbbf24}
figcaption{font-size:12.5px;margin-top:4px}
.legend-item{margin-right:14px;white-space:nowrap}
.key{display:inline-block;width:14px;height:10px;margin-right:5px;vertical-align:baseline;border-radius:2px}
.curve-key{background:var(--curve)}
.baseline-key{border-top:2px dashed #6b7280;height:0;border-radius:0}
.peak-key{background:var(--peak);border-radius:50%;width:10px}
.snap-ok-key{border:1.5px solid var(--ok);border-radius:50%;width:10px}
.snap-off-key{background:var(--off);border-radius:50%;width:10px}
.bar{display:flex;height:22px;border-radius:4px;overflow:hidden;border:1px solid var(--line);margin:6px 0}
.bar .seg{height:100%}
.icicle{position:relative;margin:8px 0 2px;overflow:hidden;font-size:12px}
.icicle .ic{position:absolute;height:20px;line-height:20px;box-sizing:border-box;border:1px solid #fff;border-radius:3px;
 padding:0 4px;overflow:hidden;white-space:nowrap;text-overflow:ellipsis;cursor:pointer;color:#0f172a}
.icicle .ic .ic-size{color:#334155;font-size:11px}
.icicle .d0{background:#bfdbfe}.icicle .d1{background:#c7d2fe}.icicle .d2{background:#ddd6fe}
.icicle .d3{background:#fbcfe8}.icicle .d4{background:#fed7aa}.icicle .d5{background:#bbf7d0}
.icicle .ic:hover{outline:2px solid #1e3a8a;z-index:1}
.keys{font-size:12.5px;margin:4px 0 8px}
.kind{border-left:4px solid;padding-left:5px}
table.live td:last-child{white-space:nowrap}
.minibar{display:inline-block;width:60px;height:8px;background:#eef2f7;margin-right:6px;vertical-align:middle}
.minibar span{display:block;height:100%;background:var(--curve)}
ul.anomalies{padding-left:20px}
footer{color:var(--muted);font-size:12px;padding:8px 24px 28px}
"""

# Hover, click and zoom. Hover snaps to the nearest drawn point and shows its time, bytes and node
# (and a snapshot within a few units); a click pins that; a drag zooms into a time range, which
# redraws everything that depends on x exactly as the Python side drew it. Names from the trace
# go in with textContent, never as markup. With #selftest in the URL the page exercises itself and
# writes what it saw into data- attributes, for the browser test.
# Step boundaries of a profile of several steps follow the chart's view, which the main script
# writes into each figure's data-view attribute whenever it draws.
_STEP_MARKS_SCRIPT = r"""
(function(){
'use strict';
var data=JSON.parse(document.getElementById('memtrace-data').textContent);
Array.prototype.forEach.call(document.querySelectorAll('figure.chart'),function(fig){
 var marks=fig.querySelectorAll('.step-mark');if(!marks.length)return;
 var g=data.charts[Number(fig.getAttribute('data-chart'))].geometry;
 function place(){var v=(fig.getAttribute('data-view')||'').split(',');if(v.length<2)return;
  var a=Number(v[0]),b=Number(v[1]);
  Array.prototype.forEach.call(marks,function(m){var t=Number(m.getAttribute('data-t'));
   var x=g.left+(t-a)/(b-a)*(g.right-g.left);
   m.setAttribute('visibility',t>=a&&t<=b?'visible':'hidden');
   var l=m.querySelector('line'),s=m.querySelector('text');
   l.setAttribute('x1',x.toFixed(1));l.setAttribute('x2',x.toFixed(1));s.setAttribute('x',(x+3).toFixed(1));});}
 new MutationObserver(place).observe(fig,{attributes:true,attributeFilter:['data-view']});place();});
})();
"""

_SCRIPT = r"""
(function(){
'use strict';
var data=JSON.parse(document.getElementById('memtrace-data').textContent);
var UNITS=['B','KiB','MiB','GiB','TiB','PiB'];
function fmtBytes(v){var sign=v<0?'-':'';var s=Math.abs(v);for(var i=0;i<UNITS.length;i++){
 if(s<1024||i===UNITS.length-1){if(i===0)return sign+Math.round(s)+' B';
 return sign+(s<100?String(Number(s.toPrecision(3))):String(Math.round(s)))+' '+UNITS[i];}s/=1024;}}
function fmtTime(us){var a=Math.abs(us);if(a<1000)return (us===Math.round(us)?us:Number(us.toPrecision(3)))+' us';
 if(a<1e6)return Number((us/1000).toPrecision(3))+' ms';return Number((us/1e6).toPrecision(3))+' s';}
function exact(v){return v.toLocaleString('en-US');}
function nearest(ts,t){var lo=0,hi=ts.length-1;if(hi<0)return -1;while(lo<hi){var mid=(lo+hi)>>1;if(ts[mid]<t)lo=mid+1;else hi=mid;}
 if(lo>0&&Math.abs(ts[lo-1]-t)<=Math.abs(ts[lo]-t))return lo-1;return lo;}
var STEPS=[];for(var k=0;k<10;k++){STEPS.push(Math.pow(10,k),2*Math.pow(10,k),5*Math.pow(10,k));}
function ticks(lo,hi){var step=STEPS[STEPS.length-1];for(var i=0;i<STEPS.length;i++){if(STEPS[i]*5>=hi-lo){step=STEPS[i];break;}}
 if(step*5<hi-lo){var p=Math.pow(10,Math.floor(Math.log((hi-lo)/5)/Math.LN10)),m=[1,2,5,10];for(var j=0;j<4;j++){if(m[j]*p*5>=hi-lo){step=m[j]*p;break;}}}  // beyond the table (years): 1-2-5 steps go on
 var out=[];for(var v=Math.ceil(lo/step)*step;v<=hi;v+=step)out.push(v);return out;}
var charts=[];
Array.prototype.forEach.call(document.querySelectorAll('figure.chart'),function(fig){
 var c=data.charts[Number(fig.getAttribute('data-chart'))],g=c.geometry;
 var svg=fig.querySelector('svg'),tip=fig.querySelector('.tip'),reset=fig.querySelector('.reset');
 var cursor=svg.querySelector('.cursor'),cline=cursor.querySelector('line'),cdot=cursor.querySelector('circle');
 var sel=svg.querySelector('.selection'),xticks=svg.querySelector('.xticks');
 var view={a:c.v0,b:c.v1},pinned=false,drag=null;
 function X(t){return g.left+(t-view.a)/(view.b-view.a)*(g.right-g.left);}
 function Y(v){return g.top+(1-(v-c.y0)/(c.y1-c.y0))*(g.bottom-g.top);}
 function f(v){return v.toFixed(1);}
 function toTime(x){return view.a+(x-g.left)/(g.right-g.left)*(view.b-view.a);}
 function localX(e){var p=svg.createSVGPoint();p.x=e.clientX;p.y=e.clientY;
  var x=p.matrixTransform(svg.getScreenCTM().inverse()).x;return Math.min(g.right,Math.max(g.left,x));}
 function set(el,attrs){for(var k in attrs)el.setAttribute(k,attrs[k]);}
 function draw(a,b){
  view.a=a;view.b=b;
  var level=c.start,i=0,n=c.t.length;
  while(i<n&&c.t[i]<a){level=c.b[i];i++;}
  var d=['M'+f(X(a))+','+f(Y(level))];
  for(;i<n&&c.t[i]<=b;i++)d.push('H'+f(X(c.t[i]))+'V'+f(Y(c.b[i])));
  d.push('H'+f(X(b)));var line=d.join('');
  svg.querySelector('.curve').setAttribute('d',line);
  svg.querySelector('.area').setAttribute('d',line+'V'+f(Y(Math.max(c.y0,0)))+'H'+f(X(a))+'Z');
  Array.prototype.forEach.call(svg.querySelectorAll('.snap'),function(el,k){
   var t=c.snaps.t[k];el.setAttribute('cx',f(X(t)));el.setAttribute('visibility',t>=a&&t<=b?'visible':'hidden');});
  if(c.peak){var px=X(c.peak.t),inside=c.peak.t>=a&&c.peak.t<=b,right=px>(g.left+g.right)/2;
   set(svg.querySelector('.peak-line'),{x1:f(px),x2:f(px)});set(svg.querySelector('.peak-dot'),{cx:f(px)});
   set(svg.querySelector('.peak-label'),{x:f(px+(right?-9:9)),'text-anchor':right?'end':'start',visibility:inside?'visible':'hidden'});}
  while(xticks.firstChild)xticks.removeChild(xticks.firstChild);
  ticks(a,b).forEach(function(t){
   var l=document.createElementNS(svg.namespaceURI,'line');set(l,{'class':'xtick',x1:f(X(t)),x2:f(X(t)),y1:g.bottom,y2:g.bottom+5});
   var s=document.createElementNS(svg.namespaceURI,'text');set(s,{'class':'tick',x:f(X(t)),y:g.bottom+18,'text-anchor':'middle'});
   s.textContent=fmtTime(t);xticks.appendChild(l);xticks.appendChild(s);});
  reset.hidden=(a===c.t0&&b===c.t1);
  fig.setAttribute('data-view',a+','+b);
 }
 function show(t){
  var i=nearest(c.t,t);if(i<0)return '';
  var x=X(c.t[i]),y=Y(c.b[i]);
  set(cline,{x1:x,x2:x});set(cdot,{cx:x,cy:y});
  cursor.setAttribute('visibility',c.t[i]>=view.a&&c.t[i]<=view.b?'visible':'hidden');
  var text=fmtTime(c.t[i])+' into the step ('+exact(c.t[i])+' us)\n'+fmtBytes(c.b[i])+' ('+exact(c.b[i])+' bytes)'+
   (c.baseline===null?' relative to the step start':'')+'\nafter '+data.names[c.n[i]];
  var j=nearest(c.snaps.t,t);
  if(j>=0&&Math.abs(X(c.snaps.t[j])-X(t))<=4){
   text+='\nsnapshot after '+data.names[c.snaps.n[j]]+': '+fmtBytes(c.snaps.b[j])+
    (c.snaps.ok[j]?' (agrees with the replay)':' (the replay says '+fmtBytes(c.snaps.r[j])+')');}
  tip.textContent=text;tip.hidden=false;
  var w=fig.clientWidth,px=x/svg.viewBox.baseVal.width*w;
  if(px>w/2){tip.style.left='';tip.style.right=(w-px+12)+'px';}else{tip.style.right='';tip.style.left=(px+12)+'px';}
  return text;}
 function hide(){cursor.setAttribute('visibility','hidden');tip.hidden=true;}
 svg.addEventListener('mousedown',function(e){drag={x:localX(e),moved:false};e.preventDefault();});
 svg.addEventListener('mousemove',function(e){
  var x=localX(e);
  if(drag&&Math.abs(x-drag.x)>4){drag.moved=true;
   set(sel,{x:f(Math.min(x,drag.x)),width:f(Math.abs(x-drag.x)),visibility:'visible'});return;}
  if(!pinned)show(toTime(x));});
 svg.addEventListener('mouseup',function(e){
  var x=localX(e),d=drag;drag=null;sel.setAttribute('visibility','hidden');
  if(d&&d.moved){var a=toTime(Math.min(x,d.x)),b=toTime(Math.max(x,d.x));
   if(b-a>=1){pinned=false;fig.classList.remove('pinned');hide();draw(a,b);}return;}
  pinned=!pinned;fig.classList.toggle('pinned',pinned);if(pinned)show(toTime(x));else hide();});
 svg.addEventListener('mouseleave',function(){drag=null;sel.setAttribute('visibility','hidden');if(!pinned)hide();});
 svg.addEventListener('dblclick',function(){draw(c.t0,c.t1);});
 reset.addEventListener('click',function(){draw(c.t0,c.t1);});
 charts.push({fig:fig,c:c,svg:svg,show:show,hide:hide,draw:draw,X:X,localX:localX});
});
Array.prototype.forEach.call(document.querySelectorAll('.icicle'),function(box){
 var bars=Array.prototype.slice.call(box.querySelectorAll('.ic'));
 function open(a,b,depth){bars.forEach(function(el){
  var x0=Number(el.getAttribute('data-x0')),x1=Number(el.getAttribute('data-x1')),d=Number(el.getAttribute('data-depth'));
  var inside=x1>a+1e-9&&x0<b-1e-9;
  if(d<depth){el.style.left='0%';el.style.width='100%';el.style.display=inside?'':'none';return;}
  el.style.display=inside?'':'none';
  el.style.left=(100*(Math.max(x0,a)-a)/(b-a))+'%';el.style.width=(100*(Math.min(x1,b)-Math.max(x0,a))/(b-a))+'%';});
  box.setAttribute('data-open',a+','+b+','+depth);}
 bars.forEach(function(el){el.addEventListener('click',function(){
  var d=Number(el.getAttribute('data-depth'));
  if(d===0){open(0,1,0);return;}
  open(Number(el.getAttribute('data-x0')),Number(el.getAttribute('data-x1')),d);});});
});
document.documentElement.setAttribute('data-ready',String(charts.length));
if(location.hash==='#selftest'){
 var numbers=function(d){return (d.match(/-?[0-9.]+/g)||[]).map(Number);};
 charts.forEach(function(h){
  if(!h.c.peak)return;
  var r=h.svg.getBoundingClientRect(),scale=r.width/h.svg.viewBox.baseVal.width,y=r.top+r.height/2;
  function mouse(type,x){h.svg.dispatchEvent(new MouseEvent(type,{clientX:r.left+x*scale,clientY:y,bubbles:true}));}
  var px=h.X(h.c.peak.t);
  mouse('mousemove',px);h.fig.setAttribute('data-hover',h.fig.querySelector('.tip').textContent);
  h.fig.setAttribute('data-at-peak',h.show(h.c.peak.t));
  var before=numbers(h.svg.querySelector('.curve').getAttribute('d'));
  h.draw(h.c.v0,h.c.v1);
  var after=numbers(h.svg.querySelector('.curve').getAttribute('d'));
  var same=before.length===after.length&&before.every(function(v,k){return Math.abs(v-after[k])<0.11;});
  h.fig.setAttribute('data-redraw',same?'same':'differs '+before.length+' '+after.length);
  mouse('mousedown',Math.max(px-40,h.c.geometry.left));mouse('mousemove',px+40);mouse('mouseup',px+40);
  h.fig.setAttribute('data-zoomed',h.fig.getAttribute('data-view')+(h.fig.querySelector('.reset').hidden?'':' reset-shown'));
  h.draw(h.c.v0,h.c.v1);h.hide();});
 Array.prototype.forEach.call(document.querySelectorAll('.icicle'),function(box){
  var bar=box.querySelector('.ic[data-depth="2"]')||box.querySelector('.ic[data-depth="1"]');if(!bar)return;
  bar.click();var shown=Array.prototype.filter.call(box.querySelectorAll('.ic'),function(el){return el.style.display!=='none';});
  box.setAttribute('data-selftest',box.getAttribute('data-open')+' '+bar.style.width+' '+shown.length);
  box.querySelector('.ic[data-depth="0"]').click();});
}
var zoom=/^#zoom=(-?[0-9.]+),(-?[0-9.]+)$/.exec(location.hash);
if(zoom&&Number(zoom[2])>Number(zoom[1]))charts.forEach(function(h){h.draw(Number(zoom[1]),Number(zoom[2]));});
})();
"""
