"""The fast path for profiles (XSpace): the wire format decoded with numpy, as :mod:`.binary` does for StepStats.

upb parses a profile in C quickly, but walking its events from Python costs a few microseconds
an event and most of a profile's events are not memory events. Here Python walks only the
planes and lines and the list of each line's events (one step per event, no decoding); the
events' ``metadata_id`` is decoded for all of them at once with numpy, and then only memory
events, and events that may carry a ``step_num`` stat, are decoded field by field (one field of
each event per numpy step, see :func:`.wire.scan`). Metadata (a few thousand names) is parsed
by upb.

The result is the same :class:`~.xplane_events.Events` columns the reference walk
(:func:`.xplane.collect`) produces; the tests hold the two to each other. Anything unexpected
raises :class:`~.detect.Unrecognised` and the reference walk reads the file.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from io import BufferedIOBase
from types import TracebackType
from typing import TYPE_CHECKING, Any, final

import numpy as np

from ..trace.data import IntArray
from .builder import CodedTexts
from .detect import Unrecognised
from .wire import PAD, Padded, scan, varint, varints
from .xplane_events import ALLOCATION, DEALLOCATION, NO_FRAGMENTATION, PS_LIMIT, XLA_SIGNS, Events

if TYPE_CHECKING:
    from .jobs import InOrder

_LEN = 2
_SEARCH_BYTES = 8 << 20
_PIECE_BYTES = 8 << 20  # a line read from a file is decoded this much at a time
_HEADER_BYTES = 32  # more than any field header (a tag and a length: ten bytes each at most)
_HEADER_PIECE = 64 << 10  # headers are read this much at a time


def _event_candidates(u8: np.ndarray, start: int, end: int) -> tuple[IntArray, IntArray, IntArray]:
    """Where in ``[start, end)`` an event of a line looks as if it starts: (field start, payload start, end).

    An event is field 4 (tag 0x22, then its length in one or two bytes) that opens with its
    metadata id (0x08, an id of one or two bytes) and then its offset (0x10). A stat looks the
    same up to its id but never has a 0x10 after it (its value fields are 0x11, 0x18, 0x20, 0x2A,
    0x32, 0x38), so the stats inside events are not candidates; a candidate may still be a
    lookalike inside a string, and an event with no offset (offset 0) or a longer header is
    not one: :func:`_line_events` only believes a candidate it reaches by walking from the
    line's start, and walks field by field where none is found.
    """
    offset_tag = start + 3 + np.flatnonzero(u8[start + 3:end] == 0x10)  # far fewer than 0x22 bytes (every stat has one)
    before = u8[offset_tag - 2]
    long_id = before >= 0x80
    payload = offset_tag - 2 - long_id
    looks = (u8[payload] == 0x08) & (u8[offset_tag - 1] < 0x80)
    long_length = u8[payload - 2] >= 0x80
    at = payload - 2 - long_length
    looks &= (at >= start) & (u8[np.maximum(at, 0)] == 0x22) & (u8[payload - 1] < 0x80)
    chosen = np.flatnonzero(looks)
    at, payload, long_length = at[chosen], payload[chosen], long_length[chosen]
    length = u8[at + 1].astype(np.int64)
    length[long_length] = (length[long_length] & 0x7F) | u8[at[long_length] + 2].astype(np.int64) << 7
    return at, payload, payload + length


def _line_events(padded: Padded, start: int, end: int, line_id: int = 0, timestamp_ns: int = 0,
                 first: bool = True, last: bool = True) -> tuple[int, int, IntArray, IntArray, int]:
    """A piece ``[start, end)`` of an XLine: its id, timestamp_ns, the spans of its events (walked,
    not decoded) and where the walk stopped.

    ``last``: the piece runs to the line's end, and a field past it is a truncated line; else the
    walk stops at the first field that does not end in the piece (the next piece starts there).
    ``first``: no event of the line has been decoded yet. After one has, the id and timestamp are
    the ones given (from the pieces before): they may not come after events of an earlier piece.

    The walk goes from field to field, but where it reaches a candidate event (see
    :func:`_event_candidates`) whose end is the next candidate, and so on, it takes the whole
    run of them in one numpy step: a line of memory events is a few steps, not one per event.
    """
    data = padded.bytes
    field_at, payload_at, end_at = _event_candidates(padded.u8, start, end)
    # Candidate i's end is candidate i + 1: a run continues. ``breaks``: where runs stop.
    breaks = np.flatnonzero(end_at[:-1] != field_at[1:])
    runs: list[tuple[IntArray, IntArray]] = []
    starts = array("q")  # events walked one at a time: eight bytes each, not a Python int
    ends = array("q")
    pos = field_start = start
    while pos < end:
        field_start = pos
        i = int(np.searchsorted(field_at, pos))
        if i < len(field_at) and field_at[i] == pos:
            b = int(np.searchsorted(breaks, i))
            last_of_run = int(breaks[b]) if b < len(breaks) else len(field_at) - 1
            stop = i + int(np.searchsorted(end_at[i:last_of_run + 1], end, side="right"))  # the ones inside the piece
            if stop > i:
                if len(starts):
                    runs.append((np.frombuffer(starts, dtype=np.int64), np.frombuffer(ends, dtype=np.int64)))
                    starts, ends = array("q"), array("q")
                runs.append((payload_at[i:stop], end_at[i:stop]))
                pos = int(end_at[stop - 1])
                continue
        if data[pos] == 0x22:  # an event the candidates missed (or one past the piece's end)
            length, pos = varint(data, pos + 1)
            starts.append(pos)
            pos += length
            ends.append(pos)
            continue
        tag, pos = varint(data, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = varint(data, pos)
            if number in (1, 3) and pos <= end:
                if not first:
                    raise Unrecognised("a line's id or timestamp after its events")
                value = value - (1 << 64) if value >> 63 else value
                line_id, timestamp_ns = (value, timestamp_ns) if number == 1 else (line_id, value)
        elif wire == _LEN:
            length, pos = varint(data, pos)
            pos += length
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            raise Unrecognised("a group or an invalid wire type")
    if pos != end:
        if last:
            raise Unrecognised("a truncated line")
        if len(ends) and ends[-1] == pos:  # the last event runs past the piece: the next one reads it
            starts.pop()
            ends.pop()
        pos = field_start
    if len(starts):
        runs.append((np.frombuffer(starts, dtype=np.int64), np.frombuffer(ends, dtype=np.int64)))
    if len(runs) == 1:
        return line_id, timestamp_ns, runs[0][0], runs[0][1], pos
    empty = np.zeros(0, dtype=np.int64)
    return (line_id, timestamp_ns, np.concatenate([run[0] for run in runs] or [empty]),
            np.concatenate([run[1] for run in runs] or [empty]), pos)


def _plane_metadata(source: _Source, entries: list[tuple[int, int]]) -> object:
    """The plane's metadata maps, parsed by upb from the entries' bytes alone (``entries``: whole fields)."""
    from ._proto import xplane_pb2

    plane = xplane_pb2.XPlane()
    parts = []
    for lo, hi in _spans(entries):
        data, _, base = source.piece(lo, hi)
        parts.append(bytes(data[lo - base:hi - base]))
    try:
        plane.ParseFromString(b"".join(parts))
    except Exception:  # noqa: BLE001 - any failure: the reference path says what is wrong
        raise Unrecognised("metadata that upb cannot parse") from None
    return plane


def _spans(entries: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Fields ``[lo, hi)`` in file order, those that follow each other joined: one read each (a plane's
    thousands of metadata entries are usually one stretch at its end)."""
    spans: list[tuple[int, int]] = []
    for lo, hi in entries:
        if spans and spans[-1][1] == lo:
            spans[-1] = (spans[-1][0], hi)
        else:
            spans.append((lo, hi))
    return spans


