"""Reading BFC out-of-memory dumps from a log or a console capture.

The BFC allocator writes its dump through TensorFlow's logging, so every line may carry a prefix
(absl ``W0000 00:00:1795366355.165581    5507 bfc_allocator.cc:502]``, the older glog
``2017-11-06 08:55:24.919606: W tensorflow/.../bfc_allocator.cc:273]``, a Python ``logging``
or Jupyter decoration, or none), lines of other threads and programs come in between, and a
capture may use CRLF. So each line is searched for what it says, wherever it says it. An event
starts at ``ran out of memory trying to allocate`` (not the ``The caller indicates that this is
not a failure`` warning, which is no OOM) and lasts until the next one. What TensorFlow writes
for people (``64.00MiB``, ``HumanReadableNumBytes``) is read back to the nearest byte and
flagged as inexact.

XLA's runtime (JAX) writes the same dump from its copy of the allocator, with more in it: the end
of a partitioned pool the request was for, each chunk's ``tag`` and ``allocation_annotation``, the
largest free chunk that end could use, the central gap, and, around the dump, its own lines (the
pool it made, exactly; the compiler's memory budget): they are read into the same
:class:`OomDump`, and where any of them shows XLA wrote the log, the dump says so (``runtime``).

Which event ended the run: where the log's last uncaught error (the exception line Python prints
last, ``...ResourceExhaustedError: ...``, ``jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: ...``)
comes after every dump, it is that of the event whose request it names (the tensor's shape, else
the size), or of the last event before it; each event of the log says whether it is the one
(``ended_run``), or None where the log shows no such error. TensorFlow's CPU allocator waits up to
10 s for memory before it gives up and dumps, and threads still waiting then dump after the first
failure: the error that ends the run may name the first dump of several.
"""

from __future__ import annotations

import codecs
import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from ..allocator.bfc import MIN_ALLOCATION_BYTES, rounded_bytes
from ..allocator.dump import (
    SECTION_BINS,
    SECTION_CHUNKS,
    SECTION_REQUEST,
    SECTION_STATS,
    SECTION_SUM,
    BinSummary,
    Chunk,
    CompileBudget,
    LiveTensor,
    OomDump,
    Region,
    Stats,
)
from ..errors import TraceFormatError

_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "PiB": 1 << 50, "EiB": 1 << 60}
_SIZE = r"(-?[0-9]+(?:\.[0-9]+)?\s*(?:B|KiB|MiB|GiB|TiB|PiB|EiB)|[0-9]+)"
# No chunk follows (the C++ kInvalidChunkHandle printed as size_t).
_DTYPE_BYTES = {
    "float": 4, "double": 8, "half": 2, "bfloat16": 2, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2,
    "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "bool": 1, "complex64": 8, "complex128": 16,
}

_RAN_OUT = re.compile(
    r"(?:Allocator \((?P<alloc>[^)]*)\) )?ran out of memory trying to allocate (?P<human>" + _SIZE + r")"
    r"(?:\s*\(rounded to (?P<rounded>[0-9]+)\))?(?P<rest>.*)$", re.IGNORECASE)
_NOT_A_FAILURE = re.compile(r"not a failure|freed_by_count", re.IGNORECASE)
# TF 1.0 wrote the request again after the dump: "Ran out of memory trying to allocate X.  See logs ..."
_TRAILER = re.compile(r"See logs for memory state", re.IGNORECASE)
_REQUESTED_BY = re.compile(r"requested by op (?P<op>\S+)")
_DUMP_FOR = re.compile(r"BFCAllocator dump for (?P<alloc>\S+)")
_BIN = re.compile(
    r"Bin \((?P<bin>[0-9]+)\):\s*Total Chunks: (?P<total>[0-9]+), Chunks in use: (?P<used>[0-9]+)\.?\s+"
    r"(?P<alloc>" + _SIZE + r") allocated for chunks\.\s*(?:" + _SIZE + r" client-requested for chunks\.\s*)?"
    r"(?P<inuse>" + _SIZE + r") in use in bin\.\s*(?P<req>" + _SIZE + r") client-requested in use in bin")
