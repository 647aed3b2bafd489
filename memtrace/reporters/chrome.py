"""Writing Trace Event Format JSON (the "JSON Object Format" of the Trace Event Format document).

Events are written one per line as they come, so the writer never holds the whole file.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator
from typing import IO, Any

_BATCH = 4096  # events joined into one write


def write(events: Iterable[dict[str, Any]], other_data: dict[str, str], out: IO[str]) -> int:
    """Write ``{"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}``; returns the event count."""
    encode = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode  # one encoder for every event
    out.write('{"traceEvents":[\n')
    count = 0
    for batch in _batches(events):
        out.write((",\n" if count else "") + ",\n".join(map(encode, batch)))
        count += len(batch)
    out.write('\n],\n"displayTimeUnit":"ms",\n"otherData":')
    out.write(json.dumps(other_data, separators=(",", ":")))
    out.write("}\n")
    return count


def _batches(events: Iterable[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], ...]]:
    """Tuples of up to ``_BATCH`` events (``itertools.batched``, which needs Python 3.12)."""
    iterator = iter(events)
    while batch := tuple(itertools.islice(iterator, _BATCH)):
        yield batch
