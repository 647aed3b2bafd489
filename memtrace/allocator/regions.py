"""The allocator's regions in a trace's own address space: where a hole can be, and where it cannot.

A BFC allocator takes memory from the device in regions (with ``allow_growth``: 2 MiB, then
doubling) that never merge; their addresses come from the system and may lie far apart. The
space between two regions is nobody's: counting it as a hole (as a walk over live buffers by
address would) reports hundreds of MiB free in an allocator of a few. The regions are found by
replaying the allocator's requests through the model (:mod:`memtrace.allocator.bfc`), which says which
allocation made each region and how large it is, and placing each region where the trace put
that allocation. That needs a profile that starts at the allocator's birth, whose addresses the
model reproduces; elsewhere the regions are unknown (None).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import MemtraceError
from ..trace.data import TraceData
from . import bfc


@dataclass(frozen=True)
class Region:
    """One region of the allocator, in the trace's addresses."""

    start: int
    bytes: int
    made_at_ns: int  # the time of the allocation that made it

    @property
    def end(self) -> int:
        return self.start + self.bytes


@dataclass(frozen=True)
class Regions:
    """The allocator's regions (by address), as the model's replay of the trace made them."""

    allocator: str
    regions: tuple[Region, ...]

    def index_of(self, address: int) -> int:
        """The region holding ``address``; -1 for none."""
        for index, region in enumerate(self.regions):
            if region.start <= address < region.end:
                return index
        return -1


def regions_of(trace: TraceData, allocator: str) -> Regions | None:
    """``allocator``'s regions where the model reproduces the trace's addresses; None where it cannot tell.

    Only an allocator that grows (TF's CPU BFC; a GPU's with ``allow_growth``) makes more than one
    region; the model replays with growth under TF's limit for the allocator
    (:func:`memtrace.allocator.defaults.trace_defaults`; a GPU's, which depends on the card, a large one), and its
    regions count only when every address of the profile is reproduced.
    """
    from .defaults import trace_defaults
    from .reproduce import reproduce
    from .requests import requests_for

    if trace.message != "XSpace" or allocator not in trace.allocators:
        return None
    defaults = trace_defaults(trace, allocator)
    try:
        found = requests_for(trace, allocator)
    except MemtraceError:
        return None
    if not found.from_birth or found.addresses is None:
        return None
    # Only growth makes several regions: a GPU allocator grows where the program asked for it
    # (allow_growth), so growth is tried whatever TF's default; the addresses decide.
    # A GPU's limit depends on its card, which the profile does not say: the largest the model holds (8 TiB) cuts
    # no region a card's growth makes, so the profile's own addresses decide
    options = bfc.BFCOptions(defaults.limit_bytes or bfc.MAX_LIMIT_BYTES, True, defaults.garbage_collection)
    check = reproduce(found, options)
    if check.addresses_equal != check.allocations:
        return None  # not grown this way (one region of the whole limit: nothing to mistake for a hole)
    sim = check.simulation  # under the region order the trace shows, as the check replayed it
    sizes = dict(sim.regions)
    made = [Region(int(found.addresses[row]) - int(sim.offset[row]), sizes[region], int(found.requests.time_ns[row]))
            for region, row in enumerate(sim.region_rows) if region in sizes]
    return Regions(allocator, tuple(sorted(made, key=lambda r: r.start)))
