"""``memtrace fit TRACE``: would this step fit under that limit, and what would make it fit? TF's BFC allocator replayed."""

from __future__ import annotations

import argparse
from typing import IO, Any

from . import add_output_options, add_trace_options, load_trace, order_count, resolve_allocators, write_report
from .batch_size import add_batch_options, check_options, run_batches


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "fit",
        help="replay the requests through TF's BFC allocator: the smallest limit, whether a limit fits, what helps",
        description="Replay an allocator's requests through a model of TensorFlow's BFC allocator (rounding, best "
        "fit, splitting, merging, regions, garbage collection) and say the smallest limit (to the MiB) under which "
        "the step runs, whether it fits a given limit, the first request that fails and the allocator's map then, "
        "and the limit each other option needs. Where a TF2 profile starts at the allocator's birth, the model is "
        "checked against every address, chunk, bytes-in-use and fragmentation value the allocator recorded. "
        "A run does not repeat its order (threads, streams), so orders the runtime may take are sampled from the "
        "recording and replayed too: the band says from which limit every sampled order fits and below which none "
        "does; with several recordings of one step (TRACE MORE...), over all of them. "
        "Exit 0: it fits (every sampled order); 1: it does not fit the limit; 2: bad input.",
    )
    add_trace_options(parser)
    parser.add_argument("files", nargs="*", metavar="MORE",
                        help="more recordings of the same step (run again, same program): the band is over all of them")
    parser.add_argument("--allocator", metavar="NAME|DEVICE",
                        help="the allocator, or a device (CPU:0, GPU:0) naming it; default: every BFC allocator")
    limit = parser.add_mutually_exclusive_group()
    limit.add_argument("--limit", metavar="SIZE", help="the allocator's memory limit to try (e.g. 15GiB, 682MiB)")
    limit.add_argument("--card", metavar="SIZE", help="a GPU's memory (e.g. 16GB): the limit TF derives from it, "
                       "free memory minus its reserve (see --compute-capability); XLA's: 0.75 of it")
    parser.add_argument("--compute-capability", metavar="X.Y", default="8.0",
                        help="the GPU's compute capability for --card (default 8.0): decides TF's reserve")
    parser.add_argument("--allow-growth", action=argparse.BooleanOptionalAction, default=None,
                        help="grow the pool region by region (default: that of the runtime that recorded the trace: "
                        "TF's on for CPU BFC, off for GPU; XLA's off for GPU)")
    parser.add_argument("--garbage-collection", action=argparse.BooleanOptionalAction, default=None,
                        help="free wholly free regions before giving up (default: TF's off for CPU BFC, on for GPU; "
                        "XLA's off)")
    parser.add_argument("--partitioning", action=argparse.BooleanOptionalAction, default=None,
                        help="XLA's spatially partitioned pool (a central gap between a lower and an upper end; "
                        "needs allow_growth off). Default: the runtime's: on for XLA's GPU allocator with "
                        "preallocation (JAX), off for TF's")
    parser.add_argument("--gap-split", metavar="heuristic|exact", default=None,
                        help="a partitioned pool's carve from its central gap: BFC's split rule, a small gap handed "
                        "out whole (heuristic: JAX 0.11.2, the default), or always split (exact: XLA's source)")
    parser.add_argument("--fragmentation-fraction", metavar="F", default=None,
                        help="split a chunk whose remainder is at least F x limit (TF's "
                        "internal_fragmentation_fraction); default 0: the 128 MiB rule")
    parser.add_argument("--recorded-limit", metavar="SIZE",
                        help="the limit the trace was recorded under, for the self-check (default: TF's default, 65,536 "
                        "MiB for CPU BFC; where a profile's events show the limit, that one)")
    parser.add_argument("--no-alternatives", dest="alternatives", action="store_false",
                        help="do not replay the other options (faster on large traces)")
    parser.add_argument("--no-smallest", dest="smallest", action="store_false",
                        help="with --limit or --card: answer only whether it fits, one replay (and one for each "
                        "alternative and each sampled order), searching no smallest limit")
    parser.add_argument("--orders", type=order_count, default=None, metavar="N",
                        help="orders to sample from each recording for the band, its own included (default 32; with "
                        "--vs, 8 of each recording's requests); 0: replay only the recorded order")
    parser.add_argument("--window", type=_milliseconds, default=None, metavar="MS",
                        help="the scheduling window in milliseconds: events of other threads further apart than this "
                        "keep their recorded order (default 10)")
    parser.add_argument("--seed", type=order_count, default=None, metavar="N",
                        help="the seed the sampled orders are drawn with (default 0: the same orders every time)")
    add_output_options(parser)
    parser.add_argument("--html", action="store_true", help="write a self-contained HTML page instead: the allocator's "
                        "address space over time, every chunk a box from its allocation to its free (needs -o FILE)")
    parser.add_argument("--group-by", choices=("scope", "layer"), default="scope",
                        help="--html: colour the chunks by name scope (default) or by Keras layer and phase")
    add_batch_options(parser)  # --vs LARGE: the largest batch that fits, from two recordings (commands/batch_size.py)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from ..allocator.defaults import limit_on_card, parse_compute_capability, trace_defaults
    from ..allocator.fit import fit_recordings
    from ..allocator.orders import DEFAULT_ORDERS, DEFAULT_SEED, DEFAULT_WINDOW_NS
    from ..allocator.requests import bfc_allocators
    from ..errors import UsageError
    from ..reporters import fit as report
    from ..units import parse_size

    fraction = _fraction(args.fragmentation_fraction)
    args.fragmentation_fraction = fraction  # (fit --vs reads it too)
    limit = _size(args.limit, "--limit", parse_size)
    card = None
    if args.card is not None:  # the limit on the card is the runtime's: TF's (less a reserve) or XLA's (a fraction)
        card = (_size(args.card, "--card", parse_size) or 0, parse_compute_capability(args.compute_capability))
    recorded = _size(args.recorded_limit, "--recorded-limit", parse_size)
    if args.partitioning and args.allow_growth:
        raise UsageError("--partitioning needs allow_growth off: XLA's allocator refuses both (a partitioned pool is "
                         "one fixed region)")
    if args.gap_split is not None and args.gap_split not in ("heuristic", "exact"):
        raise UsageError(f"--gap-split must be heuristic or exact (got {args.gap_split!r})")
    if args.gap_split is not None and args.partitioning is False:
        raise UsageError("--gap-split applies to a partitioned pool only (not with --no-partitioning)")
    check_options(args)
    if not args.smallest and args.limit is None and args.card is None:
        raise UsageError("--no-smallest asks only whether a limit fits: give --limit or --card")
    if not args.smallest and (args.vs is not None or args.html):
        raise UsageError("--no-smallest is for fit's own answer, not with --vs or --html")
    if args.vs is not None and (args.partitioning is not None or args.gap_split is not None):
        raise UsageError("--partitioning and --gap-split are not taken with --vs (it uses the runtime's default)")
    more = list(args.files)
    if args.vs is not None:
        if more:
            raise UsageError("fit --vs reads two recordings at two batch sizes: more recordings are for fit without --vs")
        return run_batches(args, limit, card)
    if more and args.html:
        raise UsageError("fit --html draws one recording: give one TRACE")
    orders = DEFAULT_ORDERS if args.orders is None else args.orders
    if more and not orders:
        raise UsageError("several recordings make a band: --orders 0 replays only one recorded order")
    trace = load_trace(args)
    traces = [trace] + [load_trace(args, path) for path in more]
    if args.allocator is not None:
        allocators = resolve_allocators(trace, [args.allocator]) or []
    else:
        allocators = bfc_allocators(trace)
        if not allocators:
            raise UsageError(f"{trace.path}: no allocator here made BFC requests (it has: "
                             f"{', '.join(trace.allocators) or 'none'}); name one with --allocator")
    for other in traces[1:]:
        missing = [name for name in allocators if name not in other.allocators]
        if missing:
            raise UsageError(f"{other.path}: no allocator {missing[0]!r} here (it has: "
                             f"{', '.join(other.allocators) or 'none'}): not a recording of the same step")
    limits: dict[str, int | None] = {name: limit for name in allocators}
    card_notes: dict[str, str] = {}
    if card is not None:  # the card limits the GPU's allocators; a pinned host allocator keeps its own (a note says so)
        for name in allocators:
            limits[name], note = limit_on_card(name, trace.runtime_of(name), *card, f"--card {args.card.strip()}")
            if note is not None:
                card_notes[name] = note
    if args.gap_split is not None and not args.partitioning and not any(
            trace_defaults(trace, name).partitioned and not args.allow_growth for name in allocators):
        raise UsageError(f"--gap-split applies to a partitioned pool, and no allocator here is one by default "
                         f"({', '.join(allocators)}): give --partitioning")
    window = DEFAULT_WINDOW_NS if args.window is None else args.window
    results = [fit_recordings(traces, name, limit=limits[name], allow_growth=args.allow_growth,
                              garbage_collection=args.garbage_collection, fragmentation_fraction=fraction,
                              recorded_limit=recorded, alternatives=args.alternatives, partitioned=args.partitioning,
                              gap_split=args.gap_split, orders=orders, window_ns=window,
                              seed=DEFAULT_SEED if args.seed is None else args.seed,
                              smallest=args.smallest)
               for name in allocators]
    results = [replace(r, assumptions=(*r.assumptions, card_notes[r.allocator])) if r.allocator in card_notes else r
               for r in results]

    if args.html:
        return _write_html(args, trace, allocators, limits, fraction, results)

    from ..reporters.common import with_notes, write_notes

    def render_text(out: IO[str]) -> None:
        write_notes(trace.oddities, out)  # a profile XLA recorded: the ops are unknown
        report.render_text(results, out)

    write_report(args, lambda: with_notes(report.to_json(trace.path, results), trace.oddities), render_text)
    return 0 if all(r.verdict for r in results) else 1


