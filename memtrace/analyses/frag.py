"""Fragmentation forensics: bytes an allocator hands out beyond what was asked, and holes between buffers.

**Internal** fragmentation is measured over unique buffers with a non-zero id and known
``allocated_bytes``, as ``buffers.owned_outputs`` identifies them: aliases (Identity, Reshape,
in-place ops report the same id and pointer) count once, for their producer. On CPU allocators
(``cpu_pool``, oneDNN's ``mklcpu``), which repeat ids and reuse freed pointers, a shared id and
pointer is an alias only along a data edge.
``waste = allocated - requested``. TensorFlow's BFC allocator rounds each request up to a
multiple of 256 bytes and may hand out a free chunk whole, without splitting it, when it is up
to twice the rounded size; so a buffer's waste splits into **rounding** waste
(``min(waste, roundup256(requested) - requested)``) and **unsplit-chunk** waste (the rest).

**External** fragmentation is reconstructed at one moment (the allocator's peak, or a given
time) from the pointers and sizes of the output buffers alive then: their address ranges, the
span from the lowest to the highest byte, and the holes between them. Temporaries and memory
from before the step have no pointer in the trace, so a "hole" may well be occupied. Where the
allocator's regions are known (a profile from the allocator's birth that the BFC model
reproduces: :mod:`memtrace.allocator.regions`), holes are measured inside each region and the span is the
sum of the spans in each: the space between two regions is not the allocator's.

**Anomalies** are reported, never fatal: requested > allocated, sizes not tracked for some
outputs, an id reused with another size, outputs without an allocator name, BFC allocations
that are not 256-aligned, live buffers that overlap.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import overload

import numpy as np

from ..allocator.bfc import MIN_ALLOCATION_BYTES, rounded_bytes
from ..allocator.regions import Region, Regions, regions_of
from ..trace.buffers import buffers, output_sizes, owned_outputs
from ..trace.data import IntArray, TraceData
from ..trace.replay import Replay, Uncounted, allocator_index, replay, uncounted
from .peak import peaks_and_unknown

EXAMPLES = 3  # detail strings kept per anomaly kind


CPU_REGION_ALIGNMENT_BYTES = 64  # TF's Allocator::kAllocatorAlignment: how its CPU sub-allocator aligns a region


def address_alignment(allocator: str) -> int:
    """The alignment every chunk address of a BFC allocator has: 256 where the regions come from the
    GPU (cudaMalloc aligns to 256 and chunks are multiples of 256), 64 for TensorFlow's CPU BFC
    (``bfc_cpu_allocator_for_gpu``, or any allocator named ``cpu``), whose sub-allocator aligns
    regions to 64 bytes only: its chunks sit at addresses ending in 0x40 as often as 0x00."""
    return CPU_REGION_ALIGNMENT_BYTES if "cpu" in allocator.lower() else MIN_ALLOCATION_BYTES


def is_bfc(allocator: str) -> bool:
    """True for TensorFlow's best-fit-with-coalescing allocators (``GPU_0_bfc``, ``cuda_host_bfc``)."""
    return "bfc" in allocator.lower()


def rounding_waste(requested_bytes: int, allocated_bytes: int) -> int:
    """The part of a buffer's waste that rounding to 256 bytes explains; the rest is an unsplit chunk."""
    return min(allocated_bytes - requested_bytes, rounded_bytes(requested_bytes) - requested_bytes)


# -- results ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Waste:
    """Requested versus allocated bytes over a set of buffers; results add up with ``+``/``sum``."""

    tensors: int = 0
    requested_bytes: int = 0
    allocated_bytes: int = 0
    rounding_waste_bytes: int = 0

    @property
    def waste_bytes(self) -> int:
        return self.allocated_bytes - self.requested_bytes

    @property
    def unsplit_waste_bytes(self) -> int:
        return self.waste_bytes - self.rounding_waste_bytes

    @property
    def waste_fraction(self) -> float:
        """Waste as a share of the allocated bytes (0.0 when nothing was allocated)."""
        return self.waste_bytes / self.allocated_bytes if self.allocated_bytes else 0.0

    def __add__(self, other: Waste) -> Waste:
        return Waste(
            self.tensors + other.tensors,
            self.requested_bytes + other.requested_bytes,
            self.allocated_bytes + other.allocated_bytes,
            self.rounding_waste_bytes + other.rounding_waste_bytes,
        )


