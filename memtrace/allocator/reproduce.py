"""The self-check: a from-birth profile's own decisions (address, chunk, bytes in use, fragmentation per
event) against the allocator model's replay of its requests, event by event.

A profile recorded from the allocator's birth carries every decision the allocator made; the model,
replaying the same requests under the same options and limit, must make the same ones. Region
bases come from the trace (a region's first chunk is the allocation that made it) and so does
their address order (:func:`learned_order`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace

import numpy as np

from . import bfc
from .bfc import BFCOptions, Simulation
from .requests import TraceRequests


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
    replay is done again under the order learned until the regions it makes teach the order it ran
    under (or one replayed before: no order fits the trace then, and the latest replay is compared).
    """
    assert found.addresses is not None and found.chunk_bytes is not None
    assert found.bytes_in_use is not None and found.fragmentation is not None
    # The order given is replayed recording nothing (its regions teach the order); each order learned is replayed
    # recording every event, and that replay is compared where its regions teach it again
    seen = {options}
    rows, sim = bfc.regions_made(found.requests, options), None
    while True:  # ends: each round adds an order, and a trace's regions can be ordered in finitely many ways
        bases = [int(found.addresses[row]) for row in rows]
        learned = learned_order(options, bases)
        if learned in seen:  # settled (or, where the trace shows no one order, back to an order replayed)
            break
        seen.add(learned)
        options = learned
        sim = bfc.simulate(found.requests, options)
        rows = sim.region_rows
    if sim is None:  # the order given was the one its regions teach
        sim = bfc.simulate(found.requests, options)
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
