"""Why did it run out of memory? The verdict on one BFC out-of-memory dump, in numbers and words.

A request fails when no free chunk is large enough and the pool cannot grow enough. The bytes
that could have served it are the free chunks in the pool plus the room the pool may still grow
into (limit minus pool size). If those add up to the request, memory was there but cut into
pieces too small: **fragmentation**. If not, the memory was simply **exhausted**, and the
question is who holds it. :func:`analyse` is a pure function of a parsed dump.

In XLA's partitioned pool a request may use only the free chunks of its own end and the central
gap: the verdict's numbers say which free chunks those were. The advice names the settings of the
runtime and device that wrote the dump (TF's GPU or CPU allocator, XLA's), never another's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace

from ..units import format_bytes, plural
from .bfc import bin_for_size
from .defaults import Settings, settings_for
from .dump import LiveTensor, OomDump, Region

FRAGMENTATION = "fragmentation"
EXHAUSTED = "exhausted"


@dataclass(frozen=True)
class SizeRow:
    """In-use chunks of one size."""

    size_bytes: int
    chunks: int

    @property
    def total_bytes(self) -> int:
        return self.size_bytes * self.chunks


@dataclass(frozen=True)
class LostChunk:
    """In-use chunks larger than the tensors in them: one chunk where the dump says its request
    (a MemoryDump, or a bin of the log holding one chunk in use), else a bin's in-use chunks together."""

    size_bytes: int  # the chunk's, or the bin's in-use chunks' together
    requested_bytes: int  # the tensor's (tensors') bytes in it
    chunks: int  # 1, or how many in-use chunks of one bin share the loss
    address: int | None  # of the one chunk; None for a bin
    op: str | None = None  # where the dump says
    exact: bool = True  # False where the log wrote the bin's bytes for people

    @property
    def lost_bytes(self) -> int:
        return self.size_bytes - self.requested_bytes


@dataclass(frozen=True)
class OomEvent:
    """One OOM event with the numbers that decide it, the verdict and what to do."""

    dump: OomDump
    request_bytes: int | None
    limit_bytes: int | None
    pool_bytes: int | None  # None where a cut-off dump shows neither its regions nor its pool size
    in_use_bytes: int
    requested_in_use_bytes: int | None  # what clients asked for of the bytes in use
    free_in_pool_bytes: int | None
    growth_bytes: int | None  # room the pool may still grow into: limit - pool (None: limit or pool unknown)
    free_bytes: int | None  # free in pool + growth
    largest_free_bytes: int | None  # None without the chunk map
    free_chunks: int | None
    verdict: str | None  # FRAGMENTATION, EXHAUSTED, or None when the request is unknown
    missing_bytes: int  # how many more free bytes the request needed (0 unless exhausted)
    by_size: tuple[SizeRow, ...]
    top_holders: tuple[LiveTensor, ...]  # live tensors by op, most bytes first
    explanation: tuple[str, ...]
    advice: tuple[str, ...]
    lost_chunks: tuple[LostChunk, ...] = ()  # the chunks that lose the most inside them, most first
    # A partitioned pool (XLA): the largest free chunk the request's end could use (its own holes, the central gap),
    # and the free bytes in the other end's holes, which it could not. None where the dump does not tell.
    usable_largest_free_bytes: int | None = None
    other_end_free_bytes: int | None = None
    by_annotation: tuple[LiveTensor, ...] = ()  # in-use bytes by allocation annotation (XLA: the executable), most first

    @property
    def internal_waste_bytes(self) -> int | None:
        if self.requested_in_use_bytes is None:
            return None
        return self.in_use_bytes - self.requested_in_use_bytes

    @property
    def lost_exceeds_missing(self) -> bool:
        """Exhausted, yet more bytes were lost inside in-use chunks (chunk minus tensor) than the
        request lacked: the memory was used by chunks, not by tensors."""
        lost = self.internal_waste_bytes
        return self.verdict == EXHAUSTED and lost is not None and lost > 0 and lost >= self.missing_bytes


