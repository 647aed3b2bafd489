"""Would this step fit under that limit, and what would make it fit? The BFC model replayed on a trace's requests.

:func:`requests_for` turns one allocator's events into the request sequence the allocator saw;
:func:`fit` replays it through :mod:`memtrace.bfc` under the options TF would use (or the ones
given), and answers: the smallest limit (to the MiB) under which every request is served, the
peak in use there, whether it fits a given limit and if not the first request that fails (with
the same verdict ``memtrace oom`` gives a dump), what changing an option would need, and how
well the model reproduces the allocator's own decisions where the trace records them.

What a trace gives:

- **A TF2 profile** (XSpace): every event of the allocator, in order, with the caller's
  ``requested_bytes``, the chunk (``allocation_bytes``, ``addr``), the bytes in use after it and
  TF's fragmentation value. Where the profile starts at the allocator's birth (its first event is
  an allocation and the bytes in use after it are its own chunk), the replay must reproduce every
  chunk (address relative to its region, size), every bytes-in-use and fragmentation value: the
  self-check (:class:`Reproduction`). Where it starts later, the model starts from an empty
  allocator with only the profile's requests, and frees of chunks allocated before it are dropped.
- **A profile XLA recorded** (JAX): the same events from XLA's own copy of the allocator, which
  it builds with its own options (:func:`defaults_for` with ``runtime="XLA"``).

Every profile's events show the allocator's limit (``bytes_available`` + ``bytes_allocated``): the
self-check runs under it.
- **A TF1 StepStats**: ``allocation_records`` (chunk sizes, alloc and free) and outputs
  (``requested_bytes``). A request is the output's ``requested_bytes`` where the record is matched
  to an output, else the record's chunk size (an upper bound on the request, by up to the chunk's
  unsplit remainder). The step starts from an empty allocator: what was in use before (variables,
  earlier steps) is not modelled. No self-check is possible.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field, replace

import numpy as np

from . import bfc
from .bfc import BFCOptions, Requests, Simulation
from .errors import UsageError
from .model import IntArray, TraceData
from .oom import analyse
from .oom_model import Chunk, OomDump, Region

MIB = 1 << 20
CPU_DEFAULT_LIMIT_BYTES = 65536 * MIB  # TF_CPU_BFC_MEM_LIMIT_IN_MB's default (process_state.cc)
_GPU_ALLOCATOR = re.compile(r"(?:.*:)?gpu_(\d+)_bfc", re.IGNORECASE)
_HOST_ALLOCATOR = re.compile(r"(?:.*:)?(?:cuda|gpu|pluggable_device)_host_bfc", re.IGNORECASE)
# TF_GPU_HOST_MEM_LIMIT_IN_MB's default (process_state.cc, GetGpuHostAllocator); older versions: 65,536 MiB.
HOST_DEFAULT_LIMIT_BYTES = 131072 * MIB

# TF's reserve on a GPU (gpu_device.cc, MinSystemMemory): 225 MiB under 2 GiB of free memory,
# else by compute capability major version: <= 6, 7, 8, and above (before about 2023: 1,536 MiB
# from 8 on). Doubled in debug builds.
_RESERVE_MIB = ((6, 500), (7, 1050), (8, 1536))
_RESERVE_ABOVE_MIB = 1800
_RESERVE_SMALL_MIB = 225


def gpu_reserve_bytes(free_bytes: int, compute_capability_major: int) -> int:
    """What TF leaves to the system on a GPU (``MinSystemMemory``) when no ``memory_limit`` is set."""
    if free_bytes < (1 << 31):
        return _RESERVE_SMALL_MIB * MIB
    for major, mib in _RESERVE_MIB:
        if compute_capability_major <= major:
            return mib * MIB
    return _RESERVE_ABOVE_MIB * MIB


def gpu_limit_bytes(free_bytes: int, compute_capability_major: int) -> int:
    """TF's GPU allocator limit on a card with ``free_bytes`` free: free minus the reserve (when the reserve is smaller)."""
    reserve = gpu_reserve_bytes(free_bytes, compute_capability_major)
    return free_bytes - reserve if reserve < free_bytes else free_bytes


