"""A fast reader for StepStats / RunMetadata in protobuf binary form, straight into columns.

upb parses a binary trace in C in a blink, but walking the parsed messages from Python costs a
few microseconds a node, ten times the parse. This reader decodes the wire format itself with
numpy instead: all messages of one type at once, one field of each per step (tag and value are
varints, decoded eight bytes at a time), so Python does a constant amount of work per field
*number*, not per field. Only the lists of nodes inside each ``DeviceStepStats``, long and few,
are walked in Python, and strings are sliced out one by one. The message is read from a stream
(a file, or gzip decompressing) in one forward pass, and its nodes are decoded a block of about
``BLOCK_BYTES`` at a time, so memory does not grow with the file (only the model does).

protobuf stays the reference: anything this reader does not recognise (a known field with an
unexpected wire type, a field given twice, groups, bytes that are not UTF-8 in a string, a
truncated message) raises :class:`~memtrace.read.detect.Unrecognised` and the caller lets upb
read the file. RunMetadata fields other than ``step_stats`` (the graphs) are handed to upb as
they are.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable
from types import TracebackType
from typing import IO, TYPE_CHECKING, final

import numpy as np

from ..trace.data import IntArray
from ..units import format_bytes
from . import files
from .builder import NodeBlock, TraceBuilder, micros_to_ns
from .detect import TooLarge, Unrecognised
from .wire import PAD, Padded, as_int32, as_int64, as_unsigned32, scan, strings, varint

if TYPE_CHECKING:
    from .jobs import InOrder

BLOCK_BYTES = 8 << 20  # nodes decoded together (see _Block)
READ_BYTES = 8 << 20  # read from the stream at a time (see _Window)
_HEADER = 24  # bytes that hold any field's tag and length
# A length-delimited field claims its length before its bytes: no claim is believed beyond these,
# so a few bytes claiming gigabytes are refused in one line, never allocated. A real node is a
# few KB (its name, label and outputs), a real device or thread name well under a KB.
MAX_NODE_BYTES = 64 << 20
MAX_NAME_BYTES = 4 << 20

# Field kinds.
VARINT, STRING, MESSAGE, PACKED = range(4)

# message type -> field number -> (name, kind); MESSAGE fields name their child type.
_STEP_STATS, _DEVICE, _NODE, _MEMORY, _RECORD, _OUTPUT, _TENSOR, _SHAPE, _DIM, _ALLOCATION, _MEMORY_STATS, \
    _THREAD_NAME = range(12)
_ALLOCATION_FIELDS = {1: ("requested_bytes", VARINT), 2: ("allocated_bytes", VARINT), 3: ("allocator_name", STRING),
                      4: ("allocation_id", VARINT), 5: ("has_single_reference", VARINT), 6: ("ptr", VARINT)}
_SCHEMA: dict[int, dict[int, tuple[str, int]]] = {
    _NODE: {1: ("node_name", STRING), 2: ("all_start_micros", VARINT), 3: ("op_start_rel_micros", VARINT),
            4: ("op_end_rel_micros", VARINT), 5: ("all_end_rel_micros", VARINT), 6: ("memory", MESSAGE),
            7: ("output", MESSAGE), 8: ("timeline_label", STRING), 9: ("scheduled_micros", VARINT),
            10: ("thread_id", VARINT), 11: ("referenced_tensor", MESSAGE), 12: ("memory_stats", MESSAGE),
            13: ("all_start_nanos", VARINT), 14: ("op_start_rel_nanos", VARINT), 15: ("op_end_rel_nanos", VARINT),
            16: ("all_end_rel_nanos", VARINT), 17: ("scheduled_nanos", VARINT)},
    _MEMORY: {1: ("allocator_name", STRING), 2: ("total_bytes", VARINT), 3: ("peak_bytes", VARINT),
              4: ("live_bytes", VARINT), 5: ("allocator_bytes_in_use", VARINT), 6: ("allocation_records", MESSAGE)},
    _RECORD: {1: ("alloc_micros", VARINT), 2: ("alloc_bytes", VARINT)},
    _OUTPUT: {1: ("slot", VARINT), 3: ("tensor_description", MESSAGE)},
    _TENSOR: {1: ("dtype", VARINT), 2: ("shape", MESSAGE), 4: ("allocation_description", MESSAGE)},
    _SHAPE: {2: ("dim", MESSAGE), 3: ("unknown_rank", VARINT)},
    _DIM: {1: ("size", VARINT), 2: ("name", STRING)},
    _ALLOCATION: _ALLOCATION_FIELDS,
    _MEMORY_STATS: {1: ("temp_memory_size", VARINT), 2: ("device_temp_memory_size", VARINT),
                    3: ("persistent_memory_size", VARINT), 4: ("device_persistent_memory_size", VARINT),
                    5: ("persistent_tensor_alloc_ids", PACKED), 6: ("device_persistent_tensor_alloc_ids", PACKED)},
    _THREAD_NAME: {1: ("key", VARINT), 2: ("value", STRING)},
}
_REPEATED = {(_NODE, 6), (_NODE, 7), (_NODE, 11), (_MEMORY, 6), (_SHAPE, 2), (_MEMORY_STATS, 5), (_MEMORY_STATS, 6)}


_MAX_NUMBER = 32  # field numbers at or above this are unknown to every message we decode
_EXPECTED_WIRE = np.full((12, _MAX_NUMBER + 1), -1, dtype=np.int64)  # -1: unknown field, any wire type
for _kind, _fields in _SCHEMA.items():
    for _number, (_, _field_kind) in _fields.items():
        _EXPECTED_WIRE[_kind, _number] = {VARINT: 0, STRING: 2, MESSAGE: 2, PACKED: -1}[_field_kind]


class _Messages:
    """Messages of one type: their spans, and their fields once scanned."""

    def __init__(self, padded: Padded, kind: int, starts: IntArray, ends: IntArray, owner: IntArray):
        self.kind = kind
        self.count = len(starts)
        self.owner = owner  # per message: the index of the message holding it
        fields = self.fields = scan(padded, starts, ends)
        number = np.minimum(fields.number, _MAX_NUMBER)
        expected = _EXPECTED_WIRE[kind, number]
        if ((expected >= 0) & (expected != fields.wire)).any():
            raise Unrecognised("a known field with an unexpected wire type")
        self.by_number = np.argsort(number.astype(np.int8), kind="stable")  # a radix sort
        self.bounds = np.concatenate([[0], np.cumsum(np.bincount(number, minlength=_MAX_NUMBER + 1))])

    def rows(self, number: int, ordered: bool = True) -> IntArray:
        """Rows of one field, by message (and in field order within one) unless ``ordered`` is False."""
        rows = self.by_number[self.bounds[number]:self.bounds[number + 1]]
        if not len(rows):
            return rows
        messages = self.fields.message[rows]
        if (self.kind, number) not in _REPEATED and np.bincount(messages, minlength=self.count).max() > 1:
            raise Unrecognised("a singular field given twice")
        if ordered:
            rows = rows[np.argsort(messages, kind="stable")]
        return rows

    def column(self, number: int, convert=as_int64) -> IntArray:  # type: ignore[no-untyped-def]
        rows = self.rows(number, ordered=False)
        values = np.zeros(self.count, dtype=np.int64)
        values[self.fields.message[rows]] = convert(self.fields.value[rows])
        return values

    def strings(self, data: bytes, number: int) -> list[str]:
        rows = self.rows(number)
        texts = strings(data, self.fields, rows)
        if len(rows) == self.count:
            return texts  # one per message, in message order
        values = [""] * self.count
        for message, text in zip(self.fields.message[rows].tolist(), texts):
            values[message] = text
        return values

    def children(self, padded: Padded, number: int, kind: int) -> _Messages:
        rows = self.rows(number)
        return _Messages(padded, kind, self.fields.start[rows], self.fields.end[rows], self.fields.message[rows])


def _packed(data: bytes, messages: _Messages, number: int) -> tuple[IntArray, IntArray]:
    """A repeated int64 field, packed or not: per-message counts and the values in order."""
    fields = messages.fields
    rows = messages.rows(number)
    owners: list[int] = []
    values: list[int] = []
    for row in rows.tolist():
        if fields.wire[row] == 0:
            owners.append(int(fields.message[row]))
            values.append(int(fields.value[row]))
        elif fields.wire[row] == 2:
            pos, end = int(fields.start[row]), int(fields.end[row])
            while pos < end:
                value, pos = varint(data, pos)
                owners.append(int(fields.message[row]))
                values.append(value)
            if pos != end:
                raise Unrecognised("a packed field that overruns")
        else:
            raise Unrecognised("a known field with an unexpected wire type")
    counts = np.bincount(np.array(owners, dtype=np.int64), minlength=messages.count)
    return counts, np.array(values, dtype=np.uint64).view(np.int64)


# -- the stream, a stretch at a time --------------------------------------------------------------


class _Window:
    """The message read from a stream on demand: its bytes ``[base, base + len(buf))``.

    Offsets everywhere are offsets in the whole message. The window only moves forward: each
    fill drops what lies before the earliest byte still wanted, so it holds a block or two of
    the message whatever its size (one field larger than that is held whole while it is read).
    Reading a stream rather than mapping the file also means that a file cut short while it is
    read is a truncated message like any other, not a crash.
    """

    def __init__(self, stream: IO[bytes], head: bytes = b""):
        self.stream = stream
        self.buf = head
        self.base = 0
        self.eof = False
        self.safe = len(head) - _HEADER  # every field header starting at or before this is in the window

    @property
    def end(self) -> int:
        return self.base + len(self.buf)

    def fill(self, upto: int, keep: int) -> None:
        """Read on until the window reaches ``upto`` (or the stream ends); bytes before ``keep`` may go."""
        end = self.end
        if upto <= end or self.eof:
            return
        drop = max(0, keep - self.base)
        parts = [self.buf[drop:]]
        while end < upto:
            data = self.stream.read(READ_BYTES)  # (never what a field claims: only what is there)
            if not data:
                self.eof = True
                break
            parts.append(data)
            end += len(data)
        self.buf = b"".join(parts)
        self.base += drop
        self.safe = (1 << 62) if self.eof else end - _HEADER  # at the end, reading past it is an IndexError

    def bytes(self, lo: int, hi: int, keep: int, pad: int = 0) -> bytes:
        """``[lo, hi)`` of the message and ``pad`` zero bytes; Unrecognised where the message ends first."""
        self.fill(hi, keep)
        if hi > self.end:
            raise Unrecognised("a truncated message")
        if not pad:
            return self.buf[lo - self.base:hi - self.base]
        with memoryview(self.buf) as view:
            return b"".join((view[lo - self.base:hi - self.base], bytes(pad)))

    def field(self, pos: int, keep: int) -> tuple[int, int, int, int, int]:
        """The field starting at ``pos``: (number, wire, value, payload start, field end)."""
        self.fill(pos + _HEADER, keep)
        base = self.base
        number, wire, value, payload, end = _field_at(self.buf, pos - base)
        return number, wire, value, payload + base, end + base

    def at_end(self, pos: int, keep: int) -> bool:
        """Whether the message ends at ``pos`` (for the top level, which runs to the stream's end)."""
        self.fill(pos + 1, keep)
        return pos >= self.end


# -- the levels walked in Python ------------------------------------------------------------------


def _field_at(data: bytes, pos: int) -> tuple[int, int, int, int, int]:
    """The field starting at ``pos``: (number, wire, value, payload start, field end).

    The value is a varint's value or a payload's length (0 for fixed-width fields); for a
    varint, the payload is where the value starts.
    """
    tag, pos = varint(data, pos)
    number, wire = tag >> 3, tag & 7
    if number == 0:
        raise Unrecognised("field number 0")
    if wire == 0:
        value, end = varint(data, pos)
        return number, wire, value, pos, end
    if wire == 2:
        length, payload = varint(data, pos)
        return number, wire, length, payload, payload + length
    if wire == 1:
        return number, wire, 0, pos, pos + 8
    if wire == 5:
        return number, wire, 0, pos, pos + 4
    raise Unrecognised("a group or an invalid wire type")


def _device_fields(window: _Window, start: int, end: int, ordinal: int, block: _Block) -> str:
    """One DeviceStepStats: its nodes and thread names go to ``block``; returns its name."""
    name = None
    block.open_device(ordinal)
    starts, ends = block.starts, block.ends
    limit = starts[0] + BLOCK_BYTES if starts else -1  # a node ending beyond it starts a new block
    buf, base, safe = window.buf, window.base, window.safe
    pos = start
    while pos < end:
        if pos > safe:
            window.fill(pos + _HEADER, block.keep(pos))
            buf, base, safe = window.buf, window.base, window.safe
        i = pos - base
        if buf[i] == 0x12:  # node_stats, the common case first
            length = buf[i + 1]
            if length < 0x80:
                pos += 2
            elif buf[i + 2] < 0x80:
                length = (length & 0x7F) | buf[i + 2] << 7
                pos += 3
            else:
                length, i = varint(buf, i + 1)
                pos = base + i
            if length > MAX_NODE_BYTES:
                raise _too_large("a node_stats", length, MAX_NODE_BYTES)
            stop = pos + length
            if stop > limit:
                if starts:
                    block.flush()
                    buf, base, safe = window.buf, window.base, window.safe
                limit = pos + BLOCK_BYTES
            starts.append(pos)
            ends.append(stop)
            pos = stop
            continue
        number, wire, _, payload, next_field = window.field(pos, block.keep(pos))
        if wire == 2 and next_field - payload > (MAX_NAME_BYTES if number == 1 else MAX_NODE_BYTES):
            raise _too_large({1: "a device name", 2: "a node_stats", 3: "a thread_names entry"}.get(number, "a field"),
                             next_field - payload, MAX_NAME_BYTES if number == 1 else MAX_NODE_BYTES)
        if number == 1:
            if wire != 2 or name is not None:
                raise Unrecognised("a device name that is not a string, or two of them")
            try:
                name = window.bytes(payload, next_field, block.keep(pos)).decode()
            except UnicodeDecodeError:
                raise Unrecognised("a device name that is not UTF-8") from None
        elif number == 2:
            if wire != 2:
                raise Unrecognised("node_stats that is not a message")
            starts.append(payload)
            ends.append(next_field)
        elif number == 3:
            if wire != 2:
                raise Unrecognised("thread_names that is not a message")
            block.thread_spans.append((payload, next_field))
        buf, base, safe = window.buf, window.base, window.safe
        pos = next_field
    if pos != end:
        raise Unrecognised("a truncated DeviceStepStats")
    return name or ""


def _too_large(what: str, claimed: int, limit: int) -> TooLarge:
    return TooLarge(f"{what} of {format_bytes(claimed)}, over the {format_bytes(limit)} memtrace takes for one "
                    "(damaged, or not a trace?)")


def looks_like_device(name: str) -> bool:
    """The reference reader's test that a StepStats reading found device names (so it was one)."""
    return name == "" or name.startswith("/")


# -- the whole message ----------------------------------------------------------------------------


def read(stream: IO[bytes], builder: TraceBuilder, on_block: Callable[[int], None] | None = None,
         head: bytes = b"", jobs: int = 1) -> tuple[str, bytes | None]:
    """Decode a binary StepStats or RunMetadata from ``stream`` into ``builder``.

    ``head`` is the message's first bytes, already read from the stream. Returns the message
    name and, for a RunMetadata, its other top-level fields as bytes (a RunMetadata without
    ``step_stats``) for upb to parse the graphs from. ``on_block(offset)`` is called after each
    block of nodes, with the offset in the message read up to. With ``jobs`` over 1, that many
    processes decode the blocks after the first (see :mod:`memtrace.jobs`).
    """
    window = _Window(stream, head)
    with _Block(window, builder, on_block, jobs) as block:
        try:
            message, rest = _read_message(window, block, builder)
        except IndexError:
            raise Unrecognised("a truncated message") from None
        block.flush()
        block.finish()
    return message, rest


def _read_message(window: _Window, block: _Block, builder: TraceBuilder) -> tuple[str, bytes | None]:
    """Which message this is (as protobuf's reading would decide), and its devices, in one pass."""
    if window.at_end(0, 0):
        raise Unrecognised("no data")
    first = window.field(0, 0)
    first_device = _first_device_name(window, first) if first[1] == 2 else None
    if first_device is None:
        raise Unrecognised("not a StepStats or RunMetadata this reader takes")
    # (a RunMetadata's step_stats read as a DeviceStepStats has a name starting with its own tag)
    step_stats = looks_like_device(first_device)
    rest: list[bytes] = []
    step_stats_seen = False
    pos = 0
    while not window.at_end(pos, block.keep(pos)):
        number, wire, _, payload, end = window.field(pos, block.keep(pos))
        if wire != 2:
            raise Unrecognised("not a StepStats or RunMetadata this reader takes")
        if step_stats:
            if number != 1:
                raise Unrecognised("a StepStats field this reader does not take")
            _read_device(window, payload, end, block, builder)
        elif number == 1:
            if step_stats_seen:
                raise Unrecognised("a RunMetadata with step_stats twice")
            step_stats_seen = True
            inner = payload
            while inner < end:
                number, wire, _, device_start, device_end = window.field(inner, block.keep(inner))
                if number != 1 or wire != 2 or device_end > end:
                    raise Unrecognised("a StepStats field this reader does not take")
                _read_device(window, device_start, device_end, block, builder)
                inner = device_end
        else:
            if end - pos > files.REFERENCE_MAX_BYTES:  # protobuf parses these, and holds them whole
                raise _too_large("a RunMetadata graph", end - pos, files.REFERENCE_MAX_BYTES)
            rest.append(window.bytes(pos, end, block.keep(pos)))
        pos = end
    if step_stats:
        return "StepStats", None
    if not step_stats_seen:
        raise Unrecognised("a RunMetadata without step_stats")
    return "RunMetadata", b"".join(rest)


def _read_device(window: _Window, start: int, end: int, block: _Block, builder: TraceBuilder) -> None:
    ordinal = builder.add_device_stats()
    name = _device_fields(window, start, end, ordinal, block)
    if not looks_like_device(name):
        raise Unrecognised("a device name protobuf's reading would not take for one")
    builder.set_device_name(ordinal, name)


_INVALID = "\0invalid"  # what a StepStats reading of the first field cannot even parse
_PREFIX = 4096  # bytes of a long string checked as UTF-8 before the whole of it is read


def _first_device_name(window: _Window, field: tuple[int, int, int, int, int]) -> str | None:
    """What a StepStats reading would take as the first device's name.

    ``_INVALID`` where that reading fails (bad wire data, a name that is not UTF-8), None where
    this reader cannot tell what protobuf would make of it. The field stays in the window, to
    be read again; a RunMetadata's shows itself in its first few bytes.
    """
    _, _, _, start, end = field
    try:  # the name usually comes first: a device's settles it (a second name makes the reading step aside)
        number, wire, length, payload, name_end = window.field(start, 0) if start < end else (0, 0, 0, 0, 0)
        if number == 1 and wire == 2 and name_end <= min(end, payload + MAX_NAME_BYTES) and \
                window.buf[start - window.base] == 0x0A:
            if not length:
                return ""
            if window.bytes(payload, payload + 1, 0) == b"/":
                return window.bytes(payload, name_end, 0).decode()
    except (Unrecognised, UnicodeDecodeError, IndexError):
        pass
    name = ""
    pos = start
    try:  # else the last name wins, as in protobuf's reading; the first that cannot be one settles it
        while pos < end:
            number, wire, _, payload, field_end = window.field(pos, 0)
            if field_end > end:
                return _INVALID
            if number == 1:
                if wire != 2:
                    return None
                start_of_name = window.bytes(payload, min(field_end, payload + _PREFIX), 0)
                codecs.getincrementaldecoder("utf-8")().decode(start_of_name)  # not UTF-8: settled, early
                if field_end - payload > MAX_NAME_BYTES:
                    return None  # not read here: protobuf's reading (of at most 256 MiB) decides
                name = window.bytes(payload, field_end, 0).decode()
            pos = field_end
    except (Unrecognised, UnicodeDecodeError, IndexError):
        return _INVALID
    return name


@final
class _Block:
    """Nodes (and thread names) of at most about ``BLOCK_BYTES`` of the data, decoded together.

    Each block is copied out of the window (padded, so that every byte can start an eight-byte
    word) and decoded at once; so the temporaries stay a few times the block, whatever the
    message's size. With ``jobs`` over 1, blocks after the first are decoded in that many
    processes while the walk goes on, and handed to the builder in order.
    """

    def __init__(self, window: _Window, builder: TraceBuilder, on_block: Callable[[int], None] | None = None,
                 jobs: int = 1):
        self.window, self.builder, self.on_block = window, builder, on_block
        self.starts: list[int] = []  # node spans
        self.ends: list[int] = []
        self.devices: list[tuple[int, int]] = []  # (first node, device ordinal) of each device in the block
        self.thread_spans: list[tuple[int, int]] = []
        self.jobs = jobs
        self.flushed = 0
        self.pool: InOrder[NodeBlock | None] | None = None

    def open_device(self, ordinal: int) -> None:
        self.devices.append((len(self.starts), ordinal))

    def keep(self, pos: int) -> int:
        """The earliest byte still wanted: the block's first, or ``pos`` when the block is empty."""
        if self.starts:
            pos = min(pos, self.starts[0])
        if self.thread_spans:
            pos = min(pos, self.thread_spans[0][0])
        return pos

    def flush(self) -> None:
        starts, ends, threads = self.starts, self.ends, self.thread_spans
        if not starts and not threads:
            return
        node_spans = np.array([starts, ends], dtype=np.int64).reshape(2, -1)
        thread_spans = np.array(threads, dtype=np.int64).reshape(-1, 2).T
        lo = int(min(node_spans[0].min(initial=1 << 62), thread_spans[0].min(initial=1 << 62)))
        hi = int(max(node_spans[1].max(initial=0), thread_spans[1].max(initial=0)))
        firsts = [first for first, _ in self.devices]
        counts = [after - first for first, after in zip(firsts, [*firsts[1:], len(starts)])]
        devices = np.repeat(np.array([ordinal for _, ordinal in self.devices], dtype=np.int64), counts)
        arguments = (self.window.bytes(lo, hi, lo, pad=PAD), node_spans - lo, thread_spans - lo, devices)
        self.flushed += 1
        if self.jobs > 1 and self.flushed == 2:  # a second block: worth starting the processes
            from .jobs import InOrder

            self.pool = InOrder(_decode_block, self.jobs)
        if self.pool is not None:
            self.pool.submit(arguments, lambda nodes: self._done(nodes, hi))
        else:
            self._done(_decode_block(*arguments), hi)
        starts.clear()
        ends.clear()
        threads.clear()
        self.devices = self.devices[-1:]
        if self.devices:
            self.devices[0] = (0, self.devices[0][1])  # the device being read goes on in the next block

    def _done(self, nodes: NodeBlock | None, hi: int) -> None:
        if nodes is not None:
            self.builder.add_nodes(nodes)
        if self.on_block is not None:
            self.on_block(hi)

    def finish(self) -> None:
        """Wait for the blocks still being decoded."""
        if self.pool is not None:
            self.pool.finish()

    def __enter__(self) -> _Block:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        if self.pool is not None:  # (on an error, the blocks still being decoded are dropped)
            self.pool.__exit__(kind, error, trace)


def _decode_block(data: bytes, node_spans: IntArray, thread_spans: IntArray, devices: IntArray) -> NodeBlock | None:
    """One block's nodes (``[start, end)`` of each, in padded ``data``), checking its thread names."""
    padded = Padded(data)
    if thread_spans.shape[1]:
        thread_names = _Messages(padded, _THREAD_NAME, thread_spans[0], thread_spans[1], np.zeros(thread_spans.shape[1], np.int64))
        thread_names.rows(1)
        strings(padded.bytes, thread_names.fields, thread_names.rows(2))
    if not node_spans.shape[1]:
        return None
    return _node_block(padded, _Messages(padded, _NODE, node_spans[0], node_spans[1], devices))


def _node_block(padded: Padded, nodes: _Messages) -> NodeBlock:
    data, n = padded.bytes, nodes.count
    memory = nodes.children(padded, 6, _MEMORY)
    records = memory.children(padded, 6, _RECORD)
    outputs = nodes.children(padded, 7, _OUTPUT)
    tensors = outputs.children(padded, 3, _TENSOR)
    shapes = tensors.children(padded, 2, _SHAPE)
    dims = shapes.children(padded, 2, _DIM)
    allocations = tensors.children(padded, 4, _ALLOCATION)
    referenced = nodes.children(padded, 11, _ALLOCATION)
    stats = nodes.children(padded, 12, _MEMORY_STATS)
    for messages, number in ((dims, 2), (referenced, 3)):  # read (and so checked), not kept
        strings(data, messages.fields, messages.rows(number))
    for messages in (records, dims, referenced):
        for number in _SCHEMA[messages.kind]:
            if _SCHEMA[messages.kind][number][1] == VARINT:
                messages.rows(number)

    nanos = nodes.column(13) != 0
    def timed(name: int, nano: int) -> IntArray:
        return np.where(nanos, nodes.column(nano), micros_to_ns(nodes.column(name)))
    scheduled_nanos = nodes.column(17)
    scheduled = np.where(nanos & (scheduled_nanos != 0), scheduled_nanos, micros_to_ns(nodes.column(9)))

    stats_node = stats.owner
    temp = np.zeros(n, dtype=np.int64)
    persistent = np.zeros(n, dtype=np.int64)
    device_temp = np.zeros(n, dtype=np.int64)
    device_persistent = np.zeros(n, dtype=np.int64)
    temp[stats_node] = stats.column(1)
    persistent[stats_node] = stats.column(3)
    device_temp[stats_node] = stats.column(2)
    device_persistent[stats_node] = stats.column(4)
    id_counts, ids = _packed(data, stats, 5)
    _packed(data, stats, 6)
    persistent_count = np.zeros(n, dtype=np.int64)
    np.add.at(persistent_count, stats_node, id_counts)

    outs = outputs.count
    tensor_out = tensors.owner
    shape_out = tensor_out[shapes.owner]
    dim_out = shape_out[dims.owner]
    allocation_out = tensor_out[allocations.owner]
    rank = np.full(outs, -1, dtype=np.int64)
    known = shapes.column(3) == 0
    rank[shape_out[known]] = 0
    dims_kept = rank[dim_out] >= 0
    rank += np.bincount(dim_out[dims_kept], minlength=outs)

    def by_output(values: np.ndarray, dtype: type = np.int64) -> np.ndarray:
        result: np.ndarray = np.zeros(outs, dtype=dtype)
        result[allocation_out] = values
        return result

    out_allocator = [""] * outs
    for out, name in zip(allocation_out.tolist(), allocations.strings(data, 3)):
        out_allocator[out] = name
    dtype = np.zeros(outs, dtype=np.int64)
    dtype[tensor_out] = tensors.column(1, as_int32)

    return NodeBlock(
        dev=nodes.owner,
        name=nodes.strings(data, 1),
        label=nodes.strings(data, 8),
        start_ns=timed(2, 13),
        op_start_rel_ns=timed(3, 14),
        op_end_rel_ns=timed(4, 15),
        end_rel_ns=timed(5, 16),
        scheduled_ns=scheduled,
        thread_id=nodes.column(10, as_unsigned32),
        temp_bytes=temp,
        persistent_bytes=persistent,
        device_temp_bytes=device_temp,
        device_persistent_bytes=device_persistent,
        persistent_count=persistent_count,
        persistent_ids=ids,
        mem_node=memory.owner,
        mem_allocator=memory.strings(data, 1),
        mem_total=memory.column(2),
        mem_peak=memory.column(3),
        mem_live=memory.column(4),
        mem_in_use=memory.column(5),
        mem_record_count=np.bincount(records.owner, minlength=memory.count).astype(np.int64),
        rec_micros=records.column(1),
        rec_bytes=records.column(2),
        out_node=outputs.owner,
        out_slot=outputs.column(1, as_int32),
        out_allocator=out_allocator,
        out_allocation_id=by_output(allocations.column(4)),
        out_requested=by_output(allocations.column(1)),
        out_allocated=by_output(allocations.column(2)),
        out_ptr=by_output(allocations.column(6).view(np.uint64), np.uint64),
        out_single_ref=by_output(allocations.column(5) != 0, np.bool_),
        out_dtype=dtype,
        out_rank=rank,
        out_dims=dims.column(1)[dims_kept],
    )