def analyse(dump: OomDump, request_bytes: int | None = None, limit_bytes: int | None = None) -> OomEvent:
    """The verdict on ``dump``; ``request_bytes`` and ``limit_bytes`` fill in what it does not say."""
    request = dump.request_bytes if dump.request_bytes is not None else request_bytes
    limit = dump.limit_bytes if dump.limit_bytes is not None else limit_bytes
    chunks = dump.chunks
    pool = sum(r.size_bytes for r in dump.regions) if dump.regions else dump.pool_bytes_reported
    in_use = sum(c.size_bytes for c in chunks if c.in_use) if chunks else _reported_in_use(dump)
    free_sizes = [c.size_bytes for c in chunks if not c.in_use]
    free_in_pool = sum(free_sizes) if chunks else None if pool is None else max(0, pool - in_use)
    growth = max(0, limit - pool) if limit is not None and pool is not None else None
    free = None if free_in_pool is None else free_in_pool + (growth or 0)
    largest = max(free_sizes, default=0) if chunks else None
    verdict = None
    missing = 0
    if request is not None and free is not None:
        verdict = FRAGMENTATION if free >= request else EXHAUSTED
        missing = max(0, request - free)
    holders = _holders(dump.live_tensors)
    usable, other = _usable(dump)
    event = OomEvent(
        dump=dump, request_bytes=request, limit_bytes=limit, pool_bytes=pool, in_use_bytes=in_use,
        requested_in_use_bytes=_requested_in_use(dump), free_in_pool_bytes=free_in_pool, growth_bytes=growth,
        free_bytes=free, largest_free_bytes=largest, free_chunks=len(free_sizes) if chunks else None, verdict=verdict,
        missing_bytes=missing, by_size=_by_size(dump), top_holders=holders, explanation=(), advice=(),
        lost_chunks=lost_chunks(dump), usable_largest_free_bytes=usable, other_end_free_bytes=other,
        by_annotation=_holders(tuple(LiveTensor(c.annotation, c.size_bytes) for c in chunks
                                     if c.in_use and c.annotation)),
    )
    return _with_words(event)


def _usable(dump: OomDump) -> tuple[int | None, int | None]:
    """In a partitioned pool: (the largest free chunk of the request's end or the central gap, the free bytes in the
    other end's holes). From the chunk tags where the dump has them, else from its summary line; (None, None) where
    the pool is not partitioned or the dump does not say."""
    if dump.partitioned is False or dump.request_end is None:
        return None, None
    free = [c for c in dump.chunks if not c.in_use and c.tag is not None]
    if any(c.tag for c in dump.chunks):
        usable = max((c.size_bytes for c in free if c.tag in (dump.request_end, "central_gap")), default=0)
        return usable, sum(c.size_bytes for c in free if c.tag not in (dump.request_end, "central_gap"))
    return dump.usable_largest_free_bytes, None


def analyse_all(dumps: list[OomDump], request_bytes: int | None = None, limit_bytes: int | None = None) -> list[OomEvent]:
    """Every event of a file, in order."""
    return [analyse(d, request_bytes, limit_bytes) for d in dumps]


def largest_free_region(regions: tuple[Region, ...]) -> tuple[int, int] | None:
    """(region index, chunk index) of the largest free chunk, the first one on ties; None if none is free."""
    best: tuple[int, int, int] | None = None
    for r, region in enumerate(regions):
        for c, chunk in enumerate(region.chunks):
            if not chunk.in_use and (best is None or chunk.size_bytes > best[2]):
                best = (r, c, chunk.size_bytes)
    return None if best is None else (best[0], best[1])


LOST_CHUNKS_SHOWN = 5
MIN_LOST_BYTES = 256  # less is BFC's rounding of one request to 256 bytes, not a chunk too large


def lost_chunks(dump: OomDump) -> tuple[LostChunk, ...]:
    """The in-use chunks that lose the most bytes inside them (chunk minus request), most first.

    A MemoryDump says each chunk's request. A log says only each bin's client-requested bytes in
    use: a bin with one chunk in use names that chunk; a bin with several, its chunks together.
    Losses under 256 bytes (rounding) are left out.
    """
    in_use = [c for c in dump.chunks if c.in_use]
    found: list[LostChunk] = []
    if in_use and all(c.requested_bytes is not None for c in in_use):
        found = [LostChunk(c.size_bytes, c.requested_bytes or 0, 1, c.address, c.op) for c in in_use]
    else:
        for b in dump.bins:
            if b.requested_in_use_bytes is None or not b.chunks_in_use:
                continue
            members = [c for c in in_use if bin_for_size(c.size_bytes) == bin_for_size(b.bin_bytes)]
            if len(members) == 1 == b.chunks_in_use:
                (one,) = members
                found.append(LostChunk(one.size_bytes, min(one.size_bytes, b.requested_in_use_bytes), 1, one.address,
                                       one.op, b.exact))
            else:
                found.append(LostChunk(b.in_use_bytes, b.requested_in_use_bytes, b.chunks_in_use, None, None, b.exact))
    found = [c for c in found if c.lost_bytes >= MIN_LOST_BYTES]
    return tuple(sorted(found, key=lambda c: (-c.lost_bytes, c.address or 0))[:LOST_CHUNKS_SHOWN])


