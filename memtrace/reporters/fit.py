"""Rendering ``memtrace fit``'s answers as text or JSON (``memtrace.fit/1``)."""

from __future__ import annotations

from typing import IO, Any

from ..allocator.fit import Alternative, Effect, Failure, FitOptions, FitResult
from ..allocator.reproduce import Reproduction
from ..units import MIB, format_bytes, format_us, plural
from .common import clean, table
from .orders import band_json, orders_under_json, render_band, render_orders_under

SCHEMA = "memtrace.fit/1"


# -- JSON ---------------------------------------------------------------------------------------


def to_json(path: str, results: list[FitResult], chunks: bool = True) -> dict[str, Any]:
    """One entry per allocator. ``failure.chunks`` lists the whole memory map at the failure."""
    return {"schema": SCHEMA, "path": path, "allocators": [_result_json(r, chunks) for r in results]}


def _options_json(o: FitOptions) -> dict[str, Any]:
    return {"limit_bytes": o.limit_bytes, "allow_growth": o.allow_growth, "garbage_collection": o.garbage_collection,
            "fragmentation_fraction": o.fragmentation_fraction, "partitioned": o.partitioned,
            "gap_split": o.gap_split or None}


def _result_json(r: FitResult, chunks: bool) -> dict[str, Any]:
    return {
        "allocator": r.allocator,
        "options": _options_json(r.options),
        "defaults": r.defaults,
        "runtime": r.runtime,
        "fits": r.fits,
        "min_limit_bytes": r.min_limit_bytes,
        "monotone": r.monotone,
        "counterexample": None if r.counterexample is None else {
            "fails_bytes": r.counterexample[0], "fits_bytes": r.counterexample[1]},
        "below_step_bytes": r.below_step_bytes,
        "peak_in_use_bytes": r.peak_in_use_bytes,
        "pool_bytes": r.pool_bytes,
        "lost_bytes": r.lost_bytes,
        "requested_peak_bytes": r.requested_peak_bytes,
        "events": r.events,
        "allocations": r.allocations,
        "reproduced": None if r.reproduced is None else _reproduced_json(r.reproduced),
        "failure": None if r.failure is None else _failure_json(r.failure, chunks),
        "alternatives": [_alternative_json(a) for a in r.alternatives],
        "settings": r.settings,
        "assumptions": list(r.assumptions),
        # XLA's three effects on what one recording says, where it is XLA's ({} otherwise). The order of frees is
        # where a band of limits over the orders a runtime takes belongs.
        "effects": {e.name: {"applies": e.applies, "words": e.words, "limit_bytes": e.limit_bytes} for e in r.effects},
        "fits_every_order": r.verdict if (r.band is not None or r.orders_under is not None)
        and r.options.limit_bytes is not None else None,
        "band": None if r.band is None else band_json(r.band),
        "smallest_searched": r.smallest_searched,
        "orders_under_limit": None if r.orders_under is None else orders_under_json(r.orders_under),
        "recordings": [{"path": path, "events": one.events, "min_limit_bytes": one.min_limit_bytes, "fits": one.fits,
                        "reproduced": None if one.reproduced is None else _reproduced_json(one.reproduced)}
                       for path, one in zip(r.paths, r.recordings)],
    }


def _reproduced_json(p: Reproduction) -> dict[str, Any]:
    return {"allocations": p.allocations, "addresses_equal": p.addresses_equal, "chunks_equal": p.chunks_equal,
            "events": p.events, "bytes_in_use_equal": p.bytes_in_use_equal,
            "fragmentation_equal": p.fragmentation_equal, "regions_descending": p.regions_descending,
            "region_order": list(p.region_order),
            "limit_bytes": p.limit_bytes, "first_difference": p.first_difference}


def _failure_json(f: Failure, chunks: bool) -> dict[str, Any]:
    return {
        "event": f.row, "op": f.op, "requested_bytes": f.requested_bytes, "request_bytes": f.request_bytes,
        "time_ns": f.time_ns, "in_use_bytes": f.in_use_bytes, "pool_bytes": f.pool_bytes, "free_bytes": f.free_bytes,
        "largest_free_bytes": f.largest_free_bytes, "verdict": f.verdict, "missing_bytes": f.missing_bytes,
        "end": f.end or None, "usable_largest_free_bytes": f.usable_largest_free_bytes,
        "regions": [{"region": r, "number": f.number_of(r), "size_bytes": s} for r, s in f.regions],
        "chunks": [{"region": c.region, "offset": c.offset, "size_bytes": c.size_bytes, "in_use": c.in_use,
                    "requested_bytes": c.requested_bytes if c.in_use else None, "op": c.op or None,
                    "tag": c.tag or None}
                   for c in f.chunks] if chunks else None,
    }


