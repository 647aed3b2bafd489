"""Rendering fragmentation forensics as text or JSON (``memtrace.frag/1``)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import asdict
from typing import IO, Any

from ..allocator.bfc import MIN_ALLOCATION_BYTES
from ..analyses.frag import (
    AllocatorFragmentation,
    AllocatorMetric,
    Anomaly,
    Buffer,
    External,
    Moment,
    SizeClass,
    TraceFragmentation,
    Waste,
)
from ..units import format_bytes, format_us
from .common import clean, table

SCHEMA = "memtrace.frag/1"
REGIONS_FROM_MODEL = (
    "holes are measured inside each region of the allocator (placed by the BFC model's replay, which "
    "reproduces every address of the profile): the space between regions is not the allocator's"
)
SEES_ONLY = (
    "only output buffers the trace describes have addresses: temporaries and memory from before "
    "the step are invisible, so a hole may be in use"
)


# -- JSON ---------------------------------------------------------------------------------------


def to_json(path: str, results: TraceFragmentation, top: int | None = None) -> dict[str, Any]:
    """The contract other tools read; buffer, op and range lists are complete unless ``top`` cuts them."""
    return {
        "schema": SCHEMA,
        "trace": path,
        "allocators": [_allocator_json(f, top) for f in results.allocators],
        "anomalies": [_anomaly_json(a) for a in results.anomalies],
    }


def _waste_json(w: Waste) -> dict[str, Any]:
    return {
        "tensors": w.tensors,
        "requested_bytes": w.requested_bytes,
        "allocated_bytes": w.allocated_bytes,
        "waste_bytes": w.waste_bytes,
        "waste_fraction": w.waste_fraction,
        "rounding_waste_bytes": w.rounding_waste_bytes,
        "unsplit_waste_bytes": w.unsplit_waste_bytes,
    }


def _external_json(e: External | None, time_us: int | None, top: int | None) -> dict[str, Any] | None:
    if e is None:
        return None
    return {
        "time_us": time_us,
        "buffers": len(e.ranges),
        "start": e.start,
        "end": e.end,
        "span_bytes": e.span_bytes,
        "live_bytes": e.live_bytes,
        "holes": len(e.holes),
        "hole_bytes": e.hole_bytes,
        "largest_hole_bytes": e.largest_hole_bytes,
        "free_fraction": e.free_fraction,
        "overlap_bytes": e.overlap_bytes,
        "largest_holes": [
            {"start": h.start, "bytes": h.bytes, "below": h.below, "above": h.above}
            for h in sorted(e.holes, key=lambda h: (-h.bytes, h.start))[:top]
        ],
        "ranges": [{"start": r.start, "bytes": r.bytes, "node": r.node, "allocation_id": r.allocation_id} for r in e.ranges],
        # only where the allocator's regions are known, so that other JSON stays as it was
        **({"regions": [{"start": r.start, "bytes": r.bytes} for r in e.regions]} if e.regions else {}),
    }


def _moment_json(m: Moment) -> dict[str, Any]:
    return {"time_us": m.time_us, "replay_live_bytes": m.replay_live_bytes, **_waste_json(m.live)}


def _buffer_json(b: Buffer) -> dict[str, Any]:
    return {
        "node": b.node,
        "slot": b.slot,
        "allocation_id": b.allocation_id,
        "ptr": b.ptr,
        "dtype": b.dtype,
        "shape": b.shape,
        **_waste_json(b.waste),
    }


def _anomaly_json(a: Anomaly) -> dict[str, Any]:
    return {"kind": a.kind, "count": a.count, "detail": a.detail, "examples": list(a.examples)}


def _allocator_json(f: AllocatorFragmentation, top: int | None) -> dict[str, Any]:
    moment = f.at or f.at_peak
    return {
        "allocator": f.allocator,
        "bfc": f.bfc,
        **_waste_json(f.total),
        "at_peak": _moment_json(f.at_peak) if f.at_peak is not None else None,
        "at": _moment_json(f.at) if f.at is not None else None,
        # where the live bytes are unknown (beyond int64), why: there is no moment to measure at
        **({"unknown": f.unknown.reason} if f.unknown is not None else {}),
        "external": _external_json(f.external, moment.time_us if moment is not None else None, top),
        "histogram": [{"max_bytes": c.max_bytes, **_waste_json(c.waste)} for c in f.histogram],
        "top_buffers": [_buffer_json(b) for b in f.buffers[:top]],
        "top_ops": [{"node": o.node, **_waste_json(o.waste)} for o in f.ops[:top]],
        "anomalies": [_anomaly_json(a) for a in f.anomalies],
        **({} if f.tf_metric is None else {"tf_fragmentation": _metric_json(f.tf_metric)}),
    }


def _metric_json(m: AllocatorMetric) -> dict[str, Any]:
    """TF's own fragmentation metric; a value that is no finite number (TF reported one) is null,
    ``not_finite`` saying what it was, so the JSON stays strict."""
    document: dict[str, Any] = asdict(m)
    odd = {key: repr(value) for key, value in document.items()
           if isinstance(value, float) and not math.isfinite(value)}
    for key in odd:
        document[key] = None
    if odd:
        document["not_finite"] = odd
    return document


# -- text ---------------------------------------------------------------------------------------


def _exact(value: int) -> str:
    """``2.58 KiB (2,640 bytes)``; small sizes are exact already."""
    return f"{format_bytes(value)} ({value:,} bytes)" if abs(value) >= 1024 else format_bytes(value)


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def render_text(results: TraceFragmentation, out: IO[str], top: int = 10, span: str = "step") -> None:
    """Each allocator's waste; times are into the ``span``: the step, or a profile (of several steps, or of none marked)."""
    if not results.allocators:
        out.write("no allocator in this trace: it holds no memory information\n")
    for number, f in enumerate(results.allocators):
        if number:
            out.write("\n")
        _render_one(f, out, top, span)
    if results.anomalies:
        out.write("\ntrace-wide anomalies\n")
        _render_anomalies(results.anomalies, out, "  ")


