"""Many traces at once: each one analysed as a Dask task, the answers gathered into Arrow tables.

``batch(paths)`` finds every trace under the paths (files as given; directories searched
recursively for files whose content is a trace; glob patterns), reads and analyses each one in
its own task, and returns four tables, one row per:

- ``runs``: input (``run`` is its path; ``error`` is the one-line reason when it could not be
  read, else null);
- ``allocators``: run and allocator (the ``peak`` numbers, the fragmentation totals and the
  reconciliation counts); allocators may be asked for by device (``CPU:0``), meaning in each
  trace the allocator that device's memory went through. An allocator whose bytes add up past
  int64 has null peak and reconciliation numbers and ``unknown`` saying why (its waste is
  measured); the run's other allocators are as usual. Where it was asked for by name, or where
  every allocator of the trace is one, the run is refused instead (its ``error``), as the single-trace
  commands refuse it;
- ``ops``: run and op (the ``ops --by node`` columns);
- ``live_at_peak``: run, allocator and group of the live set at the peak (by op, op type and
  top-level scope, see :func:`memtrace.analyses.peak.group_live_set`).

The work runs on an existing engine rather than a pool of memtrace's own: a ``dask.bag`` over the
paths, one partition (one task) per trace, on local processes or, given a ``dask.distributed``
client, on its cluster. Rows come back in the order of the sorted paths, so the same inputs give
the same tables wherever they ran. Dask and pyarrow are the ``batch`` extra.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import glob
import os
import stat
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import MemtraceError, MissingExtraError, TraceFormatError, UsageError
from ..output import refuse_input_as_output, refuse_protected, replacing
from ..read import detect, files

INSTALL_HINT = "pip install 'memtrace[batch]'"
TABLES = ("runs", "allocators", "ops", "live_at_peak")
GROUPINGS = ("scope", "type", "node")

# Columns of each table and their Arrow types, fixed so that an empty table (every input broken,
# say) still has them.
COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "runs": (("run", "string"), ("format", "string"), ("message", "string"), ("size_bytes", "int64"),
             ("mtime_ns", "int64"), ("steps", "int64"), ("start_us", "int64"), ("duration_us", "int64"),
             ("nodes", "int64"), ("allocators", "int64"), ("error", "string")),
    "allocators": (("run", "string"), ("allocator", "string"), ("source", "string"), ("peak_bytes", "int64"),
                   ("peak_delta_bytes", "int64"), ("baseline_bytes", "int64"), ("peak_time_us", "int64"),
                   ("peak_node", "string"), ("requested_bytes", "int64"), ("allocated_bytes", "int64"),
                   ("waste_bytes", "int64"), ("snapshots", "int64"), ("snapshots_matched", "int64"),
                   ("max_snapshot_error_bytes", "int64"), ("unknown", "string")),
    "ops": (("run", "string"), ("name", "string"), ("op_type", "string"), ("device", "string"),
            ("occurrences", "int64"), ("requested_bytes", "int64"), ("peak_bytes", "int64"),
            ("residual_bytes", "int64"), ("output_bytes", "int64"), ("temp_bytes", "int64"),
            ("persistent_bytes", "int64"), ("at_peak_bytes", "int64"), ("waste_bytes", "int64")),
    "live_at_peak": (("run", "string"), ("allocator", "string"), ("by", "string"), ("key", "string"),
                     ("count", "int64"), ("bytes", "int64"), ("share", "float64")),
}

Row = dict[str, Any]


@dataclass
class TraceRows:
    """What one task found about one trace: plain rows, cheap to send between processes."""

    run: str
    rows: dict[str, list[Row]] = field(default_factory=lambda: {name: [] for name in TABLES})

    @property
    def error(self) -> str | None:
        return self.rows["runs"][0]["error"] if self.rows["runs"] else None


# -- finding the traces ---------------------------------------------------------------------------


# Names that say "a trace" (each also with .gz): a file so named is taken from a directory whatever
# its content, so that a damaged or empty one is an error row instead of being left out unseen.
TRACE_SUFFIXES = (".pb", ".pbtxt", ".pbtext", ".txtpb", ".textproto")


def find_traces(paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    """Every trace the paths name, sorted, each file once.

    A file named directly is taken as it is (a bad one becomes a row with an error); a directory
    is searched recursively for regular files named like a trace (:data:`TRACE_SUFFIXES`) or
    whose first bytes look like one (FIFOs, sockets and devices are passed over: reading one
    could wait forever; a subdirectory that cannot be listed is taken, for its error row); a
    pattern with ``*``, ``?`` or ``[`` is expanded, ``**`` entering each directory once however
    symlinks loop. A file reached by several paths (links, a directory
    and a pattern naming it both) is taken once, by device and inode, under its shortest path.
    A path that names nothing is a usage error.
    """
    found: set[str] = set()

    def unlisted(error: OSError) -> None:
        if error.filename:
            found.add(error.filename)

    for given in paths:
        path = os.fspath(given)
        if os.path.isdir(path):
            # A subdirectory that cannot be listed is taken as a path of its own: its row says why
            # (a trace in it would otherwise be left out unseen).
            for root, dirs, names in os.walk(path, onerror=unlisted):
                dirs.sort()
                found.update(candidate for candidate in (os.path.join(root, name) for name in names)
                             if _regular(candidate) and (named_like_trace(candidate) or looks_like_trace(candidate)))
        elif os.path.exists(path) or os.path.islink(path):
            found.add(path)
        elif glob.has_magic(path):
            matches = expand(path)
            if not matches:
                raise UsageError(f"{path}: the pattern matches no file")
            found.update(find_traces(matches))
        else:
            raise UsageError(f"{path}: no such file or directory")
    once: dict[tuple[int, int] | str, str] = {}
    for path in sorted(found, key=lambda p: (p.count(os.sep), p)):
        try:
            status = os.stat(path)
            key: tuple[int, int] | str = (status.st_dev, status.st_ino)
        except OSError:
            key = path  # it cannot be read: its own row says why
        once.setdefault(key, path)
    return sorted(once.values())


def named_like_trace(path: str) -> bool:
    """Whether the file's name says it is a trace (``run.pbtxt``, ``host.xplane.pb.gz``, ...)."""
    name = path.lower().removesuffix(".gz")
    return name.endswith(TRACE_SUFFIXES)


def _regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def expand(pattern: str) -> list[str]:
    """The paths a glob pattern matches, as ``glob.glob(pattern, recursive=True)`` finds them, except
    that ``**`` enters each directory once (by device and inode): a symlink loop (``a/up -> ..``)
    ends there instead of being followed 40 levels deep, or exponentially with two loops."""
    if "**" not in pattern:
        return glob.glob(pattern)
    directories_only = pattern.endswith(os.sep)  # as glob: "runs/**/" matches directories only
    parts = pattern.rstrip(os.sep).split(os.sep)
    fixed = next(i for i, part in enumerate(parts) if glob.has_magic(part))
    base, wanted = os.sep.join(parts[:fixed]), tuple(parts[fixed:])
    if parts[:fixed] == [""]:
        base = os.sep
    matches = [os.path.join(base, "")] if base and set(wanted) == {"**"} and os.path.isdir(base) else []
    # A directory matched by a last ``**`` standing for nothing is named with a separator at its end, as glob names it.
    stem = wanted
    while stem and stem[-1] == "**":
        stem = stem[:-1]
    for names, is_directory in _tree(base or os.curdir):
        if (is_directory or not directories_only) and _matches(wanted, tuple(names)):
            path = os.path.join(base, *names) if base else os.path.join(*names)
            slash = directories_only or (is_directory and stem != wanted and _matches(stem, tuple(names)))
            matches.append(os.path.join(path, "") if slash else path)
    return matches


def _tree(top: str) -> Iterator[tuple[list[str], bool]]:
    """The path (as names under ``top``) of everything under ``top`` and whether it is a directory,
    following symlinks but entering each directory once; unreadable directories are passed over,
    as glob passes them."""
    seen: set[tuple[int, int]] = set()
    stack: list[list[str]] = [[]]
    while stack:
        names = stack.pop()
        directory = os.path.join(top, *names)
        try:
            status = os.stat(directory)
            if (status.st_dev, status.st_ino) in seen:
                continue
            seen.add((status.st_dev, status.st_ino))
            with os.scandir(directory) as entries:
                found = sorted((entry.name, _is_directory(entry)) for entry in entries)
        except OSError:
            continue
        for name, is_directory in found:
            yield [*names, name], is_directory
        stack.extend([*names, name] for name, is_directory in reversed(found) if is_directory)


def _is_directory(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


@functools.lru_cache(maxsize=4096)
def _matches(pattern: tuple[str, ...], names: tuple[str, ...]) -> bool:
    """Whether the path ``names`` matches the pattern's components as glob matches them (``**``: any
    number of components; a name starting with a dot only where the pattern's component does)."""
    if not pattern:
        return not names
    head = pattern[0]
    if head == "**":
        return any(_matches(pattern[1:], names[skip:]) for skip in range(len(names) + 1)
                   if not any(name.startswith(".") for name in names[:skip]))
    return (bool(names) and fnmatch.fnmatchcase(names[0], head)
            and (not names[0].startswith(".") or head.startswith(".")) and _matches(pattern[1:], names[1:]))


def looks_like_trace(path: str) -> bool:
    """Whether a file found in a directory is worth a task: gzip, binary protobuf, or trace text."""
    head = files.peek(path, detect.SNIFF_BYTES)  # inside a gzip: what it holds decides (.trace.json.gz: no)
    if head is None:
        return False
    if head[:1] == b"\n":  # field 1, length-delimited: dev_stats, step_stats or an XSpace's planes
        return True
    text = detect.sniff_text(head, complete=len(head) < detect.SNIFF_BYTES)
    if text is None:
        return False
    first = detect.first_field(text)
    return first in detect.STEP_STATS_FIELDS or first in detect.RUN_METADATA_FIELDS


# -- one trace --------------------------------------------------------------------------------------


def analyse_trace(path: str, allocators: Sequence[str] | None = None) -> TraceRows:
    """Read one trace and put its peaks, ops and live sets into rows; never raises.

    A trace that cannot be read (or whose analysis fails) gives one ``runs`` row whose ``error``
    says why, and no other rows: one broken file must not fail a batch of thousands.
    """
    from ..analyses.frag import internal_waste
    from ..analyses.ops import ops
    from ..analyses.peak import group_live_set, peaks_and_unknown
    from ..api import load
    from ..trace.devices import device_allocator

    result = TraceRows(path)
    run: Row = {name: None for name, _ in COLUMNS["runs"]}
    run["run"] = path
    try:
        status = os.stat(path)
        run["size_bytes"], run["mtime_ns"] = status.st_size, status.st_mtime_ns
    except OSError:
        status = None
    try:
        if status is not None and not stat.S_ISREG(status.st_mode) and not stat.S_ISDIR(status.st_mode):
            # A FIFO waits for a writer that may never come; a device may never end.
            raise TraceFormatError(path, f"is {_kind(status.st_mode)}, not a regular file; batch reads regular files only")
        trace = load(path, jobs=1)
        # An allocator asked for may be a device (CPU:0): it means that device's allocator in each trace.
        wanted = None if allocators is None else {device_allocator(trace, a) or a for a in allocators}
        chosen = [a for a in trace.allocators if wanted is None or a in wanted]
        counted, unknown = peaks_and_unknown(trace, chosen)
        # As the single-trace commands: refused where asked for by name, or where nothing else is left.
        if unknown and (allocators is not None or len(unknown) == len(trace.allocators)):
            raise unknown[0].error(path)
        rows = result.rows
        for u in unknown:  # first, as everywhere: its peak is unknown, its waste needs no replay
            waste, _ = internal_waste(trace, u.allocator)
            rows["allocators"].append({
                **dict.fromkeys(name for name, _ in COLUMNS["allocators"]), "run": path, "allocator": u.allocator,
                "source": u.source, "requested_bytes": waste.requested_bytes, "allocated_bytes": waste.allocated_bytes,
                "waste_bytes": waste.allocated_bytes - waste.requested_bytes, "unknown": u.reason,
            })
        for found in sorted(counted, key=lambda p: (-p.peak_bytes, p.allocator)):
            waste, _ = internal_waste(trace, found.allocator)
            rows["allocators"].append({
                "run": path, "allocator": found.allocator, "source": found.source, "peak_bytes": found.peak_bytes,
                "peak_delta_bytes": found.peak_delta_bytes, "baseline_bytes": found.baseline_bytes,
                "peak_time_us": found.peak_time_us, "peak_node": found.peak_node,
                "requested_bytes": waste.requested_bytes, "allocated_bytes": waste.allocated_bytes,
                "waste_bytes": waste.allocated_bytes - waste.requested_bytes,
                "snapshots": found.reconciliation.snapshots, "snapshots_matched": found.reconciliation.matched,
                "max_snapshot_error_bytes": found.reconciliation.max_abs_error_bytes, "unknown": None,
            })
            for by in GROUPINGS:
                rows["live_at_peak"].extend(
                    {"run": path, "allocator": found.allocator, "by": by, "key": g.key, "count": g.count,
                     "bytes": g.bytes, "share": g.share}
                    for g in group_live_set(trace, found, by))
        report = ops(trace, by="node", sort="name", allocators=chosen)
        rows["ops"].extend({"run": path, **{name: getattr(row, name) for name, _ in COLUMNS["ops"][1:]}}
                           for row in report.rows)
        run.update(format=trace.source_format, message=trace.message, steps=len(trace.steps) or 1,  # a StepStats is one step
                   start_us=trace.step_start_ns // 1000, duration_us=(trace.step_end_ns - trace.step_start_ns) // 1000,
                   nodes=len(trace.nodes), allocators=len(chosen))
    except MemtraceError as error:
        result.rows = {name: [] for name in TABLES}
        run["error"] = str(error)
    except Exception as error:  # noqa: BLE001 - a bug in memtrace must cost one row, not the batch
        result.rows = {name: [] for name in TABLES}
        run["error"] = f"{path}: memtrace failed on this trace ({type(error).__name__}: {error})"
    result.rows["runs"] = [run]
    return result


def _kind(mode: int) -> str:
    """What a file that is not a regular file is, in words."""
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a special file"


# -- many traces ------------------------------------------------------------------------------------


def batch(
    paths: Iterable[str | os.PathLike[str]],
    client: Any = None,
    workers: int | None = None,
    allocators: Sequence[str] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Analyse every trace under ``paths``; returns the four tables as ``pyarrow.Table`` by name.

    Without ``client`` the traces are analysed on ``workers`` local processes (default: one per
    core); with a ``dask.distributed.Client`` they run on its cluster. ``progress(done, total)``
    is called as traces finish. A usage error if no trace is found.
    """
    found = find_traces(paths)
    if not found:
        raise UsageError("no traces found under the paths given")
    results = run_tasks(found, tuple(allocators) if allocators else None, client, workers, progress)
    return tables(results)


# What deciding where to run rests on, measured on a 2-core machine (``scripts/bench.py --batch``): a trace
# costs about this much whatever its size, plus its bytes at this speed; starting local worker processes
# (fork, Dask, each worker's share of the modules) and sending the rows back costs about POOL_START_SECONDS.
TRACE_SECONDS = 0.025
BYTES_PER_SECOND = 40e6
POOL_START_SECONDS = 1.0
TASKS_PER_WORKER = 4  # local tasks per worker: several traces each, so that few results cross processes


def estimated_seconds(paths: Sequence[str]) -> float:
    """About how long reading and analysing ``paths`` takes in one process, from their count and sizes."""
    size = 0
    for path in paths:
        with contextlib.suppress(OSError):
            size += os.stat(path).st_size
    return len(paths) * TRACE_SECONDS + size / BYTES_PER_SECOND


def local_workers(paths: Sequence[str], workers: int | None) -> int:
    """How many local processes to analyse ``paths`` on: 1 (this process, no pool) unless the work, shared among
    ``workers`` (default: one per core), saves more than starting them costs."""
    from ..read.jobs import cores

    count = min(workers or cores(), len(paths))
    if count <= 1:
        return 1
    work = estimated_seconds(paths)
    return count if work / count + POOL_START_SECONDS < work else 1


def run_tasks(paths: list[str], allocators: tuple[str, ...] | None, client: Any, workers: int | None,
              progress: Callable[[int, int], None] | None) -> list[TraceRows]:
    """Each path analysed by :func:`analyse_trace`; results in the order of ``paths``.

    With a client, each path is one task on its cluster. Without, the scheduler is picked by the
    work (:func:`local_workers`): this process, one trace after another, or a ``dask.bag`` on
    local processes, a few tasks per worker, each a run of consecutive paths.
    """
    total = len(paths)
    if client is None:
        count = local_workers(paths, workers)
        if count == 1:
            results = []
            for count, path in enumerate(paths, 1):
                results.append(analyse_trace(path, allocators))
                if progress is not None:
                    progress(count, total)
            return results
        dask_bag = require_extra("dask.bag")
        from dask.callbacks import Callback

        tasks = min(total, count * TASKS_PER_WORKER)
        runs = [paths[total * k // tasks:total * (k + 1) // tasks] for k in range(tasks)]
        bag = dask_bag.from_sequence(runs, npartitions=tasks).map(_analyse_run, allocators)
        sizes = dict(zip(bag.__dask_keys__(), map(len, runs)))  # the tasks that gather them count for nothing
        done = [0]

        def finished(key: Any, result: Any, dsk: Any, state: Any, worker_id: Any) -> None:
            if key in sizes and progress is not None:
                done[0] += sizes[key]
                progress(done[0], total)

        import dask

        _import_analyses()  # once here, before the workers fork, not once in each of them
        # Fork where there is fork, as memtrace's own worker pool does: spawned workers import the
        # caller's __main__ again, which a notebook or a script on stdin does not have.
        context = "fork" if sys.platform == "linux" else "spawn"
        with dask.config.set({"multiprocessing.context": context}), Callback(posttask=finished):
            computed = bag.compute(scheduler="processes", num_workers=count)
        return [rows for run in computed for rows in run]
    dask_bag = require_extra("dask.bag")
    bag = dask_bag.from_sequence(paths, npartitions=len(paths)).map(analyse_trace, allocators)
    distributed = require_extra("distributed")
    partitions = bag.to_delayed()
    futures = client.compute(partitions)
    position = {future.key: index for index, future in enumerate(futures)}
    gathered: list[list[TraceRows]] = [[] for _ in futures]
    for count, future in enumerate(distributed.as_completed(futures), 1):
        gathered[position[future.key]] = future.result()
        if progress is not None:
            progress(count, total)
    return [rows for partition in gathered for rows in partition]


def _analyse_run(paths: Sequence[str], allocators: Sequence[str] | None) -> list[TraceRows]:
    """One local task: consecutive traces, each analysed on its own."""
    return [analyse_trace(path, allocators) for path in paths]


def _import_analyses() -> None:
    """The modules :func:`analyse_trace` imports as it runs."""
    from ..analyses import frag, ops, peak  # noqa: F401
    from ..trace import devices  # noqa: F401


def tables(results: Sequence[TraceRows]) -> dict[str, Any]:
    """The rows of every trace, in order, as one ``pyarrow.Table`` per table name.

    A trace with a value no column holds (a number beyond int64, say) becomes its own error row,
    as a trace that cannot be read does: the other traces' rows are kept.
    """
    pa = require_extra("pyarrow")
    schemas = {name: pa.schema([(column, getattr(pa, kind)()) for column, kind in COLUMNS[name]]) for name in TABLES}
    try:
        return _tables(pa, schemas, results)
    except (OverflowError, ValueError, TypeError, pa.ArrowException):
        pass  # some trace's rows do not fit: find which, one by one (the common case pays nothing)
    fitting = []
    for result in results:
        try:
            _tables(pa, schemas, [result])
        except (OverflowError, ValueError, TypeError, pa.ArrowException) as error:
            result = _unfit(result, error)
        fitting.append(result)
    return _tables(pa, schemas, fitting)


def _tables(pa: Any, schemas: dict[str, Any], results: Sequence[TraceRows]) -> dict[str, Any]:
    return {name: pa.Table.from_pylist([row for result in results for row in result.rows[name]], schema=schemas[name])
            for name in TABLES}


def _unfit(result: TraceRows, error: Exception) -> TraceRows:
    """The trace as one error row: a value of its rows does not fit its column."""
    found = result.rows["runs"][0] if result.rows["runs"] else {}
    run: Row = {name: None for name, _ in COLUMNS["runs"]}
    run.update(run=result.run, size_bytes=found.get("size_bytes"), mtime_ns=found.get("mtime_ns"))
    detail = " ".join(str(error).split()) or type(error).__name__
    run["error"] = f"{result.run}: a value of this trace does not fit the tables' columns ({detail})"
    unfit = TraceRows(result.run)
    unfit.rows["runs"] = [run]
    return unfit


def outputs(outdir: str | os.PathLike[str]) -> list[str]:
    """The files ``write_tables`` writes in ``outdir``, in order."""
    return [os.path.join(os.fspath(outdir), f"{name}.parquet") for name in TABLES]


def refuse_outputs(outdir: str | os.PathLike[str], inputs: Sequence[str]) -> None:
    """A UsageError where a table would replace one of the ``inputs`` (a trace named ``ops.parquet``
    in ``outdir``, say), or a write-protected file; or where ``outdir`` is not a directory."""
    if os.path.exists(outdir) and not os.path.isdir(outdir):
        raise UsageError(f"{os.fspath(outdir)}: exists and is not a directory")
    for target in outputs(outdir):
        refuse_input_as_output(target, inputs)
        refuse_protected(target)


def write_tables(built: dict[str, Any], outdir: str | os.PathLike[str]) -> list[str]:
    """Write each table as ``NAME.parquet`` in ``outdir`` (made if missing), each file renamed into place whole.

    Each file is written to a temporary file created exclusively in ``outdir`` (never through a
    link planted there) and renamed over ``NAME.parquet``; a ``NAME.parquet`` that is a symlink is
    replaced, not followed. A table that would replace one of the traces read (``built``'s runs)
    or a write-protected file is refused before anything is written.
    """
    pq = require_extra("pyarrow.parquet")
    outdir = os.fspath(outdir)
    refuse_outputs(outdir, built["runs"].column("run").to_pylist() if "runs" in built else [])
    try:
        os.makedirs(outdir, exist_ok=True)
        written = []
        for name, table in built.items():
            target = os.path.join(outdir, f"{name}.parquet")
            with replacing(target, binary=True) as handle:
                pq.write_table(table, handle)
            written.append(target)
    except OSError as error:
        raise UsageError(f"{outdir}: cannot write the tables ({error.strerror or error})") from None
    return written


def require_extra(module: str) -> Any:
    """Import one of the ``batch`` extra's modules, or say how to install them."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtraError(f"memtrace batch needs Dask and pyarrow: {INSTALL_HINT}") from None
