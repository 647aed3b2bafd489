"""Rendering a run-to-run diff as text or JSON (``memtrace.diff/1``)."""

from __future__ import annotations

from typing import IO, Any

from ..analyses.diff import AllocatorChange, OpChange, TraceDiff
from ..analyses.peak import LiveAllocation, held_bytes
from ..units import format_bytes, format_percent, plural
from .common import clean, table

SCHEMA = "memtrace.diff/1"


def _status(c: AllocatorChange) -> str:
    if not c.in_base:
        return "added"
    return "removed" if not c.in_new else "both"


def to_json(result: TraceDiff, top: int | None = None) -> dict[str, Any]:
    """The contract other tools read; ``ops`` and ``new_at_peak`` are complete unless ``top`` cuts them.

    An allocator whose peak is unknown in either trace (bytes beyond int64) comes first: the
    numbers of that trace and the change are null, and ``unknown`` says where and why."""
    exceeded = {c.allocator for c in result.exceeded}
    return {
        "schema": SCHEMA,
        "base": result.base_path,
        "new": result.new_path,
        "compared": result.measure,
        **({"grouped_by": result.grouped_by} if result.grouped_by != "node" else {}),  # ops' names are then groups
        "max_increase": result.max_increase,
        "passed": result.passed if result.max_increase is not None else None,
        "allocators": [
            {
                "allocator": c.allocator,
                "base_peak_bytes": c.base_peak_bytes,
                "new_peak_bytes": c.new_peak_bytes,
                "delta_bytes": c.delta_bytes,  # of the compared measure, as is delta_fraction
                "delta_fraction": c.delta_fraction,
                "base_peak_delta_bytes": c.base_peak_delta_bytes,
                "new_peak_delta_bytes": c.new_peak_delta_bytes,
                "weak_baseline": c.weak_baseline,
                "status": _status(c),
                "base_baseline_bytes": c.base.baseline_bytes if c.base is not None else None,
                "new_baseline_bytes": c.new.baseline_bytes if c.new is not None else None,
                "exceeds_max_increase": c.allocator in exceeded,
                # the live set's allocations at each peak: chunks and the tensors' own bytes in them
                **{f"{side}_live_{what}_bytes": (held_bytes(found)[k] if found is not None else None)
                   for side, found in (("base", c.base), ("new", c.new))
                   for k, what in enumerate(("allocated", "requested"))},
                **({"unknown": c.unknown_reason} if c.unknown else {}),
            }
            for c in result.allocators
        ],
        "ops": [
            {
                "name": o.name,
                "status": o.status,
                "base_peak_bytes": o.base_peak_bytes,
                "new_peak_bytes": o.new_peak_bytes,
                "delta_bytes": o.delta_bytes,
                "base_residual_bytes": o.base_residual_bytes,
                "new_residual_bytes": o.new_residual_bytes,
                "residual_delta_bytes": o.residual_delta_bytes,
                "base_at_peak_bytes": o.base_at_peak_bytes,
                "new_at_peak_bytes": o.new_at_peak_bytes,
                "at_peak_delta_bytes": o.at_peak_delta_bytes,
            }
            for o in result.ops[:top]
        ],
        "new_at_peak": [
            {
                "allocator": f.allocator,
                "node": f.allocation.node,
                "slot": f.allocation.slot,
                "kind": f.allocation.kind,
                "bytes": f.allocation.bytes,
                "requested_bytes": f.allocation.requested_bytes,
                "dtype": f.allocation.dtype,
                "shape": f.allocation.shape,
            }
            for f in result.new_at_peak[:top]
        ],
    }


def signed_bytes(value: int) -> str:
    return ("+" if value >= 0 else "-") + format_bytes(abs(value))


def _peak_text(value: int | None) -> str:
    return "unknown (beyond int64)" if value is None else f"{format_bytes(value)} ({value:,} B)"


def fraction_text(c: AllocatorChange) -> str:
    if c.unknown:
        return "-"
    fraction = c.delta_fraction
    if fraction is None:
        return "new"
    return ("+" if fraction >= 0 else "-") + format_percent(abs(fraction))


def _tensor(a: LiveAllocation) -> str:
    parts = [a.dtype or ""]
    if a.shape is not None:
        parts.append("[" + ",".join(str(d) for d in a.shape) + "]")
    if a.slot is not None:
        parts.append(f"slot {a.slot}")
    return " ".join(p for p in parts if p)


def _op_row(o: OpChange) -> tuple[str, ...]:
    name = clean(o.name) + ("" if o.status == "changed" else f" ({o.status})")
    return (
        name,
        f"{format_bytes(o.base_peak_bytes)} -> {format_bytes(o.new_peak_bytes)}",
        signed_bytes(o.delta_bytes),
        signed_bytes(o.residual_delta_bytes),
        signed_bytes(o.at_peak_delta_bytes),
    )


