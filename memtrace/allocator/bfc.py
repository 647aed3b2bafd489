"""A model of TensorFlow's BFC allocator: given a request sequence and options, what would it do?

The allocator (``xla/tsl/framework/bfc_allocator.cc``, formerly ``tensorflow/tsl`` and
``tensorflow/core/common_runtime``) is deterministic given the order of its requests, so
replaying a step's requests answers, to the byte, where each chunk lands, how many bytes are in
use, TF's fragmentation metric after each event, and which request (if any) runs out of memory.
This module is a *mechanism*, not a trace: it takes :class:`Requests` and :class:`BFCOptions`
and knows nothing of memtrace's readers or analyses.

The rules (TF 2.x; where older versions differ it is said):

- A request is rounded up to a multiple of 256 bytes (``kMinAllocationSize``); a 0-byte request
  gets no memory (TF returns null and writes no event).
- Free chunks sit in 21 bins ordered by (size, address); the search starts at the request's bin
  and walks up, taking the first chunk large enough: the smallest free chunk that fits, the lowest
  address on ties, across all regions (region address order decides ties between regions).
- The chunk is split when it is at least twice the rounded request, or when the remainder would
  be at least ``max_internal_fragmentation`` (128 MiB, or ``fragmentation_fraction`` x limit when
  that option is above 0; the option appeared in 2022, and the earliest versions split only at
  twice). The low part is handed out; unsplit, the whole chunk is, and bytes in use count it all.
- A freed chunk merges with the next chunk if free, then the previous one, within its region.
- Regions (``Extend``): ``available = floor256(limit - pool)``; a rounded request above that fails;
  while it is above the current region size, the size doubles; the region is
  ``min(size, available)`` (so the last one is cut to what the limit leaves); if the size did not
  double for this request it doubles now, for the next region. The first size is
  ``RoundedBytes(min(limit, 2 MiB))`` with ``allow_growth``, else the whole limit (one region). The
  model assumes the device gives every region asked for (TF backs off to 0.9x when it does not).
- Order of attempts: find a chunk; else extend and find; else, with ``garbage_collection``, free
  every wholly free region (when that could make room: ``rounded <= limit - pool + their bytes``),
  extend and find; else out of memory.
- Statistics after every event, as TF's profiler writes them: bytes in use (whole chunks), pool
  bytes, the largest free chunk, and ``fragmentation = (F - largest) / F`` with ``F = pool - in
  use`` (NaN when F = 0). A free's event names the freed chunk as it was before merging.

XLA's copy of the allocator can also **partition** its one fixed region (``Options::
enable_spatial_partitioning``, on in JAX's GPU client with preallocation): a lower end growing up
from the region's start, an upper end growing down from its top, and one central gap between them.
``BFCOptions(partitioned=True)`` replays those rules (:class:`_PartitionedRun`, kept apart from the
classic loop; the rules are listed there).

Not modelled here: timestamped chunks (``GPUOptions.experimental.timestamped_allocator``, off by
default) and the sub-allocator refusing memory. A request that fails is retried when memory comes
back (``AllocatorRetry``: the thread waits up to 10 s for frees from other threads) only where the
caller gives a :class:`Schedule`, which knows what else could run meanwhile (``allocator/orders.py``);
the allocator's own rules are the same either way.

Speed: free chunks are one sorted Python list of integer keys ``size << 80 | address`` (the
bins' order is exactly this order), searched with ``bisect``; chunks are found by address in
dicts, so merging needs no linked lists. Regions get virtual base addresses far apart (``2**44``
bytes), ascending or descending in creation order, so chunks of different regions never touch.
The loop reads one column (rounded bytes, or ``~row`` for a free), made Python ints a block at a
time, so its memory does not grow with the sequence; a recording replay keeps its statistics as
arrays, a block at a time. Where numba is installed (``memtrace[fast]``), the same loop compiled
(``bfc_compiled.py``: the state in arrays, chunks as handles with their neighbours) serves the
replays in row order, and TF's retry once a request fails, once a process has replayed about a
million events in Python or where a caller says many replays are to come (:func:`_compiled_serves`,
:func:`many_replays`; ``MEMTRACE_REPLAY=python`` or ``compiled`` decides instead): this loop stays
the reference it is tested against, event by event.

Fewer replays: a replay under a limit also proves its answer for every limit under which the
allocator would decide alike (:func:`proven_limits`); what a sequence's replays proved is kept
while the sequence lives, so a limit search, the alternatives ``fit`` measures and the tables of
``fit --vs`` replay only limits nothing proved yet. A replay under a nearby limit resumes from the
last snapshot of an earlier one whose comparisons admit it, and with growth and the 128 MiB rule
from the unlimited replay's state where the limit first cuts a region (only those a searched
limit can cut are kept, as arrays).
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import weakref
from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

MIN_ALLOCATION_BYTES = 256
BIN_COUNT = 21
DEFAULT_MAX_INTERNAL_FRAGMENTATION_BYTES = 128 << 20  # 128 MiB
INITIAL_GROWTH_REGION_BYTES = 2 << 20  # 2 MiB
# Virtual region bases: region r of a model starts at r << _REGION_SHIFT (ascending) or
# (_REGION_SLOTS - r) << _REGION_SHIFT (descending). A region must be smaller than the spacing.
_REGION_SHIFT = 44
_REGION_SLOTS = (1 << 18) - 1  # regions a replay may make (garbage collection makes new ones)
_OFFSET_MASK = (1 << _REGION_SHIFT) - 1
_KEY_SHIFT = 80  # a free chunk's key: size << 80 | virtual address (virtual addresses stay below 2**63)
_ADDRESS_MASK = (1 << _KEY_SHIFT) - 1
MAX_LIMIT_BYTES = 1 << (_REGION_SHIFT - 1)  # 8 TiB: larger limits are refused
_TOO_MANY_REGIONS = "the replay made more regions than the model holds"  # (_REGION_SLOTS of them)

IntArray = npt.NDArray[np.int64]
Int32Array = npt.NDArray[np.int32]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]


_Bytes = TypeVar("_Bytes", int, IntArray)


def rounded_bytes(n: _Bytes) -> _Bytes:
    """A request's size as BFC hands it out (of one request, or of each of many): up to a multiple of 256 bytes
    (``RoundedBytes``; 0 stays 0)."""
    return (n + MIN_ALLOCATION_BYTES - 1) // MIN_ALLOCATION_BYTES * MIN_ALLOCATION_BYTES


def bin_for_size(size_bytes: int) -> int:
    """The bin a free chunk of this size sits in (``BinNumForSize``): ``min(20, floor(log2(max(size, 256) / 256)))``."""
    return min(BIN_COUNT - 1, (max(size_bytes, MIN_ALLOCATION_BYTES) // MIN_ALLOCATION_BYTES).bit_length() - 1)


HOLE_ORDERS = ("ascending", "descending")  # XLA's HoleOrder: which of two equal-size holes an end takes first
SPLIT_POLICIES = ("heuristic", "exact")  # XLA's HoleSplitPolicy: kBfc (ShouldSplitChunk's rule) or kExact


@dataclass(frozen=True)
class EndPolicy:
    """How one end of a partitioned pool reuses its own holes and carves the central gap (XLA's ``AllocationPolicy``).

    ``hole_split``: a hole of the end's own is split by BFC's rule (``"heuristic"``: at least twice the
    request, or 128 MiB to spare) or always (``"exact"``). ``gap_split``: the same choice for a carve
    from the central gap; XLA's source (openxla/xla 00df9eef) always splits the gap exactly, the build
    in JAX 0.11.2 follows the heuristic at the lower end (a gap under twice the request is handed out whole).
    """

    hole_order: str = "ascending"
    hole_split: str = "heuristic"
    gap_split: str = "exact"

    def __post_init__(self) -> None:
        if self.hole_order not in HOLE_ORDERS:
            raise ValueError(f"the hole order must be one of {', '.join(HOLE_ORDERS)} (got {self.hole_order!r})")
        for name, value in (("hole", self.hole_split), ("gap", self.gap_split)):
            if value not in SPLIT_POLICIES:
                raise ValueError(f"the {name} split policy must be one of {', '.join(SPLIT_POLICIES)} (got {value!r})")


@dataclass(frozen=True)
class BFCOptions:
    """The options that decide BFC's behaviour (``limit_bytes`` is TF's ``memory_limit``).

    ``partitioned`` is XLA's ``enable_spatial_partitioning`` (one fixed region served from both
    ends; growth must be off, as XLA's constructor insists); ``lower_end`` and ``upper_end`` are its
    per-end policies, which only a partitioned pool reads here.
    """

    limit_bytes: int
    allow_growth: bool = True
    garbage_collection: bool = False
    fragmentation_fraction: float = 0.0  # 0: TF's default, split when the remainder is >= 128 MiB
    regions_descending: bool = False  # address order of regions (ties between equal free chunks)
    # The address order of the first regions, as a trace showed it: region_order[r] is the rank of region r's
    # address among them (0: the lowest). Regions made after them follow regions_descending, beyond all of them.
    region_order: tuple[int, ...] = ()
    partitioned: bool = False
    lower_end: EndPolicy = EndPolicy()
    upper_end: EndPolicy = EndPolicy()

    def __post_init__(self) -> None:
        if self.limit_bytes < 0:
            raise ValueError(f"the limit must not be negative (got {self.limit_bytes} bytes)")
        if self.limit_bytes > MAX_LIMIT_BYTES:
            raise ValueError(f"the limit is above what the model holds ({MAX_LIMIT_BYTES} bytes)")
        if not (0.0 <= self.fragmentation_fraction <= 1.0) or math.isnan(self.fragmentation_fraction):
            raise ValueError(f"the fragmentation fraction must be in [0, 1] (got {self.fragmentation_fraction})")
        if sorted(self.region_order) != list(range(len(self.region_order))):
            raise ValueError(f"the region order must rank the regions 0, 1, ... (got {self.region_order})")
        if self.partitioned and self.allow_growth:
            raise ValueError("spatial partitioning needs allow_growth off: XLA's allocator refuses both "
                             "('Spatial partitioning requires a single fixed address range')")

    def address_slot(self, region: int) -> int:
        """Where region ``region`` (in creation order) lies among the regions' addresses, lower first: the known
        order first, then the direction; what orders ties between equal free chunks, and the pictures' regions."""
        order, descending = self.region_order, self.regions_descending
        known = len(order)
        if region < known:  # ascending: slots 0..known-1; descending: just above every later region
            return order[region] + (_REGION_SLOTS - known + 1 if descending else 0)
        return _REGION_SLOTS - region if descending else region

    @property
    def max_internal_fragmentation_bytes(self) -> int:
        """Split a chunk whose remainder reaches this, twice the request or not (TF truncates to int64)."""
        if self.fragmentation_fraction > 0.0:
            return int(self.fragmentation_fraction * self.limit_bytes)
        return DEFAULT_MAX_INTERNAL_FRAGMENTATION_BYTES

    @property
    def initial_region_bytes(self) -> int:
        """``curr_region_allocation_bytes_`` when the allocator is made."""
        if self.allow_growth:
            return rounded_bytes(min(self.limit_bytes, INITIAL_GROWTH_REGION_BYTES))
        return rounded_bytes(self.limit_bytes)


@dataclass(frozen=True, eq=False)
class Requests:
    """One row per event, in the order the allocator saw them.

    A free names the row of the allocation it frees; a free whose allocation is not in the
    sequence (``frees == -1`` on a free row) is ignored by the model. ``upper_end`` and
    ``alignment_bytes`` (None: every request from the lower end, at BFC's 256-byte alignment, as
    every trace records them) matter only to a partitioned allocator, where a caller picks the end.
    """

    is_alloc: BoolArray
    requested_bytes: IntArray  # what the caller asked (allocations); 0 for frees
    frees: IntArray  # for a free, the row of the allocation it frees; -1 for allocations
    op: Int32Array  # code into op_names, -1 when unknown
    time_ns: IntArray
    op_names: tuple[str, ...] = ()
    upper_end: BoolArray | None = None  # per row: the request is served from the upper end (XLA's AllocationEnd::kUpper)
    alignment_bytes: IntArray | None = None  # per row: the alignment asked for (a power of two; 256 and below: none)

    def __len__(self) -> int:
        return len(self.is_alloc)

    @classmethod
    def from_events(cls, events: Sequence[tuple[Any, ...]]) -> Requests:
        """A sequence written by hand: ``("a", bytes[, op[, alignment]])`` allocates (``"u"``: from the upper end
        of a partitioned pool), ``("f", row)`` frees the allocation at row.

        Times are the row numbers. Used by tests and by people trying the model out.
        """
        is_alloc, requested, frees, ops, upper, alignment = [], [], [], [], [], []
        names: dict[str, int] = {}
        for event in events:
            kind, value = event[0], int(event[1])
            if kind in ("a", "u"):
                is_alloc.append(True)
                requested.append(value)
                frees.append(-1)
                op = event[2] if len(event) > 2 else None
                ops.append(-1 if op is None else names.setdefault(str(op), len(names)))
                upper.append(kind == "u")
                alignment.append(int(event[3]) if len(event) > 3 else MIN_ALLOCATION_BYTES)
            elif kind == "f":
                is_alloc.append(False)
                requested.append(0)
                frees.append(value)
                ops.append(-1)
                upper.append(False)
                alignment.append(MIN_ALLOCATION_BYTES)
            else:
                raise ValueError(f"unknown event kind {kind!r} (use 'a', 'u' or 'f')")
        plain = not any(upper) and max(alignment, default=0) <= MIN_ALLOCATION_BYTES
        return cls(np.array(is_alloc, dtype=np.bool_), np.array(requested, dtype=np.int64),
                   np.array(frees, dtype=np.int64), np.array(ops, dtype=np.int32),
                   np.arange(len(is_alloc), dtype=np.int64), tuple(names),
                   None if plain else np.array(upper, dtype=np.bool_),
                   None if plain else np.array(alignment, dtype=np.int64))

    def free_rows(self) -> IntArray:
        """Per row: the row of the free that frees its allocation; -1 where none does (or the row is a free)."""
        found = np.full(len(self.is_alloc), -1, dtype=np.int64)
        freed = np.flatnonzero(~self.is_alloc & (self.frees >= 0))
        found[self.frees[freed]] = freed
        return found

    def peak_rounded_live_bytes(self) -> int:
        """The most rounded bytes alive at once: no limit below it can fit, whatever the allocator does."""
        delta = np.asarray(self.requested_bytes, dtype=np.int64) + 255  # (a free's are 0: so are its rounded)
        delta &= ~255
        freed = np.flatnonzero(self.frees >= 0)  # (an allocation's are -1)
        delta[freed] = -delta[self.frees[freed]]
        return int(max(0, np.cumsum(delta).max(initial=0)))


@dataclass(frozen=True)
class ChunkState:
    """One chunk of the allocator's map: a block handed out (``in_use``) or free."""

    region: int
    offset: int  # within its region
    size_bytes: int
    in_use: bool
    requested_bytes: int  # 0 for a free chunk
    op: str  # the op that allocated it; "" for a free chunk or an unknown op
    row: int  # the allocation's row; -1 for a free chunk
    tag: str = ""  # a partitioned pool's: "lower", "upper" or "central_gap" (XLA's ChunkTag); "" otherwise


