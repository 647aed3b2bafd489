"""What a BFC allocator's out-of-memory dump holds, as plain data.

TensorFlow's BFC allocator (and XLA's copy of it, which JAX runs) explains a failed allocation twice: as log lines (``DumpMemoryLog``:
the request, a summary per bin, every region with its chunks, in-use chunks by size, the pool
and its limit, the ``Stats:`` block) and, with ``TF_BFC_MEMORY_DUMP=PREFIX``, as a
``MemoryDump`` protobuf (bins, chunks, stats; no request, no limit). Both readers produce an
:class:`OomDump`; :mod:`memtrace.allocator.oom` draws the conclusions. Sizes are bytes. Where the log
writes a size only for people (``"14.00MiB"``), the value is the nearest byte count and the
matching ``*_exact`` flag is False.

XLA's newer allocator says more: which end of a partitioned pool the request came from ("from the
lower end"), each chunk's ``tag`` (``lower``, ``upper``, ``central_gap``) and ``allocation_annotation``
(the XLA executable that holds it), and an ``Allocator memory summary`` with the largest free chunk
the request's end could use (its own holes and the central gap, never the other end's holes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

# What a complete log dump has, named for people; a cut-off dump lists what it lacks.
SECTION_REQUEST = "the failed request (ran out of memory trying to allocate ...)"
SECTION_BINS = "the bin summary (Bin (256): ...)"
SECTION_CHUNKS = "the chunk map (InUse at ... / Free  at ...)"
SECTION_SUM = "the in-use total (Sum Total of in-use chunks)"
SECTION_STATS = "the Stats: block"

@dataclass(frozen=True)
class Chunk:
    """One chunk of a region: a block handed out (``in_use``) or a hole waiting in a bin."""

    address: int
    size_bytes: int
    in_use: bool
    requested_bytes: int | None = None  # what the client asked for; only a MemoryDump says
    bin: int | None = None
    op: str | None = None  # the op that allocated it, where the dump says (MemoryDump, MEM_DEBUG builds)
    tag: str | None = None  # "lower", "upper" or "central_gap": who may use it in a partitioned pool (XLA's dumps)
    annotation: str | None = None  # what held it, where the dump says (XLA: "xla.execute{executable=jit_step}")

    @property
    def end(self) -> int:
        return self.address + self.size_bytes


@dataclass(frozen=True)
class Region:
    """One block of memory the allocator took from the device, cut into chunks in address order."""

    size_bytes: int
    chunks: tuple[Chunk, ...]

    @property
    def address(self) -> int | None:
        return self.chunks[0].address if self.chunks else None


@dataclass(frozen=True)
class BinSummary:
    """One line of the bin summary: chunks of at least ``bin_bytes`` (and under twice that)."""

    bin_bytes: int
    chunks: int
    chunks_in_use: int
    allocated_bytes: int
    in_use_bytes: int
    requested_in_use_bytes: int | None  # client-requested bytes of the chunks in use
    exact: bool  # False where the log wrote the byte counts for people


@dataclass(frozen=True)
class Stats:
    """The allocator's own counters (the ``Stats:`` block, or ``MemoryDump.stats``)."""

    limit_bytes: int | None = None
    in_use_bytes: int | None = None
    peak_in_use_bytes: int | None = None
    num_allocs: int | None = None
    largest_alloc_bytes: int | None = None
    exact: bool = True


@dataclass(frozen=True)
class LiveTensor:
    """A line of ``Current usage from device``: bytes held by tensors an op allocated."""

    op: str
    bytes: int


@dataclass(frozen=True)
class CompileBudget:
    """XLA's rematerialization warning: the memory the compiler aimed at for a program, and what it reached.

    XLA compiles a jit program for the allocator's limit: (limit - parameters - outputs) x 95% is its
    target; "Can't reduce memory use below TARGET by rematerialization; only reduced to REACHED, down
    from ORIGINAL originally" says the program as compiled needs more than that.
    """

    target_bytes: int
    reached_bytes: int
    original_bytes: int


@dataclass(frozen=True)
class OomDump:
    """One out-of-memory event as the dump states it, nothing derived."""

    path: str
    source: str  # "log" or "memory-dump"
    line: int | None  # where the event starts in a log (1-based)
    allocator: str | None
    request_bytes: int | None = None  # rounded up to the allocator's 256-byte granularity
    request_exact: bool = True
    op: str | None = None
    shape: str | None = None
    dtype: str | None = None
    device: str | None = None
    regions: tuple[Region, ...] = ()
    regions_listed: bool = True  # False for old logs without "Next region of size": regions inferred
    bins: tuple[BinSummary, ...] = ()
    in_use_by_size: tuple[tuple[int, int], ...] = ()  # (chunk size, count) from "N Chunks of size S"
    sum_in_use_bytes: int | None = None  # "Sum Total of in-use chunks" (always written for people)
    pool_bytes_reported: int | None = None
    pool_exact: bool = True
    limit_bytes: int | None = None
    limit_exact: bool = True
    stats: Stats | None = None
    live_tensors: tuple[LiveTensor, ...] = ()
    live_tensors_remaining: tuple[int, int] | None = None  # ("Remaining N nodes with S") -> (N, bytes)
    missing: tuple[str, ...] = field(default=())  # sections a cut-off dump lacks
    # What XLA's newer allocator says (None where the dump does not):
    request_end: str | None = None  # "lower" or "upper": the end of the pool the request was for
    usable_largest_free_bytes: int | None = None  # "largest free chunk usable by <end> end" (its holes and the gap)
    usable_exact: bool = True
    central_gap_bytes: int | None = None  # "Spatial partitioning summary": the central gap
    growth_disabled: bool | None = None  # "growth disabled; fixed-size pool"
    runtime: str | None = None  # "XLA" where the log shows XLA's runtime (JAX) wrote it, else "TensorFlow"
    compile_budget: CompileBudget | None = None  # the rematerialization warning before the failure, where logged
    time_s: float | None = None  # when the log wrote it (its line's stamp, in seconds), where the line says
    # Whether the log's last uncaught error reports this failure (read/bfc_log.py); None where the log shows none
    ended_run: bool | None = None

    @property
    def chunks(self) -> tuple[Chunk, ...]:
        return tuple(c for r in self.regions for c in r.chunks)

    @property
    def partitioned(self) -> bool | None:
        """Whether the pool is spatially partitioned: True where the dump shows a central gap or the upper end,
        False where its runtime never partitions (TensorFlow) or its allocator predates partitioning (no tags, no
        end), None where XLA's dump cannot tell (a pool whose chunks are all the lower end's reads the same
        partitioned or not)."""
        chunks = self.chunks
        if self.central_gap_bytes is not None or any(c.tag in ("central_gap", "upper") for c in chunks):
            return True
        if self.runtime != "XLA" or (self.request_end is None and not any(c.tag for c in chunks)):
            return False
        return None