@dataclass(frozen=True)
class Buffer:
    """One unique buffer, attributed to the output that created it."""

    node: str
    slot: int
    allocation_id: int
    ptr: int
    requested_bytes: int
    allocated_bytes: int
    dtype: str | None
    shape: list[int] | None

    @property
    def waste(self) -> Waste:
        return Waste(1, self.requested_bytes, self.allocated_bytes, rounding_waste(self.requested_bytes, self.allocated_bytes))


@dataclass(frozen=True)
class OpWaste:
    """The buffers one op (by node name; loop iterations summed) created."""

    node: str
    waste: Waste


@dataclass(frozen=True)
class SizeClass:
    """Buffers whose requested size is above half ``max_bytes`` and at most ``max_bytes`` (a power of two)."""

    max_bytes: int
    waste: Waste


@dataclass(frozen=True)
class AddressRange:
    """The bytes ``[start, start + bytes)`` that a live buffer occupies."""

    start: int
    bytes: int
    node: str
    allocation_id: int

    @property
    def end(self) -> int:
        return self.start + self.bytes


@dataclass(frozen=True)
class Hole:
    """Free address space between two live buffers, as far as the trace can tell."""

    start: int
    bytes: int
    below: str  # the node whose buffer ends where the hole starts
    above: str  # the node whose buffer starts where the hole ends


@dataclass(frozen=True)
class External:
    """The address space of the live buffers that have pointers, at one moment."""

    ranges: tuple[AddressRange, ...]  # by address
    holes: tuple[Hole, ...]  # by address
    overlaps: tuple[tuple[AddressRange, AddressRange], ...]  # (a range, one it overlaps): a finding, normally none
    # Where the allocator's regions are known (memtrace.allocator.regions): the regions the live buffers lie
    # in, by address, and the holes are only the gaps inside one region; () where they are unknown.
    regions: tuple[Region, ...] = ()
    # the extent (first start, last end) of the live buffers in each of those regions
    region_spans: tuple[tuple[int, int], ...] = ()

    @property
    def overlap_bytes(self) -> int:
        return sum(min(a.end, b.end) - a.start for a, b in self.overlaps)

    @property
    def start(self) -> int:
        return self.ranges[0].start

    @property
    def end(self) -> int:
        return max(r.end for r in self.ranges)

    @property
    def span_bytes(self) -> int:
        """From the first live buffer to the end of the last; where the regions are known, the sum of that over each
        region (the space between regions is not the allocator's)."""
        if self.region_spans:
            return sum(end - start for start, end in self.region_spans)
        return self.end - self.start

    @property
    def hole_bytes(self) -> int:
        return sum(h.bytes for h in self.holes)

    @property
    def live_bytes(self) -> int:
        """Bytes of the span that some live buffer occupies (overlaps counted once)."""
        return self.span_bytes - self.hole_bytes

    @property
    def largest_hole_bytes(self) -> int:
        return max((h.bytes for h in self.holes), default=0)

    @property
    def free_fraction(self) -> float:
        """The share of the span that no described buffer occupies."""
        return self.hole_bytes / self.span_bytes if self.span_bytes else 0.0


@dataclass(frozen=True)
class Moment:
    """Internal and external fragmentation of the output buffers alive at one instant."""

    time_us: int | None  # relative to the step start; None when the allocator never rises
    replay_live_bytes: int  # all live bytes then, relative to the step start (temporaries included)
    live: Waste  # over live unique output buffers
    external: External | None  # None when no live buffer has a pointer


@dataclass(frozen=True)
class Anomaly:
    """A finding about the trace: how often it happens and a few examples."""

    kind: str
    count: int
    detail: str
    examples: tuple[str, ...]


@dataclass(frozen=True)
class AllocatorMetric:
    """TensorFlow's own fragmentation metric of the allocator over time, where a profile (XSpace) reports it.

    The BFC allocator computes it after every allocation and free (1 - its largest free chunk /
    its free bytes); a StepStats has none.
    """

    events: int  # events that report it
    at_peak: float | None  # the last value reported at or before the peak; None when the allocator never rises
    highest: float
    highest_time_us: int  # relative to the step start
    last: float