@dataclass(frozen=True, eq=False)
class Simulation:
    """What the allocator did with a request sequence.

    Per-event columns cover the events the allocator completed (all of them when it fits, those
    before ``failed_at`` when not). ``regions`` and ``chunks`` are its map at the failure (before
    the failing request) or at the end. ``region_rows[r]`` is the row whose request made region r.
    """

    options: BFCOptions
    fits: bool
    failed_at: int | None
    region: Int32Array  # -1 for an event that touched no chunk (a 0-byte request, an unknown free)
    offset: IntArray
    chunk_bytes: IntArray
    bytes_in_use: IntArray
    pool_bytes: IntArray
    largest_free_bytes: IntArray
    peak_in_use_bytes: int
    regions: tuple[tuple[int, int], ...]  # (region, size_bytes), in creation order, the live ones
    region_rows: tuple[int, ...] = field(default=())
    max_pool_bytes: int = 0
    # every region the replay made, (region, size_bytes) in creation order, and (region, row) of each one garbage
    # collection gave back at that row's request (``regions`` holds only the live ones)
    made_regions: tuple[tuple[int, int], ...] = field(default=())
    given_back: tuple[tuple[int, int], ...] = field(default=())
    # makes ``chunks`` when first asked (a failure's map; a replay that fits keeps its chunks unmade: a step that
    # frees little at its end leaves hundreds of thousands)
    chunk_map: Callable[[], tuple[ChunkState, ...]] = field(default=tuple, repr=False)

    @functools.cached_property
    def chunks(self) -> tuple[ChunkState, ...]:
        """The map at the failure or at the end: by region (creation order), then offset."""
        return self.chunk_map()

    @property
    def fragmentation(self) -> FloatArray:
        """TF's metric after each event: (free - largest free) / free, NaN when nothing is free."""
        free = (self.pool_bytes - self.bytes_in_use).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            return (free - self.largest_free_bytes.astype(np.float64)) / free

    @property
    def in_use_bytes(self) -> int:
        """Bytes in use at the failure, or at the end."""
        return sum(c.size_bytes for c in self.chunks if c.in_use)

    @property
    def pool_total_bytes(self) -> int:
        return sum(size for _, size in self.regions)

    @property
    def largest_free_chunk_bytes(self) -> int:
        return max((c.size_bytes for c in self.chunks if not c.in_use), default=0)

    @property
    def free_bytes(self) -> int:
        """Free chunks plus the room the pool may still grow into (limit - pool), as ``memtrace oom`` counts."""
        free_in_pool = sum(c.size_bytes for c in self.chunks if not c.in_use)
        return free_in_pool + max(0, self.options.limit_bytes - self.pool_total_bytes)


class _Failure(Exception):
    pass


class Schedule(Protocol):
    """The rows a replay serves, in the order it serves them, and what happens when one fails.

    Without one, a replay serves the rows in order and stops at the first that fails. A schedule
    may serve them otherwise, a run of consecutive rows at a time (``runs()``: ``(begin, end)``, the
    rows ``begin`` to ``end - 1``, served in order). Where a row of a run fails, the replay tells
    ``blocked(row)`` (the rows before it in the run were served): True, the request waits (the
    allocator's state is as before it), the rest of the run is not served, and the schedule hands out
    other runs, ``row`` again later; False ends the replay there, out of memory. How long a request
    may wait, and what may run meanwhile, is the runtime's (TF's ``AllocatorRetry``), not the
    allocator's: see ``allocator/orders.py``.
    """

    def runs(self) -> Iterator[tuple[int, int]]: ...

    def blocked(self, row: int) -> bool: ...


class _ScheduleRows:
    """A schedule's rows one at a time, for the Python loops: a run ends early where a row of it waits."""

    def __init__(self, schedule: Schedule) -> None:
        self._schedule = schedule
        self._waits = False

    def __iter__(self) -> Iterator[int]:
        for begin, end in self._schedule.runs():
            for row in range(begin, end):
                yield row
                if self._waits:
                    self._waits = False
                    break

    def blocked(self, row: int) -> bool:
        self._waits = self._schedule.blocked(row)
        return self._waits


# A schedule for a replay that starts at the given row (0, or where it resumes from a saved state).
ScheduleFactory = Callable[[int], Schedule]


def simulate(requests: Requests, options: BFCOptions) -> Simulation:
    """Replay ``requests`` through a BFC allocator with ``options``; stops at the first request that fails."""
    if options.partitioned:
        return _PartitionedRun(requests, options, record=True).simulation()
    _classic_only(requests)
    return _Run(requests, options, record=True).simulation()


def regions_made(requests: Requests, options: BFCOptions) -> tuple[int, ...]:
    """The row whose request made each region (``Simulation.region_rows``), from a replay that records nothing."""
    if options.partitioned:
        return _PartitionedRun(requests, options, record=False).region_rows
    _classic_only(requests)
    return _Run(requests, options, record=False).region_rows


def fits(requests: Requests, options: BFCOptions, schedule: ScheduleFactory | None = None,
         shared: SharedStart | None = None) -> bool:
    """Whether every request is served (a replay that records nothing, for searching limits), in order or as
    ``schedule`` serves them; ``shared``: from the state where the sequence first differs from the one it
    began as (:class:`SharedStart`; a classic allocator's only).

    Served in order, a replay also proves its answer for the limits around ``options.limit_bytes``
    under which the allocator would make every decision the same (see :func:`proven_limits`); a
    later question about one of them, for the same sequence and options, is answered from that proof.
    """
    if schedule is not None or shared is not None:
        start = None
        if shared is not None and shared.rows <= len(requests) and not options.partitioned:
            start = shared.at(options.limit_bytes)
            if start is None and schedule is None:  # the shared rows run out of memory already
                return False
        return _served(requests, options, start, schedule)
    if options.partitioned:
        return _PartitionedRun(requests, options, record=False).failed_at is None
    _classic_only(requests)
    return _limits(requests, options).fits(options.limit_bytes)


def _served(requests: Requests, options: BFCOptions, start: _Checkpoint | None,
            schedule: ScheduleFactory | None, checkpoints: list[_Checkpoint] | None = None,
            keep_from: int = 0) -> bool:
    """Whether a replay from ``start`` (None: the first request) serves every request; with ``schedule``, in
    order until a request fails, then as the schedule serves them from there (the same as a replay served by
    the schedule from the start, which serves the rows in order until a request fails)."""
    if options.partitioned:
        return _PartitionedRun(requests, options, record=False, schedule=schedule).failed_at is None
    _classic_only(requests)
    return _Run(requests, options, record=False, start=start, checkpoints=checkpoints, keep_from=keep_from,
                retry=schedule).failed_at is None


@dataclass(frozen=True)
class Outcome:
    """What one replay under one limit says, without its per-event columns."""

    fits: bool
    failed_at: int | None
    peak_in_use_bytes: int
    max_pool_bytes: int


def outcome(requests: Requests, options: BFCOptions) -> Outcome:
    """Whether ``requests`` fit under ``options``, where they fail, the peak in use and the largest pool: one replay
    that records nothing, remembered for the sequence (a limit search has usually replayed the limit it answers)."""
    return _limits(requests, options).outcome(options.limit_bytes)


def proven_limits(requests: Requests, options: BFCOptions) -> tuple[int, int, bool]:
    """(lowest, highest, fits): limits under which the allocator makes every decision as under ``options.limit_bytes``.

    One replay under a limit L is the replay under any limit L + d for the d that change no
    comparison it made: the limit enters only through the region the limit cuts (its size is the
    limit less the pool before it, so it and the free chunk at its end move with d), through the
    first region's size and, with ``fragmentation_fraction``, the split threshold. Each comparison
    that involves them (does the moving chunk fit a request; does it sort before or after the
    chunk chosen; is it split; is there room for a region; which is smaller, the room or the
    growth size) holds on one side of a threshold in d; the replay keeps the narrowest range. The
    range counts limits that are multiples of 256 bytes (TF's unit); a limit that is not one
    proves only itself; so does a partitioned pool's replay (its rules are not tracked).
    """
    if options.partitioned:
        run_partitioned = _PartitionedRun(requests, options, record=False)
        return options.limit_bytes, options.limit_bytes, run_partitioned.failed_at is None
    _classic_only(requests)
    run = _Run(requests, options, record=False, track=True)
    return run.proven_low, run.proven_high, run.failed_at is None


def _classic_only(requests: Requests) -> None:
    """Refuse what only a partitioned allocator serves: a request from the upper end, or one aligned above 256 B."""
    if requests.upper_end is not None and bool(requests.upper_end.any()):
        raise ValueError("a request from the upper end needs a partitioned allocator (partitioned=True)")
    if requests.alignment_bytes is not None and int(requests.alignment_bytes.max(initial=0)) > MIN_ALLOCATION_BYTES:
        raise ValueError("an alignment above 256 bytes is modelled for a partitioned allocator only")


@dataclass(frozen=True)
class LimitSearch:
    """The smallest limit found, and whether the limits tried say fitting is monotone in the limit."""

    limit_bytes: int
    monotone: bool
    tried: tuple[tuple[int, bool], ...]  # (limit, fits) for every limit looked at, in order (replayed or proven)
    # Below the boundary bisection found, every below_step-th limit was tried (1: every one was, or a replay proved it:
    # a step that passed over none unknown is 1)
    below_step: int
    # The replays the search made (the others were answered by earlier replays' proofs), and their events; a search
    # served by a schedule, a hint or shared rows (the band's) counts none: 0.
    replays: int
    replayed_events: int

    @property
    def exhaustive(self) -> bool:
        """Every limit below the answer was tried or proven by a replay (and failed): it is the smallest."""
        return self.below_step == 1

    def counterexample(self) -> tuple[int, int] | None:
        """A pair (larger limit that fails, smaller limit that fits) showing fitting is not monotone, if one was tried."""
        fitting = [limit for limit, ok in self.tried if ok]
        failing = [limit for limit, ok in self.tried if not ok]
        for bad in sorted(failing, reverse=True):
            good = min((limit for limit in fitting if limit < bad), default=None)
            if good is not None:
                return bad, good
        return None