def parse_compute_capability(text: str) -> int:
    """``"8.0"`` or ``"8"`` -> 8 (the major version is what TF's reserve depends on); a UsageError otherwise."""
    match = re.fullmatch(r"\s*(\d{1,3})(?:\.\d{1,3})?\s*", text)
    if match is None:
        raise UsageError(f"not a compute capability: {text!r} (write e.g. 8.0 or 7.5)")
    return int(match.group(1))


def bfc_allocators(trace: TraceData) -> list[str]:
    """The allocators ``fit`` looks at by default: every one of a profile (only BFC allocators write
    its events), else those named like BFC (``GPU_0_bfc``, ``bfc_cpu_allocator_for_gpu``) that left records."""
    if trace.message == "XSpace":
        return list(trace.allocators)
    have_records = set(np.unique(trace.records.allocator).tolist())
    return [name for index, name in enumerate(trace.allocators) if "bfc" in name.lower() and index in have_records]


@dataclass(frozen=True)
class Defaults:
    """The options the runtime that made an allocator gives it, and in whose words."""

    allow_growth: bool
    garbage_collection: bool
    limit_bytes: int | None  # None where it depends on the device (a GPU card)
    source: str
    runtime: str = "TensorFlow"  # or "XLA" (JAX and other PjRt clients build the allocator with their own options)


XLA_MEM_FRACTION = 0.75  # XLA_PYTHON_CLIENT_MEM_FRACTION's default (JAX 0.4 on; 0.9 before)
XLA_HOST_DEFAULT_LIMIT_BYTES = 64 << 30  # XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB's default (pjrt gpu_helpers.cc)
_XLA_HOST_ALLOCATOR = re.compile(r"(?:.*:)?xla_gpu_host_bfc", re.IGNORECASE)


def defaults_for(allocator: str, runtime: str = "TensorFlow") -> Defaults:
    """The options of an allocator by its name and the runtime that built it (:meth:`TraceData.runtime_of`).

    TensorFlow: GPU (``GPU_n_bfc``), pinned host memory (``gpu_host_bfc``, ``cuda_host_bfc``) or
    TF's CPU BFC (anything else). XLA (JAX's GPU client, pjrt's gpu_helpers.cc): its pinned host
    allocator (``xla_gpu_host_bfc``) or a device's (``GPU_n_bfc``, anything else).
    """
    if runtime == "XLA":
        if _XLA_HOST_ALLOCATOR.fullmatch(allocator):
            return Defaults(True, False, XLA_HOST_DEFAULT_LIMIT_BYTES, "XLA's pinned host allocator (JAX): allow_growth "
                            "on (off with XLA_PJRT_GPU_HOST_MEMORY_PREALLOCATE), garbage collection off, limit "
                            "XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB (default 64 GiB)", "XLA")
        return Defaults(False, False, None, "XLA's GPU allocator (JAX): allow_growth off (on with "
                        "XLA_PYTHON_CLIENT_PREALLOCATE=false), garbage collection off, limit the card's memory x "
                        "XLA_PYTHON_CLIENT_MEM_FRACTION (default 0.75)", "XLA")
    if _GPU_ALLOCATOR.fullmatch(allocator):
        return Defaults(False, True, None, "TF's GPU allocator: allow_growth off (TF_FORCE_GPU_ALLOW_GROWTH), "
                        "garbage collection on (TF_ENABLE_GPU_GARBAGE_COLLECTION)")
    if _HOST_ALLOCATOR.fullmatch(allocator):
        return Defaults(True, False, HOST_DEFAULT_LIMIT_BYTES, "TF's pinned host allocator for GPUs: allow_growth on, "
                        "garbage collection off, limit TF_GPU_HOST_MEM_LIMIT_IN_MB (default 131,072 MiB; older "
                        "versions: 65,536)")
    return Defaults(True, False, CPU_DEFAULT_LIMIT_BYTES, "TF's CPU BFC allocator (TF_CPU_ALLOCATOR_USE_BFC): "
                    "allow_growth on, garbage collection off, limit TF_CPU_BFC_MEM_LIMIT_IN_MB (default 65,536 MiB)")


