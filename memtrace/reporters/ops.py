"""Rendering per-op accounting as a tfprof-style table or JSON (``memtrace.ops/1``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import IO, Any

from ..analyses.ops import BYTE_COLUMNS, OpsReport
from ..trace.data import Oddity
from ..units import format_bytes, plural
from .common import clean, concerning, table
from .tables import output_width

SCHEMA = "memtrace.ops/1"
_HEADERS = {
    "requested_bytes": "allocated", "peak_bytes": "peak", "residual_bytes": "residual", "output_bytes": "output",
    "temp_bytes": "temp", "persistent_bytes": "persistent", "at_peak_bytes": "at peak", "waste_bytes": "waste",
}


def to_json(path: str, report: OpsReport, top: int | None = None) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "trace": path,
        "by": report.by,
        "sort": report.sort,
        "allocators": list(report.allocators),
        # allocators whose peak at_peak_bytes cannot cover (bytes beyond int64), and why; only where there are any
        **({"unknown_peaks": {u.allocator: u.reason for u in report.unknown}} if report.unknown else {}),
        "rows": [asdict(r) for r in report.rows[:top]],
        "total": asdict(report.total),
    }


def bending(report: OpsReport, oddities: Sequence[Oddity]) -> list[Oddity]:
    """The oddities that bend an ops report: those that concern the allocators whose peak 'at peak'
    covers (:func:`~.common.concerning`), and negative sizes on any allocator (the size columns add
    every allocator up)."""
    covered = {id(o) for o in concerning(oddities, {*report.allocators, *(u.allocator for u in report.unknown)})}
    return [o for o in oddities if id(o) in covered or o.kind == "negative-size"]


def render_text(report: OpsReport, out: IO[str], top: int = 20, oddities: Sequence[Oddity] = ()) -> None:
    """tfprof's layout: each byte column as ``size (cumulative %, self %)`` in the sorted order.

    Where that is wider than the terminal, the percentages go first, then the columns least
    asked about (persistent, temp, residual, output, requested), then the names shorten. Where
    the trace gives negative sizes (``oddities`` has negative-size), a value below zero is starred.
    """
    star = any(o.kind == "negative-size" for o in oddities)
    rows = report.rows
    if not rows:
        if report.filters and report.filtered_from:
            out.write(f"no op matched {' and '.join(clean(f) for f in report.filters)} (of "
                      f"{plural(report.filtered_from, 'op')} on memory-owning devices)\n")
        else:
            out.write("no op on a memory-owning device in this trace\n")
        return
    full = _table(report, top, percentages=True, star=star)
    if max(len(line) for line in full.splitlines()) <= output_width():
        out.write(full + "\n")
        shares = ""
    else:
        out.write(_table(report, top, percentages=False, star=star) + "\n")
        shares = "; a wider terminal (COLUMNS) also shows each size's (cumulative %, self %)"
    out.write("allocated: tfprof's requested_bytes, the chunks the op allocated (not the tensors' own bytes)\n")
    if report.freed_before_step_bytes:
        out.write(f"'at peak' leaves out {format_bytes(report.freed_before_step_bytes)} of chunks from before the step "
                  "freed before the peak (no op holds them)\n")
    unknown = "".join(f"; {clean(u.allocator)}'s is unknown (beyond int64)" for u in report.unknown)
    out.write(f"sorted by {report.sort}; 'at peak' covers the peaks of: {', '.join(clean(a) for a in report.allocators) or 'none'}"
              f"{unknown}{shares}\n")
    shown = [*rows[:top], report.total]
    if star and any(getattr(row, column) < 0 for row in shown for column in BYTE_COLUMNS):
        out.write("* below zero: sizes in the trace are negative (oddity negative-size), so this is no size\n")


def _table(report: OpsReport, top: int, percentages: bool, star: bool = False) -> str:
    rows = report.rows
    totals = {c: getattr(report.total, c) for c in BYTE_COLUMNS}
    remaining = dict(totals)  # cumulative % counts this row and every row below it, as tfprof does
    lines = []
    for row in rows[:top]:
        cells = [clean(row.name)]
        if report.by == "node":
            cells.append(clean(row.op_type or ""))
        cells.append(str(row.occurrences))
        for column in BYTE_COLUMNS:
            value = getattr(row, column)
            cells.append(_cell(value, remaining[column], totals[column], star) if percentages else _size(value, star))
            remaining[column] -= value
        lines.append(cells)
    hidden = len(rows) - top
    total_cells = [f"total ({plural(len(rows), 'row')}{f', {hidden} not shown' if hidden > 0 else ''})"]
    if report.by == "node":
        total_cells.append("")
    total_cells.append(str(report.total.occurrences))
    total_cells.extend(_size(totals[c], star) for c in BYTE_COLUMNS)
    lines.append(total_cells)
    headers = [{"node": "node", "type": "op type", "scope": "scope", "layer": "layer (phase)"}[report.by]]
    if report.by == "node":
        headers.append("op type")
    headers.append("count")
    headers.extend(_HEADERS[c] for c in BYTE_COLUMNS)
    align = ["left"] * (2 if report.by == "node" else 1) + ["right"] * (1 + len(BYTE_COLUMNS))
    if not percentages:
        sorted_by = _HEADERS.get(report.sort, "")
        drop = [h for h in ("persistent", "temp", "residual", "output", "allocated", "op type", "waste", "count")
                if h != sorted_by]
        return table(lines, headers, align, drop=drop, shrink=headers[:1])
    return table(lines, headers, align, width=10**6)


def _size(value: int, star: bool = False) -> str:
    """A byte count, starred where it is below zero in a trace that gives negative sizes."""
    return format_bytes(value) + ("*" if star and value < 0 else "")


def _cell(value: int, cumulative: int, total: int, star: bool = False) -> str:
    if total <= 0 or star and value < 0:
        return _size(value, star)
    return f"{format_bytes(value)} ({100 * cumulative / total:.1f}%, {100 * value / total:.1f}%)"