def _write_html(args: argparse.Namespace, trace: Any, allocators: list[str], limits: dict[str, int | None],
                fraction: float | None, results: list[Any]) -> int:
    """``--html``: the address space of each allocator (memtrace.allocator.address_space), under the options asked for."""
    from ..allocator.address_space import address_space
    from ..errors import UsageError
    from ..reporters.address_space import render_html
    from ..reporters.common import open_output
    from . import input_paths

    if args.output is None or args.json:
        raise UsageError("fit --html needs -o/--output FILE (and no --json)")
    from ..reporters.fit import headline
    from ..trace.layers import batch_size, load_layer_names

    spaces = [address_space(trace, name, limit=limits[name], allow_growth=args.allow_growth,
                            garbage_collection=args.garbage_collection, fragmentation_fraction=fraction or 0.0,
                            partitioned=args.partitioning, gap_split=args.gap_split)
              for name in allocators]
    names = load_layer_names(trace.path) if args.group_by == "layer" else None
    batch = batch_size(trace, names) if args.group_by == "layer" else None
    with open_output(args.output, input_paths(args)) as out:
        render_html(spaces, out, f"memtrace fit: {trace.path}", [headline(r) for r in results], args.group_by, names,
                    [batch] * len(spaces))
    return 0 if all(r.verdict for r in results) else 1


def _milliseconds(text: str) -> int:
    """An argparse type: milliseconds (a number, at least 0, at most a day) as nanoseconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of milliseconds: {text!r}") from None
    if not 0.0 <= value <= 86_400_000.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 86400000 ms: {text!r}")
    return round(value * 1_000_000)


def _fraction(text: str | None) -> float | None:
    """``--fragmentation-fraction``: a number from 0 to 1; anything else is one line (not argparse's usage)."""
    from ..errors import UsageError

    if text is None:
        return None
    try:
        fraction = float(text)
    except ValueError:
        raise UsageError(f"--fragmentation-fraction must be a number between 0 and 1 (got {text!r})") from None
    if not 0.0 <= fraction <= 1.0:  # (also nan)
        raise UsageError(f"--fragmentation-fraction must be between 0 and 1 (got {fraction:g})")
    return fraction


def _size(text: str | None, option: str, parse: Any) -> int | None:
    from ..errors import UsageError

    if text is None:
        return None
    if text.strip().startswith("-"):
        raise UsageError(f"{option} must not be negative (got {text!r})")
    return int(parse(text))