def trace_defaults(trace: TraceData, allocator: str) -> Defaults:
    """:func:`defaults_for` the runtime that recorded ``allocator``'s events in ``trace`` (XLA's or TF's)."""
    return defaults_for(allocator, trace.runtime_of(allocator))


def card_limit_bytes(card_bytes: int, compute_capability_major: int, runtime: str = "TensorFlow") -> int:
    """The limit a runtime gives its GPU allocator on a card of ``card_bytes``: TF's, the card minus its
    reserve (:func:`gpu_limit_bytes`); XLA's, the card x XLA_PYTHON_CLIENT_MEM_FRACTION's default."""
    if runtime == "XLA":
        return int(card_bytes * XLA_MEM_FRACTION)
    return gpu_limit_bytes(card_bytes, compute_capability_major)


@dataclass(frozen=True, eq=False)
class TraceRequests:
    """One allocator's requests as read from a trace, with the allocator's own decisions where the trace has them."""

    allocator: str
    requests: Requests
    source: str  # "profile" or "records"
    from_birth: bool
    bytes_before: int  # bytes in use before the first event (what the model leaves out)
    dropped_frees: int  # frees of chunks allocated before the trace
    assumptions: tuple[str, ...]
    # per row, from a profile (None for a StepStats): chunk address, chunk size, bytes in use after, TF's fragmentation
    addresses: IntArray | None = None
    chunk_bytes: IntArray | None = None
    bytes_in_use: IntArray | None = None
    fragmentation: np.ndarray | None = None


def requests_for(trace: TraceData, allocator: str) -> TraceRequests:
    """The request sequence ``allocator`` saw in ``trace``; a UsageError when it made none."""
    if allocator not in trace.allocators:
        raise UsageError(f"{trace.path}: no allocator {allocator!r} in this trace (it has: "
                         f"{', '.join(trace.allocators) or 'none'})")
    index = trace.allocators.index(allocator)
    found = _from_profile(trace, allocator, index) if trace.message == "XSpace" else _from_records(trace, allocator)
    if not found.requests.is_alloc.any():
        raise UsageError(f"{trace.path}: the allocator {allocator!r} made no allocations in this trace: nothing to fit")
    return found


