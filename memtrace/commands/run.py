"""``memtrace run SCRIPT [ARGS...]``: run a TensorFlow program with the profiler on from its first allocation.

Like ``memray run`` or ``nsys profile``: the script runs in a child Python (so that this process
never imports TensorFlow) inside ``memtrace.tensorflow.recording``, which starts the profiler right
after ``import tensorflow`` and stops it however the script ends. The script's exit code is passed on.
The child says how the run was recorded (threads, oneDNN) and so whether its order will repeat;
``--steady`` records the way the docs recommend for steady answers (one inter-op and one intra-op
thread, oneDNN's kernels off), ``--runs N`` records N runs and then fits all of them at once (the
band over the orders the runs took: ``memtrace fit R1 R2 ...``).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

# The child: import memtrace.tensorflow from where this memtrace lives (then forget that path, so the
# script sees the sys.path it would see under `python SCRIPT`), and run the script inside recording().
_BOOTSTRAP = """\
import sys
sys.path.insert(0, sys.argv[1])
import memtrace.tensorflow
del sys.path[0]
memtrace.tensorflow.run_script(sys.argv[3], sys.argv[4], sys.argv[5:], steady=sys.argv[2] == "steady")
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run a TensorFlow script with the profiler on from its first allocation (-o LOGDIR)",
        description="Run SCRIPT with ARGS in a child Python, with TensorFlow's profiler started right after "
        "`import tensorflow` (before the allocator's first allocation) and stopped however the script ends "
        "(an out-of-memory error or an exception included: the profile then holds everything up to the "
        "failure). Says how long and how large the profile got. memtrace's own options come before SCRIPT; "
        "everything after SCRIPT is the script's. The exit code is the script's.",
    )
    parser.add_argument("-o", "--logdir", metavar="LOGDIR",
                        help="where the profile goes (default: memtrace-SCRIPT.PID in the current directory); "
                        "any memtrace command reads it")
    parser.add_argument("--cpu-bfc", action="store_true",
                        help="make the CPU allocator TensorFlow's BFC allocator (TF_CPU_ALLOCATOR_USE_BFC=true), "
                        "the one that writes memory events on CPU")
    parser.add_argument("--steady", action="store_true",
                        help="record the way the docs recommend for steady answers: one inter-op and one intra-op "
                        "thread and oneDNN's kernels off (TF_ENABLE_ONEDNN_OPTS=0), so that the order of allocations "
                        "repeats from run to run; without it the script runs with the threads and kernels it sets "
                        "(TensorFlow's default: a thread a core, oneDNN on), and the order varies")
    parser.add_argument("--runs", type=_runs, default=1, metavar="N",
                        help="run the script N times, each into LOGDIR/run-K, then fit all N profiles at once "
                        "(memtrace fit's band over the orders the runs took); default 1")
    parser.add_argument("script", metavar="SCRIPT", help="the Python script to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS", help="the script's arguments")
    parser.set_defaults(run=run)