def describe_lost(c: LostChunk) -> str:
    """``a 29 MiB chunk at 0x7f55062ff040 holds 16 MiB (13 MiB lost)``, or a bin's chunks together."""
    about = "" if c.exact else "about "
    if c.chunks == 1:
        where = f" at {c.address:#x}" if c.address is not None else ""
        by = f" of op {c.op}" if c.op else ""
        return (f"a {format_bytes(c.size_bytes)} chunk{where} holds {about}{format_bytes(c.requested_bytes)}{by} "
                f"({about}{format_bytes(c.lost_bytes)} lost)")
    return (f"{c.chunks} chunks of one bin ({format_bytes(c.size_bytes)} together) hold {about}"
            f"{format_bytes(c.requested_bytes)} ({about}{format_bytes(c.lost_bytes)} lost)")


def _reported_in_use(dump: OomDump) -> int:
    if dump.stats is not None and dump.stats.in_use_bytes is not None:
        return dump.stats.in_use_bytes
    return dump.sum_in_use_bytes or 0


def _requested_in_use(dump: OomDump) -> int | None:
    """Client-requested bytes of the chunks in use: from the chunks where they say, else the bins."""
    chunks = [c for c in dump.chunks if c.in_use]
    if chunks and all(c.requested_bytes is not None for c in chunks):
        return sum(c.requested_bytes or 0 for c in chunks)
    if dump.bins and all(b.requested_in_use_bytes is not None for b in dump.bins):
        return sum(b.requested_in_use_bytes or 0 for b in dump.bins)
    return None


def _by_size(dump: OomDump) -> tuple[SizeRow, ...]:
    counts = Counter(c.size_bytes for c in dump.chunks if c.in_use)
    if not counts:
        counts = Counter(dict(dump.in_use_by_size))
    return tuple(SizeRow(size, n) for size, n in sorted(counts.items(), key=lambda kv: (-kv[0] * kv[1], kv[0])))


def _holders(live: tuple[LiveTensor, ...]) -> tuple[LiveTensor, ...]:
    totals: dict[str, int] = {}
    for tensor in live:
        totals[tensor.op] = totals.get(tensor.op, 0) + tensor.bytes
    return tuple(LiveTensor(op, n) for op, n in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0])))


# TensorFlow refuses report_tensor_allocations_upon_oom in eager mode ("isn't available when running
# in Eager mode"), which is where Keras runs: a profile of a step that fits works in both.
_WHO_HOLDS = ("To see which ops hold the memory: in eager mode and under Keras, profile a step at a size that "
              "fits (tf.profiler.experimental.start/stop, with TF_CPU_ALLOCATOR_USE_BFC=true on a CPU) and read "
              "it with memtrace peak, whose allocated and requested columns show each op's chunks and tensors; "
              "in a TF1 Session, RunOptions(report_tensor_allocations_upon_oom=True) lists them in this dump.")
_WHO_HOLDS_XLA = ("To see which buffers hold the memory: profile the program with jax.profiler from before its first "
                  "allocation (memtrace run SCRIPT does) at a limit that fits, and replay it with memtrace fit, or "
                  "with this dump: memtrace oom LOG --trace PROFILE.")


def _other_pool(s: Settings, fragmented: bool) -> str | None:
    """The advice to leave BFC for the device's other allocator, in the runtime's own words (None: there is none)."""
    benefit = ("so that free memory need not be contiguous inside one BFC region" if fragmented else
               "has no BFC chunks to lose bytes in")
    if s.device == "host":
        return None
    if s.runtime == "XLA":
        return (f"{'Set ' if fragmented else ''}XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async (CUDA's own pool) {benefit} (the "
                "log's hint, TF_GPU_ALLOCATOR, is TensorFlow's setting: JAX does not read it).")
    if s.device == "CPU":
        return ("On a CPU, BFC is there only because TF_CPU_ALLOCATOR_USE_BFC=true is set: without it TF's default CPU "
                "allocator takes memory tensor by tensor, "
                + ("with no BFC region for free memory to be cut up in" if fragmented else "with no BFC chunks to lose "
                   "bytes in") + " (it writes no memory events for a profile, though).")
    return f"{'Set ' if fragmented else ''}TF_GPU_ALLOCATOR=cuda_malloc_async (CUDA's own pool) {benefit}."