def _from_profile(trace: TraceData, allocator: str, index: int) -> TraceRequests:
    memory = trace.memory
    rows = np.flatnonzero(memory.allocator == index)  # one memory row per event, in event order
    nodes = memory.node[rows]
    n = len(rows)
    outputs = trace.outputs
    out_rows = np.flatnonzero(outputs.allocator == index)
    out_of_node = np.full(len(trace.nodes), -1, dtype=np.int64)
    out_of_node[outputs.node[out_rows]] = out_rows
    out = out_of_node[nodes]
    is_alloc = out >= 0
    in_use = memory.bytes_in_use[rows].astype(np.int64)
    size = np.zeros(n, dtype=np.int64)
    size[is_alloc] = outputs.allocated_bytes[out[is_alloc]]
    requested = np.zeros(n, dtype=np.int64)
    requested[is_alloc] = outputs.requested_bytes[out[is_alloc]]
    addresses = np.zeros(n, dtype=np.int64)
    addresses[is_alloc] = outputs.ptr[out[is_alloc]].astype(np.int64)
    # Each allocation's free sits as the second record of its memory row (at the free's time);
    # a free with a record of its own freed a chunk from before the profile.
    offsets = memory.record_offsets
    counts = offsets[rows + 1] - offsets[rows]
    # A free's chunk: its own record's bytes, else the drop in bytes in use it made.
    previous = np.concatenate([[0], in_use[:-1]])
    size[~is_alloc] = (previous - in_use)[~is_alloc]
    own = np.flatnonzero(~is_alloc & (counts == 1))
    size[own] = -trace.records.bytes[offsets[rows[own]]]
    from_birth = bool(n) and bool(is_alloc[0]) and int(in_use[0]) == int(size[0])
    bytes_before = int(in_use[0] - size[0]) if n and is_alloc[0] else (int(in_use[0] + size[0]) if n else 0)
    frees = np.full(n, -1, dtype=np.int64)
    freed_allocs = np.flatnonzero(is_alloc & (counts == 2))
    paired_frees = np.flatnonzero(~is_alloc & (counts == 0))
    free_time = trace.records.time_ns[offsets[rows[freed_allocs]] + 1] - trace.step_start_ns
    time_ns = trace.nodes.start_ns[nodes].astype(np.int64) - trace.step_start_ns
    a_order = np.lexsort((freed_allocs, size[freed_allocs], free_time))
    f_order = np.lexsort((paired_frees, size[paired_frees], time_ns[paired_frees]))
    a_sorted, f_sorted = freed_allocs[a_order], paired_frees[f_order]
    assumptions = []
    if len(a_sorted) != len(f_sorted) or not (
            np.array_equal(free_time[a_order], time_ns[f_sorted]) and np.array_equal(size[a_sorted], size[f_sorted])):
        raise UsageError(f"{trace.path}: the frees of {allocator!r} cannot be matched to its allocations")
    frees[f_sorted] = a_sorted
    dropped = int(np.count_nonzero(~is_alloc & (counts == 1)))
    if not from_birth:
        what = "the profile" if trace.step is None else f"step {trace.step}"
        assumptions.append(
            f"{what} starts after the allocator's birth ({bytes_before:,} bytes were in use before its first "
            f"event): the model starts from an empty allocator with only {what}'s requests"
            + (f", and drops {dropped:,} frees of chunks allocated before it" if dropped else ""))
    ops = _op_codes(trace, nodes, is_alloc)
    return TraceRequests(
        allocator=allocator,
        requests=Requests(is_alloc, requested, frees, ops[0], time_ns, ops[1]),
        source="profile", from_birth=from_birth, bytes_before=bytes_before, dropped_frees=dropped,
        assumptions=tuple(assumptions), addresses=addresses, chunk_bytes=size, bytes_in_use=in_use,
        fragmentation=memory.fragmentation[rows].astype(np.float64),
    )


def _op_codes(trace: TraceData, nodes: np.ndarray, is_alloc: np.ndarray) -> tuple[np.ndarray, tuple[str, ...]]:
    names = trace.nodes.name[nodes]
    distinct, codes = np.unique(names, return_inverse=True)
    op_names = tuple(trace.strings[int(s)] for s in distinct)
    codes = np.where(is_alloc, codes, -1).astype(np.int32)
    return codes, op_names