@dataclass(frozen=True)
class AllocatorFragmentation:
    allocator: str
    bfc: bool
    total: Waste  # over every unique buffer of the step
    buffers: Sequence[Buffer]  # most waste first (made when read)
    ops: tuple[OpWaste, ...]  # most waste first
    histogram: tuple[SizeClass, ...]  # smallest size class first, empty classes left out
    at_peak: Moment | None  # None where the allocator's live bytes are unknown (``unknown``)
    at: Moment | None  # the moment asked for with ``at_us``
    anomalies: tuple[Anomaly, ...]
    tf_metric: AllocatorMetric | None = None  # TF's own metric over time, where the trace reports it
    # Where the allocator's bytes add up past int64: no replay, so no moment (its waste needs none).
    unknown: Uncounted | None = None

    @property
    def external(self) -> External | None:
        """External fragmentation at the moment asked for, else at the peak."""
        moment = self.at or self.at_peak
        return moment.external if moment is not None else None


@dataclass(frozen=True)
class TraceFragmentation:
    allocators: tuple[AllocatorFragmentation, ...]
    anomalies: tuple[Anomaly, ...]  # not tied to an allocator: outputs with an empty allocator name


# -- analysis -----------------------------------------------------------------------------------


def fragmentation(trace: TraceData, allocator: str, at_us: int | None = None) -> AllocatorFragmentation:
    """Internal and external fragmentation and the anomalies of one allocator.

    ``at_us`` (microseconds after the step start, as peak times are) adds the moment ``at``,
    whose external fragmentation then replaces the peak's as ``external``. Where the allocator's
    bytes add up past int64 there is no moment (``unknown`` says why); its waste is still measured.
    """
    index = allocator_index(trace, allocator)
    rows = _unique_rows(trace, index)
    outputs = trace.outputs
    measures = _measures(trace, rows)
    requested, allocated, _ = measures
    # Buffers most waste first, then by node name and slot.
    distinct_names, name_codes = np.unique(trace.nodes.name[outputs.node[rows]], return_inverse=True)
    name_rank = _string_ranks(trace, distinct_names)[name_codes]
    by_waste = rows[np.lexsort((outputs.slot[rows], name_rank, requested - allocated))]
    # Size classes: sums over their buffers.
    sizes, size_codes = np.unique(requested, return_inverse=True)
    classes = np.array([size_class(n) for n in sizes.tolist()], dtype=np.uint64)  # 2^63 for requests past 2^62
    class_values, class_codes = np.unique(classes[size_codes], return_inverse=True)
    histogram = zip(class_values.tolist(), _waste_sums(measures, class_codes, len(class_values)))
    unknown = uncounted(trace, allocator)
    replayed = replay(trace, allocator) if unknown is None else None
    regions = regions_of(trace, allocator) if replayed is not None and is_bfc(allocator) else None
    at_peak = _at_peak(trace, replayed, regions) if replayed is not None else None
    at = _at_time(trace, replayed, at_us, regions) if at_us is not None and replayed is not None else None
    moments = [m for m in (at_peak, at) if m is not None]
    total, ops = internal_waste(trace, allocator)
    return AllocatorFragmentation(
        allocator=allocator,
        bfc=is_bfc(allocator),
        total=total,
        buffers=Buffers(trace, by_waste),
        ops=ops,
        histogram=tuple(SizeClass(c, w) for c, w in histogram),
        at_peak=at_peak,
        at=at,
        anomalies=tuple(_allocator_anomalies(trace, allocator, index, rows, moments)),
        tf_metric=_tf_metric(trace, index, replayed),
        unknown=unknown,
    )


