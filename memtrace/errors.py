"""The exceptions memtrace raises on purpose.

Every error a user can cause (a bad file, a bad option) is a :class:`MemtraceError`. The CLI
turns each into one line on stderr and exit code 2; anything else reaching the user is a bug.
"""

from __future__ import annotations


class MemtraceError(Exception):
    """Base class of every error memtrace raises for bad input or usage."""


class UsageError(MemtraceError):
    """The command line or an API call asked for something that cannot be done."""


class TraceFormatError(MemtraceError):
    """A file could not be read as a TensorFlow trace (or graph).

    Carries the path and, for text input where the parser says so, the line and column, so the
    message reads like a compiler's: ``run.pbtxt:12:5: Expected "}".``
    """

    def __init__(self, path: str, detail: str, line: int | None = None, column: int | None = None):
        self.path = path
        self.detail = detail
        self.line = line
        self.column = column
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.path
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        return f"{where}: {self.detail}"


# What adds up past int64, in words, by the source that BeyondInt64Error and replay.Uncounted name.
SNAPSHOTS = "snapshots"
BEYOND_WHAT = {"records": "records", "outputs": "output sizes",
               SNAPSHOTS: "bytes-in-use snapshots and records (their sums and differences)"}


class BeyondInt64Error(TraceFormatError):
    """An allocator's records (or, without records, its output sizes) add up to more bytes than
    int64 holds: any running total of them would wrap around, so its live bytes and peak are
    refused rather than shown wrapped."""

    def __init__(self, path: str, allocator: str, total_bytes: float, source: str = "records"):
        self.allocator = allocator
        self.total_bytes = total_bytes
        self.source = source  # "records", "outputs" or "snapshots": what adds up so
        what = BEYOND_WHAT[source]
        super().__init__(path, f"the {what} of {allocator!r} add up to {total_bytes:.3g} bytes, beyond int64: "
                               "its live bytes and peak cannot be counted (oddity bytes-beyond-int64)")


class OutputError(MemtraceError):
    """The output could not be written: a full disk, a directory, no permission, a closed stdout."""


class MissingExtraError(MemtraceError, ModuleNotFoundError):
    """An optional dependency is not installed (TensorFlow, Dask, pyarrow); the message says which extra provides it.

    A ModuleNotFoundError, so ``pytest.importorskip("memtrace.tensorflow")`` skips on it: pytest
    9.1 and later skip only on ModuleNotFoundError unless told ``exc_type=ImportError``.
    """
