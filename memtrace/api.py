"""The Python API: :func:`load` and the :class:`Trace` it returns, with the analyses as methods.

The columnar model (:class:`~memtrace.trace.data.TraceData`) is plain data and knows no analysis; a
:class:`Trace` is the same data with methods, so that ``memtrace.load(path).peak("GPU_0_bfc")``
reads naturally: one method per question the commands answer (summary, peak, timeline, ops, frag,
tensor, the dataflow graph, check, diff, fit), each a thin call of the analysis of the same name, as
coverage.py keeps its ``CoverageData`` apart from the ``Coverage`` object that drives it.

The command line and this API are two faces over the same analyses: a command calls the analysis
modules itself (it has options, such as a report's bounds, that a Python caller passes there too),
and reads its trace through :func:`load`, so that both read every input the same way.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from . import read
from .trace.data import TraceData

if TYPE_CHECKING:
    import networkx as nx

    from .allocator.batch_size import BatchFit
    from .allocator.fit import FitResult
    from .analyses.check import CheckResult
    from .analyses.diff import TraceDiff
    from .analyses.frag import TraceFragmentation
    from .analyses.ops import OpsReport
    from .analyses.peak import AllocatorPeak
    from .analyses.summary import Summary
    from .analyses.tensor import BufferStory
    from .analyses.timeline import Timeline


@dataclass(frozen=True, eq=False, repr=False)  # the model's short repr, not every column
class Trace(TraceData):
    """One step's trace (see :class:`~memtrace.trace.data.TraceData`) and the analyses on it.

    Each method is a pure function in its own module, imported on first use.
    """

    @classmethod
    def of(cls, data: TraceData) -> Trace:
        """The API's view of a trace a reader built (the same columns, not a copy)."""
        if isinstance(data, Trace):
            return data
        return cls(**{f.name: getattr(data, f.name) for f in fields(data)})

    def summary(self) -> Summary:
        """Devices, time span and the memory evidence per allocator (see ``memtrace.analyses.summary``)."""
        from .analyses.summary import summarize

        return summarize(self)

    def peak(self, allocator: str) -> AllocatorPeak:
        """The allocator's peak and live set (see ``memtrace.analyses.peak``); a device (``CPU:0``) names
        the allocator its memory went through."""
        from .analyses.peak import peak
        from .trace.devices import resolve_allocator

        return peak(self, resolve_allocator(self, allocator))

    def peaks(self) -> list[AllocatorPeak]:
        """Every allocator's peak, largest first."""
        from .analyses.peak import peaks

        return peaks(self)

    def timeline(self, allocator: str, points: int | None = None) -> Timeline:
        """The allocator's live bytes over time as numpy arrays (see ``memtrace.analyses.timeline``)."""
        from .analyses.timeline import timeline
        from .trace.devices import resolve_allocator

        return timeline(self, resolve_allocator(self, allocator), points)

    def ops(self, by: str = "type", sort: str = "peak_bytes", **options: Any) -> OpsReport:
        """Memory per op as tfprof computes it, grouped ``by`` type, node, scope or layer and sorted (see
        ``memtrace.analyses.ops``; options ``depth``, ``allocators``, ``device``, ``name``, ``min_bytes``)."""
        from .analyses.ops import ops

        return ops(self, by, sort, **options)

    def frag(self, allocators: list[str] | None = None, at_us: int | None = None) -> TraceFragmentation:
        """Bytes allocated beyond the request and holes between buffers, per allocator (see ``memtrace.analyses.frag``);
        ``at_us`` measures the holes at that time instead of at each peak."""
        from .analyses.frag import fragmentations
        from .trace.devices import resolve_allocator

        return fragmentations(self, None if allocators is None else [resolve_allocator(self, a) for a in allocators], at_us)

    def check(self, budgets: dict[str, dict[str, Any]] | str | os.PathLike[str]) -> CheckResult:
        """Measure memory budgets on this trace: ``{"GPU_0_bfc": {"max_peak": "1.3GiB"}}`` or a TOML budget file
        (see ``memtrace.analyses.check``); the result says which pass and by how much."""
        from .analyses.check import budgets_from_mapping, check, load_budget_file

        found = (budgets_from_mapping(budgets, "budgets") if isinstance(budgets, dict) else load_budget_file(budgets))
        return check(self, found)

    def diff(self, new: TraceData | str | os.PathLike[str], **options: Any) -> TraceDiff:
        """What grew from this trace to ``new`` (a trace or a path): peaks per allocator, ops, new buffers at the peak
        (see ``memtrace.analyses.diff``; options ``allocators``, ``max_increase``, ``measure``, ``group_by``)."""
        from .analyses.diff import diff

        return diff(self, new if isinstance(new, TraceData) else load(new), **options)

    def dataflow(self) -> nx.MultiDiGraph:
        """Ops and the buffers flowing between them as a networkx graph (see ``memtrace.analyses.graph``)."""
        from .analyses.graph import graph

        return graph(self)

    def fit(self, allocator: str, limit: int | str | None = None, *, allow_growth: bool | None = None,
            garbage_collection: bool | None = None, fragmentation_fraction: float | None = None,
            recorded_limit: int | str | None = None, alternatives: bool = True, partitioned: bool | None = None,
            gap_split: str | None = None, orders: int | None = None, others: Sequence[Trace] = (),
            smallest: bool = True) -> FitResult:
        """Replay the allocator's requests through TF's BFC allocator (see ``memtrace.allocator.fit``): the smallest
        limit, whether ``limit`` (bytes or ``"15GiB"``) fits, the first failure, what helps. A device
        (``GPU:0``) names the allocator its memory went through; options left None take the defaults of the
        runtime that recorded the trace (TF's, or XLA's for a JAX profile, whose GPU pool is spatially
        partitioned: ``partitioned``, and ``gap_split`` "heuristic" or "exact" for a carve from its central gap).
        ``band``: over ``orders`` sampled orders (default 32; 0: none) of this recording and of ``others``,
        recordings of the same step (``memtrace.allocator.orders``); ``verdict``: whether every sampled order
        fits ``limit``. Under a ``limit``, ``smallest=False`` answers only that: one replay, and one for each
        alternative and each sampled order (``orders_under``), no smallest limit searched for."""
        from .allocator.fit import fit_recordings
        from .allocator.orders import DEFAULT_ORDERS
        from .trace.devices import resolve_allocator

        return fit_recordings([self, *others], resolve_allocator(self, allocator), limit=_bytes(limit, "limit"),
                              allow_growth=allow_growth, garbage_collection=garbage_collection,
                              fragmentation_fraction=fragmentation_fraction,
                              recorded_limit=_bytes(recorded_limit, "recorded_limit"), alternatives=alternatives,
                              partitioned=partitioned, gap_split=gap_split,
                              orders=DEFAULT_ORDERS if orders is None else orders, smallest=smallest)

    def buffer(self, name: str) -> BufferStory:
        """The story of one buffer, named ``ALLOCATOR:ALLOCATION_ID`` or ``NODE:SLOT`` (see ``memtrace.analyses.tensor``)."""
        from .analyses.tensor import buffer_story

        return buffer_story(self, name)