_REGION = re.compile(r"Next region of size (?P<size>[0-9]+)")
_CHUNK = re.compile(
    r"\b(?P<kind>InUse|Free|Chunk)\s+at\s+(?:0x)?(?P<addr>[0-9a-fA-F]+)\s+of size\s+(?P<size>[0-9]+)(?P<rest>.*)$")
_BY_OP = re.compile(r"\bby op (?P<op>\S+)")
_SUMMARY_ROW = re.compile(r"\b(?P<count>[0-9]+) Chunks of size (?P<size>[0-9]+) totalling")
_SUM_TOTAL = re.compile(r"Sum Total of in-use chunks:\s*(?P<size>" + _SIZE + ")")
_POOL = re.compile(
    r"(?:Total (?:bytes|size) in pool|total_region_allocated_bytes_):\s*(?P<pool>" + _SIZE + r")"
    r"(?:\s+memory_limit_:\s*(?P<limit>" + _SIZE + r"))?"
    # the newest form: "Allocator memory summary: rounded request ..., pool size X, pool limit Y"
    r"|pool size (?P<pool2>" + _SIZE + r"), pool limit (?P<limit2>" + _SIZE + r")")
_STATS = re.compile(r"\bStats:\s*$")
_STAT_ROW = re.compile(r"^\s*(?P<key>Limit|InUse|MaxInUse|NumAllocs|MaxAllocSize|Reserved|PeakReserved|"
                       r"LargestFreeBlock|Limit_in_bytes):\s+(?P<value>" + _SIZE + r")\s*$")
_OOM_ERROR = re.compile(
    r"OOM when allocating tensor (?:of shape \[(?P<shape0>[^\]]*)\]|with shape\s*\[(?P<shape>[^\]]*)\])"
    r"(?: and type (?P<dtype>\w+))?(?: on (?P<device>\S+))?(?: by allocator (?P<alloc>\S+))?")
# The exception a program ended with, as Python prints it last: its class, then its message.
_FINAL_ERROR = re.compile(r"^\s*(?:[\w.]+\.)?(?:ResourceExhaustedError|JaxRuntimeError|XlaRuntimeError)\b:?(?P<rest>.*)$")
_ALLOCATE = re.compile(r"allocate (?P<human>" + _SIZE + r")")
# The time a log line was written, in seconds (absl's "W0000 00:00:1795366430.854300", glog's
# "W1122 16:56:18.831355", the older "2017-11-06 08:55:24.919606: W"): hours, minutes, seconds.
_STAMP = re.compile(r"^(?:[IWEF]\d{4} |\d{4}-\d\d-\d\d )(?P<h>\d+):(?P<m>\d\d):(?P<s>\d+(?:\.\d+)?)")
_NODE = re.compile(r"\[\[(?:\{\{node (?P<node>[^}]+)\}\}|Node: (?P<node_old>[^ =]+) =)")
_USAGE = re.compile(r"Current usage from device: (?P<device>[^,]+), allocator: (?P<alloc>\S+)")
_USAGE_ROW = re.compile(r"^\s+(?P<size>" + _SIZE + r") from (?P<op>\S.*?)\s*$")
_USAGE_REST = re.compile(r"^\s*Remaining (?P<nodes>[0-9]+) nodes with (?P<size>" + _SIZE + r")\s*$")
# What XLA's newer allocator adds (a partitioned pool's ends, tags, annotations, the usable largest chunk).
_FROM_END = re.compile(r"\bfrom the (?P<end>lower|upper) end\b")
_CHUNK_TAG = re.compile(r"\btag (?P<tag>lower|upper|central_gap)(?: allocation_annotation (?P<note>.*?))?(?: next \d+)?\s*$")
_USABLE = re.compile(r"largest free chunk usable by (?:lower|upper) end (?P<size>" + _SIZE + ")")
_GAP = re.compile(r"Spatial partitioning summary for (?:lower|upper) end: central gap (?P<size>" + _SIZE + ")")
_GROWTH_HINT = re.compile(r"region growth hint:.*\((?P<how>growth (?:disabled|enabled))")
# XLA's own lines around the dump: the pool it made (exact bytes), and the compiler's budget for a program.
_XLA_POOL = re.compile(r"XLA backend (?:allocating|will use up to) (?:\S+ \()?(?P<bytes>[0-9]+) bytes\)? on device "
                       r"(?P<device>[0-9]+)")
