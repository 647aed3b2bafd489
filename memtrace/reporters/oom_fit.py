"""What would have avoided an OOM event (``memtrace oom LOG --trace TRACE``): text and JSON."""

from __future__ import annotations

from typing import IO, Any

from ..oom_fit import Avoidance
from ..units import format_bytes
from .common import clean


def to_json(a: Avoidance) -> dict[str, Any]:
    """``avoided_by`` of an event in ``memtrace.oom/1``: the replay under the dump's limit and each option measured."""
    failure = a.result.failure
    return {
        "trace": a.trace_path,
        "allocator": a.allocator,
        "limit_bytes": a.limit_bytes,
        "options": {"allow_growth": a.result.options.allow_growth,
                    "garbage_collection": a.result.options.garbage_collection,
                    "fragmentation_fraction": a.result.options.fragmentation_fraction},
        "request_appended": a.appended,
        "model_fails": failure is not None,
        "same_request": a.same_request,
        "same_state": a.same_state,
        "model_failure": None if failure is None else {
            "op": failure.op, "request_bytes": failure.request_bytes, "in_use_bytes": failure.in_use_bytes,
            "free_bytes": failure.free_bytes, "largest_free_bytes": failure.largest_free_bytes,
            "verdict": failure.verdict},
        "min_limit_bytes": a.result.min_limit_bytes,
        "alternatives": [{"change": alt.change, "fits": alt.fits, "min_limit_bytes": alt.min_limit_bytes}
                         for alt in a.result.alternatives],
        "assumptions": list(a.assumptions),
    }


def _size(n: int) -> str:
    return f"{format_bytes(n)} ({n:,} bytes)"


def render_text(a: Avoidance, out: IO[str]) -> None:
    """The model's replay of the run against the dump, then what would have avoided the failure."""
    r, failure = a.result, a.result.failure
    out.write(f"\nReplayed through the BFC model ({clean(a.trace_path)}, allocator {clean(a.allocator)}) under the "
              f"dump's limit of {_size(a.limit_bytes)}, allow_growth {'on' if r.options.allow_growth else 'off'}, "
              f"garbage collection {'on' if r.options.garbage_collection else 'off'}:\n")
    for note in a.assumptions:
        out.write(f"  note: {clean(note)}\n")
    if failure is None:
        out.write("  the model serves every request of the trace: it does not run out of memory where TensorFlow did "
                  "(a trace of another run, or other options)\n")
        return
    what = f"{_size(failure.request_bytes)} for op {clean(failure.op) or '(unknown)'}"
    if a.same_state:
        out.write(f"  the model runs out of memory at the same request ({what}) in the dump's state: "
                  f"{format_bytes(failure.in_use_bytes)} in use, {format_bytes(failure.free_bytes)} free, largest free "
                  f"chunk {format_bytes(failure.largest_free_bytes)} ({failure.verdict})\n")
    elif a.same_request:
        out.write(f"  the model runs out of memory at the same request ({what}), in another state: "
                  f"{format_bytes(failure.in_use_bytes)} in use, {format_bytes(failure.free_bytes)} free, largest free "
                  f"chunk {format_bytes(failure.largest_free_bytes)}\n")
    else:
        out.write(f"  the model runs out of memory at another request ({what}): the trace may be of another run\n")
    out.write("What would have avoided it, each measured by replaying:\n")
    out.write(f"  - a limit of at least {_size(r.min_limit_bytes)} (same options)\n")
    for alt in r.alternatives:
        verdict = " (avoids it under the same limit)" if alt.fits else ""
        out.write(f"  - {alt.change}: a limit of at least {_size(alt.min_limit_bytes)}{verdict}\n")
