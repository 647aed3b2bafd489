"""The red-team pass of issue 25 as a test: ``batch`` on hostile directories, ``trend`` on hostile tables.

Directories are built from a fixed seed out of what a shared disk holds: traces good and damaged,
named as traces or not, empty files named as traces, FIFOs and sockets, symlink loops, dangling
links, links to files outside the directory, hard links, a trace named like a table. Tables are
``memtrace batch``'s own, damaged byte by byte or column by column (dropped, retyped, NaN and
infinite floats, int64 extremes, nulls, doubled, emptied). Every run must end in exit 0, 1 or
2, with exactly one line on stderr for exit 2, strict JSON for ``--json``, no traceback, no
hang, and nothing outside the output directory changed.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import random
import signal
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memtrace.cli import main
from memtrace.many.batch import TABLES, find_traces

from .conftest import FIXTURES, TINY, require
from .fastpaths import damaged

pa = require("pyarrow")
pq = require("pyarrow.parquet")
require("dask.bag")

# The same runs every time; MEMTRACE_FUZZ_SEED=N explores others (as `pytest --hypothesis-seed` does).
SEED = int(os.environ.get("MEMTRACE_FUZZ_SEED", "25"))
DIRECTORIES = 16  # hostile directories, each run through every BATCH_COMMANDS line
TABLE_CASES = 70  # hostile table pairs, each run through every TREND_COMMANDS line
BATCH_COMMANDS = [["batch", "{dir}", "-o", "{out}", "--workers", "1"],
                  ["batch", "{dir}/**/*", "-o", "{out}", "--json", "--workers", "1"],
                  ["batch", "{dir}", "-o", "{dir}", "--workers", "1"]]
TREND_COMMANDS = [["trend", "{out}"], ["trend", "{out}", "--json"], ["trend", "{out}", "--by", "mtime", "--json"],
                  ["trend", "{out}", "-o", "{page}"]]
HANG_SECONDS = 120  # a run longer than this is a hang (a FIFO opened, a loop followed)
OUTCOMES: list[tuple[str, int]] = []  # (command, exit code) of every run, for counting


def _strict_json(text: str) -> None:
    def refuse(constant: str) -> None:
        raise AssertionError(f"not JSON: {constant}")

    json.loads(text, parse_constant=refuse)


@contextlib.contextmanager
def _no_hang(argv: list[str]) -> Iterator[None]:
    def hung(signum: int, frame: Any) -> None:
        raise AssertionError(f"no answer in {HANG_SECONDS} s: {argv}")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(HANG_SECONDS)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def keeps_the_promise(capsys: pytest.CaptureFixture[str], argv: list[str]) -> int:
    """Run the command; fail the test unless it keeps the promise. Returns the exit code."""
    with _no_hang(argv):
        code = main(argv)  # an exception escaping main is the traceback a user would see
    out, err = capsys.readouterr()
    assert code in (0, 1, 2), argv
    assert "Traceback" not in err, (argv, err)
    assert all(line.startswith("memtrace: ") for line in err.splitlines()), (argv, err)
    if code == 2:
        assert err.count("\n") == 1 and err.startswith("memtrace: error: "), (argv, err)
    elif "--json" in argv:
        _strict_json(out)
    OUTCOMES.append((argv[0], code))
    return code


# -- hostile directories --------------------------------------------------------------------------


def _trace_bytes(rng: random.Random) -> bytes:
    data = rng.choice(sorted(TINY.glob("*.pbtxt"))).read_bytes()
    return gzip.compress(data, mtime=0) if rng.random() < 0.3 else data


def _damage(rng: random.Random, data: bytes) -> bytes:
    if rng.random() < 0.3:
        return data[:rng.randrange(len(data))]
    edits = [(rng.randrange(len(data)), rng.randint(0, 3), bytes(rng.randrange(256) for _ in range(rng.randint(0, 3))))
             for _ in range(rng.randint(1, 3))]
    return damaged(data, edits)


TRACE_NAMES = [".pbtxt", ".pb", ".xplane.pb", ".pb.gz", ".pbtxt.gz", ".textproto"]
OTHER_NAMES = [".txt", "", ".log", ".json.gz", ".md"]


def _entry(rng: random.Random, root: Path, outside: Path, index: int) -> None:
    """One hostile thing in the directory ``root`` (maybe in a subdirectory)."""
    where = root / rng.choice(["", "sub", "sub/deeper", "logs/plugins/profile/2026_01_01"])
    where.mkdir(parents=True, exist_ok=True)
    kind = rng.choice(["good", "good", "damaged", "damaged", "empty", "text", "fifo", "socket", "loop", "dangling",
                       "outside", "hardlink", "table-name", "profile", "binary-junk"])
    name = f"f{index}"
    if kind == "good":
        (where / f"{name}{rng.choice(TRACE_NAMES[:2] + OTHER_NAMES)}").write_bytes(_trace_bytes(rng))
    elif kind == "damaged":
        (where / f"{name}{rng.choice(TRACE_NAMES + OTHER_NAMES)}").write_bytes(_damage(rng, _trace_bytes(rng)))
    elif kind == "empty":
        (where / f"{name}{rng.choice(TRACE_NAMES)}").write_bytes(b"")
    elif kind == "text":
        (where / f"{name}{rng.choice(OTHER_NAMES)}").write_text("# notes, not a trace\n")
    elif kind == "binary-junk":
        (where / f"{name}{rng.choice(TRACE_NAMES + OTHER_NAMES)}").write_bytes(rng.randbytes(rng.randint(1, 300)))
    elif kind == "fifo":
        os.mkfifo(where / f"{name}{rng.choice(TRACE_NAMES)}")  # nobody writes to it: opening it to read waits forever
    elif kind == "socket":
        # (a path too long for a socket: no socket then)
        with socket.socket(socket.AF_UNIX) as server, contextlib.suppress(OSError):
            server.bind(str(where / f"{name}.pb"))
    elif kind == "loop":
        with contextlib.suppress(FileExistsError):
            (where / "up").symlink_to("..")
    elif kind == "dangling":
        (where / f"{name}.pbtxt").symlink_to("nowhere.pbtxt")
    elif kind == "outside":
        target = outside / f"precious{index}.pbtxt"
        target.write_bytes(_trace_bytes(rng))
        (where / f"{name}.pbtxt").symlink_to(target)
    elif kind == "hardlink":
        first = next((p for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()), None)
        if first is not None:
            os.link(first, where / f"{name}.pbtxt")
    elif kind == "table-name":
        (where / rng.choice([f"{t}.parquet" for t in TABLES])).write_bytes(_trace_bytes(rng))
    elif kind == "profile":
        data = gzip.decompress((FIXTURES / "profiles" / "keras_mlp.xplane.pb.gz").read_bytes())
        (where / f"{name}.xplane.pb").write_bytes(data if rng.random() < 0.5 else _damage(rng, data))


def _directory_cases() -> list[int]:
    return list(range(DIRECTORIES))


def _state(*roots: Path) -> dict[str, tuple[str, str]]:
    """What each path under the roots is: a link's target, a file's content hash, or its kind."""
    state = {}
    for root in roots:
        for path in [root, *root.rglob("*")]:
            if path.is_symlink():
                state[str(path)] = ("link", os.readlink(path))
            elif path.is_file():
                state[str(path)] = ("file", hashlib.sha256(path.read_bytes()).hexdigest())
            else:
                state[str(path)] = ("other", "")
    return state


@pytest.mark.parametrize("case", _directory_cases())
def test_batch_on_a_hostile_directory_keeps_the_promise(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                         case: int) -> None:
    rng = random.Random(SEED * 1000 + case)
    root, outside, out = tmp_path / "traces", tmp_path / "outside", tmp_path / "out"
    root.mkdir()
    outside.mkdir()
    for index in range(rng.randint(3, 10)):
        _entry(rng, root, outside, index)
    (root / "anchor.pbtxt").write_bytes((TINY / "ties.pbtxt").read_bytes())  # at least one trace
    with _no_hang(["find_traces", str(root)]):
        inputs = set(find_traces([root]))
    for command in BATCH_COMMANDS:
        before = _state(root, outside)
        argv = [a.format(dir=root, out=out) for a in command]
        code = keeps_the_promise(capsys, argv)
        after = _state(root, outside)
        # Nothing the user owns changes: only the tables, where -o named the input directory itself
        # and no trace there bears a table's name (then the command is refused).
        tables = {str(root / f"{t}.parquet") for t in TABLES} - inputs if "{dir}" in command[-3] else set()
        assert {k: v for k, v in after.items() if k not in tables} == {k: v for k, v in before.items() if k not in tables}
        if inputs & {str(root / f"{t}.parquet") for t in TABLES} and "{dir}" in command[-3]:
            assert code == 2, argv
        for table in tables:
            Path(table).unlink(missing_ok=True)


# -- hostile tables -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tables_written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """memtrace batch's own tables of a few traces (one broken), to damage."""
    from memtrace.many.batch import batch, write_tables

    where = tmp_path_factory.mktemp("tables")
    traces = [TINY / name for name in ("ties.pbtxt", "live_groups.pbtxt", "producer_free.pbtxt", "outputs_only.pbtxt")]
    (where / "broken.pbtxt").write_text('dev_stats {\n  device: "x"\n  node_stats { node_name: ')
    write_tables(batch([*traces, where / "broken.pbtxt"], workers=1), where / "out")
    return where / "out"


