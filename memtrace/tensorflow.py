"""Recording a trace from TensorFlow: a TF1 session step with full tracing, or TF2 steps under the profiler.

Needs the ``tensorflow`` extra (``pip install 'memtrace[tensorflow]'``); the rest of memtrace never
imports TensorFlow. Works with a TF1-style ``tf.compat.v1.Session`` in graph mode::

    with tf.compat.v1.Session(graph=graph) as session:
        session.run(init)
        trace = memtrace.tensorflow.record(session, train_op, feed_dict, warmup=1)
    memtrace.testing.assert_peak_below(trace, "mklcpu", "2MiB")

The step runs with ``RunOptions(trace_level=FULL_TRACE, output_partition_graphs=True)``, so the
``RunMetadata`` holds per-node memory, allocation records and the partition graphs (which
``memtrace`` takes op types and consumers from).

TF2 code (Keras, ``tf.function``, eager) has no ``RunMetadata``; :func:`profile` runs its steps
under the TF2 profiler instead and reads the allocator's own memory events from the profile::

    memtrace.tensorflow.use_cpu_bfc()          # before TensorFlow or Keras is imported
    model = build_model()
    trace = memtrace.tensorflow.profile(model.train_on_batch, x, y, steps=2)
    memtrace.testing.assert_peak_below(trace, "CPU:0", "2GiB")

On CPU, TensorFlow's default allocator writes no memory events; :func:`use_cpu_bfc` makes the CPU
allocator TensorFlow's BFC allocator, and runs ops on one inter-op and one intra-op thread and on
TensorFlow's own kernels (oneDNN's off) so that the peak is the same run after run. The allocator
and threads can be set only before TensorFlow's runtime starts (:func:`profile` raises when it is
too late), the kernels only before TensorFlow is imported (:func:`profile` warns): importing this
module does not import TensorFlow.

A test module imports TensorFlow at its top, and pytest imports test modules before any fixture
runs, so a test suite sets TensorFlow's environment before that: memtrace's pytest plugin does it
with ``memtrace_stable_tensorflow = true`` in the pytest configuration (:func:`stable_environment`:
the BFC allocator, one inter-op and one intra-op thread, oneDNN's kernels off, each through the
variable TensorFlow reads). :func:`profile` writes beside the profile how it was recorded
(:mod:`memtrace.trace.recording`), and ``memtrace.testing`` refuses to check a recording whose
peak varies from run to run.

A whole program (every allocation from the allocator's birth, up to an out-of-memory error) is
recorded by :func:`recording`, a context manager to put at the top of a script, or by
``memtrace run SCRIPT`` (which runs the script in a child Python inside :func:`recording`)::

    import memtrace.tensorflow
    with memtrace.tensorflow.recording("logdir", cpu_bfc=True):
        ...  # the whole program
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import MemtraceError, MissingExtraError

if TYPE_CHECKING:
    from .api import Trace

INSTALL_HINT = "pip install 'memtrace[tensorflow]'"


def _missing(reason: object) -> MissingExtraError:
    return MissingExtraError(
        f"memtrace.tensorflow needs TensorFlow, which is not installed ({reason}); install it with: {INSTALL_HINT}")


# TensorFlow is imported when first needed, not here: use_cpu_bfc() sets what TensorFlow reads when it is
# imported (TF_ENABLE_ONEDNN_OPTS), so it must be able to run before TensorFlow is.
try:
    _SPEC = importlib.util.find_spec("tensorflow")
except (ImportError, ValueError) as _error:
    raise _missing(_error) from _error
if _SPEC is None:
    raise _missing("No module named 'tensorflow'")


def _tf() -> Any:
    """The tensorflow module, imported on first use."""
    try:
        import tensorflow
    except ImportError as error:
        raise _missing(error) from error
    return tensorflow


def record_metadata(session: Any, fetches: Any, feed_dict: Any = None, *, warmup: int = 0) -> Any:
    """Run ``warmup`` untraced steps, then one traced step; TensorFlow's ``RunMetadata`` of that step.

    A first step often allocates once-only memory (autotuning, lazily built kernels); ``warmup=1``
    leaves it out of the recorded step.
    """
    if not callable(getattr(session, "run", None)):
        raise MemtraceError(f"record needs a tf.compat.v1.Session (something with .run), not {type(session).__name__}")
    if warmup < 0:
        raise MemtraceError(f"warmup must be 0 or more, not {warmup}")
    v1 = _tf().compat.v1
    for _ in range(warmup):
        session.run(fetches, feed_dict=feed_dict)
    options = v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE, output_partition_graphs=True)
    metadata = v1.RunMetadata()
    session.run(fetches, feed_dict=feed_dict, options=options, run_metadata=metadata)
    return metadata


def save_metadata(metadata: Any, path: str | os.PathLike[str]) -> None:
    """Write a RunMetadata: protobuf text for ``.pbtxt``/``.txt`` names, else binary; gzip for ``.gz``.

    A write-protected file is refused (:class:`~memtrace.errors.UsageError`), as the command line refuses it."""
    import gzip

    from google.protobuf import text_format

    from .output import refuse_protected, replacing

    name = os.fspath(path)
    stem = name.removesuffix(".gz")
    text = stem.endswith((".pbtxt", ".txt"))
    data = text_format.MessageToString(metadata).encode("utf-8") if text else metadata.SerializeToString()
    if name.endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    # As every output memtrace writes: never over a write-protected file, never through a planted
    # temporary, whole or not at all (a link named is followed to the file it stands for).
    refuse_protected(name)
    with replacing(os.path.realpath(name), binary=True) as handle:
        handle.write(data)


def record(session: Any, fetches: Any, feed_dict: Any = None, *, warmup: int = 0,
           save: str | os.PathLike[str] | None = None) -> Trace:
    """Run one step with full tracing and partition graphs and return its :class:`Trace`.

    ``save`` also writes the ``RunMetadata`` (see :func:`save_metadata`) for ``memtrace diff`` or
    ``memtrace check`` later; the trace then carries that path.
    """
    from .api import load, load_bytes

    metadata = record_metadata(session, fetches, feed_dict, warmup=warmup)
    if save is not None:
        save_metadata(metadata, save)
        return load(save)
    return load_bytes(metadata.SerializeToString(), "<recorded>")


# -- TF2: steps under the profiler -------------------------------------------------------------

CPU_BFC = "TF_CPU_ALLOCATOR_USE_BFC"


@dataclass(frozen=True)
class StepMemory:
    """The CPU allocator's own counters around one profiled step (``tf.config.experimental.get_memory_info``).

    ``peak_bytes`` is the allocator's peak during the step, its statistics reset just before it.
    """

    step: int
    current_bytes_before: int
    peak_bytes: int


def _tensorflow_started() -> bool:
    """Whether TensorFlow's runtime (and so its CPU allocator) exists already."""
    try:
        from tensorflow.python.eager import context

        return bool(context.context()._initialized)
    except (ImportError, AttributeError):
        return True  # cannot tell: assume the worst