def _alternative_json(a: Alternative) -> dict[str, Any]:
    return {"change": a.change, "options": _options_json(a.options), "fits": a.fits, "min_limit_bytes": a.min_limit_bytes,
            "setting": a.setting or None}


# -- text ---------------------------------------------------------------------------------------


def mib(value: int) -> str:
    """A limit as TF's options take it (MiB) and for people."""
    if value % MIB == 0:
        return f"{value // MIB:,} MiB"
    return f"{format_bytes(value)} ({value:,} bytes)"


def partitioning_words(o: FitOptions, runtime: str) -> str:
    """``, spatial partitioning on (...)`` for a partitioned replay, ``off`` for XLA's without it; nothing for TF's."""
    if o.partitioned:
        gap = "a small central gap handed out whole, as JAX 0.11.2" if o.gap_split == "heuristic" else (
            "the central gap split exactly, as XLA's source")
        return f", spatial partitioning on ({gap})"
    return ", spatial partitioning off" if runtime == "XLA" else ""


_EFFECT_NAMES = {"partitioned_allocator": "partitioned allocator", "compiled_for_limit": "compiled for the limit",
                 "order_of_frees": "order of frees"}


def effect_line(e: Effect) -> str:
    """One of XLA's effects in a line: whether it applies, and what it means for the answer."""
    return f"{_EFFECT_NAMES.get(e.name, e.name)} ({'applies' if e.applies else 'does not apply'}): {clean(e.words)}"


def reproduction_line(p: Reproduction) -> str:
    """The self-check in one line, like the peak's reconciliation."""
    line = (f"the model reproduces {p.addresses_equal:,} of {p.allocations:,} addresses and "
            f"{p.fragmentation_equal:,} of {p.events:,} fragmentation values")
    extra = []
    if p.chunks_equal != p.allocations:
        extra.append(f"{p.chunks_equal:,} of {p.allocations:,} chunk sizes")
    if p.bytes_in_use_equal != p.events:
        extra.append(f"{p.bytes_in_use_equal:,} of {p.events:,} bytes-in-use values")
    if extra:
        line += " (" + ", ".join(extra) + ")"
    elif p.exact:
        line += ", and every chunk size and bytes-in-use value"
    return line


def headline(r: FitResult) -> str:
    """The answer in one sentence, as the text says it first (the pages lead with it): the smallest limit,
    whether the limit asked for fits, and where not, the request that fails."""
    said = [] if not r.smallest_searched else [
        f"the smallest limit is {mib(r.min_limit_bytes)}" if r.min_limit_bytes is not None
        else "no limit the model holds (up to 8 TiB) fits these requests"]
    if r.options.limit_bytes is not None:
        said.append(f"under {mib(r.options.limit_bytes)} it {'fits' if r.fits else 'does NOT fit'}")
    line = f"{r.allocator}: " + "; ".join(said) + "".join(f", {w}" for w in compiled_for_words(r))
    f = r.failure
    if f is not None:
        line += (f": {f.op or '(op unknown)'} asks for {format_bytes(f.request_bytes)} at event {f.row:,} and the "
                 f"largest free chunk is {format_bytes(f.largest_free_bytes)} ({f.verdict})")
    line += "."
    b = r.band
    if b is not None and not b.fixed:  # the orders a run may take: said where they are more than the recorded one
        n = len(b.orders)
        line += (f" Every one of {n} sampled orders needs {mib(b.always_fits_bytes)}." if b.narrow else
                 f" Over {n} sampled orders: every one fits from {mib(b.always_fits_bytes)}, none below "
                 f"{mib(b.never_fits_below_bytes)}"
                 + ("" if b.fitting_at_limit is None or r.options.limit_bytes is None else
                    f"; {b.fitting_at_limit} of {n} fit under {mib(r.options.limit_bytes)}") + ".")
    u = r.orders_under
    if u is not None and not u.fixed:
        line += f" {u.fitting} of {u.sampled} sampled orders fit under {mib(u.limit_bytes)}."
    return line


