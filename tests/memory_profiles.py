"""Hand-made TF2 profiles (XSpace) of one allocator's memory events, for tests that need a profile of their own."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from memtrace.read._proto import xplane_pb2 as pb

# (alloc?, requested, chunk, addr, bytes in use after, fragmentation, op)
Event = tuple[bool, int, int, int, int, float, str]


def profile(events: Sequence[Event], allocator: str = "bfc_cpu_allocator_for_gpu",
            available: Callable[[int], int] | None = None) -> pb.XSpace:
    """An XSpace with TF's memory events of ``allocator``; ``available(bytes_in_use)`` gives each event's
    ``bytes_available`` stat (the limit the events show is it plus the bytes in use), where given."""
    space = pb.XSpace(hostnames=["testhost"])
    host = space.planes.add(id=1, name="/host:CPU")
    names = ["allocator_name", "bytes_allocated", "allocation_bytes", "requested_bytes", "addr", "fragmentation",
             "tf_op", allocator, "bytes_available"]
    for number, name in enumerate(names, 1):
        host.stat_metadata[number].CopyFrom(pb.XStatMetadata(id=number, name=name))
    for key, name in ((1, "MemoryAllocation"), (2, "MemoryDeallocation")):
        host.event_metadata[key].CopyFrom(pb.XEventMetadata(id=key, name=name))
    line = host.lines.add(id=7, name="tf_Compute", timestamp_ns=1000)
    for time, (alloc, requested, chunk, addr, in_use, fragmentation, op) in enumerate(events, 1):
        event = line.events.add(metadata_id=1 if alloc else 2, offset_ps=time * 1_000_000)
        event.stats.add(metadata_id=1, ref_value=8)
        for number, value in ((2, in_use), (3, chunk), (4, requested), (5, addr)):
            event.stats.add(metadata_id=number, int64_value=value)
        event.stats.add(metadata_id=6, double_value=fragmentation)
        if available is not None:
            event.stats.add(metadata_id=9, int64_value=available(in_use))
        if op:
            event.stats.add(metadata_id=7, str_value=op)
    return space


def write_profile(path: Path, events: Sequence[Event], allocator: str = "bfc_cpu_allocator_for_gpu",
                  available: Callable[[int], int] | None = None) -> Path:
    """:func:`profile` written to ``path`` (named ``*.xplane.pb`` for the readers); returns ``path``."""
    path.write_bytes(profile(events, allocator, available).SerializeToString())
    return path