ONEDNN = "TF_ENABLE_ONEDNN_OPTS"
# TensorFlow's thread pools take their sizes from these where nothing else sets them (process_util.cc)
INTEROP_THREADS, INTRAOP_THREADS = "TF_NUM_INTEROP_THREADS", "TF_NUM_INTRAOP_THREADS"
_onednn_kept = False  # use_cpu_bfc(onednn=True) was asked for: oneDNN's kernels on is the user's choice
_threads_kept = False  # use_cpu_bfc(threads=None) was asked for: TensorFlow's thread pools are the user's choice


def stable_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """Set, in ``environ`` (default ``os.environ``), what TensorFlow reads when it is imported and starts so that
    a model's peak is the same run after run: the BFC allocator for the CPU (``TF_CPU_ALLOCATOR_USE_BFC``),
    one inter-op and one intra-op thread (``TF_NUM_INTEROP_THREADS``, ``TF_NUM_INTRAOP_THREADS``) and
    oneDNN's kernels off (``TF_ENABLE_ONEDNN_OPTS=0``); a value the user set already stays. What
    :func:`use_cpu_bfc` does, without TensorFlow: before a test module imports it (memtrace's pytest
    plugin calls this for ``memtrace_stable_tensorflow``). Returns the variables as they now are."""
    env = os.environ if environ is None else environ
    env[CPU_BFC] = "true"
    for name, value in ((INTEROP_THREADS, "1"), (INTRAOP_THREADS, "1"), (ONEDNN, "0")):
        env.setdefault(name, value)
    return {name: env[name] for name in (CPU_BFC, INTEROP_THREADS, INTRAOP_THREADS, ONEDNN)}


