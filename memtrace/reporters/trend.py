"""Rendering a trend of peaks across runs: a text table, JSON, and a self-contained HTML page with a chart."""

from __future__ import annotations

import os
from typing import IO, Any

from ..many.trend import AllocatorTrend, Trend
from ..units import format_bytes
from ..version import __version__
from .common import asset, clean, esc, table

# Chart geometry in SVG user units (the SVG scales to the page width).
WIDTH, HEIGHT = 960, 260
LEFT, RIGHT, TOP, BOTTOM = 84, 18, 20, 30


def to_json(result: Trend) -> dict[str, Any]:
    return {
        "schema": "memtrace.trend/1",
        "outdir": result.outdir,
        "by": result.by,
        "runs": list(result.runs),
        "failed_runs": result.failed_runs,
        "allocators": [
            {"allocator": a.allocator,
             "points": [{"run": p.run, "mtime_ns": p.mtime_ns, "peak_bytes": p.peak_bytes,
                         "peak_delta_bytes": p.peak_delta_bytes} for p in a.points]}
            for a in result.allocators
        ],
    }


def _change(previous: int | None, value: int) -> str:
    if previous is None:
        return ""
    delta = value - previous
    if delta == 0:
        return "="
    sign = "+" if delta > 0 else "-"
    fraction = f" ({sign}{abs(delta) / previous:.1%})" if previous else ""
    return f"{sign}{format_bytes(abs(delta))}{fraction}"


def _rows(a: AllocatorTrend) -> list[list[str]]:
    rows, previous = [], None
    for p in a.points:
        rows.append([clean(p.run), format_bytes(p.peak_bytes), f"{p.peak_bytes:,}", _change(previous, p.peak_bytes)])
        previous = p.peak_bytes
    return rows


def render_text(result: Trend, out: IO[str]) -> None:
    failed = f", {result.failed_runs} could not be read" if result.failed_runs else ""
    out.write(f"{len(result.runs)} runs in {clean(result.outdir)} (ordered by {result.by}){failed}\n")
    if not result.allocators:
        out.write("no allocator has a peak in these runs\n")
    for a in result.allocators:
        out.write(f"\n{clean(a.allocator)}: highest {format_bytes(a.highest.peak_bytes)} in {clean(a.highest.run)}\n")
        out.write(table(_rows(a), ["run", "peak", "bytes", "change"], ["left", "right", "right", "right"]) + "\n")


def render_html(result: Trend, out: IO[str]) -> None:
    """One self-contained page: per allocator a line of its peak across the runs, then the table."""
    title = esc(f"memtrace trend: {result.outdir}")
    out.write(f"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{title}</title>\n"
              f"<style>{asset('trend.css')}</style>\n</head>\n<body>\n<h1>memtrace trend</h1>\n")
    failed = f", {result.failed_runs} could not be read" if result.failed_runs else ""
    out.write(f"<p><code>{esc(result.outdir)}</code>: {len(result.runs)} runs, ordered by {esc(result.by)}{failed}. "
              f"memtrace {esc(__version__)}.</p>\n")
    for a in result.allocators:
        out.write(f"<section>\n<h2>{esc(a.allocator)}</h2>\n<p>highest peak {esc(format_bytes(a.highest.peak_bytes))} "
                  f"in <code>{esc(a.highest.run)}</code></p>\n{_chart(a, result.runs)}\n")
        out.write("<table>\n<thead><tr><th>run</th><th>peak</th><th>bytes</th><th>change</th></tr></thead>\n<tbody>\n")
        for row in _rows(a):
            cells = "".join(f"<td{' class=num' if i else ''}>{esc(cell)}</td>" for i, cell in enumerate(row))
            out.write(f"<tr>{cells}</tr>\n")
        out.write("</tbody>\n</table>\n</section>\n")
    out.write("</body>\n</html>\n")


def _chart(a: AllocatorTrend, runs: tuple[str, ...]) -> str:
    """An SVG line of the peaks on the trend's shared run axis (the same x is the same run in every chart),
    the y axis from 0 to the highest peak."""
    where = {run: i for i, run in enumerate(runs)}
    values = [p.peak_bytes for p in a.points]
    top = max(values) or 1
    span = max(len(runs) - 1, 1)

    def x(run: str) -> float:
        return LEFT + (WIDTH - LEFT - RIGHT) * (where[run] / span if len(runs) > 1 else 0.5)

    def y(v: int) -> float:
        return TOP + (HEIGHT - TOP - BOTTOM) * (1 - v / top)

    points = " ".join(f"{x(p.run):.1f},{y(p.peak_bytes):.1f}" for p in a.points)
    dots = "".join(f'<circle cx="{x(p.run):.1f}" cy="{y(p.peak_bytes):.1f}" r="3"><title>{esc(p.run)}: '
                   f"{esc(format_bytes(p.peak_bytes))}</title></circle>" for p in a.points)
    first, last = (os.path.basename(runs[0]), os.path.basename(runs[-1])) if runs else ("", "")
    axis = (f'<line x1="{LEFT}" y1="{HEIGHT - BOTTOM}" x2="{WIDTH - RIGHT}" y2="{HEIGHT - BOTTOM}" class="axis"/>'
            f'<text x="{LEFT - 6}" y="{TOP + 4}" text-anchor="end">{esc(format_bytes(top))}</text>'
            f'<text x="{LEFT - 6}" y="{HEIGHT - BOTTOM}" text-anchor="end">0 B</text>'
            f'<text x="{LEFT}" y="{HEIGHT - 8}">{esc(first)}</text>'
            f'<text x="{WIDTH - RIGHT}" y="{HEIGHT - 8}" text-anchor="end">{esc(last)}</text>')
    return (f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="peak per run">{axis}'
            f'<polyline points="{points}" class="line"/>{dots}</svg>')