def _render_one(f: AllocatorFragmentation, out: IO[str], top: int, span: str = "step") -> None:
    name = clean(f.allocator) + (" (BFC)" if f.bfc else "")
    t = f.total
    if not t.tensors:
        out.write(f"{name}: no output buffer with an allocation id and an allocated size; no internal fragmentation to measure\n")
    else:
        out.write(
            f"{name}: {_count(t.tensors, 'buffer')}, requested {_exact(t.requested_bytes)}, "
            f"allocated {_exact(t.allocated_bytes)}\n"
            f"  waste {_exact(t.waste_bytes)}, {_percent(t.waste_bytes, t.allocated_bytes)} of allocated\n"
            f"  in plain words: {_story(f)}\n"
        )
        if f.bfc and t.waste_bytes > 0:
            out.write(
                f"  BFC model: rounding up to {MIN_ALLOCATION_BYTES} B {format_bytes(t.rounding_waste_bytes)} "
                f"({_percent(t.rounding_waste_bytes, t.waste_bytes)} of the waste), whole chunks handed out unsplit "
                f"{format_bytes(t.unsplit_waste_bytes)} ({_percent(t.unsplit_waste_bytes, t.waste_bytes)})\n"
            )
    if f.tf_metric is not None:
        m = f.tf_metric
        at_peak = "-" if m.at_peak is None else f"{m.at_peak:.4f}"
        out.write(f"  TensorFlow's own metric (1 - largest free chunk / free bytes, after each of {m.events:,} events): "
                  f"{at_peak} at the peak, highest {m.highest:.4f} at {m.highest_time_us:,} us, last {m.last:.4f}\n")
    if f.at_peak is None:
        unknown = f" (beyond int64): {f.unknown.detail}" if f.unknown is not None else ""
        out.write(f"  at the peak: unknown{unknown}\n")
    else:
        _render_moment("at the peak", f.at_peak, out, span)
    if f.at is not None:
        _render_moment("at the time asked for", f.at, out, span)
    _render_external(f, out, span)
    if t.waste_bytes > 0:
        _render_histogram(f.histogram, t, out)
        _render_top_ops(f, out, top)
        _render_top_buffers(f, out, top)
    if f.anomalies:
        out.write("  anomalies\n")
        _render_anomalies(f.anomalies, out, "    ")


