"""Rendering ``memtrace fit SMALL --vs LARGE`` as text or JSON: ``memtrace.fit/1`` entries with a ``batch`` part."""

from __future__ import annotations

from typing import IO, Any

from ..allocator.batch_band import MARGIN_BYTES, LargestBatch, OneRecordingOnly
from ..allocator.batch_size import BatchCheck, BatchFit, Card
from ..allocator.bfc import MAX_LIMIT_BYTES
from ..allocator.orders import OrderBand
from ..units import MIB, format_bytes, plural
from . import fit as fit_report
from .common import clean, table
from .orders import band_json

# -- JSON ---------------------------------------------------------------------------------------

def to_json(small_path: str, large_path: str, results: list[BatchFit]) -> dict[str, Any]:
    """``memtrace fit``'s document, one entry per allocator describing batch ``batch.described_batch``, plus ``batch``."""
    document = fit_report.to_json(small_path, [r.fit for r in results])
    document["vs"] = large_path
    for entry, result in zip(document["allocators"], results):
        entry["fits"] = result.fits  # the answer, as the exit code gives it; the described batch's own is in "batch"
        entry["batch"] = batch_json(result)
    return document


def batch_json(r: BatchFit) -> dict[str, Any]:
    m = r.scaling
    return {
        "batch_sizes": list(r.batch_sizes),
        "batch_sizes_from": r.batch_sizes_from,
        "events": m.events,
        "aligned_events": m.aligned_events,
        "allocations": m.allocations,
        "aligned_allocations": m.aligned_allocations,
        "affine_allocations": m.affine_allocations,
        "growing_allocations": m.growing_allocations,
        "rounded_allocations": m.rounded_allocations,
        "shrinking_allocations": m.shrinking_allocations,
        "left_over_events": [m.left_over_small, m.left_over_large],
        "one_recording_only": None if r.only is None else [_only_json(o) for o in r.only],
        "batch": r.batch,
        "largest_batch": r.largest_batch,
        "largest_batch_always": r.largest_batch_always,
        "largest_batch_possible": r.largest_batch_possible,
        "search": None if r.band is None else _search_json(r.band.recorded),
        "extrapolated": r.extrapolated,
        "described_batch": r.described_batch,
        "described_fits": r.fit.fits,
        "orders": r.orders,
        "band": None if r.limit_band is None else band_json(r.limit_band),
        "limits": [{"batch": row.batch, "min_limit_bytes": row.min_limit_bytes,
                    "other_order_min_limit_bytes": row.other_order_min_limit_bytes,
                    "peak_in_use_bytes": row.peak_in_use_bytes, "monotone": row.monotone,
                    "band": None if row.band is None else band_json(row.band)} for row in r.limits],
        "cards": [{"card_gb": c.size_gb, "limit_bytes": c.limit_bytes, "largest_batch": c.largest_batch,
                   "largest_batch_always": c.largest_batch_always, "largest_batch_possible": c.largest_batch_possible}
                  for c in r.cards],
        "check": None if r.check is None else _check_json(r.check),
    }


def _only_json(o: OneRecordingOnly) -> dict[str, Any]:
    return {"recording": o.recording, "batch": o.batch, "allocations": o.allocations, "bytes": o.total_bytes,
            "ops": [{"op": op.op, "allocations": op.allocations, "largest_bytes": op.largest_bytes,
                     "bytes": op.total_bytes} for op in o.ops]}


def _search_json(found: LargestBatch) -> dict[str, Any]:
    return {"monotone": found.monotone, "counterexample": None if found.counterexample is None else list(
        found.counterexample), "boundary": found.boundary, "top": found.top, "step": found.step}


def _check_json(c: BatchCheck) -> dict[str, Any]:
    return {"batch": c.batch, "events": c.events, "aligned_events": c.aligned_events,
            "aligned_allocations": c.aligned_allocations, "equal_sizes": c.equal_sizes,
            "differing": [{"op": op, "predicted_bytes": p, "recorded_bytes": g} for op, p, g in c.differing],
            "predicted_min_limit_bytes": c.predicted_min_limit_bytes,
            "recorded_min_limit_bytes": c.recorded_min_limit_bytes}


# -- text ---------------------------------------------------------------------------------------

