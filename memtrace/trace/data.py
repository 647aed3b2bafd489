"""The columnar Trace model: everything memtrace knows about one step, as numpy tables.

A reader builds a :class:`TraceData` once (see ``read/builder.py``); analyses only read it. The
model knows no analysis: the convenient ``trace.peak(...)`` methods belong to the API's
:class:`~memtrace.api.Trace`, which sits above the analyses. Strings are
interned into ``TraceData.strings`` and tables hold int32 indices into it (index 0 is always the
empty string, which stands for "unknown"). Times are int64 **nanoseconds** since the epoch:
TensorFlow 2.x writes ``*_nanos`` fields and those are used when present, otherwise the
microsecond fields are scaled. Allocation records of a StepStats only exist in microseconds, so
their times are whole microseconds there; a profile's (XSpace) events are timed to the
nanosecond, and keep it. Bytes are int64.

Ragged columns (a list per row) are a pair: ``X_offsets`` (length rows + 1) and the flat values;
row ``i`` owns ``values[offsets[i]:offsets[i + 1]]``.

Columns are read-only by contract. A column that holds one value throughout (a profile's
durations, temp bytes and input offsets) may be a read-only view of that one number (zero
strides, see ``read.builder.constant``), and columns equal to another may be the same array
(a profile's ``end_ns`` is its ``start_ns``): never write into a column.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
Int32Array = npt.NDArray[np.int32]
BoolArray = npt.NDArray[np.bool_]
Int8Array = npt.NDArray[np.int8]
UIntArray = npt.NDArray[np.uint64]
FloatArray = npt.NDArray[np.float64]

# tfprof's own test for "a device that holds memory" (tfprof_node.h, IsCanonicalDevice):
# GPU stream and memcpy pseudo-devices do not match and carry only kernel timings.
# The node name of a profile's allocation made outside any op (XLA's, and TF's before the first op runs).
NO_OP = "(no op)"
_CANONICAL_DEVICE = re.compile(r".*/(device:gpu|gpu|device:cpu|cpu|device:sycl):(\d+)", re.IGNORECASE)
_PSEUDO_SUFFIX = re.compile(r"/(stream:[^/]+|memcpy)$", re.IGNORECASE)


def is_canonical_device(name: str) -> bool:
    """True for devices that own memory, e.g. ``/job:localhost/replica:0/task:0/device:GPU:0``."""
    return _CANONICAL_DEVICE.fullmatch(name) is not None


def device_kind(name: str) -> str:
    """``"device"`` for canonical devices, ``"stream"``/``"memcpy"`` for GPU pseudo-devices, else ``"other"``."""
    if is_canonical_device(name):
        return "device"
    suffix = _PSEUDO_SUFFIX.search(name)
    if suffix is not None:
        return "memcpy" if suffix.group(1).lower() == "memcpy" else "stream"
    return "other"


class _Table:
    """Shared behaviour of the column tables: row count and column-wise equality."""

    def columns(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]

    def __len__(self) -> int:
        first = fields(self)[0]  # type: ignore[arg-type]
        return len(getattr(self, first.name))

    def same_as(self, other: _Table) -> bool:
        """True when every column holds the same values (used to compare reader paths)."""
        mine, theirs = self.columns(), other.columns()
        if mine.keys() != theirs.keys():
            return False
        for name, value in mine.items():
            if isinstance(value, np.ndarray):
                if value.dtype != theirs[name].dtype or not np.array_equal(value, theirs[name]):
                    return False
            elif value != theirs[name]:
                return False
        return True


@dataclass(frozen=True, eq=False)
class Devices(_Table):
    """One row per distinct device name, in order of first appearance."""

    name: tuple[str, ...]
    kind: tuple[str, ...]  # "device", "stream", "memcpy" or "other"


@dataclass(frozen=True, eq=False)
class Nodes(_Table):
    """One row per ``NodeExecStats``, in trace order (device by device, then node by node)."""

    name: Int32Array
    op_type: Int32Array  # from the graph when given, else the timeline label; 0 = unknown
    device: Int32Array  # index into TraceData.devices
    start_ns: IntArray  # all_start; <= 0 means TensorFlow never stamped it
    op_start_ns: IntArray  # absolute
    op_end_ns: IntArray  # absolute; allocator snapshots are taken here
    end_ns: IntArray  # absolute all_end
    scheduled_ns: IntArray  # 0 when absent
    thread_id: IntArray
    label: Int32Array  # timeline_label
    temp_bytes: IntArray  # memory_stats.temp_memory_size (TF 1.4: host_temp_memory_size, same field)
    persistent_bytes: IntArray  # memory_stats.persistent_memory_size (TF 1.4: host_persistent_memory_size)
    device_temp_bytes: IntArray  # memory_stats.device_temp_memory_size, deprecated since TF 1.5; 0 = absent
    device_persistent_bytes: IntArray  # memory_stats.device_persistent_memory_size, deprecated likewise
    persistent_ids_offsets: IntArray
    persistent_ids: IntArray  # memory_stats.persistent_tensor_alloc_ids
    input_offsets: IntArray  # data and control inputs parsed from the timeline label
    input_name: Int32Array
    input_slot: Int32Array
    input_is_control: BoolArray


@dataclass(frozen=True, eq=False)
class Memory(_Table):
    """One row per ``AllocatorMemoryUsed`` entry of a node (a node touches one or more allocators)."""

    node: Int32Array
    allocator: Int32Array  # index into TraceData.allocators, -1 when the name is empty
    total_bytes: IntArray
    peak_bytes: IntArray
    live_bytes: IntArray
    bytes_in_use: IntArray  # allocator_bytes_in_use snapshot, when has_snapshot says one was taken
    record_offsets: IntArray  # this entry's records are records[offsets[i]:offsets[i + 1]]
    # Whether bytes_in_use is a snapshot. A StepStats writes 0 for "none taken"; a profile's
    # events each report the bytes in use after them, and 0 there is a real snapshot.
    has_snapshot: BoolArray
    # TF's own fragmentation metric of the allocator after the event (XSpace; the BFC allocator's
    # 1 - largest free chunk / free bytes); -1 where the trace does not say (every StepStats).
    fragmentation: FloatArray


@dataclass(frozen=True, eq=False)
class Records(_Table):
    """One row per allocation record, in trace order (the order that breaks time ties)."""

    allocator: Int32Array
    time_ns: IntArray  # alloc_micros * 1000 (StepStats); the event's time (XSpace)
    bytes: IntArray  # negative for a free
    node: Int32Array
    memory: Int32Array  # the Memory row the record belongs to


@dataclass(frozen=True, eq=False)
class Outputs(_Table):
    """One row per ``NodeOutput`` (a profile: per allocation). ``allocation_id`` is unique per allocator only."""

    node: Int32Array
    slot: Int32Array
    allocator: Int32Array  # -1 when allocator_name is empty
    allocation_id: IntArray  # 0 when the allocator does not track ids
    requested_bytes: IntArray
    allocated_bytes: IntArray  # 0 when the allocator does not track sizes
    ptr: UIntArray
    has_single_reference: BoolArray
    dtype: Int32Array  # string index, e.g. "float32"; 0 = unknown
    rank: Int32Array  # -1 when the shape is unknown
    shape_offsets: IntArray
    shape_dims: IntArray  # -1 for an unknown dimension
    # What the buffer is to its op, where the trace says (a profile's ``region_type``): an index
    # into OUTPUT_KINDS. A StepStats lists outputs only: 0 for every row.
    kind: Int8Array


OUTPUT_KINDS = ("output", "temp", "persistent")


@dataclass(frozen=True, eq=False)
class GraphNodes(_Table):
    """Nodes of a graph (a GraphDef given with the trace, or the trace's partition graphs)."""

    name: Int32Array
    op: Int32Array
    device: Int32Array  # string index of the requested/assigned device
    input_offsets: IntArray
    input_name: Int32Array
    input_slot: Int32Array
    input_is_control: BoolArray


@dataclass(frozen=True)
class Step:
    """A step marked in a profile (an event with a ``step_num`` stat): its number and time window."""

    number: int
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class Oddity:
    """Something unusual seen while reading; reported, never fatal."""

    kind: str
    count: int
    example: str
    allocator: str | None = None  # the allocator it concerns; None for the whole trace


@dataclass(frozen=True, eq=False)
class TraceData:
    """One step's trace, columnar. Built once by a reader, never mutated."""

    path: str
    source_format: str  # "text", "binary" or "xplane", each possibly with "+gzip"
    message: str  # "StepStats", "RunMetadata" or "XSpace" (a TF2 profiler profile)
    strings: tuple[str, ...]
    allocators: tuple[str, ...]
    devices: Devices
    nodes: Nodes
    memory: Memory
    records: Records
    outputs: Outputs
    graph: GraphNodes | None
    graph_source: str | None  # "graph file", "partition_graphs", "function_graphs" or None
    oddities: tuple[Oddity, ...] = field(default=())
    steps: tuple[Step, ...] = field(default=())  # the steps a profile marks, in order; () for a StepStats
    step: int | None = None  # the step this trace was restricted to (``load(..., step=N)``), else None
    # The allocators whose events XLA's runtime (JAX, another PjRt client) wrote, not TensorFlow's (a profile's).
    xla_allocators: tuple[str, ...] = field(default=())
    # (allocator, limit) where a profile's events say the allocator's limit: bytes_available +
    # bytes_allocated, the same in every event of that allocator.
    recorded_limits: tuple[tuple[str, int], ...] = field(default=())

    # -- lookups ---------------------------------------------------------------------------

    def string(self, index: int) -> str:
        return self.strings[index]

    def node_name(self, node: int) -> str:
        return self.strings[int(self.nodes.name[node])]

    def allocator_index(self, name: str) -> int:
        """Index of an allocator by name; raises ``KeyError`` when the trace has no such allocator."""
        return self.allocators.index(name)

    @property
    def step_start_ns(self) -> int:
        """The origin of every relative time memtrace reports: the earliest stamped node start, or
        where a profile marks steps, the start of the first step it holds if that is earlier (a
        step begins before its first allocation), so that no step starts at a negative time."""
        started = self.nodes.start_ns[self.nodes.start_ns > 0]
        first = int(started.min()) if len(started) else 0
        marked = [s.start_ns for s in self._held_steps() if s.start_ns > 0]
        return min([first, *marked]) if first and marked else first

    @property
    def step_end_ns(self) -> int:
        """The latest stamped node end, or the end of the last step a profile holds if that is later."""
        started = self.nodes.start_ns > 0
        last = int(self.nodes.end_ns[started].max()) if started.any() else 0
        marked = [s.end_ns for s in self._held_steps()]
        return max([last, *marked]) if last and marked else last

    @property
    def span_name(self) -> str:
        """What a time is measured into: ``"profile"`` where the trace holds several marked steps, or
        is a whole profile that marks none (a script under ``memtrace run``: start-up, ``model.fit``'s
        batches, everything, no one step), else ``"step"`` (a StepStats, a profile of one step, or
        one step of a profile)."""
        held = len(self._held_steps())
        return "profile" if held > 1 or (held == 0 and self.message == "XSpace") else "step"

    def __repr__(self) -> str:
        """A line a person can read (the columns are numpy arrays of thousands of rows)."""
        step = f", step {self.step}" if self.step is not None else ""
        steps = f", {len(self.steps)} steps" if self.steps and self.step is None else ""
        return (f"<{type(self).__name__} {self.path!r}: {self.message} ({self.source_format}), "
                f"{len(self.nodes)} nodes, {len(self.records)} records, {len(self.outputs)} outputs, "
                f"allocators {', '.join(self.allocators) or 'none'}{steps}{step}>")

    def runtime_of(self, allocator: str) -> str:
        """``"XLA"`` where XLA's runtime (JAX) wrote the allocator's events, else ``"TensorFlow"``."""
        return "XLA" if allocator in self.xla_allocators else "TensorFlow"

    def recorded_limit(self, allocator: str) -> int | None:
        """The limit the allocator ran under, where the trace's events say it (a profile's ``bytes_available``)."""
        return dict(self.recorded_limits).get(allocator)

    def _held_steps(self) -> tuple[Step, ...]:
        """The marked steps this trace holds: all of them, or the one it was restricted to."""
        return self.steps if self.step is None else tuple(s for s in self.steps if s.number == self.step)

    def output_shape(self, row: int) -> list[int] | None:
        """An output's shape, None where its rank is unknown."""
        return self.output_shapes(np.array([row]))[0]

    def output_shapes(self, rows: IntArray) -> list[list[int] | None]:
        """The shapes of many outputs at once."""
        offsets, dims = self.outputs.shape_offsets, self.outputs.shape_dims
        known = (self.outputs.rank[rows] >= 0).tolist()
        return [dims[lo:hi].tolist() if ok else None
                for lo, hi, ok in zip(offsets[rows].tolist(), offsets[rows + 1].tolist(), known)]

    def same_content(self, other: TraceData) -> bool:
        """True when both traces hold the same model (paths and source formats aside)."""
        tables = ("devices", "nodes", "memory", "records", "outputs")
        if self.strings != other.strings or self.allocators != other.allocators:
            return False
        if self.message != other.message or self.oddities != other.oddities or self.steps != other.steps:
            return False
        if (self.xla_allocators, self.recorded_limits) != (other.xla_allocators, other.recorded_limits):
            return False
        if not all(getattr(self, t).same_as(getattr(other, t)) for t in tables):
            return False
        if (self.graph is None) != (other.graph is None):
            return False
        return self.graph is None or (other.graph is not None and self.graph.same_as(other.graph))
