"""memtrace: memory-allocation forensics for TensorFlow step traces.

``memtrace.load(path)`` reads a RunMetadata or StepStats trace (text or binary, optionally
gzip), or a TensorFlow 2 profile (``.xplane.pb``), into a :class:`Trace`: the columnar model, with the analyses as methods (``memtrace.api``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import MemtraceError, TraceFormatError, UsageError
from .version import __version__

if TYPE_CHECKING:
    from .allocator.batch_size import BatchFit
    from .allocator.oom import OomEvent
    from .api import Trace

__all__ = ["MemtraceError", "Trace", "TraceFormatError", "UsageError", "__version__", "batch", "explain_oom", "fit_batches",
           "load"]



def load(path: Any, graph: Any = None, progress: Any = None, jobs: int | None = None, *,
         step: int | None = None, run: str | None = None) -> Trace:
    """Read a trace file (and optionally a separate GraphDef) into a :class:`Trace`.

    ``progress(bytes_read, file_bytes)``, when given, is called as the file is read. ``jobs``
    processes read the trace (default 1): faster on a large trace with as many cores, at some
    tens of MB of memory per process. A TensorFlow 2 profile (``HOST.xplane.pb``, its run
    directory or its logdir) is read too: ``step`` keeps one step of it, ``run`` picks a run of a
    logdir (default: the newest).
    """
    from .api import load as _load

    return _load(path, graph, progress, jobs, step=step, run=run)


def fit_batches(small: Any, large: Any, batch_sizes: tuple[int, int] | None = None, **options: Any) -> BatchFit:
    """The largest batch that fits, from two recordings of one step at batch sizes B1 < B2 (``memtrace fit --vs``).

    ``memtrace.fit_batches("run_b16", "run_b64", batch_sizes=(16, 64), limit="15GiB")``: traces or
    paths; options ``allocator``, ``limit``, ``batch``, ``allow_growth``, ``garbage_collection``,
    ``fragmentation_fraction``, ``check=(trace, B3)`` (see :func:`memtrace.api.fit_batches`).
    """
    from .api import fit_batches as _fit_batches

    return _fit_batches(small, large, batch_sizes, **options)


def batch(paths: Any, client: Any = None, workers: int | None = None, allocators: Any = None) -> dict[str, Any]:
    """Analyse every trace under ``paths`` as Dask tasks; the tables ``runs``, ``allocators``, ``ops`` and
    ``live_at_peak`` as ``pyarrow.Table`` by name (see :mod:`memtrace.many.batch`; needs ``memtrace[batch]``).

    Without ``client`` the traces run on local processes; with a ``dask.distributed.Client``, on its cluster.
    """
    from .many.batch import batch as _batch

    return _batch(paths, client=client, workers=workers, allocators=allocators)


def explain_oom(path: Any, request_bytes: int | None = None, limit_bytes: int | None = None) -> list[OomEvent]:
    """Every out-of-memory event in a log with BFC dumps or in a MemoryDump protobuf, with its verdict.

    ``request_bytes`` and ``limit_bytes`` stand in where the dump does not say (a MemoryDump never does).
    """
    from .allocator.oom import analyse_all
    from .read.oom import load_oom_dumps

    return analyse_all(load_oom_dumps(path), request_bytes, limit_bytes)


def __getattr__(name: str) -> Any:
    if name == "Trace":
        from .api import Trace

        return Trace
    if name in ("testing", "tensorflow"):  # imported on first use: numpy, or TensorFlow itself
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'memtrace' has no attribute {name!r}")
