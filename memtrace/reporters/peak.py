"""Rendering allocator peaks as text or JSON (``memtrace.peak/1``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import IO, Any

from ..analyses.peak import (
    FREED_GROUP,
    AllocatorPeak,
    LiveAllocation,
    LiveGroup,
    repeated_allocations,
    split_freed_before_step,
)
from ..trace.data import Oddity
from ..trace.devices import ALLOCATOR_NOTES
from ..trace.replay import Uncounted
from ..units import format_bytes, format_us, plural
from .common import bent, clean, table, with_oddities
from .tables import output_width, shorten_name

SCHEMA = "memtrace.peak/1"


@dataclass(frozen=True)
class Listing:
    """What to list of one allocator's live set: a selection of it (``--name``, ``--min-bytes``), its
    groups (``--group-by``), or neither (the whole live set, repeats folded in the text)."""

    live: tuple[LiveAllocation, ...] | None = None  # None: the whole live set
    groups: list[LiveGroup] | None = None
    grouped_by: str | None = None  # "node", "type", "scope" or "scope:2", as asked


def to_json(
    path: str, peaks: list[AllocatorPeak], top: int | None = None, listings: dict[str, Listing] | None = None,
    oddities: Sequence[Oddity] = (), unknown: Sequence[Uncounted] = (),
) -> dict[str, Any]:
    """The contract other tools read; ``live_at_peak`` is complete unless ``top`` or a filter cuts it.

    With ``--group-by`` each allocator also has ``groups`` (``key``, ``count``, ``bytes``,
    ``share`` of ``peak_delta_bytes``), which add up to ``peak_delta_bytes`` unless a filter is on.
    The ``oddities`` found on an allocator that bend numbers are listed in its entry too. An
    allocator whose peak is ``unknown`` (bytes beyond int64) comes first, every number of it null
    and ``unknown`` saying why.
    """
    allocators = [
        with_oddities({**dict.fromkeys(f.name for f in fields(AllocatorPeak)), "allocator": u.allocator,
                       "source": u.source, "unknown": u.reason}, oddities, u.allocator)
        for u in unknown
    ]
    for p in peaks:
        listing = (listings or {}).get(p.allocator, Listing())
        entry = asdict(p)
        entry["running_at_peak"] = list(p.running_at_peak)
        entry["reconciliation"] = {
            "snapshots": p.reconciliation.snapshots,
            "matched": p.reconciliation.matched,
            "max_abs_error_bytes": p.reconciliation.max_abs_error_bytes,
        }
        if p.reconciliation.model_agrees is not None:  # outputs mode with snapshots
            entry["reconciliation"]["model_agrees"] = p.reconciliation.model_agrees
            entry["reconciliation"]["before_step_outputs"] = list(p.reconciliation.before_step_outputs)
        live = p.live_at_peak if listing.live is None else listing.live
        entry["live_at_peak"] = [asdict(a) for a in live[:top]]
        if listing.groups is not None:
            entry["grouped_by"] = listing.grouped_by
            entry["groups"] = [_group_json(g) for g in listing.groups[:top]]
        allocators.append(with_oddities(entry, oddities, p.allocator))
    return {"schema": SCHEMA, "trace": path, "allocators": allocators}


def _group_json(g: LiveGroup) -> dict[str, Any]:
    """A group's entry; ``layer`` and ``phase`` only where it is grouped by layer."""
    entry = asdict(g)
    if g.layer is None:
        del entry["layer"], entry["phase"]
    return entry


def _exact(value: int) -> str:
    return f"{format_bytes(value)} ({value:,} bytes)"


def _describe(a: LiveAllocation) -> str:
    parts = []
    if a.dtype:
        parts.append(a.dtype)
    if a.shape is not None:
        parts.append("[" + ",".join(str(d) for d in a.shape) + "]")
    if a.allocation_id is not None:
        parts.append(f"id {a.allocation_id}")
    if a.slot is not None:
        parts.append(f"slot {a.slot}")
    return " ".join(parts)


def _render_outputs_model(p: AllocatorPeak, out: IO[str]) -> None:
    """Outputs mode with snapshots: which outputs the snapshots say existed before the step, or that
    no model of output lifetimes agrees with all of them."""
    rec = p.reconciliation
    if rec.before_step_outputs:
        names = [clean(n) for n in rec.before_step_outputs]
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        out.write(f"  before the step  {len(names)} output buffer(s) already existed (the snapshots did not move "
                  f"when their ops ran), counted in the baseline: {shown}\n")
    if rec.model_agrees is False:
        out.write(f"  no model of output lifetimes agrees with every snapshot ({rec.matched} of {rec.snapshots} do): "
                  "the peak is an estimate, not the allocator's\n")