def internal_waste(trace: TraceData, allocator: str) -> tuple[Waste, tuple[OpWaste, ...]]:
    """The waste of the allocator's unique buffers in all, and per op (most waste first, then by
    name): :func:`fragmentation`'s ``total`` and ``ops``. It needs no replay, so it is known even
    where the allocator's bytes add up past int64."""
    rows = _unique_rows(trace, allocator_index(trace, allocator))
    measures = _measures(trace, rows)
    names, codes = np.unique(trace.nodes.name[trace.outputs.node[rows]], return_inverse=True)
    ops = [OpWaste(trace.strings[n], w) for n, w in zip(names.tolist(), _waste_sums(measures, codes, len(names)))]
    return _waste_sums(measures)[0], tuple(sorted(ops, key=lambda o: (-o.waste.waste_bytes, o.node)))


def _tf_metric(trace: TraceData, index: int, replayed: Replay | None) -> AllocatorMetric | None:
    """TF's own fragmentation metric of the allocator: at the peak (None where that is unknown), its
    highest and its last value."""
    memory = trace.memory
    rows = np.flatnonzero((memory.allocator == index) & (memory.fragmentation >= 0))
    if not len(rows):
        return None
    times = trace.nodes.op_end_ns[memory.node[rows]]
    order = np.argsort(times, kind="stable")
    times, values = times[order], memory.fragmentation[rows][order]
    highest = int(np.argmax(values))
    at = replayed.peak_event() if replayed is not None else None
    at_peak = None
    if at is not None and replayed is not None:
        position = int(np.searchsorted(times, int(replayed.time_ns[at]), side="right"))
        at_peak = float(values[position - 1]) if position else None
    return AllocatorMetric(len(rows), at_peak, float(values[highest]),
                           (int(times[highest]) - trace.step_start_ns) // 1000, float(values[-1]))


def fragmentations(trace: TraceData, allocators: Iterable[str] | None = None, at_us: int | None = None) -> TraceFragmentation:
    """The named allocators in the order given, or all of them, largest peak first (those whose peak
    is unknown, bytes beyond int64, first of all), plus trace-wide anomalies."""
    if allocators is None:
        counted, unknown = peaks_and_unknown(trace)
        allocators = [*(u.allocator for u in unknown), *(p.allocator for p in counted)]
    found = [fragmentation(trace, name, at_us) for name in allocators]
    return TraceFragmentation(tuple(found), tuple(_trace_anomalies(trace)))


def unique_buffer_rows(trace: TraceData, index: int) -> list[int]:
    """One Outputs row per unique buffer of the allocator, as ``buffers.owned_outputs`` decides.

    Only buffers with a non-zero allocation id and a known ``allocated_bytes`` are measurable;
    forwarded aliases are the producer's buffer and count once.
    """
    return _unique_rows(trace, index).tolist()


def _unique_rows(trace: TraceData, index: int) -> IntArray:
    outputs = trace.outputs
    rows = owned_outputs(trace, index)
    return rows[(outputs.allocation_id[rows] != 0) & (outputs.allocated_bytes[rows] > 0)]


def size_class(requested_bytes: int) -> int:
    """The histogram class of a request: the smallest power of two at least its size (1 for 0)."""
    return 1 << max(requested_bytes - 1, 0).bit_length()


def _buffer(trace: TraceData, row: int) -> Buffer:
    outputs = trace.outputs
    return Buffer(
        node=trace.node_name(int(outputs.node[row])),
        slot=int(outputs.slot[row]),
        allocation_id=int(outputs.allocation_id[row]),
        ptr=int(outputs.ptr[row]),
        requested_bytes=int(outputs.requested_bytes[row]),
        allocated_bytes=int(outputs.allocated_bytes[row]),
        dtype=trace.strings[outputs.dtype[row]] or None,
        shape=trace.output_shape(row),
    )


class Buffers(Sequence[Buffer]):
    """Buffers of many output rows, made when asked for: a large trace has hundreds of thousands."""

    def __init__(self, trace: TraceData, rows: IntArray):
        self._trace, self._rows = trace, rows

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, index: int) -> Buffer: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Buffer, ...]: ...

    def __getitem__(self, index: int | slice) -> Buffer | tuple[Buffer, ...]:
        if isinstance(index, slice):
            return tuple(_buffer(self._trace, row) for row in self._rows[index].tolist())
        return _buffer(self._trace, int(self._rows[index]))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and len(self) == len(other) and all(a == b for a, b in zip(self, other))

    def __repr__(self) -> str:
        return f"Buffers({len(self)} buffers)"


