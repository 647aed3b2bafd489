"""Rendering a :class:`~memtrace.analyses.summary.Summary` as text or JSON (``memtrace.summary/1``)."""

from __future__ import annotations

from dataclasses import asdict
from typing import IO, Any

from ..analyses.summary import AllocatorSummary, Summary
from ..trace.devices import ALLOCATOR_NOTES
from ..units import format_bytes, format_us, plural
from .common import BENT_NUMBERS, bent, clean, oddity_json, oddity_name, table

SCHEMA = "memtrace.summary/1"


def to_json(summary: Summary) -> dict[str, Any]:
    """The summary as it stands; every oddity under ``oddities``, and an allocator's own (those found
    on it) under its entry's ``oddities`` too. A peak beyond int64 is null, ``unknown`` saying why."""
    fields = asdict(summary)
    if not summary.steps and summary.step is None:  # a StepStats: the schema as it always was
        del fields["steps"], fields["step"]
    fields["oddities"] = [oddity_json(o) for o in summary.oddities]
    for entry in fields["allocators"]:
        if entry["unknown"] is None:  # the reason a peak is null, only where one is
            del entry["unknown"]
        own = [oddity_json(o) for o in summary.oddities if o.allocator == entry["allocator"]]
        if own:
            entry["oddities"] = own
    return {"schema": SCHEMA, "trace": fields.pop("path"), **fields}


def render_text(summary: Summary, out: IO[str]) -> None:
    out.write(f"{clean(summary.path)}: {summary.message} ({summary.source_format})\n")
    out.write(
        f"{span_label(summary)}: {format_us(summary.duration_ns)} "
        f"({round(summary.duration_ns / 1000):,} us)"
        f"{bent(summary.oddities, 'durations')}, "
        f"{plural(summary.nodes, 'node')}, {plural(summary.outputs, 'output')}\n"
    )
    if summary.graph_source:
        out.write(f"graph: {plural(summary.graph_nodes, 'node')} from {summary.graph_source}\n")
    out.write("\nDevices\n")
    devices = [(clean(d.name), d.kind, d.nodes) for d in summary.devices]
    out.write(table(devices, ("device", "kind", "nodes"), ("left", "left", "right")) + "\n")
    out.write("\nAllocators (largest peak first)\n")
    if summary.allocators:
        # A peak the oddities bend carries a star, explained under the table.
        marks = {a.allocator: _bending(summary, a) for a in summary.allocators}
        rows = [
            (clean(a.allocator), _peak(a.peak_bytes, bool(marks[a.allocator] - {"record-outside-its-node"})),
             _at(a.peak_time_us) + ("*" if "record-outside-its-node" in marks[a.allocator] else ""),
             clean(a.peak_node or "-"), a.source,
             a.records, a.allocations, a.frees, a.snapshots, a.outputs, a.buffers, a.sizes_tracked)
            for a in summary.allocators
        ]
        headers = ("allocator", "peak", "at", "reached by", "peak from", "records", "allocs", "frees", "snapshots",
                   "outputs", "buffers", "sizes tracked")
        drop = ("sizes tracked", "buffers", "outputs", "frees", "allocs", "records", "snapshots", "peak from")
        out.write(table(rows, headers, ("left", "right", "right", "left", "left") + ("right",) * 6 + ("left",), drop=drop) + "\n")
        for name in dict.fromkeys(a.allocator for a in summary.allocators if a.allocator in ALLOCATOR_NOTES):
            out.write(f"{name}: {ALLOCATOR_NOTES[name]}\n")
        starred = set().union(*marks.values())
        if starred:
            kinds = dict.fromkeys(o.kind for o in summary.oddities if o.kind in starred)
            out.write(f"* bent by {', '.join(kinds)}: see Oddities\n")
    else:
        out.write("(no allocator appears in this trace: it holds no memory information)\n")
    if summary.steps:
        chosen = f" (this trace is step {summary.step} alone)" if summary.step is not None else ""
        out.write(f"\nSteps{chosen}: peak per allocator, absolute\n")
        names = list(summary.steps[0].peak_bytes)
        step_rows: list[tuple[object, ...]] = [
            (s.step, format_us(s.start_us * 1000), format_us(s.duration_us * 1000), *(_step_peak(p) for p in s.peak_bytes.values()))
            for s in summary.steps
        ]
        out.write(table(step_rows, ("step", "start", "duration", *map(clean, names)), ("right",) * (3 + len(names))) + "\n")
    if summary.oddities:
        out.write("\nOddities\n")
        for oddity in summary.oddities:
            out.write(f"  {oddity_name(oddity)}: {oddity.count} (e.g. {clean(oddity.example)})\n")


def span_label(summary: Summary) -> str:
    """What the trace spans, as its duration's label: one step, a profile of several marked steps, or a
    whole profile that marks none (a script under ``memtrace run``: no time in it is one step's)."""
    if summary.step is None and len(summary.steps) > 1:
        return f"profile of {len(summary.steps)} steps"
    if summary.step is None and not summary.steps and summary.message == "XSpace":
        return "profile (no step markers)"
    return "step"


def _bending(summary: Summary, allocator: AllocatorSummary) -> set[str]:
    """The oddity kinds that bend this allocator's peak bytes or time (none where it never rises): the
    whole trace's and its own."""
    if allocator.peak_time_us is None:
        return set()
    numbers = ["live bytes", "peak times", *(["sizes"] if allocator.source == "outputs" else [])]
    found = {o.kind for o in summary.oddities if o.allocator in (None, allocator.allocator)}
    return {kind for number in numbers for kind in BENT_NUMBERS[number]} & found


def _peak(peak_bytes: int | None, starred: bool) -> str:
    if peak_bytes is None:
        return "unknown (beyond int64)"
    return format_bytes(peak_bytes) + ("*" if starred else "")


def _step_peak(peak_bytes: int | None) -> str:
    return "unknown (beyond int64)" if peak_bytes is None else format_bytes(peak_bytes)


def _at(time_us: int | None) -> str:
    return "-" if time_us is None else format_us(time_us * 1000)