def _xla_words(e: OomEvent, s: Settings, fb: Callable[[int | None], str]) -> tuple[list[str], list[str]]:
    """What an XLA dump adds: the partitioned pool's usable chunks, the compiler's budget, the order of frees, and the
    settings JAX reads (the limit, preallocation, partitioning), with growth never offered alongside partitioning."""
    words: list[str] = []
    advice: list[str] = []
    d = e.dump
    end = d.request_end or "lower"
    if e.usable_largest_free_bytes is not None and d.partitioned:
        other = (f"; the {fb(e.other_end_free_bytes)} free in the other end's holes were not for it"
                 if e.other_end_free_bytes else "")
        words.append(f"XLA's pool is spatially partitioned: a request from the {end} end may use only that end's own "
                     f"holes and the central gap (the largest of them: {fb(e.usable_largest_free_bytes)}){other}.")
    elif d.partitioned is None and d.request_end is not None:
        words.append(f"The request came from the {end} end of XLA's pool, which JAX partitions when it preallocates "
                     "(a central gap between a lower and an upper end); every chunk here is the lower end's, so the "
                     "dump reads the same partitioned or not.")
    budget = d.compile_budget
    if budget is not None:
        words.append(f"XLA compiled the program for this limit: its rematerialization aimed at "
                     f"{fb(budget.target_bytes)} ((limit - parameters - outputs) x 95%) and reached only "
                     f"{fb(budget.reached_bytes)}, down from {fb(budget.original_bytes)}: as compiled for this limit "
                     "the program needs more than XLA's budget for it.")
    words.append("XLA frees a buffer when the GPU stream is done with it, so near the limit the same program may fit "
                 "in one run and not in the next: leave a margin.")
    advice.append(f"Raise the limit: {s.limit}. XLA compiles a jit program for the limit it runs under, so record "
                  "the run there (memtrace run --limit SIZE SCRIPT) to see what that program needs.")
    if d.partitioned is not False:
        advice.append(f"Without spatial partitioning ({s.partitioning_off}) the pool is one classic BFC region, which "
                      "may need more or less: replay the run's profile to measure it (memtrace oom LOG --trace "
                      "PROFILE). Growth (XLA_PYTHON_CLIENT_PREALLOCATE=false) turns partitioning off too.")
    return words, advice


