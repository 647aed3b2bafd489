"""Turning parsed trace facts into the columnar :class:`~memtrace.trace.data.TraceData`.

Readers (protobuf's parsers, memtrace's own fast text and binary readers) hand over runs of
consecutive ``NodeExecStats`` as :class:`NodeBlock` columns, in trace order, and then call
:meth:`TraceBuilder.build`; nothing downstream knows which reader ran. The builder interns
strings, parses timeline labels (once per distinct label), and notes oddities. Everything is
done per block with numpy, so a reader that produces columns never pays a Python call per node.

The result is defined as if every node were added one at a time: strings are interned in the
order name, op type, label, label inputs, then the dtypes of the node's outputs; allocators are
numbered by first appearance (memory entries before outputs within a node); oddity kinds are
listed in the order they first occur. Readers that produce equal blocks produce equal traces.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..trace.data import (
    Devices,
    GraphNodes,
    Int32Array,
    IntArray,
    Memory,
    Nodes,
    Oddity,
    Outputs,
    Records,
    Step,
    TraceData,
    device_kind,
)
from .dtypes import DATA_TYPE_NAMES
from .labels import parse_input, parse_label

_DTYPE_ALIASES = {"FLOAT": "float32", "DOUBLE": "float64", "HALF": "float16"}

# Times in nanoseconds are int64. A time or duration of 2^62 ns (146 years) or more is no clock
# reading: it is refused, before any sum of two of them could wrap around.
TIME_LIMIT_NS = 1 << 62
_MICROS_LIMIT = TIME_LIMIT_NS // 1000 + 1
LONGEST_NODE_NS = 86_400 * 10**9  # no op of one step runs for a day  # microseconds beyond this are out of range in nanoseconds too


class TimeOutOfRange(ValueError):
    """A time in the trace is beyond what int64 nanoseconds hold with room for sums (TIME_LIMIT_NS)."""


def micros_to_ns(micros: IntArray) -> IntArray:
    """Microseconds as nanoseconds, saturating beyond TIME_LIMIT_NS instead of wrapping around
    (the saturated value is still out of range, so :meth:`TraceBuilder.add_nodes` refuses it)."""
    return np.clip(micros, -_MICROS_LIMIT, _MICROS_LIMIT) * 1000


def micro_to_ns(micros: int) -> int:
    """:func:`micros_to_ns` for one Python integer (the protobuf reader)."""
    return max(-_MICROS_LIMIT, min(_MICROS_LIMIT, micros)) * 1000
_AFTER_INPUTS = 1 << 40  # sub-position of a node's output dtypes: after any number of label inputs


def dtype_display_name(enum_name: str) -> str:
    """``DT_FLOAT`` -> ``float32``, ``DT_INT64_REF`` -> ``int64_ref``: the names Python users know."""
    if enum_name in ("", "DT_INVALID"):
        return ""
    base = enum_name.removeprefix("DT_")
    ref = base.endswith("_REF")
    if ref:
        base = base[:-4]
    name = _DTYPE_ALIASES.get(base, base.lower())
    return name + "_ref" if ref else name


def dtype_enum_name(value: int) -> str:
    """The ``DataType`` enum name of a number; ``DT_<n>`` for a value newer than our schema."""
    return DATA_TYPE_NAMES.get(value, f"DT_{value}")


@dataclass
class NodeBlock:
    """Consecutive ``NodeExecStats`` as columns; row indices (``mem_node``, ``out_node``) are block-local.

    Times are as TensorFlow writes them: ``start_ns`` absolute, the others relative to it (the
    reader has already chosen nanoseconds or microseconds x 1000). Ragged values are given by
    per-row counts followed by the flat values.
    """

    dev: IntArray  # per node: ordinal of its DeviceStepStats (see TraceBuilder.add_device_stats)
    name: list[str] | CodedTexts
    label: list[str] | CodedTexts
    start_ns: IntArray
    op_start_rel_ns: IntArray
    op_end_rel_ns: IntArray
    end_rel_ns: IntArray
    scheduled_ns: IntArray
    thread_id: IntArray
    temp_bytes: IntArray
    persistent_bytes: IntArray
    device_temp_bytes: IntArray  # the deprecated memory_stats fields 2 and 4 (TF 1.4 and earlier)
    device_persistent_bytes: IntArray
    persistent_count: IntArray
    persistent_ids: IntArray
    mem_node: IntArray
    mem_allocator: list[str] | CodedTexts
    mem_total: IntArray
    mem_peak: IntArray
    mem_live: IntArray
    mem_in_use: IntArray
    mem_record_count: IntArray
    rec_micros: IntArray
    rec_bytes: IntArray
    out_node: IntArray
    out_slot: IntArray
    out_allocator: list[str] | CodedTexts
    out_allocation_id: IntArray
    out_requested: IntArray
    out_allocated: IntArray
    out_ptr: np.ndarray  # uint64
    out_single_ref: np.ndarray  # bool
    out_dtype: IntArray  # DataType enum number
    out_rank: IntArray  # -1 when the shape is absent or of unknown rank
    out_dims: IntArray  # the dims of outputs with rank >= 0, concatenated
    # Readers of finer clocks (XSpace) give record times in ns here instead of rec_micros, and
    # say which memory rows hold a snapshot (default: those whose mem_in_use is not 0).
    rec_time_ns: IntArray | None = None
    mem_has_snapshot: np.ndarray | None = None  # bool
    mem_fragmentation: np.ndarray | None = None  # float64: TF's own metric after the event (XSpace); -1 = none
    out_kind: IntArray | None = None  # per output: index into model.OUTPUT_KINDS (XSpace's region_type); default 0


class BlockLists:
    """Collects a :class:`NodeBlock` one fact at a time (for readers that walk messages)."""

    _INT_FIELDS = (
        "dev", "start_ns", "op_start_rel_ns", "op_end_rel_ns", "end_rel_ns", "scheduled_ns", "thread_id",
        "temp_bytes", "persistent_bytes", "device_temp_bytes", "device_persistent_bytes", "persistent_count", "persistent_ids", "mem_node", "mem_total",
        "mem_peak", "mem_live", "mem_in_use", "mem_record_count", "rec_micros", "rec_bytes", "out_node",
        "out_slot", "out_allocation_id", "out_requested", "out_allocated", "out_dtype", "out_rank", "out_dims",
    )

    def __init__(self) -> None:
        self.lists: dict[str, list[int]] = {name: [] for name in self._INT_FIELDS}
        self.name: list[str] = []
        self.label: list[str] = []
        self.mem_allocator: list[str] = []
        self.out_allocator: list[str] = []
        self.out_ptr: list[int] = []
        self.out_single_ref: list[bool] = []

    def __len__(self) -> int:
        return len(self.name)

    def freeze(self) -> NodeBlock:
        arrays = {name: np.array(values, dtype=np.int64) for name, values in self.lists.items()}
        return NodeBlock(
            name=self.name, label=self.label, mem_allocator=self.mem_allocator, out_allocator=self.out_allocator,
            out_ptr=np.array(self.out_ptr, dtype=np.uint64), out_single_ref=np.array(self.out_single_ref, dtype=np.bool_),
            **arrays,
        )


class _Strings:
    def __init__(self) -> None:
        self.index: dict[str, int] = {"": 0}
        self.values: list[str] = [""]

    def intern(self, value: str) -> int:
        found = self.index.get(value)
        if found is None:
            found = self.index[value] = len(self.values)
            self.values.append(value)
        return found


@dataclass
class _ParsedLabel:
    op: str | None  # None: the label names no op
    inputs: list[str]
    slots: list[int]
    control: list[bool]


def _parse(label: str) -> _ParsedLabel:
    parsed = parse_label(label) if label else None
    if parsed is None:
        return _ParsedLabel(None, [], [], [])
    return _ParsedLabel(
        parsed.op_type, [i.name for i in parsed.inputs], [i.slot for i in parsed.inputs], [i.is_control for i in parsed.inputs]
    )


class CodedTexts:
    """A column of texts as codes into a table of distinct values.

    A profile has millions of events but a few thousand distinct op names, shapes and
    allocators: readers that decode them with numpy hand them over like this, so that no
    Python string is made per row. ``values`` are distinct; row ``i`` is ``values[codes[i]]``.
    """

    def __init__(self, codes: np.ndarray, values: list[str]):
        self.codes = codes
        self.values = values

    @classmethod
    def of(cls, texts: Sequence[str] | CodedTexts) -> CodedTexts:
        """The texts of a list, coded in order of first appearance."""
        if isinstance(texts, CodedTexts):
            return texts
        codes, distinct, _ = codes_by_first_appearance(texts)
        return cls(codes, distinct)

    @classmethod
    def from_table(cls, codes: np.ndarray, table: Sequence[str]) -> CodedTexts:
        """Rows coded into a table that may hold a value twice (each is then coded once)."""
        index: dict[str, int] = {}
        remap = np.array([index.setdefault(value, len(index)) for value in table] or [0], dtype=np.int32)
        return cls(remap[codes], list(index))

    @classmethod
    def concatenate(cls, parts: Sequence[CodedTexts]) -> CodedTexts:
        """The parts' rows one after another, in one table."""
        if len(parts) == 1:
            return parts[0]
        table = [value for part in parts for value in part.values]
        offsets = np.cumsum([0, *(len(part.values) for part in parts[:-1])])
        codes = np.concatenate([part.codes.astype(np.int64) + offset for part, offset in zip(parts, offsets.tolist())]
                               or [np.zeros(0, dtype=np.int64)])
        return cls.from_table(codes, table)

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, row: int) -> str:
        return self.values[int(self.codes[row])]

    def take(self, rows: np.ndarray) -> CodedTexts:
        """The rows given (indices or a mask), with the same table."""
        return CodedTexts(self.codes[rows], self.values)

    def map(self, function: Callable[[str], str]) -> CodedTexts:
        """Each value replaced by ``function(value)``, which is called once per distinct value."""
        return CodedTexts.from_table(self.codes, [function(value) for value in self.values])

    def distinct(self) -> list[str]:
        """The values that some row holds."""
        return [self.values[code] for code in np.flatnonzero(np.bincount(self.codes, minlength=len(self.values))).tolist()]

    def tolist(self) -> list[str]:
        return np.array(self.values, dtype=object)[self.codes].tolist()  # type: ignore[no-any-return]


