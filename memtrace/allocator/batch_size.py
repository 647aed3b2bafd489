"""The largest batch that fits, from two recordings of one step at two batch sizes (``memtrace fit --vs``).

A step's requests at batch 16 and at batch 64 are the same requests in the same order, with sizes
that grow linearly in the batch. This module aligns the two request sequences of one allocator
(:func:`align`), predicts each aligned allocation's size at any batch N as affine in the batch
(:meth:`BatchScaling.sizes_at`), writes the request sequence of batch N (:meth:`BatchScaling.requests_at`)
and replays it through the allocator model (:mod:`memtrace.allocator.bfc`): the largest batch under a limit,
the smallest limit of a batch, and the batch sizes that fit the common cards.

The rules, each said where the answer is shown:

- **Alignment, by op and order.** An event's key is its kind and its op (a free takes the op of
  the allocation it frees). The k-th event of a key in one recording is paired with the k-th of
  the same key in the other; of those pairs, the longest run in the same order in both (a longest
  increasing subsequence) is kept as anchors, and between two anchors the events left over are
  paired again by key and order. ``tf.function`` changes the order of a few events from run to run
  and names a few ops differently: such events are the ones left over. A pair that grows faster
  than the batch (:func:`unpair_faster_than_the_batch`) is two buffers paired by order: left over.
  Two recordings whose buffers are not freed where their partners are are two programs, refused
  (:func:`kept_lifetimes`).
- **Sizes.** An aligned allocation of ``s1`` bytes at batch B1 and ``s2`` at B2 asks at batch N
  for ``s1 + (s2 - s1)(N - B1)/(B2 - B1)``: exact integers wherever the growth per sample
  ``(s2 - s1)/(B2 - B1)`` is a whole number of bytes (the *affine* allocations, nearly all); other
  growing sizes are rounded up (the size; the answer may still lie below TensorFlow's); a size that
  shrinks as the batch grows is no batch dimension (two small buffers that swapped places) and is
  held at the larger of its two sizes; no prediction goes below 0. Computed in Python ints where
  int64 would overflow; a size above what the model holds is replayed as ``BEYOND_BYTES``.
- **Order and what was left over.** Batch N's sequence is one recording's events in its order,
  that of the recording whose batch size is nearer N (the larger on a tie); its allocations that
  aligned take their predicted sizes, those that did not keep their recorded size; the other
  recording's left-overs are not used. This is *the prediction*.
- **What it does not know** (:mod:`memtrace.allocator.batch_band`): the other recording's order,
  orders drawn from each, the requests in one recording only left out and grown, extrapolation
  beyond the recorded batch sizes: the band of plausible runs, and the largest batch searched so
  that no larger batch beats it.
"""

from __future__ import annotations

import functools
from bisect import bisect_left
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import numpy as np

from ..errors import UsageError
from ..trace.data import NO_OP, TraceData
from .batch_band import (
    BEYOND_BYTES,
    CARD_SCAN_BUDGET_EVENTS,
    DEFAULT_BATCH_ORDERS,
    MAX_BATCH,
    LargestBand,
    LargestBatch,
    OneRecordingOnly,
    PlausibleRuns,
    clamp_sizes,
    extrapolation,
    largest_band,
    largest_recorded,
    limit_band,
)
from .bfc import (
    MAX_LIMIT_BYTES,
    BFCOptions,
    LimitSearch,
    Requests,
    fits,
    many_replays,
    min_limit,
    outcome,
    search_min_limit,
)
from .defaults import card_limit_bytes, trace_defaults
from .fit import FitResult, fit_requests
from .orders import DEFAULT_SEED, DEFAULT_WINDOW_NS, OrderBand
from .requests import requests_for

# Below this share of the events aligned, two recordings are taken for two different steps.
MIN_ALIGNED_SHARE = 0.5
# Below this share of the aligned allocations freed where their partners are (or neither freed), the alignment
# paired events of two different programs (by order alone, where the events name no op).
MIN_KEPT_LIFETIMES = 0.5
# A step at a larger batch asks for more: the aligned allocations that shrink may add up to at most this share of
# the bytes by which the others grow.
MAX_SHRINKING_SHARE = 0.5
# Batch sizes whose request sequences (and what their replays proved) are kept at once.
WRITTEN_KEPT = 24

GB = 10**9
# The common cards, in GB as ``--card 16GB`` reads them (powers of 10): TF's limit on each is
# :func:`memtrace.allocator.defaults.gpu_limit_bytes`, the card less TF's reserve for the compute capability
# asked (``fit``'s ``--compute-capability``, default 8: 1,536 MiB). Memory the CUDA context
# already holds (a few hundred MiB) is not subtracted: TF takes its limit from the memory free.
# Where XLA recorded the traces, its limit: 0.75 of the card (:func:`memtrace.allocator.defaults.card_limit_bytes`).
CARDS_GB = (8, 12, 16, 24, 32, 40, 48, 80)


class BatchInputError(UsageError):
    """Two recordings that cannot be told apart as two batch sizes of one step."""


# -- alignment ---------------------------------------------------------------------------------

