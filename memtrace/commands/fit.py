"""``memtrace fit TRACE``: would this step fit under that limit, and what would make it fit? TF's BFC allocator replayed."""

from __future__ import annotations

import argparse
from typing import IO, Any

from . import add_output_options, add_trace_options, load_trace, write_report


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "fit",
        help="replay the requests through TF's BFC allocator: the smallest limit, whether a limit fits, what helps",
        description="Replay an allocator's requests through a model of TensorFlow's BFC allocator (rounding, best "
        "fit, splitting, merging, regions, garbage collection) and say the smallest limit (to the MiB) under which "
        "the step runs, whether it fits a given limit, the first request that fails and the allocator's map then, "
        "and the limit each other option needs. Where a TF2 profile starts at the allocator's birth, the model is "
        "checked against every address, chunk, bytes-in-use and fragmentation value the allocator recorded. "
        "Exit 0: it fits; 1: it does not fit the limit; 2: bad input.",
    )
    add_trace_options(parser)
    parser.add_argument("--allocator", metavar="NAME|DEVICE",
                        help="the allocator, or a device (CPU:0, GPU:0) naming it; default: every BFC allocator")
    limit = parser.add_mutually_exclusive_group()
    limit.add_argument("--limit", metavar="SIZE", help="the allocator's memory limit to try (e.g. 15GiB, 682MiB)")
    limit.add_argument("--card", metavar="SIZE", help="a GPU's memory (e.g. 16GB): the limit TF derives from it, "
                       "free memory minus its reserve (see --compute-capability)")
    parser.add_argument("--compute-capability", metavar="X.Y", default="8.0",
                        help="the GPU's compute capability for --card (default 8.0): decides TF's reserve")
    parser.add_argument("--allow-growth", action=argparse.BooleanOptionalAction, default=None,
                        help="grow the pool region by region (default: TF's for the allocator: on for CPU BFC, off "
                        "for GPU)")
    parser.add_argument("--garbage-collection", action=argparse.BooleanOptionalAction, default=None,
                        help="free wholly free regions before giving up (default: TF's: off for CPU BFC, on for GPU)")
    parser.add_argument("--fragmentation-fraction", metavar="F", type=float, default=None,
                        help="split a chunk whose remainder is at least F x limit (TF's "
                        "internal_fragmentation_fraction); default 0: the 128 MiB rule")
    parser.add_argument("--recorded-limit", metavar="SIZE",
                        help="the limit the trace was recorded under, for the self-check (default: TF's default, 65,536 "
                        "MiB for CPU BFC; a GPU has none: without this, no self-check)")
    parser.add_argument("--no-alternatives", dest="alternatives", action="store_false",
                        help="do not replay the other options (faster on large traces)")
    add_output_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import sys

    from ..devices import meaning, resolve_allocator
    from ..errors import UsageError
    from ..fit import bfc_allocators, fit, gpu_limit_bytes, parse_compute_capability
    from ..reporters import fit as report
    from ..units import parse_size

    fraction = args.fragmentation_fraction
    if fraction is not None and not 0.0 <= fraction <= 1.0:
        raise UsageError(f"--fragmentation-fraction must be between 0 and 1 (got {fraction:g})")
    limit = _size(args.limit, "--limit", parse_size)
    if args.card is not None:
        major = parse_compute_capability(args.compute_capability)
        limit = gpu_limit_bytes(_size(args.card, "--card", parse_size) or 0, major)
    recorded = _size(args.recorded_limit, "--recorded-limit", parse_size)
    trace = load_trace(args)
    if args.allocator is not None:
        allocator = resolve_allocator(trace, args.allocator)
        if allocator != args.allocator:
            print(f"memtrace: {meaning(args.allocator, allocator)}", file=sys.stderr)
        allocators = [allocator]
    else:
        allocators = bfc_allocators(trace)
        if not allocators:
            raise UsageError(f"{trace.path}: no allocator here made BFC requests (it has: "
                             f"{', '.join(trace.allocators) or 'none'}); name one with --allocator")
    results = [fit(trace, name, limit=limit, allow_growth=args.allow_growth, garbage_collection=args.garbage_collection,
                   fragmentation_fraction=fraction, recorded_limit=recorded, alternatives=args.alternatives)
               for name in allocators]

    def render_text(out: IO[str]) -> None:
        report.render_text(results, out)

    write_report(args, lambda: report.to_json(trace.path, results), render_text)
    return 0 if all(r.fits for r in results) else 1


def _size(text: str | None, option: str, parse: Any) -> int | None:
    from ..errors import UsageError

    if text is None:
        return None
    if text.strip().startswith("-"):
        raise UsageError(f"{option} must not be negative (got {text!r})")
    return int(parse(text))