def use_cpu_bfc(*, threads: int | None = 1, onednn: bool = False) -> bool:
    """Make TensorFlow's CPU allocator the BFC allocator, which writes memory events; True when it will be.

    Call it before TensorFlow's runtime starts (before building a model), and best before TensorFlow
    (or Keras) is imported. It also runs TensorFlow's ops on ``threads`` inter-op and intra-op threads
    (1 by default; None leaves TensorFlow's choice): with one of each, ops run one at a time in a
    fixed order, so the order of allocations, and so the peak, is the same run after run, on a busy
    machine too; steps take longer where ops could have run in parallel. Unless ``onednn``, and
    unless ``TF_ENABLE_ONEDNN_OPTS`` is set already, it turns oneDNN's kernels off
    (``TF_ENABLE_ONEDNN_OPTS=0``, which TensorFlow reads when it is imported, so only where it is not
    yet): with them, a Keras CNN's step held one more activation-sized buffer in about one run of
    five. Afterwards this changes nothing and returns whether the variable was already set.
    """
    global _onednn_kept, _threads_kept
    _onednn_kept = _onednn_kept or onednn
    _threads_kept = _threads_kept or threads is None
    if not onednn and "tensorflow" not in sys.modules:
        os.environ.setdefault(ONEDNN, "0")
    if _tensorflow_started():
        return os.environ.get(CPU_BFC, "").lower() in ("1", "true")
    os.environ[CPU_BFC] = "true"
    if threads is not None:
        _tf().config.threading.set_inter_op_parallelism_threads(threads)
        _tf().config.threading.set_intra_op_parallelism_threads(threads)
    return True


def onednn_enabled() -> bool | None:
    """Whether TensorFlow runs oneDNN's kernels in this process (decided when it was imported); None if it cannot tell."""
    _tf()
    try:
        from tensorflow.python.util import _pywrap_util_port

        return bool(_pywrap_util_port.IsMklEnabled())
    except (ImportError, AttributeError):
        return None


def _has_gpu() -> bool:
    return bool(_tf().config.list_logical_devices("GPU"))


def _prepare_to_profile() -> bool:
    """Before profiling: the BFC allocator (and one thread) where still possible; True where the CPU allocator is BFC.

    Raises when TensorFlow's runtime has started with its default CPU allocator on a machine without
    a GPU: the profile would hold the default allocator's few events, not the step's memory. Warns
    when ops run on several threads, or on oneDNN's kernels that nobody chose.
    """
    import warnings

    started = _tensorflow_started()
    bfc = use_cpu_bfc()  # started: whether the variable was set (before the runtime started, as it must be)
    if started and not bfc and not _has_gpu():
        raise MemtraceError(_too_late_for_bfc())
    if started and _threads() != (1, 1):
        warnings.warn("memtrace: TensorFlow runs ops on several threads, so the order of allocations and the peak "
                      "may vary from run to run; call memtrace.tensorflow.use_cpu_bfc() before building the model "
                      "(it sets one inter-op and one intra-op thread)", stacklevel=3)
    if onednn_enabled() and not _onednn_kept and ONEDNN not in os.environ:
        warnings.warn("memtrace: TensorFlow runs oneDNN's kernels (it was imported before "
                      "memtrace.tensorflow.use_cpu_bfc() could turn them off), and with them a step may hold more "
                      "buffers in some runs than in others; call use_cpu_bfc() before importing TensorFlow or "
                      f"Keras, or set {ONEDNN}=0 ({ONEDNN}=1 keeps them and this warning away)", stacklevel=3)
    return bfc