def codes_by_first_appearance(values: Sequence[str] | CodedTexts) -> tuple[IntArray, list[str], IntArray]:
    """Local codes in order of first appearance, the distinct values, and each one's first row."""
    if isinstance(values, CodedTexts):
        return _first_appearance(values)
    distinct = list(dict.fromkeys(values))  # C-level dedupe, first appearance first
    local = {value: code for code, value in enumerate(distinct)}
    codes = np.fromiter(map(local.__getitem__, values), dtype=np.int64, count=len(values))
    if not len(codes):
        return codes, [], np.zeros(0, dtype=np.int64)
    running = np.maximum.accumulate(codes)
    first = np.flatnonzero(np.diff(running, prepend=-1) > 0)
    return codes, distinct, first


def _first_appearance(texts: CodedTexts) -> tuple[IntArray, list[str], IntArray]:
    """:func:`codes_by_first_appearance` of coded texts: renumbered by first appearance, without a Python step per row."""
    if not len(texts):
        return np.zeros(0, dtype=np.int64), [], np.zeros(0, dtype=np.int64)
    first_row = np.full(len(texts.values), len(texts), dtype=np.int64)
    np.minimum.at(first_row, texts.codes, np.arange(len(texts)))  # each code's first row: no sort of the rows
    present = np.flatnonzero(first_row < len(texts))
    first = first_row[present]
    by_first = np.argsort(first, kind="stable")
    lookup = np.zeros(int(present[-1]) + 1, dtype=np.int64)
    lookup[present[by_first]] = np.arange(len(present))
    return lookup[texts.codes], [texts.values[code] for code in present[by_first].tolist()], first[by_first]