def _runs(text: str) -> int:
    """An argparse type: how many runs, 1 to 100."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 1 <= value <= 100:
        raise argparse.ArgumentTypeError(f"must be between 1 and 100: {text!r}")
    return value


def run(args: argparse.Namespace) -> int:
    from ..errors import MemtraceError

    if not os.path.isfile(args.script):
        raise MemtraceError(f"{args.script}: no such script")
    stem = os.path.splitext(os.path.basename(args.script))[0]
    # Resolved now: the script may change its working directory, and the profile (and the command that reads
    # it, which the child prints) must not move with it.
    logdir = os.path.abspath(args.logdir or f"memtrace-{stem}.{os.getpid()}")
    _check_logdir(logdir, args.logdir)
    env = dict(os.environ)
    if args.cpu_bfc:
        env["TF_CPU_ALLOCATOR_USE_BFC"] = "true"
    if args.steady:
        env["TF_ENABLE_ONEDNN_OPTS"] = "0"  # read when TensorFlow is imported; the threads are set in the child
    if args.runs == 1:
        return _run_once(args, logdir, env)
    logdirs = [os.path.join(logdir, f"run-{number}") for number in range(1, args.runs + 1)]
    codes = []
    for number, each in enumerate(logdirs, 1):
        print(f"memtrace: run {number} of {args.runs} into {each}", file=sys.stderr, flush=True)
        codes.append(_run_once(args, each, env))
    recorded = [each for each in logdirs if os.path.isdir(os.path.join(each, "plugins", "profile"))]
    failed = next((code for code in codes if code), 0)
    if len(recorded) < 2:
        print(f"memtrace: {len(recorded)} of {args.runs} runs wrote a profile: nothing to fit together", file=sys.stderr)
        return failed
    print(f"memtrace: the band over the {len(recorded)} runs' orders (memtrace fit {' '.join(recorded)}):",
          file=sys.stderr, flush=True)
    from . import fit as fit_command

    parser = argparse.ArgumentParser(prog="memtrace")
    fit_command.register(parser.add_subparsers())
    fitting = parser.parse_args(["fit", *recorded])
    fitting.run(fitting)
    return failed


def _run_once(args: argparse.Namespace, logdir: str, env: dict[str, str]) -> int:
    """One run of the script in a child Python into ``logdir``; its exit code (128 + N for signal N)."""
    home = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    package_root = os.path.dirname(home)
    command = [sys.executable, "-c", _BOOTSTRAP, package_root, "steady" if args.steady else "as-is", logdir,
               args.script, *args.args]
    before = _profiles(logdir)
    started = time.monotonic()
    child = subprocess.Popen(command, env=env)
    # SIGTERM to memtrace goes on to the script (which then writes its profile); Ctrl-C reaches both anyway.
    signal.signal(signal.SIGTERM, lambda number, frame: child.send_signal(number))
    while True:
        try:
            code = child.wait()
            break
        except KeyboardInterrupt:  # the child got it too; let it write its profile and end
            continue
    if not _profiles(logdir) - before:
        how = f"was killed by signal {-code} ({signal_name(-code)})" if code < 0 else f"ended (exit code {code})"
        print(f"memtrace: the script {how} after {time.monotonic() - started:.1f} s, before a profile was written "
              f"to {logdir}", file=sys.stderr)
    return 128 - code if code < 0 else code


def _check_logdir(logdir: str, given: str | None) -> None:
    """Refuse, before the script runs, a logdir the profile cannot be written to: a file (the script itself,
    say), or a directory that cannot be made or written. (TensorFlow would find out only when the script ends.)"""
    from ..errors import UsageError

    shown = given if given is not None else logdir
    if os.path.exists(logdir) and not os.path.isdir(logdir):
        raise UsageError(f"{shown}: exists and is not a directory: the profile goes into a directory (-o LOGDIR); "
                         "name another")
    try:
        os.makedirs(logdir, exist_ok=True)
        with tempfile.TemporaryFile(dir=logdir):
            pass
    except OSError as error:
        raise UsageError(f"{shown}: the profile cannot be written there: {error.strerror or error}") from None


def _profiles(logdir: str) -> set[str]:
    """The profile files under ``logdir`` (TensorFlow writes ``plugins/profile/RUN/HOST.xplane.pb``)."""
    found: set[str] = set()
    for directory, _, names in os.walk(os.path.join(logdir, "plugins", "profile")):
        found.update(os.path.join(directory, name) for name in names if name.endswith(".xplane.pb"))
    return found


def signal_name(number: int) -> str:
    """``SIGKILL`` for 9; a real-time signal, which has no name of its own, as ``SIGRTMIN+1``; else ``signal 99``."""
    try:
        return signal.Signals(number).name
    except ValueError:
        pass
    low, high = getattr(signal, "SIGRTMIN", None), getattr(signal, "SIGRTMAX", None)
    if low is not None and high is not None and low < number <= high:
        return f"SIGRTMIN+{number - low}"
    return f"signal {number}"
