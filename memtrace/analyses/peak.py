"""The peak of an allocator and the live set at that instant: who held the bytes.

``peak_delta_bytes`` is the maximum of the replay (0 if it never rises); ``peak_bytes`` adds
the baseline when snapshots give one. The peak is the first event, in replay order, at which the
maximum is reached. The live set is every allocation whose event comes at or before the peak
event and whose free (if any) comes after it, plus (negative) frees at or before the peak of
memory allocated before the step, so its bytes add up to ``peak_delta_bytes`` exactly.

Each live allocation is attributed to the node whose record allocated it and classified:
``temp`` (freed before its node finished), ``output`` (one of the node's output buffers),
``persistent`` (never freed in the step) or ``unknown``; a buffer whose trace says what it is (a
profile's ``region_type``) is that. :func:`group_live_set` adds the live set
up by node, op type or name scope, for the many near-identical rows of an unrolled model.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ..errors import UsageError
from ..trace.data import IntArray, TraceData
from ..trace.layers import LayerNames, LayerPhase, batch_size, input_data_of, layer_of, scope_of, shows_keras
from ..trace.replay import Reconciliation, Replay, Uncounted, reconcile, replay, split_counted


@dataclass(frozen=True)
class LiveAllocation:
    node: str
    kind: str  # "output", "temp", "persistent" or "unknown"
    bytes: int
    alloc_time_us: int  # relative to the step start
    free_time_us: int | None
    allocation_id: int | None
    slot: int | None
    requested_bytes: int | None
    dtype: str | None
    shape: list[int] | None


@dataclass(frozen=True)
class AllocatorPeak:
    allocator: str
    source: str  # "records" or "outputs"
    peak_bytes: int
    peak_delta_bytes: int
    baseline_bytes: int | None
    peak_time_us: int  # relative to the step start
    peak_node: str | None  # None when the allocator never rises above its start
    running_at_peak: tuple[str, ...]
    reconciliation: Reconciliation
    live_at_peak: tuple[LiveAllocation, ...]  # largest first

    @property
    def live_bytes_total(self) -> int:
        return sum(a.bytes for a in self.live_at_peak)


GROUPINGS = ("node", "type", "scope", "layer")

FREED_BEFORE_STEP = "freed-from-before-step"  # the kind of a free of a chunk allocated before the step


def split_freed_before_step(live: Iterable[LiveAllocation]) -> tuple[tuple[LiveAllocation, ...], tuple[LiveAllocation, ...]]:
    """The live set's allocations, and apart from them the frees (negative bytes) of chunks allocated
    before the step that came before the peak: they lower the peak without being anything anyone
    holds, so tables count them apart, never as rows of negative bytes."""
    held: list[LiveAllocation] = []
    freed: list[LiveAllocation] = []
    for allocation in live:
        (freed if allocation.kind == FREED_BEFORE_STEP else held).append(allocation)
    return tuple(held), tuple(freed)


@dataclass(frozen=True)
class LiveGroup:
    """Allocations of the live set that share a key (an op, an op type or a name scope)."""

    key: str
    count: int  # allocations
    bytes: int  # the allocator's chunks
    share: float  # of the peak's peak_delta_bytes (0 when the allocator never rose)
    requested_bytes: int = 0  # the tensors' own bytes (a chunk whose request is unknown counts whole)
    layer: str | None = None  # grouped by layer: the Keras layer as the user named it (memtrace.trace.layers)
    phase: str | None = None  # grouped by layer: forward, backward, optimizer or other


FREED_GROUP = "(freed before the step)"  # the group of the frees of chunks allocated before the step


def held_bytes(found: AllocatorPeak) -> tuple[int, int]:
    """The live set's allocations made during the step (not the frees of earlier chunks): their
    chunks' bytes and their tensors' bytes (:func:`requested_or_chunk`). The difference is what
    the allocator's rounding and unsplit chunks add."""
    held = split_freed_before_step(found.live_at_peak)[0]
    return sum(a.bytes for a in held), sum(map(requested_or_chunk, held))


def requested_or_chunk(allocation: LiveAllocation) -> int:
    """What the op asked for (the tensor's bytes), or the chunk where the trace does not say."""
    return allocation.requested_bytes if allocation.requested_bytes is not None and allocation.bytes > 0 else allocation.bytes


_found: weakref.WeakKeyDictionary[TraceData, dict[str, AllocatorPeak]] = weakref.WeakKeyDictionary()