def _write_tensor_growth(allocator: str, base: tuple[int, int], new: tuple[int, int], out: IO[str]) -> None:
    """What of the live set's growth at the peak is tensors, and what the allocator's chunks add
    (rounding to 256 bytes, chunks handed out unsplit): ``base`` and ``new`` are (chunks, tensors)."""
    (base_chunks, base_tensors), (new_chunks, new_tensors) = base, new
    if (base_chunks, base_tensors) == (new_chunks, new_tensors):
        return
    tensors, rounding = new_tensors - base_tensors, (new_chunks - new_tensors) - (base_chunks - base_tensors)
    out.write(f"  {clean(allocator)} at the peak: chunks {signed_bytes(new_chunks - base_chunks)} = tensors "
              f"{signed_bytes(tensors)} ({format_bytes(base_tensors)} -> {format_bytes(new_tensors)}) "
              f"{'+' if rounding >= 0 else '-'} rounding and unsplit chunks {format_bytes(abs(rounding))}\n")


def render_text(result: TraceDiff, out: IO[str], top: int = 10) -> None:
    out.write(f"base  {clean(result.base_path)}\nnew   {clean(result.new_path)}\n\n")
    if not result.allocators:
        out.write("no allocator in either trace: they hold no memory information\n")
        return
    rows = [
        (clean(c.allocator), _peak_text(c.base_bytes), _peak_text(c.new_bytes),
         "unknown" if c.delta_bytes is None else signed_bytes(c.delta_bytes), fraction_text(c))
        for c in result.allocators
    ]
    what = "peak" if result.measure == "peak_bytes" else "step peak"
    if result.measure != "peak_bytes":
        out.write("comparing peak_delta_bytes: the peaks of the bytes allocated during each step, baselines left out\n")
    out.write(table(rows, ("allocator", f"base {what}", f"new {what}", "change", "fraction"),
                    ("left", "right", "right", "right", "right")) + "\n")
    for c in result.allocators:
        base_delta, new_delta = c.base_peak_delta_bytes, c.new_peak_delta_bytes  # None where the peak is unknown
        if base_delta is None or new_delta is None:
            where = " and ".join(f"in {side} ({u.reason})" for side, u in c.unknown_sides)
            out.write(f"  note: {clean(c.allocator)}'s peak is unknown {where}: no change is computed\n")
        elif result.measure == "peak_bytes" and not c.same_basis:
            out.write(f"  note: {clean(c.allocator)}'s peak is absolute in one trace and relative to the step start "
                      "in the other (only one has snapshots that give a baseline)\n")
        elif result.measure == "peak_bytes" and c.weak_baseline:
            out.write(f"  note: {clean(c.allocator)}'s baseline rests on fewer than half of its snapshots; without "
                      f"baselines (--exclude-baseline) the peaks are {format_bytes(base_delta)} -> "
                      f"{format_bytes(new_delta)} ({signed_bytes(new_delta - base_delta)})\n")
    for c in result.allocators:
        if c.base is not None and c.new is not None and not c.unknown:
            _write_tensor_growth(c.allocator, held_bytes(c.base), held_bytes(c.new), out)
    out.write("\n")
    if result.ops:
        shown = min(top, len(result.ops))
        showing = f"all {len(result.ops)} that changed" if shown == len(result.ops) else f"showing {shown} of {len(result.ops)} that changed"
        out.write(f"ops that changed most ({showing}; "
                  "peak and residual as tfprof counts them, at-peak as held at the allocators' peaks)\n")
        what = {"node": "op", "type": "op type", "layer": "layer (phase)"}.get(result.grouped_by.split(":")[0], "scope")
        text = table([_op_row(o) for o in result.ops[:top]], (what, "peak base -> new", "peak", "residual", "at peak"),
                     ("left", "right", "right", "right", "right"), indent=2, drop=("residual", "peak base -> new"),
                     shrink=(what,))
        out.write("".join(f"  {line}\n" for line in text.splitlines()))
    else:
        out.write("no op's peak, residual or at-peak bytes changed\n")
    out.write("\n")
    fresh = result.new_at_peak
    if fresh:
        out.write(f"new at the new peak: {plural(len(fresh), 'allocation')} whose producer and slot held nothing at the base peak\n")
        fresh_rows = [(clean(f.allocator), clean(f.allocation.node), f.allocation.kind, format_bytes(f.allocation.bytes),
                 "?" if f.allocation.requested_bytes is None else format_bytes(f.allocation.requested_bytes),
                 _tensor(f.allocation)) for f in fresh[:top]]
        text = table(fresh_rows, ("allocator", "node", "kind", "allocated", "requested", "tensor"),
                     ("left", "left", "left", "right", "right", "left"),
                     indent=2, drop=("tensor", "kind", "requested"), shrink=("node", "tensor", "allocator"))
        out.write("".join(f"  {line}\n" for line in text.splitlines()))
        if len(fresh) > top:
            out.write(f"  ({plural(len(fresh) - top, 'more allocation')})\n")
    else:
        out.write("new at the new peak: nothing; every allocation there has a counterpart at the base peak\n")
    if result.max_increase is not None:
        limit = format_percent(result.max_increase)
        out.write("\n")
        if result.passed:
            out.write(f"PASS: no allocator's peak grew by more than {limit}\n")
        for c in result.exceeded:
            delta = c.delta_bytes
            if delta is None:  # never: an unknown change exceeds nothing
                continue
            grew = "from nothing" if c.delta_fraction is None else f"by {format_percent(c.delta_fraction)}"
            out.write(f"FAIL: {clean(c.allocator)} peak grew {grew} ({signed_bytes(delta)}), "
                      f"more than the {limit} allowed\n")