def render_text(
    peaks: list[AllocatorPeak], out: IO[str], top: int = 10, listings: dict[str, Listing] | None = None,
    oddities: Sequence[Oddity] = (), unknown: Sequence[Uncounted] = (), span: str = "step",
) -> None:
    """Each peak with its live set; ``oddities`` that bend a peak's bytes or time (the whole trace's and
    the allocator's own) are marked next to them. An ``unknown`` peak (bytes beyond int64) first.
    Times are ``into the step``, or with ``span`` "profile" into a profile (of several steps, or of none marked)."""
    if not peaks and not unknown:
        out.write("no allocator in this trace: it holds no memory information\n")
    for u in unknown:
        out.write(f"{clean(u.allocator)}: peak unknown (beyond int64): {u.detail}\n")
    for number, p in enumerate(peaks):
        if number or unknown:
            out.write("\n")
        _render_one(p, out, top, (listings or {}).get(p.allocator, Listing()), oddities, span)


def _render_one(p: AllocatorPeak, out: IO[str], top: int, listing: Listing, oddities: Sequence[Oddity],
                span: str = "step") -> None:
    name = clean(p.allocator)
    if p.peak_node is None:
        out.write(f"{name}: never rises above its level at the {span} start (source: {p.source})\n")
        return
    bent_bytes = bent(oddities, "live bytes", *(("sizes",) if p.source == "outputs" else ()), allocator=p.allocator)
    out.write(f"{name}: peak {_exact(p.peak_bytes)}{bent_bytes} at {format_us(p.peak_time_us * 1000)}"
              f"{bent(oddities, 'peak times', allocator=p.allocator)} into the {span} (from {p.source})\n")
    if p.allocator in ALLOCATOR_NOTES:
        out.write(f"  {ALLOCATOR_NOTES[p.allocator]}\n")
    out.write(f"  reached by  {shorten_name(clean(p.peak_node), output_width() - 14)}\n")
    others = [clean(n) for n in p.running_at_peak if n != p.peak_node]
    if others:
        shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        out.write(f"  also running  {shown}\n")
    rec = p.reconciliation
    if p.baseline_bytes is not None:
        out.write(
            f"  baseline  {_exact(p.baseline_bytes)} live before the {span}: {rec.matched} of {rec.snapshots} "
            f"snapshots agree (largest disagreement {format_bytes(rec.max_abs_error_bytes)})\n"
        )
    elif rec.snapshots:
        out.write(f"  baseline  unknown: none of {rec.snapshots} snapshots implies a plausible one\n")
    else:
        out.write(f"  baseline  unknown: the allocator left no snapshots; bytes are relative to the {span} start\n")
    _render_outputs_model(p, out)
    # Frees of chunks allocated before the step are counted apart, under the table, never as rows.
    live, freed = split_freed_before_step(p.live_at_peak)
    held = sum(a.bytes for a in live)
    if freed:
        out.write(f"  live at the peak: {_exact(p.peak_delta_bytes)}: {format_bytes(held)} in {plural(len(live), 'allocation')} "
                  f"made during the {span}, less {format_bytes(-sum(a.bytes for a in freed))} freed of "
                  f"{plural(len(freed), 'chunk')} allocated before it\n")
    else:
        out.write(f"  live at the peak: {_exact(p.peak_delta_bytes)} in {plural(len(live), 'allocation')} made during the {span}\n")
    if not live:
        return
    whole = held
    selected = live if listing.live is None else split_freed_before_step(listing.live)[0]
    if listing.live is not None:
        chosen = sum(a.bytes for a in selected)
        out.write(f"  matching the filter: {_exact(chosen)} in {plural(len(selected), 'allocation')}\n")
    if listing.groups is not None:
        rows, headers, align = _group_rows(listing, top, whole)
    else:
        rows, headers, align = _allocation_rows(selected, top, whole)
    if listing.live is None:
        requested = sum(requested_bytes(a) for a in live)
        total = {"allocated": format_bytes(whole), "bytes": f"{whole:,}", "share": "100.0%", "requested": format_bytes(requested)}
        rows.append(tuple(total.get(h, "") for h in headers))
        rows[-1] = ("total", *rows[-1][1:])
    known = any(a.requested_bytes is not None for a in live)
    if not known:  # the trace says no tensor's size: a column of chunk sizes again would say nothing
        cut = headers.index("requested")
        rows = [row[:cut] + row[cut + 1:] for row in rows]
        headers, align = headers[:cut] + headers[cut + 1:], align[:cut] + align[cut + 1:]
        headers = tuple("size" if h == "allocated" else h for h in headers)
    text = table(rows, headers, align, indent=2, drop=("bytes", "tensor", "kind", "requested"), shrink=(headers[0], "tensor"))
    out.write("".join(f"  {line}\n" for line in text.splitlines()))
    made = f"allocated during the {span} and live at the peak" + ("" if freed else " (peak_delta_bytes)")
    out.write(f"  share: of the {format_bytes(whole)} {made}\n")
    if known:
        out.write("  allocated: the allocator's chunks; requested: the tensors' own bytes, what the ops asked for"
                  f"{'' if all(a.requested_bytes is not None for a in live) else ' (? or a whole chunk where unknown)'}\n")