@dataclass
class _Stats:
    """XStat messages decoded: the stat's metadata id, which value field it holds (0: none) and the value."""

    metadata_id: IntArray
    kind: IntArray  # the value's field number: 2 double, 3 uint64, 4 int64, 5 str, 6 bytes, 7 ref
    value: np.ndarray  # uint64: the varint (3, 4, 7) or the payload length (5, 6)
    start: IntArray  # payload start (5, 6)
    end: IntArray


def _stats(padded: Padded, starts: IntArray, ends: IntArray) -> _Stats:
    """Decode XStat messages ``[starts[i], ends[i])`` directly: a metadata id, then at most one value field.

    Two varints per stat, all stats at once; anything else (another field order, a second
    value) is Unrecognised.
    """
    u8 = padded.u8
    if not (u8[starts] == 0x08).all():
        raise Unrecognised("a stat that does not open with its metadata id")
    metadata_id, id_length = varints(padded, starts + 1)
    tag_at = starts + 1 + id_length
    has_value = tag_at < ends
    tag = np.where(has_value, u8[np.minimum(tag_at, len(u8) - 1)], 0).astype(np.int64)
    kind, wire = tag >> 3, tag & 7
    value, value_length = varints(padded, tag_at + 1)
    payload = tag_at + 1 + value_length
    end = np.where(wire == 0, payload, np.where(wire == _LEN, payload + value.astype(np.int64),
                                                np.where(wire == 1, tag_at + 9, tag_at + 5)))
    end = np.where(has_value, end, tag_at)
    expected = np.array([-1, -1, 1, 0, 0, 2, 2, 0], dtype=np.int64)  # per value field number: its wire type
    if ((kind > 7) | has_value & (expected[np.minimum(kind, 7)] != wire) | (end != ends)).any():
        raise Unrecognised("a stat that is not a metadata id and one value")
    return _Stats(_signed(metadata_id), np.where(has_value, kind, 0), value, payload, end)