def search_min_limit(requests: Requests, options: BFCOptions, granularity: int = 1 << 20,
                     extra_probes: int = 2, budget_events: int = 5_000_000,
                     schedule: ScheduleFactory | None = None, hint: int | Sequence[int] | None = None,
                     shared: SharedStart | None = None) -> LimitSearch:
    """The smallest multiple of ``granularity`` under which every request is served.

    The lower bound is the most rounded bytes ever alive at once (no allocator fits below it).
    The upper bound: with ``allow_growth`` and the 128 MiB split rule, the largest pool an
    unlimited replay reaches (under any limit at least that, every region is what it would be
    unlimited, so the replay is the same and fits); otherwise it grows from the lower bound, the
    step doubling, until a limit fits. In the first case every replay under a limit is the
    unlimited one up to the first region the limit cuts, so it starts from the unlimited
    replay's state there instead of from the first request. Bisection between them finds a boundary (a limit that fits
    above one that does not).

    Fitting need not be monotone in the limit: with growth, the last region is cut to what the
    limit leaves, and a region cut to the size of a later large request can fit where a larger
    one, taken in part by smaller requests first, does not (seen in a real recording). So the
    limits below the boundary are looked at too, from the lower bound up; the first that fits is
    the answer. Each replay proves its answer for every limit under which the allocator would
    decide alike (:func:`proven_limits`), and every limit a replay has proven is answered without
    replaying; so the search is exact to ``granularity`` while its replays below the boundary
    stay within ``budget_events`` events (or four replays of the whole sequence, if more; failing
    replays stop at their failure, so most cost less than a whole one). Past that, the limits
    left are tried evenly spaced (``below_step``, the events of those left over the budget; 1 where
    the step passed over no limit a replay had not proven). ``extra_probes`` limits above the answer are
    tried as well, and any limit tried that contradicts monotony is reported (``monotone`` False).

    With ``schedule``, every replay under a limit serves the rows as it says (a failing request
    may wait); the unlimited replay, where nothing fails, is the same either way. ``hint``, a limit
    the answer is likely near (that of a similar sequence), is tried first, and the limit below it:
    where they bracket a boundary, bisection is done (the answer is the same, the smallest limit
    below the boundary that fits, where every limit below it is tried; with a budget of 0 events,
    none below the boundary is, and the hint's boundary stands without the unlimited replay).
    ``shared``: the sequence begins as another does, whose states there every replay starts from
    (:class:`SharedStart`; the answer is the same). With any of them, each replay proves only its
    own limit (the lower bound, with a schedule that serves the requests in another order, is not
    searched below).
    """
    if granularity <= 0:
        raise ValueError("the granularity must be positive")
    if schedule is not None or hint is not None or shared is not None or budget_events == 0:
        return _search_served(requests, options, granularity, extra_probes, budget_events, schedule, hint, shared)
    limits = _limits(requests, options)
    replays, events_before = limits.replays, limits.replayed_events
    top_units = MAX_LIMIT_BYTES // granularity
    n = max(1, len(requests))
    tried: dict[int, bool] = {}  # units -> fits, in the order first asked (asked again: answered from here)

    def check(units: int) -> bool:
        if units not in tried:
            tried[units] = limits.fits(units * granularity, snapshots=True)
        return tried[units]

    floor = max(0, -(-limits.needed_bytes // granularity) - 1)  # known not to fit
    lo = floor
    if limits.reuse:
        max_pool = limits.unlimited((floor + 1) * granularity)
        hi = max(lo + 1, -(-max_pool // granularity))
        tried[hi] = True
    else:
        gap = max(1, lo // 16)  # (from a lower bound at the largest limit or above: the largest, known not to fit)
        hi = min(top_units, lo + gap)
        while not check(hi):
            lo = hi
            gap *= 2
            if hi >= top_units:
                raise ValueError("no limit the model holds fits these requests")
            hi = min(top_units, hi + gap)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if check(mid):
            hi = mid
        else:
            lo = mid
    # Below the boundary, from the lower bound up: every limit a replay did not already prove is replayed, and its
    # proof skips the limits that decide alike; the first that fits wins.
    allowed = max(budget_events, 4 * n)
    scan_start = limits.replayed_events
    units = unknown = floor + 1  # (unknown: the lowest limit the scan has neither tried nor seen proven)
    step = 1
    while units < hi:
        if step == 1 and limits.replayed_events - scan_start > allowed:
            # past the budget: evenly spaced, the limits left replayed within it (a few left: every one; allowed >= 4n)
            step = -(-(hi - units) * n // allowed)
        if check(units):
            # the first fitting limit found: the ones the step skipped below it decide the answer
            for smaller in range(unknown, units):
                if check(smaller):
                    units = smaller
                    break
            hi = units
            break
        unknown = limits.span(units * granularity)[1] // granularity + 1  # (the span holds ``units``)
        units = max(units + step, unknown)  # (a limit proven is not asked: the step goes on past the proof)
    # A step that passed over no limit unknown (each one below the answer replayed or proven) left none out: step 1.
    skipped = step > 1 and limits.unproven(floor + 1, hi, granularity)
    answer, monotone = _probed_above(hi, granularity, extra_probes, tried, check)
    limits.drop_snapshots()
    return LimitSearch(answer, monotone, _in_bytes(tried, granularity), step if skipped else 1,
                       limits.replays - replays, limits.replayed_events - events_before)


def _in_bytes(tried: dict[int, bool], granularity: int) -> tuple[tuple[int, bool], ...]:
    """A search's ``tried`` (units -> fits, in the order asked) as LimitSearch keeps it: (limit in bytes, fits)."""
    return tuple((units * granularity, ok) for units, ok in tried.items())


def _probed_above(hi: int, granularity: int, extra_probes: int, tried: dict[int, bool],
                  check: Callable[[int], bool]) -> tuple[int, bool]:
    """The answer ``hi`` (in units of ``granularity``) and whether every limit tried agrees that fitting is monotone,
    once ``extra_probes`` limits above it are tried (``check``), evenly spaced below the largest that fitted (none
    where that is at most one above it)."""
    top = max((units for units, ok in tried.items() if ok), default=hi)
    gap = max(1, (top - hi) // (extra_probes + 1))
    for units in range(hi + gap, top, gap)[:extra_probes]:
        check(units)
    answer = hi * granularity
    return answer, all(ok == (units >= hi) for units, ok in tried.items())  # (every limit tried is 1 unit or more)


def _search_served(requests: Requests, options: BFCOptions, granularity: int, extra_probes: int, budget_events: int,
                   schedule: ScheduleFactory | None, hint: int | Sequence[int] | None,
                   shared: SharedStart | None) -> LimitSearch:
    """:func:`search_min_limit` with a schedule, a hint or shared rows (``allocator/orders.py``): replays from the
    first request (or the shared state), each proving only its own limit."""
    tried: dict[int, bool] = {}  # units -> fits, in the order first asked (asked again: answered from here)
    top_units = MAX_LIMIT_BYTES // granularity
    n = max(1, len(requests))

    # With growth and the 128 MiB rule, a replay under any limit is the unlimited one up to the first
    # region the limit cuts: it resumes from the unlimited replay's state there (reuse what does not change).
    reuse = options.allow_growth and options.fragmentation_fraction == 0.0
    checkpoints: list[_Checkpoint] = []

    if shared is not None and (shared.unlimited is None or shared.rows > n):
        shared = None
    complete = False  # the checkpoints hold every region the unlimited replay made (not only the shared ones)
    # From the first request, a limit's replay is the plain one until a request fails (a schedule only serves the
    # rows otherwise from there): what the sequence's plain replays proved answers every limit under which it
    # fits, and the schedule is asked only where it fails.
    limits = _limits(requests, options) if shared is None else None
    # With shared rows: the unlimited replay's states where it makes a region, as far as the replays have shown them
    # (the shared rows' first), and the frontier, the latest of them that some replay's limit cut (None: one cut none).
    learned = [] if shared is None else shared.checkpoints()
    frontier = None if shared is None else shared.unlimited

    def learn(made: list[_Checkpoint], limit: int) -> None:
        nonlocal frontier
        for c in made:
            if learned and c.row == learned[-1].row:
                continue  # the frontier's own region, made again by a replay from it
            learned.append(c)
            if c.cut_by(limit):  # what follows is no longer the unlimited replay
                frontier = c
                return
        frontier = None

    def check(units: int) -> bool:
        if units in tried:
            return tried[units]
        limit = units * granularity
        if limits is not None:
            plain = limits.fits(limit, snapshots=True)
            if not plain and schedule is not None:
                plain = _served(requests, _with_limit(options, limit), limits.cut_at(limit), schedule)
            tried[units] = plain
            return plain
        start = None
        if reuse and complete:
            start = _first_cut(checkpoints, limit)
        ok: bool | None = True if reuse and complete and start is None else None
        learning = False
        if ok is None and reuse and not complete and shared is not None:
            # The regions learned from the replays so far (the unlimited replay's, up to the first each one's limit
            # cut): the first this limit cuts is where its replay leaves the unlimited one; where it cuts none, its
            # replay is the unlimited one up to the frontier, and goes on from there, learning.
            start = _first_cut(learned, limit)
            if start is None and frontier is None:
                ok = True  # a replay cut no region: it was the unlimited one, and this limit cuts none either
            elif start is None:
                start, learning = frontier, True
        if ok is None and shared is not None and (start is None or start.row < shared.rows):
            common = shared.at(limit)  # the state where this sequence first differs from the one it began as
            if common is not None:
                start = common
            elif schedule is None:  # the shared rows run out of memory already
                ok = False
        if ok is None:
            made: list[_Checkpoint] | None = [] if learning else None
            ok = _served(requests, _with_limit(options, limit), start, schedule, made, (floor + 1) * granularity)
            if made is not None:
                learn(made, limit)
        tried[units] = ok
        return ok

    floor = max(0, -(-requests.peak_rounded_live_bytes() // granularity) - 1)  # known not to fit
    lo = floor
    bracketed = False
    fitting_hint: int | None = None
    hints = [] if hint is None else [hint] if isinstance(hint, int) else list(hint)
    for each in hints if budget_events == 0 else ():
        # A sequence like others (an order drawn from a recording), whose answer is most likely one of theirs, and
        # no limit below its boundary to look at: where a hint fits and the limit below it does not (or is known
        # not to: the floor), that stands; else what the replays said bounds the search.
        h = each // granularity
        if h <= lo or (fitting_hint is not None and h > fitting_hint):
            continue
        if check(h):
            below_fits = h - 1 > lo and check(h - 1)
            fitting_hint = h - 1 if below_fits else h
            if not below_fits:
                bracketed, lo = True, h - 1
                break
        else:
            lo = h
    if bracketed:
        hi = h
    elif fitting_hint is not None and not reuse:
        hi = fitting_hint
    elif reuse and limits is not None:
        hi = max(lo + 1, -(-limits.unlimited((floor + 1) * granularity) // granularity))
        tried.setdefault(hi, True)  # the unlimited replay's pool: fits (asked once, as a replay would be)
    elif reuse:  # (with shared rows: the replays are not the plain ones, limits is None)
        assert shared is not None
        checkpoints.extend(shared.checkpoints())
        unlimited = _Run(requests, _with_limit(options, MAX_LIMIT_BYTES), record=False, checkpoints=checkpoints,
                         start=shared.unlimited)
        complete = True
        if unlimited.failed_at is not None:
            raise ValueError("no limit the model holds fits these requests")
        hi = max(lo + 1, -(-unlimited.max_pool // granularity))
        tried.setdefault(hi, True)  # the unlimited replay's pool: fits (asked once, as a replay would be)
    else:
        gap = max(1, lo // 16)  # (from a lower bound at the largest limit or above: the largest, known not to fit)
        hi = min(top_units, lo + gap)
        while not check(hi):
            lo = hi
            gap *= 2
            if hi >= top_units:
                raise ValueError("no limit the model holds fits these requests")
            hi = min(top_units, hi + gap)
    if not bracketed and hints and lo < (first_hint := hints[0] // granularity) < hi:
        if check(first_hint):
            hi = first_hint
            if hi - 1 > lo and not check(hi - 1):
                lo = hi - 1
        else:
            lo = first_hint
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if check(mid):
            hi = mid
        else:
            lo = mid
    # Below the boundary: every limit (or every step-th) from the lower bound up; the first that fits wins
    # (none with a budget of 0 events: the boundary stands). The step is set by the limits there not yet tried: every
    # limit tried lies above the floor, and those below the boundary (the gallop's, bisection's) all failed.
    below = hi - floor - 1 - sum(1 for units in tried if units < hi) if budget_events > 0 else 0
    step = max(1, -(-below * n // budget_events)) if below > 1 else 1  # (one limit left to ask: no step)
    unknown = floor + 1  # the lowest limit not yet tried
    for units in range(unknown, hi if below > 0 else unknown, step):
        if check(units):  # (a limit tried is answered from tried: no replay, no second entry)
            # the first fitting limit found: the ones the step skipped below it decide the answer
            for smaller in range(unknown, units):
                if check(smaller):
                    units = smaller
                    break
            hi = units
            break
        unknown = units + 1
    skipped = step > 1 and any(units not in tried for units in range(floor + 1, hi))  # (as search_min_limit's)
    answer, monotone = _probed_above(hi, granularity, extra_probes, tried, check)
    if limits is not None:
        limits.drop_snapshots()
    # (its replays not counted)
    return LimitSearch(answer, monotone, _in_bytes(tried, granularity), step if skipped else 1, 0, 0)


class SharedStart:
    """Replays of sequences that all begin as ``source`` does (its first ``rows`` rows), sharing the allocator's
    states there instead of replaying those rows again for each (``search_min_limit(shared=...)``).

    Orders drawn from one recording keep its order up to where they first differ (``allocator/orders.py``):
    under one limit, every one of them is in the same state there, the source's, unless the source runs
    out of memory before it. The states are made on first use, one per limit, and kept.
    """

    def __init__(self, source: Requests, options: BFCOptions, rows: int) -> None:
        self.options = options
        self.rows = rows
        head = Requests(source.is_alloc[:rows], source.requested_bytes[:rows], source.frees[:rows], source.op[:rows],
                        source.time_ns[:rows], source.op_names)
        self._head = head
        self._checkpoints: list[_Checkpoint] = []
        unlimited = _Run(head, _with_limit(options, MAX_LIMIT_BYTES), record=False, checkpoints=self._checkpoints)
        self.unlimited = None if unlimited.failed_at is not None else unlimited.state(rows)
        self._states: dict[int, _Checkpoint | None] = {}

    def checkpoints(self) -> list[_Checkpoint]:
        """The source's states where a region was made before ``rows`` (each replay's list starts with them)."""
        return list(self._checkpoints)

    def at(self, limit: int) -> _Checkpoint | None:
        """The state before row ``rows`` under ``limit``; None where the source runs out of memory before it."""
        if limit not in self._states:
            options = _with_limit(self.options, limit)
            reuse = options.allow_growth and options.fragmentation_fraction == 0.0
            start = _first_cut(self._checkpoints, limit) if reuse else None
            if reuse and start is None:  # no region cut before it: the unlimited replay's state
                self._states[limit] = self.unlimited
            else:
                run = _Run(self._head, options, record=False, start=start)
                self._states[limit] = None if run.failed_at is not None else run.state(self.rows)
        return self._states[limit]


def min_limit(requests: Requests, options: BFCOptions, granularity: int = 1 << 20,
              budget_events: int = 5_000_000) -> int:
    """The smallest limit, a multiple of ``granularity`` (TF's options take MiB), under which the sequence fits.

    The answer of :func:`search_min_limit`, found from the lower bound up alone (no bisection, no
    probes above it, no unlimited replay): every limit no replay has proven yet is replayed, and its
    proof skips the limits that decide alike, up to the first that fits. Past the search's budget
    it is the search (and for a partitioned pool, whose replays prove only their own limit).
    """
    if granularity <= 0:
        raise ValueError("the granularity must be positive")
    if options.partitioned:  # its replays prove only their own limit: the search's bisection, not a scan
        return search_min_limit(requests, options, granularity, budget_events=budget_events).limit_bytes
    limits = _limits(requests, options)
    units = max(0, -(-limits.needed_bytes // granularity) - 1) + 1
    # (No unlimited replay for states to resume from, unless one was made: most of the scan's replays fail early,
    # and the one that fits would cost about as much as it does.)
    allowed, spent = max(budget_events, 4 * max(1, len(requests))), limits.replayed_events
    try:
        while units <= MAX_LIMIT_BYTES // granularity:
            if limits.replayed_events - spent > allowed:
                return search_min_limit(requests, options, granularity, budget_events=budget_events).limit_bytes
            if limits.fits(units * granularity, snapshots=True):
                return units * granularity
            units = limits.span(units * granularity)[1] // granularity + 1  # (the span holds ``units``)
    finally:
        limits.drop_snapshots()
    raise ValueError("no limit the model holds fits these requests")


def _with_limit(options: BFCOptions, limit: int) -> BFCOptions:
    return replace(options, limit_bytes=limit)


# -- what replays of one sequence have shown ---------------------------------------------------------------


class _Limits:
    """What the replays of one sequence under one set of options (all but the limit) have shown.

    ``proven``: for each replay, the limits under which the allocator decides alike, and whether it fits under them;
    ``outcomes``: each replay's outcome under its own limit. With growth and the 128 MiB rule (``reuse``), the
    unlimited replay's states where it makes a region the limits searched may cut, to resume replays from.
    """

    def __init__(self, requests: Requests, options: BFCOptions, needed_bytes: int) -> None:
        self._requests = weakref.ref(requests)  # kept by the sequence (a strong reference would keep it forever)
        self.options = _with_limit(options, 0)
        self.needed_bytes = needed_bytes  # no limit below it fits
        # With growth, the same options but garbage collection, where asked about too: what they proved, see _lookup.
        self.without_gc: _Limits | None = None
        self.with_gc: _Limits | None = None
        self.proven: list[tuple[int, int, bool]] = []
        self.stats: list[tuple[int, int, int, int | None, tuple[int, int, int, int]]] = []  # and what they show
        self.unlimited_peaks = (0, _NEVER, 0, _NEVER)
        self.outcomes: dict[int, Outcome] = {}
        self.replays = 0
        self.replayed_events = 0
        self.reuse = options.allow_growth and options.fragmentation_fraction == 0.0
        self.checkpoints: list[_Checkpoint] | None = None
        self.unlimited_outcome = Outcome(True, None, 0, 0)
        self.unlimited_splits = (-1, MAX_LIMIT_BYTES)  # its split decisions' remainders (_Run.split_remainders)
        self._kept_from = 0
        self.snapshots: list[_Snapshot] = []  # the latest tracked replay's (and those it resumed from)
        self.snapshots_from: _Checkpoint | None = None  # the checkpoint that replay started from

    @property
    def requests(self) -> Requests:
        found = self._requests()
        assert found is not None  # the sequence lives while it is asked about
        return found

    def span(self, limit: int) -> tuple[int, int, bool]:
        """The widest proven range around ``limit`` (chained across replays), assuming ``limit`` is proven."""
        found = self._lookup(limit)
        assert found is not None
        low, high, ok = found
        while True:  # ranges proven by different replays may touch: chain them
            above = self._lookup(high + MIN_ALLOCATION_BYTES)
            if above is None or above[2] != ok or above[1] <= high:
                break
            high = above[1]
        return low, high, ok

    def unproven(self, first: int, end: int, granularity: int) -> bool:
        """Whether a limit from ``first`` up to ``end`` (in units of ``granularity``; not ``end``) is neither replayed
        nor proven by a replay (a walk from proof to proof)."""
        while first < end:
            found = self._lookup(first * granularity)
            if found is None:
                return True
            first = found[1] // granularity + 1
        return False

    def _lookup(self, limit: int) -> tuple[int, int, bool] | None:
        found = self._own(limit)
        if found is None and self.without_gc is not None:
            # A replay without garbage collection that fits is the replay with it (collection runs only where an
            # extension fails, and it never failed).
            other = self.without_gc._own(limit)
            found = other if other is not None and other[2] else None
        if found is None and self.with_gc is not None:
            # A replay with garbage collection that fails: the one without is the same up to the first extension
            # that fails, and fails there.
            other = self.with_gc._own(limit)
            found = other if other is not None and not other[2] else None
        return found

    def _own(self, limit: int) -> tuple[int, int, bool] | None:
        if limit < self.needed_bytes:
            return (0, self.needed_bytes - 1, False)
        best = None
        if limit % MIN_ALLOCATION_BYTES == 0:
            for low, high, ok in self.proven:
                if low <= limit <= high and (best is None or high > best[1]):
                    best = (low, high, ok)
        if best is None and limit in self.outcomes:
            best = (limit, limit, self.outcomes[limit].fits)
        return best

    def fits(self, limit: int, snapshots: bool = False) -> bool:
        """Proven, or replayed (taking snapshots for replays under nearby limits to resume from, with ``snapshots``:
        a search asks about many)."""
        found = self._lookup(limit)
        return found[2] if found is not None else self.outcome(limit, snapshots=snapshots).fits

    def unlimited(self, keep_from: int) -> int:
        """The largest pool of the replay under the largest limit the model holds (with ``reuse``); its states where it
        makes a region that a limit of ``keep_from`` or more may cut are kept to resume from."""
        if self.checkpoints is None or keep_from < self._kept_from:
            self._from_twin(keep_from)
        if self.checkpoints is None or keep_from < self._kept_from:
            checkpoints: list[_Checkpoint] = []
            run = _Run(self.requests, _with_limit(self.options, MAX_LIMIT_BYTES), record=False, checkpoints=checkpoints,
                       keep_from=keep_from)
            self._count(run)
            if run.failed_at is not None:
                raise ValueError("no limit the model holds fits these requests")
            self.checkpoints, self._kept_from = checkpoints, keep_from
            self.unlimited_outcome = Outcome(True, None, run.peak, run.max_pool)
            self.unlimited_peaks, self.unlimited_splits = run.peaks, run.split_remainders
            self._prove(run.max_pool, MAX_LIMIT_BYTES, MAX_LIMIT_BYTES, None, run.peaks)  # every region whole: the same
        return self.unlimited_outcome.max_pool_bytes

    def cut_at(self, limit: int) -> _Checkpoint | None:
        """The unlimited replay's state where ``limit`` cuts its first region, where kept: a replay under ``limit``
        is the same up to there (None: no state kept, or the limit cuts no region)."""
        if not (self.reuse and self.checkpoints is not None and limit >= self._kept_from):
            return None
        return _first_cut(self.checkpoints, limit)

    def _unlimited_alike(self, limit: int) -> tuple[_Limits | None, int, int]:
        """Whose unlimited replay a replay under ``limit`` is up to the first region the limit cuts, if one was made,
        and the limits for which that holds beside the regions (low, high).

        With growth and the 128 MiB rule, this sequence's own. With a fraction, the split threshold is
        int(fraction * limit): the replay is the unlimited one of the same options under the 128 MiB rule
        where every chunk that rule split by its threshold alone, or kept whole, is split or kept whole
        under this one too (the threshold lies between the largest remainder kept whole and the least
        split), up to the first region the limit cuts.
        """
        options = self.options
        if self.reuse:
            if self.checkpoints is None:
                self._from_twin(limit)
            return self, 0, MAX_LIMIT_BYTES
        if not options.allow_growth or options.fragmentation_fraction <= 0.0 or options.partitioned:
            return None, 0, MAX_LIMIT_BYTES
        base = _limits(self.requests, replace(options, fragmentation_fraction=0.0))
        if base.checkpoints is None:
            base._from_twin(limit)
        if base.checkpoints is None:
            return None, 0, MAX_LIMIT_BYTES
        kept_whole, split_at = base.unlimited_splits
        fraction = options.fragmentation_fraction
        low = 0 if kept_whole < 0 else _fraction_edge(fraction, kept_whole) + 1  # int(fraction * low) > kept_whole
        high = MAX_LIMIT_BYTES if split_at >= MAX_LIMIT_BYTES else _fraction_edge(fraction, split_at)
        return (base, low, high) if low <= limit <= high else (None, 0, MAX_LIMIT_BYTES)

    def _from_twin(self, keep_from: int) -> None:
        """The unlimited replay's states from the same options but garbage collection, where it kept those a limit of
        ``keep_from`` or more may cut: unlimited, no extension fails, so it is the same replay either way."""
        twin = self.without_gc or self.with_gc
        if twin is not None and twin.checkpoints is not None and twin._kept_from <= keep_from:
            self.checkpoints, self._kept_from, self.unlimited_outcome, self.unlimited_peaks, self.unlimited_splits = (
                twin.checkpoints, twin._kept_from, twin.unlimited_outcome, twin.unlimited_peaks, twin.unlimited_splits)
            self._prove(self.unlimited_outcome.max_pool_bytes, MAX_LIMIT_BYTES, MAX_LIMIT_BYTES, None,
                        self.unlimited_peaks)

    def outcome(self, limit: int, snapshots: bool = False) -> Outcome:
        """The outcome under ``limit``: remembered, worked out from a replay whose proof covers it (the peak in use
        and the largest pool move with the limit where they were reached with the moving chunk in use, or the cut
        region made), or replayed (from a saved state where one applies)."""
        found = self.outcomes.get(limit)
        if found is not None:
            return found
        if self.options.partitioned:  # XLA's partitioned pool: its own replay, which proves only its limit
            partitioned = _PartitionedRun(self.requests, _with_limit(self.options, limit), record=False)
            self.replays += 1
            self.replayed_events += len(self.requests) if partitioned.failed_at is None else partitioned.failed_at + 1
            found = self.outcomes[limit] = Outcome(partitioned.failed_at is None, partitioned.failed_at,
                                                   partitioned.peak, partitioned.pool)
            return found
        if limit % MIN_ALLOCATION_BYTES == 0:
            for low, high, ran_at, failed_at, (peak, peak_moving, pool, pool_moving) in self.stats:
                if low <= limit <= high:
                    d = limit - ran_at
                    found = self.outcomes[limit] = Outcome(failed_at is None, failed_at, max(peak, peak_moving + d),
                                                           max(pool, pool_moving + d))
                    return found
        start, whole_from = None, 0
        unlimited, alike_from, alike_to = self._unlimited_alike(limit)
        if unlimited is not None and unlimited.checkpoints is not None and limit >= unlimited._kept_from:
            whole_from = unlimited._kept_from
            for c in unlimited.checkpoints:  # the first region this limit cuts: the same replay up to there
                if c.cut_by(limit):
                    start = c
                    break
                whole_from = max(whole_from, c.pool + c.region_bytes)
            if start is None:  # every region as unlimited: the unlimited replay itself
                self._prove(max(whole_from, alike_from), alike_to, limit, None, unlimited.unlimited_peaks)
                self.outcomes[limit] = unlimited.unlimited_outcome
                return unlimited.unlimited_outcome
        resume = None
        if self.snapshots_from is start:  # the latest snapshot whose comparisons admit this limit
            resume = next((z for z in reversed(self.snapshots) if z.low <= limit <= z.high), None)
        kept = [z for z in self.snapshots if resume is not None and z.row <= resume.row]
        run = _Run(self.requests, _with_limit(self.options, limit), record=False, start=start, track=True,
                   resume=resume, snapshots=kept if snapshots else None)
        self._count(run)
        if snapshots:
            self.snapshots, self.snapshots_from = kept, start
        low, high = run.proven_low, run.proven_high
        if start is not None:
            low = max(low, whole_from, alike_from)
            high = min(high, start.pool + start.region_bytes - 1, alike_to)
        if low <= limit <= high and low < high:
            self._prove(low, high, limit, run.failed_at, run.peaks)
        found = self.outcomes[limit] = Outcome(run.failed_at is None, run.failed_at, run.peak, run.max_pool)
        return found

    def _prove(self, low: int, high: int, ran_at: int, failed_at: int | None, peaks: tuple[int, int, int, int]) -> None:
        """Limits ``low``..``high`` decide as the replay under ``ran_at`` did (its peaks: see _Run.peaks)."""
        self.proven.append((low, high, failed_at is None))
        self.stats.append((low, high, ran_at, failed_at, peaks))

    def drop_snapshots(self) -> None:
        """A search is done: its snapshots (for replays under nearby limits) are let go, so that the sequences kept
        together (fit --vs keeps a few dozen) hold one search's at most."""
        self.snapshots, self.snapshots_from = [], None

    def _count(self, run: _Run) -> None:
        self.replays += 1
        end = len(self.requests) if run.failed_at is None else run.failed_at + 1
        self.replayed_events += end - run.first_row


_LIMITS: weakref.WeakKeyDictionary[Requests, dict[BFCOptions, _Limits]] = weakref.WeakKeyDictionary()


def _limits(requests: Requests, options: BFCOptions) -> _Limits:
    """What replays of ``requests`` under ``options`` (but the limit) have shown so far, kept while the sequence lives.

    Without growth, garbage collection changes nothing (the one region is the whole limit: when a request finds no
    chunk, either the region is in use in part, or it is wholly free and still too small), so both share one record.
    """
    if not options.partitioned:
        _classic_only(requests)
    per_options = _LIMITS.get(requests)
    if per_options is None:
        per_options = _LIMITS[requests] = {}
    key = _with_limit(options, 0)
    if not key.allow_growth and key.garbage_collection:
        key = replace(key, garbage_collection=False)
    found = per_options.get(key)
    if found is None:
        twin_key = replace(key, garbage_collection=not key.garbage_collection)
        twin = per_options.get(twin_key)
        found = per_options[key] = _Limits(requests, options, twin.needed_bytes if twin is not None else (
            next(iter(per_options.values())).needed_bytes if per_options else requests.peak_rounded_live_bytes()))
        if twin is not None and key.allow_growth:
            without, with_ = (twin, found) if key.garbage_collection else (found, twin)
            with_.without_gc, without.with_gc = without, with_
    return found


# -- the replay ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Checkpoint:
    """A replay's state at the start of a row whose request extends the pool (``region_bytes``: the region it makes
    when the limit leaves room for it). A replay under another limit is the same up to here as long as every
    earlier region was made whole. Kept as arrays (a few bytes a chunk, not Python objects)."""

    row: int
    pool: int
    region_bytes: int
    free_sizes: IntArray  # free chunks, in key order
    free_addresses: IntArray
    used_rows: IntArray  # chunks in use: the allocation's row, its address and size
    used_addresses: IntArray
    used_sizes: IntArray
    regions: tuple[tuple[int, int], ...]
    region_rows: tuple[int, ...]
    in_use: int
    peak: int
    max_pool: int
    growth: int

    def cut_by(self, limit: int) -> bool:
        """Whether ``limit`` cuts the region made here (leaves less room than it, in TF's 256-byte units)."""
        return (limit - self.pool) & ~255 < self.region_bytes


def _first_cut(checkpoints: Iterable[_Checkpoint], limit: int) -> _Checkpoint | None:
    """The first of ``checkpoints`` whose region ``limit`` cuts: a replay under it is the unlimited one up to there."""
    return next((c for c in checkpoints if c.cut_by(limit)), None)


@dataclass(frozen=True, eq=False)
class _Snapshot:
    """A tracked replay's whole state at the start of a row, under the limit it ran under (``limit``). A replay under
    any limit its comparisons so far admit (``low``..``high``) is the same up to here, but for what moves with the
    limit (the cut region, its last chunk, the pool, the growth size), which is shifted on resuming."""

    row: int
    limit: int
    low: int
    high: int
    keys: list[int]
    free_size: dict[int, int]
    free_start: dict[int, int]
    used: dict[int, int]
    addr_of: dict[int, int]
    regions: dict[int, int]
    region_rows: tuple[int, ...]
    pool: int
    in_use: int
    growth: int
    pool_slope: int
    growth_slope: int
    region_slope: dict[int, int]
    tfree: int
    tsize: int
    tend: int
    peaks: tuple[int, int, int, int]  # see _Run.peaks

    @property
    def size_bytes(self) -> int:
        """About what it holds (list and dict slots; the ints are shared with the replay)."""
        return 8 * len(self.keys) + 100 * (len(self.free_size) + len(self.used)) + 1000


@dataclass(slots=True)
class _State:
    """A replay's state where it begins (:meth:`_Run._initial_state`): the chunks, the regions, and what a tracked
    replay keeps beside them (see ``_Run._replay_python``'s locals of the same names)."""

    keys: list[int]
    free_size: dict[int, int]
    free_start: dict[int, int]
    used: dict[int, int]
    addr_of: dict[int, int]
    regions: dict[int, int]
    region_rows: list[int]
    region_slope: dict[int, int]
    pool: int
    in_use: int
    peak: int
    max_pool: int
    growth: int
    row: int
    peak_moving: int
    pool_moving: int
    track: bool
    ftrack: bool
    dlo: int
    dhi: int
    pool_slope: int
    growth_slope: int
    tfree: int
    tsize: int
    tend: int


_NEVER = -(1 << 62)  # a maximum of nothing
_SNAPSHOT_BYTES = 32 << 20  # what a sequence's snapshots may hold in all
_SNAPSHOTS = 64  # about this many in a replay, evenly spaced
_SNAPSHOT_ROWS = 8192  # and at least this many rows apart


_EVENTS: weakref.WeakKeyDictionary[Requests, IntArray] = weakref.WeakKeyDictionary()
_BLOCK = 1 << 16  # events made Python ints at a time


def _events(requests: Requests) -> IntArray:
    """The one column the loop reads, made once per sequence: an allocation's rounded bytes (> 0), ``~row`` of the
    allocation a free frees (< 0), 0 for an event that touches no chunk (a 0-byte request, a free of an unknown one)."""
    found = _EVENTS.get(requests)
    if found is None:
        asked = requests.requested_bytes.astype(np.int64)
        frees = requests.frees.astype(np.int64)
        found = np.where(requests.is_alloc, np.where(asked > 0, rounded_bytes(asked), 0),
                         np.where(frees >= 0, ~frees, 0)).astype(np.int64)
        _EVENTS[requests] = found
    return found


@dataclass(frozen=True, eq=False)
class _Period:
    """A sequence whose events repeat every ``rows`` rows (a training step's requests, step after step): where a
    replay's state at a row is the one it had ``rows`` earlier and the events from there repeat those of the period
    before, the replay repeats too (the allocator is deterministic), so it moves on by whole periods without
    replaying them (see :meth:`_Run._skip`)."""

    rows: int
    breaks: IntArray  # the rows t >= rows whose event is not the one at t - rows (a free: the same distance back)
    free_row: IntArray  # per row: the row that frees its allocation (len: never freed, or not an allocation)
    allocates: BoolArray  # per row: the event takes a chunk

    def run_end(self, row: int) -> int:
        """The first row at or after ``row`` whose event differs from the one a period before (or the end)."""
        at = int(np.searchsorted(self.breaks, row))
        return int(self.breaks[at]) if at < len(self.breaks) else len(self.free_row)


_PERIODS: weakref.WeakKeyDictionary[Requests, _Period | None] = weakref.WeakKeyDictionary()
_MIN_PERIOD_ROWS = 512  # shorter repeats are not looked for (a comparison of states costs about a period's events)
_PERIOD_WINDOW = 16  # events hashed together to find where a stretch of events repeats
_PERIOD_ANCHORS = (0.55, 0.7, 0.85, 0.97)  # where in the sequence such stretches are looked up


def _period(requests: Requests) -> _Period | None:
    """The sequence's period, if its events repeat: made once per sequence.

    A few stretches of events late in the sequence are looked up earlier in it (a hash of each window of
    events); the distances at which every one of them recurs are the candidates, and the one under which the
    most events equal the event a period before wins (of those that tie, the shortest). None where nothing repeats at
    ``_MIN_PERIOD_ROWS`` rows or more.
    """
    if requests in _PERIODS:
        return _PERIODS[requests]
    events = _events(requests)
    n = len(events)
    found: _Period | None = None
    if n >= 4 * _MIN_PERIOD_ROWS:
        rows = np.arange(n, dtype=np.int64)
        # Frees compared by how far back their allocation is (odd, so never equal to an allocation's even bytes).
        rel = np.where(events < 0, -2 * (rows - ~events) - 1, events)
        width = n - _PERIOD_WINDOW + 1
        digest = np.zeros(width, dtype=np.uint64)
        hashed = rel.astype(np.uint64)
        with np.errstate(over="ignore"):
            for k in range(_PERIOD_WINDOW):
                digest *= np.uint64(0x9E3779B97F4A7C15)
                digest += hashed[k:k + width]
        # The distances (at least _MIN_PERIOD_ROWS) at which the window at each anchor recurs earlier: those of the
        # first anchor, kept where every later anchor's window recurs at the same distance (the anchors ascend, so
        # each of the first anchor's distances reaches back from the later ones too).
        first, *later = [min(width - 1, int(n * share)) for share in _PERIOD_ANCHORS]
        common = first - np.flatnonzero(digest[:first - _MIN_PERIOD_ROWS + 1] == digest[first])
        for anchor in later:
            common = common[digest[anchor - common] == digest[anchor]]
        candidates = np.sort(common)[:8].tolist()
        best, best_same = 0, 0
        for period in candidates:
            same = int(np.count_nonzero(rel[period:] == rel[:-period]))
            if same > best_same:
                best, best_same = period, same
        breaks = np.flatnonzero(rel[best:] != rel[:-best]) + best if best and best_same >= 4 * best else None
        # A replay moves on only from a state saved where the events then repeat for three periods: none can where
        # no stretch between rows that break the repeat is that long.
        if breaks is not None and int(np.diff(breaks, prepend=0, append=n).max()) >= 3 * best:
            frees = requests.frees.astype(np.int64)
            freeing = np.flatnonzero(~requests.is_alloc & (frees >= 0) & (frees < rows))
            freed = frees[freeing]
            real = requests.is_alloc[freed]
            free_row = np.full(n, n, dtype=np.int64)
            free_row[freed[real][::-1]] = freeing[real][::-1]  # the earliest free of an allocation counts
            found = _Period(best, breaks.astype(np.int64), free_row, events > 0)
    _PERIODS[requests] = found
    return found


def _repeated(repeats: _Period, period: int, begin: int, until: int, before: dict[int, int],
              addr_of: dict[int, int]) -> tuple[int, dict[int, int]] | None:
    """A replay whose state at ``begin`` is the one it had ``period`` rows earlier (every chunk where it was; a
    multiple of the events' period: chunks kept from one step to the next may take turns between two places), with
    the events repeating up to ``until``: the row it may move on to, and the allocations live there (row: address).

    ``before`` and ``addr_of`` are the allocations live a period earlier and now. The replay repeats for as long
    as every free in it frees a chunk where the period before freed one: an allocation live now that a free in
    the window frees must have been live a period earlier, a period's rows back, at the same address (and
    conversely); one that is not must outlive the window, which ends before its free. Then the allocations
    live at the end are those live now that outlive it, and those made in it that do, each where its
    counterpart of the period before ``begin`` is. None where the window holds no whole period.
    """
    free_row = repeats.free_row
    end = until
    for row, addr in addr_of.items():
        if before.get(row - period) != addr:
            freed = int(free_row[row])
            if freed < end:
                end = begin + (freed - begin) // period * period
    for row, addr in before.items():
        if addr_of.get(row + period) != addr:
            freed = int(free_row[row])
            if freed + period < end:
                end = begin + (freed + period - begin) // period * period
    if end <= begin:
        return None
    live = {row: addr for row, addr in addr_of.items() if free_row[row] >= end}
    made = np.flatnonzero(repeats.allocates[begin:end] & (free_row[begin:end] >= end)) + begin
    for row in made.tolist():
        where = addr_of.get(row - ((row - begin) // period + 1) * period)
        if where is None:  # (cannot happen where the events repeat: its counterpart is live now)
            return None
        live[row] = where
    return end, live


def _keep(value: int, slope: int, low: int, high: int) -> tuple[int, int]:
    """Narrow ``[low, high]`` (offsets d of the limit) to where ``value + slope * d >= 0`` is what it is at d = 0."""
    if slope > 0:
        edge = -(value // slope)  # the least d where it holds
        return (max(low, edge), high) if value >= 0 else (low, min(high, edge - 1))
    if slope < 0:
        edge = value // -slope  # the largest d where it holds
        return (low, min(high, edge)) if value >= 0 else (max(low, edge + 1), high)
    return low, high


def _fraction_edge(fraction: float, remainder: int) -> int:
    """The largest limit L with ``int(fraction * L) <= remainder`` (TF's split threshold at most the remainder)."""
    limit = int((remainder + 1) / fraction)
    while limit > 0 and int(fraction * limit) > remainder:
        limit -= 1
    while int(fraction * (limit + 1)) <= remainder:
        limit += 1
    return limit


# The compiled loop's start (numba's import and its machine code read from the cache, about 0.45 s once a process)
# costs about what the Python loop takes for this many events: a process replays in Python until its replays have
# taken that long, then in the compiled loop (a command with little to replay never pays the start).
_COMPILED_AFTER_ROWS = 1_000_000
_COMPILED_RANGE: weakref.WeakKeyDictionary[Requests, bool] = weakref.WeakKeyDictionary()
_python_rows = [0]  # rows this process's Python loop replayed (periods skipped not counted)
_many_replays = [0]  # within many_replays(): the compiled loop serves from the first replay


@contextlib.contextmanager
def many_replays() -> Iterator[None]:
    """Within: a caller about to make many replays (``fit --vs``'s tables, hundreds) has the compiled loop serve them
    from the first, where it can: its start pays for itself there, and the million events replayed in Python first
    would only add to it."""
    _many_replays[0] += 1
    try:
        yield
    finally:
        _many_replays[0] -= 1


def replay_setting_problem() -> str | None:
    """What is wrong with ``MEMTRACE_REPLAY`` (which loop replays: ``python``, ``compiled``, unset for the compiled
    one where numba is installed and the replays pay for it), if anything: a value that names no loop, or the compiled
    loop asked for where numba is not installed or cannot compile it."""
    choice = os.environ.get("MEMTRACE_REPLAY", "")
    if choice not in ("", "python", "compiled"):
        return (f"MEMTRACE_REPLAY={choice!r} names no replay: use python, compiled, or leave it unset (the compiled "
                "replay where numba is installed)")
    if choice == "compiled":
        from memtrace.allocator import bfc_compiled

        if not bfc_compiled.available():
            return ("MEMTRACE_REPLAY=compiled, but numba is not installed or cannot compile the replay "
                    "(pip install 'memtrace[fast]', or leave MEMTRACE_REPLAY unset)")
    return None


def _compiled_serves(run: _Run) -> bool:
    """Whether the compiled loop (``bfc_compiled``, numba) replays ``run``: where numba is installed, unless
    ``MEMTRACE_REPLAY=python``; a replay in row order (or in order until TF's retry takes over), whose requests all
    fit the model's largest limit; once the process's Python replays have replayed enough events to pay for its
    start, where this replay alone would, or within :func:`many_replays` (``MEMTRACE_REPLAY=compiled``: from the
    first, and numba must be there)."""
    choice = os.environ.get("MEMTRACE_REPLAY", "")
    if choice == "python" or run._schedule is not None:
        return False
    if choice != "compiled" and _python_rows[0] < _COMPILED_AFTER_ROWS and not _many_replays[0] and not _long(run):
        return False
    from memtrace.allocator import bfc_compiled

    if not bfc_compiled.available():
        if choice == "compiled":
            raise RuntimeError("MEMTRACE_REPLAY=compiled, but numba is not installed (pip install memtrace[fast])")
        return False
    return _in_compiled_range(run.requests)


def _long(run: _Run) -> bool:
    """Whether ``run`` alone would replay enough events in Python to pay for the compiled loop's start (where the
    events repeat, the Python loop moves on by whole periods: a replay that does not record replays few of them)."""
    return len(run.requests) - run.first_row >= _COMPILED_AFTER_ROWS and (run.record or _period(run.requests) is None)


def _in_compiled_range(requests: Requests) -> bool:
    """Whether the compiled loop holds every event of ``requests`` (its integers are 64 bits, Python's are not): no
    request above the largest limit (the growth size doubles up to it), no free of a row outside the sequence."""
    found = _COMPILED_RANGE.get(requests)
    if found is None:
        events = _events(requests)
        found = _COMPILED_RANGE[requests] = not len(events) or (int(events.max()) <= MAX_LIMIT_BYTES
                                                               and int(events.min()) >= -len(events))
    return found


def _free_columns(free_size: dict[int, int]) -> tuple[IntArray, IntArray]:
    """Free chunks (address -> size) as the compiled loop loads them: sizes and addresses, in the bins' order."""
    count = len(free_size)
    addresses = np.fromiter(free_size.keys(), dtype=np.int64, count=count)
    sizes = np.fromiter(free_size.values(), dtype=np.int64, count=count)
    order = np.lexsort((addresses, sizes))
    return sizes[order], addresses[order]


def _used_columns(addr_of: dict[int, int], used: dict[int, int]) -> tuple[IntArray, IntArray, IntArray]:
    """The allocations in use (row -> address; address -> size) as the compiled loop loads them: rows, addresses,
    sizes, in the order of ``addr_of``."""
    count = len(addr_of)
    rows = np.fromiter(addr_of.keys(), dtype=np.int64, count=count)
    addresses = np.fromiter(addr_of.values(), dtype=np.int64, count=count)
    used_addresses = np.fromiter(used.keys(), dtype=np.int64, count=len(used))
    used_sizes = np.fromiter(used.values(), dtype=np.int64, count=len(used))
    by_address = np.argsort(used_addresses)
    sizes = used_sizes[by_address][np.searchsorted(used_addresses[by_address], addresses)]
    return rows, addresses, sizes


class _Run:
    """One replay. The state lives in locals of :meth:`_replay` for speed; what is left is kept here.

    With ``track``, the replay also keeps the range of limits under which every decision it makes would be the same
    (``proven_low``..``proven_high``; see :func:`proven_limits`). With ``retry``, the rows are served in order until
    a request fails, and from there as the schedule ``retry(row)`` serves them (a replay served by that schedule from
    the start, which serves the rows in order until a request fails, made without its cost per row until then).
    """

    def __init__(self, requests: Requests, options: BFCOptions, record: bool, start: _Checkpoint | None = None,
                 checkpoints: list[_Checkpoint] | None = None, keep_from: int = 0, track: bool = False,
                 resume: _Snapshot | None = None, snapshots: list[_Snapshot] | None = None,
                 schedule: ScheduleFactory | None = None, retry: ScheduleFactory | None = None) -> None:
        if (schedule is not None or retry is not None) and record:
            raise ValueError("a replay served by a schedule records nothing (its events are not in row order)")
        if retry is not None and (track or schedule is not None):
            raise ValueError("a replay that may switch to a schedule tracks nothing, and starts without one")
        self._schedule = schedule
        self._retry = retry
        self.requests = requests
        self.options = options
        self.record = record
        self.failed_at: int | None = None
        self._start = start
        self._checkpoints = checkpoints
        self._keep_from = keep_from
        self._track = track
        self._resume = resume
        self.snapshots = snapshots
        self.proven_low = self.proven_high = options.limit_bytes
        self.first_row = resume.row if resume is not None else start.row if start is not None else 0
        self._replay()

    def _slot(self, region: int) -> int:
        """Where region ``region`` lies among the virtual slots: the known order first, then the direction."""
        return self.options.address_slot(region)

    def _vbase(self, region: int) -> int:
        return self._slot(region) << _REGION_SHIFT

    def _regions_by_slot(self) -> dict[int, int]:
        return {self._slot(r): r for r in range(len(self.region_rows))}

    def _initial_state(self, from_arrays: bool = False) -> _State:
        """The allocator's state where this replay begins: new, a checkpoint's (``start``), or a snapshot's under
        another limit (``resume``), shifted by what moves with the limit. With ``from_arrays``, a checkpoint's chunks
        are left in its arrays (the state's are empty: the compiled loop reads the arrays)."""
        opts = self.options
        limit = opts.limit_bytes
        fraction = opts.fragmentation_fraction
        shift = _KEY_SHIFT
        growth_size = opts.initial_region_bytes
        keys: list[int] = []  # free chunks, size << 80 | vaddr, sorted: the bins' order
        free_size: dict[int, int] = {}  # vaddr -> size of a free chunk
        free_start: dict[int, int] = {}  # end vaddr -> start vaddr of a free chunk
        used: dict[int, int] = {}  # vaddr -> size of a chunk in use
        addr_of: dict[int, int] = {}  # allocation row -> vaddr, while in use
        regions: dict[int, int] = {}  # region -> size, the live ones
        region_rows: list[int] = []
        pool = in_use = peak = max_pool = 0
        # Where they move with the limit (while the moving chunk is in use; once the cut region is made), the peak in
        # use and the largest pool under this limit, kept apart: under limit + d they are d larger.
        peak_moving = pool_moving = _NEVER
        first_row = 0
        # Tracking the limits that decide alike: limit + d for dlo <= d <= dhi. What moves with d: the pool and the
        # growth size (by pool_slope, growth_slope per byte of limit) and the region the limit cuts (region_slope),
        # whose last chunk (from tail_start to tail_end, tail_size bytes under this limit) moves with it: free when
        # tfree (its start) >= 0, else in use.
        track = self._track and limit % MIN_ALLOCATION_BYTES == 0 and self._schedule is None
        dlo, dhi = -limit, MAX_LIMIT_BYTES - limit
        pool_slope = growth_slope = 0
        region_slope: dict[int, int] = {}
        tfree = tend = -1
        tsize = 0
        ftrack = track and fraction > 0.0  # the split threshold moves with the limit too
        if track:
            if opts.allow_growth:
                dlo, dhi = _keep(INITIAL_GROWTH_REGION_BYTES - limit, -1, dlo, dhi)  # the first size: min(limit, 2 MiB)
                growth_slope = 1 if limit <= INITIAL_GROWTH_REGION_BYTES else 0
            else:
                growth_slope = 1  # the whole limit
        if self._start is not None:  # resume a replay that was the same up to this row
            c = self._start
            if not from_arrays:
                sizes, addrs = c.free_sizes.tolist(), c.free_addresses.tolist()
                keys = [(s << shift) | a for s, a in zip(sizes, addrs)]
                free_size = dict(zip(addrs, sizes))
                free_start = {a + s: a for a, s in zip(addrs, sizes)}
                used_addrs = c.used_addresses.tolist()
                used = dict(zip(used_addrs, c.used_sizes.tolist()))
                addr_of = dict(zip(c.used_rows.tolist(), used_addrs))
            regions, region_rows = dict(c.regions), list(c.region_rows)
            pool, in_use, peak, max_pool, growth_size, first_row = c.pool, c.in_use, c.peak, c.max_pool, c.growth, c.row
            growth_slope = 0
            if track:
                dlo, dhi = -limit, MAX_LIMIT_BYTES - limit
        if self._resume is not None:  # a tracked replay under another limit was the same up to this row
            z = self._resume
            keys, free_size, free_start = list(z.keys), dict(z.free_size), dict(z.free_start)
            used, addr_of, regions, region_rows = dict(z.used), dict(z.addr_of), dict(z.regions), list(z.region_rows)
            pool, in_use, growth_size, first_row = z.pool, z.in_use, z.growth, z.row
            pool_slope, growth_slope, region_slope = z.pool_slope, z.growth_slope, dict(z.region_slope)
            tfree, tsize, tend = z.tfree, z.tsize, z.tend
            dlo, dhi = z.low - limit, z.high - limit
            d = limit - z.limit
            pool += d * pool_slope
            growth_size += d * growth_slope
            if d and tend >= 0:  # the cut region and its last chunk are d bytes larger here
                for r, slope in region_slope.items():
                    regions[r] += d * slope
                if tfree >= 0:
                    del keys[bisect_left(keys, (tsize << shift) | tfree)]
                    tsize += d
                    insort(keys, (tsize << shift) | tfree)
                    free_size[tfree] = tsize
                    free_start[tend + d] = free_start.pop(tend)
                else:
                    moving = next(a for a, size in used.items() if a + size == tend)
                    used[moving] += d
                    in_use += d
                tend += d
            peak, peak_moving, max_pool, pool_moving = z.peaks
            peak_moving += d
            pool_moving += d
        return _State(keys, free_size, free_start, used, addr_of, regions, region_rows, region_slope, pool, in_use,
                      peak, max_pool, growth_size, first_row, peak_moving, pool_moving, track, ftrack, dlo, dhi,
                      pool_slope, growth_slope, tfree, tsize, tend)

    def _replay(self) -> None:
        if _compiled_serves(self):
            self._replay_compiled()
        else:
            self._replay_python()

    def _replay_python(self) -> None:  # one loop, kept in one frame for speed
        opts = self.options
        limit = opts.limit_bytes
        max_frag = opts.max_internal_fragmentation_bytes
        fraction = opts.fragmentation_fraction
        gc = opts.garbage_collection
        events = _events(self.requests)
        n = len(events)
        shift, amask = _KEY_SHIFT, _ADDRESS_MASK
        made_regions: list[tuple[int, int]] = []  # (region, size) of every region made, and (region, row) of each
        given_back: list[tuple[int, int]] = []  # given back: kept by a recording replay (never one that resumes)
        # The remainders (chunk - request) of the chunks under twice the request: the largest kept whole, the least
        # split (by the threshold max_frag): any threshold between them makes every split decision the same.
        kept_whole, split_at = -1, MAX_LIMIT_BYTES
        checkpoints = self._checkpoints
        keep_from = self._keep_from
        z = self._initial_state()  # (not the name of any later local)
        keys, free_size, free_start, used, addr_of = z.keys, z.free_size, z.free_start, z.used, z.addr_of
        regions, region_rows, region_slope = z.regions, z.region_rows, z.region_slope
        pool, in_use, peak, max_pool, growth_size, first_row = z.pool, z.in_use, z.peak, z.max_pool, z.growth, z.row
        peak_moving, pool_moving = z.peak_moving, z.pool_moving
        track, ftrack, dlo, dhi = z.track, z.ftrack, z.dlo, z.dhi
        pool_slope, growth_slope, tfree, tsize, tend = z.pool_slope, z.growth_slope, z.tfree, z.tsize, z.tend
        snapshots = self.snapshots if track else None
        every = max(_SNAPSHOT_ROWS, n // _SNAPSHOTS) if snapshots is not None else _BLOCK
        record = self.record
        rec: list[tuple[int, int, int, int, int]] = []  # per event: vaddr, chunk, in use, pool, largest free
        tables: list[IntArray] = []  # rec, a block at a time, as arrays of 5 rows (each column of rec a row)
        add_rec = rec.append
        vbase = self._vbase
        key_pop, free_pop, start_pop, used_pop, addr_pop = keys.pop, free_size.pop, free_start.pop, used.pop, addr_of.pop

        schedule = None if self._schedule is None else _ScheduleRows(self._schedule(first_row))
        # Where the events repeat every period (steps of training), a state that repeats one period later repeats
        # for as long as the events do: the replay moves on by whole periods (not where it records every event).
        repeats = None if schedule is not None or record else _period(self.requests)
        period = repeats.rows if repeats is not None else 0
        saved: list[tuple[Any, ...]] = []  # the states a period and two earlier, to compare with
        cursor = [first_row]  # where the next block begins
        replayed = 0  # rows replayed (not skipped by periods), for _compiled_serves

        def in_order() -> Iterator[int]:
            while cursor[0] < n:
                yield cursor[0]

        listed = events.tolist() if schedule is not None else []
        retry = self._retry
        last_snapshot = first_row
        for begin in in_order() if schedule is None else iter([first_row]):
            end = min(n, begin - (begin - first_row) % every + every)  # a block, up to the next multiple of every
            if period:
                end = min(end, (begin // period + 1) * period)  # ... or of the period
            cursor[0] = end if schedule is None else n  # (a schedule serves the rest in one block)
            if period and begin % period == 0 and repeats is not None:
                run_end = repeats.run_end(begin)
                scalars = (pool, in_use, growth_size, len(region_rows), tfree, tsize, tend, pool_slope, growth_slope,
                           track, ftrack)
                for state in saved:  # the state a period earlier, then two (chunks may take turns between steps)
                    span = begin - state[0]
                    if run_end >= begin + span and (state[1] == keys and state[2] == used and state[3] == regions
                                                    and state[4] == region_slope and state[5] == scalars):
                        moved = _repeated(repeats, span, begin, run_end - (run_end - begin) % span, state[6], addr_of)
                        if moved is not None:
                            break
                else:
                    moved = None
                if moved is not None:
                    cursor[0] = moved[0]
                    addr_of.clear()
                    addr_of.update(moved[1])
                    saved = []
                    continue
                saved = [state for state in saved[:1] if state[0] == begin - period]
                if run_end >= begin + 3 * period and len(keys) + len(used) <= period:
                    saved.insert(0, (begin, list(keys), dict(used), dict(regions), dict(region_slope), scalars,
                                     dict(addr_of)))
            block_stop = end if schedule is None else n
            replayed += block_stop - begin
            block = (enumerate(events[begin:end].tolist(), begin) if schedule is None
                     else ((row, listed[row]) for row in schedule))
            # A snapshot copies the state: taken where that costs little beside the events replayed since the last.
            if (snapshots is not None and begin > first_row and track and (begin - first_row) % every == 0
                    and len(keys) + len(used) <= 4 * (begin - last_snapshot)):
                last_snapshot = begin
                snapshots.append(_Snapshot(begin, limit, limit + dlo, limit + dhi, list(keys), dict(free_size),
                                           dict(free_start), dict(used), dict(addr_of), dict(regions),
                                           tuple(region_rows), pool, in_use, growth_size, pool_slope, growth_slope,
                                           dict(region_slope), tfree, tsize, tend,
                                           (peak, peak_moving, max_pool, pool_moving)))
                if sum(z.size_bytes for z in snapshots) > _SNAPSHOT_BYTES:
                    del snapshots[::2]  # thin them out, evenly
            for row, x in block:
                if x > 0:  # an allocation of x bytes (rounded)
                    i = bisect_left(keys, x << shift)
                    if i == len(keys):
                        if tfree >= 0 and x - 1 - tsize < dhi:  # the moving chunk is too small: a limit larger may fit
                            dhi = x - 1 - tsize
                        # Extend: a new region, if the limit leaves room.
                        if checkpoints is not None:  # the state before this row, and the region it makes unlimited
                            grown = growth_size
                            while x > grown:
                                grown *= 2
                            if pool + grown > keep_from:
                                checkpoints.append(self._checkpoint(row, pool, grown, keys, used, addr_of, regions,
                                                                    region_rows, in_use, peak, max_pool, growth_size))
                        made = False
                        for attempt in (0, 1):
                            available = (limit - pool) & ~255
                            if track:
                                dlo, dhi = _keep(available - x, 1 - pool_slope, dlo, dhi)
                            if x <= available:
                                grew = False
                                while True:
                                    if track:
                                        dlo, dhi = _keep(growth_size - x, growth_slope, dlo, dhi)
                                    if x <= growth_size:
                                        break
                                    growth_size *= 2
                                    growth_slope *= 2
                                    grew = True
                                slope = 0
                                if track:
                                    dlo, dhi = _keep(growth_size - available, growth_slope - 1 + pool_slope, dlo, dhi)
                                    slope = 1 - pool_slope if available <= growth_size else growth_slope
                                size = min(available, growth_size)
                                if not grew:
                                    growth_size *= 2
                                    growth_slope *= 2
                                r = len(region_rows)
                                if r >= _REGION_SLOTS:
                                    raise ValueError(_TOO_MANY_REGIONS)
                                region_rows.append(row)
                                regions[r] = size
                                if record:
                                    made_regions.append((r, size))
                                base = vbase(r)
                                pool += size
                                if pool_slope or slope:
                                    pool_moving = max(pool_moving, pool)
                                else:
                                    max_pool = max(max_pool, pool)
                                free_size[base] = size
                                free_start[base + size] = base
                                insort(keys, (size << shift) | base)
                                if slope:
                                    if slope != 1 or tend >= 0:  # beyond what is tracked: prove this limit only
                                        track = ftrack = False
                                        dlo = dhi = 0
                                        tfree = tend = -1
                                    else:
                                        region_slope[r] = slope
                                        pool_slope += slope
                                        tfree, tsize, tend = base, size, base + size
                                made = True
                                break
                            if attempt or not gc:
                                break
                            # Garbage collection: free every wholly free region, if that could make room.
                            empty = [(r, s) for r, s in regions.items() if free_size.get(vbase(r)) == s]
                            freed_total = sum(s for _, s in empty)
                            if track:
                                freed_slope = sum(region_slope.get(r, 0) for r, _ in empty)
                                dlo, dhi = _keep(limit - pool + freed_total - x, 1 - pool_slope + freed_slope, dlo, dhi)
                            if not freed_total or x > limit - pool + freed_total:
                                break
                            for r, s in empty:
                                base = vbase(r)
                                key_pop(bisect_left(keys, (s << shift) | base))
                                del free_size[base]
                                del free_start[base + s]
                                del regions[r]
                                pool -= s
                                if record:
                                    given_back.append((r, row))
                                if r in region_slope:
                                    pool_slope -= region_slope.pop(r)
                                    tfree = tend = -1
                        if not made:
                            if schedule is not None and schedule.blocked(row):
                                continue  # the request waits for memory to come back; the schedule serves it again
                            if retry is not None:  # from here the retry serves the rows: this one first
                                schedule, retry, cursor[0] = _ScheduleRows(retry(row)), None, row
                                listed, period, repeats, checkpoints = events.tolist(), 0, None, None
                                break
                            self.failed_at = row
                            replayed -= block_stop - row - 1  # (the rest of the block was not replayed)
                            break
                        i = bisect_left(keys, x << shift)
                    key = keys[i]
                    size = key >> shift
                    addr = key & amask
                    if tfree >= 0:  # the moving chunk is free: it must fit, or not, and sort, as it does here
                        if addr == tfree:  # it is chosen: it fits, and sorts before the next chunk
                            if x - tsize > dlo:  # noqa: PLR1730
                                dlo = x - tsize
                            if i + 1 < len(keys):
                                after = keys[i + 1]
                                bound = (after >> shift) - tsize - (0 if tfree < after & amask else 1)
                                if bound < dhi:  # noqa: PLR1730
                                    dhi = bound
                            if ftrack:  # split at twice the request whatever the threshold; else find where
                                if size >= 2 * x:
                                    if 2 * x - tsize > dlo:  # noqa: PLR1730
                                        dlo = 2 * x - tsize
                                else:
                                    dlo, dhi = self._tail_split_bound(x, tsize, dlo, dhi)
                            else:  # split when it is at least the lesser of twice the request and request + max_frag
                                cut = min(2 * x, x + max_frag)
                                if size >= cut:
                                    if cut - tsize > dlo:  # noqa: PLR1730
                                        dlo = cut - tsize
                                elif cut - 1 - tsize < dhi:
                                    dhi = cut - 1 - tsize
                        elif tsize < x:  # too small to be chosen
                            if x - 1 - tsize < dhi:  # noqa: PLR1730
                                dhi = x - 1 - tsize
                        else:  # it fits but sorts after the chunk chosen
                            bound = size - tsize + (0 if tfree > addr else 1)
                            if bound > dlo:  # noqa: PLR1730
                                dlo = bound
                    if ftrack and size < 2 * x and addr != tfree:  # the split threshold int(fraction * limit)
                        if size - x >= max_frag:  # split: the threshold must stay at most the remainder
                            if int(fraction * (limit + dhi)) > size - x:
                                dhi = _fraction_edge(fraction, size - x) - limit
                        elif int(fraction * (limit + dlo)) <= size - x:  # not split: it must stay above it
                            dlo = _fraction_edge(fraction, size - x) + 1 - limit
                    del free_size[addr]
                    end = addr + size
                    if size >= 2 * x or size - x >= max_frag:
                        if size < 2 * x and size - x < split_at:  # split by the threshold alone
                            split_at = size - x
                        rest = addr + x
                        free_size[rest] = size - x
                        free_start[end] = rest
                        key = ((size - x) << shift) | rest  # sorts at or before the chunk it is cut from
                        j = bisect_left(keys, key, 0, i)
                        if j == i:
                            keys[i] = key
                        else:
                            del keys[i]
                            keys.insert(j, key)
                        if addr == tfree:
                            tfree, tsize = rest, size - x
                        size = x
                    else:
                        if size - x > kept_whole:  # noqa: PLR1730 - a call to max() costs more in this loop
                            kept_whole = size - x
                        del keys[i]
                        del free_start[end]
                        if addr == tfree:
                            tfree = -1
                    used[addr] = size
                    addr_of[row] = addr
                    in_use += size
                    if tend < 0 or tfree >= 0:  # in use does not move with the limit (the chunk that does is free)
                        if in_use > peak:  # noqa: PLR1730 - a call to max() costs more in this loop
                            peak = in_use
                    elif in_use > peak_moving:
                        peak_moving = in_use
                    if record:
                        add_rec((addr, size, in_use, pool, keys[-1] >> shift if keys else 0))
                elif x < 0:  # a free of the allocation at row ~x
                    addr = addr_pop(~x, -1)
                    if addr < 0:  # a 0-byte allocation's
                        if record:
                            add_rec((-1, 0, in_use, pool, keys[-1] >> shift if keys else 0))
                        continue
                    size = used_pop(addr)
                    in_use -= size
                    start, end = addr, addr + size
                    after_size = free_pop(end, 0)
                    k = -1  # where the key of a neighbour merged with sits: the merged chunk sorts after it
                    if after_size:
                        k = bisect_left(keys, (after_size << shift) | end)
                        del free_start[end + after_size]
                        end += after_size
                    before = start_pop(addr, -1)
                    if before >= 0:
                        if k >= 0:
                            del keys[k]
                        k = bisect_left(keys, (free_pop(before) << shift) | before)
                        start = before
                    free_size[start] = end - start
                    free_start[end] = start
                    key = ((end - start) << shift) | start
                    if k < 0:
                        insort(keys, key)
                    else:
                        j = bisect_left(keys, key, k + 1)
                        if j == k + 1:
                            keys[k] = key
                        else:
                            del keys[k]
                            keys.insert(j - 1, key)
                    if end == tend:  # the chunk that moves with the limit is free again
                        tfree, tsize = start, end - start
                    if record:
                        add_rec((addr, size, in_use, pool, keys[-1] >> shift if keys else 0))
                elif record:  # touches no chunk: a 0-byte request, a free of an allocation not in the sequence
                    add_rec((-1, 0, in_use, pool, keys[-1] >> shift if keys else 0))
            else:
                if record and rec:
                    tables.append(np.array(rec, dtype=np.int64).T.copy())
                    rec.clear()
                continue
            if self.failed_at is None and schedule is not None and cursor[0] < n:
                continue  # (switched to the retry's schedule)
            break
        if record and rec:
            tables.append(np.array(rec, dtype=np.int64).T.copy())

        _python_rows[0] += replayed
        self.peaks = (peak, peak_moving, max_pool, pool_moving)
        self.split_remainders = (kept_whole, split_at)
        self.peak = max(peak, peak_moving)
        self.max_pool = max(max_pool, pool_moving)
        self.region_rows = tuple(region_rows)
        self.regions = dict(regions)
        self.made_regions = tuple(made_regions)
        self.given_back = tuple(given_back)
        self.used = used
        self.free_size = free_size
        self.addr_of = addr_of
        self.tables = tables
        self._end = (keys, pool, in_use, growth_size)
        if track:
            self.proven_low, self.proven_high = limit + dlo, limit + dhi

    def _replay_compiled(self) -> None:
        """The replay with its loop compiled (``bfc_compiled``): from the same state as :meth:`_replay_python`,
        keeping the same snapshots and checkpoints; where TF's retry takes over, its schedule hands out the rows a run
        at a time (:meth:`_serve_retry`)."""
        from memtrace.allocator import bfc_compiled as compiled

        opts = self.options
        events = _events(self.requests)
        n = len(events)
        z = self._initial_state(from_arrays=True)
        first_row = z.row
        machine = compiled.Machine(events, opts.limit_bytes, opts.max_internal_fragmentation_bytes,
                                   opts.fragmentation_fraction, opts.garbage_collection, self.record,
                                   self._checkpoints is not None, self._keep_from, opts.region_order,
                                   opts.regions_descending, _REGION_SHIFT, _REGION_SLOTS, first_row)
        c = self._start
        if c is not None and self._resume is None:
            free, used = (c.free_sizes, c.free_addresses), (c.used_rows, c.used_addresses, c.used_sizes)
        else:
            free = _free_columns(z.free_size)
            used = _used_columns(z.addr_of, z.used)
        machine.load(*free, *used, z.regions, z.region_rows, z.region_slope,
                     {"POOL": z.pool, "IN_USE": z.in_use, "PEAK": z.peak, "MAX_POOL": z.max_pool, "GROWTH": z.growth,
                      "KEPT_WHOLE": -1, "SPLIT_AT": MAX_LIMIT_BYTES, "PEAK_MOVING": z.peak_moving,
                      "POOL_MOVING": z.pool_moving, "DLO": z.dlo, "DHI": z.dhi, "POOL_SLOPE": z.pool_slope,
                      "GROWTH_SLOPE": z.growth_slope, "TFREE": z.tfree, "TSIZE": z.tsize, "TEND": z.tend,
                      "TRACK": z.track, "FTRACK": z.ftrack})
        regions_at_start = len(z.region_rows)
        snapshots = self.snapshots if z.track else None
        every = max(_SNAPSHOT_ROWS, n // _SNAPSHOTS) if snapshots is not None else _BLOCK
        # Where the events repeat, the replay moves on by whole periods as _replay_python's does (the same rows).
        repeats = None if self.record else _period(self.requests)
        period = repeats.rows if repeats is not None else 0
        saved: list[tuple[int, tuple[Any, ...], dict[int, int]]] = []  # a period and two earlier: row, state, live
        row = last_snapshot = first_row
        block_begins = True  # (False where the loop stopped within a block, to keep a checkpoint)
        while row < n:
            if block_begins and period and row % period == 0 and repeats is not None:
                run_end = repeats.run_end(row)
                now = None  # the state here, read from the machine where it is compared or kept
                moved = None
                for at, state, live in saved:  # the state a period earlier, then two
                    span = row - at
                    if run_end >= row + span:
                        now = machine.period_state() if now is None else now
                        if state == now:
                            moved = _repeated(repeats, span, row, run_end - (run_end - row) % span, live,
                                              machine.live())
                            if moved is not None:
                                break
                if moved is not None:
                    row = moved[0]
                    machine.relabel(moved[1])
                    saved = []
                    continue
                saved = [kept for kept in saved[:1] if kept[0] == row - period]
                if run_end >= row + 3 * period and machine.chunks <= period:
                    saved.insert(0, (row, machine.period_state() if now is None else now, machine.live()))
            # A snapshot where _replay_python's blocks begin (the same rows, the same rule).
            if (block_begins and snapshots is not None and row > first_row and (row - first_row) % every == 0
                    and machine.scalar("TRACK") and machine.chunks <= 4 * (row - last_snapshot)):
                last_snapshot = row
                snapshots.append(self._snapshot(machine, row))
                if sum(snapshot.size_bytes for snapshot in snapshots) > _SNAPSHOT_BYTES:
                    del snapshots[::2]  # thin them out, evenly
            end = min(n, row - (row - first_row) % every + every)
            if period:
                end = min(end, (row // period + 1) * period)
            status = machine.run(row, end)
            row = machine.row
            block_begins = status == compiled.DONE
            if status == compiled.CHECKPOINT:
                assert self._checkpoints is not None
                grown = machine.scalar("GROWTH")
                while events[row] > grown:
                    grown *= 2
                self._checkpoints.append(self._checkpoint_of(machine, row, grown))
                machine.skip_checkpoint(row)
            elif status == compiled.TOO_MANY_REGIONS:
                raise ValueError(_TOO_MANY_REGIONS)
            elif status == compiled.FAILED:
                if self._retry is not None:  # TF's retry serves the rest, a run of rows at a time, from this row
                    self.failed_at = self._serve_retry(machine, self._retry(row))
                else:
                    self.failed_at = row
                break
        peak, peak_moving = machine.scalar("PEAK"), machine.scalar("PEAK_MOVING")
        max_pool, pool_moving = machine.scalar("MAX_POOL"), machine.scalar("POOL_MOVING")
        self.peaks = (peak, peak_moving, max_pool, pool_moving)
        self.split_remainders = (machine.scalar("KEPT_WHOLE"), machine.scalar("SPLIT_AT"))
        self.peak = max(peak, peak_moving)
        self.max_pool = max(max_pool, pool_moving)
        self.region_rows = tuple(machine.region_rows())
        self.regions = machine.regions()
        self.made_regions = tuple(machine.made_since(regions_at_start)) if self.record else ()
        self.given_back = tuple(machine.given_back())
        self._final = (machine.free_chunks(), machine.used_chunks(by_row=False), machine.scalar("POOL"), machine.scalar("IN_USE"),
                       machine.scalar("GROWTH"))
        self.tables = [machine.recorded_table()] if self.record else []
        if machine.scalar("TRACK"):
            limit = opts.limit_bytes
            self.proven_low, self.proven_high = limit + machine.scalar("DLO"), limit + machine.scalar("DHI")

    @staticmethod
    def _serve_retry(machine: Any, schedule: Schedule) -> int | None:
        """Serve the rows as ``schedule`` hands them out (its first run from the row that failed): the row where the
        replay ends out of memory, or None."""
        from memtrace.allocator import bfc_compiled as compiled

        machine.keep_no_checkpoints()  # (the retry's replay keeps no states, as the Python loop's does not)
        for begin, end in schedule.runs():
            status = machine.run(begin, end)
            if status == compiled.TOO_MANY_REGIONS:
                raise ValueError(_TOO_MANY_REGIONS)
            if status == compiled.FAILED and not schedule.blocked(machine.row):
                return machine.row
        return None

    # The state where a compiled replay ended, as _replay_python leaves it: made when asked (a search asks only
    # whether a replay fits). The Python loop sets them itself.
    @functools.cached_property
    def _used_by_row(self) -> tuple[IntArray, IntArray, IntArray]:
        rows, addresses, sizes = self._final[1]
        by_row = np.argsort(rows, kind="stable")
        return rows[by_row], addresses[by_row], sizes[by_row]

    @functools.cached_property
    def used(self) -> dict[int, int]:
        _, addresses, sizes = self._used_by_row
        return dict(zip(addresses.tolist(), sizes.tolist()))

    @functools.cached_property
    def free_size(self) -> dict[int, int]:
        (sizes, addresses), *_ = self._final
        return dict(zip(addresses.tolist(), sizes.tolist()))

    @functools.cached_property
    def addr_of(self) -> dict[int, int]:
        rows, addresses, _ = self._used_by_row
        return dict(zip(rows.tolist(), addresses.tolist()))

    @functools.cached_property
    def _end(self) -> tuple[list[int], int, int, int]:
        (sizes, addresses), _, pool, in_use, growth = self._final
        return [(size << _KEY_SHIFT) | a for size, a in zip(sizes.tolist(), addresses.tolist())], pool, in_use, growth

    def _checkpoint_of(self, machine: Any, row: int, grown: int) -> _Checkpoint:
        """The compiled loop's state before ``row`` as a checkpoint (as :meth:`_checkpoint` makes one)."""
        sizes, addresses = machine.free_chunks()
        used_rows, used_addresses, used_sizes = machine.used_chunks()
        return _Checkpoint(row, machine.scalar("POOL"), grown, sizes, addresses, used_rows, used_addresses, used_sizes,
                           tuple(machine.regions().items()), tuple(machine.region_rows()), machine.scalar("IN_USE"),
                           machine.scalar("PEAK"), machine.scalar("MAX_POOL"), machine.scalar("GROWTH"))

    def _snapshot(self, machine: Any, row: int) -> _Snapshot:
        """The compiled loop's state before ``row`` as a snapshot (as :meth:`_replay_python` takes one)."""
        shift = _KEY_SHIFT
        sizes, addresses = (column.tolist() for column in machine.free_chunks())
        used_rows, used_addresses, used_sizes = (column.tolist() for column in machine.used_chunks())
        limit = self.options.limit_bytes
        m = machine.scalar
        return _Snapshot(row, limit, limit + m("DLO"), limit + m("DHI"),
                         [(size << shift) | a for size, a in zip(sizes, addresses)], dict(zip(addresses, sizes)),
                         {a + size: a for a, size in zip(addresses, sizes)}, dict(zip(used_addresses, used_sizes)),
                         dict(zip(used_rows, used_addresses)), machine.regions(), tuple(machine.region_rows()),
                         m("POOL"), m("IN_USE"), m("GROWTH"), m("POOL_SLOPE"), m("GROWTH_SLOPE"),
                         machine.region_slopes(), m("TFREE"), m("TSIZE"), m("TEND"),
                         (m("PEAK"), m("PEAK_MOVING"), m("MAX_POOL"), m("POOL_MOVING")))

    def state(self, row: int) -> _Checkpoint:
        """The allocator's state where this replay ended, as a state another replay may resume from at ``row`` (a
        replay that tracks nothing: this state's regions are those of this replay's limit)."""
        keys, pool, in_use, growth = self._end
        return self._checkpoint(row, pool, 0, keys, self.used, self.addr_of, self.regions, list(self.region_rows),
                                in_use, self.peak, self.max_pool, growth)

    def _tail_split_bound(self, x: int, tsize: int, dlo: int, dhi: int) -> tuple[int, int]:
        """With ``fragmentation_fraction``, where the chunk that moves with the limit is split as it is here: both its
        size and the threshold move with the limit (the condition is monotone in it); found by galloping."""
        limit, fraction = self.options.limit_bytes, self.options.fragmentation_fraction

        def split(d: int) -> bool:
            size = tsize + d
            return size >= 2 * x or size - x >= int(fraction * (limit + d))

        here = split(0)
        step = 1
        while True:  # the nearest d (below if it splits here, above if not) where the answer changes
            d = -step if here else step
            if (d < dlo if here else d > dhi) or split(d) != here:
                break
            step *= 2
        good, bad = (-(step // 2), -step) if here else (step // 2, step)
        while abs(bad - good) > 1:
            middle = (good + bad) // 2
            if split(middle) == here:
                good = middle
            else:
                bad = middle
        return (max(dlo, good), dhi) if here else (dlo, min(dhi, good))

    def _checkpoint(self, row: int, pool: int, grown: int, keys: list[int], used: dict[int, int],
                    addr_of: dict[int, int], regions: dict[int, int], region_rows: list[int], in_use: int, peak: int,
                    max_pool: int, growth: int) -> _Checkpoint:
        shift, amask = _KEY_SHIFT, _ADDRESS_MASK
        rows = list(addr_of)
        addrs = [addr_of[r] for r in rows]
        return _Checkpoint(row, pool, grown, np.array([k >> shift for k in keys], dtype=np.int64),
                           np.array([k & amask for k in keys], dtype=np.int64), np.array(rows, dtype=np.int64),
                           np.array(addrs, dtype=np.int64), np.array([used[a] for a in addrs], dtype=np.int64),
                           tuple(regions.items()), tuple(region_rows), in_use, peak, max_pool, growth)

    def simulation(self) -> Simulation:
        # One array of 5 rows, each a column the simulation keeps (contiguous: no copies); the blocks let go at once.
        table = (self.tables[0] if len(self.tables) == 1 else np.concatenate(self.tables, axis=1) if self.tables
                 else np.zeros((5, 0), dtype=np.int64))
        self.tables = []
        vaddr, rec_size, rec_in_use, rec_pool, rec_largest = table
        touched = vaddr >= 0
        by_slot = self._regions_by_slot()
        slots = np.array(sorted(by_slot), dtype=np.int64)
        regions_in_slot_order = np.array([by_slot[int(v)] for v in slots] or [0], dtype=np.int64)
        slot = np.where(touched, vaddr >> _REGION_SHIFT, 0)
        region = np.where(touched, regions_in_slot_order[np.searchsorted(slots, slot).clip(0, max(len(slots) - 1, 0))],
                          -1)
        offset = np.where(touched, vaddr & _OFFSET_MASK, 0)
        used, free_size, addr_of, requests = self.used, self.free_size, self.addr_of, self.requests

        def chunk_map() -> tuple[ChunkState, ...]:
            row_of = {addr: row for row, addr in addr_of.items()}
            names, ops, requested = requests.op_names, requests.op, requests.requested_bytes
            chunks = []
            for addr, size in used.items():
                row = row_of[addr]
                code = int(ops[row])
                chunks.append(ChunkState(by_slot[addr >> _REGION_SHIFT], addr & _OFFSET_MASK, size, True,
                                         int(requested[row]), names[code] if 0 <= code < len(names) else "", row))
            for addr, size in free_size.items():
                chunks.append(ChunkState(by_slot[addr >> _REGION_SHIFT], addr & _OFFSET_MASK, size, False, 0, "", -1))
            chunks.sort(key=lambda c: (c.region, c.offset))
            return tuple(chunks)

        return Simulation(
            options=self.options, fits=self.failed_at is None, failed_at=self.failed_at,
            region=region.astype(np.int32), offset=offset,
            chunk_bytes=rec_size, bytes_in_use=rec_in_use, pool_bytes=rec_pool, largest_free_bytes=rec_largest,
            peak_in_use_bytes=self.peak, regions=tuple(sorted(self.regions.items())),
            region_rows=self.region_rows, max_pool_bytes=self.max_pool, made_regions=self.made_regions,
            given_back=self.given_back, chunk_map=chunk_map,
        )


# -- spatial partitioning (XLA) -------------------------------------------------------------------

CENTRAL_GAP, LOWER, UPPER = 0, 1, 2  # XLA's ChunkTag, in its enum order
TAG_NAMES = ("central_gap", "lower", "upper")  # as XLA's dump prints them


class SecondCentralGap(ValueError):
    """A free would make a second central gap: XLA's ``InsertFreeChunk`` CHECK-fails there and the process aborts."""


def low_end_alignment_padding(start: int, alignment: int) -> int:
    """``LowEndAlignmentPadding``: the bytes to skip from ``start`` to an aligned address, rounded up to 256."""
    return rounded_bytes(-start % alignment)


def high_end_aligned_start(start: int, size: int, rounded: int, alignment: int) -> int:
    """``HighEndAlignedStart``: where a chunk carved from the top of [start, start + size) begins; -1 if it cannot."""
    if size < rounded:
        return -1
    return (start + size - rounded) // alignment * alignment


def _columns(requests: Requests) -> tuple[list[bool], list[int], list[int]]:
    """The columns the partitioned loop reads, as Python lists."""
    return requests.is_alloc.tolist(), requests.requested_bytes.tolist(), requests.frees.tolist()


class _PartitionedRun:
    """One replay through XLA's partitioned allocator (openxla/xla ``xla/tsl/framework/bfc_allocator.cc``).

    The pool is one region of ``floor256(limit)`` bytes, made by the first request (``Extend``;
    growth is off, so later ``Extend`` calls fail). Its chunks are always three spans by address:
    ``[lower-owned][central gap][upper-owned]``. The rules, each named by its function in XLA:

    - ``ChunkTag``: an in-use chunk is tagged with the end that allocated it; a free chunk is an
      interior hole of an end (tagged with it, kept in that end's bins) or the central gap (kept
      apart, in no bin; there is at most one).
    - ``FindChunkPtr``: a request (lower end unless the caller says upper) takes the smallest hole
      of **its own end** that fits (equal sizes: the end's hole order), and only when none fits
      carves the central gap; the other end's holes are never used, however large.
    - ``AllocateChunkFromLowEnd``: alignment padding below an aligned start is split off as a lower
      hole; the chunk is then split at the rounded size when the end's policy says so (holes:
      ``hole_split``; the gap: ``gap_split``), the remainder keeping the source's tag (the gap stays
      the gap, a hole stays a hole).
    - ``AllocateChunkFromHighEnd``: the chunk is carved from the top, aligned down; what lies below
      keeps the source's tag, a free suffix above it (alignment, or an unsplit rest) is an upper hole.
      With the heuristic policy a hole that should not be split is taken whole (aligned).
    - ``ShouldSplitChunk``: split when the chunk (less alignment padding) is at least twice the
      request, or the rest is at least 128 MiB (or ``fragmentation_fraction`` x limit).
    - ``ReturnBoundaryChunkToGap``: a freed lower chunk with no lower chunk above it (an upper chunk
      with no upper chunk below it) becomes gap; an interior one stays a hole of its end.
    - ``TryToCoalesce`` / ``MergedChunkTag``: a freed chunk merges with a free next chunk, then a free
      previous one; equal tags stay, any other pair becomes the central gap (so a boundary free
      swallows the gap and the end's holes next to it).
    - Statistics as the profiler writes them: the largest free chunk is the largest hole of either
      end or the gap (``LargestFreeChunk``), and fragmentation counts it so.

    Alignments apply to offsets in the region, as if its base were aligned to every alignment asked
    for. Garbage collection has nothing to give back in a single fixed region, so it changes nothing.
    """

    def __init__(self, requests: Requests, options: BFCOptions, record: bool,
                 schedule: ScheduleFactory | None = None) -> None:
        if schedule is not None and record:
            raise ValueError("a replay served by a schedule records nothing (its events are not in row order)")
        self.requests = requests
        self.options = options
        self.record = record
        self._schedule = schedule
        self.max_fragmentation = options.max_internal_fragmentation_bytes
        self.policies = (options.lower_end, options.lower_end, options.upper_end)  # by tag: the end that owns it
        self.failed_at: int | None = None
        self.size: dict[int, int] = {}  # start -> size, every chunk
        self.start_ending_at: dict[int, int] = {}  # end -> start, every chunk
        self.tag: dict[int, int] = {}  # start -> tag, every chunk
        self.used: dict[int, int] = {}  # start -> the row that allocated it, chunks in use
        self.holes: tuple[list[tuple[int, int, int]], ...] = ([], [], [])  # by tag: (size, order, start), sorted
        self.gap = -1  # start of the central gap, -1 while there is none
        self.pool = self.in_use = self.peak = 0
        self.region_row = -1
        self.records: list[tuple[int, int, int, int, int]] = []  # per event: offset, chunk, in use, pool, largest free
        self._replay()

    # -- the free structures (InsertFreeChunk, RemoveFreeChunk) -------------------------------------
    def _hole_key(self, start: int) -> tuple[int, int, int]:
        """``Bin::ChunkComparator`` within one tag: size, then address in the end's hole order."""
        tag = self.tag[start]
        descending = self.policies[tag].hole_order == "descending"
        return self.size[start], -start if descending else start, start

    def _insert_free(self, start: int) -> None:
        if self.tag[start] == CENTRAL_GAP:
            if self.gap >= 0:
                raise SecondCentralGap("a free made a second central gap, where XLA's allocator aborts the process "
                                       "('spatial partitioning expects one central gap')")
            self.gap = start
        else:
            insort(self.holes[self.tag[start]], self._hole_key(start))

    def _remove_free(self, start: int) -> None:
        if start == self.gap:
            self.gap = -1
        else:
            holes = self.holes[self.tag[start]]
            holes.pop(bisect_left(holes, self._hole_key(start)))

    # -- splitting and merging (SplitChunk, MergeChunks, TryToCoalesce) -------------------------------
    def _split(self, start: int, num_bytes: int) -> int:
        """Keep ``num_bytes`` at ``start``; the rest becomes a free chunk with the same tag, inserted. Returns its start."""
        rest = start + num_bytes
        end = start + self.size[start]
        self.size[rest] = end - rest
        self.size[start] = num_bytes
        self.start_ending_at[rest] = start
        self.start_ending_at[end] = rest
        self.tag[rest] = self.tag[start]
        self._insert_free(rest)
        return rest

    def _merge(self, first: int, second: int) -> None:
        """``MergeChunks`` with ``MergedChunkTag``: equal tags stay, anything else is the central gap."""
        end = second + self.size.pop(second)
        del self.start_ending_at[second]
        self.start_ending_at[end] = first
        self.size[first] = end - first
        if self.tag.pop(second) != self.tag[first]:
            self.tag[first] = CENTRAL_GAP

    def _coalesce(self, start: int) -> int:
        following = start + self.size[start]
        if following in self.size and following not in self.used:
            self._remove_free(following)
            self._merge(start, following)
        before = self.start_ending_at.get(start, -1)
        if before >= 0 and before not in self.used:
            self._remove_free(before)
            self._merge(before, start)
            return before
        return start

    def _return_boundary_chunk_to_gap(self, start: int) -> None:
        """``ReturnBoundaryChunkToGap``: a freed chunk with no chunk of its own end beyond it rejoins the gap."""
        tag = self.tag[start]
        if tag == LOWER:
            beyond = self.tag.get(start + self.size[start], CENTRAL_GAP)  # the chunk above (none: the region's end)
        else:
            below = self.start_ending_at.get(start, -1)
            beyond = self.tag[below] if below >= 0 else CENTRAL_GAP
        if beyond != tag:
            self.tag[start] = CENTRAL_GAP

    # -- allocating (FindChunkPtr, AllocateChunkFromLowEnd/HighEnd, Extend) --------------------------------
    def _should_split(self, size: int, rounded: int, padding: int = 0) -> bool:
        """``ShouldSplitChunk``: BFC's rule, on the chunk less its alignment padding."""
        aligned = size - padding
        return aligned >= 2 * rounded or aligned - rounded >= self.max_fragmentation

    def _exact(self, start: int, policy: EndPolicy) -> bool:
        """Whether the end's policy splits the free chunk at ``start`` exactly (else by BFC's rule)."""
        return (policy.gap_split if self.tag[start] == CENTRAL_GAP else policy.hole_split) == "exact"

    def _splits(self, start: int, rounded: int, exact: bool) -> bool:
        return self.size[start] > rounded if exact else self._should_split(self.size[start], rounded)

    def _fits(self, start: int, rounded: int, alignment: int, upper: bool) -> bool:
        size = self.size[start]
        if upper:
            return high_end_aligned_start(start, size, rounded, alignment) >= start
        return size >= rounded + low_end_alignment_padding(start, alignment)

    def _find(self, rounded: int, alignment: int, upper: bool) -> int:
        """``FindChunkPtr``: the smallest own hole that fits, else the central gap if it fits; -1 for neither."""
        holes = self.holes[UPPER if upper else LOWER]
        for _, _, start in holes[bisect_left(holes, (rounded,)):]:
            if self._fits(start, rounded, alignment, upper):
                return start
        if self.gap >= 0 and self._fits(self.gap, rounded, alignment, upper):
            return self.gap
        return -1

    def _carve_low(self, start: int, rounded: int, alignment: int) -> int:
        """``AllocateChunkFromLowEnd`` on a chunk taken out of its free structure; returns the allocation's start."""
        padding = low_end_alignment_padding(start, alignment)
        if padding:
            rest = self._split(start, padding)  # the aligned rest, inserted with the source's tag ...
            self._remove_free(rest)  # ... and taken out again
            self.tag[start] = LOWER  # the prefix below the allocation is a lower hole
            self._insert_free(start)
            start = rest
        if self._splits(start, rounded, self._exact(start, self.options.lower_end)):
            self._split(start, rounded)  # the remainder keeps the source's tag: the gap stays the gap
        self.tag[start] = LOWER
        return start

    def _carve_high(self, start: int, rounded: int, alignment: int) -> int:
        """``AllocateChunkFromHighEnd`` on a chunk taken out of its free structure; returns the allocation's start."""
        size = self.size[start]
        at = high_end_aligned_start(start, size, rounded, alignment)
        exact = self._exact(start, self.options.upper_end)
        if not exact:
            padding = low_end_alignment_padding(start, alignment)
            if not self._should_split(size, rounded, padding):
                at = start + padding  # the hole is taken whole, aligned
        if at > start:
            self._split(start, at - start)  # the part above, inserted with the source's tag ...
            self._remove_free(at)  # ... and taken out again; the prefix below keeps its tag
            self._insert_free(start)
            start = at
        self.tag[start] = UPPER  # set before splitting, so a free suffix is an upper hole
        if self._splits(start, rounded, exact):
            self._split(start, rounded)
        return start

    def _extend(self, rounded: int, row: int) -> bool:
        """``Extend`` without growth: the first call makes the one region, floor256(limit), as the central gap."""
        size = self.options.limit_bytes // MIN_ALLOCATION_BYTES * MIN_ALLOCATION_BYTES
        if self.pool or rounded > size:
            return False
        self.size[0], self.tag[0], self.start_ending_at[size] = size, CENTRAL_GAP, 0
        self.pool, self.region_row = size, row
        self._insert_free(0)
        return True

    def _largest_free(self) -> int:
        """``LargestFreeChunk``: the largest hole of either end, or the central gap."""
        lower, upper = self.holes[LOWER], self.holes[UPPER]
        return max(lower[-1][0] if lower else 0, upper[-1][0] if upper else 0,
                   self.size[self.gap] if self.gap >= 0 else 0)

    # -- the replay -----------------------------------------------------------------------------
    def _replay(self) -> None:
        is_alloc, requested, frees = _columns(self.requests)
        n = len(is_alloc)
        upper_col = self.requests.upper_end
        align_col = self.requests.alignment_bytes
        ends = upper_col.tolist() if upper_col is not None else [False] * n
        alignments = align_col.tolist() if align_col is not None else [MIN_ALLOCATION_BYTES] * n
        addr_of: dict[int, int] = {}
        schedule = None if self._schedule is None else _ScheduleRows(self._schedule(0))
        rows: Iterator[tuple[int, tuple[bool, int, int]]] = enumerate(zip(is_alloc, requested, frees)) \
            if schedule is None else ((row, (is_alloc[row], requested[row], frees[row])) for row in schedule)
        for row, (alloc, req, freed) in rows:
            if alloc:
                if req <= 0:  # XLA returns null for 0 bytes, and writes no event
                    self._note(-1, 0)
                    continue
                alignment = max(alignments[row], MIN_ALLOCATION_BYTES)
                if alignment & (alignment - 1):
                    raise ValueError(f"row {row}: the alignment must be a power of two (got {alignment})")
                rounded = (req + 255) & ~255
                upper = ends[row]
                start = self._find(rounded, alignment, upper)
                if start < 0 and self._extend(rounded, row):
                    start = self._find(rounded, alignment, upper)
                if start < 0:
                    if schedule is not None and schedule.blocked(row):
                        continue  # the request waits for memory to come back; the schedule serves it again
                    self.failed_at = row
                    break
                self._remove_free(start)
                start = self._carve_high(start, rounded, alignment) if upper else self._carve_low(start, rounded, alignment)
                self.used[start] = row
                addr_of[row] = start
                self.in_use += self.size[start]
                self.peak = max(self.peak, self.in_use)
                self._note(start, self.size[start])
            else:
                start = addr_of.pop(freed, -1)
                if start < 0:  # an allocation before the sequence, or a 0-byte one
                    self._note(-1, 0)
                    continue
                size = self.size[start]
                del self.used[start]
                self.in_use -= size
                self._return_boundary_chunk_to_gap(start)
                self._insert_free(self._coalesce(start))
                self._note(start, size)  # the freed chunk as it was before merging

    def _note(self, start: int, size: int) -> None:
        if self.record:
            self.records.append((start, size, self.in_use, self.pool, self._largest_free()))

    @property
    def region_rows(self) -> tuple[int, ...]:
        """The row whose request made the one region (none before the first request that needs memory)."""
        return (self.region_row,) if self.pool else ()

    def simulation(self) -> Simulation:
        table = np.array(self.records, dtype=np.int64).reshape(-1, 5)
        offset, chunk, in_use, pool, largest = table.T
        names, ops, requested = self.requests.op_names, self.requests.op, self.requests.requested_bytes
        chunks = []
        for start in sorted(self.size):
            row = self.used.get(start, -1)
            code = int(ops[row]) if row >= 0 else -1
            chunks.append(ChunkState(0, start, self.size[start], row >= 0, int(requested[row]) if row >= 0 else 0,
                                     names[code] if 0 <= code < len(names) else "", row, TAG_NAMES[self.tag[start]]))
        return Simulation(
            options=self.options, fits=self.failed_at is None, failed_at=self.failed_at,
            region=np.where(offset >= 0, 0, -1).astype(np.int32), offset=np.where(offset >= 0, offset, 0),
            chunk_bytes=chunk.copy(), bytes_in_use=in_use.copy(), pool_bytes=pool.copy(), largest_free_bytes=largest.copy(),
            peak_in_use_bytes=self.peak, regions=((0, self.pool),) if self.pool else (), chunk_map=functools.partial(tuple, chunks),
            region_rows=self.region_rows, max_pool_bytes=self.pool,
            made_regions=((0, self.pool),) if self.pool else (),  # one fixed region, never given back
        )
