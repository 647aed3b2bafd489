"""Rendering one buffer's story as text or JSON (``memtrace.tensor/1``)."""

from __future__ import annotations

from typing import IO, Any

from ..analyses.tensor import BufferStory
from ..units import format_bytes, format_us
from .common import clean

SCHEMA = "memtrace.tensor/1"


def to_json(path: str, story: BufferStory) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "trace": path,
        "allocator": story.allocator,
        "allocation_id": story.allocation_id,
        "producer": {"node": story.producer.node, "slot": story.producer.slot, "op_type": story.op_type},
        "aliases": [{"node": a.node, "slot": a.slot} for a in story.aliases],
        "consumers": [{"node": c.node, "start_us": c.start_us} for c in story.consumers],
        "requested_bytes": story.requested_bytes,
        "allocated_bytes": story.allocated_bytes,
        "dtype": story.dtype,
        "shape": story.shape,
        "ptr": story.ptr,
        "alloc_time_us": story.alloc_time_us,
        "free_time_us": story.free_time_us,
        "lifetime_us": story.lifetime_us,
        "source": story.source,
        "live_at_peak": story.live_at_peak,
        "peak_time_us": story.peak_time_us,
        "producer_executions": story.executions,
    }


def _at(time_us: int | None) -> str:
    return "-" if time_us is None else f"+{format_us(time_us * 1000)}"


def render_text(story: BufferStory, out: IO[str], span: str = "step") -> None:
    name = f"{clean(story.allocator)}:{story.allocation_id}" if story.allocator and story.allocation_id else (
        f"{clean(story.producer.node)}:{story.producer.slot}"
    )
    kind = " ".join(part for part in (
        story.dtype or "",
        "[" + ",".join(str(d) for d in story.shape) + "]" if story.shape is not None else "",
    ) if part)
    out.write(f"buffer {name}" + (f"  {kind}" if kind else "") + "\n")
    lines: list[tuple[str, str]] = []
    runs = f", ran {story.executions} times; first run shown" if story.executions > 1 else ""
    lines.append(("producer", f"{clean(story.producer.node)}:{story.producer.slot} ({clean(story.op_type) or '?'}{runs})"))
    for number, alias in enumerate(story.aliases):
        lines.append(("aliases" if number == 0 else "", f"{clean(alias.node)}:{alias.slot} (forwards the same buffer)"))
    if not story.aliases:
        lines.append(("aliases", "none"))
    for number, consumer in enumerate(story.consumers):
        lines.append(("consumers" if number == 0 else "", f"{_at(consumer.start_us):>10}  {clean(consumer.node)}"))
    if not story.consumers:
        lines.append(("consumers", "none known"))
    size = (f"{format_bytes(story.requested_bytes)} requested ({story.requested_bytes:,} bytes), "
            f"{format_bytes(story.allocated_bytes)} allocated ({story.allocated_bytes:,} bytes)")
    lines.append(("size", size))
    lines.append(("allocator", f"{clean(story.allocator) if story.allocator else 'none named'}, ptr {story.ptr:#x}"))
    lines.append(("lifetime", _lifetime(story, span)))
    lines.append(("at peak", _at_peak(story)))
    width = max(len(label) for label, _ in lines)
    for label, text in lines:
        out.write(f"  {label:<{width}}  {text}\n")


def _lifetime(story: BufferStory, span: str = "step") -> str:
    if story.source == "unrecorded":
        return (f"no allocation of this {span} holds it (made before the {span}, e.g. a variable: part of the "
                "baseline)")
    freed = f"not freed in the {span}" if story.free_time_us is None else f"freed {_at(story.free_time_us)}"
    lived = f", lived {format_us(story.lifetime_us * 1000)}" if story.lifetime_us is not None else ""
    origin = {"records": "allocation records", "outputs": "output lifetimes (the allocator left no records)",
              "dataflow": "the dataflow (the output names no allocator)"}[story.source]
    return f"allocated {_at(story.alloc_time_us)}, {freed}{lived} (from {origin}; times from the {span} start)"


def _at_peak(story: BufferStory) -> str:
    if story.live_at_peak is None:
        return "unknown"
    where = f" (at {_at(story.peak_time_us)})" if story.peak_time_us is not None else ""
    if story.live_at_peak:
        return f"live at {clean(story.allocator or '')}'s peak{where}"
    return f"not live at {clean(story.allocator or '')}'s peak{where}"
