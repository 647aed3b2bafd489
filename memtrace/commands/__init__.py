"""One module per ``memtrace`` subcommand; each has ``register(subparsers)`` and ``run(args) -> int``.

Command modules import only argparse at the top; the analysis they call is imported in ``run``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from typing import IO, Any

COMMANDS = (
    "summary", "peak", "timeline", "ops", "frag", "tensor", "graph", "check", "diff", "report", "export", "oom",
    "batch", "trend", "fit", "run",
)


def register_all(subparsers: Any) -> None:
    for name in COMMANDS:
        importlib.import_module(f"{__name__}.{name}").register(subparsers)


def add_trace_options(parser: argparse.ArgumentParser) -> None:
    """The trace to read and the optional separate GraphDef, shared by every command."""
    parser.add_argument("trace", metavar="TRACE", help="RunMetadata or StepStats (text or binary, optionally gzip), "
                        "or a TensorFlow 2 profile: HOST.xplane.pb, its run directory or its logdir")
    parser.add_argument("--graph", metavar="FILE", help="a GraphDef (text or binary) to take op types and inputs from")
    add_profile_options(parser)
    add_jobs_option(parser)


def add_profile_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--step", type=int, metavar="N", help="a profile: only step N's window (see `memtrace summary`)")
    parser.add_argument("--run", dest="profile_run", metavar="NAME", help="a profile logdir: this run (default: the newest)")


def load_trace(args: argparse.Namespace, path: str | None = None) -> Any:
    """The command's trace (``path`` instead of ``args.trace`` where a command reads two), as its options say."""
    from ..api import load

    return load(args.trace if path is None else path, graph=getattr(args, "graph", None),
                step=getattr(args, "step", None), run=getattr(args, "profile_run", None))


def add_jobs_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-j", "--jobs", type=positive_int, default=1, metavar="N",
                        help="read the trace with N processes (default 1; at most one a core): faster on "
                        "large traces, at some tens of MB of memory per process")


def add_output_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="write JSON instead of text")
    parser.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")


def add_allocator_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--allocator", action="append", metavar="NAME",
                        help="only this allocator, or the allocator of this device (CPU:0, GPU:0 or a full device "
                        "name; repeatable); default: all, largest peak first")


def resolve_allocators(trace: Any, names: list[str] | None) -> list[str] | None:
    """``--allocator`` values as allocator names: a device (``CPU:0``) becomes the allocator its
    memory went through, and a line on stderr says which; None stays None (every allocator)."""
    if names is None:
        return None
    from ..trace.devices import meaning, resolve_allocator

    resolved = []
    for name in names:
        allocator = resolve_allocator(trace, name)
        if allocator != name:
            print(f"memtrace: {meaning(name, allocator)}", file=sys.stderr)
        resolved.append(allocator)
    return list(dict.fromkeys(resolved))


def refuse_unknown(trace: Any, named: list[str] | None, unknown: list[Any]) -> None:
    """Refuse the command (exit 2, one line) where an allocator whose numbers are unknown (its bytes
    add up past int64: ``memtrace.trace.replay.Uncounted``) was asked for by name, or where every allocator
    of the trace is one: nothing would be left to report. Otherwise the command reports the others
    and shows those as unknown."""
    if unknown and (named is not None or len(unknown) == len(trace.allocators)):
        raise unknown[0].error(trace.path)


def add_filter_options(parser: argparse.ArgumentParser, name_help: str, size_help: str) -> None:
    """``--name REGEX`` and ``--min-bytes SIZE``, tfprof's filters (``-show_name_regexes``, ``-min_bytes``)."""
    parser.add_argument("--name", metavar="REGEX", help=name_help)
    parser.add_argument("--min-bytes", metavar="SIZE", help=size_help)


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def order_count(text: str) -> int:
    """An argparse type: how many orders to sample (``--orders``), a whole number from 0 to 1,000,000."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 0 <= value <= 1_000_000:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1,000,000: {text!r}")
    return value


def input_paths(args: argparse.Namespace) -> list[str | None]:
    """Every file a command reads (trace, graph, budget file, both traces of a diff, oom's logs, a trace's
    layer-names file): never an output. A directory (a profile's logdir or run directory) stands for every
    file it may resolve to."""
    from ..read import input_files
    from ..trace.layers import layer_names_files

    named = [getattr(args, name, None) for name in ("trace", "graph", "base", "new", "budget", "vs", "check_trace")]
    named += getattr(args, "files", None) or []
    found = [each for path in named for each in ([path] if path is None or path == "-" else input_files(path))]
    traces: list[str] = [path for path in (getattr(args, name, None) for name in ("trace", "base", "new", "vs", "check_trace"))
                         if path is not None and path != "-"]
    for path in [*traces, *(each for trace in traces for each in input_files(trace))]:
        found += layer_names_files(path)  # (layers.json beside a profile: --group-by layer reads it)
    return list(dict.fromkeys(found))


def write_report(args: argparse.Namespace, to_json: Callable[[], dict[str, Any]], render_text: Callable[[IO[str]], None]) -> None:
    """Write a command's result where ``-o`` says (stdout by default), as JSON with ``--json``."""
    from ..reporters.common import open_output, write_json
    from ..reporters.tables import fitted

    with open_output(args.output, input_paths(args)) as out:
        if args.json:
            write_json(to_json(), out)
        else:
            with fitted(out) as text:  # no line wider than the terminal (COLUMNS, else 100 off a terminal)
                render_text(text)
