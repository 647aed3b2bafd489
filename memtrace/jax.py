"""Recording a JAX program under XLA's profiler, from before its allocator's first allocation (``memtrace run``).

JAX's GPU runtime (XLA) writes the same memory events from its BFC allocator that TensorFlow's
profiler writes, into the same kind of profile (an XSpace under ``LOGDIR/plugins/profile``), which
every memtrace command reads. ``memtrace run SCRIPT`` runs a JAX script in a child Python inside
:func:`recording`; ``memtrace run --limit SIZE`` first sets ``XLA_PYTHON_CLIENT_MEM_FRACTION`` so
that XLA builds its pool, and compiles its programs, for that limit. Importing this module does not
import JAX.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from .errors import MissingExtraError


@dataclass
class JaxRecording:
    """What :func:`recording` wrote: the profile's ``.xplane.pb`` files, filled in when the profiler stops."""

    logdir: str
    seconds: float = 0.0
    files: list[str] = field(default_factory=list)

    def describe(self) -> str:
        """One line for people: how long, where, and how to read it."""
        if not self.files:
            return f"the profiler wrote nothing to {self.logdir} (after {self.seconds:.1f} s)"
        where = self.files[0] if len(self.files) == 1 else f"{len(self.files)} files under {self.logdir}"
        return f"profiled {self.seconds:.1f} s into {where}; read it with: memtrace fit {self.logdir}"


def _xplane_files(logdir: str) -> set[str]:
    root = os.path.join(logdir, "plugins", "profile")
    return {os.path.join(d, n) for d, _, names in os.walk(root) for n in names if n.endswith(".xplane.pb")}


@contextmanager
def recording(logdir: str | os.PathLike[str], *, quiet: bool = False) -> Iterator[JaxRecording]:
    """Everything inside the block under JAX's profiler (host tracer on, Python tracer off), written to ``logdir``
    however the block ends (an out-of-memory error included). Put it before the program's first array."""
    try:
        import jax
    except ImportError as error:
        raise MissingExtraError(f"JAX is not installed here ({error}); memtrace run records a JAX script with JAX's "
                                "own profiler") from None
    where = os.fspath(logdir)
    before = _xplane_files(where)
    result = JaxRecording(where)
    options = None
    if hasattr(jax.profiler, "ProfileOptions"):  # (JAX 0.4.36 on) the memory events come from the host tracer
        options = jax.profiler.ProfileOptions()
        options.host_tracer_level = 2
        options.python_tracer_level = 0
    started = time.monotonic()
    if options is None:
        jax.profiler.start_trace(where)
    else:
        jax.profiler.start_trace(where, profiler_options=options)
    try:
        yield result
    finally:
        jax.profiler.stop_trace()
        result.seconds = time.monotonic() - started
        result.files = sorted(_xplane_files(where) - before)
        if not quiet:
            print(f"memtrace: {result.describe()}", file=sys.stderr, flush=True)


def run_script(logdir: str, script: str, args: list[str]) -> None:
    """Run ``script`` as ``python script ARGS`` would, inside :func:`recording` (``memtrace run``'s child for JAX)."""
    import runpy
    import signal

    def terminated(number: int, frame: object) -> None:
        raise SystemExit(128 + number)

    signal.signal(signal.SIGTERM, terminated)
    sys.argv = [script, *args]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    with recording(logdir):
        try:
            runpy.run_path(script, run_name="__main__")
        finally:
            say_other_pool()


def say_other_pool() -> None:
    """Where ``memtrace run --limit`` asked XLA for a pool and XLA made another (a JAX that sizes it another way),
    say so: the limit the script ran under is the pool XLA made, which the profile's events hold."""
    from .allocator.defaults import XLA_POOL_VARIABLE  # here, after the script: the child imports no more before it

    asked = os.environ.get(XLA_POOL_VARIABLE)
    if not asked:
        return
    import jax

    try:
        made = (jax.devices()[0].memory_stats() or {}).get("bytes_limit")
    except Exception:  # noqa: BLE001 - no device, or a backend without memory statistics: nothing to compare
        return
    if made is not None and int(made) != int(asked):
        print(f"memtrace: XLA made a pool of {int(made):,} bytes, not the {int(asked):,} asked for: the script ran "
              "under the pool XLA made (the profile's events hold it, and memtrace fit reads it there)",
              file=sys.stderr, flush=True)
