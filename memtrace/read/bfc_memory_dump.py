"""Reading the ``MemoryDump`` protobuf the BFC allocator writes with ``TF_BFC_MEMORY_DUMP=PREFIX``.

TensorFlow writes one file, ``PREFIX_ALLOCATOR.MICROS``, each time an allocation fails (so a
retried allocation leaves several). It holds the bins, every chunk with its address, size,
client-requested size and bin, and the allocator's stats, but neither the request that failed
nor the memory limit: those come from the log, or from the user (``--request``, ``--limit``).
Chunks are recorded region by region in address order, so a region ends wherever the next
chunk does not start where the last one ended.
"""

from __future__ import annotations

from google.protobuf.message import DecodeError

from ..allocator.bfc import MIN_ALLOCATION_BYTES, bin_for_size
from ..allocator.dump import BinSummary, Chunk, OomDump, Stats
from ..errors import TraceFormatError
from .bfc_log import infer_regions


def read(path: str, data: bytes) -> OomDump:
    """The one event a MemoryDump describes; a TraceFormatError when the bytes are not one."""
    from ._proto import bfc_memory_map_pb2

    dump = bfc_memory_map_pb2.MemoryDump()
    try:
        dump.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError):
        raise TraceFormatError(path, "neither a log with a BFC dump nor a MemoryDump protobuf") from None
    if not dump.chunk and not dump.bin_summary:
        raise TraceFormatError(path, "neither a log with a BFC dump nor a MemoryDump protobuf (no chunks, no bins)")
    # Only free chunks sit in a bin (a chunk in use says -1); the bin summary counts every chunk by its size.
    chunks = [Chunk(c.address, c.size, c.in_use, c.requested_size if c.in_use else None, bin_for_size(c.size),
                    c.op_name or None) for c in dump.chunk]
    requested_by_bin: dict[int, int] = {}
    for c in chunks:
        if c.in_use and c.bin is not None and c.requested_bytes is not None:
            requested_by_bin[c.bin] = requested_by_bin.get(c.bin, 0) + c.requested_bytes
    bins = tuple(
        BinSummary(MIN_ALLOCATION_BYTES << b.bin, b.total_chunks_in_bin, b.total_chunks_in_use, b.total_bytes_in_bin,
                   b.total_bytes_in_use, requested_by_bin.get(b.bin, 0), True)
        for b in dump.bin_summary)
    stats = None
    if dump.HasField("stats"):
        s = dump.stats
        stats = Stats(in_use_bytes=s.bytes_in_use, peak_in_use_bytes=s.peak_bytes_in_use, num_allocs=s.num_allocs,
                      largest_alloc_bytes=s.largest_alloc_size)
    return OomDump(path=path, source="memory-dump", line=None, allocator=dump.allocator_name or None,
                   request_bytes=None, regions=infer_regions(chunks), regions_listed=False, bins=bins,
                   stats=stats, limit_bytes=None)