_REMAT = re.compile(r"Can't reduce memory use below \S+ \((?P<target>[0-9]+) bytes\) by rematerialization; only "
                    r"reduced to \S+ \((?P<reached>[0-9]+) bytes\), down from \S+ \((?P<original>[0-9]+) bytes\)")
_XLA_SIGN = re.compile(r"XLA backend (?:allocating|will use)|se_gpu_pjrt_client|pjrt_c_api|PjRt|xla\.execute\{|"
                       r"Out of memory while trying to allocate \S+ with allocator|tag (?:central_gap|upper)\b|"
                       r"Spatial partitioning summary|xla_gpu_host_bfc")


# A part (in lower case) of every line a pattern above matches: a line, or a whole piece of a log,
# with none is passed over at once (most of a console's output).
_WORDS = ("ran out of memory", "bfcallocator dump", "inuse", "free", "chunk", "next region", "bin (", "sum total",
          "in pool", "total_region_allocated_bytes_", "pool size", "stats:", "oom when allocating", "[[",
          "current usage from device", "xla backend", "pjrt", "xla.execute", "out of memory while", "rematerialization",
          "spatial partitioning", "growth hint",
          "exhaustederror", "runtimeerror")
MAX_LINE_CHARS = 1 << 16  # of a line, what is kept (BFC's dump lines are a few hundred characters)
_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")  # where str.splitlines cuts


def parse_logged_size(text: str) -> tuple[int, bool]:
    """``"64.00MiB"`` -> (67108864, False); ``"67108864"`` -> (67108864, True); ``"0B"`` is exact."""
    text = text.strip()
    if text.isdigit():
        return int(text), True
    number, unit = re.match(r"(-?[0-9.]+)\s*(\w+)", text).groups()  # type: ignore[union-attr]
    value = float(number) * _UNITS[unit]
    return round(value), unit == "B" or value == 0


def looks_like_log(text: str) -> bool:
    """Whether the text holds anything of a BFC dump (so a log, not some other file): any line the
    reader takes a dump's part from, the size summary and the stats block included (a log cut to
    those alone is read, and said to be cut off)."""
    return any(pattern.search(text) for pattern in (_RAN_OUT, _DUMP_FOR, _CHUNK, _BIN, _REGION, _SUMMARY_ROW,
                                                     _SUM_TOTAL, _STATS, _OOM_ERROR, _USAGE))


@dataclass
class _Event:
    """A dump being read: every piece as it comes, frozen into an OomDump at the end."""

    line: int
    allocator: str | None
    request_human: str | None = None
    request_rounded: int | None = None
    op: str | None = None
    shape: str | None = None
    dtype: str | None = None
    device: str | None = None
    regions: list[tuple[int | None, list[Chunk]]] = field(default_factory=list)
    bins: list[BinSummary] = field(default_factory=list)
    by_size: list[tuple[int, int]] = field(default_factory=list)
    sum_in_use: int | None = None
    pool: tuple[int, bool] | None = None
    limit: tuple[int, bool] | None = None
    stats: dict[str, tuple[int, bool]] = field(default_factory=dict)
    saw_stats: bool = False
    live: list[LiveTensor] = field(default_factory=list)
    live_rest: tuple[int, int] | None = None
    live_done: bool = False
    error_seen: bool = False
    request_end: str | None = None
    usable: tuple[int, bool] | None = None
    central_gap: int | None = None
    growth_disabled: bool | None = None
    compile_budget: CompileBudget | None = None
    time_s: float | None = None  # when its "ran out of memory" line was written, where the line says


@dataclass
class _FinalError:
    """The last uncaught error of the log: its line, and the shape or size it names (from its own line or the next
    out-of-memory message after it)."""

    line: int
    shape: str | None = None
    human: str | None = None
    events_before: int = 0  # how many events had begun before it


