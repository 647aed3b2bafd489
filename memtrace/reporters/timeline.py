"""Rendering live-bytes timelines as CSV, JSON (``memtrace.timeline/1``) or a text sparkline."""

from __future__ import annotations

from collections.abc import Sequence
from typing import IO, Any

import numpy as np

from ..analyses.timeline import Timeline
from ..trace.data import Oddity
from ..trace.replay import Uncounted
from ..units import format_bytes, format_us, plural
from .common import bent, clean, with_oddities
from .tables import output_width

SCHEMA = "memtrace.timeline/1"
_BARS = " ▁▂▃▄▅▆▇█"


def to_json(path: str, timelines: list[Timeline], oddities: Sequence[Oddity] = (),
            unknown: Sequence[Uncounted] = ()) -> dict[str, Any]:
    """Each allocator's points; the ``oddities`` found on it that bend numbers are listed in its entry.
    An allocator whose live bytes are ``unknown`` (bytes beyond int64) comes first, with null
    ``points`` and ``unknown`` saying why."""
    unknown_entries: list[dict[str, Any]] = [{"allocator": u.allocator, "source": u.source, "baseline_bytes": None, "absolute": None,
                        "points": None, "unknown": u.reason} for u in unknown]
    entries: list[dict[str, Any]] = [
        {
            "allocator": t.allocator,
            "source": t.source,
            "baseline_bytes": t.baseline_bytes,
            "absolute": t.baseline_bytes is not None,
            "points": [[int(x), int(y)] for x, y in zip(t.time_us, t.live_bytes)],
        }
        for t in timelines
    ]
    return {
        "schema": SCHEMA,
        "trace": path,
        "allocators": [with_oddities(entry, oddities, entry["allocator"]) for entry in unknown_entries + entries],
    }


def render_csv(timelines: list[Timeline], out: IO[str]) -> None:
    out.write("allocator,time_us,live_bytes\n")
    for t in timelines:
        name = '"' + t.allocator.replace('"', '""') + '"' if any(c in t.allocator for c in ',"\n') else t.allocator
        for x, y in zip(t.time_us.tolist(), t.live_bytes.tolist()):
            out.write(f"{name},{x},{y}\n")


def _levels(t: Timeline, width: int) -> list[int]:
    """Each of ``width`` equal time buckets: its maximum, or the level carried from before it."""
    edges = np.linspace(int(t.time_us[0]), int(t.time_us[-1]), width + 1)
    bounds = np.searchsorted(t.time_us, edges[1:-1], side="right").tolist()
    levels, lo, carried = [], 0, int(t.live_bytes[0])
    for hi in [*bounds, len(t.time_us)]:
        if hi > lo:
            levels.append(int(t.live_bytes[lo:hi].max()))
            carried = int(t.live_bytes[hi - 1])
        else:
            levels.append(carried)
        lo = hi
    return levels


def render_text(timelines: list[Timeline], out: IO[str], width: int | None = None, oddities: Sequence[Oddity] = (),
                unknown: Sequence[Uncounted] = (), span: str = "step") -> None:
    """One sparkline per allocator: each character is the maximum of its time bucket; a blank
    cell is zero bytes, any bytes at all draw at least the lowest bar (a baseline is not blank).
    ``oddities`` that bend an allocator's bytes or times (the whole trace's and its own) are marked
    after its maximum and after its time axis. An allocator whose live bytes are ``unknown`` (bytes
    beyond int64) first, in one line. Relative bytes are relative to the ``span``'s start (the step's, or
    a profile's)."""
    width = width or max(min(64, output_width() - 2), 8)
    for u in unknown:
        out.write(f"{clean(u.allocator)}: live bytes unknown (beyond int64): {u.detail}\n")
    for t in timelines:
        label = "absolute" if t.baseline_bytes is not None else f"relative to the {span} start"
        if not len(t.time_us):
            out.write(f"{clean(t.allocator)}: no allocations\n")
            continue
        top = max(int(t.live_bytes.max()), 1)
        bars = "".join(
            _BARS[0 if v <= 0 else max(1, min(len(_BARS) - 1, v * (len(_BARS) - 1) // top))] for v in _levels(t, width)
        )
        start, end = int(t.time_us[0]), int(t.time_us[-1])
        bent_bytes = bent(oddities, "live bytes", *(("sizes",) if t.source == "outputs" else ()), allocator=t.allocator)
        out.write(f"{clean(t.allocator)} ({t.source}, bytes {label}): max {format_bytes(top)}{bent_bytes}, "
                  f"{plural(len(t.time_us), 'point')}\n")
        out.write(f"  {bars}\n")
        left, right = format_us(start * 1000), format_us(end * 1000)
        out.write(f"  {left}{' ' * max(1, width - len(left) - len(right))}{right}"
                  f"{bent(oddities, 'peak times', allocator=t.allocator)}\n")