def constant(value: int, rows: int) -> IntArray:
    """A column of one value: a read-only view of a single number, costing no memory per row.

    Readers of profiles, whose events have no durations, no temp or persistent memory and no
    inputs, hand these over; the builder keeps them as they are (see :func:`_is_constant`).
    """
    return np.broadcast_to(np.int64(value), (rows,))


def _is_constant(values: np.ndarray) -> bool:
    """A column made by :func:`constant` (or another view of one number)."""
    return values.ndim == 1 and values.strides == (0,)


def _running(base: int, counts: IntArray) -> IntArray:
    """``base + cumsum(counts)``: the offsets that end each row of a ragged column; constant where no row has any."""
    if _is_constant(counts) and (not len(counts) or counts[0] == 0):
        return constant(base, len(counts))
    return base + np.cumsum(counts)


def _after(start: IntArray, relative: IntArray) -> IntArray:
    """``start + relative``; ``start`` itself (not a copy) where every relative time is 0."""
    if _is_constant(relative) and (not len(relative) or relative[0] == 0):
        return start
    return start + relative


_TRIM_BYTES = 32 << 20  # give freed memory back after this much has been freed


def release_memory() -> None:
    """Give freed heap pages back to the operating system, where the C library allows it.

    glibc keeps freed blocks below its mmap threshold for reuse, so the many small arrays a
    streamed read frees (chunk temporaries, then the per-chunk column parts merged at build)
    would otherwise stay in the process's resident memory: on a 1 GB trace, as much again as
    the model. Elsewhere (no ``malloc_trim``) this does nothing.
    """
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _check_times(block: NodeBlock) -> None:
    """Refuse a block with a time memtrace uses of TIME_LIMIT_NS or more: node times, then record times.

    ``scheduled`` is not among them: no number depends on it, and TensorFlow's GPU stream nodes
    carry it in nanoseconds in a field named for microseconds (about 1.5e18 in tfprof's own test
    data), which :func:`micros_to_ns` saturates rather than wraps.
    """
    columns = (("all_start", block.start_ns), ("op_start_rel", block.op_start_rel_ns),
               ("op_end_rel", block.op_end_rel_ns), ("all_end_rel", block.end_rel_ns))
    for field, values in columns:
        beyond = np.abs(values) >= TIME_LIMIT_NS  # abs(int64 min) stays negative: caught by the next line
        beyond |= values == np.iinfo(np.int64).min
        if beyond.any():
            node = int(np.argmax(beyond))
            raise TimeOutOfRange(f"node {block.name[node]!r}: {field} time out of range (146 years or more)")
    records = np.abs(block.rec_micros) >= _MICROS_LIMIT
    records |= block.rec_micros == np.iinfo(np.int64).min
    if records.any():
        memory_row = int(np.repeat(np.arange(len(block.mem_record_count)), block.mem_record_count)[np.argmax(records)])
        node = int(block.mem_node[memory_row])
        raise TimeOutOfRange(f"node {block.name[node]!r}: alloc_micros of a record out of range (146 years or more)")


def ragged_take(offsets: IntArray, values: np.ndarray, rows: IntArray) -> tuple[IntArray, np.ndarray]:
    """Per-row counts and the concatenated values of ``rows`` of a ragged column."""
    counts = offsets[rows + 1] - offsets[rows]
    total = int(counts.sum())
    if not total:
        return counts, values[:0]
    ends = np.cumsum(counts)
    gather = np.repeat(offsets[rows] - (ends - counts), counts) + np.arange(total)
    return counts, values[gather]


