"""``memtrace run SCRIPT [ARGS...]``: run a TensorFlow or JAX program with the profiler on from its first allocation.

Like ``memray run`` or ``nsys profile``: the script runs in a child Python (so that this process
never imports TensorFlow or JAX) inside ``memtrace.tensorflow.recording`` (or ``memtrace.jax``'s for a
JAX script), which starts the profiler before the first allocation and stops it however the script
ends. The script's exit code is passed on. ``--limit``/``--card`` put the script's allocator under a
limit first (:func:`limit_environment`): XLA compiles a program for the memory it has, so only a
recording under the limit one asks about shows the program XLA builds for it. The child says how a
TensorFlow run was recorded (threads, oneDNN) and so whether its order will repeat; ``--steady``
records the way the docs recommend for steady answers (one inter-op and one intra-op thread,
oneDNN's kernels off), ``--runs N`` records N runs and then fits all of them at once (the band over
the orders the runs took: ``memtrace fit R1 R2 ...``).
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
memtrace.tensorflow.run_script(sys.argv[2], sys.argv[3], sys.argv[4:])
"""
_JAX_BOOTSTRAP = _BOOTSTRAP.replace("memtrace.tensorflow", "memtrace.jax")
# A script is JAX's when it imports JAX (or a library on it) and not TensorFlow.
_JAX_MODULES = frozenset({"jax", "jaxlib", "flax", "optax", "equinox", "haiku"})
_TF_MODULES = frozenset({"tensorflow", "keras", "tf_keras"})


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
    limit = parser.add_mutually_exclusive_group()
    limit.add_argument("--limit", metavar="SIZE", help="run under this allocator limit (e.g. 930MiB): JAX's "
                       "XLA_PYTHON_CLIENT_MEM_FRACTION of the GPU; TF's TF_CPU_BFC_MEM_LIMIT_IN_MB and each GPU's "
                       "memory_limit (whole MiB). XLA compiles for the limit, so fit then answers for that program")
    limit.add_argument("--card", metavar="SIZE", help="run as on a GPU of this memory (e.g. 16GB): the limit the "
                       "runtime gives such a card (JAX: 0.75 of it; TF: less its reserve, see --compute-capability)")
    parser.add_argument("--compute-capability", metavar="X.Y", default="8.0",
                        help="the card's compute capability for --card with TF (default 8.0): decides TF's reserve")
    parser.add_argument("--runtime", metavar="auto|jax|tensorflow", default="auto",
                        help="the script's runtime (default: JAX where the script imports it and not TensorFlow)")
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
    from ..errors import MemtraceError, UsageError

    if not os.path.isfile(args.script):
        raise MemtraceError(f"{args.script}: no such script")
    stem = os.path.splitext(os.path.basename(args.script))[0]
    if args.runtime not in ("auto", "jax", "tensorflow"):
        raise UsageError(f"--runtime must be auto, jax or tensorflow (got {args.runtime!r})")
    runtime = args.runtime if args.runtime != "auto" else script_runtime(args.script)
    env = dict(os.environ)
    if args.cpu_bfc:
        if runtime == "jax":
            raise UsageError("--cpu-bfc is TensorFlow's CPU allocator; this is a JAX script (see --runtime)")
        env["TF_CPU_ALLOCATOR_USE_BFC"] = "true"
    if args.steady:
        if runtime == "jax":
            raise UsageError("--steady sets TensorFlow's threads and oneDNN; this is a JAX script (see --runtime)")
        env["TF_ENABLE_ONEDNN_OPTS"] = "0"  # read when TensorFlow is imported
        env["MEMTRACE_RUN_STEADY"] = "1"  # the child sets one inter-op and one intra-op thread
    said = None
    if args.limit is not None or args.card is not None:
        updates, said = limit_environment(args, runtime, env)
        env.update(updates)
    # Resolved now: the script may change its working directory, and the profile (and the command that reads
    # it, which the child prints) must not move with it. Checked (made, written to) once every option is sound.
    logdir = os.path.abspath(args.logdir or f"memtrace-{stem}.{os.getpid()}")
    _check_logdir(logdir, args.logdir)
    if said is not None:
        print(f"memtrace: {said}", file=sys.stderr, flush=True)
    if args.runs == 1:
        return _run_once(args, logdir, env, runtime)
    logdirs = [os.path.join(logdir, f"run-{number}") for number in range(1, args.runs + 1)]
    codes = []
    for number, each in enumerate(logdirs, 1):
        print(f"memtrace: run {number} of {args.runs} into {each}", file=sys.stderr, flush=True)
        codes.append(_run_once(args, each, env, runtime))
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