def _string_ranks(trace: TraceData, strings: np.ndarray) -> IntArray:
    """Each string index's rank in the alphabetical order of those strings."""
    texts = [trace.strings[s] for s in strings.tolist()]
    alphabetical = sorted(range(len(texts)), key=texts.__getitem__)
    ranks = np.empty(len(texts), dtype=np.int64)
    ranks[alphabetical] = np.arange(len(texts))
    return ranks


_Measures = tuple[IntArray, IntArray, IntArray]  # requested, allocated and rounding-waste bytes per buffer


def _measures(trace: TraceData, rows: IntArray) -> _Measures:
    requested, allocated = trace.outputs.requested_bytes[rows], trace.outputs.allocated_bytes[rows]
    return requested, allocated, np.minimum(allocated - requested, rounded_bytes(requested) - requested)  # as rounding_waste


def _waste_sums(measures: _Measures, group: IntArray | None = None, groups: int = 1) -> list[Waste]:
    """Waste per group of buffers, from each buffer's group number (default: all in one)."""
    requested, allocated, rounding = measures
    if group is None:
        group = np.zeros(len(requested), dtype=np.int64)
    sums = np.zeros((4, groups), dtype=np.int64)
    np.add.at(sums[0], group, 1)
    for column, values in enumerate((requested, allocated, rounding), start=1):
        np.add.at(sums[column], group, values)
    return [Waste(*values) for values in zip(*sums.tolist())]


