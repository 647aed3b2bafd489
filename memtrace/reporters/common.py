"""What every reporter shares: safe rendering of names from traces (text and HTML), tables, JSON, the pages' assets,
the output file."""

from __future__ import annotations

import contextlib
import functools
import html
import importlib.resources
import json
import math
import os
import stat
import sys
from collections.abc import Collection, Iterator, Sequence
from typing import IO, TYPE_CHECKING, Any

from ..errors import OutputError, UsageError
from ..output import refuse_input_as_output, refuse_protected, replacing

if TYPE_CHECKING:
    from ..trace.data import Oddity

_CONTROL_TABLE: dict[int, str] = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))}
# Characters that reorder what a terminal (or browser) shows around them: a name could make a
# table lie about its neighbours (bidi overrides, isolates and marks).
_CONTROL_TABLE.update({c: f"\\u{c:04x}" for c in (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F),
                                                     *range(0x2066, 0x206A))})


def clean(name: str) -> str:
    """A name from a trace made safe for a terminal: control characters (ANSI escapes and the C1
    controls too) and bidirectional overrides escaped."""
    return name.translate(_CONTROL_TABLE)


def esc(text: str) -> str:
    """A name from a trace, safe in HTML text and attribute values (control characters shown escaped)."""
    return html.escape(clean(text), quote=True)


@functools.cache
def asset(name: str) -> str:
    """A file of ``reporters/assets/`` (a page's stylesheet or script), inlined into the page at render time."""
    return (importlib.resources.files(__package__) / "assets" / name).read_text(encoding="utf-8")


# Oddities that bend the numbers an analysis reports, and what they bend (see read/builder.py).
BENDING_ODDITIES = {
    "bytes-beyond-int64": "byte totals unknown",
    "negative-size": "sizes below zero",
    "record-outside-its-node": "peak times",
    "free-exceeds-allocation": "live bytes",
    "free-before-allocation": "live bytes",
    "node-lasts-over-a-day": "durations",
}

# Oddities that leave the numbers right but leave something unknown: every report of the trace
# says so in a note ahead of it, and its JSON lists them under ``oddities`` (see read/xplane.py).
NOTED_ODDITIES = {
    "ops-unknown": "the ops are unknown",
}

# The numbers a report marks where they stand, and the oddities that bend each. Where an
# allocator's bytes add up past int64 its numbers are not bent but unknown (memtrace.trace.replay.Uncounted).
BENT_NUMBERS = {
    "live bytes": ("free-exceeds-allocation", "free-before-allocation"),
    "sizes": ("negative-size",),
    "peak times": ("record-outside-its-node",),
    "durations": ("node-lasts-over-a-day",),
}


def concerning(oddities: Sequence[Oddity], allocators: Collection[str] | None = None) -> list[Oddity]:
    """The oddities that concern a report of these allocators: the whole trace's and those found on one
    of them (every allocator's where None); an oddity of another allocator bends none of its numbers."""
    return [o for o in oddities if o.allocator is None or allocators is None or o.allocator in allocators]


def write_caution(oddities: Sequence[Oddity], out: IO[str]) -> None:
    """One line ahead of a report whose numbers the ``oddities`` bend, naming the allocators they are
    found on (``free-exceeds-allocation on cpu (live bytes)``); nothing for a sound trace."""
    write_notes(oddities, out)
    on: dict[str, list[str | None]] = {}
    for o in oddities:
        if o.kind in BENDING_ODDITIES:
            on.setdefault(o.kind, []).append(o.allocator)
    if on:
        bent = [f"{kind}{_on(allocators)} ({BENDING_ODDITIES[kind]})" for kind, allocators in on.items()]
        out.write(f"caution: oddities in this trace bend the numbers below: {', '.join(bent)}; "
                  "see 'memtrace summary'\n\n")


def write_notes(oddities: Sequence[Oddity], out: IO[str]) -> None:
    """A line ahead of a report for each oddity that leaves something unknown (``note: ops-unknown: recorded
    by XLA ...``)."""
    for o in oddities:
        if o.kind in NOTED_ODDITIES:
            out.write(f"note: {oddity_name(o)}: {clean(o.example)}\n\n")


def _on(allocators: Sequence[str | None]) -> str:
    """`` on cpu, GPU_0_bfc`` for oddities found on those allocators; "" where one is the whole trace's."""
    return "" if None in allocators else " on " + ", ".join(clean(a or "") for a in allocators)


def oddity_name(oddity: Oddity) -> str:
    """``free-exceeds-allocation on cpu``, or the kind alone for an oddity of the whole trace."""
    return oddity.kind + _on([oddity.allocator])