def _run_once(args: argparse.Namespace, logdir: str, env: dict[str, str], runtime: str) -> int:
    """One run of the script in a child Python into ``logdir``; its exit code (128 + N for signal N)."""
    before = _profiles(logdir)
    home = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    package_root = os.path.dirname(home)
    bootstrap = _JAX_BOOTSTRAP if runtime == "jax" else _BOOTSTRAP
    command = [sys.executable, "-c", bootstrap, package_root, logdir, args.script, *args.args]
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
    how = f"was killed by signal {-code} ({signal_name(-code)})" if code < 0 else f"ended (exit code {code})"
    if not _profiles(logdir) - before:
        print(f"memtrace: the script {how} after {time.monotonic() - started:.1f} s, before a profile was written "
              f"to {logdir}", file=sys.stderr)
    elif code:
        # Neither runtime writes an event for the request that failed: a profile cannot show that its run ran out.
        print(f"memtrace: the script {how}: where it ran out of memory, the profile holds no event for the request "
              f"that failed, and memtrace fit {logdir} answers for the requests before it; memtrace oom LOG --trace "
              f"{logdir} replays the failure (LOG: the script's output, with the allocator's dump)", file=sys.stderr)
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


def script_runtime(script: str) -> str:
    """``"jax"`` where the script imports JAX (or a library built on it) and not TensorFlow, else ``"tensorflow"``."""
    import ast

    with open(script, encoding="utf-8", errors="replace") as source:
        text = source.read()
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):  # Python will say what is wrong with it, in the child
        return "tensorflow"
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module and not node.level}
    return "jax" if imported & _JAX_MODULES and not imported & _TF_MODULES else "tensorflow"


