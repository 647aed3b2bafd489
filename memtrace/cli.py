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
from .errors import MemtraceError, UsageError
from .reporters.progress import ProgressLine
from .version import __version__

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memtrace",
        description="Memory-allocation forensics for TensorFlow and XLA: reads TF1 step traces (RunMetadata / "
        "StepStats, text or binary), TF2 and XLA (JAX) profiles (HOST.xplane.pb, a run directory or a logdir), and the "
        "BFC allocator's out-of-memory dumps (logs, console captures, MemoryDump protobufs); records a script's "
        "profile with 'memtrace run'.",
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
    args, extra = parser.parse_known_args(_joined_negative_values(commands, argv))
    if extra:
        commands.choices[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _joined_negative_values(commands: argparse._SubParsersAction, argv: list[str]) -> list[str]:  # type: ignore[type-arg]
    """``--limit -5MiB`` as ``--limit=-5MiB``: argparse takes a value that starts with a minus and a digit
    for an option of its own and answers with the usage, where the command would refuse the value in
    one line (a size is never negative). Only a value option's next word is joined, and only up to a
    command's free arguments (``memtrace run SCRIPT ARGS``: the script's own)."""
    first = next((i for i, arg in enumerate(argv) if not arg.startswith("-")), None)
    if first is None or argv[first] not in commands.choices:
        return argv
    command = commands.choices[argv[first]]
    takes_value = {option for action in command._actions if action.option_strings and action.nargs is None
                   for option in action.option_strings}
    free = any(action.nargs == argparse.REMAINDER for action in command._actions)
    joined, i = argv[: first + 1], first + 1
    while i < len(argv):
        arg = argv[i]
        if free and not arg.startswith("-"):  # the script: what follows is its own
            return joined + argv[i:]
        nxt = argv[i + 1] if i + 1 < len(argv) else ""
        if arg in takes_value and len(nxt) > 1 and nxt[0] == "-" and (nxt[1].isdigit() or nxt[1] == "."):
            joined.append(f"{arg}={nxt}")
            i += 2
            continue
        joined.append(arg)
        i += 1
        if arg in takes_value and i < len(argv):
            joined.append(argv[i])  # its value, whatever it looks like
            i += 1
    return joined


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
            _check_replay_setting()
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


def _check_replay_setting() -> None:
    """``MEMTRACE_REPLAY`` (which loop replays the allocator) is refused in one line where it names no loop, or the
    compiled one where numba cannot run it, before any work (unset, nothing to check: the model is not imported)."""
    if "MEMTRACE_REPLAY" not in os.environ:
        return
    from .allocator.bfc import replay_setting_problem

    problem = replay_setting_problem()
    if problem is not None:
        raise UsageError(problem)


def _refuse_input_as_output(args: argparse.Namespace) -> None:
    """Refuse ``-o`` naming an input or a write-protected file before reading anything (``open_output``
    checks again when it opens)."""
    output = getattr(args, "output", None)
    if output is not None and output != "-":
        from .commands import input_paths
        from .output import refuse_input_as_output, refuse_protected

        refuse_input_as_output(output, input_paths(args))
        refuse_protected(output)