def _threads() -> tuple[int | None, int | None]:
    """The inter-op and intra-op threads TensorFlow runs: as set through its API, else through its
    variables; None where neither says (TensorFlow's own choice, one a core)."""
    threading = _tf().config.threading

    def count(api: int, variable: str) -> int | None:
        if api > 0:
            return api
        value = os.environ.get(variable, "").strip()
        return int(value) if value.isdigit() and int(value) > 0 else None

    return (count(threading.get_inter_op_parallelism_threads(), INTEROP_THREADS),
            count(threading.get_intra_op_parallelism_threads(), INTRAOP_THREADS))


def recording_facts(bfc: bool) -> dict[str, Any]:
    """How TensorFlow runs now, as :func:`profile` writes it beside a profile (:mod:`memtrace.trace.recording`),
    with ``unstable``: why the same model's peak would vary from run to run (what :func:`profile` warns of),
    empty where nothing does: several threads nobody chose, oneDNN's kernels nobody chose."""
    threads = _threads()
    onednn = onednn_enabled()
    onednn_chosen = _onednn_kept or ONEDNN in os.environ
    unstable = []
    if threads != (1, 1) and not _threads_kept:
        unstable.append(f"TensorFlow ran ops on {'/'.join('several' if t is None else str(t) for t in threads)} "
                        "inter-op/intra-op threads, so the order of allocations, and the peak, vary from run to run")
    if onednn and not onednn_chosen:
        unstable.append("TensorFlow ran oneDNN's kernels (it was imported before they could be turned off), with which "
                        "a step holds more buffers in some runs than in others")
    return {"recorder": "memtrace.tensorflow.profile", "tensorflow": getattr(_tf(), "__version__", None),
            "cpu_bfc": bfc, "onednn": onednn, "onednn_chosen": onednn_chosen,
            "threads": {"inter_op": threads[0], "intra_op": threads[1], "chosen": _threads_kept},
            "gpu": _has_gpu(), "unstable": unstable}


def _memory_info(device: str) -> dict[str, int] | None:
    try:
        return dict(_tf().config.experimental.get_memory_info(device))
    except (ValueError, RuntimeError, _tf().errors.OpError):
        return None  # this allocator keeps no statistics (TensorFlow's default CPU allocator)


def _cpu_memory_info() -> dict[str, int] | None:
    return _memory_info("CPU:0")


MAX_WARMUP = 10
# A settled step's peak and bytes in use may still differ from the last step's by a few small tensors (a Keras
# CNN's alternate by 1,792 B, 0.002%, from step 1 on); its first step differs by about 10%.
SETTLED_FRACTION = 0.01


def _warm_up(step: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], warmup: int | str) -> int:
    """Run the warm-up steps; with ``"auto"``, until the step has settled. How many ran.

    Settled: two steps in a row left the allocator with the same peak (its statistics reset before
    each) and the same bytes in use after it, within 1%. Needs an allocator that keeps statistics (the BFC
    allocator: CPU with :func:`use_cpu_bfc`, or a GPU).
    """
    if warmup != "auto":
        for _ in range(int(warmup)):
            step(*args, **kwargs)
        return int(warmup)
    device = "GPU:0" if _has_gpu() else "CPU:0"
    if _memory_info(device) is None:
        raise MemtraceError(f"warmup='auto' needs the allocator's own counters, which {device}'s allocator does not keep: "
                            "call memtrace.tensorflow.use_cpu_bfc() before building the model, or give a number")
    previous: tuple[int, int] | None = None
    for count in range(1, MAX_WARMUP + 1):
        _tf().config.experimental.reset_memory_stats(device)
        step(*args, **kwargs)
        info = _memory_info(device) or {}
        now = (int(info.get("peak", 0)), int(info.get("current", 0)))
        if previous is not None and all(abs(a - b) <= SETTLED_FRACTION * max(a, b) for a, b in zip(now, previous)):
            return count
        previous = now
    import warnings

    warnings.warn(f"memtrace: the step's memory had not settled after {MAX_WARMUP} warm-up steps "
                  "(its peak or bytes in use still changed from one step to the next)", stacklevel=3)
    return MAX_WARMUP