def headline(r: BatchFit, batch: int) -> str:
    """What the text says first, for the picture of batch ``batch``: the largest batch under the limit (and where
    every plausible run fits, and some does), what this batch needs."""
    parts = []
    limit = r.fit.options.limit_bytes
    if r.largest_batch is not None and limit is not None:
        parts.append(f"under {fit_report.mib(limit)} the largest batch is {r.largest_batch:,}{_band_words(r)}")
    row = next((row for row in r.limits if row.batch == batch), None)
    if row is not None:
        needs = f"batch {batch:,} needs {fit_report.mib(row.min_limit_bytes)}"
        if row.spread_bytes:
            needs += f" ({fit_report.mib(row.other_order_min_limit_bytes)} in the other recording's order)"
        if limit is not None:
            needs += ": it fits" if row.min_limit_bytes <= limit else ": it does NOT fit"
        parts.append(needs)
    elif batch == r.batch and r.fit.min_limit_bytes is None:
        parts.append(f"batch {batch:,} needs more than the model holds (8 TiB): it fits no limit")
    return f"{r.allocator}: " + "; ".join(parts) + "." if parts else f"{r.allocator}: batch {batch:,}."


def _band_words(r: BatchFit) -> str:
    """``; every plausible run fits up to batch A, some up to B`` (or nothing without a band)."""
    always, possible = r.largest_batch_always, r.largest_batch_possible
    if always is None or possible is None:
        return ""
    return f" (every plausible run fits up to batch {always:,}, some up to {possible:,})"


def render_text(small_path: str, large_path: str, results: list[BatchFit], out: IO[str],
                check_path: str | None = None) -> None:
    for number, r in enumerate(results):
        if number:
            out.write("\n")
        _render(small_path, large_path, r, out, check_path)


def _render(small_path: str, large_path: str, r: BatchFit, out: IO[str], check_path: str | None) -> None:
    m = r.scaling
    b1, b2 = r.batch_sizes
    out.write(f"{clean(r.allocator)}: batch {b1:,} ({clean(small_path)}) and batch {b2:,} ({clean(large_path)})\n")
    if r.batch_sizes_from:
        out.write(f"  batch sizes {clean(r.batch_sizes_from)}\n")
    out.write(f"  aligned by op and order: {m.aligned_events:,} of {plural(m.events, 'event')}, "
              f"{m.aligned_allocations:,} of {plural(m.allocations, 'allocation')}; {m.affine_allocations:,} affine in "
              f"the batch (a whole number of bytes per sample; {m.growing_allocations:,} grow)\n")
    odd = []
    if m.rounded_allocations:
        odd.append(f"{plural(m.rounded_allocations, 'allocation')} grow by a fraction of a byte per sample: rounded up")
    if m.shrinking_allocations:
        odd.append(f"{plural(m.shrinking_allocations, 'allocation')} shrink as the batch grows: held at the larger "
                   "size")
    if odd:
        out.write(f"  {'; '.join(odd)}\n")
    out.write(f"  left over: {plural(m.left_over_small, 'event')} of batch {b1:,}'s, {m.left_over_large:,} of batch "
              f"{b2:,}'s; batch N is written in the order of the recording nearer N, its left-over allocations at "
              "their recorded size\n")
    if r.only is not None:
        _render_only(r, out)
    limit = r.fit.options.limit_bytes
    if r.largest_batch is not None and limit is not None:
        out.write(f"  under {fit_report.mib(limit)} the largest batch is {r.largest_batch:,} in the prediction (each "
                  "batch in the nearer recording's order)\n")
        _render_largest_band(r, out)
    if r.limits and not r.cards:
        for row in r.limits:
            other = (f" ({fit_report.mib(row.other_order_min_limit_bytes)} in the other recording's order)"
                     if row.spread_bytes else "")
            out.write(f"  batch {row.batch:,} needs {fit_report.mib(row.min_limit_bytes)}{other}\n")
    if r.batch is not None:
        _render_batch_band(r, out)
    _render_extrapolation(r, out)
    if r.cards:
        _render_table(r, out)
    if r.check is not None:
        _render_check(r.check, check_path, out)
    what = ("the batch asked for" if r.batch is not None else "the first batch that does not fit"
            if r.largest_batch is not None else "the large recording's batch size")
    out.write(f"\nbatch {r.described_batch:,} ({what}), its requests predicted and replayed, as `memtrace fit` says:\n")
    if r.batch is not None and r.fit.min_limit_bytes is None and r.fit.options.limit_bytes == MAX_LIMIT_BYTES \
            and not r.limits:
        out.write(f"  (batch {r.described_batch:,} needs more than the model holds: replayed under the most it holds, "
                  "8 TiB)\n")
    fit_report.render_text([r.fit], out)
    for note in r.assumptions:
        if note not in r.fit.assumptions:
            out.write(f"  assumed: {clean(note)}\n")


