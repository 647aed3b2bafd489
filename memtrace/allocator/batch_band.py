"""What two recordings know about a batch size they did not record, and what they do not: the band of ``fit --vs``.

:mod:`.batch_size` writes batch N's requests from two recordings of one step at batch sizes B1 < B2
and replays them: one prediction, in one recording's order, with that recording's left-over requests
at their recorded size. The recordings support other runs of batch N just as well, and this module
replays those too, the way ``fit``'s band replays the orders a run may take (:mod:`.orders`):

- **The order.** Each recording's order (the prediction is written in the nearer one's) and orders
  drawn from each (:func:`memtrace.allocator.orders.sample_orders`, replayed with TF's retry,
  :meth:`memtrace.allocator.orders.SampledOrder.schedule`).
- **Requests in one recording only** (what the alignment left over: TF rewrites a graph differently
  at another batch size, names a few ops the other way round, a recording runs more steps):
  named (:func:`one_recording_only`) and bounded. *Without* them: their allocations, and the frees
  of those, left out. *Grown*: each taken for a batch-sized buffer, in proportion to the batch
  above the batch it was recorded at (a buffer affine in the batch, a + bN with a, b >= 0, is at
  most that there; at or below its batch, at most its recorded size).
- **Extrapolation.** Between B1 and B2 an allocation affine in the batch is predicted exactly.
  Beyond B2 the grown requests also take each growing allocation at the larger of its affine
  prediction and its size at B2 in proportion to the batch (a fixed part that was a floor, such
  as a minimum workspace, grows so); below B1, at its size at B1. The further from the recorded
  batch sizes, the wider the band; and the answer says where it is an extrapolation (nothing in two
  recordings says that TF asks for the same requests at a batch size neither shows).

The *plausible runs* of batch N (:class:`PlausibleRuns`) are then: for each recording, its order and
orders drawn from it, each with the prediction's requests, without the one-recording-only requests,
and grown (where those differ). Under a limit, a batch fits *always* where every plausible run
fits, *possibly* where some does. The band is an estimate, as ``fit``'s: a run of TensorFlow may take
requests neither recording shows.

**The largest batch** (:func:`largest_where`) is searched as ``fit`` searches the smallest limit:
doubling and bisection, then, since fitting need not be monotone in the batch (with growth, a larger
batch's regions can fall out better), every batch above the boundary up to the last whose bytes alive
at once stay under the limit (evenly spaced ones where that would cost more than ``SCAN_BUDGET_EVENTS``
replayed events, and then the answer says so): the answer is a batch no larger batch beats.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Protocol

import numpy as np

from ..trace.data import IntArray
from . import bfc
from .bfc import BFCOptions, Requests
from .orders import (
    DEFAULT_SEED,
    DEFAULT_WINDOW_NS,
    OrderBand,
    Recording,
    SampledOrder,
    order_band,
    order_graph,
    sample_orders,
)


class Prediction(Protocol):
    """What the band needs of a prediction (:class:`memtrace.allocator.batch_size.BatchScaling`, which imports this
    module): the two recordings, their aligned rows, and each batch's sizes and requests."""

    @property
    def small(self) -> Requests: ...
    @property
    def large(self) -> Requests: ...
    @property
    def batch_sizes(self) -> tuple[int, int]: ...
    @property
    def small_rows(self) -> np.ndarray: ...
    @property
    def large_rows(self) -> np.ndarray: ...
    @property
    def alloc_pairs(self) -> tuple[np.ndarray, np.ndarray]: ...
    def base_for(self, batch: int) -> str: ...
    def sizes_at(self, batch: int, base: str | None = None) -> np.ndarray: ...
    def requests_at(self, batch: int, base: str | None = None) -> Requests: ...