def event_keys(requests: Requests, names: dict[str, int], sized_unknown: bool = False) -> np.ndarray:
    """Each event's key (an int): its op (a free: its allocation's op) in ``names``, times 2, plus 1 for a free.

    ``names`` numbers op names across recordings (it grows); an unknown op is one name of its own,
    or with ``sized_unknown`` one per requested size (an allocation of no op, such as the runtime's
    copy of an input, is then told from the scalars of no op by its size).
    """
    # A profile's allocation outside any op is named NO_OP by the reader: unknown too.
    codes = np.array([-1 if name in ("", NO_OP) else names.setdefault(name, len(names))
                      for name in requests.op_names] + [-1], dtype=np.int64)
    op = codes[requests.op].copy()  # -1 (unknown) indexes the trailing -1
    if sized_unknown:
        unknown = requests.is_alloc & (op == -1)
        op[unknown] = -3 - requests.requested_bytes[unknown].astype(np.int64)
    freed = ~requests.is_alloc & (requests.frees >= 0)
    own = op.copy()
    op[~requests.is_alloc] = -2  # a free of an allocation not in the sequence
    op[freed] = own[requests.frees[freed]]
    return (op + 2) * 2 + (~requests.is_alloc).astype(np.int64)


def _occurrence(keys: np.ndarray) -> np.ndarray:
    """For each event, how many events of its key came before it."""
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
    counts = np.diff(np.r_[starts, len(keys)])
    rank = np.arange(len(keys)) - np.repeat(starts, counts)
    occurrence = np.empty(len(keys), dtype=np.int64)
    occurrence[order] = rank
    return occurrence


def _longest_increasing(values: np.ndarray) -> np.ndarray:
    """Positions of a longest strictly increasing subsequence of ``values`` (patience sorting)."""
    tails: list[int] = []  # the smallest last value of an increasing run of each length
    tail_at: list[int] = []
    previous = np.full(len(values), -1, dtype=np.int64)
    for position, value in enumerate(values.tolist()):
        length = bisect_left(tails, value)
        if length == len(tails):
            tails.append(value)
            tail_at.append(position)
        else:
            tails[length] = value
            tail_at[length] = position
        previous[position] = tail_at[length - 1] if length else -1
    chain = []
    position = tail_at[-1] if tail_at else -1
    while position >= 0:
        chain.append(position)
        position = int(previous[position])
    return np.array(chain[::-1], dtype=np.int64)


def align(first: Requests, second: Requests) -> tuple[np.ndarray, np.ndarray]:
    """Aligned events of two request sequences, by op and order: (rows of ``first``, rows of ``second``), in order."""
    names: dict[str, int] = {}
    keys_a, keys_b = event_keys(first, names, sized_unknown=True), event_keys(second, names, sized_unknown=True)
    if not len(keys_a) or not len(keys_b):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    occ_a, occ_b = _occurrence(keys_a), _occurrence(keys_b)
    span = int(max(occ_a.max(), occ_b.max())) + 1
    _, rows_a, rows_b = np.intersect1d(keys_a * span + occ_a, keys_b * span + occ_b, assume_unique=True,
                                       return_indices=True)
    by_a = np.argsort(rows_a, kind="stable")
    rows_a, rows_b = rows_a[by_a], rows_b[by_a]
    kept = _longest_increasing(rows_b)
    anchors_a, anchors_b = rows_a[kept], rows_b[kept]
    # Between consecutive anchors (and before the first, after the last): pair what is left by key and
    # order; then what is still left anywhere (an op whose events moved past an anchor). Then the same
    # again for allocations of no op whatever their size.
    bounds_a = np.r_[-1, anchors_a, len(keys_a)]
    bounds_b = np.r_[-1, anchors_b, len(keys_b)]
    taken_a = np.zeros(len(keys_a), dtype=np.bool_)
    taken_b = np.zeros(len(keys_b), dtype=np.bool_)
    taken_a[anchors_a] = taken_b[anchors_b] = True
    extra_a: list[int] = []
    extra_b: list[int] = []
    coarse_a, coarse_b = event_keys(first, names), event_keys(second, names)
    for by_a, by_b in ((keys_a, keys_b), (coarse_a, coarse_b)):
        gaps = np.flatnonzero((np.diff(bounds_a) > 1) & (np.diff(bounds_b) > 1))
        for gap in gaps.tolist():
            rows_a = np.arange(int(bounds_a[gap]) + 1, int(bounds_a[gap + 1]))
            rows_b = np.arange(int(bounds_b[gap]) + 1, int(bounds_b[gap + 1]))
            _pair_left(by_a, by_b, taken_a, taken_b, extra_a, extra_b, rows_a, rows_b)
        _pair_left(by_a, by_b, taken_a, taken_b, extra_a, extra_b)
    all_a = np.r_[anchors_a, np.array(extra_a, dtype=np.int64)]
    all_b = np.r_[anchors_b, np.array(extra_b, dtype=np.int64)]
    order = np.argsort(all_a, kind="stable")
    return all_a[order].astype(np.int64), all_b[order].astype(np.int64)


def _pair_left(keys_a: np.ndarray, keys_b: np.ndarray, taken_a: np.ndarray, taken_b: np.ndarray, extra_a: list[int],
               extra_b: list[int], rows_a: np.ndarray | None = None, rows_b: np.ndarray | None = None) -> None:
    """Pair the events not yet taken (of ``rows_a``/``rows_b``, default all) by key and order, marking them taken."""
    rows_a = np.arange(len(keys_a)) if rows_a is None else rows_a
    rows_b = np.arange(len(keys_b)) if rows_b is None else rows_b
    waiting: dict[int, deque[int]] = defaultdict(deque)
    for row in rows_b[~taken_b[rows_b]].tolist():
        waiting[int(keys_b[row])].append(row)
    for row in rows_a[~taken_a[rows_a]].tolist():
        queue = waiting.get(int(keys_a[row]))
        if queue:
            other = queue.popleft()
            extra_a.append(row)
            extra_b.append(other)
            taken_a[row] = taken_b[other] = True


