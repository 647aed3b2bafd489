"""The Python API: :func:`load` and the :class:`Trace` it returns, with the analyses as methods.

The columnar model (:class:`~memtrace.model.TraceData`) is plain data and knows no analysis; a
:class:`Trace` is the same data with methods, so that ``memtrace.load(path).peak("GPU_0_bfc")``
reads naturally. This module sits above the analyses and below nothing but the user, as
coverage.py keeps its ``CoverageData`` apart from the ``Coverage`` object that drives it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from . import read
from .model import TraceData

if TYPE_CHECKING:
    import networkx as nx

    from .peak import AllocatorPeak
    from .summary import Summary
    from .tensor import BufferStory
    from .timeline import Timeline


@dataclass(frozen=True, eq=False, repr=False)  # the model's short repr, not every column
class Trace(TraceData):
    """One step's trace (see :class:`~memtrace.model.TraceData`) and the analyses on it.

    Each method is a pure function in its own module, imported on first use.
    """

    @classmethod
    def of(cls, data: TraceData) -> Trace:
        """The API's view of a trace a reader built (the same columns, not a copy)."""
        if isinstance(data, Trace):
            return data
        return cls(**{f.name: getattr(data, f.name) for f in fields(data)})

    def summary(self) -> Summary:
        """Devices, time span and the memory evidence per allocator (see ``memtrace.summary``)."""
        from .summary import summarize

        return summarize(self)

    def peak(self, allocator: str) -> AllocatorPeak:
        """The allocator's peak and live set (see ``memtrace.peak``); a device (``CPU:0``) names
        the allocator its memory went through."""
        from .devices import resolve_allocator
        from .peak import peak

        return peak(self, resolve_allocator(self, allocator))

    def peaks(self) -> list[AllocatorPeak]:
        """Every allocator's peak, largest first."""
        from .peak import peaks

        return peaks(self)

    def timeline(self, allocator: str, points: int | None = None) -> Timeline:
        """The allocator's live bytes over time as numpy arrays (see ``memtrace.timeline``)."""
        from .devices import resolve_allocator
        from .timeline import timeline

        return timeline(self, resolve_allocator(self, allocator), points)

    def dataflow(self) -> nx.MultiDiGraph:
        """Ops and the buffers flowing between them as a networkx graph (see ``memtrace.dataflow``)."""
        from .dataflow import graph

        return graph(self)

    def buffer(self, name: str) -> BufferStory:
        """The story of one buffer, named ``ALLOCATOR:ALLOCATION_ID`` or ``NODE:SLOT`` (see ``memtrace.tensor``)."""
        from .tensor import buffer_story

        return buffer_story(self, name)


def load(
    path: str | os.PathLike[str], graph: str | os.PathLike[str] | None = None, progress: read.Progress | None = None,
    jobs: int = 1, *, step: int | None = None, run: str | None = None,
) -> Trace:
    """Read a trace file (and optionally a separate GraphDef) into a :class:`Trace` (see :func:`memtrace.read.load`)."""
    return Trace.of(read.load(path, graph, progress, jobs, step=step, run=run))


def load_bytes(data: bytes, name: str = "<bytes>") -> Trace:
    """Read a trace held in memory (e.g. a serialized ``RunMetadata``); ``name`` stands for its path."""
    return Trace.of(read.load_bytes(data, name))
