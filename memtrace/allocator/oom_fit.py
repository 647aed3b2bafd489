"""What would have avoided an out-of-memory event: the run's trace replayed through the BFC model.

``memtrace oom LOG --trace PROFILE`` reads the dump (the failed request, the limit) and the trace
of the same run (its requests in order), replays the requests under the dump's limit through
:mod:`memtrace.allocator.bfc` (via :func:`memtrace.allocator.fit.fit_requests`) and says whether the model runs out of
memory at the same request, in the same state as the dump, and what limit or option would have
got past it, each measured by replaying again.

A profile of the run that failed holds every event up to the failure but not the failed request
(the allocator writes no event for it): the model then serves them all, and the dump's request
is put where the dump's state says it was. The trace is replayed once; the state after each event
(bytes in use, pool, largest free chunk) is compared with the dump's. TensorFlow retries a failed
request for up to 10 seconds (``AllocatorRetry``) and dumps at its last attempt, so a place whose
state is the dump's and after which the trace's clock jumps by about 10 s (nothing was freed
while the request waited) is where it was; else the first such place after the trace's last
allocation (a failed op lets go of its inputs as the error unwinds); else the last one before it
(the request waited while other threads ran on). What the run would have asked after the failure
is unknown, so the limits found get the run past this failure, not necessarily to its end.
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
        options = replace(options, regions_descending=check.regions_descending, region_order=check.region_order)
    requests = found.requests
    appended = False
    replay = bfc.simulate(requests, options)
    if replay.fits and event.request_bytes is not None:
        requests, where = _with_failed_request(requests, replay, event)
        appended = True
        notes.append("the trace holds no event for the failed request (the allocator writes none): the dump's "
                     f"request was put {where}, so the limits below get the run past this failure, not necessarily "
                     "to its end")
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


def _with_failed_request(requests: bfc.Requests, replay: bfc.Simulation,
                         event: OomEvent) -> tuple[bfc.Requests, str]:
    """The requests with the dump's failed request put where the dump's state says it was (see the module's
    docstring), and where that is, in words. ``replay`` is the requests' own replay, which serves them all."""
    assert event.request_bytes is not None
    at = failed_request_place(requests, replay, event)
    moved = _with_request(requests, len(requests) if at is None else at, event.request_bytes, event.dump.op)
    n = len(requests)
    if at is None:
        return moved, ("after the trace's last event: no state of the replay is the dump's (in use "
                       f"{event.in_use_bytes:,} bytes)")
    allocations = np.flatnonzero(requests.is_alloc)
    last = int(allocations[-1]) if len(allocations) else -1
    after = int(np.count_nonzero(requests.is_alloc[at:]))
    where = f"after event {at:,} of {n:,}" if at else "before the trace's first event"
    state = f"where the model's state is the dump's ({event.in_use_bytes:,} bytes in use)"
    waited = _retry_gap(requests, at)
    if waited:
        then = (f"; the {after:,} allocations after it came after the failure" if after else "")
        return moved, (f"{where}, {state} and the trace's clock stops for {waited / 1e9:.1f} s: TensorFlow's retry "
                       f"waited there for memory (up to 10 s) before it gave up{then}")
    if at > last:
        return moved, f"{where}, after the trace's last allocation, {state}"
    return moved, (f"{where}, {state}: the {after:,} allocations after it in the trace are other threads' ops, run "
                   "while the request waited for memory (TensorFlow retries a failed request for up to 10 s; the "
                   "dump is of its last attempt) or after it failed")


def failed_request_place(requests: bfc.Requests, replay: bfc.Simulation, event: OomEvent) -> int | None:
    """Where among ``requests`` the dump's failed request was: the number of events before it, or None where no
    state of ``replay`` (the requests' own replay, served whole) is the dump's.

    A state matches when its bytes in use are the dump's, and its pool and largest free chunk too where the
    dump says them. A match the trace's clock stops at for about 10 s (TensorFlow's retry) wins; else the first
    match after the last allocation (the failure, then the frees of an error unwinding); else the last match
    before it (the request waited while others ran on).
    """
    n = len(requests)
    in_use = np.concatenate([[0], replay.bytes_in_use])
    pool = np.concatenate([[0], replay.pool_bytes])
    largest = np.concatenate([[0], replay.largest_free_bytes])
    matches = in_use == event.in_use_bytes
    if event.pool_bytes is not None:
        matches &= pool == event.pool_bytes
    if event.largest_free_bytes is not None:
        matches &= largest == event.largest_free_bytes
    if not matches.any():  # the chunk map may differ a little: the bytes in use alone
        matches = in_use == event.in_use_bytes
    allocations = np.flatnonzero(requests.is_alloc)
    first = int(allocations[-1]) + 1 if len(allocations) else 0
    places = np.flatnonzero(matches[: n + 1])
    gaps = [int(p) for p in places if _retry_gap(requests, int(p))]
    if gaps:
        return gaps[0]
    after = places[places >= first]
    if len(after):
        return int(after[0])
    before = places[places < first]
    return int(before[-1]) if len(before) else None


RETRY_SECONDS = 10.0  # AllocatorRetry's wait (bfc_allocator.cc: kMaxMillisToWait)


def _retry_gap(requests: bfc.Requests, at: int) -> int:
    """The time from event ``at - 1`` to event ``at`` where it is TensorFlow's retry (about 10 s, nothing freed
    meanwhile), else 0: the nanoseconds the request waited there."""
    if not 0 < at < len(requests):
        return 0
    gap = int(requests.time_ns[at]) - int(requests.time_ns[at - 1])
    return gap if 0.9 * RETRY_SECONDS * 1e9 <= gap <= 2 * RETRY_SECONDS * 1e9 else 0


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