def _story(f: AllocatorFragmentation) -> str:
    """One sentence on where the waste is, for a reader who reads nothing else."""
    t = f.total
    if t.waste_bytes == 0:
        return "no waste: every buffer got exactly the bytes it requested"
    if t.waste_bytes < 0:
        return "more bytes requested than allocated: see the anomalies"
    worst = max(f.histogram, key=lambda c: (c.waste.waste_bytes, -c.max_bytes))
    w = worst.waste
    share = _percent(w.waste_bytes, t.waste_bytes)
    if f.bfc and worst.max_bytes < MIN_ALLOCATION_BYTES:
        return (
            f"{_count(w.tensors, 'small tensor')} of at most {worst.max_bytes} B "
            f"{'takes' if w.tensors == 1 else 'each take'} a whole "
            f"{MIN_ALLOCATION_BYTES}-byte chunk: {w.requested_bytes:,} B requested, {w.allocated_bytes:,} B allocated, "
            f"waste {w.waste_bytes:,} B ({share} of the waste)"
        )
    biggest = f.buffers[0]
    example = (
        f"{clean(biggest.node)}:{biggest.slot} asked for {format_bytes(biggest.requested_bytes)} "
        f"and got {format_bytes(biggest.allocated_bytes)}"
    )
    if f.bfc and t.unsplit_waste_bytes > t.rounding_waste_bytes:
        return f"most waste is free chunks handed out whole instead of split: the largest, {example}"
    if f.bfc:
        return f"most waste is rounding up to {MIN_ALLOCATION_BYTES} B, above all in requests of <= {format_bytes(worst.max_bytes)}"
    return f"requests of <= {format_bytes(worst.max_bytes)} waste most ({share}); the largest, {example}"


def _render_moment(label: str, m: Moment, out: IO[str], span: str = "step") -> None:
    if m.time_us is None:
        out.write(f"  {label}: the allocator never rises above its level at the {span} start\n")
        return
    w = m.live
    out.write(
        f"  {label} ({format_us(m.time_us * 1000)} into the {span}): {_count(w.tensors, 'live output buffer')}, requested "
        f"{format_bytes(w.requested_bytes)}, allocated {format_bytes(w.allocated_bytes)}, waste "
        f"{format_bytes(w.waste_bytes)} ({_percent(w.waste_bytes, w.allocated_bytes)}), "
        f"of {format_bytes(m.replay_live_bytes)} live since the {span} start\n"
    )


def _render_external(f: AllocatorFragmentation, out: IO[str], span: str = "step") -> None:
    m = f.at or f.at_peak
    where = "at the time asked for" if f.at is not None else "at the peak"
    e = m.external if m is not None else None
    if e is None:
        if m is not None and m.time_us is not None:
            out.write(f"  address space {where}: no live buffer has a pointer\n")
        return
    inside = f" in {_count(len(e.regions), 'region')} of the allocator" if e.regions else ""
    out.write(
        f"  address space {where}: {_count(len(e.ranges), 'buffer')}{inside} from {e.start:#x} to {e.end:#x}, "
        f"span{' inside the regions' if e.regions else ''} {_exact(e.span_bytes)}, live {format_bytes(e.live_bytes)}"
    )
    largest = max(e.holes, key=lambda h: (h.bytes, -h.start), default=None)
    if largest is None:
        out.write(", no holes\n")
    else:
        out.write(
            f", {_count(len(e.holes), 'hole')} of {format_bytes(e.hole_bytes)}: "
            f"{_percent(e.hole_bytes, e.span_bytes)} of the span is free\n"
            f"    largest hole {_exact(largest.bytes)} at {largest.start:#x}, "
            f"between {clean(largest.below)} and {clean(largest.above)}\n"
        )
    if e.overlaps:
        out.write(f"    {_count(len(e.overlaps), 'overlap')} between live buffers, {format_bytes(e.overlap_bytes)}: see the anomalies\n")
    if e.regions:
        out.write(f"    {REGIONS_FROM_MODEL}\n")
    out.write(f"    {SEES_ONLY.replace('the step', f'the {span}')}\n")
    if not f.bfc:
        out.write("    not a BFC allocator: its memory may come from the system heap, so the span can cross unrelated memory\n")


