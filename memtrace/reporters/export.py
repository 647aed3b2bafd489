"""Writing Trace Event Format JSON (the "JSON Object Format" of the Trace Event Format document).

Events are written one per line as they come, so the writer never holds the whole file. Runs of
like events come as columns (:class:`~memtrace.analyses.export.EventColumns`) and are written column by
column: each column is encoded in one go by the type of its values, and each line is a template
filled in, byte for byte what ``json`` writes for the same events as dicts, several times faster.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable, Iterator
from json.encoder import encode_basestring_ascii
from typing import IO, Any

from ..analyses.export import Column, Event, EventColumns
from .common import strict_json

_BATCH = 4096  # lines joined into one write
_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
_LITERALS = {False: "false", True: "true", None: "null"}
_OPEN = object()  # in a template: the key's value is an object, filled in after


def render_chrome(events: Iterable[Event | EventColumns], other_data: dict[str, str], out: IO[str]) -> int:
    """Write ``{"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}``; returns the event count."""
    out.write('{"traceEvents":[\n')
    count = 0
    for batch in _batches(_lines(events)):
        out.write((",\n" if count else "") + ",\n".join(batch))
        count += len(batch)
    out.write('\n],\n"displayTimeUnit":"ms",\n"otherData":')
    out.write(strict_json(other_data, separators=(",", ":")))
    out.write("}\n")
    return count


def _lines(events: Iterable[Event | EventColumns]) -> Iterator[str]:
    for event in events:
        if isinstance(event, EventColumns):
            yield from _column_lines(event)
        else:
            yield _ENCODER.encode(event)


def _column_lines(events: EventColumns) -> Iterator[str]:
    """One JSON line per event: constants written into a template, columns encoded a column at a time."""
    head, columns = _template([*events.fields.items(), ("args", _OPEN)])
    args, arg_columns = _template(list(events.args.items()))
    columns += arg_columns
    if events.extra_args:  # a last column: the extra args of the events that have them, else nothing
        extra, extra_columns = _template(list(events.extra_args.items()))
        extras = [""] * events.count
        lead = "," if events.args else ""
        for row, text in zip(events.extra_rows, _filled(lead + extra[1:], extra_columns, len(events.extra_rows))):
            extras[row] = text
        columns.append(extras)
        args += "%s"
    yield from _filled(head + args[1:] + "}}", columns, events.count)


def _template(items: list[tuple[str, Any]]) -> tuple[str, list[list[str]]]:
    """``{"key":value,...`` (unclosed) with ``%s`` for every column; a key with ``_OPEN`` opens an object."""
    parts, columns = [], []
    for key, value in items:
        name = encode_basestring_ascii(key).replace("%", "%%")
        if value is _OPEN:
            parts.append(f"{name}:{{")
        elif isinstance(value, Column):
            parts.append(f"{name}:%s")
            columns.append(_encoded(value))
        else:
            parts.append(f"{name}:{_ENCODER.encode(value).replace('%', '%%')}")
    return "{" + ",".join(parts), columns


def _filled(template: str, columns: list[list[str]], count: int) -> Iterator[str]:
    if not columns:
        return itertools.repeat(template % (), count)
    return map(template.__mod__, zip(*columns))


def _encoded(values: Column) -> list[str]:
    """Each value as JSON, as ``json`` writes it; values of one type are encoded all at once."""
    types = set(map(type, values))
    if types == {str}:
        return list(map(encode_basestring_ascii, values))
    if types == {int}:
        return list(map(int.__repr__, values))
    if types == {float}:
        if not all(map(math.isfinite, values)):
            raise ValueError("Out of range float values are not JSON compliant")
        return list(map(float.__repr__, values))
    if types <= {bool, type(None)}:
        return list(map(_LITERALS.__getitem__, values))
    if types <= {list, type(None)}:  # shapes: few distinct ones, each encoded once
        known: dict[tuple[Any, ...] | None, str] = {None: "null"}
        keys = [None if value is None else tuple(value) for value in values]
        for key, value in zip(keys, values):
            if key not in known:
                known[key] = _ENCODER.encode(value)
        return list(map(known.__getitem__, keys))
    return list(map(_ENCODER.encode, values))


def _batches(lines: Iterable[str]) -> Iterator[tuple[str, ...]]:
    """Tuples of up to ``_BATCH`` lines (``itertools.batched``, which needs Python 3.12)."""
    iterator = iter(lines)
    while batch := tuple(itertools.islice(iterator, _BATCH)):
        yield batch