def compiled_for_words(r: FitResult) -> list[str]:
    """``["for the programs XLA compiled for 1,616 MiB"]`` where XLA compiled the recorded programs for their limit,
    so that an answer is not read as one for the programs XLA compiles for another; else none."""
    limit = r.compiled_for_bytes
    return [] if limit is None else [f"for the programs XLA compiled for {mib(limit)}"]


def render_text(results: list[FitResult], out: IO[str], map_rows: int = 20) -> None:
    for number, r in enumerate(results):
        if number:
            out.write("\n")
        _render(r, out, map_rows)


def _render(r: FitResult, out: IO[str], map_rows: int) -> None:
    o = r.options
    several = len(r.recordings) > 1
    what = (f"{len(r.recordings)} recordings of one step" if several else
            f"{plural(r.events, 'event')}, {plural(r.allocations, 'allocation')}")
    out.write(f"{clean(r.allocator)}: {what}; "
              f"allow_growth {'on' if o.allow_growth else 'off'}, garbage collection "
              f"{'on' if o.garbage_collection else 'off'}, fragmentation_fraction {o.fragmentation_fraction:g}"
              f"{partitioning_words(o, r.runtime)}\n")
    if r.defaults:
        out.write(f"  options not given are {r.defaults}\n")
    if several:
        for number, (path, one) in enumerate(zip(r.paths, r.recordings), 1):
            check = "" if one.reproduced is None else f"; self-check: {reproduction_line(one.reproduced)}"
            least = ("smallest limit not searched for" if not one.smallest_searched else
                     "smallest limit none that the model holds" if one.min_limit_bytes is None else
                     f"smallest limit {mib(one.min_limit_bytes)}")
            under = "" if one.options.limit_bytes is None else f"; {'fits' if one.fits else 'does NOT fit'} the limit"
            out.write(f"  recording {number} ({clean(path)}): {plural(one.events, 'event')}; {least}{under}{check}\n")
        out.write(f"  the answers below are recording 1's, then the band over all {len(r.recordings)}\n")
    if r.reproduced is not None and not several:
        p = r.reproduced
        order = ("ascending" if not p.regions_descending else "descending") + " addresses" if not p.region_order else (
            "addresses ranked " + ", ".join(str(rank) for rank in p.region_order) + " as the profile shows")
        out.write(f"  self-check: {reproduction_line(p)} (replayed under {mib(p.limit_bytes)}, regions at {order})\n")
        if p.first_difference:
            out.write(f"  first difference: {clean(p.first_difference)}\n")
    if not r.smallest_searched:
        out.write("  smallest limit: not searched for (asked whether the limit fits, --no-smallest)\n")
    elif r.min_limit_bytes is None:
        out.write("  smallest limit: none that the model holds (up to 8 TiB) fits these requests\n")
    else:
        out.write(f"  smallest limit: {mib(r.min_limit_bytes)}{' under the recorded order' if r.band is not None else ''}"
                  + "".join(f", {w}" for w in compiled_for_words(r)) + ("" if r.below_step_bytes <= MIB else
                     f" (the limits below it were tried every {mib(r.below_step_bytes)}: a smaller one may fit)") + "\n")
    if r.counterexample is not None:
        fails, fits = r.counterexample
        out.write(f"  fitting is NOT monotone in the limit: {mib(fits)} fits but {mib(fails)} does not (with growth, "
                  "the last region is cut to what the limit leaves, and later requests land differently)\n")
    out.write(f"  no allocator could do with less than {format_bytes(r.requested_peak_bytes)} (the most rounded bytes "
              "alive at once)\n")
    if o.limit_bytes is None:
        assert r.lost_bytes is not None  # without a limit, fit found the smallest one (else it refused)
        out.write(f"  under the smallest limit: peak in use {format_bytes(r.peak_in_use_bytes)}, "
                  f"{format_bytes(r.lost_bytes)} of the limit lost to fragmentation (limit - peak in use)\n")
    else:
        verdict = "fits" if r.fits else "does NOT fit"
        which = ["the recorded order"] if r.band is not None or r.orders_under is not None else []
        if r.compiled_for_bytes != o.limit_bytes:
            which += compiled_for_words(r)
        if which:
            verdict += f" ({', '.join(which)})"
        out.write(f"  under {mib(o.limit_bytes)}: {verdict}; peak in use {format_bytes(r.peak_in_use_bytes)}, "
                  f"pool {format_bytes(r.pool_bytes)}\n")
    if r.band is not None:
        render_band(r.band, out)
    if r.orders_under is not None:
        render_orders_under(r.orders_under, out)
    if r.failure is not None:
        _render_failure(r.failure, out, map_rows)
    if r.alternatives:
        out.write("  what would help (each replayed):\n")
        rows = []
        for a in r.alternatives:
            row = [a.change]
            if o.limit_bytes is not None:
                row.append("yes" if a.fits else "no")
            if a.min_limit_bytes is not None:
                row.append(mib(a.min_limit_bytes))
            rows.append(row)
        headers = ["change", *([] if o.limit_bytes is None else [f"fits {mib(o.limit_bytes)}"]),
                   *(["smallest limit"] if r.smallest_searched else [])]
        out.write(_indent(table(rows, headers, ["left"] + ["right"] * (len(headers) - 1), indent=4)))
        _render_settings(r, out)
    for note in r.assumptions:
        out.write(f"  assumed: {clean(note)}\n")
    if r.effects:
        out.write("  what bounds this answer (XLA):\n")
        for e in r.effects:
            out.write(f"    - {effect_line(e)}\n")


