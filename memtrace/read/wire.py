"""The protobuf wire format decoded with numpy: varints eight bytes at a time, the fields of many messages at once.

Both fast binary readers (StepStats/RunMetadata in :mod:`.binary`, XSpace profiles in
:mod:`.xplane_binary`) decode their messages with these: Python does a constant amount of work per
field *number*, not per field. Anything malformed raises :class:`~memtrace.read.detect.Unrecognised`,
and the caller lets protobuf (upb) read the file instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..trace.data import IntArray
from .detect import Unrecognised

_U64 = np.uint64
_HIGHS = _U64(0x8080808080808080)
_LOWS = _U64(0x7F7F7F7F7F7F7F7F)
PAD = 16  # bytes after a block, so that every byte can start an eight-byte word


# -- varints, eight bytes at a time ----------------------------------------------------------------


def _byte_index(bit: np.ndarray) -> IntArray:
    """For words with one set bit at 8k+7, k (read off the bit's float exponent); negative for 0."""
    return ((bit.astype(np.float64).view(np.int64) >> 52) - 1030) >> 3


class Padded:
    """A block of the message, padded so that every byte can start an eight-byte word."""

    def __init__(self, padded: bytes):
        self.bytes = padded
        self.u8 = np.frombuffer(padded, dtype=np.uint8)
        self.words = np.ndarray((len(padded) - 7,), dtype="<u8", buffer=padded, strides=(1,))  # one at each byte


def varints(padded: Padded, pos: IntArray) -> tuple[np.ndarray, IntArray | int]:
    """The varint at each position: its value (uint64) and its length in bytes."""
    first = padded.u8[pos]
    if (first < 0x80).all():  # one byte each (field tags mostly): the common case, a byte each
        return first.astype(np.uint64), 1
    words = padded.words
    w = words[pos]
    with np.errstate(over="ignore"):
        stop = ~w & _HIGHS  # bytes that end the varint
        low = stop & (~stop + _U64(1))
        keep = (low << _U64(1)) - _U64(1)  # every bit up to the first ending byte (all when none)
    x = w & keep & _LOWS
    x = (x & _U64(0x007F007F007F007F)) | ((x & _U64(0x7F007F007F007F00)) >> _U64(1))
    x = (x & _U64(0x00003FFF00003FFF)) | ((x & _U64(0x3FFF00003FFF0000)) >> _U64(2))
    x = (x & _U64(0x000000000FFFFFFF)) | ((x & _U64(0x0FFFFFFF00000000)) >> _U64(4))
    length = _byte_index(low) + 1
    long = np.flatnonzero(stop == 0)  # nine or ten bytes (negative numbers take ten)
    if len(long):
        tail = words[pos[long] + 8]
        ninth, tenth = tail & _U64(0xFF), (tail >> _U64(8)) & _U64(0xFF)
        nine = ninth < _U64(0x80)
        if not (nine | (tenth <= _U64(1))).all():
            raise Unrecognised("a varint longer than ten bytes, or over 64 bits")
        x[long] |= ((ninth & _U64(0x7F)) << _U64(56)) | (np.where(nine, _U64(0), tenth) << _U64(63))
        length[long] = np.where(nine, 9, 10)
    return x, length


def varint(data: bytes | bytearray, pos: int) -> tuple[int, int]:
    """One varint, in Python: (value, position after it)."""
    result = shift = 0
    while True:
        if pos >= len(data):
            raise Unrecognised("a varint cut off by the end of the data")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
        if shift > 63:
            raise Unrecognised("a varint longer than ten bytes")
    if result >> 64:
        raise Unrecognised("a varint over 64 bits")
    return result, pos


# -- fields of many messages at once ---------------------------------------------------------------


@dataclass
class Fields:
    """The fields of a set of messages, in field order within each message."""

    message: IntArray
    number: IntArray
    value: np.ndarray  # uint64: the varint, or the payload length
    start: IntArray  # payload start (LEN fields)
    end: IntArray  # end of the field
    wire: IntArray


def scan(padded: Padded, starts: IntArray, ends: IntArray) -> Fields:
    """Every field of every message ``[starts[i], ends[i])``, one field of each message per step."""
    parts: list[tuple[IntArray, ...]] = []
    active = np.flatnonzero(ends > starts)
    cursor = starts.copy()
    while len(active):
        p = cursor[active]
        tag, tag_length = varints(padded, p)
        q = p + tag_length
        value, value_length = varints(padded, q)
        wire = (tag & _U64(7)).astype(np.int64)
        number = (tag >> _U64(3)).astype(np.int64)
        nxt = q + value_length + (wire == 2) * value.astype(np.int64)
        if ((wire != 0) & (wire != 2)).any():
            fixed = np.flatnonzero((wire == 1) | (wire == 5))
            nxt[fixed] = q[fixed] + np.where(wire[fixed] == 1, 8, 4)
            if not ((wire == 0) | (wire == 1) | (wire == 2) | (wire == 5)).all():
                raise Unrecognised("a group or an invalid wire type")
        end = ends[active]
        if ((number == 0) | (nxt > end) | (value >= _U64(1 << 62)) & (wire == 2)).any():
            raise Unrecognised("a truncated or malformed message")
        parts.append((active, number, value, q + value_length, nxt, wire))
        cursor[active] = nxt
        active = active[nxt < end]
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return Fields(empty, empty, empty.astype(np.uint64), empty, empty, empty)
    return Fields(*(np.concatenate([part[k] for part in parts]) for k in range(6)))  # type: ignore[arg-type]


def strings(data: bytes, fields: Fields, rows: IntArray) -> list[str]:
    try:
        return list(map(bytes.decode, map(data.__getitem__, map(slice, fields.start[rows].tolist(), fields.end[rows].tolist()))))
    except UnicodeDecodeError:
        raise Unrecognised("a string that is not UTF-8") from None


def as_int64(values: np.ndarray) -> IntArray:
    return values.view(np.int64)


def as_int32(values: np.ndarray) -> IntArray:
    """protobuf's int32 from a varint: the low 32 bits, signed."""
    return (values & _U64(0xFFFFFFFF)).astype(np.int64) - ((values >> _U64(31)) & _U64(1)).astype(np.int64) * (1 << 32)


def as_unsigned32(values: np.ndarray) -> IntArray:
    return (values & _U64(0xFFFFFFFF)).astype(np.int64)
