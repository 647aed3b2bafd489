"""Would this step fit under that limit, and what would make it fit? The BFC model replayed on a trace's requests.

:func:`fit` takes one allocator's requests (:mod:`.requests`), replays them through the allocator
model (:mod:`.bfc`) under the options the runtime that recorded the trace would use (:mod:`.defaults`)
or the ones given, and answers: the smallest limit (to the MiB) under which every request is served,
the peak in use there, whether it fits a given limit and if not the first request that fails (with
the same verdict ``memtrace oom`` gives a dump, :mod:`.oom`), what changing an option would need,
and how well the model reproduces the allocator's own decisions where the trace records them
(:mod:`.reproduce`, run under the limit a profile's events show: ``bytes_available`` + ``bytes_allocated``).
Then, since a run does not repeat its order, the band over the orders the runtime may take
(:mod:`.orders`): from which limit every sampled order runs, below which none does; over several
recordings of one step with :func:`fit_recordings`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ..errors import UsageError
from ..trace.data import TraceData
from ..units import MIB
from . import bfc
from .bfc import BFCOptions, EndPolicy, Requests, Simulation
from .defaults import Settings, settings_for, trace_defaults
from .dump import Chunk, OomDump, Region
from .oom import analyse
from .orders import (
    DEFAULT_ORDERS,
    DEFAULT_SEED,
    DEFAULT_WINDOW_NS,
    OrderBand,
    OrdersUnderLimit,
    Recording,
    order_band,
    order_graph,
    orders_under_limit,
)
from .reproduce import Reproduction, reproduce
from .requests import TraceRequests, requests_for


@dataclass(frozen=True)
class FitOptions:
    """The options a replay ran under (``limit_bytes`` None: the smallest limit was searched for)."""

    limit_bytes: int | None
    allow_growth: bool
    garbage_collection: bool
    fragmentation_fraction: float
    partitioned: bool = False  # XLA's spatial partitioning
    gap_split: str = ""  # a partitioned pool's lower end: a central-gap carve "heuristic" or "exact"


def fit_options(limit_bytes: int | None, options: BFCOptions) -> FitOptions:
    return FitOptions(limit_bytes, options.allow_growth, options.garbage_collection, options.fragmentation_fraction,
                      options.partitioned, options.lower_end.gap_split if options.partitioned else "")


@dataclass(frozen=True)
class Effect:
    """Something about the runtime that bounds what replaying one recording can say (XLA's three, where they apply)."""

    name: str  # "partitioned_allocator", "compiled_for_limit", "order_of_frees"
    applies: bool
    words: str
    limit_bytes: int | None = None  # compiled_for_limit: the limit the recorded programs were compiled for, if known



@dataclass(frozen=True)
class FailureChunk:
    region: int
    offset: int
    size_bytes: int
    in_use: bool
    requested_bytes: int
    op: str
    tag: str = ""  # a partitioned pool's: "lower", "upper" or "central_gap"


@dataclass(frozen=True)
class Failure:
    """The first request the allocator could not serve, and its state at that instant."""

    row: int
    op: str
    requested_bytes: int
    request_bytes: int  # rounded
    time_ns: int
    in_use_bytes: int
    pool_bytes: int
    free_bytes: int  # free chunks + limit - pool
    largest_free_bytes: int
    verdict: str  # "fragmentation" or "exhausted", as memtrace oom decides
    missing_bytes: int
    regions: tuple[tuple[int, int], ...]
    chunks: tuple[FailureChunk, ...]
    end: str = ""  # a partitioned pool's: the end the request came from ("lower", "upper")
    usable_largest_free_bytes: int | None = None  # ... and the largest free chunk that end could use (holes, gap)
    # (region, number): the number a person reads, 1, 2, ... in address order, the lowest first, as the pictures and
    # memtrace oom number the regions (region is the model's id, in the order the regions were made)
    numbers: tuple[tuple[int, int], ...] = ()

    def number_of(self, region: int) -> int:
        return dict(self.numbers).get(region, region + 1)


@dataclass(frozen=True)
class Alternative:
    """One option changed, measured by replaying: does it fit the limit, and what limit it needs."""

    change: str  # e.g. "garbage_collection on"
    options: FitOptions
    fits: bool | None  # under the limit asked for; None when none was
    min_limit_bytes: int | None  # None: not searched for (asked only whether it fits: smallest=False)
    setting: str = ""  # how the runtime's user gets it (an environment variable, a flag); "" where there is no way


@dataclass(frozen=True)
class FitResult:
    """The answer for one allocator (JSON schema ``memtrace.fit/1``)."""

    allocator: str
    options: FitOptions
    defaults: str  # whose defaults filled in the options not given
    fits: bool
    # None: no limit the model holds (8 TiB) fits (only asked under a limit then), or not searched for (smallest False)
    min_limit_bytes: int | None
    monotone: bool  # False when a limit tried above the smallest failed
    counterexample: tuple[int, int] | None  # (a limit that fails, a smaller one that fits), when not monotone
    below_step_bytes: int  # the limits below the smallest were tried every this many bytes (1 MiB: all of them)
    peak_in_use_bytes: int  # under the limit given, else under the smallest limit
    pool_bytes: int  # the largest pool under that limit
    lost_bytes: int | None  # the smallest limit minus the peak in use at it: lost to fragmentation and rounding
    requested_peak_bytes: int  # the most rounded bytes ever alive at once: no allocator fits below it
    events: int
    allocations: int
    reproduced: Reproduction | None
    failure: Failure | None
    alternatives: tuple[Alternative, ...]
    assumptions: tuple[str, ...] = field(default=())
    runtime: str = "TensorFlow"  # whose defaults: "TensorFlow" or "XLA" (the runtime that recorded the trace)
    settings: str = ""  # whose settings the alternatives name, e.g. "TF CPU", "XLA (JAX) GPU"
    effects: tuple[Effect, ...] = ()  # for an XLA profile: which of XLA's three effects apply to this answer
    band: OrderBand | None = None  # over the orders a run may take (None: only the recorded order was replayed)
    recordings: tuple[FitResult, ...] = field(default=())  # fit_recordings: each recording's own answer, this one first
    paths: tuple[str, ...] = field(default=())  # and where each was read from
    # False: asked only whether the limit given fits (smallest=False): no smallest limit searched for, here, for the
    # alternatives or for the sampled orders, whose share under the limit is ``orders_under`` (``band`` None)
    smallest_searched: bool = True
    orders_under: OrdersUnderLimit | None = None

    @property
    def compiled_for_bytes(self) -> int | None:
        """The limit XLA compiled the recorded jit programs for, where that bounds the answer (a GPU profile XLA
        recorded under a known limit): every answer is for those programs, and XLA compiles others for other limits."""
        return next((e.limit_bytes for e in self.effects if e.name == "compiled_for_limit" and e.applies), None)

    @property
    def verdict(self) -> bool:
        """Whether the limit asked about holds: every sampled order runs under it where a band was made (else
        the recorded order does). Without a limit: True."""
        if self.options.limit_bytes is None:
            return True
        if self.band is not None and self.band.all_fit is not None:
            return self.band.all_fit and self.fits
        if self.orders_under is not None:
            return self.orders_under.all_fit and self.fits
        return self.fits


def fit(trace: TraceData, allocator: str, *, limit: int | None = None, allow_growth: bool | None = None,
        garbage_collection: bool | None = None, fragmentation_fraction: float | None = None,
        recorded_limit: int | None = None, alternatives: bool = True, partitioned: bool | None = None,
        gap_split: str | None = None, orders: int = DEFAULT_ORDERS, window_ns: int = DEFAULT_WINDOW_NS,
        seed: int = DEFAULT_SEED, smallest: bool = True) -> FitResult:
    """Fit ``allocator``'s requests in ``trace`` (see the module's docstring).

    Under a ``limit``, ``smallest`` False answers only whether it fits: one replay (two where it fails: the
    failure's map), one for each alternative and each sampled order; no smallest limit is searched for.

    ``orders`` orders of the recording are sampled for the band (:mod:`.orders`, within the
    scheduling window ``window_ns``); 0: only the recorded order is replayed (``band`` None).

    Options left None take the defaults of the runtime that recorded the trace, TF's or XLA's
    (:func:`trace_defaults`; XLA's GPU allocator is partitioned unless it grows). ``recorded_limit`` is the limit the trace was recorded under, for the
    self-check (default: the limit the profile's events show, where they show one, which is said
    where it is not the runtime's default (a GPU's, which depends on the card; a run under
    TF_CPU_BFC_MEM_LIMIT_IN_MB); else the runtime's default for the allocator; else, for a GPU, no
    self-check).
    """
    return fit_recordings([trace], allocator, limit=limit, allow_growth=allow_growth,
                          garbage_collection=garbage_collection, fragmentation_fraction=fragmentation_fraction,
                          recorded_limit=recorded_limit, alternatives=alternatives, partitioned=partitioned,
                          gap_split=gap_split, orders=orders, window_ns=window_ns, seed=seed, smallest=smallest)


def fit_recordings(traces: list[TraceData], allocator: str, *, limit: int | None = None,
                   allow_growth: bool | None = None, garbage_collection: bool | None = None,
                   fragmentation_fraction: float | None = None, recorded_limit: int | None = None,
                   alternatives: bool = True, partitioned: bool | None = None, gap_split: str | None = None,
                   orders: int = DEFAULT_ORDERS, window_ns: int = DEFAULT_WINDOW_NS, seed: int = DEFAULT_SEED,
                   at_limits: Sequence[int] = (), smallest: bool = True) -> FitResult:
    """Several recordings of one step: the first one's answer (:func:`fit`), each one's own smallest limit
    (``recordings``), and the band over ``orders`` sampled orders of each (their orders and their requests);
    every sampled order is replayed under each of ``at_limits`` too (``band.fitting_at``)."""
    if not traces:
        raise UsageError("no recording to fit")
    smallest = smallest or limit is None  # without a limit, the smallest is the question
    fitted = [_fit_one(trace, allocator, limit, allow_growth, garbage_collection, fragmentation_fraction,
                       recorded_limit, alternatives and number == 0, partitioned, gap_split, smallest)
              for number, trace in enumerate(traces)]
    first = fitted[0][0]
    for trace, (other, _, _) in zip(traces[1:], fitted[1:]):
        if (other.options, other.runtime) != (first.options, first.runtime):
            raise UsageError(f"{trace.path}: {allocator!r} was recorded by another runtime or with other options than "
                             f"in {traces[0].path}: not recordings of one step")
    paths = [trace.path for trace in traces]
    if not smallest:
        assert limit is not None
        under = _orders_under(fitted, paths, limit, orders, window_ns, seed) if orders else None
        return replace(first, orders_under=under, recordings=tuple(result for result, _, _ in fitted),
                       paths=tuple(paths))
    # Where no limit the model holds fits a recording, there are no limits to put in a band: the answer is that.
    banded = orders and all(result.min_limit_bytes is not None for result, _, _ in fitted)
    band = _band(fitted, paths, orders, window_ns, seed, at_limits) if banded else None
    return replace(first, band=band, recordings=tuple(result for result, _, _ in fitted), paths=tuple(paths))


def _band(fitted: list[tuple[FitResult, TraceRequests, BFCOptions]], paths: list[str], orders: int, window_ns: int,
          seed: int, at_limits: Sequence[int] = ()) -> OrderBand:
    """The band over the recordings' sampled orders, each replayed with its recording's own options (the region
    order its self-check found; the limit searched), and under the limit asked, if one was."""
    first = fitted[0][0]
    recordings = [Recording(path, order_graph(found.requests, found.threads, window_ns=window_ns), options,
                            result.min_limit_bytes) for path, (result, found, options) in zip(paths, fitted)]
    try:
        return order_band(recordings, fitted[0][2], orders=orders, seed=seed, limit=first.options.limit_bytes,
                          at_limits=at_limits)
    except ValueError as exc:  # an order beyond any limit the model holds (8 TiB)
        raise UsageError(f"{first.allocator}: {exc}") from None


def _orders_under(fitted: list[tuple[FitResult, TraceRequests, BFCOptions]], paths: list[str], limit: int,
                  orders: int, window_ns: int, seed: int) -> OrdersUnderLimit:
    """The share of the recordings' sampled orders that run under ``limit``, each replayed there once."""
    recordings = [Recording(path, order_graph(found.requests, found.threads, window_ns=window_ns), options)
                  for path, (_, found, options) in zip(paths, fitted)]
    try:
        return orders_under_limit(recordings, fitted[0][2], limit, orders=orders, seed=seed)
    except ValueError as exc:
        raise UsageError(f"{fitted[0][0].allocator}: {exc}") from None


def _fit_one(trace: TraceData, allocator: str, limit: int | None, allow_growth: bool | None,
             garbage_collection: bool | None, fragmentation_fraction: float | None, recorded_limit: int | None,
             alternatives: bool, partitioned: bool | None, gap_split: str | None,
             smallest: bool) -> tuple[FitResult, TraceRequests, BFCOptions]:
    """One recording's answer (:func:`fit`'s, without the band), its requests, and the options its replays take."""
    found = requests_for(trace, allocator)
    defaults = trace_defaults(trace, allocator)
    if partitioned and allow_growth is None and defaults.allow_growth:
        raise UsageError(f"{allocator}: spatial partitioning needs allow_growth off, and this allocator grows by default "
                         "(give --no-allow-growth as well to model it)")
    try:
        base = defaults.options(0, allow_growth, garbage_collection, fragmentation_fraction or 0.0, partitioned, gap_split)
        if limit is not None:  # refused here, before any replay, where wrong
            replace(base, limit_bytes=limit)
    except ValueError as exc:
        raise UsageError(f"{allocator}: {exc}") from None
    if recorded_limit is not None and not 0 <= recorded_limit <= bfc.MAX_LIMIT_BYTES:
        raise UsageError(f"the recorded limit {recorded_limit:,} bytes is "
                         + ("negative" if recorded_limit < 0 else "above what the model holds")
                         + f" (at most {bfc.MAX_LIMIT_BYTES:,} bytes, 8 TiB)")
    reproduced = None
    descending, order = False, tuple[int, ...]()
    notes = list(found.assumptions)
    if gap_split is not None and not base.partitioned:
        notes.append(f"the gap split ({gap_split}) does not apply: this allocator's pool is not partitioned")
    if defaults.partitioned and not base.partitioned and partitioned is None:
        notes.append("XLA partitions its pool only when it preallocates it: with allow_growth on "
                     "(XLA_PYTHON_CLIENT_PREALLOCATE=false), the replay is classic BFC")
    shown = trace.recorded_limit(allocator)
    if found.from_birth and found.addresses is not None:
        check_limit = recorded_limit if recorded_limit is not None else defaults.limit_bytes
        if recorded_limit is None and shown is not None and not 0 <= shown <= bfc.MAX_LIMIT_BYTES:
            # the events' stats add up to no limit the model holds (hostile, or a wrapped counter): not a limit to
            # check against, and the rest of the answer does not need it
            check_limit = None
            notes.append(f"the limit the profile's events show ({shown:,} bytes: bytes_available + bytes_allocated) "
                         f"is {'negative' if shown < 0 else 'beyond what the model holds (8 TiB)'}: no self-check; "
                         "give the limit it was recorded under with --recorded-limit")
        elif recorded_limit is None and shown is not None and shown != defaults.limit_bytes:
            check_limit = shown
            notes.append(f"the self-check runs under the limit the profile's events show ({shown:,} bytes: "
                         "bytes_available + bytes_allocated)")
        elif check_limit is None:
            notes.append("the limit this profile was recorded under is unknown (a GPU's depends on the card): no "
                         "self-check; give it with --recorded-limit")
        if check_limit is not None:
            reproduced = reproduce(found, replace(base, limit_bytes=check_limit))
            descending, order = reproduced.regions_descending, reproduced.region_order
            notes.extend(_partitioning_check(found, base, reproduced, partitioned))
    options = replace(base, limit_bytes=0 if limit is None else limit, regions_descending=descending,
                      region_order=order)
    result = fit_requests(found.requests, options, allocator=allocator, limit_given=limit is not None,
                          alternatives=alternatives, defaults=defaults.source, runtime=defaults.runtime, path=trace.path,
                          smallest=smallest)
    effects = xla_effects(result, defaults.device, shown if recorded_limit is None else recorded_limit) \
        if defaults.runtime == "XLA" else ()
    return (replace(result, reproduced=reproduced, assumptions=tuple(notes), effects=effects), found,
            replace(options, limit_bytes=0))


def _partitioning_check(found: TraceRequests, options: BFCOptions, reproduced: Reproduction,
                        asked: bool | None) -> list[str]:
    """Where the runtime's default about partitioning was taken and the profile's own decisions disagree with it
    but agree with the other choice, say so (an XLA older or newer than the recorded one may differ)."""
    if asked is not None or reproduced.exact or options.allow_growth:
        return []
    other = replace(options, limit_bytes=reproduced.limit_bytes, partitioned=not options.partitioned,
                    lower_end=EndPolicy())
    if not reproduce(found, other).exact:
        return []
    which = "--no-partitioning" if options.partitioned else "--partitioning"
    state = "off" if options.partitioned else "on"
    note = (f"the profile's own decisions agree with the model only with spatial partitioning {state}: this XLA may "
            f"build its allocator otherwise; give {which}")
    return [note]


def xla_effects(result: FitResult, device: str, recorded_limit: int | None) -> tuple[Effect, ...]:
    """Which of XLA's three effects bound this answer (docs/fit.md, "Real GPUs").

    The partitioned allocator (modelled, or not where it is off); the program compiled for the limit
    it ran under (a GPU's jit programs: XLA's scheduler and rematerialization aim at the allocator's
    limit, so the replay holds for that compilation); and the order of frees, which varies from run
    to run (XLA frees a buffer when the GPU stream is done with it).
    """
    o = result.options
    gpu = device == "GPU"
    if o.partitioned:
        split = ("handed out whole when under twice the request, as JAX 0.11.2 does" if o.gap_split == "heuristic"
                 else "split exactly, as openxla/xla's source does")
        part = ("the allocator partitions its pool (one central gap between a lower end growing up and an upper end "
                "growing down): modelled, every request here from the lower end, each reusing only the holes of its "
                f"own end before carving the gap, a small gap {split}")
    elif gpu:
        part = ("the allocator is modelled without partitioning (as XLA builds it with XLA_PYTHON_CLIENT_PREALLOCATE="
                "false or --xla_gpu_enable_allocator_spatial_partitioning=false); XLA's default pool is partitioned")
    else:
        part = "XLA does not partition this allocator (it grows)"
    recorded = f" ({recorded_limit:,} bytes)" if recorded_limit is not None else ""
    if gpu:
        compiled = (f"XLA compiled each jit program for the limit it ran under{recorded}: its scheduler and "
                    "rematerialization aim at (limit - parameters - outputs) x 95%, so the replay holds for the programs "
                    "as compiled for that limit. Under another limit XLA compiles other programs, which may need less "
                    "or more: a transformer recorded under 1,616 MiB needed 1,525 MiB by replay, yet the programs XLA "
                    "compiled for 1,550 MiB ran out of memory in 5 runs of 5, and programs compiled for 1,616 MiB "
                    "ran in 5 of 5 (an H200, fixtures/gpu-heldout). Record the run under the limit you ask about: "
                    "memtrace run --limit SIZE")
    else:
        compiled = "XLA does not compile for this allocator's limit (pinned host memory)"
    order = ("XLA frees a buffer when the GPU stream is done with it, so the order of frees, and with it the smallest "
             "limit, varies from run to run: the smallest limit is for this recording's order (one H200 MLP needed "
             "897, 929 or 961 MiB by its order), the band for the orders sampled from it; record the program several "
             "times for a band over all of their orders")
    return (Effect("partitioned_allocator", o.partitioned, part), Effect("compiled_for_limit", gpu, compiled,
                                                                              recorded_limit if gpu else None),
            Effect("order_of_frees", True, order))


def fit_requests(requests: Requests, options: BFCOptions, *, allocator: str = "", limit_given: bool = True,
                 alternatives: bool = True, defaults: str = "", runtime: str = "TensorFlow", path: str = "",
                 smallest: bool = True) -> FitResult:
    """Fit a request sequence not read from a trace (``memtrace fit --vs`` builds one per batch size).

    ``options.limit_bytes`` is the limit asked about, 0 as much as any other (nothing but 0-byte
    requests fits under it); with ``limit_given`` False none was (the options' limit is not read):
    the smallest limit is searched for and the rest is reported under it. (Where a limit is
    optional, :func:`fit`, ``Trace.fit``, ``assert_fits``, None says none was given; never 0.)
    The alternatives are the settings ``runtime`` offers for ``allocator`` (:func:`settings_for`).

    Where no limit the model holds (8 TiB) fits, the smallest limit is None: under a limit given,
    the requests simply do not fit; without one there is nothing to answer, a UsageError naming
    ``path`` (the trace) and the allocator.

    With a limit given, ``smallest`` False searches no smallest limit (nor the alternatives'): one replay says
    whether the requests fit, and where not, a second one records the failure's map.
    """
    given = limit_given
    searched = smallest or not given
    try:
        search: bfc.LimitSearch | None = bfc.search_min_limit(requests, options) if searched else None
    except ValueError as exc:  # requests beyond any limit the model holds (8 TiB)
        if not given:
            where = ": ".join(part for part in (path, allocator) if part) or "the requests"
            raise UsageError(f"{where}: {exc} (at most {bfc.MAX_LIMIT_BYTES:,} bytes, 8 TiB; the most bytes alive at "
                             f"once: {requests.peak_rounded_live_bytes():,}): there is no smallest limit to find") from None
        search = None
    # Replays that record nothing answer the rest (the search has replayed or proved most of these limits already);
    # only a failure, whose map is shown, is replayed recording its events.
    under = bfc.outcome(requests, options if given or search is None else _replace(options, search.limit_bytes))
    failure = _failure(requests, bfc.simulate(requests, options)) if not under.fits else None
    at_min = None if search is None else bfc.outcome(requests, _replace(options, search.limit_bytes))
    settings = settings_for(allocator, runtime)
    alts = _alternatives(requests, options, given, settings, searched) if alternatives else ()
    return FitResult(
        allocator=allocator,
        options=fit_options(options.limit_bytes if given else None, options),
        defaults=defaults, fits=under.fits, min_limit_bytes=None if search is None else search.limit_bytes,
        monotone=True if search is None else search.monotone,
        counterexample=None if search is None else search.counterexample(),
        below_step_bytes=MIB if search is None else search.below_step * MIB,
        peak_in_use_bytes=under.peak_in_use_bytes, pool_bytes=under.max_pool_bytes,
        lost_bytes=None if search is None or at_min is None else search.limit_bytes - at_min.peak_in_use_bytes,
        requested_peak_bytes=requests.peak_rounded_live_bytes(), events=len(requests),
        allocations=int(np.count_nonzero(requests.is_alloc)), reproduced=None, failure=failure, alternatives=alts,
        runtime=runtime, settings=settings.who, smallest_searched=searched,
    )


def _replace(options: BFCOptions, limit: int) -> BFCOptions:
    return replace(options, limit_bytes=limit)


def _changes(options: BFCOptions, settings: Settings) -> list[tuple[str, str, BFCOptions]]:
    """Each option the model can change, with the setting that changes it for this runtime and device.

    XLA's GPU allocator offers partitioning and preallocation (growth, which turns partitioning
    off), not garbage collection or the split fraction; TF's offer those (its CPU allocator none of
    them: they are measured all the same, with no setting named).
    """
    if settings.runtime == "XLA":
        changes = []
        if options.partitioned:
            changes.append(("spatial partitioning off", settings.partitioning_off,
                            replace(options, partitioned=False, lower_end=EndPolicy())))
        elif settings.partitioning_on and not options.allow_growth:
            changes.append(("spatial partitioning on", settings.partitioning_on, replace(options, partitioned=True)))
        if options.allow_growth:
            changes.append(("allow_growth off", settings.growth_off, replace(options, allow_growth=False)))
        else:
            changes.append(("allow_growth on" + (", spatial partitioning off" if options.partitioned else ""),
                            settings.growth_on, replace(options, allow_growth=True, partitioned=False,
                                                        lower_end=EndPolicy())))
        return changes
    gc_on = not options.garbage_collection
    changes = [
        ("garbage_collection " + ("on" if gc_on else "off"),
         settings.garbage_collection_on if gc_on else settings.garbage_collection_off,
         replace(options, garbage_collection=gc_on)),
        ("allow_growth " + ("off" if options.allow_growth else "on"),
         settings.growth_off if options.allow_growth else settings.growth_on,
         replace(options, allow_growth=not options.allow_growth)),
    ]
    for fraction in (0.0, 0.01, 0.1):
        if fraction != options.fragmentation_fraction:
            setting = f"{settings.fragmentation_fraction}={fraction:g}" if settings.fragmentation_fraction else ""
            changes.append((f"fragmentation_fraction {fraction:g}", setting,
                            replace(options, fragmentation_fraction=fraction)))
    return changes


def _alternatives(requests: Requests, options: BFCOptions, given: bool, settings: Settings,
                  smallest: bool) -> tuple[Alternative, ...]:
    found = []
    for change, setting, alt in _changes(options, settings):
        needed = None
        if smallest:
            try:
                needed = bfc.min_limit(requests, alt)
            except ValueError:  # no limit the model holds fits with this change
                continue
        ok = bfc.fits(requests, alt) if given else None
        found.append(Alternative(change, fit_options(options.limit_bytes if given else None, alt), ok, needed, setting))
    return tuple(found)


def _failure(requests: Requests, sim: Simulation) -> Failure:
    row = sim.failed_at
    assert row is not None
    code = int(requests.op[row])
    op = requests.op_names[code] if 0 <= code < len(requests.op_names) else ""
    requested = int(requests.requested_bytes[row])
    rounded = bfc.rounded_bytes(requested)
    end = ""
    if sim.options.partitioned:
        end = "upper" if requests.upper_end is not None and requests.upper_end[row] else "lower"
    by_region: dict[int, list[Chunk]] = {}
    for c in sim.chunks:
        by_region.setdefault(c.region, []).append(
            Chunk(c.offset, c.size_bytes, c.in_use, c.requested_bytes if c.in_use else None, None, c.op or None,
                  c.tag or None))
    dump = OomDump(path="", source="model", line=None, allocator=None, request_bytes=rounded, op=op or None,
                   regions=tuple(Region(size, tuple(by_region.get(r, ()))) for r, size in sim.regions),
                   limit_bytes=sim.options.limit_bytes, pool_bytes_reported=sim.pool_total_bytes, sum_in_use_bytes=sim.in_use_bytes,
                   request_end=end or None, runtime="XLA" if end else None)
    event = analyse(dump)
    return Failure(
        row=row, op=op, requested_bytes=requested, request_bytes=rounded, time_ns=int(requests.time_ns[row]),
        in_use_bytes=event.in_use_bytes, pool_bytes=event.pool_bytes or 0, free_bytes=event.free_bytes or 0,
        largest_free_bytes=event.largest_free_bytes or 0, verdict=event.verdict or "", missing_bytes=event.missing_bytes,
        regions=sim.regions,
        chunks=tuple(FailureChunk(c.region, c.offset, c.size_bytes, c.in_use, c.requested_bytes, c.op, c.tag)
                     for c in sim.chunks),
        end=end, usable_largest_free_bytes=event.usable_largest_free_bytes,
        numbers=tuple((region, number) for number, (region, _) in enumerate(
            sorted(sim.made_regions or sim.regions, key=lambda r: sim.options.address_slot(r[0])), 1)),
    )