class TraceBuilder:
    """Accumulates one trace in trace order; :meth:`build` freezes it into numpy columns."""

    def __init__(self) -> None:
        self._strings = _Strings()
        self._labels: dict[str, _ParsedLabel] = {}
        self._dev_names: list[str] = []
        self._allocators: dict[str, int] = {}
        self._parts: dict[str, list[np.ndarray]] = {}
        self._nodes = 0
        self._memory = 0
        self._records = 0
        self._inputs = 0
        self._persistent = 0
        self._dims = 0
        self._graph: tuple[str, list[tuple[str, str, str, list[str]]]] | None = None
        self._oddities: dict[tuple[str, str | None], list[object]] = {}  # (kind, allocator) -> [count, example]
        self._freed = 0  # bytes of merged column parts not yet given back (see release_memory)
        self._steps: tuple[tuple[Step, ...], int | None] = ((), None)
        self._xla_allocators: tuple[str, ...] = ()
        self._recorded_limits: dict[str, int] = {}

    # -- facts, in trace order ---------------------------------------------------------------

    def note(self, kind: str, example: str, count: int = 1, allocator: str | None = None) -> None:
        """Count an oddity of this kind on this allocator (None: the whole trace), keeping the first example."""
        entry = self._oddities.get((kind, allocator))
        if entry is None:
            self._oddities[(kind, allocator)] = [count, example]
        else:
            entry[0] = int(entry[0]) + count  # type: ignore[call-overload]

    def _note_by_allocator(self, kind: str, rows: IntArray, allocator: Int32Array, example: Callable[[int], str]) -> None:
        """Note ``rows`` as oddities of ``kind``, one per allocator they are on (``allocator`` per row;
        below 0, no allocator: the whole trace's, noted first), each with its first row's example."""
        codes = allocator[rows]
        names = list(self._allocators)
        for code in np.unique(codes).tolist():
            mine = rows[codes == code]
            self.note(kind, example(int(mine[0])), len(mine), names[code] if code >= 0 else None)

    def add_device_stats(self, name: str = "") -> int:
        """Open the next ``DeviceStepStats``; returns its ordinal. The name may be set later."""
        self._dev_names.append(name)
        return len(self._dev_names) - 1

    def set_device_name(self, ordinal: int, name: str) -> None:
        self._dev_names[ordinal] = name

    def _append(self, column: str, values: np.ndarray) -> None:
        self._parts.setdefault(column, []).append(values)

    def _allocator_codes(self, block: NodeBlock) -> tuple[IntArray, IntArray]:
        """Allocator indices of the memory rows and output rows, numbering new names by first use."""
        mem_codes, mem_names, mem_first = codes_by_first_appearance(block.mem_allocator)
        out_codes, out_names, out_first = codes_by_first_appearance(block.out_allocator)
        first_use: dict[str, tuple[int, int, int]] = {}
        for names, first, rows_node, phase in ((mem_names, mem_first, block.mem_node, 0), (out_names, out_first, block.out_node, 1)):
            for name, row in zip(names, first.tolist()):
                if name and name not in self._allocators:
                    key = (int(rows_node[row]), phase, row)
                    if name not in first_use or key < first_use[name]:
                        first_use[name] = key
        for name in sorted(first_use, key=first_use.__getitem__):
            self._allocators[name] = len(self._allocators)
        lookup = lambda names: np.array([self._allocators.get(n, -1) for n in names] or [0], dtype=np.int64)
        return lookup(mem_names)[mem_codes], lookup(out_names)[out_codes]

    def add_nodes(self, block: NodeBlock) -> None:
        """Append a block of consecutive nodes with their memory entries, records and outputs."""
        n = len(block.name)
        if not n:
            return
        _check_times(block)
        strings = self._strings
        index = strings.index
        node_base, mem_base = self._nodes, self._memory

        # Labels: parsed once per distinct label, ever.
        label_codes, labels, label_first = codes_by_first_appearance(block.label)
        parsed = []
        for label in labels:
            found = self._labels.get(label)
            if found is None:
                found = self._labels[label] = _parse(label)
            parsed.append(found)
        dtype_numbers, dtype_first, dtype_codes = np.unique(block.out_dtype, return_index=True, return_inverse=True)
        dtype_names = [dtype_display_name(dtype_enum_name(v)) for v in dtype_numbers.tolist()]

        # Intern new strings in the order a node-by-node reading meets them.
        name_codes, names, name_first = codes_by_first_appearance(block.name)
        pending: list[tuple[int, int, str]] = [  # (node, sub-position, string)
            (first, 0, name) for name, first in zip(names, name_first.tolist()) if name not in index
        ]
        for label, found, first in zip(labels, parsed, label_first.tolist()):
            if found.op is not None and found.op not in index:
                pending.append((first, 1, found.op))
            if label not in index:
                pending.append((first, 2, label))
            pending.extend((first, 3 + k, name) for k, name in enumerate(found.inputs) if name not in index)
        for name, first in zip(dtype_names, dtype_first.tolist()):
            if name not in index:
                pending.append((int(block.out_node[first]), _AFTER_INPUTS + first, name))
        if pending:
            node_key = np.fromiter((p[0] for p in pending), dtype=np.int64, count=len(pending))
            sub_key = np.fromiter((p[1] for p in pending), dtype=np.int64, count=len(pending))
            for k in np.lexsort((sub_key, node_key)).tolist():
                strings.intern(pending[k][2])
        name_ids = np.array([index[name] for name in names], dtype=np.int64)[name_codes] if n else name_codes

        # Nodes.
        op_ids = np.array([index[p.op] if p.op is not None else 0 for p in parsed], dtype=np.int64)
        label_ids = np.array([index[label] for label in labels], dtype=np.int64)
        start = block.start_ns
        self._append("node.dev", block.dev)
        self._append("node.name", name_ids.astype(np.int32))
        self._append("node.op_label", op_ids[label_codes].astype(np.int32))
        self._append("node.label", label_ids[label_codes].astype(np.int32))
        self._append("node.start_ns", start)
        self._append("node.op_start_ns", _after(start, block.op_start_rel_ns))
        self._append("node.op_end_ns", _after(start, block.op_end_rel_ns))
        self._append("node.end_ns", _after(start, block.end_rel_ns))
        self._append("node.scheduled_ns", block.scheduled_ns)
        self._append("node.thread_id", block.thread_id)
        self._append("node.temp_bytes", block.temp_bytes)
        self._append("node.persistent_bytes", block.persistent_bytes)
        self._append("node.device_temp_bytes", block.device_temp_bytes)
        self._append("node.device_persistent_bytes", block.device_persistent_bytes)
        self._append("node.persistent_ids_offsets", _running(self._persistent, block.persistent_count))
        self._append("node.persistent_ids", block.persistent_ids)
        self._persistent += len(block.persistent_ids)
        in_counts = np.array([len(p.inputs) for p in parsed], dtype=np.int64)
        in_offsets = np.concatenate([[0], np.cumsum(in_counts)]).astype(np.int64)
        in_names = np.array([index[name] for p in parsed for name in p.inputs], dtype=np.int32)
        in_slots = np.array([s for p in parsed for s in p.slots], dtype=np.int32)
        in_control = np.array([c for p in parsed for c in p.control], dtype=np.bool_)
        if in_counts.any():
            counts, flat_names = ragged_take(in_offsets, in_names, label_codes)
            _, flat_slots = ragged_take(in_offsets, in_slots, label_codes)
            _, flat_control = ragged_take(in_offsets, in_control, label_codes)
        else:  # no label names an input (a profile's): nothing per node
            counts, flat_names, flat_slots, flat_control = constant(0, n), in_names, in_slots, in_control
        self._append("node.input_offsets", _running(self._inputs, counts))
        self._append("node.input_name", flat_names)
        self._append("node.input_slot", flat_slots)
        self._append("node.input_is_control", flat_control)
        self._inputs += len(flat_names)

        # Memory entries and their records.
        mem_allocator, out_allocator = self._allocator_codes(block)
        m = len(block.mem_node)
        mem_nodes = node_base + block.mem_node
        self._append("mem.node", mem_nodes.astype(np.int32))
        self._append("mem.allocator", mem_allocator.astype(np.int32))
        self._append("mem.total_bytes", block.mem_total)
        self._append("mem.peak_bytes", block.mem_peak)
        self._append("mem.live_bytes", block.mem_live)
        self._append("mem.bytes_in_use", block.mem_in_use)
        self._append("mem.record_offsets", self._records + np.cumsum(block.mem_record_count))
        self._append("mem.has_snapshot", block.mem_in_use != 0 if block.mem_has_snapshot is None
                     else block.mem_has_snapshot.astype(np.bool_))
        self._append("mem.fragmentation", np.full(m, -1.0) if block.mem_fragmentation is None
                     else block.mem_fragmentation.astype(np.float64))
        rec_mem = np.repeat(np.arange(m, dtype=np.int64), block.mem_record_count)
        self._append("rec.allocator", mem_allocator[rec_mem].astype(np.int32))
        self._append("rec.time_ns", micros_to_ns(block.rec_micros) if block.rec_time_ns is None else block.rec_time_ns)
        self._append("rec.bytes", block.rec_bytes)
        self._append("rec.node", mem_nodes[rec_mem].astype(np.int32))
        self._append("rec.memory", (mem_base + rec_mem).astype(np.int32))
        self._records += len(block.rec_bytes)

        # Outputs.
        dtype_ids = np.array([index[name] for name in dtype_names] or [0], dtype=np.int64)
        rank = block.out_rank
        self._append("out.node", (node_base + block.out_node).astype(np.int32))
        self._append("out.slot", block.out_slot.astype(np.int32))
        self._append("out.allocator", out_allocator.astype(np.int32))
        self._append("out.allocation_id", block.out_allocation_id)
        self._append("out.requested_bytes", block.out_requested)
        self._append("out.allocated_bytes", block.out_allocated)
        self._append("out.ptr", block.out_ptr.astype(np.uint64))
        self._append("out.has_single_reference", block.out_single_ref.astype(np.bool_))
        self._append("out.dtype", dtype_ids[dtype_codes].astype(np.int32))
        self._append("out.rank", rank.astype(np.int32))
        self._append("out.shape_offsets", self._dims + np.cumsum(np.maximum(rank, 0)))
        self._append("out.shape_dims", block.out_dims)
        self._append("out.kind", np.zeros(len(block.out_node), dtype=np.int8) if block.out_kind is None
                     else block.out_kind.astype(np.int8))
        self._dims += len(block.out_dims)

        self._note_block(block, rec_mem, mem_allocator, out_allocator)
        self._nodes += n
        self._memory += m

    def _note_block(self, block: NodeBlock, rec_mem: IntArray, mem_allocator: IntArray, out_allocator: IntArray) -> None:
        """The block's oddities, merged as if noted node by node (kinds keep first-seen order)."""
        name = lambda node: repr(block.name[node])
        found: list[tuple[tuple[int, int, int, int], str, int, str]] = []  # (first key, kind, count, example)

        def add(kind: str, mask: np.ndarray, key: tuple[int, int, int, int], example: str) -> None:
            found.append((key, kind, int(np.count_nonzero(mask)), example))

        start = block.start_ns
        unstarted = start <= 0
        if unstarted.any():
            i = int(np.argmax(unstarted))
            add("node-not-started", unstarted, (i, 0, 0, 0), f"{name(i)} has all_start_micros {int(start[i]) // 1000}")
        negative = ~unstarted & ((block.end_rel_ns < 0) | (block.op_end_rel_ns < block.op_start_rel_ns))
        if negative.any():
            i = int(np.argmax(negative))
            add("negative-duration", negative, (i, 0, 0, 0), f"{name(i)} ends before it starts")
        zero = block.rec_bytes == 0
        if zero.any():
            row = int(rec_mem[np.argmax(zero)])
            node = int(block.mem_node[row])
            add("zero-byte-record", zero, (node, 1, row, 0), f"a record of 0 bytes on {name(node)}")
        unnamed = (mem_allocator < 0) & (block.mem_record_count > 0)
        if unnamed.any():
            row = int(np.argmax(unnamed))
            node = int(block.mem_node[row])
            add("records-without-allocator", unnamed, (node, 1, row, 1), f"records with no allocator name on {name(node)}")
        no_allocator = out_allocator < 0
        if no_allocator.any():
            row = int(np.argmax(no_allocator))
            node = int(block.out_node[row])
            add("output-without-allocator", no_allocator, (node, 2, row, 0), f"{name(node)} output {int(block.out_slot[row])}")
        exceeds = block.out_requested > block.out_allocated
        if exceeds.any():
            row = int(np.argmax(exceeds))
            node = int(block.out_node[row])
            requested, allocated = int(block.out_requested[row]), int(block.out_allocated[row])
            add("requested-exceeds-allocated", exceeds, (node, 2, row, 1),
                f"{name(node)} output {int(block.out_slot[row])}: requested {requested} > allocated {allocated}")
        for _, kind, count, example in sorted(found):
            self.note(kind, example, count)

    def _note_trace(self, nodes: Nodes, memory: Memory, records: Records, outputs: Outputs,
                    strings: Sequence[str]) -> None:
        """Oddities only the whole trace shows: numbers no allocator or clock can produce, which
        would otherwise reach a report as fact (wrapped totals, negative sizes, records far from
        their node, frees without or before their allocation). Noted after the per-block kinds, each
        on the allocator whose records, memory entry or output it is found in (so that a report marks
        only that allocator's numbers), on the whole trace where they name none."""
        name = lambda node: repr(strings[int(nodes.name[node])])
        started = nodes.start_ns > 0
        duration = nodes.end_ns - nodes.start_ns
        long = started & (duration > LONGEST_NODE_NS)
        if long.any():
            i = int(np.argmax(long))
            self.note("node-lasts-over-a-day", f"{name(i)} lasts {int(duration[i]) / 86_400e9:.3g} days",
                      int(np.count_nonzero(long)))

        # A size on a memory entry or an output is its allocator's; a node's temp or persistent size the trace's.
        unowned = np.full(len(nodes.start_ns), -1, dtype=np.int32)
        sizes = ((memory.total_bytes, memory.node, memory.allocator, "total_bytes"),
                 (memory.peak_bytes, memory.node, memory.allocator, "peak_bytes"),
                 (memory.live_bytes, memory.node, memory.allocator, "live_bytes"),
                 (memory.bytes_in_use, memory.node, memory.allocator, "allocator_bytes_in_use"),
                 (nodes.temp_bytes, None, unowned, "temp_memory_size"),
                 (nodes.persistent_bytes, None, unowned, "persistent_memory_size"),
                 (outputs.requested_bytes, outputs.node, outputs.allocator, "requested_bytes"),
                 (outputs.allocated_bytes, outputs.node, outputs.allocator, "allocated_bytes"))
        negative_counts: dict[int, int] = {}  # per allocator (-1: none), the first example by field order
        negative_examples: dict[int, str] = {}
        for values, owner, allocator_of, field_name in sizes:
            rows = np.flatnonzero(values < 0)
            for code in np.unique(allocator_of[rows]).tolist():
                mine = rows[allocator_of[rows] == code]
                node = int(mine[0]) if owner is None else int(owner[mine[0]])
                negative_examples.setdefault(code, f"{name(node)} has {field_name} {int(values[mine[0]])}")
                negative_counts[code] = negative_counts.get(code, 0) + len(mine)
        allocators = list(self._allocators)
        for code in sorted(negative_counts):
            self.note("negative-size", negative_examples[code], negative_counts[code], allocators[code] if code >= 0 else None)

        self._note_snapshots_beyond_int64(memory, records)
        if not len(records.bytes):
            return
        node_of = records.node.astype(np.int64)
        # Records are in microseconds, node times may be in nanoseconds: a microsecond of slack.
        before = records.time_ns < nodes.start_ns[node_of] - 999
        after = (records.bytes > 0) & (records.time_ns >= nodes.end_ns[node_of] + 1000)
        outside = (before | after) & started[node_of]

        def outside_example(row: int) -> str:
            node = int(node_of[row])
            offset = (int(records.time_ns[row]) - int(nodes.start_ns[node])) // 1000
            return f"a record of {name(node)} at {offset:+,} us from the node's start"

        self._note_by_allocator("record-outside-its-node", np.flatnonzero(outside), records.allocator, outside_example)

        entry = records.memory.astype(np.int64)
        entries = len(memory.node)
        allocated = np.bincount(entry, weights=np.maximum(records.bytes, 0).astype(np.float64), minlength=entries)
        freed = np.bincount(entry, weights=np.maximum(-records.bytes, 0).astype(np.float64), minlength=entries)
        # A node that only frees (allocates nothing) frees memory from before the step or profile: replay
        # counts that as such; an oddity is a node that allocates some and frees more.
        frees_more = np.flatnonzero((freed > allocated) & (allocated > 0))
        self._note_by_allocator(
            "free-exceeds-allocation", frees_more, memory.allocator,
            lambda row: f"{name(int(memory.node[row]))} frees {int(freed[row])} bytes but allocates {int(allocated[row])}")
        first_alloc = np.full(entries, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(first_alloc, entry[records.bytes > 0], records.time_ns[records.bytes > 0])
        free_rows = np.flatnonzero(records.bytes < 0)
        early = free_rows[records.time_ns[free_rows] < first_alloc[entry[free_rows]]]
        early = early[allocated[entry[early]] > 0]  # a node's frees with no allocation at all are another matter
        self._note_by_allocator(
            "free-before-allocation", early, records.allocator,
            lambda row: f"{name(int(node_of[row]))} frees {-int(records.bytes[row])} bytes before it allocates any")

        named = records.allocator >= 0
        per_allocator = np.bincount(records.allocator[named].astype(np.int64),
                                    weights=np.abs(records.bytes[named].astype(np.float64)),
                                    minlength=len(self._allocators))
        for code in np.flatnonzero(per_allocator >= 2.0**63).tolist():
            self.note("bytes-beyond-int64", f"the records of {allocators[code]!r} add up to {per_allocator[code]:.3g} bytes: "
                      "a running total of them wraps around", 1, allocators[code])

    def _note_snapshots_beyond_int64(self, memory: Memory, records: Records) -> None:
        """bytes-beyond-int64 where an allocator's snapshots with its records leave no room in int64 for
        the sums and differences the replay takes of them (``replay.replay`` refuses it likewise)."""
        taken = memory.has_snapshot & (memory.allocator >= 0)
        if not taken.any():
            return
        allocators = list(self._allocators)
        largest = np.zeros(len(allocators))
        np.maximum.at(largest, memory.allocator[taken].astype(np.int64), np.abs(memory.bytes_in_use[taken].astype(np.float64)))
        named = records.allocator >= 0
        recorded = np.bincount(records.allocator[named].astype(np.int64), weights=np.abs(records.bytes[named].astype(np.float64)),
                               minlength=len(allocators))
        beyond = (largest > 0) & (recorded < 2.0**63) & (2 * (largest + recorded) >= 2.0**63)
        for code in np.flatnonzero(beyond).tolist():
            self.note("bytes-beyond-int64", f"the bytes-in-use snapshots of {allocators[code]!r} reach {largest[code]:.3g} bytes: "
                      "a sum or difference of them and the running total wraps around", 1, allocators[code])

    def set_graph(self, source: str, nodes: list[tuple[str, str, str, list[str]]]) -> None:
        """The graph's nodes as ``(name, op, device, inputs)``, inputs as GraphDef writes them."""
        self._graph = (source, nodes)

    # -- freezing ---------------------------------------------------------------------------

    def _column(self, name: str, dtype: type, first: int | None = None) -> np.ndarray:
        """One column, concatenated from its blocks (and freed from the builder)."""
        parts = self._parts.pop(name, [])
        if parts and all(map(_is_constant, parts)) and np.dtype(dtype) == np.int64:
            values = {int(part[0]) for part in parts if len(part)} | ({first} if first is not None else set())
            if len(values) <= 1:  # still one number, however long
                return constant(next(iter(values), 0), sum(map(len, parts)) + (first is not None))
        if first is not None:
            parts.insert(0, np.array([first], dtype=dtype))
        if not parts:
            return np.zeros(0, dtype=dtype)
        column = np.concatenate(parts) if len(parts) > 1 else parts[0]
        freed = sum(part.nbytes for part in parts) if len(parts) > 1 else 0
        del parts
        self._freed += freed
        if self._freed > _TRIM_BYTES:
            release_memory()
            self._freed = 0
        return column.astype(dtype, copy=False)

    def set_steps(self, steps: Sequence[Step], step: int | None = None) -> None:
        """The steps a profile marks, and the one the trace is restricted to (None: all of it)."""
        self._steps = (tuple(steps), step)

    def set_xla_allocators(self, names: Sequence[str]) -> None:
        """The allocators whose events XLA's runtime wrote (a profile JAX recorded)."""
        self._xla_allocators = tuple(names)

    def set_recorded_limit(self, allocator: str, limit_bytes: int) -> None:
        """The limit an allocator's events say it ran under."""
        self._recorded_limits[allocator] = limit_bytes

    def build(self, path: str, source_format: str, message: str) -> TraceData:
        strings = self._strings
        graph = None
        graph_source = None
        graph_ops: dict[int, int] = {}
        if self._graph is not None:
            graph_source, graph_nodes = self._graph
            name_ids, op_ids, device_ids, offsets = [], [], [], [0]
            in_names: list[int] = []
            in_slots: list[int] = []
            in_control: list[bool] = []
            for node_name, node_op, node_device, node_inputs in graph_nodes:
                name_ids.append(strings.intern(node_name))
                op_ids.append(strings.intern(node_op))
                device_ids.append(strings.intern(node_device))
                graph_ops.setdefault(name_ids[-1], op_ids[-1])
                for parsed in map(parse_input, node_inputs):
                    in_names.append(strings.intern(parsed.name))
                    in_slots.append(parsed.slot)
                    in_control.append(parsed.is_control)
                offsets.append(len(in_names))
            graph = GraphNodes(
                name=np.array(name_ids, dtype=np.int32), op=np.array(op_ids, dtype=np.int32),
                device=np.array(device_ids, dtype=np.int32), input_offsets=np.array(offsets, dtype=np.int64),
                input_name=np.array(in_names, dtype=np.int32), input_slot=np.array(in_slots, dtype=np.int32),
                input_is_control=np.array(in_control, dtype=np.bool_),
            )

        device_index: dict[str, int] = {}
        dev_map = np.array([device_index.setdefault(d, len(device_index)) for d in self._dev_names] or [0], dtype=np.int32)
        col = self._column
        names = col("node.name", np.int32)
        op_type = col("node.op_label", np.int32)
        if graph_ops:
            from_graph = np.array([graph_ops.get(n, -1) for n in names.tolist()], dtype=np.int32)
            op_type = np.where(from_graph >= 0, from_graph, op_type).astype(np.int32)
        nodes = Nodes(
            name=names,
            op_type=op_type,
            device=dev_map[col("node.dev", np.int64)] if self._nodes else np.zeros(0, dtype=np.int32),
            start_ns=col("node.start_ns", np.int64),
            op_start_ns=col("node.op_start_ns", np.int64),
            op_end_ns=col("node.op_end_ns", np.int64),
            end_ns=col("node.end_ns", np.int64),
            scheduled_ns=col("node.scheduled_ns", np.int64),
            thread_id=col("node.thread_id", np.int64),
            label=col("node.label", np.int32),
            temp_bytes=col("node.temp_bytes", np.int64),
            persistent_bytes=col("node.persistent_bytes", np.int64),
            device_temp_bytes=col("node.device_temp_bytes", np.int64),
            device_persistent_bytes=col("node.device_persistent_bytes", np.int64),
            persistent_ids_offsets=col("node.persistent_ids_offsets", np.int64, 0),
            persistent_ids=col("node.persistent_ids", np.int64),
            input_offsets=col("node.input_offsets", np.int64, 0),
            input_name=col("node.input_name", np.int32),
            input_slot=col("node.input_slot", np.int32),
            input_is_control=col("node.input_is_control", np.bool_),
        )
        memory = Memory(
            node=col("mem.node", np.int32),
            allocator=col("mem.allocator", np.int32),
            total_bytes=col("mem.total_bytes", np.int64),
            peak_bytes=col("mem.peak_bytes", np.int64),
            live_bytes=col("mem.live_bytes", np.int64),
            bytes_in_use=col("mem.bytes_in_use", np.int64),
            record_offsets=col("mem.record_offsets", np.int64, 0),
            has_snapshot=col("mem.has_snapshot", np.bool_),
            fragmentation=col("mem.fragmentation", np.float64),
        )
        records = Records(
            allocator=col("rec.allocator", np.int32),
            time_ns=col("rec.time_ns", np.int64),
            bytes=col("rec.bytes", np.int64),
            node=col("rec.node", np.int32),
            memory=col("rec.memory", np.int32),
        )
        outputs = Outputs(
            node=col("out.node", np.int32),
            slot=col("out.slot", np.int32),
            allocator=col("out.allocator", np.int32),
            allocation_id=col("out.allocation_id", np.int64),
            requested_bytes=col("out.requested_bytes", np.int64),
            allocated_bytes=col("out.allocated_bytes", np.int64),
            ptr=col("out.ptr", np.uint64),
            has_single_reference=col("out.has_single_reference", np.bool_),
            dtype=col("out.dtype", np.int32),
            rank=col("out.rank", np.int32),
            shape_offsets=col("out.shape_offsets", np.int64, 0),
            shape_dims=col("out.shape_dims", np.int64),
            kind=col("out.kind", np.int8),
        )
        self._note_trace(nodes, memory, records, outputs, strings.values)
        device_names = tuple(device_index)
        return TraceData(
            path=path,
            source_format=source_format,
            message=message,
            strings=tuple(strings.values),
            allocators=tuple(self._allocators),
            devices=Devices(name=device_names, kind=tuple(device_kind(d) for d in device_names)),
            nodes=nodes,
            memory=memory,
            records=records,
            outputs=outputs,
            graph=graph,
            graph_source=graph_source,
            oddities=tuple(Oddity(kind, int(c), str(e), allocator)  # type: ignore[call-overload]
                           for (kind, allocator), (c, e) in self._oddities.items()),
            steps=self._steps[0],
            step=self._steps[1],
            xla_allocators=tuple(name for name in self._allocators if name in self._xla_allocators),
            recorded_limits=tuple((name, self._recorded_limits[name]) for name in self._allocators
                                  if name in self._recorded_limits),
        )