def _member(values: IntArray, wanted: IntArray) -> np.ndarray:
    """``np.isin`` for metadata ids, which are small: a table lookup rather than a sort or a hash."""
    if not len(wanted) or not len(values):
        return np.zeros(len(values), dtype=np.bool_)
    low, high = int(values.min()), int(values.max())
    if low < 0 or high > 1 << 24:
        return np.isin(values, wanted)
    table = np.zeros(high + 2, dtype=np.bool_)
    table[wanted[(wanted >= 0) & (wanted <= high)]] = True
    return table[values]


def _signed(values: np.ndarray) -> IntArray:
    return values.view(np.int64)


class _Memory:
    """A profile held whole in memory (followed by ``PAD`` zero bytes): every piece is the buffer itself."""

    def __init__(self, data: bytearray):
        self.data = data
        self.size = len(data) - PAD
        self.padded = Padded(data)  # type: ignore[arg-type]
        self.piece_bytes = self.size + 1  # a line is always one piece

    def header(self, pos: int) -> tuple[bytearray, int]:
        """Bytes holding the field header at ``pos`` and the offset they start at."""
        return self.data, 0

    def piece(self, lo: int, hi: int) -> tuple[bytearray, Padded, int]:
        """``[lo, hi)`` (and what follows, or zero padding) and the offset the buffer starts at."""
        return self.data, self.padded, 0


class _File:
    """A profile read from a file a piece at a time: what has been decoded is not kept.

    Each piece is read into a buffer of its own (``PAD`` zero bytes after it), so memory holds
    a piece (``piece_bytes``, or one field larger than that) and never the file.
    """

    def __init__(self, handle: BufferedIOBase, size: int, piece_bytes: int = _PIECE_BYTES):
        self.handle = handle
        self.size = size
        self.piece_bytes = piece_bytes
        self._header = bytearray()
        self._header_base = -1

    def _read(self, lo: int, hi: int) -> bytearray:
        hi = min(hi, self.size)
        buffer = bytearray(hi - lo + PAD)
        self.handle.seek(lo)
        if self.handle.readinto(memoryview(buffer)[:hi - lo]) != hi - lo:
            raise Unrecognised("a file shorter than it was")
        return buffer

    def header(self, pos: int) -> tuple[bytearray, int]:
        base = self._header_base
        if not (0 <= base <= pos and pos + _HEADER_BYTES <= base + len(self._header) - PAD):
            self._header = self._read(pos, pos + _HEADER_PIECE)
            self._header_base = base = pos
        return self._header, base

    def piece(self, lo: int, hi: int) -> tuple[bytearray, Padded, int]:
        data = self._read(lo, hi)
        return data, Padded(data), lo  # type: ignore[arg-type]


_Source = _Memory | _File


def collect(data: bytearray, into: Events) -> None:
    """Decode an XSpace held in ``data`` (followed by at least ``PAD`` zero bytes) into ``into``."""
    _collect(_Memory(data), into, 1)