def peak(trace: TraceData, allocator: str) -> AllocatorPeak:
    """The allocator's peak, its time and node, its reconciliation and its live set.

    Built once per trace and allocator, as its replay is: summary, ops, check, the report and
    batch all ask, and the result is immutable.
    """
    done = _found.setdefault(trace, {})
    if allocator not in done:
        done[allocator] = _peak(trace, allocator)
    return done[allocator]


def _peak(trace: TraceData, allocator: str) -> AllocatorPeak:
    replayed = replay(trace, allocator)
    reconciliation = reconcile(trace, replayed)
    baseline = reconciliation.baseline_bytes
    origin = trace.step_start_ns
    at = replayed.peak_event()
    if at is None:
        return AllocatorPeak(
            allocator, replayed.source, baseline or 0, 0, baseline, 0, None, (), reconciliation, ()
        )
    delta = int(replayed.live_bytes[at])
    time_ns = int(replayed.time_ns[at])
    return AllocatorPeak(
        allocator=allocator,
        source=replayed.source,
        peak_bytes=delta + (baseline or 0),
        peak_delta_bytes=delta,
        baseline_bytes=baseline,
        peak_time_us=(time_ns - origin) // 1000,
        peak_node=trace.node_name(int(replayed.event_node[at])),
        running_at_peak=_running_at(trace, time_ns),
        reconciliation=reconciliation,
        live_at_peak=tuple(sorted(_live_set(trace, replayed, at), key=lambda a: (-a.bytes, a.alloc_time_us))),
    )


def peaks(trace: TraceData, allocators: Iterable[str] | None = None) -> list[AllocatorPeak]:
    """Peaks of the named allocators in the order given, or of all of them, largest first.

    Refused (:class:`~memtrace.errors.BeyondInt64Error`) where one of them adds up past int64;
    :func:`peaks_and_unknown` sets those apart instead.
    """
    if allocators is not None:
        return [peak(trace, name) for name in allocators]
    found = [peak(trace, name) for name in trace.allocators]
    return sorted(found, key=lambda p: (-p.peak_bytes, p.allocator))


def peaks_and_unknown(trace: TraceData, allocators: Iterable[str] | None = None) -> tuple[list[AllocatorPeak], list[Uncounted]]:
    """:func:`peaks`, with the allocators whose bytes add up past int64 set apart (their peak is
    unknown) rather than refusing the lot: those in the order named, or the trace's."""
    counted, unknown = split_counted(trace, trace.allocators if allocators is None else allocators)
    found = peaks(trace, counted)
    if allocators is None:
        found.sort(key=lambda p: (-p.peak_bytes, p.allocator))  # largest first, as peaks() orders them all
    return found, unknown


def group_live_set(
    trace: TraceData, found: AllocatorPeak, by: str = "scope", depth: int | None = 1,
    live: Iterable[LiveAllocation] | None = None, layer_names: LayerNames | None = None,
) -> list[LiveGroup]:
    """The live set at the peak added up by ``node`` (op name), op ``type`` or name ``scope`` (``depth`` levels;
    None: the depth that lands on layers where the trace's names show a Keras model, else 1, see
    :func:`memtrace.trace.layers.scope_of`).

    Largest first, ties by key. The groups' bytes add up to ``peak_delta_bytes`` exactly, as
    the live set does; a name without a scope is its own scope; frees of chunks allocated before
    the step are one group of their own (:data:`FREED_GROUP`, negative bytes). ``live`` groups a selection of
    the live set instead (:func:`select_live`); shares stay shares of ``peak_delta_bytes``.
    ``layer`` groups by Keras layer and phase of the step (:func:`memtrace.trace.layers.layer_of`, with
    the names of ``layer_names`` where given; the copies of the input data TensorFlow made outside any op
    are ``(input data)``, :func:`memtrace.trace.layers.input_data_of`); each group says its ``layer`` and
    ``phase``.
    """
    if by not in GROUPINGS:
        raise UsageError(f"cannot group by {by!r}: choose one of {', '.join(GROUPINGS)}")
    op_type = _op_types(trace) if by == "type" else {}
    layered = by == "scope" and depth is None and shows_keras(
        trace.strings[int(s)] for s in np.unique(trace.nodes.name).tolist())
    totals: dict[str, list[int]] = {}
    layers: dict[str, LayerPhase] = {}
    batch = batch_size(trace, layer_names) if by == "layer" else None  # for the copies of the input data
    for allocation in found.live_at_peak if live is None else live:
        name = allocation.node.split(":", 1)[0]
        if allocation.kind == FREED_BEFORE_STEP:
            key = FREED_GROUP
        elif by == "node":
            key = name
        elif by == "type":
            key = op_type.get(allocation.node) or "(unknown)"
        elif by == "layer":
            where = (input_data_of(name, allocation.requested_bytes, allocation.shape, batch)
                     or layer_of(name, layer_names))
            key = f"{where.layer} ({where.phase})"
            layers[key] = where
        else:  # the wrappers TensorFlow adds (StatefulPartitionedCall/) are no scope of the model's
            key = scope_of(name, None if depth is None else max(depth, 1), layered)
        count_bytes = totals.setdefault(key, [0, 0, 0])
        count_bytes[0] += 1
        count_bytes[1] += allocation.bytes
        count_bytes[2] += requested_or_chunk(allocation)
    whole = found.peak_delta_bytes
    if by == "layer":
        layers[FREED_GROUP] = LayerPhase(FREED_GROUP, "other")
    groups = [LiveGroup(key, count, size, size / whole if whole else 0.0, requested,
                        layers[key].layer if by == "layer" else None, layers[key].phase if by == "layer" else None)
              for key, (count, size, requested) in totals.items()]
    return sorted(groups, key=lambda g: (-g.bytes, g.key))


