"""Per-op memory accounting, node by node compatible with TensorFlow's profiler (tfprof).

For each node name (``node_name`` up to its first ``:``), over its executions on its canonical
device (the first canonical device the name appears on; entries with ``all_start <= 0`` are
skipped, as tfprof does), summed over repeated executions and over the node's memory entries
of all allocators:

- ``requested_bytes = sum(total_bytes) + temp + persistent``
- ``peak_bytes = sum(peak_bytes) + temp + persistent``
- ``residual_bytes = sum(live_bytes) + persistent``
- ``output_bytes = sum over outputs of max(allocated_bytes, requested_bytes)``

where temp and persistent come from ``memory_stats``. memtrace adds what tfprof cannot say:
``at_peak_bytes``, the bytes the op holds in the live set at each allocator's peak (summed over
allocators, or only those asked for), and ``waste_bytes``, allocated minus requested bytes of the
buffers it produced, each buffer counted once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, fields, replace

import numpy as np

from .errors import UsageError
from .model import Trace
from .peak import peak
from .replay import owned_outputs

BYTE_COLUMNS = (
    "requested_bytes", "peak_bytes", "residual_bytes", "output_bytes",
    "temp_bytes", "persistent_bytes", "at_peak_bytes", "waste_bytes",
)
GROUPINGS = ("node", "type", "scope")


@dataclass(frozen=True)
class OpRow:
    name: str
    op_type: str | None  # None where the row aggregates several op types
    device: str | None  # None where the row aggregates several devices
    occurrences: int
    requested_bytes: int
    peak_bytes: int
    residual_bytes: int
    output_bytes: int
    temp_bytes: int
    persistent_bytes: int
    at_peak_bytes: int
    waste_bytes: int

    def __add__(self, other: OpRow) -> OpRow:
        """Aggregate two rows: counts and bytes add; op type and device survive only if shared."""
        sums = {c: getattr(self, c) + getattr(other, c) for c in ("occurrences", *BYTE_COLUMNS)}
        return OpRow(
            name=self.name,
            op_type=self.op_type if self.op_type == other.op_type else None,
            device=self.device if self.device == other.device else None,
            **sums,
        )


@dataclass(frozen=True)
class OpsReport:
    by: str  # "node", "type" or "scope"
    sort: str  # the column the rows are sorted by
    allocators: tuple[str, ...]  # the allocators whose peaks at_peak_bytes covers
    rows: tuple[OpRow, ...]
    total: OpRow


def column_name(text: str) -> str:
    """``peak`` or ``peak_bytes`` -> ``peak_bytes``; ``name``, ``occurrences`` stay; else UsageError."""
    names = [f.name for f in fields(OpRow)]
    for candidate in (text, f"{text}_bytes", text.replace("-", "_"), f"{text.replace('-', '_')}_bytes"):
        if candidate in names:
            return candidate
    raise UsageError(f"cannot sort by {text!r}: choose one of {', '.join(names)}")


def node_rows(trace: Trace, allocators: Iterable[str] | None = None) -> list[OpRow]:
    """One row per node name, tfprof's numbers plus memtrace's own, in order of first appearance."""
    nodes = trace.nodes
    names = [trace.strings[i].split(":", 1)[0] for i in nodes.name]
    canonical = [kind == "device" for kind in trace.devices.kind]
    home: dict[str, int] = {}  # name -> its canonical device, the first one it appears on
    for node, name in enumerate(names):
        device = int(nodes.device[node])
        if canonical[device]:
            home.setdefault(name, device)
    counted = np.array(
        [home.get(name) == int(nodes.device[node]) and nodes.start_ns[node] > 0 for node, name in enumerate(names)],
        dtype=bool,
    )
    memory = trace.memory
    per_node = {
        column: np.bincount(memory.node, weights=getattr(memory, column), minlength=len(nodes)).astype(np.int64)
        for column in ("total_bytes", "peak_bytes", "live_bytes")
    }
    outputs = trace.outputs
    output_bytes = np.bincount(
        outputs.node, weights=np.maximum(outputs.allocated_bytes, outputs.requested_bytes), minlength=len(nodes)
    ).astype(np.int64)
    at_peak = _bytes_at_peak(trace, allocators)
    waste = _waste_by_name(trace)

    rows: dict[str, OpRow] = {}
    for node in np.flatnonzero(counted).tolist():
        name = names[node]
        temp, persistent = int(nodes.temp_bytes[node]), int(nodes.persistent_bytes[node])
        row = OpRow(
            name=name,
            op_type=trace.strings[nodes.op_type[node]] or None,
            device=trace.devices.name[nodes.device[node]],
            occurrences=1,
            requested_bytes=int(per_node["total_bytes"][node]) + temp + persistent,
            peak_bytes=int(per_node["peak_bytes"][node]) + temp + persistent,
            residual_bytes=int(per_node["live_bytes"][node]) + persistent,
            output_bytes=int(output_bytes[node]),
            temp_bytes=temp,
            persistent_bytes=persistent,
            at_peak_bytes=0,
            waste_bytes=0,
        )
        rows[name] = rows[name] + row if name in rows else row
    return [replace(r, at_peak_bytes=at_peak.get(r.name, 0), waste_bytes=waste.get(r.name, 0)) for r in rows.values()]


def ops(
    trace: Trace,
    by: str = "type",
    sort: str = "peak_bytes",
    depth: int | None = None,
    allocators: Iterable[str] | None = None,
    device: str | None = None,
) -> OpsReport:
    """Per-op rows grouped by node, op type or name scope (cut at ``depth`` levels), sorted."""
    if by not in GROUPINGS:
        raise UsageError(f"cannot group by {by!r}: choose one of {', '.join(GROUPINGS)}")
    sort = column_name(sort)
    chosen = tuple(allocators) if allocators is not None else trace.allocators
    rows = node_rows(trace, chosen)
    if device is not None:
        rows = [r for r in rows if r.device is not None and device.lower() in r.device.lower()]
    if by != "node":
        groups: dict[str, OpRow] = {}
        for row in rows:
            key = _group_key(row, by, depth)
            named = replace(row, name=key)
            groups[key] = groups[key] + named if key in groups else named
        rows = list(groups.values())
    if sort in ("name", "op_type", "device"):
        rows.sort(key=lambda r: (getattr(r, sort) is None, getattr(r, sort) or "", r.name))
    else:
        rows.sort(key=lambda r: (-getattr(r, sort), r.name))
    empty = OpRow("total", None, None, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    total = sum(rows, empty) if rows else empty
    return OpsReport(by=by, sort=sort, allocators=chosen, rows=tuple(rows), total=replace(total, name="total"))


def _group_key(row: OpRow, by: str, depth: int | None) -> str:
    if by == "type":
        return row.op_type or "(unknown)"
    return "/".join(row.name.split("/")[: depth or 1])


def _bytes_at_peak(trace: Trace, allocators: Iterable[str] | None) -> dict[str, int]:
    held: dict[str, int] = defaultdict(int)
    for allocator in allocators if allocators is not None else trace.allocators:
        for allocation in peak(trace, allocator).live_at_peak:
            held[allocation.node.split(":", 1)[0]] += allocation.bytes
    return held


def _waste_by_name(trace: Trace) -> dict[str, int]:
    """Allocated minus requested bytes of each buffer a node created (aliases excluded)."""
    outputs = trace.outputs
    waste: dict[str, int] = defaultdict(int)
    for allocator in range(len(trace.allocators)):
        for row in owned_outputs(trace, allocator).tolist():
            allocated = int(outputs.allocated_bytes[row])
            if allocated > 0 and outputs.allocation_id[row] != 0:
                name = trace.node_name(int(outputs.node[row])).split(":", 1)[0]
                waste[name] += max(0, allocated - int(outputs.requested_bytes[row]))
    return waste
