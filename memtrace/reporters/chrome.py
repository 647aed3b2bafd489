"""Writing Trace Event Format JSON (the "JSON Object Format" of the Trace Event Format document).

Events are written one per line as they come, so the writer never holds the whole file.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import IO, Any


def write(events: Iterable[dict[str, Any]], other_data: dict[str, str], out: IO[str]) -> int:
    """Write ``{"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}``; returns the event count."""
    out.write('{"traceEvents":[\n')
    count = 0
    for event in events:
        if count:
            out.write(",\n")
        out.write(json.dumps(event, separators=(",", ":"), allow_nan=False))
        count += 1
    out.write('\n],\n"displayTimeUnit":"ms",\n"otherData":')
    out.write(json.dumps(other_data, separators=(",", ":")))
    out.write("}\n")
    return count
