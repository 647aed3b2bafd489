"""Per-op memory accounting, node by node compatible with TensorFlow's profiler (tfprof).

For each node name (``node_name`` up to its first ``:``; tfprof's exceptions ``_SOURCE``,
``RecvTensor`` and names containing ``MEMCPY`` are left out, as tfprof leaves them out), over
its executions on its canonical device (the first canonical device the name appears on; entries with ``all_start <= 0`` are
skipped, as tfprof does), summed over repeated executions and over the node's memory entries
of all allocators:

- ``requested_bytes = sum(total_bytes) + temp + persistent``
- ``peak_bytes = sum(peak_bytes) + temp + persistent``
- ``residual_bytes = sum(live_bytes) + persistent``
- ``output_bytes = sum over outputs of max(allocated_bytes, requested_bytes)``

where temp and persistent come from ``memory_stats`` (today's fields only, as tfprof reads them).
A profile (XSpace) has no ``memory_stats`` but says of each buffer whether it is an output, a
temp or a persistent buffer (``Outputs.kind``): each buffer counts in its own one of the
``output_bytes``, ``temp_bytes`` and ``persistent_bytes`` columns, and in ``requested_bytes``
and ``peak_bytes`` once, through its record.
memtrace's own ``temp_bytes`` and ``persistent_bytes`` columns take the deprecated
``device_temp_memory_size``/``device_persistent_memory_size`` where a node left today's fields
at 0 (TensorFlow 1.4 and earlier filled those). memtrace adds what tfprof cannot say:
``at_peak_bytes``, the bytes the op holds in the live set at each allocator's peak (summed over
allocators, or only those asked for; an allocator whose peak is unknown, its bytes beyond int64,
is left out and named), and ``waste_bytes``, allocated minus requested bytes of the buffers it
produced, each buffer counted once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, fields, replace

import numpy as np
import numpy.typing as npt

from ..errors import UsageError
from ..trace.buffers import owned_outputs
from ..trace.data import IntArray, TraceData
from ..trace.layers import LayerNames, layer_of, scope_of, shows_keras
from ..trace.replay import Uncounted, split_counted
from ..units import format_bytes
from .peak import compile_name_filter, peak, peaks_and_unknown, split_freed_before_step

BYTE_COLUMNS = (
    "requested_bytes", "peak_bytes", "residual_bytes", "output_bytes",
    "temp_bytes", "persistent_bytes", "at_peak_bytes", "waste_bytes",
)
GROUPINGS = ("node", "type", "scope", "layer")


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
    unknown: tuple[Uncounted, ...] = ()  # allocators asked for whose peak is unknown (bytes beyond int64): not covered
    # Bytes of chunks allocated before the step and freed before a covered peak: no op's holding,
    # so at_peak_bytes leaves them out (its total exceeds the peaks' peak_delta_bytes by this much).
    freed_before_step_bytes: int = 0
    # The nodes the name and size filters looked at, and the filters in words (``--name 'x'``), where
    # any was given: an empty report then says nothing matched them, not that the trace has no op.
    filtered_from: int = 0
    filters: tuple[str, ...] = ()


SORT_NAMES = ("peak", "requested", "residual", "output", "temp", "persistent", "at_peak", "waste", "occurrences",
              "name", "op_type", "device")  # what --sort takes (and each byte column's full name, peak_bytes)


def column_name(text: str) -> str:
    """``peak`` or ``peak_bytes`` -> ``peak_bytes``; ``name``, ``occurrences`` stay; else UsageError."""
    names = [f.name for f in fields(OpRow)]
    for candidate in (text, f"{text}_bytes", text.replace("-", "_"), f"{text.replace('-', '_')}_bytes"):
        if candidate in names:
            return candidate
    raise UsageError(f"cannot sort by {text!r}: choose one of {', '.join(SORT_NAMES)}")


def node_rows(trace: TraceData, allocators: Iterable[str] | None = None) -> list[OpRow]:
    """One row per node name, tfprof's numbers plus memtrace's own, in order of first appearance."""
    nodes = trace.nodes
    names, name_of_node = _op_names(trace)
    device = nodes.device.astype(np.int64)
    # Each name counts on its canonical device: the first one it appears on.
    home = np.full(len(names), -1, dtype=np.int64)
    on_canonical = np.flatnonzero(np.array([kind == "device" for kind in trace.devices.kind], dtype=bool)[device])
    named, first = np.unique(name_of_node[on_canonical], return_index=True)
    home[named] = device[on_canonical[first]]
    counted = np.flatnonzero((home[name_of_node] == device) & (nodes.start_ns > 0) & ~_not_ops(names)[name_of_node])
    # Rows in order of first appearance; executions of one name add up.
    present, first, row_of = np.unique(name_of_node[counted], return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    row_of = rank[row_of]
    present, first = present[order], counted[first[order]]

    def per_row(values_by_node: IntArray) -> list[int]:
        sums = np.zeros(len(present), dtype=np.int64)
        np.add.at(sums, row_of, values_by_node[counted])
        return sums.tolist()

    def per_node(owner: np.ndarray, values: IntArray) -> IntArray:
        sums = np.zeros(len(nodes), dtype=np.int64)
        np.add.at(sums, owner, values)
        return sums

    memory, outputs = trace.memory, trace.outputs
    temp, persistent = nodes.temp_bytes, nodes.persistent_bytes
    # tfprof reads only today's fields; memtrace's own columns fall back to the deprecated
    # device_* fields where a node (TF 1.4 and earlier) put its sizes only there.
    own_temp = np.where(temp != 0, temp, nodes.device_temp_bytes)
    own_persistent = np.where(persistent != 0, persistent, nodes.device_persistent_bytes)
    # A profile lists every buffer with its region_type (Outputs.kind): its temp and persistent
    # buffers count there rather than as outputs; they are in total_bytes already, as records.
    buffer_bytes = np.maximum(outputs.allocated_bytes, outputs.requested_bytes)
    columns = {
        "occurrences": np.bincount(row_of, minlength=len(present)).tolist(),
        "requested_bytes": per_row(per_node(memory.node, memory.total_bytes) + temp + persistent),
        "peak_bytes": per_row(per_node(memory.node, memory.peak_bytes) + temp + persistent),
        "residual_bytes": per_row(per_node(memory.node, memory.live_bytes) + persistent),
        "output_bytes": per_row(per_node(outputs.node, np.where(outputs.kind == 0, buffer_bytes, 0))),
        "temp_bytes": per_row(own_temp + per_node(outputs.node, np.where(outputs.kind == 1, buffer_bytes, 0))),
        "persistent_bytes": per_row(own_persistent + per_node(outputs.node, np.where(outputs.kind == 2, buffer_bytes, 0))),
    }
    # An op type survives aggregation only where every execution has it.
    op_type = nodes.op_type[counted].astype(np.int64)
    lowest, highest = np.full(len(present), np.iinfo(np.int64).max), np.full(len(present), -1)
    np.minimum.at(lowest, row_of, op_type)
    np.maximum.at(highest, row_of, op_type)
    at_peak = _bytes_at_peak(trace, allocators)
    waste = _waste_by_name(trace, name_of_node, len(names)).tolist()
    return [
        OpRow(
            name=names[name],
            op_type=(trace.strings[low] or None) if low == high else None,
            device=trace.devices.name[device[node]],
            at_peak_bytes=at_peak.get(names[name], 0),
            waste_bytes=waste[name],
            **{column: values[k] for column, values in columns.items()},
        )
        for k, (name, node, low, high) in enumerate(zip(present.tolist(), first.tolist(), lowest.tolist(), highest.tolist()))
    ]


def _not_ops(names: list[str]) -> npt.NDArray[np.bool_]:
    """Per name: whether tfprof leaves it out. tfprof makes no node of a step-stats name that is
    ``_SOURCE`` (it appears on several devices) or ``RecvTensor``, or that contains ``MEMCPY``
    (tfprof_stats.cc, ``CreateRunMetadataNode``): its executions count in no column."""
    return np.array([n in ("_SOURCE", "RecvTensor") or "MEMCPY" in n for n in names], dtype=np.bool_)


def _op_names(trace: TraceData) -> tuple[list[str], IntArray]:
    """Distinct op names (``node_name`` up to its first ``:``) and each node's, worked out once per string."""
    strings, string_of_node = np.unique(trace.nodes.name, return_inverse=True)
    names: dict[str, int] = {}
    name_of_string = [names.setdefault(trace.strings[s].split(":", 1)[0], len(names)) for s in strings.tolist()]
    return list(names), np.array(name_of_string, dtype=np.int64)[string_of_node]