# The largest batch a search goes up to.
MAX_BATCH = 1 << 40
# A predicted request above what the model holds is replayed as this many bytes (no limit the model holds
# serves it); its true size is reported where it fails (BatchScaling.exact_sizes_at).
BEYOND_BYTES = bfc.MAX_LIMIT_BYTES + 256
# Above the boundary its bisection finds, the search for the largest batch tries every batch while its replays
# cost at most this many events, else evenly spaced ones (and says so); the cards' table, eight searches far
# beyond the recordings, tries fewer.
SCAN_BUDGET_EVENTS = 1_000_000
CARD_SCAN_BUDGET_EVENTS = 50_000
# TF's limits are whole MiB, and TensorFlow's own runs needed up to about that much more, or less, than every
# plausible run of their two recordings (fixtures/batches/ladders.json: the CNN at batch 68 ran out under 24 MiB,
# where every plausible run needs 23.9 MiB; at batch 37 it fitted 16 MiB, where they need 16.1): the largest batch
# every plausible run fits keeps this much to spare, and some run fits up to this much above the limit.
MARGIN_BYTES = 1 << 20
# Orders of each recording's requests, each recording's own included, for fit --vs's band: fewer than fit's
# (DEFAULT_ORDERS from one recording) since each batch's band replays three kinds of requests in two orders.
DEFAULT_BATCH_ORDERS = 8

KINDS = ("recorded", "without", "grown")
ALWAYS_KINDS = ("grown", "recorded", "without")  # the order a question "does every run fit?" asks them (likeliest to fail first)
POSSIBLY_KINDS = ("without", "recorded", "grown")  # and "does some run fit?" (likeliest to fit first)
Run = tuple[str, str, int]  # a plausible run whatever the batch: (base recording, kind of requests, order number)
KIND_WORDS = {"recorded": "the prediction's requests", "without": "without the requests in one recording only",
              "grown": "the requests in one recording only grown with the batch"}


# -- sizes that stay within what the model holds -------------------------------------------------

def clamp_sizes(sizes: np.ndarray) -> IntArray:
    """Sizes (int64, or Python ints in an object array) as int64, those above what the model holds at BEYOND_BYTES."""
    if sizes.dtype == object:
        sizes = np.array([min(max(int(s), 0), BEYOND_BYTES) for s in sizes.tolist()], dtype=np.int64)
    return np.minimum(np.maximum(sizes.astype(np.int64), 0), BEYOND_BYTES)


