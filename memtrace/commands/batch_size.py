"""``memtrace fit SMALL --vs LARGE``: the largest batch that fits, from two recordings (the ``--vs`` options of ``fit``)."""

from __future__ import annotations

import argparse
from typing import IO, Any

from . import load_trace, resolve_allocators, write_report


def add_batch_options(parser: argparse.ArgumentParser) -> None:
    """``fit``'s options for two recordings at two batch sizes."""
    group = parser.add_argument_group(
        "two batch sizes (--vs)",
        "TRACE and LARGE are two recordings of one step at batch sizes B1 < B2 (from the allocator's birth for exact "
        "answers): their requests are aligned by op and order, each allocation's size at batch N predicted as affine "
        "in the batch, and batch N's requests replayed. With --limit (or --card): the largest batch that fits; with "
        "--batch N: whether N fits and the smallest limit it needs; with neither: the smallest limit of each batch "
        "size and the largest batch on the common cards. Exit 0: it fits (some batch fits the limit); 1: it does not.")
    group.add_argument("--vs", metavar="LARGE", help="the recording at the larger batch size")
    group.add_argument("--batch-sizes", metavar="B1,B2",
                       help="the two recordings' batch sizes (default: read from the inputs' leading dimension where "
                       "the traces carry shapes)")
    group.add_argument("--batch", type=int, metavar="N", help="the batch size to ask about")
    group.add_argument("--check", metavar="TRACE:B3", help="a recording at a third batch size B3: hold the "
                       "prediction to it, size by size")


def run_batches(args: argparse.Namespace, limit: int | None, card: tuple[int, int] | None = None) -> int:
    """``fit --vs``: ``limit`` is ``--limit`` in bytes, ``card`` ``--card`` (bytes, compute capability major),
    whose limit is the runtime's that recorded the traces; None where not given."""
    from dataclasses import replace

    from ..allocator.batch_size import DEFAULT_BATCH_ORDERS, MAX_BATCH, fit_batches
    from ..allocator.defaults import limit_on_card, parse_compute_capability
    from ..allocator.orders import DEFAULT_SEED, DEFAULT_WINDOW_NS
    from ..allocator.requests import bfc_allocators
    from ..errors import UsageError
    from ..reporters import batch_size as report

    sizes = _batch_sizes(args.batch_sizes)
    if args.html:
        if args.output is None or args.json:
            raise UsageError("fit --html needs -o/--output FILE (and no --json)")
        if args.batch is None and limit is None and card is None:
            raise UsageError("fit --vs --html draws one predicted batch: give --batch N, or --limit SIZE (or --card) "
                             "for the largest batch that fits and the first that does not")
    small, large = load_trace(args), load_trace(args, args.vs)
    check_with = None
    if args.check is not None:
        path, _, b3 = args.check.rpartition(":")
        if not path or not (b3.strip().isascii() and b3.strip().isdigit()) or int(b3) < 1:  # ('²' is a digit to isdigit)
            raise UsageError(f"--check wants TRACE:B3, a recording and its batch size (e.g. run_b48/:48), not "
                             f"{args.check!r}")
        if int(b3) > MAX_BATCH:  # (a batch size no recording has, and beyond what the prediction computes)
            raise UsageError(f"--check {args.check!r}: batch size {_shorten(b3)} is beyond the largest memtrace "
                             f"predicts ({MAX_BATCH:,})")
        args.check_trace = path
        check_with = (load_trace(args, path), int(b3))
    if args.allocator is not None:
        allocators = resolve_allocators(small, [args.allocator]) or []
    else:
        theirs = set(bfc_allocators(large))
        allocators = [name for name in bfc_allocators(small) if name in theirs]
        if not allocators:
            raise UsageError(f"{small.path}, {large.path}: no BFC allocator made requests in both; name one with "
                             "--allocator")
    limits: dict[str, int | None] = {name: limit for name in allocators}
    card_notes: dict[str, str] = {}
    if card is not None:  # the card limits the GPU's allocators; a pinned host allocator keeps its own (a note says so)
        for name in allocators:
            limits[name], note = limit_on_card(name, small.runtime_of(name), *card, f"--card {args.card.strip()}")
            if note is not None:
                card_notes[name] = note
    results = [fit_batches(small, large, name, sizes, batch=args.batch, limit=limits[name], allow_growth=args.allow_growth,
                           garbage_collection=args.garbage_collection,
                           fragmentation_fraction=args.fragmentation_fraction, check_with=check_with,
                           compute_capability=parse_compute_capability(args.compute_capability),
                           orders=DEFAULT_BATCH_ORDERS if args.orders is None else args.orders,
                           window_ns=DEFAULT_WINDOW_NS if args.window is None else args.window,
                           seed=DEFAULT_SEED if args.seed is None else args.seed)
               for name in allocators]
    results = [replace(r, fit=replace(r.fit, assumptions=(*r.fit.assumptions, card_notes[r.allocator])))
               if r.allocator in card_notes else r for r in results]

    if args.html:
        _write_html(args, small.path, large.path, results)
    else:
        def render_text(out: IO[str]) -> None:
            report.render_text(small.path, large.path, results, out, check_with[0].path if check_with else None)

        write_report(args, lambda: report.to_json(small.path, large.path, results), render_text)
    return 0 if all(r.fits for r in results) else 1  # (the JSON's "fits" says the same)


def _write_html(args: argparse.Namespace, small: str, large: str, results: list[Any]) -> None:
    """``--html``: the address space of each predicted batch: the one asked for (--batch), else under a limit the
    largest that fits and the first that does not (the one whose failure the text describes)."""
    from ..allocator.address_space import AddressSpace, predicted_address_space
    from ..reporters.address_space import render_html
    from ..reporters.batch_size import headline
    from ..reporters.common import open_output
    from . import input_paths

    spaces: list[AddressSpace] = []
    leads: list[str] = []
    for r in results:
        batches = [r.batch] if r.batch is not None else [n for n in (r.largest_batch, r.described_batch) if n]
        spaces.extend(predicted_address_space(r, n, small, large) for n in dict.fromkeys(batches))
        leads.extend(headline(r, n) for n in dict.fromkeys(batches))
    b1, b2 = results[0].batch_sizes
    title = f"memtrace fit: predicted from two recordings, {small} (batch {b1:,}) and {large} (batch {b2:,})"
    with open_output(args.output, input_paths(args)) as out:
        render_html(spaces, out, title, leads)


def _shorten(digits: str) -> str:
    """A number for a message: at most 30 digits of it."""
    digits = digits.strip()
    return digits if len(digits) <= 30 else f"{digits[:12]}...{digits[-6:]} ({len(digits)} digits)"


def _batch_sizes(text: str | None) -> tuple[int, int] | None:
    from ..errors import UsageError

    if text is None:
        return None
    parts = [part.strip() for part in text.split(",")]
    if len(parts) != 2 or not all(part.isascii() and part.isdigit() for part in parts):
        raise UsageError(f"--batch-sizes wants two whole numbers, the small recording's batch size and the large "
                         f"one's (e.g. 16,64), not {text!r}")
    return int(parts[0]), int(parts[1])


def check_options(args: Any) -> None:
    """Refuse ``fit``'s batch options without ``--vs``."""
    from ..errors import UsageError

    for option, value in (("--batch-sizes", args.batch_sizes), ("--batch", args.batch), ("--check", args.check)):
        if value is not None and args.vs is None:
            raise UsageError(f"{option} needs --vs LARGE (two recordings at two batch sizes)")