def collect_file(handle: BufferedIOBase, size: int, into: Events, piece_bytes: int = _PIECE_BYTES, jobs: int = 1) -> None:
    """Decode the XSpace of a seekable file of ``size`` bytes into ``into``, a piece at a time.

    The plane's metadata comes after its lines in the file, so each plane is walked twice: its
    fields' headers first (lines skipped by their length, metadata read), then its lines. With
    ``jobs`` over 1, the pieces' events are decoded in that many processes (:mod:`.jobs`), the
    walk from piece to piece staying here; the events come back in file order.
    """
    _collect(_File(handle, size, piece_bytes), into, jobs)


def _collect(source: _Source, into: Events, jobs: int) -> None:
    with _Decoder(into, jobs) as decoder:
        for number, wire, _, start, end in _walk(source, 0, source.size, "a truncated profile"):
            if number == 1 and wire == _LEN:
                _plane(source, start, end, into, decoder)
        decoder.finish()


# What :func:`_line` needs besides the piece: line id, timestamp, event spans, memory event ids,
# stat names, the step_num stat's id and the step numbers metadata gives.
_LineArguments = tuple[int, int, IntArray, IntArray, IntArray, IntArray, dict[int, str], "int | None", dict[int, int]]


@final
class _Decoder:
    """Decodes the walked pieces of lines into ``into``: here, or from the second piece on in worker processes."""

    def __init__(self, into: Events, jobs: int):
        self.into, self.jobs, self.pieces = into, jobs, 0
        self.pool: InOrder[Events] | None = None

    def decode(self, data: bytearray, padded: Padded, arguments: _LineArguments) -> None:
        """``_piece_events(data, *arguments)``, its events appended to ``into`` in the order pieces are given."""
        self.pieces += 1
        if self.jobs > 1 and self.pieces == 2:  # a second piece: worth starting the processes
            from .jobs import InOrder

            self.pool = InOrder(_piece_events, self.jobs)
        if self.pool is None:
            _line(data, padded, *arguments, into=self.into)
        else:
            self.pool.submit((data, *arguments), self.into.extend)

    def finish(self) -> None:
        if self.pool is not None:
            self.pool.finish()

    def __enter__(self) -> _Decoder:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        if self.pool is not None:  # (on an error, the pieces still being decoded are dropped)
            self.pool.__exit__(kind, error, trace)


def _piece_events(data: bytearray, *arguments: Any) -> Events:
    """One piece's events, decoded on their own (in a worker process)."""
    events = Events()
    line_arguments: _LineArguments = arguments  # type: ignore[assignment]
    _line(data, Padded(data), *line_arguments, into=events)  # type: ignore[arg-type]
    return events


def _walk(source: _Source, start: int, end: int, truncated: str) -> Iterator[tuple[int, int, int, int, int]]:
    """The fields of the message ``[start, end)``: (number, wire, field start, payload start, field end).

    Only the headers are read (a few bytes each), so a large field costs nothing to pass.
    """
    pos = start
    while pos < end:
        field_start = pos
        data, base = source.header(pos)
        tag, local = varint(data, pos - base)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise Unrecognised("field number 0")
        if wire == 0:
            _, local = varint(data, local)
            pos = base + local
            yield number, wire, field_start, field_start, pos
            continue
        if wire == _LEN:
            length, local = varint(data, local)
            payload = base + local
            pos = payload + length
        elif wire in (1, 5):
            payload = base + local
            pos = payload + (8 if wire == 1 else 4)
        else:
            raise Unrecognised("a group or an invalid wire type")
        if pos > end:
            raise Unrecognised(truncated)
        yield number, wire, field_start, payload, pos
    if pos != end:
        raise Unrecognised(truncated)


