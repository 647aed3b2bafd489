"""What would have avoided an OOM event (``memtrace oom LOG --trace TRACE``): text and JSON."""

from __future__ import annotations

from typing import IO, Any

from ..allocator.oom_fit import Avoidance
from ..units import format_bytes
from .common import clean
from .fit import effect_line, partitioning_words


def to_json(a: Avoidance) -> dict[str, Any]:
    """``avoided_by`` of an event in ``memtrace.oom/1``: the replay under the dump's limit and each option measured."""
    failure = a.result.failure
    return {
        "trace": a.trace_path,
        "allocator": a.allocator,
        "limit_bytes": a.limit_bytes,
        "options": {"allow_growth": a.result.options.allow_growth,
                    "garbage_collection": a.result.options.garbage_collection,
                    "fragmentation_fraction": a.result.options.fragmentation_fraction,
                    "partitioned": a.result.options.partitioned, "gap_split": a.result.options.gap_split or None},
        "request_appended": a.appended,
        "model_fails": failure is not None,
        "same_request": a.same_request,
        "same_state": a.same_state,
        "model_failure": None if failure is None else {
            "op": failure.op, "request_bytes": failure.request_bytes, "in_use_bytes": failure.in_use_bytes,
            "free_bytes": failure.free_bytes, "largest_free_bytes": failure.largest_free_bytes,
            "verdict": failure.verdict},
        "min_limit_bytes": a.result.min_limit_bytes,
        "alternatives": [{"change": alt.change, "fits": alt.fits, "min_limit_bytes": alt.min_limit_bytes,
                          "setting": alt.setting or None} for alt in a.result.alternatives],
        "settings": a.result.settings,
        "assumptions": list(a.assumptions),
        "effects": {e.name: {"applies": e.applies, "words": e.words, "limit_bytes": e.limit_bytes} for e in a.effects},
    }


def _size(n: int) -> str:
    return f"{format_bytes(n)} ({n:,} bytes)"


def render_text(a: Avoidance, out: IO[str]) -> None:
    """The model's replay of the run against the dump, then what would have avoided the failure."""
    heading, findings, helps = _lines(a)
    out.write(f"\n{clean(heading)}:\n")
    for line in findings:
        out.write(f"  {clean(line)}\n")
    if helps:
        out.write("What would have avoided it, each measured by replaying:\n")
        for line in helps:
            out.write(f"  - {clean(line)}\n")


def html_section(a: Avoidance) -> str:
    """The same, as a part of ``memtrace oom --html``'s section for the event (names escaped)."""
    from .common import esc

    heading, findings, helps = _lines(a)
    parts = [f"<h3>Replayed through the BFC model</h3>\n<p>{esc(heading)}:</p>\n"]
    parts.extend(f"<p>{esc(line)}</p>\n" for line in findings)
    if helps:
        parts.append("<p>What would have avoided it, each measured by replaying:</p>\n<ul>\n"
                     + "".join(f"<li>{esc(line)}</li>\n" for line in helps) + "</ul>\n")
    return "".join(parts)


def _lines(a: Avoidance) -> tuple[str, list[str], list[str]]:
    """(the heading, what the replay found, what would have avoided the failure), names as the trace has them."""
    r, failure = a.result, a.result.failure
    heading = (f"Replayed through the BFC model ({a.trace_path}, allocator {a.allocator}) under the dump's limit of "
               f"{_size(a.limit_bytes)}, allow_growth {'on' if r.options.allow_growth else 'off'}, garbage collection "
               f"{'on' if r.options.garbage_collection else 'off'}{partitioning_words(r.options, r.runtime)}")
    findings = [f"note: {note}" for note in a.assumptions]
    findings.extend(f"XLA: {effect_line(e)}" for e in a.effects)
    if failure is None:
        findings.append("the model serves every request of the trace: it does not run out of memory where TensorFlow "
                        "did (a trace of another run, or other options)")
        return heading, findings, []
    what = f"{_size(failure.request_bytes)} for op {failure.op or '(unknown)'}"
    state = (f"{format_bytes(failure.in_use_bytes)} in use, {format_bytes(failure.free_bytes)} free, largest free "
             f"chunk {format_bytes(failure.largest_free_bytes)}")
    if a.same_state:
        findings.append(f"the model runs out of memory at the same request ({what}) in the dump's state: {state} "
                        f"({failure.verdict})")
    elif a.same_request:
        findings.append(f"the model runs out of memory at the same request ({what}), in another state: {state}")
    else:
        findings.append(f"the model runs out of memory at another request ({what}): the trace may be of another run")
    helps = [f"a limit of at least {_size(r.min_limit_bytes)} (same options)" if r.min_limit_bytes is not None
             else "no limit the model holds (8 TiB) serves these requests (same options)"]
    for alt in r.alternatives:
        verdict = " (avoids it under the same limit)" if alt.fits else ""
        how = f" [{r.settings}: {alt.setting}]" if alt.setting else ""
        assert alt.min_limit_bytes is not None  # fit_requests searches it unless told not to
        helps.append(f"{alt.change}: a limit of at least {_size(alt.min_limit_bytes)}{verdict}{how}")
    return heading, findings, helps