def _from_records(trace: TraceData, allocator: str) -> TraceRequests:
    from .buffers import buffers

    flow = buffers(trace)
    allocations = flow.allocations(allocator)
    if allocations.source != "records":
        raise UsageError(f"{trace.path}: the allocator {allocator!r} left no allocation records, so the order of its "
                         "requests is unknown: nothing to fit")
    n = len(allocations.delta_bytes)
    delta = allocations.delta_bytes.astype(np.int64)
    is_alloc = delta > 0
    requested = np.where(is_alloc, delta, 0)
    frees = np.full(n, -1, dtype=np.int64)
    paired = allocations.free_event >= 0
    frees[allocations.free_event[paired]] = allocations.alloc_event[paired]
    with_output = allocations.output_row >= 0
    asked = trace.outputs.requested_bytes[allocations.output_row[with_output]]
    ev = allocations.alloc_event[with_output]
    requested[ev] = np.where((asked > 0) & (asked <= delta[ev]), asked, delta[ev])
    dropped = len(allocations.unpaired_free_events)
    guessed = int(np.count_nonzero(is_alloc)) - int(np.count_nonzero(with_output))
    ops = _op_codes(trace, allocations.event_node, is_alloc)
    notes = ["a StepStats trace starts after the allocator's birth: the model starts from an empty allocator with "
             "only the step's requests (what was in use before the step is left out)"
             + (f", and drops {dropped:,} frees of chunks allocated before the step" if dropped else "")]
    if guessed:
        notes.append(f"{guessed:,} of the allocations match no output, so their chunk size (from allocation_records) "
                     "stands for the request")
    return TraceRequests(allocator=allocator, requests=Requests(is_alloc, requested, frees, ops[0],
                         allocations.time_ns.astype(np.int64) - trace.step_start_ns, ops[1]),
                         source="records", from_birth=False, bytes_before=0, dropped_frees=dropped,
                         assumptions=tuple(notes))


# -- the result ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class FitOptions:
    """The options a replay ran under (``limit_bytes`` None: the smallest limit was searched for)."""

    limit_bytes: int | None
    allow_growth: bool
    garbage_collection: bool
    fragmentation_fraction: float


@dataclass(frozen=True)
class Reproduction:
    """How much of the allocator's own decisions the model reproduces, event by event."""

    allocations: int
    addresses_equal: int  # address relative to its region
    chunks_equal: int  # allocation_bytes
    events: int
    bytes_in_use_equal: int
    fragmentation_equal: int  # NaN equals NaN
    regions_descending: bool
    region_order: tuple[int, ...]  # each region's address rank where neither ascending nor descending; () otherwise
    limit_bytes: int  # the limit the replay ran under
    first_difference: str | None
    # The replay compared, under the region order learned (for the regions frag measures holes in).
    simulation: Simulation = field(repr=False, compare=False)

    @property
    def exact(self) -> bool:
        return (self.addresses_equal == self.chunks_equal == self.allocations
                and self.bytes_in_use_equal == self.fragmentation_equal == self.events)


@dataclass(frozen=True)
class FailureChunk:
    region: int
    offset: int
    size_bytes: int
    in_use: bool
    requested_bytes: int
    op: str


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


@dataclass(frozen=True)
class Alternative:
    """One option changed, measured by replaying: does it fit the limit, and what limit it needs."""

    change: str  # e.g. "garbage_collection on"
    options: FitOptions
    fits: bool | None  # under the limit asked for; None when none was
    min_limit_bytes: int


@dataclass(frozen=True)
class FitResult:
    """The answer for one allocator (JSON schema ``memtrace.fit/1``)."""

    allocator: str
    options: FitOptions
    defaults: str  # whose defaults filled in the options not given
    fits: bool
    min_limit_bytes: int
    monotone: bool  # False when a limit tried above the smallest failed
    counterexample: tuple[int, int] | None  # (a limit that fails, a smaller one that fits), when not monotone
    below_step_bytes: int  # the limits below the smallest were tried every this many bytes (1 MiB: all of them)
    peak_in_use_bytes: int  # under the limit given, else under the smallest limit
    pool_bytes: int  # the largest pool under that limit
    lost_bytes: int  # the smallest limit minus the peak in use at it: lost to fragmentation and rounding
    requested_peak_bytes: int  # the most rounded bytes ever alive at once: no allocator fits below it
    events: int
    allocations: int
    reproduced: Reproduction | None
    failure: Failure | None
    alternatives: tuple[Alternative, ...]
    assumptions: tuple[str, ...] = field(default=())
    runtime: str = "TensorFlow"  # whose defaults: "TensorFlow" or "XLA" (the runtime that recorded the trace)