def record_profile(step: Callable[..., Any], *args: Any, steps: int = 1, warmup: int | str = "auto",
                   logdir: str | os.PathLike[str], **kwargs: Any) -> list[StepMemory]:
    """Run ``warmup`` steps, then ``steps`` steps under the TF2 profiler, writing the profile to ``logdir``.

    ``warmup="auto"`` (the default) runs warm-up steps until the step has settled (two in a row with
    the same peak and bytes in use after it, within 1%; at most 10): a Keras model's first steps build its
    function and the optimizer's slots, and allocate differently. Each step is ``step(*args, **kwargs)``, marked ``tf.profiler.experimental.Trace("train",
    step_num=i)``. Returns the CPU allocator's own counters around each step where it keeps them
    (the BFC allocator does), else an empty list. Beside the profile it writes how it was recorded
    (:func:`recording_facts`, ``memtrace.recording.json``), which ``memtrace.testing`` reads.
    """
    if steps < 1 or not (warmup == "auto" or (isinstance(warmup, int) and warmup >= 0)):
        raise MemtraceError(f"steps must be 1 or more and warmup 0 or more (or 'auto'), not steps={steps}, warmup={warmup!r}")
    bfc = _prepare_to_profile()
    _warm_up(step, args, kwargs, warmup)
    counters = []
    earlier = set(_profile_files(os.fspath(logdir), set()))
    facts = recording_facts(bfc)
    _tf().profiler.experimental.start(os.fspath(logdir))
    try:
        for number in range(steps):
            before = _cpu_memory_info() if bfc else None
            if before is not None:
                _tf().config.experimental.reset_memory_stats("CPU:0")
            with _tf().profiler.experimental.Trace("train", step_num=number, _r=1):
                step(*args, **kwargs)
            after = _cpu_memory_info()
            if before is not None and after is not None:
                counters.append(StepMemory(number, before["current"], after["peak"]))
    finally:
        _tf().profiler.experimental.stop()
        for run in sorted({os.path.dirname(f) for f in _profile_files(os.fspath(logdir), earlier)}):
            _save_recording(run, facts)
    return counters


def _save_recording(directory: str, facts: dict[str, Any]) -> None:
    """Write how the profile was recorded beside it (``memtrace.recording.json``, read by memtrace.trace.recording)."""
    import json

    from .trace.recording import RECORDING_FILE, SCHEMA

    with open(os.path.join(directory, RECORDING_FILE), "w", encoding="utf-8") as handle:
        json.dump({"schema": SCHEMA, **facts}, handle, indent=1)
        handle.write("\n")


def profile(step: Callable[..., Any], *args: Any, steps: int = 1, warmup: int | str = "auto",
            logdir: str | os.PathLike[str] | None = None, **kwargs: Any) -> Trace:
    """Run ``step(*args, **kwargs)`` ``warmup`` times, then ``steps`` times under the TF2 profiler; the :class:`Trace`.

    ``warmup="auto"`` (the default) warms up until the step has settled (see :func:`record_profile`).

    The trace covers every profiled step (``memtrace.load(logdir, step=N)`` reads one; ``summary``
    lists each step's peak). ``logdir`` keeps the profile (for ``memtrace diff`` later, or
    TensorBoard); by default it goes to a temporary directory, removed when the process ends unless
    a failed ``memtrace.testing`` assertion cites it (the message then says where it is).
    Raises when TensorFlow's runtime started before the CPU allocator could be made the BFC
    allocator (call :func:`use_cpu_bfc` before building the model).
    """
    from . import scratch
    from .api import load

    where = os.fspath(logdir) if logdir is not None else scratch.directory()
    record_profile(step, *args, steps=steps, warmup=warmup, logdir=where, **kwargs)
    return load(where)