def _render_only(r: BatchFit, out: IO[str]) -> None:
    """The requests one recording holds and the other has no partner for, named, and how the band bounds them."""
    assert r.only is not None
    held = [o for o in r.only if o.allocations]
    if not held:
        out.write("  in one recording only: nothing (every allocation of each recording has a partner in the other)\n")
        return
    for o in held:
        ops = "; ".join(f"{plural(op.allocations, 'allocation')} of {clean(op.op) or '(unknown op)'}"
                        f" ({_sizes(op.largest_bytes, op.total_bytes, op.allocations)})" for op in o.ops[:4])
        more = f"; and {plural(len(o.ops) - 4, 'more op')}" if len(o.ops) > 4 else ""
        out.write(f"  in batch {o.batch:,}'s recording only: {plural(o.allocations, 'allocation')}, "
                  f"{format_bytes(o.total_bytes)}: {ops}{more}\n")
    out.write("    the band replays each batch without them, and with them grown in proportion to the batch above the "
              "batch they were recorded at\n")


def _sizes(largest: int, total: int, count: int) -> str:
    if count == 1:
        return format_bytes(total)
    return f"{format_bytes(largest)} the largest, {format_bytes(total)} in all"


def _runs_made(orders: int) -> str:
    """How each batch's plausible runs are made (see memtrace.allocator.batch_band)."""
    drawn = f" and {orders - 1:,} drawn from each" if orders > 1 else ""
    return (f"each recording's order{drawn}, with the prediction's requests, without the requests in one recording "
            "only, and with them grown, where those differ; an estimate from two recordings")


def _render_largest_band(r: BatchFit, out: IO[str]) -> None:
    band = r.band
    if band is None:
        return
    found = band.recorded
    if found.counterexample is not None:
        bad, good = found.counterexample
        out.write(f"  fitting is NOT monotone in the batch: batch {bad:,} does not fit, batch {good:,} does (the "
                  f"largest batch is one no larger batch beats: every batch up to {found.top:,}, where the bytes alive "
                  "at once pass the limit, was tried)\n" if found.exhaustive else
                  f"  fitting is NOT monotone in the batch: batch {bad:,} does not fit, batch {good:,} does\n")
    if not found.exhaustive:
        out.write(f"  (above batch {found.boundary:,}, every {found.step:,}th batch up to {found.top:,} was tried, not "
                  "every one: a batch between may fit)\n")
    if band.always is None or band.possible is None:
        return
    out.write(f"  every plausible run fits up to batch {band.always.batch:,}; some fits up to batch "
              f"{band.possible.batch:,}\n")
    out.write(f"    (a batch's plausible runs: {_runs_made(r.orders)})\n")


def _render_batch_band(r: BatchFit, out: IO[str]) -> None:
    b = r.limit_band
    if b is None:
        if r.orders and r.fit.min_limit_bytes is None and not r.limits:
            out.write(f"  batch {r.batch:,} needs more than the model holds (8 TiB): it fits no limit\n")
        return
    n = len(b.orders)
    out.write(f"  the plausible runs of batch {r.batch:,}: {n:,} ({_runs_made(r.orders)})\n")
    if b.narrow:
        out.write(f"    every plausible run needs {fit_report.mib(b.always_fits_bytes)}\n")
    else:
        out.write(f"    every plausible run fits from {fit_report.mib(b.always_fits_bytes)}; some from "
                  f"{fit_report.mib(b.first_fit_bytes)}; none below {fit_report.mib(b.never_fits_below_bytes)} (the "
                  "fewest bytes a plausible run holds at once)\n")
    if b.limit_bytes is not None and b.fitting_at_limit is not None:
        k = b.fitting_at_limit
        verdict = ("every one" if k == n else "none: it does NOT fit" if k == 0 else
                   f"{100 * k / n:.0f}%: a run may run out of memory; it does NOT fit every plausible run")
        out.write(f"    {k}/{n} plausible runs fit under {fit_report.mib(b.limit_bytes)}: {verdict}\n")
        if k == n and b.always_fits_bytes > b.limit_bytes - MARGIN_BYTES:
            out.write(f"    close: within {fit_report.mib(MARGIN_BYTES)} of the limit, where TensorFlow's own runs have "
                      "needed more than every plausible run of their recordings: a run may still run out\n")


def _render_extrapolation(r: BatchFit, out: IO[str]) -> None:
    """Where the answer lies beyond the recorded batch sizes, say so."""
    factor = r.extrapolated
    b1, b2 = r.batch_sizes
    batch = r.batch if r.batch is not None else r.largest_batch
    if factor is None or batch is None or r.cards:
        return
    where = f"{factor:,.1f}x the largest recorded batch ({b2:,})" if batch > b2 else (
        f"below the smallest recorded batch ({b1:,})")
    out.write(f"  extrapolated: batch {batch:,} is {where}. Two recordings show the requests of batch {b1:,} to "
              f"{b2:,} only: the band grows the requests that may grow with the batch, but TensorFlow may ask for "
              f"other requests at a batch size neither recording shows (it rewrites the graph by size): record batch "
              f"{batch:,} and hold the prediction to it (--check TRACE:{batch})\n")