def scaled_up(sizes: IntArray, numerator: int, denominator: int) -> np.ndarray:
    """``ceil(sizes * numerator / denominator)``, exact: in Python ints where int64 would overflow."""
    if not len(sizes):
        return sizes.astype(np.int64)
    if int(np.abs(sizes).max()) * abs(numerator) < 1 << 62:
        return -(-(sizes.astype(np.int64) * numerator) // denominator)
    return np.array([-(-(int(s) * numerator) // denominator) for s in sizes.tolist()], dtype=object)


# -- requests in one recording only --------------------------------------------------------------

@dataclass(frozen=True)
class OnlyIn:
    """The allocations of one op that one recording holds and the alignment found no partner for."""

    op: str  # "" where unknown
    allocations: int
    largest_bytes: int
    total_bytes: int


@dataclass(frozen=True)
class OneRecordingOnly:
    """One recording's allocations that the other recording has no partner for (the alignment's left-overs)."""

    recording: str  # "small" or "large"
    batch: int
    rows: IntArray  # allocation rows of that recording
    ops: tuple[OnlyIn, ...]  # the most bytes first

    @property
    def allocations(self) -> int:
        return len(self.rows)

    @property
    def total_bytes(self) -> int:
        return sum(o.total_bytes for o in self.ops)


def one_recording_only(scaling: Prediction) -> tuple[OneRecordingOnly, OneRecordingOnly]:
    """Each recording's left-over allocations, by op (the most bytes first): what the other recording does not show."""
    found = []
    for name, requests, rows, batch in (("small", scaling.small, scaling.small_rows, scaling.batch_sizes[0]),
                                        ("large", scaling.large, scaling.large_rows, scaling.batch_sizes[1])):
        taken = np.zeros(len(requests), dtype=np.bool_)
        taken[rows] = True
        left = np.flatnonzero(requests.is_alloc & ~taken)
        by_op: dict[str, list[int]] = {}
        for row in left.tolist():
            code = int(requests.op[row])
            by_op.setdefault(requests.op_names[code] if code >= 0 else "", []).append(int(requests.requested_bytes[row]))
        ops = sorted((OnlyIn(op, len(sizes), max(sizes), sum(sizes)) for op, sizes in by_op.items()),
                     key=lambda o: (-o.total_bytes, o.op))
        found.append(OneRecordingOnly(name, batch, left.astype(np.int64), tuple(ops)))
    return found[0], found[1]


def without_rows(requests: Requests, dropped: IntArray) -> IntArray:
    """The rows kept when the allocations ``dropped`` leave, with the frees of them."""
    keep = np.ones(len(requests), dtype=np.bool_)
    keep[dropped] = False
    frees = ~requests.is_alloc & (requests.frees >= 0)
    keep[np.flatnonzero(frees)[~keep[requests.frees[frees]]]] = False
    return np.flatnonzero(keep).astype(np.int64)


def subsequence(requests: Requests, rows: IntArray) -> Requests:
    """The requests of ``rows`` (in order), the frees renumbered (a free of a row left out frees nothing)."""
    where = np.full(len(requests), -1, dtype=np.int64)
    where[rows] = np.arange(len(rows))
    frees = requests.frees[rows]
    frees = np.where(frees >= 0, where[np.maximum(frees, 0)], -1)
    return Requests(requests.is_alloc[rows], requests.requested_bytes[rows], frees, requests.op[rows],
                    requests.time_ns[rows], requests.op_names,
                    None if requests.upper_end is None else requests.upper_end[rows],
                    None if requests.alignment_bytes is None else requests.alignment_bytes[rows])


# -- the plausible runs of a batch ---------------------------------------------------------------

def extrapolation(batch_sizes: tuple[int, int], batch: int) -> float | None:
    """How far ``batch`` lies beyond the recorded batch sizes: N / B2 above, B1 / N below; None between."""
    b1, b2 = batch_sizes
    if batch > b2:
        return batch / b2
    if batch < b1:
        return b1 / max(batch, 1)
    return None


@dataclass(eq=False)
class PlausibleRuns:
    """The plausible runs of every batch size, from two recordings (see the module's docstring).

    ``orders`` orders of each recording (its own included) carry each kind of requests; the orders
    are drawn once, from each recording's events (a batch size changes sizes, not events) and
    replayed with each batch's sizes (:meth:`memtrace.allocator.orders.SampledOrder.resized`).
    """

    scaling: Prediction
    threads: tuple[IntArray | None, IntArray | None]
    options: BFCOptions
    orders: int = DEFAULT_BATCH_ORDERS
    window_ns: int = DEFAULT_WINDOW_NS
    seed: int = DEFAULT_SEED
    only: tuple[OneRecordingOnly, OneRecordingOnly] = field(init=False)
    _rows: dict[tuple[str, str], IntArray] = field(init=False, default_factory=dict)
    _drawn: dict[tuple[str, str], list[tuple[SampledOrder, int]]] = field(init=False, default_factory=dict)
    _seen: dict[tuple[int, int, str, str, int], bool] = field(init=False, default_factory=dict)
    _deciding: dict[bool, tuple[str, str, int]] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        if self.orders < 1:
            raise ValueError("at least one order")
        self.only = one_recording_only(self.scaling)

    # -- what each run is made of

    def _own(self, base: str) -> tuple[Requests, IntArray | None, OneRecordingOnly, int]:
        s = self.scaling
        index = 0 if base == "small" else 1
        return (s.small if base == "small" else s.large), self.threads[index], self.only[index], s.batch_sizes[index]

    def rows(self, base: str, kind: str) -> IntArray:
        """The base recording's rows a run of this kind replays."""
        key = (base, kind)
        if key not in self._rows:
            own, _, only, _ = self._own(base)
            self._rows[key] = without_rows(own, only.rows) if kind == "without" else np.arange(len(own), dtype=np.int64)
        return self._rows[key]

    def drawn(self, base: str, kind: str) -> list[tuple[SampledOrder, int]]:
        """The orders of this kind's events in the base recording, each distinct one once with how often it was drawn."""
        key = (base, kind)
        if key not in self._drawn:
            own, threads, _, _ = self._own(base)
            rows = self.rows(base, kind)
            events = own if len(rows) == len(own) else subsequence(own, rows)
            graph = order_graph(events, None if threads is None else threads[rows], window_ns=self.window_ns)
            first: dict[bytes, SampledOrder] = {}
            count: dict[bytes, int] = {}
            for order in sample_orders(graph, self.orders if graph.reorderable() else 1, self.seed):
                units = order.units.tobytes()
                first.setdefault(units, order)
                count[units] = count.get(units, 0) + 1
            self._drawn[key] = [(order, count[units]) for units, order in first.items()]
        return self._drawn[key]

    def sizes(self, batch: int, base: str, kind: str) -> IntArray | None:
        """Batch ``batch``'s requested bytes for a run of this kind, per row of :meth:`rows`; None where they are
        the prediction's own (nothing to leave out, or nothing grown)."""
        s = self.scaling
        predicted = s.sizes_at(batch, base)
        if kind == "recorded":
            return predicted
        own, _, only, own_batch = self._own(base)
        if kind == "without":
            return predicted[self.rows(base, kind)] if only.allocations else None
        grown = predicted.copy()
        if batch > own_batch and only.allocations:
            left = only.rows
            grown[left] = np.maximum(grown[left], clamp_sizes(scaled_up(own.requested_bytes[left], batch, own_batch)))
        b1, b2 = s.batch_sizes
        if batch > b2 or batch < b1:
            rows_small, rows_large = s.alloc_pairs
            mine = rows_small if base == "small" else rows_large
            s1 = s.small.requested_bytes[rows_small].astype(np.int64)
            s2 = s.large.requested_bytes[rows_large].astype(np.int64)
            growing = s2 > s1
            at = mine[growing]
            if batch > b2:
                grown[at] = np.maximum(grown[at], clamp_sizes(scaled_up(s2[growing], batch, b2)))
            else:
                grown[at] = np.maximum(grown[at], s1[growing])
        return None if np.array_equal(grown, predicted) else grown

    def runs(self, batch: int, kinds: Sequence[str] = KINDS) -> Iterator[tuple[str, str, int, SampledOrder, int]]:
        """(base, kind, order number, the run's order with batch ``batch``'s sizes, its weight) of each plausible run,
        the nearer recording's first; runs whose requests equal the prediction's are given as the prediction's."""
        near = self.scaling.base_for(batch)
        for base in (near, "large" if near == "small" else "small"):
            for kind in kinds:
                sizes = self.sizes(batch, base, kind)
                if sizes is None:
                    continue
                for number, (order, weight) in enumerate(self.drawn(base, kind)):
                    yield base, kind, number, order.resized(sizes), weight

    def total(self, batch: int) -> int:
        """How many plausible runs batch ``batch`` has (each drawn order counted as often as it was drawn)."""
        return sum(weight for *_, weight in self._shapes(batch))

    def _shapes(self, batch: int) -> Iterator[tuple[str, str, int]]:
        near = self.scaling.base_for(batch)
        for base in (near, "large" if near == "small" else "small"):
            for kind in KINDS:
                if kind != "recorded" and self.sizes(batch, base, kind) is None:
                    continue
                for _, weight in self.drawn(base, kind):
                    yield base, kind, weight

    # -- replays

    def fits(self, batch: int, limit: int, base: str, kind: str, number: int, order: SampledOrder) -> bool:
        """Whether one plausible run fits ``limit`` (replayed once, with TF's retry)."""
        key = (batch, limit, base, kind, number)
        if key not in self._seen:
            self._seen[key] = bfc.fits(order.requests, replace(self.options, limit_bytes=limit), order.schedule())
        return self._seen[key]

    def fitting(self, batch: int, limit: int) -> tuple[int, int]:
        """(plausible runs that fit ``limit``, plausible runs) of batch ``batch``."""
        count = total = 0
        for base, kind, number, order, weight in self.runs(batch):
            total += weight
            count += weight * self.fits(batch, limit, base, kind, number, order)
        return count, total

    def always(self, batch: int, limit: int) -> bool:
        """Every plausible run of batch ``batch`` fits ``limit`` (the one that last failed, then the grown ones, likeliest
        to fail, tried first)."""
        return self.deciding(batch, limit, ALWAYS_KINDS, False) is None

    def possibly(self, batch: int, limit: int) -> bool:
        """Some plausible run of batch ``batch`` fits ``limit`` (the one that last fitted, then those without the
        one-recording-only requests, tried first)."""
        return self.deciding(batch, limit, POSSIBLY_KINDS, True) is not None

    def deciding(self, batch: int, limit: int, kinds: Sequence[str], fitting: bool) -> Run | None:
        """The first run of batch ``batch`` (base, kind, order number) whose ``fits == fitting`` under ``limit``, or
        None: the run that decided the last question so first (the band's searches ask about neighbouring batches,
        whose runs fail and fit alike), then in the order of ``kinds``."""
        runs = list(self.runs(batch, kinds))
        last = self._deciding.get(fitting)
        runs.sort(key=lambda run: run[:3] != last)
        for base, kind, number, order, _ in runs:
            if self.fits(batch, limit, base, kind, number, order) == fitting:
                self._deciding[fitting] = (base, kind, number)
                return base, kind, number
        return None

    def run_fits(self, batch: int, limit: int, run: Run) -> bool:
        """Whether the plausible run ``run`` (base, kind, order number) of batch ``batch`` fits ``limit``; where its
        requests at this batch are the prediction's (nothing left over, nothing grown here), the recorded kind's."""
        base, kind, number = run
        sizes = self.sizes(batch, base, kind)
        if sizes is None:
            kind, sizes = "recorded", self.scaling.sizes_at(batch, base)
        order, _ = self.drawn(base, kind)[number]
        return self.fits(batch, limit, base, kind, number, order.resized(sizes))

    def likeliest(self, batch: int, kinds: Sequence[str], fitting: bool) -> Run:
        """The run likeliest to have ``fits == fitting`` near batch ``batch``: the one that last had, else the first of
        batch ``batch``'s in the order of ``kinds`` (the nearer recording's first)."""
        last = self._deciding.get(fitting)
        if last is not None:
            return last
        base, kind, number, *_ = next(self.runs(batch, kinds))
        return base, kind, number

    def least_live(self, batch: int) -> int:
        """The fewest bytes any plausible run of batch ``batch`` holds at once: no run fits below it."""
        return min(order.requests.peak_rounded_live_bytes()
                   for *_, order, _ in self.runs(batch, ("without", "recorded")))

    def recordings_at(self, batch: int, known: dict[str, int] | None = None) -> list[Recording]:
        """Batch ``batch``'s runs as :func:`memtrace.allocator.orders.order_band` takes recordings: one per recording and
        kind of requests (its events in its order, with batch ``batch``'s sizes), the nearer recording's first.
        ``known``: the smallest limit of the prediction's requests in a recording's order (by base), where searched
        already (:func:`memtrace.allocator.batch_size.batch_limit`): the same search of the same requests."""
        found = []
        near = self.scaling.base_for(batch)
        for base in (near, "large" if near == "small" else "small"):
            own, threads, _, own_batch = self._own(base)
            for kind in KINDS:
                sizes = self.sizes(batch, base, kind)
                if sizes is None:
                    continue
                rows = self.rows(base, kind)
                events = own if len(rows) == len(own) else subsequence(own, rows)
                events = replace(events, requested_bytes=sizes)
                graph = order_graph(events, None if threads is None else threads[rows], window_ns=self.window_ns)
                name = f"batch {own_batch:,}'s order" + ("" if kind == "recorded" else f", {KIND_WORDS[kind]}")
                found.append(Recording(name, graph, min_limit_bytes=(known or {}).get(base) if kind == "recorded" else None))
        return found

    def events(self, batch: int) -> int:
        """Events a replay of every plausible run of batch ``batch`` costs (what a scan's budget counts)."""
        return sum(len(self.rows(base, kind)) for base, kind, _ in self._shapes(batch))


# -- the largest batch, where fitting need not be monotone in the batch ----------------------------

@dataclass(frozen=True)
class LargestBatch:
    """The largest batch a question's test passes (0: not even batch 1), and how far that is known.

    Above ``boundary`` (where doubling and bisection put the edge) the batches up to ``top`` were
    tried, every ``step``-th (1: every one; 0: none, fitting taken for monotone); above ``top`` none
    can pass (the bytes alive at once exceed the limit). ``counterexample`` = (a batch that fails, a
    larger one that passes).
    """

    batch: int
    boundary: int
    top: int
    step: int
    counterexample: tuple[int, int] | None

    @property
    def monotone(self) -> bool:
        """No batch above one that fails passed, of those tried."""
        return self.counterexample is None

    @property
    def exhaustive(self) -> bool:
        """Every batch above the answer up to the last that could pass was tried: no larger batch passes."""
        return self.step == 1 or self.batch == self.top


def largest_where(passes: Callable[[int], bool], within: Callable[[int], bool], *, start: int, cost: Callable[[int], int],
                  budget_events: int = SCAN_BUDGET_EVENTS, hint: int | None = None) -> LargestBatch:
    """The largest batch that ``passes``, where ``within(n)`` is a cheap condition every passing batch meets and that
    holds for no batch above one where it fails (the bytes alive at once under the limit). ``start``: the first
    batch the doubling tries (the large recording's); ``cost(n)``: the replayed events a test of batch n costs;
    ``hint``: a batch near the answer (another search's), from which the search gallops up or down instead.

    Raises ValueError where batch MAX_BATCH still passes (the sizes hardly grow with the batch).
    """
    if not within(1):
        return LargestBatch(0, 0, 0, 1, None)
    # top: the last batch within, by doubling then bisection
    low, high = 1, max(2, start)
    while high <= MAX_BATCH and within(high):
        low, high = high, high * 2
    top = _bisect(within, low, min(high, MAX_BATCH + 1))
    # the boundary: doubling (or galloping from the hint) and bisection on the test, inside [1, top]
    if hint is not None and 1 < hint <= top:
        low, high = _gallop(passes, hint, top)
    elif passes(1):
        low, high = 1, min(max(2, start), top + 1)
        while high <= top and passes(high):
            low, high = high, min(high * 2, top + 1)
    else:
        low, high = 0, 1
    boundary = _bisect(passes, low, high)
    if boundary == MAX_BATCH:
        raise ValueError(f"batch {MAX_BATCH:,} still fits: the sizes hardly grow with the batch")
    # above it, every batch up to top (from the top down: the first that passes is the answer), within the budget;
    # a budget of 0 tries none of them (step 0: the boundary is the answer, fitting taken for monotone above it)
    span = top - boundary
    step = 1
    if span > 0 and budget_events <= 0:
        return LargestBatch(boundary, boundary, top, 0, None)
    if span > 0:
        per_batch = max(1, cost(top))
        step = max(1, -(-span * per_batch // budget_events))
    found, counter = boundary, None
    for n in range(top, boundary, -step):
        if passes(n):
            found, counter = n, (boundary + 1, n)
            break
    return LargestBatch(found, boundary, top, step, counter)


def limit_band(runs: PlausibleRuns, batch: int, limit: int | None = None, orders: int | None = None,
               known: dict[str, int] | None = None) -> OrderBand:
    """The band of limits over batch ``batch``'s plausible runs (``fit``'s band, :func:`memtrace.allocator.orders.order_band`,
    over one "recording" per recording and kind of requests), ``orders`` of each (default: the runs'), and under
    ``limit`` if one is asked about; ``known``: the prediction's smallest limits in each recording's order, where
    searched already. Raises ValueError where some run fits no limit the model holds."""
    return order_band(runs.recordings_at(batch, known), runs.options, orders=runs.orders if orders is None else orders,
                      seed=runs.seed, limit=limit)


def largest_recorded(scaling: Prediction, options: BFCOptions, base: str | None = None, *,
                     budget_events: int = SCAN_BUDGET_EVENTS, hint: int | None = None) -> LargestBatch:
    """The largest batch whose prediction fits ``options.limit_bytes`` (in ``base``'s order; default the nearer
    recording's at each batch): :func:`largest_where` with the prediction's replay as the test (galloping from
    ``hint`` where one is given)."""
    limit = options.limit_bytes

    def passes(n: int) -> bool:
        return bfc.fits(scaling.requests_at(n, base), options)

    bases = (base,) if base else ("small", "large")

    def within(n: int) -> bool:  # no batch above one whose bytes alive at once exceed the limit (in both orders) fits
        return min(scaling.requests_at(n, b).peak_rounded_live_bytes() for b in bases) <= limit

    return largest_where(passes, within, start=scaling.batch_sizes[1], cost=lambda n: len(scaling.requests_at(n, base)),
                         budget_events=budget_events, hint=hint)


def _bisect(test: Callable[[int], bool], low: int, high: int) -> int:
    """The last batch in [low, high) that passes ``test``, where ``low`` passes (or is 0) and ``high`` does not."""
    while high - low > 1:
        middle = (low + high) // 2
        if test(middle):
            low = middle
        else:
            high = middle
    return low


def _gallop(passes: Callable[[int], bool], hint: int, top: int) -> tuple[int, int]:
    """(a batch that passes or 0, a larger one that fails or top + 1), bracketing ``hint`` by steps that double."""
    step = 1
    if passes(hint):
        low = hint
        while low < top:
            high = min(low + step, top + 1)
            if high > top or not passes(high):
                return low, high
            low, step = high, step * 2
        return low, top + 1
    high = hint
    while True:
        low = max(high - step, 0)
        if low == 0 or passes(low):
            return low, high
        high, step = low, step * 2


@dataclass(frozen=True)
class LargestBand:
    """Under a limit: the largest batch in the prediction (``recorded``), the largest every plausible run of which
    fits with MARGIN_BYTES to spare (``always``), and the largest some plausible run of which fits under the limit
    and MARGIN_BYTES more (``possible``); None without a band."""

    recorded: LargestBatch
    always: LargestBatch | None
    possible: LargestBatch | None


def largest_band(scaling: Prediction, options: BFCOptions, runs: PlausibleRuns | None, *,
                 budget_events: int = SCAN_BUDGET_EVENTS, earlier: Sequence[tuple[int, LargestBand]] = ()) -> LargestBand:
    """The largest batches under ``options.limit_bytes`` (see :class:`LargestBand`); the prediction's search scans
    above its boundary for about ``budget_events`` replayed events at most. ``earlier``: (limit, answer) under
    other limits, smaller ones first (a table's cards): each search gallops from where they put its answer."""
    recorded = largest_recorded(scaling, options, budget_events=budget_events,
                                hint=_recorded_hint(earlier, options.limit_bytes))
    if runs is None:
        return LargestBand(recorded, None, None)
    low, high = options.limit_bytes - MARGIN_BYTES, min(options.limit_bytes + MARGIN_BYTES, bfc.MAX_LIMIT_BYTES)
    start = scaling.batch_sizes[1]

    def within_prediction(n: int) -> bool:  # every plausible run holds the prediction's bytes in one of its orders
        return min(scaling.requests_at(n, b).peak_rounded_live_bytes() for b in ("small", "large")) <= low

    # The band's edges lie near the prediction's answer: their searches gallop from it (or from where the earlier
    # answers put them), and bisect (a scan above each edge would replay every plausible run of every batch tried: the
    # prediction's answer is the one scanned).
    if low > 0:
        always = _band_edge(runs, low, within_prediction, start, _edge_hint(earlier, recorded.batch, "always"), False)
    else:
        always = LargestBatch(0, 0, 0, 1, None)
    possible = _band_edge(runs, high, lambda n: runs.least_live(n) <= high, start,
                          _edge_hint(earlier, recorded.batch, "possible"), True)
    return LargestBand(recorded, always, possible)


def _band_edge(runs: PlausibleRuns, limit: int, within: Callable[[int], bool], start: int, hint: int | None,
               some: bool) -> LargestBatch:
    """The largest batch every plausible run of which fits ``limit`` (``some``: some plausible run of which), by
    galloping and bisection on one run at a time (one replay a batch tried): the run that fails first (fits first),
    then the run that fails at its edge (fits the batch after it), from there, until none does."""
    kinds = POSSIBLY_KINDS if some else ALWAYS_KINDS
    at = _start(hint, within)
    run = (at and runs.deciding(at, limit, kinds, some)) or runs.likeliest(at or start, kinds, some)
    while True:
        found = largest_where(partial(runs.run_fits, limit=limit, run=run), within, start=start, cost=runs.events,
                              budget_events=0, hint=hint)
        at = found.batch + 1 if some else found.batch
        other = runs.deciding(at, limit, kinds, some) if 0 < at <= found.top else None
        if other is None:
            return found
        run, hint = other, at


def _start(hint: int | None, within: Callable[[int], bool]) -> int | None:
    """The batch a search gallops from: ``hint``, where :func:`largest_where` takes it (above batch 1, within)."""
    return hint if hint is not None and hint > 1 and within(hint) else None


def _recorded_hint(earlier: Sequence[tuple[int, LargestBand]], limit: int) -> int | None:
    """Where the prediction's largest batch under ``limit`` lies by the answers under other limits: on the line through
    the last two (batches grow about linearly with the limit), or in proportion to the limit from one."""
    known = [(under, band.recorded.batch) for under, band in earlier if band.recorded.batch > 0]
    if not known:
        return None
    (l1, b1), (l2, b2) = known[-2:] if len(known) > 1 else ((0, 0), known[-1])
    if l2 == l1:
        return None
    return max(1, round(b2 + (b2 - b1) * (limit - l2) / (l2 - l1)))


def _edge_hint(earlier: Sequence[tuple[int, LargestBand]], recorded: int, edge: str) -> int | None:
    """Where a search for a band's edge (``always`` or ``possible``) starts, on the side where its tests are cheap.

    At the prediction's answer ``recorded`` (where the edges' searches start without earlier answers) some plausible
    run, the prediction, fits the limit and the margin, and as a rule not every one fits the limit less the margin:
    some run's edge lies at or above it, where a test that passes is one replay (the run that fitted last); every
    run's at or below, where a test that fails is one (the run that failed last). Under the earlier limits the edge
    was a share of the prediction's answer (the band widens with the batch): the search starts at that share of
    ``recorded``, moved towards ``recorded`` by as much as the share missed the edge under the last limit (a miss
    not known yet: at ``recorded``), and never beyond it.
    """
    if recorded <= 0:
        return None
    share, was_share = _edge_share(earlier, edge), _edge_share(earlier[:-1], edge)
    if share is None or was_share is None:
        return recorded
    _, last = earlier[-1]
    found: LargestBatch = getattr(last, edge)
    miss = abs(found.batch - last.recorded.batch * was_share) * recorded / last.recorded.batch
    if edge == "always":
        return max(1, min(recorded, round(recorded * share + miss)))
    return max(recorded, round(recorded * share - miss))


def _edge_share(earlier: Sequence[tuple[int, LargestBand]], edge: str) -> float | None:
    """The band's edge as a share of the prediction's answer under the last limit of ``earlier`` (None: no answer)."""
    if not earlier:
        return None
    _, band = earlier[-1]
    found: LargestBatch | None = getattr(band, edge)
    return None if found is None or found.batch <= 0 or band.recorded.batch <= 0 else found.batch / band.recorded.batch
