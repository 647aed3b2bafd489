"""What would have avoided an out-of-memory event: the run's trace replayed through the BFC model.

``memtrace oom LOG --trace PROFILE`` reads the dump (the failed request, the limit) and the trace
of the same run (its requests in order), replays the requests under the dump's limit through
:mod:`memtrace.allocator.bfc` (via :func:`memtrace.allocator.fit.fit_requests`) and says whether the model runs out of
memory at the same request, in the same state as the dump, and what limit or option would have
got past it, each measured by replaying again.

A profile of the run that failed holds every event up to the failure but not the failed request
(the allocator writes no event for it): the model then serves them all, and the dump's request
is added after the last allocation (where among the frees that follow it, the dump's bytes in
use say). What the run would have asked after it is unknown, so the limits found
get the run past this failure, not necessarily to its end.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..errors import UsageError
from ..trace.data import TraceData
from . import bfc
from .defaults import trace_defaults
from .fit import Effect, FitResult, fit_requests, xla_effects
from .oom import OomEvent
from .reproduce import reproduce
from .requests import requests_for


@dataclass(frozen=True)
class Avoidance:
    """One OOM event against the model's replay of the run's trace."""

    allocator: str
    trace_path: str
    limit_bytes: int  # the dump's
    appended: bool  # the trace ended before the failed request: the dump's request was added at its end
    same_request: bool  # the model runs out of memory at a request of the dump's rounded size (and op, where known)
    same_state: bool  # ... with the dump's bytes in use, free bytes and largest free chunk
    result: FitResult  # under the dump's limit; ``alternatives`` are the options measured
    assumptions: tuple[str, ...]
    effects: tuple[Effect, ...] = field(default=())  # XLA's three effects on the answer, for a profile XLA recorded


def avoidance(event: OomEvent, trace: TraceData, allocator: str | None = None) -> Avoidance:
    """Replay ``trace``'s requests of the dump's allocator (or ``allocator``) under the dump's limit.

    Raises a UsageError where the dump does not say its limit or the trace has no such allocator.
    """
    dump = event.dump
    name = allocator or dump.allocator
    if name is None:
        raise UsageError(f"{dump.path}: the dump does not name the allocator that ran out: name it with --allocator "
                         f"(the trace {trace.path} has: {', '.join(trace.allocators) or 'none'})")
    if name not in trace.allocators:
        raise UsageError(f"{trace.path}: no allocator {name!r} in this trace (it has: "
                         f"{', '.join(trace.allocators) or 'none'}); name the one that ran out with --allocator")
    if event.limit_bytes is None:
        raise UsageError(f"{dump.path}: the dump does not say the allocator's limit: give it with --limit")
    found = requests_for(trace, name)
    defaults = trace_defaults(trace, name)
    options = defaults.options(event.limit_bytes)  # XLA's GPU pool: partitioned, as JAX builds it
    notes = list(found.assumptions)
    if found.from_birth and found.addresses is not None:
        check = reproduce(found, options)
        options = replace(options, regions_descending=check.regions_descending)
    requests = found.requests
    appended = False
    if bfc.fits(requests, options) and event.request_bytes is not None:
        requests = _with_failed_request(requests, options, event)
        appended = True
        notes.append("the trace ends before the failed request (the run stopped there): the dump's request was "
                     "added after the trace's last allocation (among the frees that follow it, where the dump's bytes "
                     "in use say), so the limits below get the run past this failure, not necessarily to its end")
    result = fit_requests(requests, options, allocator=name, limit_given=True, defaults=defaults.source,
                          runtime=defaults.runtime)
    failure = result.failure
    same_request = (failure is not None and failure.request_bytes == event.request_bytes
                    and (dump.op is None or failure.op == dump.op))
    same_state = (same_request and failure is not None and failure.in_use_bytes == event.in_use_bytes
                  and failure.free_bytes == event.free_bytes and failure.largest_free_bytes == event.largest_free_bytes)
    effects = xla_effects(result, defaults.device, event.limit_bytes) if defaults.runtime == "XLA" else ()
    return Avoidance(name, trace.path, event.limit_bytes, appended, same_request, same_state, result, tuple(notes),
                     effects)


def _with_failed_request(requests: bfc.Requests, options: bfc.BFCOptions, event: OomEvent) -> bfc.Requests:
    """The requests with the dump's failed request added after their last allocation.

    The frees after the last allocation may come before the failure or after it (a failed op
    lets go of its inputs as the error unwinds): the place among them is the first where the
    model's bytes in use at the failure are the dump's, else the end.
    """
    assert event.request_bytes is not None
    allocations = np.flatnonzero(requests.is_alloc)
    first = int(allocations[-1]) + 1 if len(allocations) else 0
    for at in range(first, len(requests) + 1):
        candidate = _with_request(requests, at, event.request_bytes, event.dump.op)
        sim = bfc.simulate(candidate, options)
        if sim.failed_at == at and int(sim.bytes_in_use[at - 1] if at else 0) == event.in_use_bytes:
            return candidate
    return _with_request(requests, len(requests), event.request_bytes, event.dump.op)


def _with_request(requests: bfc.Requests, at: int, request_bytes: int, op: str | None) -> bfc.Requests:
    """The requests with one more allocation at row ``at``: ``request_bytes`` for ``op``."""
    names = requests.op_names
    code = -1
    if op:
        if op not in names:
            names = (*names, op)
        code = names.index(op)
    time = int(requests.time_ns[at - 1]) if at else 0
    frees = np.where(requests.frees >= at, requests.frees + 1, requests.frees)
    return bfc.Requests(
        np.insert(requests.is_alloc, at, True), np.insert(requests.requested_bytes, at, request_bytes),
        np.insert(frees, at, -1), np.insert(requests.op, at, code).astype(np.int32),
        np.insert(requests.time_ns, at, time), names)