def fit(trace: TraceData, allocator: str, *, limit: int | None = None, allow_growth: bool | None = None,
        garbage_collection: bool | None = None, fragmentation_fraction: float | None = None,
        recorded_limit: int | None = None, alternatives: bool = True) -> FitResult:
    """Fit ``allocator``'s requests in ``trace`` (see the module's docstring).

    Options left None take the defaults of the runtime that recorded the trace, TF's or XLA's
    (:func:`trace_defaults`). ``recorded_limit`` is the limit the trace was recorded under, for the
    self-check (default: the limit the profile's events show, where they show one, which is said
    where it is not the runtime's default (a GPU's, which depends on the card; a run under
    TF_CPU_BFC_MEM_LIMIT_IN_MB); else the runtime's default for the allocator; else, for a GPU, no
    self-check).
    """
    found = requests_for(trace, allocator)
    defaults = trace_defaults(trace, allocator)
    growth = defaults.allow_growth if allow_growth is None else allow_growth
    gc = defaults.garbage_collection if garbage_collection is None else garbage_collection
    fraction = 0.0 if fragmentation_fraction is None else fragmentation_fraction
    reproduced = None
    descending, order = False, tuple[int, ...]()
    notes = list(found.assumptions)
    if found.from_birth and found.addresses is not None:
        check_limit = recorded_limit if recorded_limit is not None else defaults.limit_bytes
        shown = trace.recorded_limit(allocator)
        if recorded_limit is None and shown is not None and shown != defaults.limit_bytes:
            check_limit = shown
            notes.append(f"the self-check runs under the limit the profile's events show ({shown:,} bytes: "
                         "bytes_available + bytes_allocated)")
        if check_limit is None:
            notes.append("the limit this profile was recorded under is unknown (a GPU's depends on the card): no "
                         "self-check; give it with --recorded-limit")
        else:
            reproduced = reproduce(found, BFCOptions(check_limit, growth, gc, fraction))
            descending, order = reproduced.regions_descending, reproduced.region_order
    result = fit_requests(found.requests, _options(limit, growth, gc, fraction, descending, order), allocator=allocator,
                          alternatives=alternatives, defaults=defaults.source, runtime=defaults.runtime)
    return replace(result, reproduced=reproduced, assumptions=tuple(notes))


def _options(limit: int | None, growth: bool, gc: bool, fraction: float, descending: bool,
             order: tuple[int, ...]) -> BFCOptions:
    try:
        return BFCOptions(0 if limit is None else limit, growth, gc, fraction, descending, order)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def fit_requests(requests: Requests, options: BFCOptions, *, allocator: str = "", limit_given: bool | None = None,
                 alternatives: bool = True, defaults: str = "", runtime: str = "TensorFlow") -> FitResult:
    """Fit a request sequence not read from a trace (``memtrace fit --vs`` builds one per batch size).

    ``options.limit_bytes`` is the limit asked about; 0 (with ``limit_given`` not True) means
    none was: then the smallest limit is searched for and the rest is reported under it.
    """
    given = options.limit_bytes > 0 if limit_given is None else limit_given
    try:
        search = bfc.search_min_limit(requests, options)
    except ValueError as exc:  # requests beyond any limit the model holds (8 TiB)
        raise UsageError(f"{allocator or 'the requests'}: {exc}") from None
    under = options if given else _replace(options, search.limit_bytes)
    sim = bfc.simulate(requests, under)
    failure = _failure(requests, sim) if not sim.fits else None
    at_min = sim if not given else bfc.simulate(requests, _replace(options, search.limit_bytes))
    alts = _alternatives(requests, options, given) if alternatives else ()
    return FitResult(
        allocator=allocator,
        options=FitOptions(options.limit_bytes if given else None, options.allow_growth, options.garbage_collection,
                           options.fragmentation_fraction),
        defaults=defaults, fits=sim.fits, min_limit_bytes=search.limit_bytes, monotone=search.monotone,
        counterexample=search.counterexample(), below_step_bytes=search.below_step * bfc.MIB,
        peak_in_use_bytes=sim.peak_in_use_bytes, pool_bytes=sim.max_pool_bytes,
        lost_bytes=search.limit_bytes - at_min.peak_in_use_bytes,
        requested_peak_bytes=requests.peak_rounded_live_bytes(), events=len(requests),
        allocations=int(np.count_nonzero(requests.is_alloc)), reproduced=None, failure=failure, alternatives=alts,
        runtime=runtime,
    )


