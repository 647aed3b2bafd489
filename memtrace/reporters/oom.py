"""Rendering out-of-memory post-mortems as text or JSON (``memtrace.oom/1``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import IO, Any

from ..oom import OomEvent
from ..oom_model import BinSummary, Region
from ..units import format_bytes, plural
from .common import clean, table

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
    }


def _region_json(r: Region) -> dict[str, Any]:
    return {
        "address": r.address,
        "size_bytes": r.size_bytes,
        "in_use_bytes": sum(c.size_bytes for c in r.chunks if c.in_use),
        "free_bytes": sum(c.size_bytes for c in r.chunks if not c.in_use),
        "chunks": [{"address": c.address, "size_bytes": c.size_bytes, "in_use": c.in_use,
                    "requested_bytes": c.requested_bytes, "op": c.op} for c in r.chunks],
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
        _render_event(number, len(events), e, out, top)
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
    if e.verdict == "exhausted":
        rows.append(("missing", format_bytes(e.missing_bytes)))
    return rows


def _render_event(number: int, count: int, e: OomEvent, out: IO[str], top: int) -> None:
    d = e.dump
    where = f"{clean(d.path)}:{d.line}" if d.line is not None else clean(d.path)
    out.write(f"OOM {number} of {count}  {where}  allocator {clean(d.allocator or '(unnamed)')}\n")
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
