"""Helpers for the fast-reader tests: read a file by the fast path alone, or by protobuf alone."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hypothesis import strategies as st

from memtrace import read as reader
from memtrace.errors import TraceFormatError
from memtrace.read import files
from memtrace.trace.data import TraceData

reader.RAISE_UNEXPECTED = True  # a fast reader crashing is a bug to see, not a fallback to take


def fast(path: Path | str, jobs: int = 1) -> TraceData | None:
    """The trace as memtrace's own streaming readers produce it; None where they leave it to protobuf."""
    found = reader._load_fast(str(path), None, jobs)
    if found is None:
        return None
    builder, source_format, message_name, run_metadata = found
    return reader._finish(builder, str(path), source_format, message_name, run_metadata, None)


def reference(path: Path | str) -> TraceData:
    """The trace as protobuf's parsers read it (the reference); raises TraceFormatError on bad input."""
    data, compressed = files.read_bytes(str(path))
    return reader._load_data(str(path), data, compressed, None)


def same(a: TraceData, b: TraceData) -> bool:
    """Identical models, down to the source format and where the graph came from."""
    return a.same_content(b) and a.source_format == b.source_format and a.graph_source == b.graph_source


def check(path: Path, expect_fast: bool | None = True, jobs: int = 1) -> None:
    """The fast reader either steps aside or agrees with protobuf; ``expect_fast`` says which."""
    try:
        got = fast(path, jobs)
    except TraceFormatError as refused:  # refused outright (a time out of range): protobuf's path must agree
        try:
            reference(path)
        except TraceFormatError as also:
            # A length claimed beyond what memtrace takes for one field is refused before it is
            # read; protobuf, reading everything, names the damage in its own words.
            if "memtrace takes for one" not in str(refused):
                assert str(also) == str(refused)
            return
        raise AssertionError(f"the fast path refused what protobuf reads: {refused}") from None
    if expect_fast is not None:
        assert (got is not None) == expect_fast, "fast path taken" if got is not None else "fell back"
    try:
        expected = reference(path)
    except TraceFormatError:
        assert got is None, "the fast reader accepted what protobuf rejects"
        return
    if got is not None:
        assert same(got, expected)


class DiesInAWorker:
    """Stands in for ``function`` where worker processes call it: a worker that calls it dies (out
    of memory, say); the main process calling it gets ``function``'s result."""

    def __init__(self, function: Callable[..., object]):
        self.function = function

    def __getstate__(self) -> dict[str, object]:
        return {}  # a worker gets no function: it dies before it would call one

    def __call__(self, *arguments: object) -> object:
        import multiprocessing
        import os

        if multiprocessing.parent_process() is not None:
            os._exit(3)
        return self.function(*arguments)


Edit = tuple[int, int, bytes]  # at, bytes removed there, bytes put in their place


def edits(size: int) -> st.SearchStrategy[list[Edit]]:
    """One to three small edits anywhere in ``size`` bytes."""
    return st.lists(st.tuples(st.integers(0, size - 1), st.integers(0, 3), st.binary(max_size=3)), min_size=1, max_size=3)


def damaged(data: bytes, changes: list[Edit]) -> bytes:
    """``data`` with ``changes`` made one after another."""
    result = bytearray(data)
    for at, remove, insert in changes:
        result[at:at + remove] = insert
    return bytes(result)
