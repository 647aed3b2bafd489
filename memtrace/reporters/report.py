"""Rendering the report as one self-contained HTML page: charts, live set, top ops, fragmentation.

The page needs nothing from the network: the styles and the script are inline, the charts are
SVG drawn here, and the data the script reads for hover and click is embedded as JSON. Every
name from a trace is data: in the markup it goes through :func:`esc`, in the embedded JSON every
``<``, ``>`` and ``&`` is a ``\\u`` escape (so ``</script>`` in a name cannot end the block), and
the script writes names with ``textContent`` only.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import IO, Any

from ..analyses.frag import AllocatorFragmentation, Anomaly
from ..analyses.ops import OpRow
from ..analyses.peak import (
    AllocatorPeak,
    LiveAllocation,
    RepeatedAllocation,
    repeated_allocations,
    split_freed_before_step,
)
from ..analyses.report import AllocatorView, ReportData, UnknownView
from ..trace.layers import LayerNames, input_data_of, layer_of, op_in_layer
from ..units import format_bytes, format_us, plural
from ..version import __version__
from . import icicle
from .common import asset, esc, oddity_name, strict_json

# Chart geometry, in SVG user units (the SVG scales to the page width).
WIDTH, HEIGHT = 960, 300
LEFT, RIGHT, TOP, BOTTOM = 84, 18, 34, 40
KIND_COLOURS = {
    "baseline": "#9ca3af", "output": "#2563eb", "temp": "#f59e0b", "persistent": "#7c3aed", "unknown": "#64748b",
}


def embed_json(document: Any) -> str:
    """JSON for a ``<script type="application/json">`` block: no ``<``, ``>`` or ``&`` survive literally."""
    text = strict_json(document, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_html(report: ReportData, out: IO[str], top: int = 20) -> None:
    """Write the whole page; ``top`` bounds the live-set and op tables."""
    names = _Names()
    charts = [_chart_data(v, report.step_duration_us, names) for v in report.allocators]
    s = report.summary
    style = asset("report.css")
    if any(v.address_space is not None for v in report.allocators):
        style += asset("address_space.css")
    out.write(_HEAD.format(title=esc(f"memtrace report: {s.path}"), style=style, guard=asset("error_guard.js")))
    out.write('<header>\n<h1>memtrace report</h1>\n')
    out.write(f'<p class="trace"><code>{esc(s.path)}</code></p>\n')
    out.write(_answer(report))
    out.write(_facts(report))
    out.write(_overview(report.allocators, report.unknown))
    out.write("</header>\n<main>\n")
    for number, unknown in enumerate(report.unknown):
        out.write(_unknown_section(number, unknown))
    path_of = _layer_path(report.layer_names, report.input_batch) if report.by_layer else None
    for number, view in enumerate(report.allocators):
        out.write(_allocator_section(number, view, charts[number], top, path_of, report))
    out.write(_ops_section(report, top))
    out.write(_frag_section(report))
    out.write("</main>\n")
    out.write(
        f'<footer>Made by memtrace {esc(__version__)}. Times are relative to the {report.span} start; bytes are '
        f"absolute where the allocator's snapshots give a baseline, else relative to the {report.span} start.</footer>\n"
    )
    document = {"names": names.table, "charts": charts}
    out.write(f'<script type="application/json" id="memtrace-data">{embed_json(document)}</script>\n')
    script = asset("report.js")
    if report.span != "step":
        script = script.replace("' into the step ('", f"' into the {report.span} ('").replace(
            "' relative to the step start'", f"' relative to the {report.span} start'")
    out.write(f"<script>{script}</script>\n")
    if report.step_marks:
        out.write(f"<script>{asset('step_marks.js')}</script>\n")
    if any(v.address_space is not None for v in report.allocators):
        out.write(f"<script>{asset('address_space.js')}</script>\n")
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
        ("step" if report.span == "step" else f"profile of {len(report.step_marks)} steps" if report.step_marks
         else "profile (no step markers)",
         f"{esc(format_us(s.duration_ns))} ({round(s.duration_ns / 1000):,} us)"),
        ("nodes", f"{s.nodes:,} executions, {s.outputs:,} outputs"),
        ("devices", f"{canonical} holding memory, {len(s.devices) - canonical} stream or memcpy pseudo-devices"),
        ("graph", esc(f"{s.graph_nodes:,} nodes from {s.graph_source}") if s.graph_source else "none in the trace"),
    ]
    if s.oddities:
        facts.append(("oddities", "; ".join(f"{esc(oddity_name(o))}: {o.count}" for o in s.oddities)))
    items = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
    return f'<dl class="facts">{items}</dl>\n'


def _answer(report: ReportData) -> str:
    """The sentence ``memtrace summary`` leads with, for each allocator (largest peak first): its peak,
    when, and who reached it."""
    s = report.summary
    lines = []
    for view in report.allocators:
        p = view.peak
        if p.peak_node is None:
            continue
        lines.append(f"{esc(p.allocator)} peaked at <strong>{_bytes(p.peak_bytes)}</strong>, {_us(p.peak_time_us)} "
                     f"into the {report.span} ({esc(format_us(s.duration_ns))} long), reached by "
                     f"<code>{esc(p.peak_node)}</code>.")
    for u in report.unknown:
        lines.append(f"{esc(u.unknown.allocator)}: peak unknown (beyond int64).")
    return "".join(f'<p class="answer">{line}</p>\n' for line in lines)


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


def _layer_path(names: LayerNames | None, batch: int | None = None) -> Callable[[LiveAllocation], list[str]]:
    """The icicle's rows for an allocation: the phase of the step, the Keras layer (``(input data)``
    where the sizes say so), the op's name within the layer (memtrace.trace.layers)."""

    def path_of(allocation: LiveAllocation) -> list[str]:
        node = allocation.node.split(":", 1)[0]
        where = input_data_of(node, allocation.requested_bytes, allocation.shape, batch) or layer_of(node, names)
        return [where.phase, where.layer, op_in_layer(node, names)]

    return path_of