def _render_settings(r: FitResult, out: IO[str]) -> None:
    """How the runtime's user makes each change (its own settings, never another runtime's)."""
    if not r.settings:
        return
    if not any(a.setting for a in r.alternatives):
        out.write(f"    ({r.settings} has no setting for any of these: the runtime builds this allocator with them "
                  "fixed; they say what it would need)\n")
        return
    out.write(f"    how, in {r.settings}:\n")
    for a in r.alternatives:
        out.write(f"      {a.change}: {a.setting or '(no setting)'}\n")


def _render_failure(f: Failure, out: IO[str], map_rows: int) -> None:
    end = f" from the {f.end} end" if f.end else ""
    out.write(f"  the first request that fails: event {f.row:,}, op {clean(f.op) or '(unknown)'}, "
              f"{format_bytes(f.requested_bytes)} requested ({f.request_bytes:,} bytes rounded){end}\n")
    rows = [("time", format_us(f.time_ns) if f.time_ns else "0"),
            ("in use", format_bytes(f.in_use_bytes)), ("pool", (f"{format_bytes(f.pool_bytes)} in "
                                                       f"{plural(len(f.regions), 'region')}")),
            ("free", f"{format_bytes(f.free_bytes)} (free chunks + limit - pool)"),
            ("largest free", format_bytes(f.largest_free_bytes)
             + ("" if f.usable_largest_free_bytes is None else
                f"; usable by the {f.end} end {format_bytes(f.usable_largest_free_bytes)} (its holes, the central gap)")),
            ("verdict", f.verdict + (f" ({format_bytes(f.missing_bytes)} missing)" if f.missing_bytes else ""))]
    for key, value in rows:
        out.write(f"    {key:<12}  {value}\n")
    out.write(f"  the memory map then ({plural(len(f.chunks), 'chunk')}"
              + (f", the {map_rows} largest shown" if len(f.chunks) > map_rows else "") + "):\n")
    shown = sorted(f.chunks, key=lambda c: -c.size_bytes)[:map_rows]
    shown.sort(key=lambda c: (f.number_of(c.region), c.offset))
    body = [[f.number_of(c.region), f"{c.offset:,}", format_bytes(c.size_bytes), "in use" if c.in_use else "free",
             format_bytes(c.requested_bytes) if c.in_use else "", clean(c.op)] for c in shown]
    headers = ["region", "offset", "size", "state", "requested", "op"]
    aligns = ["right", "right", "right", "left", "right", "left"]
    if f.end:  # a partitioned pool: whose each chunk is
        for row, c in zip(body, shown):
            row.insert(4, c.tag)
        headers.insert(4, "tag")
        aligns.insert(4, "left")
    out.write(_indent(table(body, headers, aligns, indent=4)))


def _indent(text: str, prefix: str = "    ") -> str:
    return "".join(prefix + line + "\n" for line in text.rstrip("\n").split("\n"))
