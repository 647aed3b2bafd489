"""The orders a run may take: one recording's events as a partial order, orders sampled from it, and the
band of limits over them.

A recording holds one order of an allocator's requests, but a runtime does not repeat its order:
ops run on several threads, and which of two independent ops allocates first is timing; XLA frees
a buffer when the GPU stream is done with it, sooner or later; under a tight limit a request that
fails waits for memory to come back (TF's ``AllocatorRetry``, up to 10 s) while other threads go
on. So :func:`memtrace.allocator.fit.fit`'s smallest limit under the recorded order is one sample,
and the next run may need more or less. This module says how much, from the recording itself.

**The partial order** (:func:`order_graph`). The recording's events are cut into *units*: events
that ran one after another on one thread for one op (a thread's run of events, cut where another
thread's event comes in between and where an allocation names another op; where the ops are
unknown, as in XLA's profiles, every allocation starts a unit). A unit must follow:

- *data*: the unit that allocated a buffer it frees (a buffer is freed after it was made, by its
  last reader, which ran after it);
- *program order*: the unit before it on its thread (a thread runs one op at a time; XLA's stream
  thread frees in the order the stream finishes).

Everything else is scheduling (independent ops on other threads, frees on a stream thread against
the host's allocations, an input pipeline's threads), and may come in another order within the
**scheduling window**: a unit that started more than the window after another, in the recording,
still comes after it. A recording whose units form one chain (one thread, or threads that hand
over to each other) has only its own order: its band is its recorded replay, and says so.

**The sampled orders** (:func:`sample_orders`): the recorded order, then orders drawn at random:
each unit's start moved later by a uniform amount up to the window, raised to the latest of what
it follows, the units put in order of those times. Seeded: the same recording gives the same orders.

**The retry** (:class:`_Retry`, a :class:`memtrace.allocator.bfc.Schedule`): replayed under a
limit, a request that fails waits; the units that do not depend on it go on (as far as the window
reaches beyond the earliest unfinished one), and after each free the waiting requests are tried
again. When nothing else can run and nothing was freed, the run is out of memory. The allocator's
rules are the model's (:mod:`.bfc`), with whatever options it is given (classic or partitioned).

**The band** (:func:`order_band`): per sampled order, the smallest limit under which it runs (the
same search as ``fit``'s, :func:`memtrace.allocator.bfc.search_min_limit`, each replay with the
retry); over the orders, ``always_fits_bytes`` (from it on, every sampled order ran at every limit
tried), ``never_fits_below_bytes`` (where the orders agree, their limit; where they disagree, the
fewest bytes any of them holds at once: real runs fitted below every replayed order there), and
the share of orders that run at each limit between. It is an estimate from the recordings given,
calibrated against TensorFlow's and XLA's own runs (docs/fit.md, "The orders a run may take";
``scripts/calibrate_orders.py``).

Speed: every drawn order keeps the recorded order up to where it first differs, so its replays
start from the recorded order's states there, one per limit (:class:`memtrace.allocator.bfc.SharedStart`),
and its search starts from the recorded order's answer: where that limit fits and the one below
does not, that is its answer. The band's replays are held to a budget (``BAND_BUDGET_EVENTS``).
``scripts/bench_fit.py --band`` measures it against a plain ``fit``.
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..trace.data import NO_OP, IntArray
from . import bfc
from .bfc import BFCOptions, Requests

DEFAULT_ORDERS = 32  # orders sampled from each recording, the recorded one included
DEFAULT_WINDOW_NS = 10_000_000  # the scheduling window (10 ms): see docs/fit.md for how it was calibrated
DEFAULT_SEED = 0
# Below the boundary its bisection finds, the search for the recorded order's smallest limit tries every
# limit while its replays cost at most this many events (fit's own may cost 5,000,000); the searches for the
# other sampled orders start from the recorded order's answer and take the boundary they find there.
RECORDED_BUDGET_EVENTS = 500_000
# The band's replays may cost about this many events in all (each limit a search tried counted as a whole
# replay): on a long recording with much to reorder, fewer orders are drawn, at least MIN_ORDERS of each
# recording, and the answer says how many.
BAND_BUDGET_EVENTS = 10_000_000
MIN_ORDERS = 4


@dataclass(frozen=True, eq=False)
class OrderGraph:
    """One recording's events as units and the partial order between them (see the module's docstring).

    Units are contiguous in the recorded order: unit ``u`` is rows ``unit_rows[u]:unit_rows[u + 1]``
    of ``requests``; unit ``u`` must follow ``preds[pred_offsets[u]:pred_offsets[u + 1]]``.
    """

    requests: Requests
    unit_rows: IntArray  # units + 1 offsets into the rows
    unit_time_ns: IntArray  # when each unit's first event happened (the recording's clock)
    pred_offsets: IntArray
    preds: IntArray
    threads: int  # threads the recording's events happened on
    window_ns: int

    @property
    def units(self) -> int:
        return len(self.unit_rows) - 1

    def reorderable(self) -> bool:
        """Whether some unit could come before a unit it follows in the recording: whether the recording's
        order is one of several (False: one chain of units, or every pair of units further apart than the window)."""
        n = self.units
        if n < 2:
            return False
        # Units ordered by the partial order form a chain where each follows the one before it in the
        # recording; a unit that does not, and started within the window of the one before, may swap with it.
        follows_previous = np.zeros(n, dtype=np.bool_)
        owner = np.repeat(np.arange(n), np.diff(self.pred_offsets))
        direct = self.preds == owner - 1
        follows_previous[owner[direct]] = True
        close = np.diff(self.unit_time_ns) <= self.window_ns
        return bool(np.any(~follows_previous[1:] & close))


def order_graph(requests: Requests, threads: IntArray | None, *, window_ns: int = DEFAULT_WINDOW_NS) -> OrderGraph:
    """The units of ``requests`` (one recording, in its order) and what each must follow.

    ``threads`` gives each row's thread (None: all on one, and the recorded order is the only one).
    """
    n = len(requests)
    thread = np.zeros(n, dtype=np.int64) if threads is None else np.asarray(threads, dtype=np.int64)
    if len(thread) != n:
        raise ValueError("one thread per request row")
    is_alloc = requests.is_alloc
    names = requests.op_names
    unknown = np.array([name in ("", NO_OP) for name in names] + [True], dtype=np.bool_)  # [-1]: no op
    op = requests.op.astype(np.int64)
    op_unknown = unknown[np.where(op >= 0, op, len(names))]
    starts = np.zeros(n, dtype=np.bool_)
    if n:
        starts[0] = True
        starts[1:] = thread[1:] != thread[:-1]
        # An allocation for another op than the one before it in the same run (or for an unknown op) starts a unit.
        allocs = np.flatnonzero(is_alloc)
        run = np.cumsum(starts)
        if len(allocs):
            new = op_unknown[allocs].copy()
            new[0] = True
            new[1:] |= (op[allocs[1:]] != op[allocs[:-1]]) | (run[allocs[1:]] != run[allocs[:-1]])
            starts[allocs[new]] = True
    first = np.flatnonzero(starts)
    unit_rows = np.append(first, n).astype(np.int64)
    units = len(first)
    unit_of = np.repeat(np.arange(units, dtype=np.int64), np.diff(unit_rows))
    unit_thread = thread[first] if units else np.zeros(0, dtype=np.int64)
    # Program order: each unit follows the one before it on its thread.
    by_thread = np.argsort(unit_thread, kind="stable")
    same = unit_thread[by_thread[1:]] == unit_thread[by_thread[:-1]]
    # Data: a unit that frees a buffer follows the unit that allocated it.
    freed = np.flatnonzero(~is_alloc & (requests.frees >= 0))
    src = np.concatenate([by_thread[:-1][same], unit_of[requests.frees[freed]]])
    dst = np.concatenate([by_thread[1:][same], unit_of[freed]])
    keep = src != dst
    # Each (unit, what it follows) once, by unit then predecessor: one integer a pair (units < 2**31), sorted.
    pairs = _sorted_unique(dst[keep].astype(np.int64) * max(units, 1) + src[keep])
    pair_dst, pair_src = np.divmod(pairs, max(units, 1))
    pred_offsets = np.searchsorted(pair_dst, np.arange(units + 1)).astype(np.int64)
    time = requests.time_ns[first].astype(np.int64) if units else np.zeros(0, dtype=np.int64)
    return OrderGraph(requests, unit_rows, time, pred_offsets, pair_src.astype(np.int64),
                      len(_sorted_unique(thread)) if n else 0, int(window_ns))


def _sorted_unique(values: IntArray) -> IntArray:
    """``np.unique`` of integers by sorting (numpy's own hashes them first, several times slower on large arrays)."""
    ordered = np.sort(values)
    return ordered[np.concatenate([[True], ordered[1:] != ordered[:-1]])] if len(ordered) else ordered


# -- sampled orders -------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class SampledOrder:
    """One order of a recording's units, its requests in that order, and what the retry needs to know."""

    graph: OrderGraph
    units: IntArray  # the units, in this order

    @functools.cached_property
    def requests(self) -> Requests:
        """The recording's requests in this order (frees renumbered), written when first replayed: the band stops
        drawing on orders once its budget is spent, and an order it never replays is never written."""
        return _in_order(self.graph, self.units)

    def schedule(self) -> bfc.ScheduleFactory:
        """The retry's schedule for a replay of :attr:`requests` (see :class:`_Retry`); what it needs to know
        beyond the order is worked out when a request first fails, once."""
        plans: list[_Plan] = []

        def plan() -> _Plan:
            if not plans:
                plans.append(_Plan.of(self))
            return plans[0]

        rows = len(self.requests)
        return lambda start: _Retry(plan, rows, start)

    def resized(self, requested_bytes: IntArray) -> SampledOrder:
        """This order of the same events with other sizes (``requested_bytes`` per row of the recorded order):
        a prediction of another batch size keeps the events, and so the orders drawn from them
        (:mod:`memtrace.allocator.batch_band`)."""
        q = self.graph.requests
        if len(requested_bytes) != len(q):
            raise ValueError("one size per request row")
        graph = replace(self.graph, requests=replace(q, requested_bytes=np.asarray(requested_bytes, dtype=np.int64)))
        return SampledOrder(graph, self.units)


def sample_orders(graph: OrderGraph, count: int, seed: int = DEFAULT_SEED) -> list[SampledOrder]:
    """``count`` orders of ``graph``'s units: the recorded one first, then orders drawn at random (seeded)."""
    rng = np.random.default_rng(seed)
    orders = []
    offsets, preds = graph.pred_offsets.tolist(), graph.preds.tolist()
    for index in range(count):
        shift = rng.uniform(0.0, float(graph.window_ns), graph.units) if index else np.zeros(graph.units)
        orders.append(SampledOrder(graph, _topological(graph.unit_time_ns + shift, offsets, preds)))
    return orders


def _topological(key: np.ndarray, offsets: list[int], preds: list[int]) -> IntArray:
    """The units in order of ``key`` as far as each follows what it must: a unit's key is raised to the largest
    of what it follows (every edge points forward in the recorded order, so one pass in that order does it),
    then the units are sorted by it, ties in recorded order."""
    if len(preds):
        owner = np.repeat(np.arange(len(key)), np.diff(np.asarray(offsets)))
        if bool(np.all(key[np.asarray(preds)] <= key[owner])):  # nothing to raise (the recorded order, in time order)
            return np.lexsort((np.arange(len(key)), key)).astype(np.int64)
    keys = key.tolist()
    for u in range(len(keys)):
        lo, hi = offsets[u], offsets[u + 1]
        if lo < hi:
            keys[u] = max(keys[u], *[keys[p] for p in preds[lo:hi]])
    return np.lexsort((np.arange(len(keys)), np.array(keys))).astype(np.int64)


def _in_order(graph: OrderGraph, units: IntArray) -> Requests:
    """The recording's requests with its units in the order given."""
    q = graph.requests
    lengths = np.diff(graph.unit_rows)[units]
    starts = graph.unit_rows[:-1][units]
    rows = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(int(lengths.sum()))
    if np.array_equal(rows, np.arange(len(q))):
        return q
    where = np.empty(len(rows), dtype=np.int64)
    where[rows] = np.arange(len(rows))
    frees = q.frees[rows]
    frees = np.where(frees >= 0, where[np.maximum(frees, 0)], -1)
    return Requests(q.is_alloc[rows], q.requested_bytes[rows], frees, q.op[rows], q.time_ns[rows], q.op_names,
                    None if q.upper_end is None else q.upper_end[rows],
                    None if q.alignment_bytes is None else q.alignment_bytes[rows])


def _first_difference(graph: OrderGraph, order: SampledOrder) -> int:
    """The first row at which ``order`` differs from the recorded order (the number of rows they share)."""
    moved = np.flatnonzero(order.units != np.arange(graph.units))
    return int(graph.unit_rows[moved[0]]) if len(moved) else len(graph.requests)


@dataclass(frozen=True, eq=False)
class _Drawn:
    """One recording's sampled orders as the band replays them (:func:`order_band`, :func:`orders_under_limit`)."""

    orders: list[SampledOrder]  # the recorded one first
    can_change: bool  # some unit could come before one it follows: more orders than the recorded one
    retry: bool  # whether a request may wait for another thread's free (TF's retry)
    # Every order keeps the recorded one up to where it first differs: the drawn orders' replays start from the
    # recorded order's states there (one per limit), not from the first request (None: none differs, or partitioned)
    shared: bfc.SharedStart | None

    def schedule(self, order: SampledOrder) -> bfc.ScheduleFactory | None:
        return order.schedule() if self.retry else None


def _drawn(graph: OrderGraph, count: int, seed: int, options: BFCOptions) -> _Drawn:
    can_change = graph.reorderable()
    sampled = sample_orders(graph, count if can_change else 1, seed)
    # Where no unit could come before one it follows in the recording, and the units began in time order, nothing
    # can run while a request waits: the retry serves the rows as the plain replay does.
    retry = can_change or not bool(np.all(np.diff(graph.unit_time_ns) >= 0))
    common = min((d for d in (_first_difference(graph, o) for o in sampled[1:]) if d < len(graph.requests)), default=0)
    shared = bfc.SharedStart(graph.requests, options, common) if common and not options.partitioned else None
    return _Drawn(sampled, can_change, retry, shared)


def _budget_spent(number: int, spent_events: int, recordings: int) -> bool:
    """Whether the band's replays of one recording's orders have spent their share of ``BAND_BUDGET_EVENTS`` (after
    at least ``MIN_ORDERS`` orders): the orders drawn so far make the band."""
    return number >= MIN_ORDERS and spent_events >= BAND_BUDGET_EVENTS // recordings


# -- the retry ------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class _Plan:
    """A sampled order as the retry walks it: units by position, each position's rows and predecessors."""

    rows: int
    starts: list[int]  # positions + 1 row offsets
    is_free: list[bool]  # per row
    time_ns: list[int]  # per position
    pred_offsets: IntArray  # predecessors by position
    preds: IntArray
    window_ns: int

    @classmethod
    def of(cls, order: SampledOrder) -> _Plan:
        g = order.graph
        position = np.empty(g.units, dtype=np.int64)
        position[order.units] = np.arange(g.units)
        lengths = np.diff(g.unit_rows)[order.units]
        starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        counts = np.diff(g.pred_offsets)[order.units]
        gather = np.repeat(g.pred_offsets[:-1][order.units] - np.cumsum(counts) + counts, counts) + np.arange(
            int(counts.sum()))
        preds = position[g.preds[gather]]
        return cls(len(order.requests), starts.tolist(), (~order.requests.is_alloc).tolist(),
                   g.unit_time_ns[order.units].tolist(), np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
                   preds, g.window_ns)


class _Retry:
    """TF's retry, as a :class:`memtrace.allocator.bfc.Schedule` over one sampled order.

    Until a request fails, the rows come in the sampled order. From the first failure on, units are
    taken in that order as far as each can run: a unit waits while something it follows has not
    finished (the waiting request's unit, or one waiting on it), and a unit that started more than
    the window after the earliest unfinished one waits too. After a free, the waiting requests are
    tried again, oldest first. When nothing can run and nothing was freed since the last try, the
    oldest waiting request is tried a last time and the replay stops there, out of memory.
    """

    def __init__(self, plan: Callable[[], _Plan], rows: int, start: int) -> None:
        self.plan = plan
        self.rows = rows
        self.start = start
        self.failed: int | None = None  # the row blocked() was told of, not yet taken up
        self.final = False  # the oldest waiting request, tried a last time, is the first row of the run
        self._begin = start  # the first row of the run handed out last

    def blocked(self, row: int) -> bool:
        if self.final and row == self._begin:
            return False
        self.failed = row
        return True

    def runs(self) -> Iterator[tuple[int, int]]:
        if self.start < self.rows:  # in order until a request fails
            yield self.start, self.rows
        if self.failed is None:
            return
        yield from self._waiting(self.failed)

    def _waiting(self, first_failure: int) -> Iterator[tuple[int, int]]:
        plan = self.plan()
        starts, is_free, time_ns, window = plan.starts, plan.is_free, plan.time_ns, plan.window_ns
        units = len(starts) - 1
        at = int(np.searchsorted(np.asarray(starts), first_failure, side="right")) - 1
        # Predecessors not yet finished, per unit after the failing one; successors to tell when one finishes.
        owner = np.repeat(np.arange(units), np.diff(plan.pred_offsets))
        later = owner > at
        unfinished = plan.preds >= at
        open_preds = np.bincount(owner[later & unfinished], minlength=units).tolist()
        pick = later & unfinished
        succ_sort = np.argsort(plan.preds[pick], kind="stable")
        succ_to = owner[pick][succ_sort]
        succ_from = plan.preds[pick][succ_sort]
        succ_offsets = np.searchsorted(succ_from, np.arange(units + 1)).tolist()
        succ = succ_to.tolist()

        waiting: list[tuple[int, int]] = [(at, first_failure)]  # (unit, the row it waits at)
        held: list[int] = []  # units passed over because something they follow has not finished, by position
        done = [False] * units
        for u in range(at):
            done[u] = True
        nxt = at + 1
        oldest = at  # the earliest unit not finished (for the window)
        freed = False
        self.failed = None

        def finish(u: int) -> None:
            done[u] = True
            for s in succ[succ_offsets[u]:succ_offsets[u + 1]]:
                open_preds[s] -= 1
                if not open_preds[s] and s < nxt:
                    heapq.heappush(held, s)

        while True:
            while oldest < units and done[oldest]:
                oldest += 1
            if freed and waiting:
                candidates, waiting, freed = waiting, [], False
            else:
                candidates = []
                horizon = time_ns[oldest] + window if oldest < units else 0
                chosen = -1
                if held and time_ns[held[0]] <= horizon:
                    chosen = heapq.heappop(held)
                while chosen < 0 and nxt < units and time_ns[nxt] <= horizon:
                    u = nxt
                    nxt += 1
                    if open_preds[u]:
                        continue  # held back until what it follows finishes (finish() hands it on)
                    chosen = u
                if chosen >= 0:
                    candidates = [(chosen, starts[chosen])]
            if not candidates:
                if not waiting:
                    return
                self.final = True  # nothing else can run: the oldest waiting request is tried a last time
                candidates = [waiting.pop(0)]
            for index, (u, first_row) in enumerate(candidates):
                self._begin = first_row
                end = starts[u + 1]
                yield first_row, end
                served_to = end if self.failed is None else self.failed  # the rows before it were served
                if served_to > first_row:
                    self.final = False
                    if not freed and any(is_free[first_row:served_to]):
                        freed = True
                if self.failed is not None:
                    waiting.append((u, self.failed))
                    self.failed = None
                else:
                    finish(u)
                if freed and index + 1 < len(candidates):
                    waiting.extend(candidates[index + 1:])  # tried again after this free, with the rest
                    break


# -- the band -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OrderLimit:
    """One sampled order's smallest limit (with the retry) and the limits its search replayed."""

    recording: int  # index into the recordings given
    recorded: bool  # the recording's own order
    min_limit_bytes: int
    tried: tuple[tuple[int, bool], ...]
    granularity: int = 1 << 20

    def fits(self, limit: int) -> bool:
        """Whether this order runs under ``limit``: as replayed where it was tried, else from its smallest limit."""
        known = dict(self.tried)
        return known.get(limit, limit >= self.min_limit_bytes)

    @property
    def always_from_bytes(self) -> int:
        """The limit from which every limit tried ran: the smallest limit, or above the largest that failed."""
        failing = [limit for limit, ok in self.tried if not ok and limit > self.min_limit_bytes]
        return max(failing) + self.granularity if failing else self.min_limit_bytes


@dataclass(frozen=True)
class OrderBand:
    """The limits over the orders a run may take (JSON ``band`` of ``memtrace.fit/1``)."""

    recordings: tuple[str, ...]
    recorded_limits: tuple[int, ...]  # each recording's smallest limit under its recorded order (no retry)
    orders: tuple[OrderLimit, ...]
    never_fits_below_bytes: int  # below it, no sampled order runs (see order_band)
    first_fit_bytes: int  # the smallest limit under which some sampled order runs, replayed
    always_fits_bytes: int
    fixed: bool  # no recording's order can change (one chain of units): the band is the recorded replay
    window_ns: int
    seed: int
    granularity: int
    limit_bytes: int | None = None  # the limit asked about, if any
    fitting_at_limit: int | None = None  # how many sampled orders run under it (each replayed there)
    fitting_at: tuple[tuple[int, int], ...] = ()  # (limit, orders that run there) for the limits asked, each replayed
    asked_orders: int = 0  # the orders asked for (beyond len(orders) where the band's budget was spent first)

    def share(self, limit: int) -> float:
        """The share of sampled orders that run under ``limit``."""
        return sum(o.fits(limit) for o in self.orders) / len(self.orders)

    def steps(self) -> list[tuple[int, int]]:
        """(limit, orders that run there) at each limit where the count changes, from the band's bottom up."""
        candidates = sorted({o.min_limit_bytes for o in self.orders} | {o.always_from_bytes for o in self.orders}
                            | {limit for o in self.orders for limit, _ in o.tried
                               if self.never_fits_below_bytes <= limit <= self.always_fits_bytes})
        found: list[tuple[int, int]] = []
        for limit in candidates:
            count = sum(o.fits(limit) for o in self.orders)
            if count and (not found or found[-1][1] != count):
                found.append((limit, count))
        return found

    @property
    def narrow(self) -> bool:
        """Every sampled order needs the same limit."""
        return self.never_fits_below_bytes == self.always_fits_bytes

    @property
    def all_fit(self) -> bool | None:
        """Every sampled order runs under the limit asked about (None: none was asked)."""
        return None if self.fitting_at_limit is None else self.fitting_at_limit == len(self.orders)


@dataclass(frozen=True, eq=False)
class Recording:
    """One recording of a step, ready for the band: its graph (its requests in its order), its name, and
    where already known, its allocator's options (region order) and its smallest limit under its own order."""

    path: str
    graph: OrderGraph
    options: BFCOptions | None = None  # None: the band's options
    min_limit_bytes: int | None = None  # None: searched for


def order_band(recordings: Sequence[Recording], options: BFCOptions, *, orders: int = DEFAULT_ORDERS,
               seed: int = DEFAULT_SEED, limit: int | None = None, granularity: int = 1 << 20,
               at_limits: Sequence[int] = ()) -> OrderBand:
    """The band over ``orders`` sampled orders of each recording (see the module's docstring).

    ``options`` are the allocator's (their limit is ignored: each order's smallest limit is searched
    for); with ``limit``, every sampled order is also replayed under it (:attr:`OrderBand.fitting_at_limit`),
    and under each of ``at_limits`` (:attr:`OrderBand.fitting_at`, with ``limit`` too: a table of shares
    replayed rather than read from the searches). Raises ValueError where some order fits under no
    limit the model holds.
    """
    asked = sorted({*at_limits, *(() if limit is None else (limit,))})
    if orders < 1:
        raise ValueError("at least one order")
    if not recordings:
        raise ValueError("no recording")
    found: list[OrderLimit] = []
    recorded: list[int] = []
    live: list[int] = []
    fixed = True
    counts: dict[int, int] = {}
    asked_orders = 0
    for index, recording in enumerate(recordings):
        graph = recording.graph
        own = recording.options or options
        recorded.append(recording.min_limit_bytes if recording.min_limit_bytes is not None else
                        bfc.search_min_limit(graph.requests, own, granularity).limit_bytes)
        sampling = _drawn(graph, orders, seed, own)
        shared = sampling.shared
        fixed = fixed and not sampling.can_change
        seen: dict[bytes, tuple[int, tuple[tuple[int, bool], ...], dict[int, bool]]] = {}
        asked_orders += len(sampling.orders)
        spent = 0
        for number, order in enumerate(sampling.orders):
            if _budget_spent(number, spent, len(recordings)):
                break
            key = order.units.tobytes()
            if key not in seen:  # an order drawn again (a recording with little to reorder) is not replayed again
                schedule = sampling.schedule(order)
                drawn = number > 0
                # the answers seen so far, the recorded order's first, the latest others after it (three at most)
                hints = [recorded[-1], *[least for least in dict.fromkeys(
                    o.min_limit_bytes for o in reversed(found) if o.recording == index) if least != recorded[-1]][:2]]
                search = bfc.search_min_limit(order.requests, own, granularity, extra_probes=1 if drawn else 2,
                                              budget_events=0 if drawn else RECORDED_BUDGET_EVENTS,
                                              schedule=schedule, hint=hints, shared=shared if drawn else None)
                tried = search.tried
                under: dict[int, bool] = {}
                for at in asked:  # replayed there too: a limit the search did not try may fail above the smallest
                    known = dict(tried).get(at)
                    if known is None:
                        known = bfc.fits(order.requests, replace(own, limit_bytes=at), schedule,
                                         shared if drawn else None)
                        tried = (*tried, (at, known))
                    under[at] = known
                seen[key] = (search.limit_bytes, tried, under)
                live.append(order.requests.peak_rounded_live_bytes())
                spent += len(search.tried) * len(order.requests)  # (the limits asked are replayed whatever it costs)
            least, tried, under = seen[key]
            found.append(OrderLimit(index, number == 0, least, tried, granularity))
            for at, ok in under.items():
                counts[at] = counts.get(at, 0) + ok
    first_fit = min(o.min_limit_bytes for o in found)
    always = max(o.always_from_bytes for o in found)
    # Where the sampled orders disagree, a run's timing decides, and under a tight limit TF's retry lets a run
    # wait for other threads' frees: real runs then fitted far below every replayed order (docs/fit.md). What
    # holds for every order is only that no limit below the bytes alive at once fits.
    floor = -(-min(live) // granularity) * granularity
    agree = len({o.min_limit_bytes for o in found}) == 1  # (one order may still fit again above a limit that fails)
    never = first_fit if agree else min(first_fit, max(floor, granularity))
    return OrderBand(tuple(r.path for r in recordings), tuple(recorded), tuple(found), never, first_fit, always,
                     fixed, recordings[0].graph.window_ns, seed, granularity, limit,
                     None if limit is None else counts[limit], tuple(sorted(counts.items())), asked_orders)


@dataclass(frozen=True)
class OrdersUnderLimit:
    """How many of the orders sampled from the recordings run under one limit, each replayed once there (JSON
    ``orders_under_limit`` of ``memtrace.fit/1``): the band's share under the limit, without its edges, which
    would take a search of each order (``memtrace fit --limit SIZE --no-smallest``)."""

    recordings: tuple[str, ...]
    limit_bytes: int
    fitting: int  # sampled orders that run under the limit (an order drawn twice counts twice, as in the band)
    sampled: int
    asked_orders: int  # beyond ``sampled`` where the budget was spent first
    fixed: bool  # no recording's order can change: the recorded orders are the only ones
    window_ns: int
    seed: int

    @property
    def all_fit(self) -> bool:
        return self.fitting == self.sampled


def orders_under_limit(recordings: Sequence[Recording], options: BFCOptions, limit: int, *,
                       orders: int = DEFAULT_ORDERS, seed: int = DEFAULT_SEED) -> OrdersUnderLimit:
    """Replay ``orders`` sampled orders of each recording once under ``limit``, as :func:`order_band` replays
    them there (the same orders, TF's retry, the states shared up to where they first differ; the same budget,
    each order counted as the one replay it costs here)."""
    if orders < 1:
        raise ValueError("at least one order")
    if not recordings:
        raise ValueError("no recording")
    fitting = sampled_count = asked = 0
    fixed = True
    for recording in recordings:
        graph = recording.graph
        own = replace(recording.options or options, limit_bytes=limit)
        sampling = _drawn(graph, orders, seed, own)
        fixed = fixed and not sampling.can_change
        asked += len(sampling.orders)
        seen: dict[bytes, bool] = {}
        spent = 0
        for number, order in enumerate(sampling.orders):
            if _budget_spent(number, spent, len(recordings)):
                break
            key = order.units.tobytes()
            if key not in seen:
                seen[key] = bfc.fits(order.requests, own, sampling.schedule(order), sampling.shared if number else None)
                spent += len(order.requests)
            fitting += seen[key]
            sampled_count += 1
    return OrdersUnderLimit(tuple(r.path for r in recordings), limit, fitting, sampled_count, asked, fixed,
                            recordings[0].graph.window_ns, seed)