def _plane(source: _Source, start: int, end: int, into: Events, decoder: _Decoder) -> None:
    lines: list[tuple[int, int]] = []
    metadata: list[tuple[int, int]] = []
    for number, wire, field_start, payload, field_end in _walk(source, start, end, "a truncated plane"):
        if wire == 0:
            continue
        if wire != _LEN:
            raise Unrecognised("a plane field of an unexpected wire type")
        if number == 3:
            lines.append((payload, field_end))
        elif number in (4, 5):
            metadata.append((field_start, field_end))
    plane = _plane_metadata(source, metadata)
    names = {key: meta.name for key, meta in plane.stat_metadata.items()}  # type: ignore[attr-defined]
    if any(sign in name for name in names.values() for sign in XLA_SIGNS):
        into.xla_signs = True
    kinds: dict[int, bool] = {}
    for key, meta in plane.event_metadata.items():  # type: ignore[attr-defined]
        if meta.name in (ALLOCATION, DEALLOCATION):
            kinds[key] = meta.name == ALLOCATION
        elif ":" in meta.name:
            op, _, op_type = meta.name.rpartition(":")
            if op and op_type and op_type.isidentifier():
                into.op_types.setdefault(op, op_type)
    step_id = next((key for key, name in names.items() if name == "step_num"), None)
    step_meta: dict[int, int] = {}
    if step_id is not None:
        for key, meta in plane.event_metadata.items():  # type: ignore[attr-defined]
            for stat in meta.stats:
                if stat.metadata_id == step_id and stat.WhichOneof("value") == "int64_value":
                    step_meta[key] = stat.int64_value
    alloc_ids = np.array([k for k, v in kinds.items() if v], dtype=np.int64)
    free_ids = np.array([k for k, v in kinds.items() if not v], dtype=np.int64)
    # What a line must hold for anything in it to matter: an event (``0x08 id 0x10``: its metadata
    # id, then its offset) that is a memory event or a step marker, or a step_num stat (``0x08 id``,
    # then an integer value). Lines without any (a GPU's kernels, most threads) are not walked.
    wanted = [b"\x08" + _encode(key) + b"\x10" for key in (*kinds, *step_meta)]
    if step_id is not None:
        wanted += [b"\x08" + _encode(step_id) + tag for tag in (b"\x18", b"\x20")]
    for lo, hi in lines:
        if not _line_holds_any(source, lo, hi, wanted):
            continue
        # A line is walked a piece at a time; each piece's whole events are decoded together.
        line_id = timestamp_ns = 0
        pos = lo
        decoded = False
        while pos < hi:
            last = pos + source.piece_bytes >= hi
            data, padded, base = source.piece(pos, hi if last else pos + source.piece_bytes)
            line_id, timestamp_ns, starts, ends, stop = _line_events(
                padded, pos - base, (hi if last else pos + source.piece_bytes) - base, line_id, timestamp_ns, not decoded, last)
            if stop == pos - base:  # one field larger than a piece: read it whole
                *_, field_end = next(_walk(source, pos, hi, "a truncated line"))
                data, padded, base = source.piece(pos, field_end)
                line_id, timestamp_ns, starts, ends, stop = _line_events(
                    padded, pos - base, field_end - base, line_id, timestamp_ns, not decoded, field_end == hi)
            if len(starts):
                decoded = True
                decoder.decode(data, padded, (line_id, timestamp_ns, starts, ends, alloc_ids, free_ids, names, step_id,
                                              step_meta))
            pos = base + stop
            del data, padded


def _line_holds_any(source: _Source, lo: int, hi: int, patterns: list[bytes]) -> bool:
    """Whether any of the patterns occurs in the line ``[lo, hi)``, a piece at a time (pieces overlap by a pattern)."""
    overlap = max(map(len, patterns), default=0)
    for start in range(lo, hi, source.piece_bytes):
        stop = min(start + source.piece_bytes + overlap, hi)
        _, padded, base = source.piece(start, stop)
        if _holds_any(padded, start - base, stop - base, patterns):
            return True
    return False


def _holds_any(padded: Padded, lo: int, hi: int, patterns: list[bytes]) -> bool:
    """Whether any of the byte patterns (each opening with 0x08) occurs in ``[lo, hi)``; a stretch at a time."""
    u8 = padded.u8
    for start in range(lo, hi, _SEARCH_BYTES):
        at = start + np.flatnonzero(u8[start:min(start + _SEARCH_BYTES, hi)] == 0x08)
        for pattern in patterns:
            hits = at
            for k in range(1, len(pattern)):
                hits = hits[u8[hits + k] == pattern[k]]
            if len(hits):
                return True
    return False