def ops(
    trace: TraceData,
    by: str = "type",
    sort: str = "peak_bytes",
    depth: int | None = None,
    allocators: Iterable[str] | None = None,
    device: str | None = None,
    name: str | None = None,
    min_bytes: int | None = None,
    layer_names: LayerNames | None = None,
) -> OpsReport:
    """Per-op rows grouped by node, op type, name scope (cut at ``depth`` levels) or Keras layer
    and phase (``layer``, the names of ``layer_names`` where given; each row's name is
    ``LAYER (PHASE)``), sorted.

    ``device`` keeps the ops on devices whose name contains it (a UsageError when none does);
    ``name`` (a regular expression, searched) and ``min_bytes`` (of requested bytes) keep the
    nodes that match before they are grouped, as tfprof's ``-show_name_regexes`` and
    ``-min_bytes`` do.
    """
    if by not in GROUPINGS:
        raise UsageError(f"cannot group by {by!r}: choose one of {', '.join(GROUPINGS)}")
    sort = column_name(sort)
    pattern = compile_name_filter(name)
    if allocators is None:
        found, unknown = peaks_and_unknown(trace)
        chosen = tuple(p.allocator for p in found)  # largest first
    else:
        counted, unknown = split_counted(trace, allocators)
        chosen = tuple(counted)
    rows = node_rows(trace, chosen)
    if device is not None:
        kept = [r for r in rows if r.device is not None and device.lower() in r.device.lower()]
        if rows and not kept:
            devices = sorted({r.device for r in rows if r.device is not None})
            raise UsageError(f"--device {device!r} matches no device with ops; these have ops: {', '.join(devices)}")
        rows = kept
    looked_at = len(rows)
    filters = ((f"--name {name!r}",) if pattern is not None else ()) + (
        (f"--min-bytes {format_bytes(min_bytes)}",) if min_bytes is not None else ())
    if pattern is not None:
        rows = [r for r in rows if pattern.search(r.name)]
    if min_bytes is not None:
        rows = [r for r in rows if r.requested_bytes >= min_bytes]
    rows = group_rows(rows, by, depth, layer_names)
    if sort in ("name", "op_type", "device"):
        rows.sort(key=lambda r: (getattr(r, sort) is None, getattr(r, sort) or "", r.name))
    else:
        rows.sort(key=lambda r: (-getattr(r, sort), r.name))
    empty = OpRow("total", None, None, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    total = sum(rows, empty) if rows else empty
    freed = sum(-a.bytes for allocator in chosen for a in split_freed_before_step(peak(trace, allocator).live_at_peak)[1])
    return OpsReport(by=by, sort=sort, allocators=chosen, rows=tuple(rows), total=replace(total, name="total"),
                     unknown=tuple(unknown), freed_before_step_bytes=freed, filtered_from=looked_at, filters=filters)


def group_rows(rows: Iterable[OpRow], by: str, depth: int | None = None, layer_names: LayerNames | None = None,
               layered: bool | None = None) -> list[OpRow]:
    """Node rows added up by op type, name scope (``depth`` levels; None: the depth that lands on layers
    where the names show a Keras model, else 1, see :func:`memtrace.trace.layers.scope_of`) or Keras layer
    and phase (the row's name ``LAYER (PHASE)``); ``node`` keeps them as they are. In order of first
    appearance. ``layered`` says whether the names show a Keras model (None: decided from ``rows``)."""
    rows = list(rows)
    if by == "node":
        return rows
    if layered is None:
        layered = by == "scope" and depth is None and shows_keras(row.name for row in rows)
    groups: dict[str, OpRow] = {}
    for row in rows:
        key = _group_key(row, by, depth, layer_names, layered)
        named = replace(row, name=key)
        groups[key] = groups[key] + named if key in groups else named
    return list(groups.values())


def _group_key(row: OpRow, by: str, depth: int | None, layer_names: LayerNames | None = None,
               layered: bool = False) -> str:
    if by == "type":
        return row.op_type or "(unknown)"
    if by == "layer":  # the Keras layer as the user named it, and the phase of the step
        where = layer_of(row.name, layer_names)
        return f"{where.layer} ({where.phase})"
    return scope_of(row.name, depth, layered)  # StatefulPartitionedCall/ is no scope of the model's


def _bytes_at_peak(trace: TraceData, allocators: Iterable[str] | None) -> dict[str, int]:
    held: dict[str, int] = defaultdict(int)
    for allocator in allocators if allocators is not None else trace.allocators:
        # Frees of chunks allocated before the step are no op's holding (no negative rows).
        for allocation in split_freed_before_step(peak(trace, allocator).live_at_peak)[0]:
            held[allocation.node.split(":", 1)[0]] += allocation.bytes
    return held


def _waste_by_name(trace: TraceData, name_of_node: IntArray, names: int) -> IntArray:
    """Per op name: allocated minus requested bytes of each buffer its nodes created (aliases excluded)."""
    outputs = trace.outputs
    waste = np.zeros(names, dtype=np.int64)
    for allocator in range(len(trace.allocators)):
        rows = owned_outputs(trace, allocator)
        rows = rows[(outputs.allocated_bytes[rows] > 0) & (outputs.allocation_id[rows] != 0)]
        np.add.at(waste, name_of_node[outputs.node[rows]],
                  np.maximum(0, outputs.allocated_bytes[rows] - outputs.requested_bytes[rows]))
    return waste