# -- how each request scales with the batch size ------------------------------------------------

@dataclass(frozen=True, eq=False)
class _AlignedSizes:
    """The aligned allocations' sizes in both recordings, as every batch's sizes are worked out from them."""

    rows_small: np.ndarray
    rows_large: np.ndarray
    s1: np.ndarray  # requested bytes at B1, int64
    grow: np.ndarray  # at B2 less at B1
    shrinking: np.ndarray  # where grow < 0: the allocation is held at the larger size, s1
    largest_growth: int  # max |grow|
    small_sizes: np.ndarray  # each recording's requested bytes, int64
    large_sizes: np.ndarray


@dataclass(frozen=True, eq=False)
class BatchScaling:
    """Two recordings of one allocator's requests at batch sizes B1 < B2, aligned.

    ``small_rows[k]`` and ``large_rows[k]`` are the k-th aligned event of each; the counts say how
    much aligned (events and allocations are those of the recording with more of them).
    """

    small: Requests
    large: Requests
    batch_sizes: tuple[int, int]
    small_rows: np.ndarray
    large_rows: np.ndarray
    events: int
    aligned_events: int
    allocations: int
    aligned_allocations: int
    affine_allocations: int  # aligned, growing by a whole number of bytes per sample (or not at all)
    growing_allocations: int  # aligned and larger at B2
    shrinking_allocations: int  # aligned and smaller at B2: held at the larger size
    rounded_allocations: int  # aligned, growing by a fraction of a byte per sample: rounded up
    left_over_small: int  # events of the small recording that did not align
    left_over_large: int
    # The sequences written lately, by (batch, base): kept so that what replays of one proved (the limits under
    # which it fits or not, see memtrace.allocator.bfc.proven_limits) answers the next question about it.
    _written: dict[tuple[int, str], Requests] = field(default_factory=dict, repr=False)

    @property
    def alloc_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Aligned allocations: (rows in small, rows in large)."""
        a = self._aligned
        return a.rows_small, a.rows_large

    @functools.cached_property
    def _aligned(self) -> _AlignedSizes:
        """What every batch's sizes are worked out from (each batch asks them again: worked out once)."""
        keep = self.small.is_alloc[self.small_rows] & self.large.is_alloc[self.large_rows]
        rows_small, rows_large = self.small_rows[keep], self.large_rows[keep]
        s1 = self.small.requested_bytes[rows_small].astype(np.int64)
        s2 = self.large.requested_bytes[rows_large].astype(np.int64)
        grow = s2 - s1
        aligned = _AlignedSizes(rows_small, rows_large, s1, grow, np.flatnonzero(grow < 0),
                                int(np.abs(grow).max(initial=0)), self.small.requested_bytes.astype(np.int64),
                                self.large.requested_bytes.astype(np.int64))
        for column in vars(aligned).values():
            if isinstance(column, np.ndarray):
                column.setflags(write=False)
        return aligned

    def base_for(self, batch: int) -> str:
        """The recording whose order batch ``batch`` is written in: the nearer batch size (the larger on a tie)."""
        b1, b2 = self.batch_sizes
        return "small" if abs(batch - b1) < abs(batch - b2) else "large"

    def sizes_at(self, batch: int, base: str | None = None) -> np.ndarray:
        """Requested bytes of each event of batch ``batch``'s sequence (0 for frees), in the base recording's rows; a
        size above what the model holds (8 TiB) is ``BEYOND_BYTES``, a request no limit the model holds serves."""
        return clamp_sizes(self.exact_sizes_at(batch, base))

    def exact_sizes_at(self, batch: int, base: str | None = None) -> np.ndarray:
        """:meth:`sizes_at` before a size above what the model holds is replayed as ``BEYOND_BYTES``: int64, or
        Python ints (an object array) where a batch that large would overflow int64."""
        if batch < 0:
            raise BatchInputError(f"a batch size must be 0 or more, not {batch}")
        base = base or self.base_for(batch)
        b1, b2 = self.batch_sizes
        a = self._aligned
        s1, grow = a.s1, a.grow
        span = b2 - b1
        # Exact where (s2 - s1)(N - B1) divides by B2 - B1; else rounded up (the size, not the answer). In Python
        # ints where int64 would overflow (a batch of 2**62 must not wrap round to a small one).
        exact = a.largest_growth * abs(batch - b1) >= 1 << 62
        if exact:
            predicted: np.ndarray = np.array([s - (-(g * (batch - b1)) // span) for s, g in zip(s1.tolist(), grow.tolist())],
                                             dtype=object)
        else:
            predicted = s1 - (-(grow * (batch - b1)) // span)
        predicted[a.shrinking] = s1[a.shrinking]  # held at the larger size: B1's
        predicted = np.maximum(predicted, 0)
        own = a.small_sizes if base == "small" else a.large_sizes
        sizes = own.astype(object) if exact else own.copy()
        sizes[a.rows_small if base == "small" else a.rows_large] = predicted
        return sizes

    def requests_at(self, batch: int, base: str | None = None) -> Requests:
        """The request sequence of batch ``batch`` (see the module's rules), ready for :mod:`memtrace.allocator.bfc`.

        The same object for the same batch and base while it is among the last few asked for.
        """
        base = base or self.base_for(batch)
        written = self._written
        found = written.pop((batch, base), None)
        if found is None:
            own = self.small if base == "small" else self.large
            found = Requests(own.is_alloc, self.sizes_at(batch, base), own.frees, own.op, own.time_ns, own.op_names)
        written[(batch, base)] = found  # the most recent last
        while len(written) > WRITTEN_KEPT:
            del written[next(iter(written))]
        return found


def batch_scaling(small: Requests, large: Requests, batch_sizes: Sequence[int], *, names: tuple[str, str] = ("SMALL",
                "LARGE")) -> BatchScaling:
    """Align two recordings at batch sizes ``batch_sizes`` = (B1, B2), B1 < B2; refuse what is not two batches of one step."""
    if len(batch_sizes) != 2:
        raise BatchInputError(f"give two batch sizes, the small recording's and the large one's, not {len(batch_sizes)}")
    b1, b2 = (int(b) for b in batch_sizes)
    if b1 <= 0 or b2 <= 0:
        raise BatchInputError(f"batch sizes must be positive, not {b1},{b2}")
    if b1 == b2:
        raise BatchInputError(f"the two batch sizes are equal ({b1}): nothing says how the sizes grow")
    if b1 > b2:
        raise BatchInputError(f"the batch sizes must increase (the small recording first): {b1},{b2}")
    if b2 > MAX_BATCH:
        raise BatchInputError(f"batch size {b2:,} is beyond the largest memtrace predicts ({MAX_BATCH:,})")
    if not small.is_alloc.any() or not large.is_alloc.any():
        empty = names[0] if not small.is_alloc.any() else names[1]
        raise BatchInputError(f"{empty}: no allocations for this allocator")
    rows_small, rows_large = align(small, large)
    events = max(len(small), len(large))
    share = len(rows_small) / events
    if share < MIN_ALIGNED_SHARE:
        raise BatchInputError(
            f"{names[0]} and {names[1]} do not look like one step at two batch sizes: only {len(rows_small):,} of "
            f"{events:,} events ({share:.0%}) align by op and order (at least {MIN_ALIGNED_SHARE:.0%} needed)")
    keep = small.is_alloc[rows_small] & large.is_alloc[rows_large]
    s1 = small.requested_bytes[rows_small[keep]].astype(np.int64)
    s2 = large.requested_bytes[rows_large[keep]].astype(np.int64)
    grow = s2 - s1
    if s2.sum() <= s1.sum():  # (a sum that grows has a size that grows)
        raise BatchInputError(
            f"{names[1]} (batch {b2}) asks for no more than {names[0]} (batch {b1}): of {int(keep.sum()):,} aligned "
            f"allocations {int((grow > 0).sum()):,} grow; sizes that do not grow with the batch say nothing about "
            "larger batches (are the recordings in the right order, with the right batch sizes?)")
    _refuse_two_programs(small, large, rows_small, rows_large, grow, names)
    rows_small, rows_large = unpair_faster_than_the_batch(small, large, rows_small, rows_large, (b1, b2))
    keep = small.is_alloc[rows_small] & large.is_alloc[rows_large]
    grow = (large.requested_bytes[rows_large[keep]].astype(np.int64)
            - small.requested_bytes[rows_small[keep]].astype(np.int64))
    affine = (grow >= 0) & (grow % (b2 - b1) == 0)
    return BatchScaling(
        small, large, (b1, b2), rows_small, rows_large,
        events=events, aligned_events=len(rows_small),
        allocations=max(int(small.is_alloc.sum()), int(large.is_alloc.sum())),
        aligned_allocations=int(keep.sum()), affine_allocations=int(affine.sum()),
        growing_allocations=int((grow > 0).sum()), shrinking_allocations=int((grow < 0).sum()),
        rounded_allocations=int(((grow > 0) & ~affine).sum()),
        left_over_small=len(small) - len(rows_small), left_over_large=len(large) - len(rows_large))


def unpair_faster_than_the_batch(small: Requests, large: Requests, rows_small: np.ndarray, rows_large: np.ndarray,
                                 batch_sizes: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """The aligned rows less the allocations (and their frees) that grow faster than the batch: a buffer affine in the
    batch with no negative part, a + bN, grows from B1 to B2 by at most B2 / B1 (256 bytes of rounding allowed). A
    pair that grows faster is two buffers paired by order (an input's batch with a copy of the whole data set, a
    scalar with an activation): each is then a request of its recording only, left over."""
    b1, b2 = batch_sizes
    both = small.is_alloc[rows_small] & large.is_alloc[rows_large]
    s1 = small.requested_bytes[rows_small].astype(np.int64)
    s2 = large.requested_bytes[rows_large].astype(np.int64)
    faster = both & (s2 * b1 > (s1 + 256) * b2)
    if not faster.any():
        return rows_small, rows_large
    drop = faster.copy()
    free_small = small.free_rows()
    free_large = large.free_rows()
    pair_of = {(int(a), int(b)): k for k, (a, b) in enumerate(zip(rows_small.tolist(), rows_large.tolist()))}
    for k in np.flatnonzero(faster).tolist():
        freed_pair = pair_of.get((int(free_small[rows_small[k]]), int(free_large[rows_large[k]])))
        if freed_pair is not None:
            drop[freed_pair] = True
    return rows_small[~drop], rows_large[~drop]


def kept_lifetimes(first: Requests, second: Requests, rows_first: np.ndarray, rows_second: np.ndarray) -> tuple[int, int]:
    """(aligned allocations freed by aligned frees, or by neither recording; aligned allocations).

    One step at two batch sizes frees a buffer at the same place in both: the free of an allocation
    pairs with the free of its partner. Two programs paired by order alone (events that name no op, as
    XLA's) do not.
    """
    partner = np.full(len(first), -1, dtype=np.int64)
    partner[rows_first] = rows_second
    free_of_first = first.free_rows()
    free_of_second = second.free_rows()
    both = rows_first[first.is_alloc[rows_first] & second.is_alloc[rows_second]]
    mine, theirs = free_of_first[both], free_of_second[partner[both]]
    kept = ((mine < 0) & (theirs < 0)) | ((mine >= 0) & (theirs >= 0) & (partner[np.maximum(mine, 0)] == theirs))
    return int(kept.sum()), len(both)


def _refuse_two_programs(small: Requests, large: Requests, rows_small: np.ndarray, rows_large: np.ndarray,
                         grow: np.ndarray, names: tuple[str, str]) -> None:
    """Refuse an alignment that pairs two programs rather than one step at two batch sizes: buffers freed at other
    places, or sizes that shrink about as much as they grow (pairs made by order alone, of events naming no op)."""
    keep = small.is_alloc[rows_small] & large.is_alloc[rows_large]
    unknown = np.array([name in ("", NO_OP) for name in small.op_names] + [True], dtype=np.bool_)
    ops = small.op[rows_small[keep]].astype(np.int64)
    nameless = unknown[np.where(ops >= 0, ops, len(small.op_names))]  # aligned allocations that name no op
    by_order = 2 * int(nameless.sum()) > len(nameless)  # most pairs made by order alone: no op name vouches for them
    why = ": events that name no op were paired by order alone" if by_order else " (are they recordings of one program?)"
    kept, aligned = kept_lifetimes(small, large, rows_small, rows_large)
    if aligned and kept < MIN_KEPT_LIFETIMES * aligned:
        raise BatchInputError(
            f"{names[0]} and {names[1]} do not look like one step at two batch sizes: of {aligned:,} aligned "
            f"allocations only {kept:,} ({kept / aligned:.0%}) are freed where their partners are (at least "
            f"{MIN_KEPT_LIFETIMES:.0%} needed){why}")
    # Where most pairs were made by order alone, a larger batch asks for more: most of their bytes grow.
    grown, shrunk = int(grow[nameless & (grow > 0)].sum()), int(-grow[nameless & (grow < 0)].sum())
    if by_order and shrunk > MAX_SHRINKING_SHARE * grown:
        raise BatchInputError(
            f"{names[0]} and {names[1]} do not look like one step at two batch sizes: of the aligned allocations that "
            f"name no op, those that shrink as the batch grows lose {shrunk:,} bytes and those that grow gain "
            f"{grown:,} (at most {MAX_SHRINKING_SHARE:.0%} of that may shrink){why}")


# -- questions about batch sizes ---------------------------------------------------------------

def _with_limit(options: BFCOptions, limit_bytes: int) -> BFCOptions:
    return replace(options, limit_bytes=limit_bytes)


def fits_at(scaling: BatchScaling, batch: int, options: BFCOptions, base: str | None = None) -> bool:
    """Whether batch ``batch``'s predicted requests fit under ``options``."""
    return fits(scaling.requests_at(batch, base), options)


def largest_batch(scaling: BatchScaling, options: BFCOptions, base: str | None = None) -> int:
    """The largest batch whose predicted requests fit under ``options`` (0: not even batch 1), in ``base``'s order
    (default: the nearer recording's at each batch); no larger batch fits, of those tried (fitting need not be
    monotone in the batch: :func:`memtrace.allocator.batch_band.largest_where`)."""
    return _largest(lambda: largest_recorded(scaling, options, base)).batch


def _largest(search: Callable[[], LargestBand | LargestBatch]) -> Any:
    """A search for the largest batch, its ValueError (batch MAX_BATCH still fits) said as bad input."""
    try:
        return search()
    except ValueError as exc:
        raise BatchInputError(str(exc)) from None


@dataclass(frozen=True)
class BatchLimit:
    """One batch size's smallest limit, replayed in both recordings' orders."""

    batch: int
    min_limit_bytes: int  # in the order of the nearer recording (the prediction)
    other_order_min_limit_bytes: int  # in the other recording's order
    monotone: bool
    peak_in_use_bytes: int

    @property
    def spread_bytes(self) -> int:
        """How far the answer moves with the order of the few events the two recordings order differently."""
        return abs(self.min_limit_bytes - self.other_order_min_limit_bytes)

    band: OrderBand | None = None  # over the batch's plausible runs (memtrace.allocator.batch_band), where made


def batch_limit(scaling: BatchScaling, batch: int, options: BFCOptions) -> BatchLimit:
    """Batch ``batch``'s smallest limit (to the MiB), in the nearer recording's order and in the other's."""
    base = scaling.base_for(batch)
    other = "large" if base == "small" else "small"
    search: LimitSearch = search_min_limit(scaling.requests_at(batch, base), options)
    other_search = search_min_limit(scaling.requests_at(batch, other), options)
    peak = outcome(scaling.requests_at(batch, base), _with_limit(options, search.limit_bytes)).peak_in_use_bytes
    return BatchLimit(batch, search.limit_bytes, other_search.limit_bytes,
                      search.monotone and other_search.monotone, peak)


@dataclass(frozen=True)
class Card:
    """A card of ``size_gb`` GB: the limit TF would set on it (see :data:`CARDS_GB`), and the largest batch under it."""

    size_gb: int
    limit_bytes: int
    largest_batch: int
    largest_batch_always: int | None = None  # every plausible run fits (in each recording's own order); None: no band
    largest_batch_possible: int | None = None  # some plausible run fits


def table_batches(scaling: BatchScaling, upto_bytes: int, options: BFCOptions) -> list[int]:
    """Batch sizes for the table: B1, B2, then B2 doubled up to 16 times it, while it fits ``upto_bytes``."""
    b1, b2 = scaling.batch_sizes
    batches = [b1, b2]
    for factor in (2, 4, 8, 16):
        batches.append(b2 * factor)
        if not fits_at(scaling, b2 * factor, _with_limit(options, upto_bytes)):
            break
    return batches


# -- checking the prediction against a third recording -----------------------------------------

@dataclass(frozen=True)
class BatchCheck:
    """The prediction of batch ``batch`` held against a recording of it, size by size."""

    batch: int
    events: int  # of the recording
    aligned_events: int
    aligned_allocations: int
    equal_sizes: int
    differing: tuple[tuple[str, int, int], ...]  # (op, predicted, recorded) of each aligned allocation that differs
    predicted_min_limit_bytes: int
    recorded_min_limit_bytes: int  # the recording's own requests replayed through the model


def check(scaling: BatchScaling, recording: Requests, batch: int, options: BFCOptions) -> BatchCheck:
    """Align a recording of batch ``batch`` with its prediction and compare every aligned allocation's size."""
    predicted = scaling.requests_at(batch)
    rows_p, rows_r = align(predicted, recording)
    keep = predicted.is_alloc[rows_p] & recording.is_alloc[rows_r]
    rows_p, rows_r = rows_p[keep], rows_r[keep]
    want = predicted.requested_bytes[rows_p]
    got = recording.requested_bytes[rows_r]
    names = predicted.op_names
    differing = tuple(
        (names[int(predicted.op[p])] if int(predicted.op[p]) >= 0 else "", int(w), int(g))
        for p, w, g in zip(rows_p[want != got].tolist(), want[want != got].tolist(), got[want != got].tolist()))
    return BatchCheck(batch, len(recording), len(keep), int(keep.sum()), int((want == got).sum()), differing,
                      min_limit(predicted, options), min_limit(recording, options))


# -- batch sizes from the inputs' leading dimension --------------------------------------------

def batch_sizes_from_shapes(model_small: Requests, model_large: Requests, leading_small: np.ndarray,
                            leading_large: np.ndarray) -> tuple[int, int, int] | None:
    """(B1, B2, allocations that say so) from each allocation's leading dimension (-1 unknown), or None.

    Of the aligned allocations whose size differs, the most common pair of differing leading
    dimensions (B1 > B2 when the first recording has the larger batch: the caller says so).
    """
    rows_small, rows_large = align(model_small, model_large)
    keep = model_small.is_alloc[rows_small] & model_large.is_alloc[rows_large]
    rows_small, rows_large = rows_small[keep], rows_large[keep]
    differs = model_large.requested_bytes[rows_large] != model_small.requested_bytes[rows_small]
    d1, d2 = leading_small[rows_small][differs], leading_large[rows_large][differs]
    usable = (d1 > 0) & (d2 > 0) & (d1 != d2)
    if not usable.any():
        return None
    pairs, counts = np.unique(np.stack([d1[usable], d2[usable]], axis=1), axis=0, return_counts=True)
    best = int(np.argmax(counts))
    return int(pairs[best][0]), int(pairs[best][1]), int(counts[best])


def leading_dimensions(trace: TraceData, allocator: str, events: int) -> np.ndarray:
    """Each event's leading dimension of the tensor it allocated (-1: a free, or no shape known).

    The rows are those of :func:`memtrace.allocator.requests.requests_for`: a profile's events in order, or a
    StepStats trace's allocation records (each matched to its output, where it is); rows that do
    not line up give -1 everywhere.
    """
    dims = np.full(events, -1, dtype=np.int64)
    if allocator not in trace.allocators:
        return dims
    index = trace.allocators.index(allocator)
    outputs = trace.outputs
    if trace.message == "XSpace":
        rows = np.flatnonzero(trace.memory.allocator == index)
        if len(rows) != events:
            return dims
        mine = np.flatnonzero(outputs.allocator == index)
        out_of_node = np.full(len(trace.nodes), -1, dtype=np.int64)
        out_of_node[outputs.node[mine]] = mine
        out = out_of_node[trace.memory.node[rows]]
    else:
        from ..trace.buffers import buffers

        allocations = buffers(trace).allocations(allocator)
        if allocations.source != "records" or len(allocations.delta_bytes) != events:
            return dims
        out = np.full(events, -1, dtype=np.int64)
        out[allocations.alloc_event] = allocations.output_row
    shaped = np.flatnonzero(out >= 0)
    shaped = shaped[outputs.rank[out[shaped]] > 0]
    dims[shaped] = outputs.shape_dims[outputs.shape_offsets[out[shaped]]]
    return dims


# -- the answer for two traces -----------------------------------------------------------------

@dataclass(frozen=True)
class BatchFit:
    """``memtrace fit SMALL --vs LARGE`` for one allocator.

    ``fit`` describes batch ``described_batch``: the batch asked for; under a limit without one,
    ``largest_batch + 1`` (the first batch that does not fit, with its failure); with neither,
    the large recording's batch size. ``limits`` are the batches whose smallest limit was
    searched (the table, or the batches around the answer). What the two recordings do not say
    (:mod:`memtrace.allocator.batch_band`): ``only`` names each recording's requests the other
    lacks; under a limit, ``band`` holds the largest batch where every plausible run fits and where
    some does; with ``batch``, ``limit_band`` the limits over that batch's plausible runs; None
    with ``orders`` 0 (the prediction alone).
    """

    allocator: str
    batch_sizes: tuple[int, int]
    batch_sizes_from: str | None  # how the batch sizes were read from the traces, None when given
    scaling: BatchScaling
    batch: int | None
    largest_batch: int | None
    described_batch: int
    fit: FitResult
    limits: tuple[BatchLimit, ...]
    cards: tuple[Card, ...]
    check: BatchCheck | None
    cpu: bool  # TF's CPU BFC allocator (its limit is TF_CPU_BFC_MEM_LIMIT_IN_MB, not a card)
    assumptions: tuple[str, ...]
    only: tuple[OneRecordingOnly, OneRecordingOnly] | None = None
    band: LargestBand | None = None  # under a limit: the three largest batches (recorded only with orders 0)
    limit_band: OrderBand | None = None  # with --batch: the limits over its plausible runs
    orders: int = 0  # orders of each recording's requests the band replays (0: no band)

    @property
    def fits(self) -> bool:
        """The answer to the question asked, as the exit code gives it: batch ``batch`` fits, in every plausible run
        where a band was made (with ``batch``); under a limit without one, some batch fits in every plausible run
        (``largest_batch_always`` at least 1, else ``largest_batch``); with neither, True (each batch fits its own
        smallest limit). ``fit.fits`` is batch ``described_batch``'s own verdict, in the prediction."""
        if self.batch is not None:
            every = self.limit_band.all_fit if self.limit_band is not None else None
            return self.fit.fits and every is not False
        if self.largest_batch is not None:
            always = self.largest_batch_always
            return (self.largest_batch if always is None else always) >= 1
        return True

    @property
    def largest_batch_always(self) -> int | None:
        """Under a limit, the largest batch every plausible run of which fits (None: no band, or no limit)."""
        return None if self.band is None or self.band.always is None else self.band.always.batch

    @property
    def largest_batch_possible(self) -> int | None:
        """Under a limit, the largest batch some plausible run of which fits (None: no band, or no limit)."""
        return None if self.band is None or self.band.possible is None else self.band.possible.batch

    @property
    def extrapolated(self) -> float | None:
        """How far beyond the recorded batch sizes the answer lies (N / B2, or B1 / N below them); None within."""
        batch = self.batch if self.batch is not None else self.largest_batch
        if batch is None:
            return None
        return extrapolation(self.batch_sizes, max(batch, 1))


def _sizes_from_traces(small: TraceData, large: TraceData, allocator: str, first: Requests,
                       second: Requests) -> tuple[tuple[int, int], str]:
    found = batch_sizes_from_shapes(first, second, leading_dimensions(small, allocator, len(first)),
                                    leading_dimensions(large, allocator, len(second)))
    if found is None:
        raise BatchInputError(f"{small.path}, {large.path}: give the batch sizes (--batch-sizes B1,B2): the traces "
                              "carry no shapes whose leading dimension differs between them")
    b1, b2, count = found
    if b1 >= b2:
        raise BatchInputError(f"{small.path}, {large.path}: the inputs' leading dimension is {b1} in the first and "
                              f"{b2} in the second: give the smaller batch first")
    return (b1, b2), (f"read from the inputs' leading dimension ({b1} and {b2}, in {count:,} allocations that grow "
                      "and whose shapes the traces carry)")


def fit_batches(small: TraceData, large: TraceData, allocator: str, batch_sizes: Sequence[int] | None = None, *,
                batch: int | None = None, limit: int | None = None, allow_growth: bool | None = None,
                garbage_collection: bool | None = None, fragmentation_fraction: float | None = None,
                check_with: tuple[TraceData, int] | None = None, compute_capability: int = 8,
                orders: int = DEFAULT_BATCH_ORDERS, window_ns: int = DEFAULT_WINDOW_NS,
                seed: int = DEFAULT_SEED) -> BatchFit:
    """The largest batch under ``limit``, or whether batch ``batch`` fits, or the table of batch sizes and cards.

    ``small`` and ``large`` are two recordings of one step at ``batch_sizes`` (B1 < B2; read from
    the inputs' leading dimension when None and the traces carry shapes). Options left None take
    the defaults of the runtime that recorded ``small`` (TF's or XLA's). ``check_with`` = (trace, B3): a recording of a third batch
    size to hold the prediction to. ``compute_capability`` (major) decides TF's reserve on the cards.
    ``orders`` orders of each recording's requests make the band (:mod:`memtrace.allocator.batch_band`;
    0: the prediction alone), drawn within ``window_ns`` with ``seed``.
    """
    first, second = requests_for(small, allocator), requests_for(large, allocator)
    sizes_from = None
    if batch_sizes is None:
        batch_sizes, sizes_from = _sizes_from_traces(small, large, allocator, first.requests, second.requests)
    scaling = batch_scaling(first.requests, second.requests, batch_sizes, names=(small.path, large.path))
    if batch is not None and batch < 1:
        raise BatchInputError(f"--batch must be 1 or more, not {batch}")
    if orders < 0:
        raise BatchInputError(f"orders must be 0 or more, not {orders}")
    defaults = trace_defaults(small, allocator)
    try:
        options = defaults.options(limit if limit is not None else 0, allow_growth, garbage_collection,
                                   0.0 if fragmentation_fraction is None else fragmentation_fraction)
    except ValueError as error:
        raise UsageError(str(error)) from None
    given = limit is not None
    threads = (first.threads, second.threads)
    runs = PlausibleRuns(scaling, threads, options, orders, window_ns, seed) if orders else None
    largest = None
    band = None
    limit_bands: OrderBand | None = None
    card_rows: tuple[Card, ...] = ()
    if batch is not None:
        described = batch
        limits: tuple[BatchLimit, ...] = tuple(_limits_held(scaling, (batch,), options))
        if runs is not None and limits:  # (a batch beyond any limit the model holds has no band: it fits none)
            limit_bands = _limit_band(runs, batch, options.limit_bytes if given else None)
    elif given:
        band = _largest(lambda: largest_band(scaling, options, runs))
        largest = band.recorded.batch
        described = largest + 1
        limits = tuple(_limits_held(scaling, (largest, largest + 1), options))
    else:
        described = scaling.batch_sizes[1]
        # Each card's limit under this allocator's options (a CPU allocator's: the limit to set, not a card); the
        # band in each recording's own order only (one order of each: the cards lie far beyond the recordings).
        own = PlausibleRuns(scaling, threads, options, 1, window_ns, seed) if orders else None
        with many_replays():  # (hundreds of them)
            card_rows = _cards(scaling, own, options, compute_capability, defaults.runtime)
            limits = tuple(batch_limit(scaling, n, options)
                           for n in table_batches(scaling, card_rows[-1].limit_bytes, options))
            if own is not None:
                limits = tuple(replace(row, band=_limit_band(own, row.batch, None, _searched(scaling, row)))
                               for row in limits)
    result = _described(scaling, described, options, given, allocator, defaults.source, defaults.runtime)
    checked = None
    if check_with is not None:
        third, b3 = check_with
        checked = check(scaling, requests_for(third, allocator).requests, b3, options)
    notes = tuple(dict.fromkeys(first.assumptions + second.assumptions))
    return BatchFit(allocator, scaling.batch_sizes, sizes_from, scaling, batch, largest, described, result, limits,
                    card_rows, checked, defaults.limit_bytes is not None, notes,
                    runs.only if runs is not None else None, band, limit_bands, orders)


def _cards(scaling: BatchScaling, runs: PlausibleRuns | None, options: BFCOptions, compute_capability: int,
           runtime: str) -> tuple[Card, ...]:
    """The largest batches on each card of CARDS_GB, the smallest first: each card's searches start where the cards
    before it put the answers."""
    cards: list[Card] = []
    earlier: list[tuple[int, LargestBand]] = []
    for size_gb in CARDS_GB:
        limit_bytes = card_limit_bytes(size_gb * GB, compute_capability, runtime)
        found: LargestBand = _largest(partial(largest_band, scaling, _with_limit(options, limit_bytes), runs,
                                              budget_events=CARD_SCAN_BUDGET_EVENTS, earlier=tuple(earlier)))
        earlier.append((limit_bytes, found))
        cards.append(Card(size_gb, limit_bytes, found.recorded.batch,
                          None if found.always is None else found.always.batch,
                          None if found.possible is None else found.possible.batch))
    return tuple(cards)


def _searched(scaling: BatchScaling, row: BatchLimit) -> dict[str, int]:
    """A row's smallest limits by the recording whose order they are in (the band's recorded orders: the same search)."""
    near = scaling.base_for(row.batch)
    return {near: row.min_limit_bytes, "large" if near == "small" else "small": row.other_order_min_limit_bytes}


def _limit_band(runs: PlausibleRuns, batch: int, limit: int | None,
                known: dict[str, int] | None = None) -> OrderBand | None:
    """The band of limits over batch ``batch``'s plausible runs; None where some run fits no limit the model holds."""
    try:
        return limit_band(runs, batch, limit, known=known)
    except ValueError:
        return None


def _described(scaling: BatchScaling, batch: int, options: BFCOptions, given: bool, allocator: str, defaults: str,
               runtime: str) -> FitResult:
    """``memtrace fit``'s answer for batch ``batch``'s prediction. A batch whose requests fit no limit the model holds
    is described under the largest it holds (8 TiB), and a request above it is said at its true size."""
    requests = scaling.requests_at(batch)
    beyond = not given and requests.peak_rounded_live_bytes() > MAX_LIMIT_BYTES
    under = _with_limit(options, MAX_LIMIT_BYTES) if beyond else options
    result = fit_requests(requests, under, allocator=allocator, limit_given=given or beyond, defaults=defaults,
                          runtime=runtime)
    exact = scaling.exact_sizes_at(batch)
    clamped = requests.requested_bytes >= BEYOND_BYTES
    if not clamped.any():
        return result
    failure = result.failure
    if failure is not None and clamped[failure.row]:
        size = int(exact[failure.row])
        failure = replace(failure, requested_bytes=size, request_bytes=-(-size // 256) * 256)
    rounded = [-(-int(x) // 256) * 256 if a else 0 for x, a in zip(exact.tolist(), requests.is_alloc.tolist())]
    live, peak = 0, 0
    for row, (is_alloc, frees) in enumerate(zip(requests.is_alloc.tolist(), requests.frees.tolist())):
        live += rounded[row] if is_alloc else -rounded[frees] if frees >= 0 else 0
        peak = max(peak, live)
    return replace(result, failure=failure, requested_peak_bytes=peak)


def _limits_held(scaling: BatchScaling, batches: Sequence[int], options: BFCOptions) -> list[BatchLimit]:
    """The smallest limit of each batch (from 1) that has one the model holds: under a limit near 8 TiB, the first
    batch that does not fit may need more than the model holds (its failure says so; it has no row)."""
    found = []
    for n in batches:
        if n < 1:
            continue
        try:
            found.append(batch_limit(scaling, n, options))
        except ValueError:  # no limit the model holds fits batch n
            continue
    return found