def bent(oddities: Sequence[Oddity], *numbers: str, allocator: str | None = None) -> str:
    """The mark that goes next to a number the oddities bend (`` (bent: negative-size)``): the kinds of
    ``numbers`` (keys of :data:`BENT_NUMBERS`) among the whole trace's oddities and, for a number of
    one ``allocator``, that allocator's; "" for a sound one."""
    wanted = {kind for number in numbers for kind in BENT_NUMBERS[number]}
    kinds = dict.fromkeys(o.kind for o in oddities if o.kind in wanted and o.allocator in (None, allocator))
    return f" (bent: {', '.join(kinds)})" if kinds else ""


def oddity_json(oddity: Oddity) -> dict[str, Any]:
    """``kind``, ``allocator`` (only for an oddity found on one), ``count`` and ``example``."""
    found_on = {"allocator": oddity.allocator} if oddity.allocator is not None else {}
    return {"kind": oddity.kind, **found_on, "count": oddity.count, "example": oddity.example}


def with_oddities(document: dict[str, Any], oddities: Sequence[Oddity], allocator: str | None = None) -> dict[str, Any]:
    """A JSON report (or one allocator's part of it) with the oddities that bend its numbers (or leave
    something unknown) under ``oddities``: every one given, or with ``allocator`` those found on it; unchanged for a sound
    trace, so that its JSON stays as it always was."""
    bending = [oddity_json(o) for o in oddities
               if (o.kind in BENDING_ODDITIES or o.kind in NOTED_ODDITIES) and (allocator is None or o.allocator == allocator)]
    if bending:
        document["oddities"] = bending
    return document


def with_notes(document: dict[str, Any], oddities: Sequence[Oddity]) -> dict[str, Any]:
    """A JSON report with the oddities that leave something unknown (:data:`NOTED_ODDITIES`) under
    ``oddities``; unchanged where there are none."""
    noted = [oddity_json(o) for o in oddities if o.kind in NOTED_ODDITIES]
    if noted:
        document["oddities"] = noted
    return document


def table(
    rows: Sequence[Sequence[Any]], headers: Sequence[str], align: Sequence[str] | None = None, **fit: Any
) -> str:
    """A plain-text table that fits the terminal (see :func:`memtrace.reporters.tables.fit_table`)."""
    from .tables import fit_table

    return fit_table(rows, headers, align, **fit)


def write_json(document: dict[str, Any], stream: IO[str]) -> None:
    stream.write(strict_json(document, indent=2))
    stream.write("\n")


def strict_json(document: Any, **options: Any) -> str:
    """JSON as the standard has it, whatever the document holds: a float that is not finite (NaN,
    infinity, which Python would write as ``NaN``/``Infinity``, JSON that strict parsers refuse)
    becomes null. A reporter that can say why puts its reason next to the value itself."""
    try:
        return json.dumps(document, allow_nan=False, **options)
    except ValueError:
        return json.dumps(_finite(document), allow_nan=False, **options)


def _finite(value: Any) -> Any:
    """``value`` with every float that is not finite replaced by None, in dicts, lists and tuples."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


@contextlib.contextmanager
def open_output(path: str | None, inputs: Sequence[str | None] = ()) -> Iterator[IO[str]]:
    """The stream to write a report to: stdout for None or ``-``, else the file at ``path``.

    A regular file (new or existing, reached through any symlinks) is written next to its
    destination and renamed into place only when the report is complete, so an error never
    leaves a half-written report (or clobbers the old one); see :mod:`memtrace.output`. Anything
    else (a device such as ``/dev/null``, a FIFO, ``/dev/stdout``) is written in place: renaming
    over it would replace it with a regular file. An output that is one of ``inputs``, or a
    write-protected file, is refused. Every way writing can fail is an :class:`OutputError`
    naming the output.
    """
    if path is None or path == "-":
        with _writing("standard output"):
            if sys.stdout is None:
                raise OutputError("standard output is closed")
            try:
                yield sys.stdout
                sys.stdout.flush()
            except BrokenPipeError:
                raise
            except OSError:
                _quiet_stdout()  # else the interpreter fails again flushing what is buffered
                raise
        return
    refuse_input_as_output(path, inputs)
    refuse_protected(path)
    with _writing(path):
        try:
            status: os.stat_result | None = os.stat(path)
        except FileNotFoundError:
            status = None
        if status is not None and stat.S_ISDIR(status.st_mode):
            raise OutputError(f"{path}: is a directory")
        if status is not None and not stat.S_ISREG(status.st_mode):
            with open(path, "w", encoding="utf-8") as stream:
                yield stream
            return
        target = os.path.realpath(path)  # a regular file (or none yet): write through symlinks to it
        directory = os.path.dirname(target)
        if not os.path.isdir(directory):
            raise UsageError(f"{path}: the directory {directory} does not exist")
        with replacing(target) as handle:
            yield handle


@contextlib.contextmanager
def _writing(name: str) -> Iterator[None]:
    """Turn the operating system's refusal to write (full disk, no permission, ...) into one OutputError."""
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as error:
        raise OutputError(f"{name}: cannot write: {error.strerror or error}") from None


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush has nowhere to fail."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
