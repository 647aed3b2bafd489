"""The allocator's address space over time, as the BFC model lays it out: what the picture of ``fit --html`` draws.

Every allocation is a chunk (its region, its offset in the region, its size) alive from the event
that allocated it to the event that freed it; holes are the space of a region no chunk holds.
The layout is the model's replay of the allocator's requests (:mod:`memtrace.allocator.bfc`): for a profile
that starts at the allocator's birth it is the allocator's own (the model reproduces every
address, see :func:`memtrace.allocator.reproduce.reproduce`); elsewhere it is what the allocator would have done
with the trace's requests from an empty start. Each event has its index (one per allocation or
free, as PyTorch's allocator history counts) and its time; the picture draws time, its idle
stretches cut short (:mod:`memtrace.reporters.address_space`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from ..trace.data import TraceData
from . import bfc

if TYPE_CHECKING:
    from .batch_size import BatchFit

LARGE_LIMIT_BYTES = 64 << 30  # TF's CPU default: a limit no step here comes near


@dataclass(frozen=True)
class Box:
    """One chunk from its allocation to its free."""

    region: int
    offset: int  # within its region
    size_bytes: int
    requested_bytes: int
    start_event: int
    end_event: int | None  # the event that freed it; None: alive at the end (or at the failure)
    op: str  # "" where unknown


@dataclass(frozen=True)
class AddressSpace:
    """One allocator's chunks over its events, with the peak and the first failure."""

    allocator: str
    options: bfc.BFCOptions
    regions: tuple[tuple[int, int], ...]  # (region, size_bytes) of every region made, in address order, low first
    boxes: tuple[Box, ...]
    events: int  # events replayed (up to the failure)
    time_ns: tuple[int, ...]  # per event, relative to the first
    peak_event: int | None  # the first event at the highest bytes in use
    peak_in_use_bytes: int
    failed_event: int | None  # the request that failed, where one did
    failed_request_bytes: int  # rounded
    failed_op: str
    exact: bool  # the layout is the allocator's own: every address of the trace reproduced
    note: str  # where the layout comes from, in words
    given_back: tuple[tuple[int, int], ...] = ()  # (region, event) of each region garbage collection gave back
    # (step, start) of each step a profile marks, on the same clock as time_ns
    step_starts_ns: tuple[tuple[int, int], ...] = ()

    @property
    def pool_bytes(self) -> int:
        """The pool at the end (or at the failure): the regions made, less those given back."""
        gone = {region for region, _ in self.given_back}
        return sum(size for region, size in self.regions if region not in gone)


def lay_out(requests: bfc.Requests, options: bfc.BFCOptions, allocator: str = "", exact: bool = False,
            note: str = "") -> AddressSpace:
    """Replay ``requests`` under ``options`` and take every chunk's place and lifetime from the replay."""
    sim = bfc.simulate(requests, options)
    done = len(sim.bytes_in_use)
    freed_by = np.full(len(requests), -1, dtype=np.int64)
    frees = np.flatnonzero(~requests.is_alloc[:done] & (requests.frees[:done] >= 0))
    freed_by[requests.frees[frees]] = frees
    names = requests.op_names
    boxes = []
    for row in np.flatnonzero(requests.is_alloc[:done] & (sim.region >= 0)).tolist():
        code = int(requests.op[row])
        end = int(freed_by[row])
        boxes.append(Box(int(sim.region[row]), int(sim.offset[row]), int(sim.chunk_bytes[row]),
                         int(requests.requested_bytes[row]), row, end if end >= 0 else None,
                         names[code] if 0 <= code < len(names) else ""))
    # Regions in address order, as the model places them (the trace's own order, where the self-check learned it);
    # those garbage collection gave back too (their chunks are drawn until then).
    regions = tuple(sorted(sim.made_regions, key=lambda r: options.address_slot(r[0])))
    in_use = sim.bytes_in_use
    peak = int(np.argmax(in_use)) if done and int(in_use.max()) > 0 else None
    failed = sim.failed_at
    failed_code = int(requests.op[failed]) if failed is not None else -1
    start = int(requests.time_ns[0]) if len(requests) else 0
    return AddressSpace(
        allocator=allocator, options=options, regions=regions, boxes=tuple(boxes), events=done,
        time_ns=tuple((requests.time_ns[:done + (failed is not None)] - start).tolist()),
        peak_event=peak, peak_in_use_bytes=int(in_use.max()) if done else 0, failed_event=failed,
        failed_request_bytes=bfc.rounded_bytes(int(requests.requested_bytes[failed])) if failed is not None else 0,
        failed_op=names[failed_code] if 0 <= failed_code < len(names) else "", exact=exact, note=note,
        given_back=sim.given_back,
    )