def _allocator_section(number: int, view: AllocatorView, chart: dict[str, Any], top: int,
                       path_of: Callable[[LiveAllocation], list[str]] | None = None,
                       report: ReportData | None = None) -> str:
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

        by_layer = report is not None and report.by_layer
        parts.append("<h3>Address space over time</h3>\n" + svg(
            view.address_space, number, "layer" if by_layer else "scope",
            report.layer_names if report is not None else None, report.input_batch if report is not None else None))
    if p.peak_node is not None:
        parts.append(_live_set(p, top, number, path_of, span))
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
        text = f"Never rises above its level at the {span} start ({source})."
    else:
        text = (
            f"Peak <strong>{_bytes(p.peak_bytes)}</strong> at {_us(p.peak_time_us)} into the {span}, "
            f"reached by <code>{esc(p.peak_node)}</code> ({source})."
        )
    if p.baseline_bytes is not None:
        text += (
            f" Baseline {_bytes(p.baseline_bytes)} was live before the {span}: {rec.matched} of {rec.snapshots} "
            f"snapshots agree with replay + baseline (largest disagreement {_bytes(rec.max_abs_error_bytes)})."
        )
    elif rec.snapshots:
        text += f" Baseline unknown: none of its {rec.snapshots} snapshots implies a plausible one; bytes are relative."
    else:
        text += f" No snapshots: bytes are relative to the {span} start."
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
        + f'aria-label="{esc(p.allocator)}: bytes over the {span}">',
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
    for step, start_us in marks:  # where each step of a profile begins; moved on zoom by assets/step_marks.js
        shown = "visible" if x0 <= start_us <= x1 else "hidden"
        svg.append(f'<g class="step-mark" data-t="{start_us}" visibility="{shown}">'
                   f'<line x1="{x(start_us)}" x2="{x(start_us)}" y1="{TOP}" y2="{bottom}" stroke="#64748b" '
                   'stroke-dasharray="2 4"/>'
                   f'<text x="{float(x(start_us)) + 3:.1f}" y="{TOP + 10}" fill="#475569" font-size="11">step {step}</text></g>')

    level = p.baseline_bytes if p.baseline_bytes is not None else 0
    label = (
        f"baseline {format_bytes(level)} (live before the {span})" if p.baseline_bytes is not None
        else f"level at the {span} start (baseline unknown)"
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
    agreeing = view.snapshot_agreeing  # of all the snapshots, as the total and the header count them
    legend = [
        '<span class="key curve-key"></span>' + ("bytes in use (baseline + replay)" if p.baseline_bytes is not None
                                                 else f"live bytes (relative to the {span} start)"),
        '<span class="key baseline-key"></span>' + ("baseline" if p.baseline_bytes is not None else f"{span}-start level"),
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
            f"{esc(format_us((c['t1'] - c['t0']) * 1000))} {span}, where the bytes move (98% of those allocated and "
            f"freed, and the peak); the button or a double click shows the whole {span}. " + note
        )
    items = " ".join(f'<span class="legend-item">{item}</span>' for item in legend)
    return (
        f'<figure class="chart" data-chart="{number}">\n' + "".join(svg) + "\n"
        '<div class="tip" hidden></div><button class="reset" type="button"'
        + (" hidden" if view.focus_us is None else "") + f">show the whole {span}</button>\n"
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


def _live_set(p: AllocatorPeak, top: int, number: int = 0, path_of: Callable[[LiveAllocation], list[str]] | None = None,
              span: str = "step") -> str:
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
        keys += f' <span class="legend-item">minus {_bytes(-negative)} freed from before the {span}</span>'
    # Frees of chunks allocated before the step are said in the legend, never as rows.
    folded = repeated_allocations(held)
    rows = [_live_row(i + 1, r, sum(a.bytes for a in held), span) for i, r in enumerate(folded[:top])]
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
        + icicle.render_html(live, number, path_of)
        + repeats
        + _table(headers, rows, [True, False, True, False, True, True, True, True, True, False], "live")
        + more
    )


def _live_row(rank: int, r: RepeatedAllocation, live_total: int, span: str = "step") -> list[str]:
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
        (first + _us(a.free_time_us)) if a.free_time_us is not None else f'<span class="none">not in the {span}</span>',
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