EXTREME_INTS = [-(2**63), 2**63 - 1, 0, -1]
EXTREME_FLOATS = [float("nan"), float("inf"), float("-inf"), 1e300, -0.0]


def _column_change(rng: random.Random, table: Any) -> Any:
    """The table with one column dropped, retyped, filled with extremes or nulls, doubled, or the rows emptied."""
    name = rng.choice(table.column_names)
    index = table.column_names.index(name)
    rows = table.num_rows
    change: dict[str, Callable[[], Any]] = {
        "drop": lambda: table.remove_column(index),
        "strings": lambda: table.set_column(index, name, pa.array([str(rng.random()) for _ in range(rows)])),
        "floats": lambda: table.set_column(index, name, pa.array([rng.choice(EXTREME_FLOATS) for _ in range(rows)])),
        "ints": lambda: table.set_column(index, name, pa.array([rng.choice(EXTREME_INTS) for _ in range(rows)], pa.int64())),
        "nulls": lambda: table.set_column(index, name, pa.nulls(rows, table.schema.field(index).type)),
        "null-type": lambda: table.set_column(index, name, pa.nulls(rows)),
        "double": lambda: table.append_column(name, table.column(index)),
        "empty": lambda: table.slice(0, 0),
        "bools": lambda: table.set_column(index, name, pa.array([rng.random() < 0.5 for _ in range(rows)])),
        "lists": lambda: table.set_column(index, name, pa.array([[1, 2]] * rows)),
    }
    return change[rng.choice(sorted(change))]()