# -- a whole program under the profiler --------------------------------------------------------


@dataclass
class Recording:
    """What :func:`recording` wrote: filled in when the profiler stops.

    ``seconds`` is the time between starting and stopping the profiler; ``files`` are the profile's
    ``.xplane.pb`` files (one a host) and ``size_bytes`` their total size. ``from_birth`` says
    whether the profiler started before TensorFlow's runtime (so before its first allocation).
    """

    logdir: str
    from_birth: bool
    seconds: float = 0.0
    files: list[str] = field(default_factory=list)
    size_bytes: int = 0

    def describe(self) -> str:
        """One line for people: how long, how large, where, and how to read it."""
        if not self.files:
            return f"the profiler wrote nothing to {self.logdir} (after {self.seconds:.1f} s)"
        from .units import format_bytes

        where = self.files[0] if len(self.files) == 1 else f"{len(self.files)} files under {self.logdir}"
        birth = "" if self.from_birth else "; TensorFlow had started before the profiler, so earlier allocations are missing"
        return (f"profiled {self.seconds:.1f} s into {where} ({format_bytes(self.size_bytes)}){birth}; "
                f"read it with: memtrace summary {self.logdir}")


def _profile_files(logdir: str, before: set[str]) -> list[str]:
    """The ``.xplane.pb`` files under ``logdir`` that were not there before."""
    root = os.path.join(logdir, "plugins", "profile")
    found: list[str] = []
    for directory, _, names in os.walk(root):
        found.extend(os.path.join(directory, n) for n in names if n.endswith(".xplane.pb"))
    return sorted(set(found) - before)


GPU_MEMORY_LIMIT = "MEMTRACE_GPU_MEMORY_LIMIT_MB"  # memtrace run --limit/--card: each GPU's memory_limit, for its child


def limit_gpus(memory_limit_mb: int) -> int:
    """Give each GPU one logical device of ``memory_limit_mb`` MiB (its BFC allocator's limit); how many GPUs.

    Must come before TensorFlow's runtime starts (``memtrace run`` does it right after the import)."""
    tf = _tf()
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        tf.config.set_logical_device_configuration(gpu, [tf.config.LogicalDeviceConfiguration(memory_limit=memory_limit_mb)])
    return len(gpus)


@contextmanager
def recording(logdir: str | os.PathLike[str], *, cpu_bfc: bool = False, quiet: bool = False) -> Iterator[Recording]:
    """Everything inside the block under TensorFlow's profiler, written to ``logdir`` however the block ends.

    Put it at the top of a script, right after ``import tensorflow`` and before any op: the profile then
    holds every allocation from the allocator's birth (what ``memtrace fit`` needs). The profiler is
    stopped, and the profile written, when the block ends, by an exception (an out-of-memory
    ``ResourceExhaustedError`` included: the profile holds everything up to the failure) or by
    ``sys.exit`` too. ``cpu_bfc`` makes the CPU allocator TensorFlow's BFC allocator, the one that
    writes memory events on CPU (a MemtraceError when TensorFlow's runtime already started). Unless
    ``quiet``, a line on stderr says how long and how large the profile got.
    """
    where = os.fspath(logdir)
    if cpu_bfc and not use_cpu_bfc(threads=None, onednn=True):  # (threads and kernels stay as the program has them)
        raise MemtraceError(_too_late_for_bfc())
    before = set(_profile_files(where, set()))
    result = Recording(where, not _tensorflow_started())
    started = time.monotonic()
    _tf().profiler.experimental.start(where)
    try:
        yield result
    finally:
        _tf().profiler.experimental.stop()
        result.seconds = time.monotonic() - started
        result.files = _profile_files(where, before)
        result.size_bytes = sum(os.path.getsize(f) for f in result.files)
        if not quiet:
            print(f"memtrace: {result.describe()}", file=sys.stderr, flush=True)