def line_batches(pieces: Iterable[bytes], encoding: str = "utf-8") -> Iterator[tuple[list[str], bool]]:
    """The lines of text arriving in pieces of bytes, as ``str.splitlines`` cuts them, a batch per
    piece with whether it may hold a dump line (a word of one in any case), in bounded memory: a line
    is kept to its first MAX_LINE_CHARS characters (no dump line is that long; the rest of a longer
    one is read past, never held). Bytes that are not ``encoding`` become U+FFFD, and NUL characters
    are dropped (consoles and ``copytruncate`` leave them; no dump line has one)."""
    decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
    carry = ""  # the line still open: its first MAX_LINE_CHARS characters, and a lone "\r" it may end in
    utf8 = codecs.lookup(encoding).name in ("utf-8", "utf-8-sig")
    for piece in _then_none(iter(pieces)):
        if utf8 and piece:
            piece = piece.replace(b"\0", b"")  # (in UTF-8 a NUL byte is only ever the NUL character)
        text = decoder.decode(piece or b"", final=piece is None).replace("\0", "")
        if not text and piece is not None:
            continue
        block = carry + text
        cut = block.splitlines()
        carry = ""
        if piece is not None and cut and (block[-1] == "\r" or block[-1] not in _BREAKS):
            # open: more may come ("\r" may be the first half of "\r\n")
            carry = cut.pop()[:MAX_LINE_CHARS] + ("\r" if block[-1] == "\r" else "")
        if cut:
            if max(map(len, cut)) > MAX_LINE_CHARS:
                cut = [line[:MAX_LINE_CHARS] for line in cut]
            lowered = block.lower()
            yield cut, any(word in lowered for word in _WORDS)


def lines(pieces: Iterable[bytes], encoding: str = "utf-8") -> Iterator[str]:
    """:func:`line_batches`' lines, one by one."""
    for batch, _ in line_batches(pieces, encoding):
        yield from batch


def _then_none(pieces: Iterator[bytes]) -> Iterator[bytes | None]:
    yield from pieces
    yield None


def read(path: str, text: str) -> list[OomDump]:
    """Every OOM event in the log text, in order; a TraceFormatError when there is none."""
    return read_lines(path, iter([(text.splitlines(), True)]))


def _numbered(batches: Iterator[tuple[list[str], bool]], idle: Callable[[], bool]) -> Iterator[tuple[int, str]]:
    """The lines that may matter, numbered from 1: a batch without a dump word is passed over whole
    while ``idle()`` (no list of rows is being read), and so is a line without one."""
    number = 0
    for batch, worded in batches:
        if not worded and idle():
            number += len(batch)
            continue
        for raw in batch:
            number += 1
            if idle() and not any(word in raw.lower() for word in _WORDS):
                continue
            yield number, raw