def requested_bytes(a: LiveAllocation) -> int:
    """The tensor's bytes, or the chunk's where the trace does not say."""
    return a.requested_bytes if a.requested_bytes is not None else a.bytes


def _share(value: int, whole: int) -> str:
    return f"{100 * value / whole:.1f}%" if whole else "-"


def _allocation_rows(live: tuple[LiveAllocation, ...], top: int, whole: int) -> tuple[list[tuple[str, ...]], tuple[str, ...], tuple[str, ...]]:
    """One row per allocation, or, when allocations repeat (an unrolled loop), one per repeat with a count."""
    folded = repeated_allocations(live)
    if all(r.count == 1 for r in folded):
        rows: list[tuple[str, ...]] = [
            (clean(a.node), a.kind, format_bytes(a.bytes), _requested(a), f"{a.bytes:,}", _share(a.bytes, whole), _describe(a))
            for a in live[:top]
        ]
        rest_count, rest_bytes = len(live[top:]), sum(a.bytes for a in live[top:])
        if rest_count:
            rows.append((f"({plural(rest_count, 'more allocation')})", "", format_bytes(rest_bytes),
                         format_bytes(sum(requested_bytes(a) for a in live[top:])), f"{rest_bytes:,}", _share(rest_bytes, whole), ""))
        return (rows, ("node", "kind", "allocated", "requested", "bytes", "share", "tensor"),
                ("left", "left", "right", "right", "right", "right", "left"))
    rows = [
        (clean(r.node), f"x{r.count}", r.kind, format_bytes(r.bytes), format_bytes(r.requested_bytes), f"{r.bytes:,}",
         _share(r.bytes, whole), _describe(r.first) if r.count == 1 else _describe_shape(r.dtype, r.shape))
        for r in folded[:top]
    ]
    rest = folded[top:]
    if rest:
        rest_bytes = sum(r.bytes for r in rest)
        rows.append((f"({plural(sum(r.count for r in rest), 'more allocation')})", "", "", format_bytes(rest_bytes),
                     format_bytes(sum(r.requested_bytes for r in rest)), f"{rest_bytes:,}", _share(rest_bytes, whole), ""))
    headers = ("node", "count", "kind", "allocated", "requested", "bytes", "share", "tensor")
    return rows, headers, ("left", "right", "left", "right", "right", "right", "right", "left")


def _requested(a: LiveAllocation) -> str:
    return format_bytes(a.requested_bytes) if a.requested_bytes is not None else "?"


def _group_rows(listing: Listing, top: int, whole: int) -> tuple[list[tuple[str, ...]], tuple[str, ...], tuple[str, ...]]:
    groups = [g for g in listing.groups or [] if g.key != FREED_GROUP]  # counted apart, above the table
    rows: list[tuple[str, ...]] = [
        (clean(g.key), f"x{g.count}", format_bytes(g.bytes), format_bytes(g.requested_bytes), f"{g.bytes:,}", _share(g.bytes, whole))
        for g in groups[:top]
    ]
    rest = groups[top:]
    if rest:
        rest_bytes = sum(g.bytes for g in rest)
        rows.append((f"({plural(len(rest), 'more group')})", f"x{sum(g.count for g in rest)}", format_bytes(rest_bytes),
                     format_bytes(sum(g.requested_bytes for g in rest)), f"{rest_bytes:,}", _share(rest_bytes, whole)))
    by = (listing.grouped_by or "scope").split(":")[0]
    if by == "layer":  # the layer, then its phase, in columns of their own
        shown = groups[:top]
        split = [(clean(g.layer or ""), g.phase or "", *row[1:]) for g, row in zip(shown, rows)] + [
            (row[0], "", *row[1:]) for row in rows[len(shown):]]
        return (split, ("layer", "phase", "count", "allocated", "requested", "bytes", "share"),
                ("left", "left", "right", "right", "right", "right", "right"))
    header = {"node": "node", "type": "op type"}.get(by, by)
    return rows, (header, "count", "allocated", "requested", "bytes", "share"), ("left", "right", "right", "right", "right", "right")


def _describe_shape(dtype: str | None, shape: list[int] | None) -> str:
    parts = [dtype] if dtype else []
    if shape is not None:
        parts.append("[" + ",".join(str(d) for d in shape) + "]")
    return " ".join(parts)