def _render_histogram(histogram: tuple[SizeClass, ...], t: Waste, out: IO[str]) -> None:
    rows = [
        (
            f"<= {format_bytes(c.max_bytes)}",
            f"{c.waste.tensors:,}",
            format_bytes(c.waste.requested_bytes),
            format_bytes(c.waste.allocated_bytes),
            format_bytes(c.waste.waste_bytes),
            _percent(c.waste.waste_bytes, c.waste.allocated_bytes),
            _percent(c.waste.waste_bytes, t.waste_bytes),
        )
        for c in histogram
    ]
    headers = ("requested size", "tensors", "requested", "allocated", "waste", "of allocated", "of all waste")
    _write_table("size classes (powers of two, by requested bytes)", rows, headers, ("left", *("right",) * 6), out,
                 ("of allocated", "requested", "tensors"))


def _render_top_ops(f: AllocatorFragmentation, out: IO[str], top: int) -> None:
    t = f.total
    ops = [o for o in f.ops if o.waste.waste_bytes > 0]
    rows = [
        (clean(o.node), f"{o.waste.tensors:,}", format_bytes(o.waste.requested_bytes), format_bytes(o.waste.allocated_bytes),
         format_bytes(o.waste.waste_bytes), _percent(o.waste.waste_bytes, t.waste_bytes))
        for o in ops[:top]
    ]
    if len(ops) > top:
        rest = sum((o.waste for o in ops[top:]), Waste())
        rows.append((f"({len(ops) - top:,} more)", f"{rest.tensors:,}", format_bytes(rest.requested_bytes),
                     format_bytes(rest.allocated_bytes), format_bytes(rest.waste_bytes), _percent(rest.waste_bytes, t.waste_bytes)))
    headers = ("op", "tensors", "requested", "allocated", "waste", "of all waste")
    _write_table("top wasting ops", rows, headers, ("left", *("right",) * 5), out, ("requested", "tensors"))


def _render_top_buffers(f: AllocatorFragmentation, out: IO[str], top: int) -> None:
    # Most waste first: the buffers with any come first, and only the top few are made.
    buffers = list(itertools.takewhile(lambda b: b.waste.waste_bytes > 0, f.buffers[:top]))
    rows = [
        (f"{clean(b.node)}:{b.slot}", _describe(b), format_bytes(b.requested_bytes), format_bytes(b.allocated_bytes),
         format_bytes(b.waste.waste_bytes), format_bytes(b.waste.rounding_waste_bytes), format_bytes(b.waste.unsplit_waste_bytes))
        for b in buffers
    ]
    headers = ("buffer", "tensor", "requested", "allocated", "waste", "rounding", "unsplit")
    _write_table("top wasting buffers", rows, headers, ("left", "left", *("right",) * 5), out,
                 ("tensor", "rounding", "unsplit", "requested"))


def _describe(b: Buffer) -> str:
    parts = [clean(b.dtype)] if b.dtype else []
    if b.shape is not None:
        parts.append("[" + ",".join(str(d) for d in b.shape) + "]")
    parts.append(f"id {b.allocation_id}")
    return " ".join(parts)


def _write_table(
    title: str, rows: Sequence[Sequence[str]], headers: Sequence[str], align: Sequence[str], out: IO[str],
    drop: Sequence[str] = (),
) -> None:
    """A table under its title, fitted to the terminal: ``drop`` names the columns to give up first."""
    out.write(f"  {title}\n")
    text = table(rows, headers, align, indent=4, drop=drop, shrink=(headers[0], "tensor"))
    out.write("".join(f"    {line}\n" for line in text.splitlines()))


def _render_anomalies(anomalies: tuple[Anomaly, ...], out: IO[str], indent: str) -> None:
    for a in anomalies:
        out.write(f"{indent}{a.kind} ({a.count:,}): {clean(a.detail)}\n")
        for example in a.examples:
            out.write(f"{indent}  e.g. {clean(example)}\n")
        if a.count > len(a.examples):
            out.write(f"{indent}  and {a.count - len(a.examples):,} more\n")