def _line(data: bytearray, padded: Padded, line_id: int, timestamp_ns: int, starts: IntArray, ends: IntArray,
          alloc_ids: IntArray, free_ids: IntArray, names: dict[int, str], step_id: int | None,
          step_meta: dict[int, int], into: Events) -> None:
    # An event's metadata_id is its first field (field 1, a varint) where protobuf wrote it.
    first = padded.u8[np.minimum(starts, len(data) - 1)]
    if not ((first == 0x08) | (ends == starts)).all():
        raise Unrecognised("an event that does not open with its metadata id")
    metadata_id, id_length = varints(padded, starts + 1)
    metadata_id = _signed(metadata_id)
    is_memory = _member(metadata_id, np.concatenate([alloc_ids, free_ids]))
    memory = np.flatnonzero(is_memory)
    base_ps = timestamp_ns * 1000
    if step_id is not None:
        candidate = _member(metadata_id, np.array(list(step_meta), dtype=np.int64))
        # Events that may carry a step_num stat: their bytes hold the stat's id right after a tag 0x08.
        tag = np.frombuffer(b"\x08" + _encode(step_id), dtype=np.uint8)
        for lo in range(int(starts[0]), int(ends[-1]), _SEARCH_BYTES):  # a stretch at a time: a bool per byte
            hits = lo + np.flatnonzero(padded.u8[lo:min(lo + _SEARCH_BYTES, int(ends[-1]))] == tag[0])
            for k in range(1, len(tag)):
                hits = hits[padded.u8[hits + k] == tag[k]]
            candidate[np.searchsorted(starts, hits, side="right") - 1] = True
        candidates = np.flatnonzero(candidate & ~is_memory | _member(metadata_id, np.array(list(step_meta), dtype=np.int64)))
        if len(candidates):
            _steps(padded, starts[candidates], ends[candidates], metadata_id[candidates], base_ps, step_id, step_meta, into)
    if not len(memory):
        return
    n = len(memory)
    _check_times(base_ps, None)  # before any sum of the line's start and an offset is taken
    int_names = ("bytes_allocated", "requested_bytes", "allocation_bytes", "addr", "data_type", "peak_bytes_in_use",
                 "bytes_available")
    text_names = ("allocator_name", "tf_op", "shape", "region_type")  # after the one double, fragmentation
    wanted = {key: k for k, name in enumerate((*int_names, "fragmentation", *text_names))
              for key, stat in names.items() if stat == name}
    offset, numbers, fragmentation, texts = _memory_stats(
        padded, starts[memory], ends[memory], id_length if isinstance(id_length, int) else id_length[memory],
        wanted, len(int_names))

    def text_column(k: int) -> CodedTexts:
        rows, kind, value, payload = (part[texts[0] == k] for part in texts[1:])
        codes = np.zeros(n, dtype=np.int64)  # 0: "", then the refs' names, then the strings
        table = [""]
        refs = np.flatnonzero(kind == 7)
        if len(refs):
            keys = value[refs].astype(np.int64)
            distinct = np.flatnonzero(np.bincount(keys))  # metadata ids are small: no hashing needed
            lookup = np.zeros(int(distinct[-1]) + 1, dtype=np.int64)
            lookup[distinct] = np.arange(1, len(distinct) + 1)
            codes[rows[refs]] = lookup[keys]
            table.extend(names.get(key, "") for key in distinct.tolist())
        strings = np.flatnonzero(kind == 5)
        if len(strings):
            codes[rows[strings]] = _string_codes(data, padded, payload[strings], value[strings].astype(np.int64), table)
        return CodedTexts.from_table(codes, table)

    _check_times(base_ps, offset)
    into.add(
        time_ps=base_ps + offset, is_alloc=_member(metadata_id[memory], alloc_ids),
        allocator=text_column(len(int_names) + 1), bytes_allocated=numbers[0], requested=numbers[1], allocation=numbers[2],
        addr=numbers[3].view(np.uint64), tf_op=text_column(len(int_names) + 2).map(lambda op: "" if op == "(null)" else op),
        dtype=numbers[4], shape=text_column(len(int_names) + 3), region=text_column(len(int_names) + 4),
        peak_in_use=numbers[5], available=numbers[6],
        thread=np.full(n, line_id, dtype=np.int64), fragmentation=fragmentation,
    )


_MASKS = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [(1 << 64) - 1], dtype=np.uint64)  # the low k bytes