def _op_types(trace: TraceData) -> dict[str, str]:
    """Node name -> op type, from the first node of each name that knows its type."""
    nodes, strings = trace.nodes, trace.strings
    known = np.flatnonzero(nodes.op_type != 0)
    names, first = np.unique(nodes.name[known], return_index=True)
    return {strings[name]: strings[nodes.op_type[known[row]]] for name, row in zip(names.tolist(), first.tolist())}


def _running_at(trace: TraceData, time_ns: int) -> tuple[str, ...]:
    """Nodes on memory-owning devices whose execution spans the instant."""
    nodes = trace.nodes
    canonical = np.array([kind == "device" for kind in trace.devices.kind], dtype=bool)[nodes.device]
    running = np.flatnonzero(canonical & (nodes.start_ns > 0) & (nodes.start_ns <= time_ns) & (nodes.end_ns >= time_ns))
    names = dict.fromkeys(trace.node_name(int(n)) for n in running[np.argsort(nodes.start_ns[running], kind="stable")])
    return tuple(names)


def _live_set(trace: TraceData, replayed: Replay, at: int) -> list[LiveAllocation]:
    alive = replayed.alive_after(at)
    outputs = trace.outputs
    origin = trace.step_start_ns

    def relative_us(event: int) -> int:
        return (int(replayed.time_ns[event]) - origin) // 1000

    live = []
    allocations = np.flatnonzero(alive)
    for allocation, kind in zip(allocations.tolist(), allocation_kinds(trace, replayed, allocations)):
        event = int(replayed.alloc_event[allocation])
        free = int(replayed.free_event[allocation])
        node = int(replayed.event_node[event])
        row = int(replayed.output_row[allocation])
        live.append(
            LiveAllocation(
                node=trace.node_name(node),
                kind=kind,
                bytes=int(replayed.delta_bytes[event]),
                alloc_time_us=relative_us(event),
                free_time_us=relative_us(free) if free >= 0 else None,
                allocation_id=int(outputs.allocation_id[row]) if row >= 0 else None,
                slot=int(outputs.slot[row]) if row >= 0 else None,
                requested_bytes=int(outputs.requested_bytes[row]) if row >= 0 else None,
                dtype=(trace.strings[outputs.dtype[row]] or None) if row >= 0 else None,
                shape=trace.output_shape(row) if row >= 0 else None,
            )
        )
    # Frees of memory allocated before the step lower the replay without a live allocation to
    # remove; they stand in the live set as negative bytes so that it still sums to the peak.
    for event in replayed.unpaired_free_events[replayed.unpaired_free_events <= at].tolist():
        live.append(
            LiveAllocation(
                node=trace.node_name(int(replayed.event_node[event])),
                kind=FREED_BEFORE_STEP,
                bytes=int(replayed.delta_bytes[event]),
                alloc_time_us=relative_us(event),
                free_time_us=relative_us(event),
                allocation_id=None, slot=None, requested_bytes=None, dtype=None, shape=None,
            )
        )
    return live


_KINDS = ("output", "temp", "persistent", "unknown")