def address_space(trace: TraceData, allocator: str, limit: int | None = None, allow_growth: bool | None = None,
                  garbage_collection: bool | None = None, fragmentation_fraction: float = 0.0,
                  partitioned: bool | None = None, gap_split: str | None = None) -> AddressSpace:
    """``allocator``'s address space in ``trace`` under TF's options for it (or the ones given).

    Without ``limit``: the limit TF would use where it does not depend on the device (CPU), else (a
    GPU's depends on its card) one region of a limit far above what the requests need, which lays
    the chunks out as any sufficient limit would.
    """
    from .defaults import trace_defaults
    from .reproduce import reproduce
    from .requests import requests_for

    found = requests_for(trace, allocator)
    defaults = trace_defaults(trace, allocator)
    growth = defaults.allow_growth if allow_growth is None else allow_growth
    gc = defaults.garbage_collection if garbage_collection is None else garbage_collection
    chosen = limit if limit is not None else defaults.limit_bytes if growth else None
    if chosen is None and not growth and defaults.runtime == "XLA":
        chosen = trace.recorded_limit(allocator)  # XLA's partitioned pool: the layout depends on the gap's size
    if chosen is None:
        # One region of a limit the trace does not say (a GPU's): any limit well above what the
        # requests need lays the chunks out as the allocator did (one replay, where searching for
        # the smallest limit would take many); the picture stops at the highest chunk.
        chosen = max(LARGE_LIMIT_BYTES, 2 * found.requests.peak_rounded_live_bytes())
        how = f"in one region of a limit larger than the trace needs ({chosen:,} bytes)"
    else:
        how = f"under a limit of {chosen:,} bytes"
    options = defaults.options(chosen, growth, gc, fragmentation_fraction, partitioned, gap_split)
    exact = False
    if found.from_birth and found.addresses is not None:
        check = reproduce(found, options)
        options = replace(options, regions_descending=check.regions_descending, region_order=check.region_order)
        exact = check.addresses_equal == check.chunks_equal == check.allocations  # (fragmentation depends on the limit)
    if exact:
        note = f"the allocator's own layout: the model reproduces every address of the trace ({how})"
    elif found.from_birth:
        note = f"the BFC model's layout of the trace's requests {how}, not the trace's own under these options"
    else:
        note = (f"the BFC model's layout of the trace's requests from an empty allocator ({how}): the trace starts "
                "after the allocator's birth")
    space = lay_out(found.requests, options, allocator, exact, note)
    origin = trace.step_start_ns + (int(found.requests.time_ns[0]) if len(found.requests) else 0)
    return replace(space, step_starts_ns=tuple((s.number, s.start_ns - origin) for s in trace.steps
                                               if trace.step is None or s.number == trace.step))



def predicted_address_space(fitted: BatchFit, batch: int, small: str, large: str) -> AddressSpace:
    """The address space of batch ``batch`` predicted from two recordings (``memtrace fit --vs --html``).

    The requests are the ones :mod:`memtrace.allocator.batch_size` writes for the batch (each aligned
    allocation's size affine in the batch, in the nearer recording's order), replayed under the
    options of the fit: the limit asked for, else the batch's own smallest limit. ``small`` and
    ``large`` name the two recordings. No trace recorded this layout: it is the model's, from an
    empty allocator.
    """
    o = fitted.fit.options
    requests = fitted.scaling.requests_at(batch)
    limit = o.limit_bytes
    if limit is None:
        limit = bfc.min_limit(requests, bfc.BFCOptions(0, o.allow_growth, o.garbage_collection, o.fragmentation_fraction))
        how = f"under its smallest limit ({limit:,} bytes)"
    else:
        how = f"under a limit of {limit:,} bytes"
    b1, b2 = fitted.batch_sizes
    note = (f"a prediction from two recordings, not a recorded layout: batch {batch:,}'s requests written from "
            f"{small} (batch {b1:,}) and {large} (batch {b2:,}), replayed by the BFC model from an empty allocator "
            f"{how}")
    options = bfc.BFCOptions(limit, o.allow_growth, o.garbage_collection, o.fragmentation_fraction)
    return lay_out(requests, options, f"{fitted.allocator}, batch {batch:,}", False, note)