# The progress callback and the number of reading processes ``load`` uses when given none (the
# command line sets them: a progress line for terminals, ``--jobs``).
load_progress: ContextVar[read.Progress | None] = ContextVar("memtrace_progress", default=None)
load_jobs: ContextVar[int] = ContextVar("memtrace_jobs", default=1)


def load(
    path: str | os.PathLike[str], graph: str | os.PathLike[str] | None = None, progress: read.Progress | None = None,
    jobs: int | None = None, *, step: int | None = None, run: str | None = None,
) -> Trace:
    """Read a trace file (and optionally a separate GraphDef) into a :class:`Trace` (see :func:`memtrace.read.load`);
    ``progress`` and ``jobs`` left None take what :data:`load_progress` and :data:`load_jobs` hold."""
    return Trace.of(read.load(path, graph, progress if progress is not None else load_progress.get(),
                              jobs if jobs is not None else load_jobs.get(), step=step, run=run))


def load_bytes(data: bytes, name: str = "<bytes>") -> Trace:
    """Read a trace held in memory (e.g. a serialized ``RunMetadata``); ``name`` stands for its path."""
    return Trace.of(read.load_bytes(data, name))


def _bytes(value: int | str | None, name: str) -> int | None:
    """A size given to the API as bytes or as people write it (``"15GiB"``); negative sizes are refused."""
    from .errors import UsageError
    from .units import parse_size

    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise UsageError(f"{name} must be a size such as \"15GiB\" or a whole number of bytes, not {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise UsageError(f"{name} must not be negative (got {value})")
        return value
    if value.strip().startswith("-"):
        raise UsageError(f"{name} must not be negative (got {value!r})")
    return parse_size(value)


def fit_batches(small: Any, large: Any, batch_sizes: tuple[int, int] | None = None, *, allocator: str | None = None,
                limit: int | str | None = None, batch: int | None = None, allow_growth: bool | None = None,
                garbage_collection: bool | None = None, fragmentation_fraction: float | None = None,
                check: tuple[Any, int] | None = None, orders: int | None = None) -> BatchFit:
    """The largest batch under ``limit`` (or whether ``batch`` fits), from two recordings of one step.

    ``small`` and ``large`` (traces or paths) were recorded at ``batch_sizes`` = (B1, B2), B1 < B2
    (None: read from the inputs' leading dimension where the traces carry shapes). ``allocator``
    (or a device naming it) defaults to the BFC allocator both have, a GPU's first. ``check`` =
    (trace or path, B3) holds the prediction to a third recording. ``orders`` orders of each recording's
    requests make the band over a batch's plausible runs (default 8; 0: the prediction alone). See
    :mod:`memtrace.allocator.batch_size` and :mod:`memtrace.allocator.batch_band`.
    """
    from .allocator.batch_size import fit_batches as _fit_batches
    from .allocator.requests import bfc_allocators
    from .errors import UsageError
    from .trace.devices import resolve_allocator

    first, second = (value if isinstance(value, TraceData) else load(value) for value in (small, large))
    if allocator is None:
        theirs = set(bfc_allocators(second))
        common = sorted((name for name in bfc_allocators(first) if name in theirs), key=lambda n: "gpu" not in n.lower())
        if not common:
            raise UsageError(f"{first.path}, {second.path}: no BFC allocator made requests in both; name one")
        allocator = common[0]
    else:
        allocator = resolve_allocator(first, allocator)
    third = None
    if check is not None:
        trace, b3 = check
        third = (trace if isinstance(trace, TraceData) else load(trace), int(b3))
    return _fit_batches(first, second, allocator, batch_sizes, batch=batch, limit=_bytes(limit, "limit"),
                        allow_growth=allow_growth, garbage_collection=garbage_collection,
                        fragmentation_fraction=fragmentation_fraction, check_with=third,
                        **({} if orders is None else {"orders": orders}))