def _at_peak(trace: TraceData, replayed: Replay, regions: Regions | None = None) -> Moment:
    """The first event reaching the replay's maximum: the peak as ``memtrace.analyses.peak`` defines it."""
    event = replayed.peak_event()
    if event is None:
        return Moment(None, 0, Waste(), None)
    return _moment(trace, replayed, event, (int(replayed.time_ns[event]) - trace.step_start_ns) // 1000, regions)


def _at_time(trace: TraceData, replayed: Replay, time_us: int, regions: Regions | None = None) -> Moment:
    """After every event at or before ``time_us`` (relative to the step start)."""
    event = int(np.searchsorted(replayed.time_ns, trace.step_start_ns + time_us * 1000, side="right")) - 1
    if event < 0:
        return Moment(time_us, 0, Waste(), None)
    return _moment(trace, replayed, event, time_us, regions)


def _moment(trace: TraceData, replayed: Replay, event: int, time_us: int, regions: Regions | None = None) -> Moment:
    """The output buffers alive after ``event``, in replay order."""
    rows = replayed.output_row[replayed.alive_after(event)]
    rows = rows[rows >= 0]
    outputs = trace.outputs
    unique = rows[(outputs.allocation_id[rows] != 0) & (outputs.allocated_bytes[rows] > 0)]
    live = _waste_sums(_measures(trace, unique))[0]
    sizes = output_sizes(trace, rows)
    placed = (outputs.ptr[rows] != 0) & (sizes > 0)
    ranges = [
        AddressRange(ptr, size, trace.node_name(node), allocation_id)
        for ptr, size, node, allocation_id in zip(outputs.ptr[rows[placed]].tolist(), sizes[placed].tolist(),
                                                  outputs.node[rows[placed]].tolist(), outputs.allocation_id[rows[placed]].tolist())
    ]
    return Moment(time_us, int(replayed.live_bytes[event]), live, _external(ranges, regions))


def _external(ranges: list[AddressRange], regions: Regions | None = None) -> External | None:
    """Sort the ranges by address and walk them, collecting gaps and bytes claimed twice.

    With the allocator's ``regions``, a gap between buffers of two regions is no hole: it holds
    the end of one region, the space between regions, and the start of the next.
    """
    if not ranges:
        return None
    ordered = sorted(ranges, key=lambda r: (r.start, r.end))
    region_of = [regions.index_of(r.start) for r in ordered] if regions is not None else [0] * len(ordered)
    holes: list[Hole] = []
    overlaps: list[tuple[AddressRange, AddressRange]] = []
    spans: list[tuple[int, int]] = [(ordered[0].start, ordered[0].end)]
    top = ordered[0]  # the range that reaches highest so far
    for previous_region, region, r in zip(region_of, region_of[1:], ordered[1:]):
        if region != previous_region or region < 0:  # a region of its own (or a buffer outside every region)
            if r.start < top.end:
                overlaps.append((r, top))
            spans.append((r.start, r.end))
            top = r
            continue
        if r.start >= top.end:
            if r.start > top.end:
                holes.append(Hole(top.end, r.start - top.end, top.node, r.node))
        else:
            overlaps.append((r, top))
        if r.end > top.end:
            top = r
        spans[-1] = (spans[-1][0], max(spans[-1][1], r.end))
    if regions is None:
        return External(tuple(ordered), tuple(holes), tuple(overlaps))
    used = tuple(regions.regions[i] for i in dict.fromkeys(region_of) if i >= 0)
    return External(tuple(ordered), tuple(holes), tuple(overlaps), used, tuple(spans))


# -- anomalies ----------------------------------------------------------------------------------


class _Findings:
    """Counts per anomaly kind, keeping the first few examples."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.examples: dict[str, list[str]] = defaultdict(list)

    def add(self, kind: str, example: str) -> None:
        self.add_many(kind, 1, [example])

    def add_many(self, kind: str, count: int, examples: Iterable[str]) -> None:
        """``count`` findings of a kind, whose first examples (lazily made) are ``examples``."""
        if not count:
            return
        self.counts[kind] = self.counts.get(kind, 0) + count
        kept = self.examples[kind]
        kept.extend(itertools.islice(examples, max(EXAMPLES - len(kept), 0)))

    def anomalies(self, details: dict[str, str]) -> list[Anomaly]:
        return [
            Anomaly(kind, count, details[kind].format(count=count), tuple(self.examples[kind]))
            for kind, count in self.counts.items()
        ]


_DETAILS = {
    "requested-exceeds-allocated": "{count} output(s) requested more bytes than the allocator reports allocating",
    "size-not-tracked": "{count} output(s) request bytes but report allocated_bytes 0, while other outputs of "
    "this allocator report sizes: their waste is unknown and they are left out",
    "id-reused-with-another-size": "{count} allocation id(s) appear with more than one size for one buffer "
    "(on BFC, where ids are unique per allocator, the id; elsewhere one buffer and its aliases)",
    "not-256-aligned": "{count} allocation(s) on a BFC allocator are not multiples of 256 bytes or not 256-aligned",
    "overlapping-live-buffers": "{count} live buffer(s) overlap the address range of another live buffer: "
    "a lifetime in the replay is too long or a pointer is wrong",
    "output-without-allocator": "{count} output(s) have an empty allocator name: they belong to no allocator "
    "and are left out of every number",
}


def _label(trace: TraceData, row: int) -> str:
    return f"{trace.node_name(int(trace.outputs.node[row]))}:{int(trace.outputs.slot[row])}"


def _allocator_anomalies(trace: TraceData, allocator: str, index: int, unique: IntArray, moments: list[Moment]) -> list[Anomaly]:
    """The allocator's anomalies; ``unique`` are its unique buffers' output rows."""
    outputs = trace.outputs
    found = _Findings()
    rows = np.flatnonzero(outputs.allocator == index)
    requested, allocated = outputs.requested_bytes[rows], outputs.allocated_bytes[rows]
    exceeds = rows[(allocated > 0) & (allocated < requested)]
    untracked = rows[(allocated == 0) & (requested > 0)] if (allocated > 0).any() else rows[:0]
    # Kinds are listed in the order the outputs first show them.
    for kind, hits, words in sorted(
        (("requested-exceeds-allocated", exceeds, "allocated {allocated:,} B"),
         ("size-not-tracked", untracked, "allocated_bytes 0")),
        key=lambda k: int(k[1][0]) if len(k[1]) else len(outputs),
    ):
        found.add_many(kind, len(hits), (
            f"{_label(trace, r)} requested {int(outputs.requested_bytes[r]):,} B, "
            + words.format(allocated=int(outputs.allocated_bytes[r]))
            for r in hits.tolist()
        ))
    reused = _ids_reused(trace, rows, is_bfc(allocator))
    found.add_many("id-reused-with-another-size", len(reused), (
        f"id {int(outputs.allocation_id[first[0]])}: "
        + ", ".join(f"{int(outputs.allocated_bytes[r]):,} B ({_label(trace, r)})" for r in first[:3])
        for first in reused
    ))
    if is_bfc(allocator):
        aligned = address_alignment(allocator)
        odd = unique[(outputs.ptr[unique] % aligned != 0) | (outputs.allocated_bytes[unique] % MIN_ALLOCATION_BYTES != 0)]
        found.add_many("not-256-aligned", len(odd), (
            f"{_label(trace, r)} {int(outputs.allocated_bytes[r]):,} B at {int(outputs.ptr[r]):#x}" for r in odd.tolist()
        ))
        records = trace.records
        odd = np.flatnonzero((records.allocator == index) & (records.bytes > 0) & (records.bytes % MIN_ALLOCATION_BYTES != 0))
        found.add_many("not-256-aligned", len(odd), (
            f"record of {int(records.bytes[r]):,} B on {trace.node_name(int(records.node[r]))}" for r in odd.tolist()
        ))
    reported: set[tuple[AddressRange, AddressRange]] = set()
    for moment in moments:
        for pair in moment.external.overlaps if moment.external is not None else ():
            if pair not in reported:
                reported.add(pair)
                a, b = pair
                found.add(
                    "overlapping-live-buffers",
                    f"at {moment.time_us:,} us: {a.node} (id {a.allocation_id}) at {a.start:#x} "
                    f"overlaps {b.node} (id {b.allocation_id})",
                )
    return found.anomalies(_DETAILS)


def _ids_reused(trace: TraceData, rows: IntArray, bfc: bool) -> list[list[int]]:
    """Allocation ids seen with more than one (requested, allocated) size for one buffer.

    A buffer is its id (BFC numbers its chunks once per allocator) or, elsewhere, the buffer as
    ``buffers`` works it out (other allocators repeat ids at other pointers, and hand one address
    out again once it is freed: one id and pointer with separate lifetimes are two buffers). Per
    such buffer, in order of its first output, the first output row of each of its sizes, in order.
    """
    outputs = trace.outputs
    rows = rows[outputs.allocation_id[rows] != 0]
    if not len(rows):
        return []
    # The second key: nothing on BFC, else the buffer (which implies the pointer).
    ptr = np.zeros(len(rows), dtype=np.uint64) if bfc else buffers(trace).buffer_of_output[rows].astype(np.uint64)
    allocation_id, requested, allocated = outputs.allocation_id[rows], outputs.requested_bytes[rows], outputs.allocated_bytes[rows]
    order = np.lexsort((rows, allocated, requested, ptr, allocation_id))  # by buffer, size, then first row
    rows, allocation_id, ptr = rows[order], allocation_id[order], ptr[order]
    requested, allocated = requested[order], allocated[order]
    new_buffer = np.ones(len(rows), dtype=bool)
    new_buffer[1:] = (allocation_id[1:] != allocation_id[:-1]) | (ptr[1:] != ptr[:-1])
    new_size = new_buffer.copy()
    new_size[1:] |= (requested[1:] != requested[:-1]) | (allocated[1:] != allocated[:-1])
    firsts = rows[new_size]  # the first row of each (buffer, size), buffer by buffer
    sizes_per_buffer = np.bincount((np.cumsum(new_buffer) - 1)[new_size])
    ends = np.cumsum(sizes_per_buffer)
    reused = np.flatnonzero(sizes_per_buffer > 1)
    found = [sorted(firsts[end - count:end].tolist())
             for end, count in zip(ends[reused].tolist(), sizes_per_buffer[reused].tolist())]
    return sorted(found)


def _trace_anomalies(trace: TraceData) -> list[Anomaly]:
    found = _Findings()
    rows = np.flatnonzero(trace.outputs.allocator < 0)
    found.add_many("output-without-allocator", len(rows), (
        f"{_label(trace, row)} requested {int(trace.outputs.requested_bytes[row]):,} B" for row in rows.tolist()
    ))
    return found.anomalies(_DETAILS)
