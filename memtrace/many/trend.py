"""Peaks across runs: the tables ``memtrace batch`` wrote, read back and put in order.

Each run's peak per allocator, ordered by run name (the path) or by the trace file's modification
time, so that a regression across a week of jobs shows as a step in a line. Runs that could not
be read are counted, not drawn; a run where an allocator's peak is unknown (its bytes beyond
int64, a null ``peak_bytes``) has no point for that allocator, as a run without it has none.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from .batch import require_extra

ORDERS = ("run", "mtime")


@dataclass(frozen=True)
class TrendPoint:
    run: str
    mtime_ns: int | None
    peak_bytes: int
    peak_delta_bytes: int


@dataclass(frozen=True)
class AllocatorTrend:
    allocator: str
    points: tuple[TrendPoint, ...]  # in the trend's order; runs without this allocator are absent

    @property
    def highest(self) -> TrendPoint:
        return max(self.points, key=lambda p: p.peak_bytes)


@dataclass(frozen=True)
class Trend:
    outdir: str
    by: str  # "run" or "mtime"
    runs: tuple[str, ...]  # every run read, in order
    failed_runs: int
    allocators: tuple[AllocatorTrend, ...]  # highest peak first


# The columns trend reads, the kind of values each must hold, and those that may not be null: a
# table without them (or with other types: float peaks, string sizes) is not one memtrace batch wrote.
READS = {
    "runs": {"run": "string", "mtime_ns": "integer", "error": "string"},
    "allocators": {"run": "string", "allocator": "string", "peak_bytes": "integer", "peak_delta_bytes": "integer"},
}
NOT_NULL = {"runs": ("run",), "allocators": ("run", "allocator")}


def _read(pa: Any, pq: Any, path: str, name: str) -> list[dict[str, Any]]:
    """The columns trend reads of one table, as rows; one line saying why where it is not a table
    memtrace batch wrote (unreadable, a column missing, of another type, or null where it may not be)."""
    def refuse(why: object) -> UsageError:
        return UsageError(f"{path}: not a table memtrace batch wrote ({' '.join(str(why).split())})")

    try:
        schema = pq.read_schema(path)
        for column, kind in READS[name].items():
            if schema.names.count(column) != 1:
                raise refuse(f"no column {column!r}" if column not in schema.names else f"column {column!r} twice")
            found = schema.field(column).type
            if not (pa.types.is_integer(found) if kind == "integer" else pa.types.is_string(found) or pa.types.is_large_string(found)):
                raise refuse(f"column {column!r} holds {found}, not {'integers' if kind == 'integer' else 'strings'}")
        table = pq.read_table(path, columns=list(READS[name]))
        for column in NOT_NULL[name]:
            if table.column(column).null_count:
                raise refuse(f"column {column!r} has nulls")
        rows: list[dict[str, Any]] = table.to_pylist()
    except (OSError, ValueError, TypeError, KeyError, IndexError, pa.ArrowException) as error:
        raise refuse(error) from None
    return rows


def trend(outdir: str | os.PathLike[str], by: str = "run") -> Trend:
    """Read ``runs.parquet`` and ``allocators.parquet`` from ``outdir`` and order each allocator's peaks."""
    if by not in ORDERS:
        raise UsageError(f"cannot order by {by!r}: choose one of {', '.join(ORDERS)}")
    pa, pq = require_extra("pyarrow"), require_extra("pyarrow.parquet")
    outdir = os.fspath(outdir)
    tables = {}
    for name in ("runs", "allocators"):
        path = os.path.join(outdir, f"{name}.parquet")
        if not os.path.isfile(path):
            raise UsageError(f"{outdir}: no {name}.parquet here; write the tables with 'memtrace batch PATH... -o {outdir}'")
        tables[name] = _read(pa, pq, path, name)
    read = [r for r in tables["runs"] if r.get("error") is None]
    mtime = {r["run"]: r.get("mtime_ns") for r in read}

    def position(run: str) -> tuple[int, str]:
        return (mtime.get(run) or 0, run) if by == "mtime" else (0, run)

    order = sorted(mtime, key=position)
    points: dict[str, list[TrendPoint]] = {}
    for row in tables["allocators"]:
        if row["run"] in mtime and row["peak_bytes"] is not None:
            points.setdefault(row["allocator"], []).append(
                TrendPoint(row["run"], mtime[row["run"]], row["peak_bytes"], row["peak_delta_bytes"]))
    allocators = [AllocatorTrend(name, tuple(sorted(found, key=lambda p: position(p.run)))) for name, found in points.items()]
    allocators.sort(key=lambda a: (-a.highest.peak_bytes, a.allocator))
    return Trend(outdir, by, tuple(order), len(tables["runs"]) - len(read), tuple(allocators))
