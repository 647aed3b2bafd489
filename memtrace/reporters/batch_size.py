"""Rendering ``memtrace fit SMALL --vs LARGE`` as text or JSON: ``memtrace.fit/1`` entries with a ``batch`` part."""

from __future__ import annotations

from typing import IO, Any

from ..allocator.batch_size import BatchCheck, BatchFit
from ..units import MIB, format_bytes, plural
from . import fit as fit_report
from .common import clean, table

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
        "batch": r.batch,
        "largest_batch": r.largest_batch,
        "described_batch": r.described_batch,
        "described_fits": r.fit.fits,
        "close": r.close,
        "limits": [{"batch": row.batch, "min_limit_bytes": row.min_limit_bytes,
                    "other_order_min_limit_bytes": row.other_order_min_limit_bytes,
                    "peak_in_use_bytes": row.peak_in_use_bytes, "monotone": row.monotone} for row in r.limits],
        "cards": [{"card_gb": c.size_gb, "limit_bytes": c.limit_bytes, "largest_batch": c.largest_batch}
                  for c in r.cards],
        "check": None if r.check is None else _check_json(r.check),
    }


def _check_json(c: BatchCheck) -> dict[str, Any]:
    return {"batch": c.batch, "events": c.events, "aligned_events": c.aligned_events,
            "aligned_allocations": c.aligned_allocations, "equal_sizes": c.equal_sizes,
            "differing": [{"op": op, "predicted_bytes": p, "recorded_bytes": g} for op, p, g in c.differing],
            "predicted_min_limit_bytes": c.predicted_min_limit_bytes,
            "recorded_min_limit_bytes": c.recorded_min_limit_bytes}


# -- text ---------------------------------------------------------------------------------------

def headline(r: BatchFit, batch: int) -> str:
    """What the text says first, for the picture of batch ``batch``: the largest batch under the limit
    (and how close that is, where the order of a few events moves it), what this batch needs."""
    parts = []
    limit = r.fit.options.limit_bytes
    if r.largest_batch is not None and limit is not None:
        parts.append(f"under {fit_report.mib(limit)} the largest batch is {r.largest_batch:,}")
    row = next((row for row in r.limits if row.batch == batch), None)
    if row is not None:
        needs = f"batch {batch:,} needs {fit_report.mib(row.min_limit_bytes)}"
        if row.spread_bytes:
            needs += f" ({fit_report.mib(row.other_order_min_limit_bytes)} in the other recording's order)"
        if limit is not None:
            needs += ": it fits" if row.min_limit_bytes <= limit else ": it does NOT fit"
        parts.append(needs)
    text = f"{r.allocator}: " + "; ".join(parts) + "." if parts else f"{r.allocator}: batch {batch:,}."
    return text + (f" {r.close}" if r.close else "")


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
    limit = r.fit.options.limit_bytes
    if r.largest_batch is not None and limit is not None:
        out.write(f"  under {fit_report.mib(limit)} the largest batch is {r.largest_batch:,}\n")
    if r.limits and not r.cards:
        for row in r.limits:
            other = (f" ({fit_report.mib(row.other_order_min_limit_bytes)} in the other recording's order)"
                     if row.spread_bytes else "")
            out.write(f"  batch {row.batch:,} needs {fit_report.mib(row.min_limit_bytes)}{other}\n")
    if r.close:
        out.write(f"  {clean(r.close)}\n")
    if r.cards:
        _render_table(r, out)
    if r.check is not None:
        _render_check(r.check, check_path, out)
    what = ("the batch asked for" if r.batch is not None else "the first batch that does not fit"
            if r.largest_batch is not None else "the large recording's batch size")
    out.write(f"\nbatch {r.described_batch:,} ({what}), its requests predicted and replayed, as `memtrace fit` says:\n")
    fit_report.render_text([r.fit], out)
    for note in r.assumptions:
        if note not in r.fit.assumptions:
            out.write(f"  assumed: {clean(note)}\n")


def _render_table(r: BatchFit, out: IO[str]) -> None:
    rows = [[f"{row.batch:,}", fit_report.mib(row.min_limit_bytes),
             fit_report.mib(row.other_order_min_limit_bytes) if row.spread_bytes else "same",
             format_bytes(row.peak_in_use_bytes)] for row in r.limits]
    out.write("  the smallest limit of each batch size (replayed in the nearer recording's order, and in the other's):\n")
    out.write(_indent(table(rows, ["batch", "smallest limit", "other order", "peak in use"],
                                       ["right", "right", "right", "right"], indent=4)))
    if r.cpu:
        out.write("  TF's CPU BFC allocator takes its limit from TF_CPU_BFC_MEM_LIMIT_IN_MB (default 65,536 MiB); the "
                  "limits of the common GPU cards, under this allocator's options:\n")
        heads = ["limit (MiB)", "a card of", "largest batch"]
        body = [[f"{c.limit_bytes // MIB:,}", f"{c.size_gb} GB", f"{c.largest_batch:,}"] for c in r.cards]
    else:
        out.write("  the common cards (TF's limit: the card less TF's reserve for the compute capability, "
                  "--compute-capability; the CUDA context's own memory not subtracted):\n")
        heads = ["card", "limit", "largest batch"]
        body = [[f"{c.size_gb} GB", fit_report.mib(c.limit_bytes), f"{c.largest_batch:,}"] for c in r.cards]
    out.write(_indent(table(body, heads, ["right", "right", "right"], indent=4)))


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
