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

    trace = memtrace.tensorflow.profile(model.train_on_batch, x, y, steps=3, warmup=1)
    memtrace.testing.assert_peak_below(trace, "GPU_0_bfc", "2GiB")

On CPU, TensorFlow's default allocator writes no memory events; :func:`profile` sets
``TF_CPU_ALLOCATOR_USE_BFC=true`` when TensorFlow has not started yet, and says so clearly when
it is too late (set it before the program's first TensorFlow op, or in the environment).

A whole program (every allocation from the allocator's birth, up to an out-of-memory error) is
recorded by :func:`recording`, a context manager to put at the top of a script, or by
``memtrace run SCRIPT`` (which runs the script in a child Python inside :func:`recording`)::

    import memtrace.tensorflow
    with memtrace.tensorflow.recording("logdir", cpu_bfc=True):
        ...  # the whole program
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import MemtraceError

if TYPE_CHECKING:
    from .api import Trace

INSTALL_HINT = "pip install 'memtrace[tensorflow]'"


class MissingExtraError(MemtraceError, ImportError):
    """An optional dependency is not installed; the message says which extra provides it."""


try:
    import tensorflow as _tf
except ImportError as _error:
    raise MissingExtraError(
        f"memtrace.tensorflow needs TensorFlow, which is not installed ({_error}); install it with: {INSTALL_HINT}"
    ) from _error


def record_metadata(session: Any, fetches: Any, feed_dict: Any = None, *, warmup: int = 0) -> Any:
    """Run ``warmup`` untraced steps, then one traced step; TensorFlow's ``RunMetadata`` of that step.

    A first step often allocates once-only memory (autotuning, lazily built kernels); ``warmup=1``
    leaves it out of the recorded step.
    """
    if not callable(getattr(session, "run", None)):
        raise MemtraceError(f"record needs a tf.compat.v1.Session (something with .run), not {type(session).__name__}")
    if warmup < 0:
        raise MemtraceError(f"warmup must be 0 or more, not {warmup}")
    v1 = _tf.compat.v1
    for _ in range(warmup):
        session.run(fetches, feed_dict=feed_dict)
    options = v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE, output_partition_graphs=True)
    metadata = v1.RunMetadata()
    session.run(fetches, feed_dict=feed_dict, options=options, run_metadata=metadata)
    return metadata


def save_metadata(metadata: Any, path: str | os.PathLike[str]) -> None:
    """Write a RunMetadata: protobuf text for ``.pbtxt``/``.txt`` names, else binary; gzip for ``.gz``."""
    import gzip

    from google.protobuf import text_format

    name = os.fspath(path)
    stem = name.removesuffix(".gz")
    text = stem.endswith((".pbtxt", ".txt"))
    data = text_format.MessageToString(metadata).encode("utf-8") if text else metadata.SerializeToString()
    if name.endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    with open(name, "wb") as handle:
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


def use_cpu_bfc() -> bool:
    """Make TensorFlow's CPU allocator the BFC allocator, which writes memory events; True when it will be.

    Only possible before TensorFlow's runtime starts; afterwards this changes nothing and returns
    whether the variable was already set.
    """
    if os.environ.get(CPU_BFC, "").lower() in ("1", "true"):
        return True
    if _tensorflow_started():
        return False
    os.environ[CPU_BFC] = "true"
    return True


def _cpu_memory_info() -> dict[str, int] | None:
    try:
        return dict(_tf.config.experimental.get_memory_info("CPU:0"))
    except (ValueError, RuntimeError, _tf.errors.OpError):
        return None  # this allocator keeps no statistics (TensorFlow's default CPU allocator)


def record_profile(step: Callable[..., Any], *args: Any, steps: int = 1, warmup: int = 1,
                   logdir: str | os.PathLike[str], **kwargs: Any) -> list[StepMemory]:
    """Run ``warmup`` steps, then ``steps`` steps under the TF2 profiler, writing the profile to ``logdir``.

    Each step is ``step(*args, **kwargs)``, marked ``tf.profiler.experimental.Trace("train",
    step_num=i)``. Returns the CPU allocator's own counters around each step where it keeps them
    (the BFC allocator does), else an empty list.
    """
    if steps < 1 or warmup < 0:
        raise MemtraceError(f"steps must be 1 or more and warmup 0 or more, not steps={steps}, warmup={warmup}")
    bfc = use_cpu_bfc()
    for _ in range(warmup):
        step(*args, **kwargs)
    counters = []
    _tf.profiler.experimental.start(os.fspath(logdir))
    try:
        for number in range(steps):
            before = _cpu_memory_info() if bfc else None
            if before is not None:
                _tf.config.experimental.reset_memory_stats("CPU:0")
            with _tf.profiler.experimental.Trace("train", step_num=number, _r=1):
                step(*args, **kwargs)
            after = _cpu_memory_info()
            if before is not None and after is not None:
                counters.append(StepMemory(number, before["current"], after["peak"]))
    finally:
        _tf.profiler.experimental.stop()
    return counters


def profile(step: Callable[..., Any], *args: Any, steps: int = 1, warmup: int = 1,
            logdir: str | os.PathLike[str] | None = None, **kwargs: Any) -> Trace:
    """Run ``step(*args, **kwargs)`` ``warmup`` times, then ``steps`` times under the TF2 profiler; the :class:`Trace`.

    The trace covers every profiled step (``memtrace.load(logdir, step=N)`` reads one; ``summary``
    lists each step's peak). ``logdir`` keeps the profile (for ``memtrace diff`` later, or
    TensorBoard); by default it goes to a temporary directory, removed afterwards.
    """
    import tempfile

    from .api import load
    from .errors import TraceFormatError

    bfc = use_cpu_bfc()
    with tempfile.TemporaryDirectory(prefix="memtrace-profile-") as scratch:
        where = os.fspath(logdir) if logdir is not None else scratch
        record_profile(step, *args, steps=steps, warmup=warmup, logdir=where, **kwargs)
        try:
            return load(where)
        except TraceFormatError as error:
            if "no memory events" in str(error) and not bfc:
                raise MemtraceError(
                    f"the profile holds no memory events: TensorFlow had started before {CPU_BFC} could be set, so "
                    f"its CPU allocator writes none. Set {CPU_BFC}=true in the environment (or call "
                    "memtrace.tensorflow.use_cpu_bfc() before the first TensorFlow op) and run again") from None
            raise


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
    if cpu_bfc and not use_cpu_bfc():
        raise MemtraceError(_too_late_for_bfc())
    before = set(_profile_files(where, set()))
    result = Recording(where, not _tensorflow_started())
    started = time.monotonic()
    _tf.profiler.experimental.start(where)
    try:
        yield result
    finally:
        _tf.profiler.experimental.stop()
        result.seconds = time.monotonic() - started
        result.files = _profile_files(where, before)
        result.size_bytes = sum(os.path.getsize(f) for f in result.files)
        if not quiet:
            print(f"memtrace: {result.describe()}", file=sys.stderr, flush=True)


def _too_late_for_bfc() -> str:
    return (f"TensorFlow's runtime has started already, so its CPU allocator can no longer be switched to the BFC "
            f"allocator (the one that writes memory events). Set {CPU_BFC}=true in the environment, or call "
            "memtrace.tensorflow.use_cpu_bfc() before the program's first TensorFlow op, and run again")


def run_script(logdir: str, script: str, args: list[str]) -> None:
    """Run ``script`` as ``python script ARGS`` would, inside :func:`recording` (``memtrace run``'s child).

    ``sys.argv`` is the script's and ``sys.path[0]`` its directory; SystemExit and exceptions pass
    through after the profile is written, so the script's exit code is the process's. SIGTERM ends
    the script as an exception does, so its profile is written too.
    """
    import runpy
    import signal

    def terminated(number: int, frame: object) -> None:
        raise SystemExit(128 + number)

    signal.signal(signal.SIGTERM, terminated)
    sys.argv = [script, *args]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    with recording(logdir):
        runpy.run_path(script, run_name="__main__")