def read_lines(path: str, batches: Iterator[tuple[list[str], bool]]) -> list[OomDump]:
    """Every OOM event in the log's lines (batches of :func:`line_batches`), in order; a
    TraceFormatError when there is none."""
    events: list[_Event] = []
    current: _Event | None = None
    final: _FinalError | None = None
    in_stats = False
    usage: _Event | None = None  # the event whose live-tensor list is being read
    xla = _XlaLines()
    # (the closure reads the state as it is at each line, on purpose)
    for number, raw in _numbered(batches, lambda: not in_stats and usage is None):  # noqa: B023
        line = raw.rstrip("\r")
        xla.read(line)
        if in_stats:
            row = _STAT_ROW.search(line)
            if row and current is not None:
                current.stats[row.group("key")] = parse_logged_size(row.group("value"))
                continue
            in_stats = False
        if usage is not None:
            row = _USAGE_ROW.match(line)
            if row:
                usage.live.append(LiveTensor(row.group("op"), parse_logged_size(row.group("size"))[0]))
                continue
            rest = _USAGE_REST.match(line)
            if rest:
                usage.live_rest = (int(rest.group("nodes")), parse_logged_size(rest.group("size"))[0])
                continue
            if line.strip() == "" and not usage.live:
                continue
            usage.live_done = True
            usage = None
        ran_out = _RAN_OUT.search(line)
        if ran_out:
            if _NOT_A_FAILURE.search(ran_out.group("rest")):
                continue  # a retry that later succeeded, no dump follows
            if _TRAILER.search(ran_out.group("rest")) and current is not None and (current.bins or current.regions):
                current.request_human = current.request_human or ran_out.group("human")
                continue
            current = _Event(number, ran_out.group("alloc"), request_human=ran_out.group("human"),
                             compile_budget=xla.budget)
            stamp = _STAMP.match(line)
            if stamp:
                current.time_s = int(stamp.group("h")) * 3600 + int(stamp.group("m")) * 60 + float(stamp.group("s"))
            if ran_out.group("rounded"):
                current.request_rounded = int(ran_out.group("rounded"))
            end = _FROM_END.search(ran_out.group("rest"))
            if end:
                current.request_end = end.group("end")
            by = _REQUESTED_BY.search(ran_out.group("rest"))
            if by:
                current.op = by.group("op")
            events.append(current)
            continue
        raised = _FINAL_ERROR.match(line)
        if raised:
            final = _FinalError(number, events_before=len(events))
            _name_request(final, raised.group("rest"))
            continue
        if final is not None and final.shape is None and final.human is None and final.events_before == len(events):
            _name_request(final, line)  # the message goes on below the exception's line
        dump_for = _DUMP_FOR.search(line)
        if dump_for:
            if current is None or current.bins or current.regions:  # a dump without its "ran out" line
                current = _Event(number, dump_for.group("alloc"))
                events.append(current)
            continue
        if current is None:
            if not _starts_headless(line):
                continue
            current = _Event(number, None)  # a paste that begins inside a dump
            events.append(current)
        chunk = _CHUNK.search(line)
        if chunk:
            if not current.regions or current.regions[-1][0] is not None and _region_full(current.regions[-1]):
                current.regions.append((None, []))
            by = _BY_OP.search(chunk.group("rest"))
            tagged = _CHUNK_TAG.search(chunk.group("rest"))
            current.regions[-1][1].append(Chunk(
                int(chunk.group("addr"), 16), int(chunk.group("size")), chunk.group("kind") != "Free",
                op=by.group("op") if by else None, tag=tagged.group("tag") if tagged else None,
                annotation=tagged.group("note") if tagged else None))
            continue
        region = _REGION.search(line)
        if region:
            current.regions.append((int(region.group("size")), []))
            continue
        found = _BIN.search(line)
        if found:
            alloc, a_exact = parse_logged_size(found.group("alloc"))
            in_use, u_exact = parse_logged_size(found.group("inuse"))
            req, r_exact = parse_logged_size(found.group("req"))
            current.bins.append(BinSummary(int(found.group("bin")), int(found.group("total")), int(found.group("used")),
                                           alloc, in_use, req, a_exact and u_exact and r_exact))
            continue
        row = _SUMMARY_ROW.search(line)
        if row:
            current.by_size.append((int(row.group("size")), int(row.group("count"))))
            continue
        total = _SUM_TOTAL.search(line)
        if total:
            current.sum_in_use = parse_logged_size(total.group("size"))[0]
            continue
        usable = _USABLE.search(line)
        if usable:
            current.usable = parse_logged_size(usable.group("size"))
        pool = _POOL.search(line)
        if pool:
            current.pool = parse_logged_size(pool.group("pool") or pool.group("pool2"))
            if pool.group("limit") or pool.group("limit2"):
                current.limit = parse_logged_size(pool.group("limit") or pool.group("limit2"))
            continue
        if _STATS.search(line):
            current.saw_stats = in_stats = True
            continue
        gap = _GAP.search(line)
        if gap:
            current.central_gap = parse_logged_size(gap.group("size"))[0]
            continue
        hint = _GROWTH_HINT.search(line)
        if hint:
            current.growth_disabled = hint.group("how") == "growth disabled"
            continue
        error = _OOM_ERROR.search(line)
        if error:
            _note_error(events, error)
            continue
        node = _NODE.search(line)
        if node:
            target = _latest(events, None)
            if target is not None and target.error_seen and target.op is None:
                target.op = node.group("node") or node.group("node_old")
            continue
        found_usage = _USAGE.search(line)
        if found_usage:
            target = _latest(events, found_usage.group("alloc"))
            if target is not None and not target.live and not target.live_done:
                usage = target
                target.device = target.device or found_usage.group("device")
    if not events:
        raise TraceFormatError(path, "no out-of-memory dump in it (no 'ran out of memory trying to allocate' line "
                               "of the BFC allocator, nor a 'BFCAllocator dump')")
    ended = _ended_run(events, final)
    return [_freeze(path, e, xla, None if ended is None else e is ended) for e in events]