def _replace(options: BFCOptions, limit: int) -> BFCOptions:
    return replace(options, limit_bytes=limit)


def _alternatives(requests: Requests, options: BFCOptions, given: bool) -> tuple[Alternative, ...]:
    changes = [
        ("garbage_collection " + ("off" if options.garbage_collection else "on"),
         replace(options, garbage_collection=not options.garbage_collection)),
        ("allow_growth " + ("off" if options.allow_growth else "on"), replace(options, allow_growth=not options.allow_growth)),
    ]
    for fraction in (0.0, 0.01, 0.1):
        if fraction != options.fragmentation_fraction:
            changes.append((f"fragmentation_fraction {fraction:g}", replace(options, fragmentation_fraction=fraction)))
    found = []
    for change, alt in changes:
        try:
            needed = bfc.min_limit(requests, alt)
        except ValueError:  # no limit the model holds fits with this change
            continue
        ok = bfc.fits(requests, alt) if given else None
        found.append(Alternative(change, FitOptions(options.limit_bytes if given else None, alt.allow_growth,
                                                    alt.garbage_collection, alt.fragmentation_fraction), ok, needed))
    return tuple(found)


def _failure(requests: Requests, sim: Simulation) -> Failure:
    row = sim.failed_at
    assert row is not None
    code = int(requests.op[row])
    op = requests.op_names[code] if 0 <= code < len(requests.op_names) else ""
    requested = int(requests.requested_bytes[row])
    rounded = bfc.rounded_bytes(requested)
    by_region: dict[int, list[Chunk]] = {}
    for c in sim.chunks:
        by_region.setdefault(c.region, []).append(
            Chunk(c.offset, c.size_bytes, c.in_use, c.requested_bytes if c.in_use else None, None, c.op or None))
    dump = OomDump(path="", source="model", line=None, allocator=None, request_bytes=rounded, op=op or None,
                   regions=tuple(Region(size, tuple(by_region.get(r, ()))) for r, size in sim.regions),
                   limit_bytes=sim.options.limit_bytes, pool_bytes_reported=sim.pool_total_bytes, sum_in_use_bytes=sim.in_use_bytes)
    event = analyse(dump)
    return Failure(
        row=row, op=op, requested_bytes=requested, request_bytes=rounded, time_ns=int(requests.time_ns[row]),
        in_use_bytes=event.in_use_bytes, pool_bytes=event.pool_bytes or 0, free_bytes=event.free_bytes or 0,
        largest_free_bytes=event.largest_free_bytes or 0, verdict=event.verdict or "", missing_bytes=event.missing_bytes,
        regions=sim.regions,
        chunks=tuple(FailureChunk(c.region, c.offset, c.size_bytes, c.in_use, c.requested_bytes, c.op)
                     for c in sim.chunks),
    )


# -- the self-check -----------------------------------------------------------------------------


def learned_order(options: BFCOptions, bases: list[int]) -> BFCOptions:
    """``options`` with the regions' address order the trace shows (``bases``: each region's address, in creation order)."""
    steps = list(itertools.pairwise(bases))
    down = sum(b < a for a, b in steps)
    descending = bool(steps) and down * 2 > len(steps)
    if all(b < a for a, b in steps) or all(b > a for a, b in steps):
        order: tuple[int, ...] = ()
    else:
        ranks = np.argsort(np.argsort(np.array(bases, dtype=np.int64), kind="stable"), kind="stable")
        order = tuple(int(r) for r in ranks)
    return replace(options, regions_descending=descending, region_order=order)