def allocation_kinds(trace: TraceData, replayed: Replay, allocations: IntArray) -> list[str]:
    """The kind of each of ``allocations`` (indices into a replay's allocations).

    ``output``, ``temp`` (freed before its node finished), ``persistent`` (never freed) or
    ``unknown``, or what the trace says for the buffers it lists (``Outputs.kind``): the classification of the live set (``memtrace export`` labels every buffer
    with it).
    """
    free = replayed.free_event[allocations]
    node = replayed.event_node[replayed.alloc_event[allocations]]
    temp = (free >= 0) & (replayed.time_ns[np.maximum(free, 0)] <= trace.nodes.end_ns[node])
    row = replayed.output_row[allocations]
    # A buffer the trace lists is what the trace says it is (always an output in a StepStats; a
    # profile's region_type); index 0, 1, 2 of _KINDS are model.OUTPUT_KINDS.
    listed = trace.outputs.kind[np.maximum(row, 0)].astype(np.int64) if len(trace.outputs) else np.zeros(len(row), np.int64)
    kind = np.where(row >= 0, listed, np.where(temp, 1, np.where(free < 0, 2, 3)))
    return list(map(_KINDS.__getitem__, kind.tolist()))

def parse_group_by(text: str) -> tuple[str, int | None]:
    """``"node"``, ``"type"``, ``"scope"``, ``"scope:DEPTH"`` or ``"layer"`` -> (grouping, depth); the depth is
    None where none was given (scope's default: :func:`memtrace.trace.layers.scope_of`)."""
    by, _, depth_text = text.partition(":")
    if by not in GROUPINGS:
        raise UsageError(f"cannot group by {by!r}: choose one of node, type, scope, scope:DEPTH or layer")
    if not depth_text:
        return by, None
    if by != "scope" or not depth_text.isdigit() or int(depth_text) < 1:
        raise UsageError(f"not a grouping: {text!r} (a depth goes with scope, as in scope:2)")
    return by, int(depth_text)


@dataclass(frozen=True)
class RepeatedAllocation:
    """Live allocations that differ only in the numbers of their node names (an unrolled loop, a
    layer stack): the name with each number as ``*``, one kind, one dtype and shape."""

    node: str  # the node name, or its pattern with ``*`` for numbers when count > 1
    kind: str
    count: int
    bytes: int
    dtype: str | None
    shape: list[int] | None
    first: LiveAllocation  # the largest of them
    requested_bytes: int = 0  # the tensors' own bytes (a chunk whose request is unknown counts whole)


_NUMBER = re.compile(r"(?<=_)[0-9]+(?=/|_|$)")


def repeated_allocations(live: Iterable[LiveAllocation]) -> list[RepeatedAllocation]:
    """The live set with repeats folded into one row each, largest first (ties by first appearance).

    Allocations repeat when their node names match once every ``_N`` number is read as ``_*``
    (``cell_0/.../LSTMBlockCell_14_grad/MatMul_1``) and their kind, dtype and shape agree. A row
    that stands alone keeps its full node name. The rows' bytes add up to the live set's.
    """
    rows: dict[tuple[str, str, str | None, tuple[int, ...] | None], list[LiveAllocation]] = {}
    for allocation in live:
        pattern = _NUMBER.sub("*", allocation.node)
        shape = tuple(allocation.shape) if allocation.shape is not None else None
        rows.setdefault((pattern, allocation.kind, allocation.dtype, shape), []).append(allocation)
    folded = [
        RepeatedAllocation(
            node=pattern if len(members) > 1 and len({m.node for m in members}) > 1 else members[0].node,
            kind=kind, count=len(members), bytes=sum(m.bytes for m in members), dtype=dtype,
            shape=members[0].shape, first=members[0], requested_bytes=sum(map(requested_or_chunk, members)),
        )
        for (pattern, kind, dtype, _), members in rows.items()
    ]
    return sorted(folded, key=lambda r: -r.bytes)


def select_live(found: AllocatorPeak, name: str | None = None, min_bytes: int | None = None) -> tuple[LiveAllocation, ...]:
    """The live allocations whose node name matches the regular expression ``name`` (a search,
    as tfprof's ``-show_name_regexes`` reads it unanchored) and that hold at least ``min_bytes``."""
    pattern = compile_name_filter(name)
    return tuple(
        a for a in found.live_at_peak
        if (pattern is None or pattern.search(a.node)) and (min_bytes is None or a.bytes >= min_bytes)
    )


def compile_name_filter(name: str | None) -> re.Pattern[str] | None:
    """``--name REGEX`` compiled, or a UsageError that says what is wrong with it."""
    if name is None:
        return None
    try:
        return re.compile(name)
    except re.error as error:
        raise UsageError(f"--name {name!r} is not a regular expression: {error}") from None
