"""The ``memtrace`` command: parse arguments, run one command, turn errors into exit codes.

Exit codes: 0 fine, 1 a check or budget failed, 2 bad usage or unreadable input. ``main`` is the
only place that prints errors; a traceback reaching the user is a bug. Heavy modules (protobuf,
networkx, TensorFlow) are imported by the commands that need them, so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Sequence

from .commands import register_all
from .errors import MemtraceError
from .reporters.progress import ProgressLine
from .version import __version__

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memtrace",
        description="Memory-allocation forensics for TensorFlow step traces (RunMetadata / StepStats).",
        epilog="Run 'memtrace COMMAND --help' for a command's options. Exit codes: 0 ok, 1 a check failed, 2 bad usage or input.",
    )
    parser.add_argument("--version", action="version", version=f"memtrace {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    register_all(commands)
    return parser


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """Parse like argparse, but name the nearest command for a mistyped one (``peek``: ``peak``),
    and report an option the command does not know with that command's usage, not the top one's."""
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    first = next((i for i, arg in enumerate(argv) if not arg.startswith("-")), None)
    if first is not None and argv[first] not in commands.choices:
        near = difflib.get_close_matches(argv[first], list(commands.choices), n=1, cutoff=0.5)
        hint = f"; did you mean '{near[0]}'?" if near else f" (choose from {', '.join(commands.choices)})"
        parser.error(f"unknown command {argv[first]!r}{hint}")
    args, extra = parser.parse_known_args(argv)
    if extra:
        commands.choices[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = _parse(parser, list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exit_:  # argparse has printed usage and its one-line error
        return int(exit_.code or 0)
    from .api import load_jobs, load_progress

    progress = ProgressLine(sys.stderr)  # draws only on a terminal, for large files
    token, jobs_token = load_progress.set(progress), load_jobs.set(getattr(args, "jobs", 1))
    try:
        try:
            _refuse_input_as_output(args)
            return int(args.run(args))
        finally:
            progress.close()
            load_progress.reset(token)
            load_jobs.reset(jobs_token)
    except MemtraceError as error:
        print(f"memtrace: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `memtrace ... | head` closed the pipe; that is not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        print("memtrace: interrupted", file=sys.stderr)
        return 130


def _refuse_input_as_output(args: argparse.Namespace) -> None:
    """Refuse ``-o`` naming an input or a write-protected file before reading anything (``open_output``
    checks again when it opens)."""
    output = getattr(args, "output", None)
    if output is not None and output != "-":
        from .commands import input_paths
        from .output import refuse_input_as_output, refuse_protected

        refuse_input_as_output(output, input_paths(args))
        refuse_protected(output)