def _string_codes(data: bytearray, padded: Padded, starts: IntArray, lengths: IntArray, table: list[str]) -> IntArray:
    """Each string's index in ``table``, which the distinct strings are appended to; each is decoded once.

    Strings of up to 16 bytes (shapes, mostly: one per allocation) are told apart by their bytes
    as two words, all at once; longer ones one by one.
    """
    codes = np.zeros(len(starts), dtype=np.int64)
    short = np.flatnonzero(lengths <= 16)
    if len(short):
        at, size = starts[short], lengths[short]
        keys = np.empty((len(short), 3), dtype=np.uint64)
        keys[:, 0] = padded.words[at] & _MASKS[np.minimum(size, 8)]
        keys[:, 1] = padded.words[at + 8] & _MASKS[np.clip(size - 8, 0, 8)]
        keys[:, 2] = size
        _, first, inverse = np.unique(keys.view(np.dtype((np.void, 24))).ravel(), return_index=True, return_inverse=True)
        codes[short] = len(table) + inverse.ravel()
        table.extend(_decode(data, int(a), int(a) + int(n)) for a, n in zip(at[first].tolist(), size[first].tolist()))
    long = np.flatnonzero(lengths > 16)
    if len(long):
        found = [_decode(data, a, a + n) for a, n in zip(starts[long].tolist(), lengths[long].tolist())]
        where: dict[str, int] = {}
        for text in found:
            if text not in where:
                where[text] = len(table)
                table.append(text)
        codes[long] = [where[text] for text in found]
    return codes


def _decode(data: bytearray, lo: int, hi: int) -> str:
    try:
        return bytes(data[lo:hi]).decode()
    except UnicodeDecodeError:
        raise Unrecognised("a string stat that is not UTF-8") from None


def _memory_stats(padded: Padded, starts: IntArray, ends: IntArray, id_length: IntArray | int, wanted: dict[int, int],
                  numbers: int) -> tuple[IntArray, list[IntArray], np.ndarray, tuple[IntArray, ...]]:
    """Memory events as TensorFlow writes them: metadata id, offset_ps, maybe duration_ps, then the stats.

    ``wanted`` maps a stat's metadata id to its column: the first ``numbers`` columns are integer
    stats, the next one the double ``fragmentation``, the rest text stats (a string or a
    reference to a metadata name). Returns each event's offset_ps, the integer columns, the
    fragmentation column (-1 where absent), and the text stats found as (column, event, value
    field, value, payload start). One numpy step per stat of an event (about fourteen), all
    events at once, and only the wanted stats' values are decoded.
    """
    u8 = padded.u8
    pos = starts + 1 + id_length
    if not (u8[pos] == 0x10).all():
        raise Unrecognised("a memory event whose offset_ps does not follow its metadata id")
    offset, length = varints(padded, pos + 1)
    pos = pos + 1 + length
    timed = np.flatnonzero(u8[pos] == 0x18)  # duration_ps: instant events have none
    if len(timed):
        _, length = varints(padded, pos[timed] + 1)
        pos[timed] += 1 + length
    table = np.full(max(wanted, default=0) + 1, -1, dtype=np.int64)
    for key, index in wanted.items():
        table[key] = index
    columns = [np.zeros(len(starts), dtype=np.int64) for _ in range(numbers)]
    fragmentation = np.full(len(starts), NO_FRAGMENTATION, dtype=np.float64)
    text_parts: list[tuple[IntArray, ...]] = []
    more = pos < ends
    event, at, stop = np.flatnonzero(more), pos[more], ends[more]  # the events still in their stats, compacted
    while len(event):
        if not (u8[at] == 0x22).all():
            raise Unrecognised("a memory event field that is not a stat")
        size = u8[at + 1].astype(np.int64)
        start = at + 2
        long = np.flatnonzero(size >= 0x80)
        if len(long):
            value, length = varints(padded, at[long] + 1)
            size[long] = value.astype(np.int64)
            start[long] = at[long] + 1 + length
        end = start + size
        if (end > stop).any() or not (u8[start] == 0x08).all():
            raise Unrecognised("a stat that overruns its event or does not open with its metadata id")
        stat_id = u8[start + 1].astype(np.int64)
        id_end = start + 2
        long = np.flatnonzero(stat_id >= 0x80)
        if len(long):
            value, length = varints(padded, start[long] + 1)
            stat_id[long] = _signed(value)
            id_end[long] = start[long] + 1 + length
        column = np.where(stat_id < len(table), table[np.minimum(stat_id, len(table) - 1)], -1)
        chosen = np.flatnonzero((column >= 0) & (id_end < end))  # a stat with no value holds nothing
        if len(chosen):
            tag_at = id_end[chosen]
            tag = u8[tag_at].astype(np.int64)
            their = column[chosen]
            is_double = tag == 0x11
            if ((their != numbers) & is_double).any():
                raise Unrecognised("a double where TensorFlow writes no double")
            is_number = their <= numbers  # fragmentation may also come as an integer (0)
            doubles = np.flatnonzero(is_double)
            fragmentation[event[chosen[doubles]]] = padded.words[tag_at[doubles] + 1].view(np.float64)
            if len(doubles):
                if (tag_at[doubles] + 9 != end[chosen[doubles]]).any():
                    raise Unrecognised("a fragmentation stat that is not as TensorFlow writes it")
                keep = np.flatnonzero(~is_double)
                chosen, tag_at, tag, their, is_number = chosen[keep], tag_at[keep], tag[keep], their[keep], is_number[keep]
            value, length = varints(padded, tag_at + 1)
            payload = tag_at + 1 + length
            kind, wire = tag >> 3, tag & 7
            fits = np.where(is_number, (tag == 0x18) | (tag == 0x20), (tag == 0x2A) | (tag == 0x38))
            stat_end = np.where(wire == _LEN, payload + value.astype(np.int64), payload)
            if not fits.all() or (stat_end != end[chosen]).any():
                raise Unrecognised("a memory event stat that is not as TensorFlow writes it")
            rows = event[chosen]
            for k in range(numbers):
                mine = np.flatnonzero(their == k)
                columns[k][rows[mine]] = _signed(value[mine])
            mine = np.flatnonzero(their == numbers)
            fragmentation[rows[mine]] = _signed(value[mine]).astype(np.float64)
            text = np.flatnonzero(~is_number)
            text_parts.append((their[text], rows[text], kind[text], value[text], payload[text]))
        more = end < stop
        event, at, stop = event[more], end[more], stop[more]
    if text_parts:
        texts = tuple(np.concatenate([part[k] for part in text_parts]) for k in range(5))
    else:
        texts = tuple(np.zeros(0, dtype=np.int64) for _ in range(5))
    return _signed(offset), columns, fragmentation, texts