def _name_request(final: _FinalError, text: str) -> None:
    error = _OOM_ERROR.search(text)
    if error:
        final.shape = error.group("shape") if error.group("shape") is not None else error.group("shape0")
        return
    size = _ALLOCATE.search(text)
    if size:
        final.human = size.group("human")


def _ended_run(events: list[_Event], final: _FinalError | None) -> _Event | None:
    """The event whose failure the log's last uncaught error reports; None where no such error follows every
    event (the program caught it, or the log does not go on to the end)."""
    if final is None or final.events_before != len(events) or not events:
        return None
    if final.shape is not None:
        named = [e for e in events if e.shape is not None and e.shape.replace(" ", "") == final.shape.replace(" ", "")]
    elif final.human is not None:
        named = [e for e in events if e.request_human is not None and
                 parse_logged_size(e.request_human)[0] == parse_logged_size(final.human)[0]]
    else:
        named = []
    return named[-1] if named else events[-1]



class _XlaLines:
    """What XLA's runtime writes around its dumps: whether it wrote the log at all, the pools it made (exact bytes,
    by device), and the compiler's last memory budget warning (which the next dump's program was compiled for)."""

    def __init__(self) -> None:
        self.seen = False
        self.pools: dict[str, int] = {}  # allocator name (GPU_n_bfc) -> its limit in bytes
        self.budget: CompileBudget | None = None

    def read(self, line: str) -> None:
        if _XLA_SIGN.search(line):
            self.seen = True
        pool = _XLA_POOL.search(line)
        if pool:
            self.pools[f"GPU_{pool.group('device')}_bfc"] = int(pool.group("bytes"))
        remat = _REMAT.search(line)
        if remat:
            self.budget = CompileBudget(int(remat.group("target")), int(remat.group("reached")),
                                        int(remat.group("original")))


def _starts_headless(line: str) -> bool:
    """Whether a line belongs to a dump's body, so a paste that starts with it starts a dump."""
    return any(p.search(line) for p in (_BIN, _CHUNK, _REGION, _SUMMARY_ROW, _SUM_TOTAL))


def _region_full(region: tuple[int | None, list[Chunk]]) -> bool:
    size, chunks = region
    return size is not None and sum(c.size_bytes for c in chunks) >= size


def _latest(events: list[_Event], allocator: str | None) -> _Event | None:
    for event in reversed(events):
        if allocator is None or event.allocator in (None, allocator):
            return event
    return None


def _note_error(events: list[_Event], error: re.Match[str]) -> None:
    """The ResourceExhaustedError text: the shape and type of the tensor (the first mention wins)."""
    target = _latest(events, error.group("alloc"))
    if target is None or target.error_seen:
        return
    target.error_seen = True
    target.shape = error.group("shape") if error.group("shape") is not None else error.group("shape0")
    target.dtype = error.group("dtype")
    target.device = error.group("device")


def _request(event: _Event) -> tuple[int | None, bool]:
    """The rounded request: as logged, else from the tensor's shape and type, else from the size for people."""
    if event.request_rounded is not None:
        return event.request_rounded, True
    if event.shape is not None and event.dtype in _DTYPE_BYTES:
        try:
            dims = [int(d) for d in event.shape.replace(" ", "").split(",") if d]
        except ValueError:
            dims = []
        if dims or event.shape.strip() == "":
            nbytes = math.prod(dims) * _DTYPE_BYTES[event.dtype]
            return max(MIN_ALLOCATION_BYTES, rounded_bytes(nbytes)), True
    if event.request_human is not None:
        value, exact = parse_logged_size(event.request_human)
        return rounded_bytes(value), exact
    return None, False