def limit_environment(args: argparse.Namespace, runtime: str, env: dict[str, str],
                      gpu_memory_bytes: int | None = None) -> tuple[dict[str, str], str]:
    """The environment variables that put the child's allocator under ``--limit`` (or ``--card``'s limit), and a line
    saying so. A UsageError for nonsense (a size under 1 MiB, a limit above the GPU, --card for TF's CPU allocator).

    JAX: the ``XLA_PYTHON_CLIENT_MEM_FRACTION`` of the GPU's memory (``gpu_memory_bytes``, else asked of the CUDA
    driver) that makes XLA's pool the largest whole 2 MiB step within the limit (XLA makes no other), or
    ``XLA_CLIENT_MEM_FRACTION`` where the environment already uses that newer name (JAX refuses both); and the pool
    asked for, for the child to say if XLA made another.
    TensorFlow: ``TF_CPU_BFC_MEM_LIMIT_IN_MB`` for its CPU BFC allocator and each GPU's ``memory_limit`` (both whole
    MiB); ``--card`` sets the GPU's only.
    """
    from ..allocator.defaults import (
        XLA_POOL_STEP_BYTES,
        XLA_POOL_VARIABLE,
        card_limit_bytes,
        parse_compute_capability,
        xla_fraction_for,
    )
    from ..errors import UsageError
    from ..units import MIB, format_bytes, parse_size

    option, text = ("--limit", args.limit) if args.limit is not None else ("--card", args.card)
    if text.strip().startswith("-"):
        raise UsageError(f"{option} must not be negative (got {text!r})")
    size = int(parse_size(text))
    if runtime == "jax":
        # XLA makes its pool in whole steps of 2 MiB: the largest step within --limit, or the card's own pool
        limit = size if args.limit is not None else card_limit_bytes(size, 0, "XLA")
        pool = limit // XLA_POOL_STEP_BYTES * XLA_POOL_STEP_BYTES
        if pool == 0:
            raise UsageError(f"{option} {text} leaves XLA less than its smallest pool, "
                             f"{format_bytes(XLA_POOL_STEP_BYTES)}")
        total = gpu_memory_bytes if gpu_memory_bytes is not None else cuda_memory_bytes()
        if pool > total:
            raise UsageError(f"{option} {text}: a limit of {format_bytes(pool)} is more than this GPU's "
                             f"{format_bytes(total)}")
        names = [n for n in ("XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_MEM_FRACTION") if n in env]
        if len(names) == 2:
            raise UsageError("both XLA_CLIENT_MEM_FRACTION and XLA_PYTHON_CLIENT_MEM_FRACTION are set, which JAX "
                             "refuses: unset one")
        name = names[0] if names else "XLA_PYTHON_CLIENT_MEM_FRACTION"
        fraction = xla_fraction_for(pool, total)
        stepped = "" if pool == limit else (f" (XLA makes its pool in steps of {format_bytes(XLA_POOL_STEP_BYTES)}: "
                                            f"the largest within {format_bytes(limit)})")
        return {name: repr(fraction), XLA_POOL_VARIABLE: str(pool)}, (
            f"running under a limit of {format_bytes(pool)} ({pool:,} bytes){stepped}: {name}={fraction!r} of the "
            f"GPU's {total:,} bytes; the script is told if XLA makes another pool")
    if args.card is not None:
        if args.cpu_bfc or env.get("TF_CPU_ALLOCATOR_USE_BFC", "").lower() in ("1", "true"):
            raise UsageError("--card is a GPU's memory; for TensorFlow's CPU BFC allocator give --limit")
        limit = card_limit_bytes(size, parse_compute_capability(args.compute_capability), "TensorFlow")
        mib = limit // MIB
        return {"MEMTRACE_GPU_MEMORY_LIMIT_MB": str(mib)}, (
            f"running as on a {format_bytes(size)} card: each GPU's memory_limit {mib:,} MiB (the card less TF's "
            "reserve)")
    mib = size // MIB
    if mib < 1:
        raise UsageError(f"--limit {text} is under 1 MiB, and TensorFlow takes its limits in whole MiB")
    rounded = "" if size % MIB == 0 else f" (TensorFlow takes whole MiB: {format_bytes(size)} rounded down)"
    return {"TF_CPU_BFC_MEM_LIMIT_IN_MB": str(mib), "MEMTRACE_GPU_MEMORY_LIMIT_MB": str(mib)}, (
        f"running under a limit of {mib:,} MiB{rounded}: TF_CPU_BFC_MEM_LIMIT_IN_MB={mib} for TF's CPU BFC "
        f"allocator, and each GPU's memory_limit")


def cuda_memory_bytes() -> int:
    """The first visible GPU's memory, from the CUDA driver (``cuDeviceTotalMem``; no context is made)."""
    import ctypes

    from ..errors import UsageError

    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        raise UsageError("memtrace run --limit/--card for a JAX script needs the GPU's memory to set "
                         "XLA_PYTHON_CLIENT_MEM_FRACTION, and there is no CUDA driver here (libcuda.so.1)") from None
    device, total = ctypes.c_int(), ctypes.c_size_t()
    if cuda.cuInit(0) or cuda.cuDeviceGet(ctypes.byref(device), 0) or cuda.cuDeviceTotalMem_v2(
            ctypes.byref(total), device):
        raise UsageError("memtrace run --limit/--card: the CUDA driver reports no GPU here")
    return int(total.value)