def _steps(padded: Padded, starts: IntArray, ends: IntArray, metadata_id: IntArray, base_ps: int, step_id: int,
           step_meta: dict[int, int], into: Events) -> None:
    """Step windows from events marked by their metadata or carrying a ``step_num`` stat."""
    events = scan(padded, starts, ends)
    n = len(starts)
    offset = np.zeros(n, dtype=np.int64)
    duration = np.zeros(n, dtype=np.int64)
    for number, column in ((2, offset), (3, duration)):
        rows = np.flatnonzero(events.number == number)
        column[events.message[rows]] = _signed(events.value[rows])
    _check_times(base_ps, offset)
    _check_times(0, duration)
    _check_times(base_ps, offset + duration)  # each under 2^62, so their sum is no wrapped one
    number_of = np.array([step_meta.get(int(m), -1) for m in metadata_id.tolist()], dtype=np.int64)
    has = number_of >= 0
    stat_rows = np.flatnonzero((events.number == 4) & (events.wire == _LEN))
    if len(stat_rows):
        stats = scan(padded, events.start[stat_rows], events.end[stat_rows])
        owner = events.message[stat_rows]
        is_step = np.zeros(len(stat_rows), dtype=np.bool_)
        ids = np.flatnonzero(stats.number == 1)
        is_step[stats.message[ids]] = _signed(stats.value[ids]) == step_id
        values = np.flatnonzero((stats.number == 4) & is_step[stats.message])
        number_of[owner[stats.message[values]]] = _signed(stats.value[values])
        has[owner[stats.message[values]]] = True
    for number, start, length in zip(number_of[has].tolist(), (base_ps + offset[has]).tolist(), duration[has].tolist()):
        into.add_step(number, start, start + length)


_PS_LIMIT = PS_LIMIT


def _check_times(base_ps: int, offsets: IntArray | None) -> None:
    """Leave to upb (which says so in one line) a line whose start, or start plus an offset, is
    beyond what int64 picoseconds hold with room for a sum."""
    if not -_PS_LIMIT < base_ps < _PS_LIMIT:
        raise Unrecognised("a line's timestamp out of range")
    if offsets is not None and len(offsets):
        low, high = int(offsets.min()), int(offsets.max())
        if not (-_PS_LIMIT < low and high < _PS_LIMIT and -_PS_LIMIT < base_ps + low and base_ps + high < _PS_LIMIT):
            raise Unrecognised("an event's time out of range")


def _encode(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