def _with_words(e: OomEvent) -> OomEvent:
    """The event with its plain-words explanation and advice filled in."""
    words: list[str] = []
    advice: list[str] = []

    def fb(value: int | None) -> str:
        return "an unknown number of bytes" if value is None else format_bytes(value)

    s = settings_for(e.dump.allocator or "", e.dump.runtime or "TensorFlow")
    xla = s.runtime == "XLA" and s.device == "GPU"
    what = f"{fb(e.request_bytes)}" if e.request_bytes is not None else "an unknown number of bytes"
    if e.dump.op:
        what += f" for op {e.dump.op}"
    limit = f"its limit of {fb(e.limit_bytes)}" if e.limit_bytes is not None else "an unknown limit"
    words.append(f"The allocator {e.dump.allocator or '(unnamed)'} was asked for {what}, with "
                 f"{fb(e.in_use_bytes)} in use under {limit}.")
    growth = f" plus {fb(e.growth_bytes)} the pool could still grow into" if e.growth_bytes else ""
    if e.free_bytes is not None:
        chunks = "" if e.free_chunks is None else f" in {plural(e.free_chunks, 'free chunk')}"
        largest = "" if e.largest_free_bytes is None else f"; the largest free chunk is {fb(e.largest_free_bytes)}"
        words.append(f"Free were {fb(e.free_in_pool_bytes)}{chunks} of the pool{growth}: {fb(e.free_bytes)} in all"
                     f"{largest}.")
    if e.verdict == FRAGMENTATION:
        words.append("Enough bytes were free in total, but no free chunk (nor the room left to grow the pool) "
                     "was large enough: the free memory is fragmented into pieces smaller than the request.")
        if e.growth_bytes is not None and e.request_bytes is not None and e.growth_bytes >= e.request_bytes:
            words.append("The room left under the limit alone would have held the request, so the device itself "
                         "refused to give more: other processes or allocators hold the rest of its memory.")
        other = _other_pool(s, fragmented=True)
        if other:
            advice.append(other)
        advice.append("Allocate the large, long-lived tensors (weights, optimizer slots, big buffers) first, "
                      "before the many short-lived ones that cut the pool into pieces.")
        advice.append("Keep tensor sizes steady between steps (fixed batch and sequence lengths, padding to "
                      "buckets), so freed chunks fit the next requests.")
    elif e.verdict == EXHAUSTED and e.lost_exceeds_missing:
        lost = e.internal_waste_bytes or 0
        words.append(f"Not enough bytes were free: the request needed {fb(e.missing_bytes)} more than all free "
                     f"memory together. Yet {fb(lost)} of the {fb(e.in_use_bytes)} in use is lost inside chunks, "
                     f"more than the {fb(e.missing_bytes)} missing: chunks larger than the tensors in them. BFC "
                     "rounds every request up to 256 bytes and hands out a free chunk of up to twice the request "
                     "whole, without splitting it; the bytes beyond the tensor stay taken until it is freed.")
        if e.lost_chunks:
            words.append("Lost most: " + "; ".join(describe_lost(c) for c in e.lost_chunks[:3]) + ".")
        if e.top_holders:
            top = ", ".join(f"{t.op} ({fb(t.bytes)})" for t in e.top_holders[:3])
            words.append(f"The live tensors held most by ops: {top}.")
        advice.append("Keep array sizes steady (a fixed batch size, padded sequence lengths) and create the large "
                      "long-lived arrays first, so that a freed chunk is taken again by an array of its size rather "
                      "than handed whole to one much smaller." if xla else
                      "Keep tensor sizes steady (a fixed batch size, drop_remainder=True in tf.data, padded "
                      "sequence lengths) and create the large long-lived tensors first, so that a freed chunk "
                      "is taken again by a tensor of its size rather than handed whole to one much smaller.")
        other = _other_pool(s, fragmented=False)
        if other:
            advice.append(other)
        advice.append(f"Or free at least {fb(e.missing_bytes)}: a smaller batch, mixed precision "
                      "(float16/bfloat16 activations), or recomputing activations (gradient checkpointing"
                      + ("; jax.checkpoint in JAX" if xla else "") + ").")
        advice.append(_WHO_HOLDS_XLA if xla else _WHO_HOLDS)
    elif e.verdict == EXHAUSTED:
        words.append(f"Not enough bytes were free: the request needed {fb(e.missing_bytes)} more than all free "
                     "memory together. This is not fragmentation; the memory is simply used.")
        if e.top_holders:
            top = ", ".join(f"{t.op} ({fb(t.bytes)})" for t in e.top_holders[:3])
            words.append(f"The live tensors held most by ops: {top}.")
        advice.append(f"Free at least {fb(e.missing_bytes)}: a smaller batch, shorter sequences, mixed precision "
                      "(float16/bfloat16 activations), or recomputing activations (gradient checkpointing"
                      + ("; jax.checkpoint in JAX" if xla else "") + ").")
        if s.runtime == "TensorFlow" and s.device == "CPU":
            advice.append(f"Or raise the limit: {s.limit} (TF's CPU BFC allocator takes it in MiB).")
        if e.top_holders:
            advice.append(f"Look first at {e.top_holders[0].op}, which holds the most live tensor bytes.")
        else:
            advice.append(_WHO_HOLDS_XLA if xla else _WHO_HOLDS)
    elif e.request_bytes is None:
        never = " (a MemoryDump never does)" if e.dump.source == "memory-dump" else ""
        words.append(f"The dump does not say how many bytes were requested{never}, so there is no verdict; give "
                     "the request with --request SIZE (and the limit with --limit SIZE).")
    else:
        words.append("The dump does not show how much was free (neither its chunk map nor its pool size), so "
                     "there is no verdict.")
    if xla and e.verdict is not None:
        more_words, more_advice = _xla_words(e, s, fb)
        words.extend(more_words)
        advice.extend(more_advice)
    if e.by_annotation:
        top = ", ".join(f"{t.op} ({fb(t.bytes)})" for t in e.by_annotation[:3])
        words.append(f"In use by what held it (the dump's allocation annotations): {top}.")
    if e.dump.missing:
        words.append("The dump is cut off: it lacks " + ", ".join(e.dump.missing) + "; the numbers above come "
                     "from what is there.")
    return replace(e, explanation=tuple(words), advice=tuple(advice))