def _freeze(path: str, event: _Event, xla: _XlaLines, ended_run: bool | None = None) -> OomDump:
    listed = any(size is not None for size, _ in event.regions)
    if listed:
        regions = tuple(Region(size if size is not None else sum(c.size_bytes for c in chunks), tuple(chunks))
                        for size, chunks in event.regions)
    else:  # old logs list in-use chunks, then free ones, without regions: contiguous runs are regions
        regions = infer_regions([c for _, chunks in event.regions for c in chunks])
    missing = []
    if event.request_human is None:
        missing.append(SECTION_REQUEST)
    if not event.bins:
        missing.append(SECTION_BINS)
    if not any(chunks for _, chunks in event.regions):
        missing.append(SECTION_CHUNKS)
    if event.sum_in_use is None:
        missing.append(SECTION_SUM)
    if not event.saw_stats:
        missing.append(SECTION_STATS)
    limit, limit_exact = _limit(event)
    if not limit_exact and event.allocator in xla.pools:  # XLA's own line says the pool in bytes
        limit, limit_exact = xla.pools[event.allocator], True
    request, request_exact = _request(event)
    runtime = "XLA" if xla.seen or any(c.annotation and "xla." in c.annotation for _, cs in event.regions for c in cs) \
        else "TensorFlow"
    return OomDump(
        path=path, source="log", line=event.line, allocator=event.allocator,
        request_bytes=request, request_exact=request_exact,
        op=event.op, shape=event.shape, dtype=event.dtype, device=event.device,
        regions=regions, regions_listed=listed, bins=tuple(event.bins), in_use_by_size=tuple(event.by_size),
        sum_in_use_bytes=event.sum_in_use,
        pool_bytes_reported=event.pool[0] if event.pool else None, pool_exact=event.pool[1] if event.pool else True,
        limit_bytes=limit, limit_exact=limit_exact, stats=_stats(event) if event.saw_stats else None,
        live_tensors=tuple(event.live), live_tensors_remaining=event.live_rest, missing=tuple(missing),
        request_end=event.request_end, usable_largest_free_bytes=event.usable[0] if event.usable else None,
        usable_exact=event.usable[1] if event.usable else True, central_gap_bytes=event.central_gap,
        growth_disabled=event.growth_disabled, runtime=runtime,
        compile_budget=event.compile_budget if runtime == "XLA" else None,
        time_s=event.time_s, ended_run=ended_run,
    )


def _limit(event: _Event) -> tuple[int | None, bool]:
    """The memory limit: an exact count wins over one written for people, wherever it is."""
    candidates = [c for c in (event.limit, event.stats.get("Limit")) if c is not None]
    exact = [c for c in candidates if c[1]]
    chosen = exact[0] if exact else candidates[0] if candidates else None
    return (chosen[0], chosen[1]) if chosen else (None, True)


def _stats(event: _Event) -> Stats:
    values = event.stats

    def get(key: str) -> int | None:
        return values[key][0] if key in values else None

    return Stats(limit_bytes=get("Limit"), in_use_bytes=get("InUse"), peak_in_use_bytes=get("MaxInUse"),
                 num_allocs=get("NumAllocs"), largest_alloc_bytes=get("MaxAllocSize"),
                 exact=all(exact for _, exact in values.values()))


def infer_regions(chunks: list[Chunk]) -> tuple[Region, ...]:
    """Chunks sorted by address, a new region wherever one does not end where the next begins."""
    regions: list[list[Chunk]] = []
    for chunk in sorted(chunks, key=lambda c: c.address):
        if regions and regions[-1][-1].end == chunk.address:
            regions[-1].append(chunk)
        else:
            regions.append([chunk])
    return tuple(Region(sum(c.size_bytes for c in r), tuple(r)) for r in regions)