def reproduce(found: TraceRequests, options: BFCOptions) -> Reproduction:
    """Replay a from-birth profile and count the events whose chunk, bytes in use and fragmentation the model matches.

    Region bases come from the trace (a region's first chunk is the allocation that made it);
    their address order is learned from the trace too (it decides ties between equal free chunks
    of different regions): ascending, descending (on CPU, mmap tended to put later regions lower),
    or, where the trace shows neither (a first region in the heap, the next ones mmap'ed lower),
    each region's rank, with later regions in the direction most of the trace's steps go. The
    replay is done again under the order learned until the regions it makes stay the same.
    """
    assert found.addresses is not None and found.chunk_bytes is not None
    assert found.bytes_in_use is not None and found.fragmentation is not None
    sim = bfc.simulate(found.requests, options)
    for _ in range(4):
        bases = [int(found.addresses[row]) for row in sim.region_rows]
        learned = learned_order(options, bases)
        if learned == options:
            break
        options = learned
        sim = bfc.simulate(found.requests, options)
    bases = [int(found.addresses[row]) for row in sim.region_rows]
    descending = options.regions_descending
    n = len(found.requests)
    done = len(sim.bytes_in_use)
    is_alloc = found.requests.is_alloc
    base_of = np.array(bases + [0], dtype=np.int64)
    model_region = np.full(n, -1, dtype=np.int64)
    model_region[:done] = sim.region
    model_offset = np.full(n, -1, dtype=np.int64)
    model_offset[:done] = sim.offset
    trace_offset = found.addresses - base_of[np.where(model_region >= 0, model_region, len(bases))]
    addr_ok = np.zeros(n, dtype=np.bool_)
    addr_ok[:done] = (model_region[:done] >= 0) & (trace_offset[:done] == model_offset[:done])
    chunk_ok = np.zeros(n, dtype=np.bool_)
    chunk_ok[:done] = sim.chunk_bytes == found.chunk_bytes[:done]
    in_use_ok = np.zeros(n, dtype=np.bool_)
    in_use_ok[:done] = sim.bytes_in_use == found.bytes_in_use[:done]
    theirs = found.fragmentation[:done]
    ours = sim.fragmentation
    frag_ok = np.zeros(n, dtype=np.bool_)
    # The profiler writes a double stat as text with six significant digits (TraceMe), as compared here.
    frag_ok[:done] = (np.array([float(f"{v:.6g}") for v in ours.tolist()]) == theirs) | (np.isnan(ours) & np.isnan(theirs))
    first = None
    wrong = np.flatnonzero(~((addr_ok & chunk_ok) | ~is_alloc) | ~in_use_ok | ~frag_ok)
    if len(wrong):
        row = int(wrong[0])
        if row >= done:
            first = f"event {row:,}: the model runs out of memory there, the allocator did not"
        else:
            what = ("allocation" if is_alloc[row] else "free")
            first = (f"event {row:,} ({what}): the trace says chunk {int(found.chunk_bytes[row]):,} B at region offset "
                     f"{int(trace_offset[row]):,}, {int(found.bytes_in_use[row]):,} B in use, fragmentation "
                     f"{float(theirs[row]):.6g}; the model {int(sim.chunk_bytes[row]):,} B at "
                     f"{int(model_offset[row]):,}, {int(sim.bytes_in_use[row]):,} B, {float(ours[row]):.6g}")
    return Reproduction(
        allocations=int(np.count_nonzero(is_alloc)), addresses_equal=int(np.count_nonzero(addr_ok & is_alloc)),
        chunks_equal=int(np.count_nonzero(chunk_ok & is_alloc)), events=n,
        bytes_in_use_equal=int(np.count_nonzero(in_use_ok)), fragmentation_equal=int(np.count_nonzero(frag_ok)),
        regions_descending=descending, region_order=options.region_order, limit_bytes=options.limit_bytes,
        first_difference=first, simulation=sim,
    )