def _parquet_damage(rng: random.Random, data: bytes) -> bytes:
    kind = rng.random()
    if kind < 0.25:
        return data[:rng.randrange(len(data))]
    if kind < 0.4:  # the footer's length or the footer itself
        footer = int.from_bytes(data[-8:-4], "little")
        return data[:-8 - footer] + bytes(rng.randrange(256) for _ in range(footer)) + data[-8:]
    edits = [(rng.randrange(len(data)), rng.randint(0, 4), bytes(rng.randrange(256) for _ in range(rng.randint(0, 4))))
             for _ in range(rng.randint(1, 4))]
    return damaged(data, edits)


@pytest.mark.parametrize("case", list(range(TABLE_CASES)))
def test_trend_on_a_hostile_table_keeps_the_promise(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                     tables_written: Path, case: int) -> None:
    rng = random.Random(SEED * 1000 + 500 + case)
    out = tmp_path / "out"
    out.mkdir()
    for name in TABLES:
        (out / f"{name}.parquet").write_bytes((tables_written / f"{name}.parquet").read_bytes())
    for _ in range(rng.randint(1, 2)):
        target = out / f"{rng.choice(['runs', 'allocators'])}.parquet"
        if rng.random() < 0.4:
            target.write_bytes(_parquet_damage(rng, target.read_bytes()))
        else:
            with contextlib.suppress(Exception):  # an earlier byte damage may have left nothing to read
                pq.write_table(_column_change(rng, pq.read_table(target)), target)
    for command in TREND_COMMANDS:
        keeps_the_promise(capsys, [a.format(out=out, page=tmp_path / "trend.html") for a in command])