def _render_table(r: BatchFit, out: IO[str]) -> None:
    banded = any(row.band is not None for row in r.limits)
    rows = [[f"{row.batch:,}", fit_report.mib(row.min_limit_bytes),
             fit_report.mib(row.other_order_min_limit_bytes) if row.spread_bytes else "same",
             *([_band_cell(row.band)] if banded else []),
             format_bytes(row.peak_in_use_bytes)] for row in r.limits]
    b2 = r.batch_sizes[1]
    out.write("  the smallest limit of each batch size (replayed in the nearer recording's order, and in the other's"
              + ("; the band: from the least a plausible run needs to where every one fits, each in its recording's "
                 "own order" if banded else "") + f"; beyond batch {b2:,}, extrapolated):\n")
    out.write(_indent(table(rows, ["batch", "smallest limit", "other order", *(["band"] if banded else []),
                                   "peak in use"], ["right"] * (5 if banded else 4), indent=4)))
    banded = any(c.largest_batch_always is not None for c in r.cards)
    extra = ["every run", "some run"] if banded else []
    if r.cpu:
        out.write("  TF's CPU BFC allocator takes its limit from TF_CPU_BFC_MEM_LIMIT_IN_MB (default 65,536 MiB); the "
                  "limits of the common GPU cards, under this allocator's options:\n")
        heads = ["limit (MiB)", "a card of", "largest batch", *extra, "extrapolated"]
        body = [[f"{c.limit_bytes // MIB:,}", f"{c.size_gb} GB", f"{c.largest_batch:,}", *_card_band(c, banded),
                 _times(c.largest_batch, b2)] for c in r.cards]
    else:
        out.write("  the common cards (TF's limit: the card less TF's reserve for the compute capability, "
                  "--compute-capability; the CUDA context's own memory not subtracted):\n")
        heads = ["card", "limit", "largest batch", *extra, "extrapolated"]
        body = [[f"{c.size_gb} GB", fit_report.mib(c.limit_bytes), f"{c.largest_batch:,}", *_card_band(c, banded),
                 _times(c.largest_batch, b2)] for c in r.cards]
    out.write(_indent(table(body, heads, ["right"] * len(heads), indent=4)))
    out.write(f"  largest batch: in the prediction; every run / some run: where every plausible run fits, and some "
              f"(each recording's own order). Beyond batch {b2:,} these are extrapolations: two recordings show the "
              "requests of their own batch sizes only, and TensorFlow may ask for others at a batch size neither "
              "shows; record the batch you mean to run and hold the prediction to it (--check)\n")


def _band_cell(band: OrderBand | None) -> str:
    if band is None:
        return "-"
    if band.first_fit_bytes == band.always_fits_bytes:
        return fit_report.mib(band.always_fits_bytes)
    return f"{band.first_fit_bytes // MIB:,} to {fit_report.mib(band.always_fits_bytes)}"


def _card_band(c: Card, banded: bool) -> list[str]:
    if not banded:
        return []
    return [f"{c.largest_batch_always:,}" if c.largest_batch_always is not None else "-",
            f"{c.largest_batch_possible:,}" if c.largest_batch_possible is not None else "-"]


def _times(batch: int, b2: int) -> str:
    return f"{batch / b2:,.0f}x" if batch > b2 else "no"


def _render_check(c: BatchCheck, path: str | None, out: IO[str]) -> None:
    where = f" ({clean(path)})" if path else ""
    out.write(f"  checked against a recording of batch {c.batch:,}{where}: {c.equal_sizes:,} of {c.aligned_allocations:,}"
              f" aligned allocations predicted to the byte ({c.aligned_events:,} of {plural(c.events, 'event')} "
              f"aligned); smallest limit predicted {fit_report.mib(c.predicted_min_limit_bytes)}, the recording's own "
              f"requests replayed {fit_report.mib(c.recorded_min_limit_bytes)}\n")
    for op, predicted, recorded in c.differing[:5]:
        out.write(f"    differs: {clean(op) or '(unknown op)'}: predicted {predicted:,} B, recorded {recorded:,} B\n")
    if len(c.differing) > 5:
        out.write(f"    and {len(c.differing) - 5:,} more\n")


def _indent(text: str, prefix: str = "    ") -> str:
    return "".join(prefix + line + "\n" for line in text.rstrip("\n").split("\n"))
