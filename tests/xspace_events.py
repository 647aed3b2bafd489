"""A TF2/XLA profile's memory events read with protobuf alone: the tests' independent view of a profile.

Written from the XSpace proto (planes, lines, events, stats named in the plane's metadata), not from
memtrace's readers, so that what memtrace reads can be held to it.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

from memtrace.read._proto import xplane_pb2 as pb

KINDS = ("MemoryAllocation", "MemoryDeallocation")


def memory_events(path: Path, allocator: str | None = None) -> list[dict[str, Any]]:
    """Every MemoryAllocation/MemoryDeallocation event of the profile at ``path`` (gzip or not), of
    ``allocator`` when given, in time order (ties in file order). Each is its stats by name (a
    ``ref_value`` as the name it refers to), plus ``kind``, ``alloc`` and ``time_ps`` (line start + offset).
    """
    data = path.read_bytes()
    space = pb.XSpace()
    space.ParseFromString(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
    events = []
    for plane in space.planes:
        names = {key: meta.name for key, meta in plane.stat_metadata.items()}
        kinds = {key: meta.name for key, meta in plane.event_metadata.items() if meta.name in KINDS}
        for line in plane.lines:
            for event in line.events:
                if event.metadata_id not in kinds:
                    continue
                kind = kinds[event.metadata_id]
                stats: dict[str, Any] = {"kind": kind, "alloc": kind == "MemoryAllocation",
                                         "time_ps": line.timestamp_ns * 1000 + event.offset_ps}
                for stat in event.stats:
                    which = stat.WhichOneof("value")
                    value = getattr(stat, which) if which else 0
                    stats[names[stat.metadata_id]] = names.get(value, "") if which == "ref_value" else value
                if allocator is None or stats.get("allocator_name") == allocator:
                    events.append(stats)
    return sorted(events, key=lambda e: e["time_ps"])