def _too_late_for_bfc() -> str:
    return (f"TensorFlow's runtime has started already, so its CPU allocator can no longer be switched to the BFC "
            f"allocator (the one that writes memory events). Set {CPU_BFC}=true in the environment, or call "
            "memtrace.tensorflow.use_cpu_bfc() before the program's first TensorFlow op, and run again")


STEADY = "MEMTRACE_RUN_STEADY"  # memtrace run --steady: one inter-op and one intra-op thread, for its child


def run_script(logdir: str, script: str, args: list[str]) -> None:
    """Run ``script`` as ``python script ARGS`` would, inside :func:`recording` (``memtrace run``'s child).

    ``sys.argv`` is the script's and ``sys.path[0]`` its directory; SystemExit and exceptions pass
    through after the profile is written, so the script's exit code is the process's. SIGTERM ends
    the script as an exception does, so its profile is written too. ``MEMTRACE_RUN_STEADY`` in the
    environment (``memtrace run --steady``, which also turns oneDNN's kernels off before TensorFlow is
    imported): one inter-op and one intra-op thread. When the script ends, a line on stderr says how
    the run was recorded (:func:`how_recorded`).
    """
    import runpy
    import signal

    def terminated(number: int, frame: object) -> None:
        raise SystemExit(128 + number)

    signal.signal(signal.SIGTERM, terminated)
    sys.argv = [script, *args]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    limit = os.environ.pop(GPU_MEMORY_LIMIT, None)
    if limit is not None:
        limit_gpus(int(limit))
    if os.environ.pop(STEADY, None):
        _tf().config.threading.set_inter_op_parallelism_threads(1)
        _tf().config.threading.set_intra_op_parallelism_threads(1)
    with recording(logdir):
        try:
            runpy.run_path(script, run_name="__main__")
        finally:  # said before the profile's own line (the last: it ends with the command that reads it)
            try:
                said = how_recorded()
            except Exception:  # noqa: BLE001 - TensorFlow may be what failed; the script's error is the one to see
                said = ""
            if said:
                print(f"memtrace: {said}", file=sys.stderr, flush=True)


def how_recorded() -> str:
    """How this process runs TensorFlow's ops (threads, oneDNN) and what that means for the order of allocations."""
    threading = _tf().config.threading
    inter, intra = threading.get_inter_op_parallelism_threads(), threading.get_intra_op_parallelism_threads()
    onednn = onednn_enabled()

    def threads(n: int, kind: str) -> str:
        return f"{n} {kind} thread{'s' if n != 1 else ''}" if n else f"TensorFlow's default {kind} threads (one a core)"

    kernels = {True: "oneDNN's kernels on", False: "oneDNN's kernels off", None: "oneDNN unknown"}[onednn]
    steady = (inter, intra) == (1, 1) and onednn is not True
    said = f"recorded with {threads(inter, 'inter-op')}, {threads(intra, 'intra-op')}, {kernels}: "
    if steady:
        return said + ("ops ran one at a time, so the order of allocations repeats from run to run (memtrace fit's "
                       "band says so)")
    return said + ("ops ran on several threads" if (inter, intra) != (1, 1) else "oneDNN chose its kernels") + (
        ", so the order of allocations (and with oneDNN the requests) will vary from run to run: memtrace fit "
        "samples the orders a run may take for a band; for steady answers record with memtrace run --steady (one "
        "thread, oneDNN off), or record several runs with --runs N and fit them together")
