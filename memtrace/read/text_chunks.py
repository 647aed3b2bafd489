"""A fast reader for StepStats / RunMetadata in protobuf text format, straight into columns.

protobuf's own text parser is pure Python and reads a few MB/s; real traces run to hundreds of
MB. This reader handles the layout every protobuf printer writes (``MessageToString``, C++
``DebugString``): one field per line, ``name {`` / ``}`` around messages, two spaces of
indentation per level, values as decimal integers, enum names and double-quoted strings. It
works on whole chunks of lines at once with numpy: line ends, indentation, field names (matched
as 8-byte words against the schema), nesting (one pass per depth), and integers (eight digits
per 64-bit operation). Each chunk ends just before a ``node_stats`` line, so the file streams in
fixed-size pieces and never needs to be held whole.

Text laid out otherwise (tabs, a message on one line, blanks at line ends, ``[a, b]`` lists) is
laid out so again, chunk by chunk, before it is read (:mod:`memtrace.read.text_layout`);
messages in ``<...>`` are read on lines of their own, their marks checked to pair; single quotes,
strings in adjacent parts, and hex or octal integers are read as protobuf reads them. protobuf's
parser stays the reference: anything else this reader does not recognise raises
:class:`Unrecognised`, and the caller parses the file with protobuf instead. So it is never
wrong, only sometimes slower. The exception is a field the schema does not have (or an
extension) in a chunk read as the file has it: invalid, so refused here, with protobuf's words,
line and column, once the lines before it are read and found valid (:func:`read_chunk`). Top-level RunMetadata fields other than
``step_stats`` (the graphs) are cut out as text and handed to protobuf on their own.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ..trace.data import IntArray
from ..units import format_bytes
from .builder import NodeBlock, micros_to_ns, release_memory
from .detect import TooLarge, UnknownField, Unrecognised
from .dtypes import DATA_TYPE_NUMBERS
from .text_layout import canonical_layout
from .text_schema import (
    AD,
    BOOL,
    CHILDREN,
    DELEG,
    DEV,
    DIM,
    ENUM,
    FIELDS,
    I32,
    I64,
    MEM,
    MS,
    NODE,
    OLD_NAMES,
    OUT,
    REC,
    REF,
    REPEATED_FIELDS,
    RM,
    SHAPE,
    SINGULAR_CHILDREN,
    SKIP,
    SS,
    STR,
    TD,
    TN,
    TYPE_NAMES,
    TYPES,
    U32,
    U64,
)

_TRIM_EVERY = 8  # chunks between giving freed memory back to the system (see builder.release_memory)
_PAD = 48  # zero bytes around a chunk so 8-byte reads near either end stay inside the buffer
_WORDS = 5  # names and enum values of up to 40 bytes are matched
# A longer string is refused: decoding one with escapes holds some forty times its size, and no
# node name or timeline label comes near it.
MAX_STRING_BYTES = 4 << 20


_KEYS = sorted({k for table in (*CHILDREN.values(), *FIELDS.values()) for k in table} | {k for _, k in OLD_NAMES})
_KEY_ID = {k: i for i, k in enumerate(_KEYS)}
_CHILD = np.full((TYPES, len(_KEYS) + 1), -1, dtype=np.int64)  # last column: an unknown name
_FIELD = np.full((TYPES, len(_KEYS) + 1), -1, dtype=np.int64)
_FIELD_INFO: list[tuple[int, str, int, bool]] = []  # field id -> (type, name, kind, repeated)
for _t, _table in CHILDREN.items():
    for _k, _c in _table.items():
        _CHILD[_t, _KEY_ID[_k]] = _c
for _t, _table in FIELDS.items():
    for _k, _kind in _table.items():
        _FIELD[_t, _KEY_ID[_k]] = len(_FIELD_INFO)
        _FIELD_INFO.append((_t, _k, _kind, (_t, _k) in REPEATED_FIELDS))
for (_t, _k), _current in OLD_NAMES.items():
    _FIELD[_t, _KEY_ID[_k]] = _FIELD[_t, _KEY_ID[_current]]  # the same field under its old name
_FIELD_KIND = np.array([info[2] for info in _FIELD_INFO], dtype=np.int64)
_SINGULAR_CHILD = np.zeros((TYPES, len(_KEYS) + 1), dtype=np.bool_)
for _t, _k in SINGULAR_CHILDREN:
    _SINGULAR_CHILD[_t, _KEY_ID[_k]] = True


# -- matching short byte strings as 64-bit words -------------------------------------------------

_U64 = np.uint64
_MASKS = np.array([(1 << (8 * n)) - 1 for n in range(9)], dtype=np.uint64)  # the low n bytes
_INDENT_MASKS = _MASKS[0:9:2]  # the indentation bytes in a line's first word, by level 0..4


def _word_view(buffer: bytes) -> np.ndarray:
    """Every 8-byte little-endian word of the buffer, one starting at each byte."""
    return np.ndarray((len(buffer) - 7,), dtype="<u8", buffer=buffer, strides=(1,))


class _Tokens:
    """A fixed set of byte strings (field names, enum names) looked up at many positions at once.

    A token is found by its length and first sixteen bytes (a perfect hash over the set), then
    checked byte for byte; later words are read only for the lines with tokens that long.
    """

    def __init__(self, tokens: dict[bytes, int]):
        items = sorted(tokens.items())
        words = np.zeros((len(items), _WORDS), dtype=np.uint64)
        for row, (token, _) in enumerate(items):
            words[row] = np.frombuffer(token.ljust(8 * _WORDS, b"\0"), dtype="<u8")
        self.words = [np.ascontiguousarray(words[:, j]) for j in range(_WORDS)]
        self.lengths = np.array([len(t) for t, _ in items], dtype=np.int64)
        self.values = np.array([v for _, v in items], dtype=np.int64)
        hashes = self._hash(self.words[0], self.words[1], self.lengths)
        if len(set(hashes.tolist())) != len(items):
            raise AssertionError("tokens that share their length and first sixteen bytes")
        self.shift = next(s for s in range(60, 40, -1) if len(set((hashes >> _U64(s)).tolist())) == len(items))
        self.slots = np.zeros(1 << (64 - self.shift), dtype=np.int64)
        self.slots[(hashes >> _U64(self.shift)).astype(np.int64)] = np.arange(len(items))

    @staticmethod
    def _hash(first: np.ndarray, second: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            return ((first ^ lengths.astype(np.uint64)) * _U64(0x9E3779B97F4A7C15)) ^ (second * _U64(0xC2B2AE3D27D4EB4F))

    def match(self, words: np.ndarray, start: IntArray, length: IntArray, first_word: np.ndarray | None = None) -> IntArray:
        """The value of the token at each ``start`` of ``length`` bytes, -1 where it is none of them."""
        if not len(start):
            return np.zeros(0, dtype=np.int64)
        fits = (length >= 1) & (length <= 8 * _WORDS)
        length = np.clip(length, 1, 8 * _WORDS)
        first = (words[start] if first_word is None else first_word) & _MASKS[np.minimum(length, 8)]
        second = np.zeros(len(start), dtype=np.uint64)
        longer = np.flatnonzero(length > 8)
        second[longer] = words[start[longer] + 8] & _MASKS[np.minimum(length[longer] - 8, 8)]
        candidate = self.slots[self._hash(first, second, length) >> _U64(self.shift)]
        same = fits & (self.lengths[candidate] == length) & (self.words[0][candidate] == first)
        same &= self.words[1][candidate] == second
        for j in range(2, _WORDS):
            longer = longer[length[longer] > 8 * j]
            if not len(longer):
                break
            word = words[start[longer] + 8 * j] & _MASKS[np.minimum(length[longer] - 8 * j, 8)]
            same[longer] &= word == self.words[j][candidate[longer]]
        return (self.values[candidate] + 1) * same - 1  # arithmetic, not np.where: masks are random


_KEY_TOKENS = _Tokens({k.encode(): i for i, k in enumerate(_KEYS)})
_DTYPE_TOKENS = _Tokens({name.encode(): number for name, number in DATA_TYPE_NUMBERS.items()})
_BOOL_TOKENS = _Tokens({b"true": 1, b"True": 1, b"t": 1, b"1": 1, b"false": 0, b"False": 0, b"f": 0, b"0": 0})


_COLONS = _U64(0x0101010101010101 * ord(":"))
_SPACES = _U64(0x0101010101010101 * ord(" "))


def _delimiters(word: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per word: whether it holds a ':' or ' ', and the offset of the first one."""
    with np.errstate(over="ignore"):
        x, y = word ^ _COLONS, word ^ _SPACES
        ones, highs = _U64(0x0101010101010101), _U64(0x8080808080808080)
        zero = (((x - ones) & ~x) | ((y - ones) & ~y)) & highs  # exact for the lowest such byte
        low = zero & (~zero + _U64(1))
    # The lowest set bit is bit 8k+7 for byte k: read k off the bit's float exponent.
    return zero != 0, ((low.astype(np.float64).view(np.int64) >> 52) - 1030) >> 3


def _first_delimiter(words: np.ndarray, start: IntArray, first_word: np.ndarray, nwords: int = _WORDS) -> IntArray:
    """Offset of the first ':' or ' ' within ``8 * nwords`` bytes of each start (a name's length); 0 where none."""
    found, offset = _delimiters(first_word)
    length = offset * found
    todo = np.flatnonzero(~found)
    for j in range(1, nwords):
        if not len(todo):
            break
        found, offset = _delimiters(words[start[todo] + 8 * j])
        length[todo[found]] = 8 * j + offset[found]
        todo = todo[~found]
    return length


_SLOT_BITS = 16


def _names(words: np.ndarray, start: IntArray) -> tuple[IntArray, IntArray]:
    """Each line's field name: its length (up to the first ':' or ' ') and key id (-1 if unknown).

    Lines share their first sixteen bytes far more often than not, so each distinct sixteen is
    read once: a table indexed by a hash of them holds one line of each, and every line whose
    sixteen bytes equal its table line's takes that line's answer when its name ends within them.
    The rest (names of sixteen bytes or more, and hash collisions) are read one by one.
    """
    w0 = words[start]
    w1 = words[start + 8]
    with np.errstate(over="ignore"):
        slot = (((w0 * _U64(0x9E3779B97F4A7C15)) ^ (w1 * _U64(0xC2B2AE3D27D4EB4F))) >> _U64(64 - _SLOT_BITS)).astype(np.intp)
    table_line = np.empty(1 << _SLOT_BITS, dtype=np.int64)
    table_line[slot] = np.arange(len(start))
    used = np.zeros(1 << _SLOT_BITS, dtype=np.bool_)
    used[slot] = True
    used_slots = np.flatnonzero(used)
    samples = table_line[used_slots]
    sample_length = _first_delimiter(words, start[samples], w0[samples])
    sample_key = _KEY_TOKENS.match(words, start[samples], sample_length, w0[samples])
    table_length = np.zeros(1 << _SLOT_BITS, dtype=np.int64)
    table_key = np.zeros(1 << _SLOT_BITS, dtype=np.int64)
    table_length[used_slots] = sample_length
    table_key[used_slots] = sample_key
    mine = table_line[slot]
    length = table_length[slot]
    key = table_key[slot]
    differ = (w0[mine] != w0) | (w1[mine] != w1)
    # Names of sixteen bytes or more: the bytes after the sixteenth, delimiter included, must match too.
    longer = np.flatnonzero(length >= 16)
    for j in range(2, _WORDS):
        if not len(longer):
            break
        count = np.minimum(length[longer] + 1 - 8 * j, 8)
        masks = _MASKS[count]
        differ[longer] |= (words[start[longer] + 8 * j] & masks) != (words[start[mine[longer]] + 8 * j] & masks)
        longer = longer[length[longer] + 1 > 8 * (j + 1)]
    rest = np.flatnonzero(differ | (length == 0))
    if len(rest):
        length[rest] = _first_delimiter(words, start[rest], w0[rest])
        key[rest] = _KEY_TOKENS.match(words, start[rest], length[rest], w0[rest])
    return length, key


# -- integers, eight digits at a time -----------------------------------------------------------

_ZEROS = _U64(0x3030303030303030)
_INT64_MAX_LOW16 = 3372036854775807  # 9223372036854775807 = 922 * 10**16 + this
_UINT64_MAX_LOW16 = 6744073709551615  # 18446744073709551615 = 1844 * 10**16 + this


def _eight_digits(words: np.ndarray, valid: IntArray) -> tuple[np.ndarray, np.ndarray]:
    """The number in each word's last ``valid`` bytes (the rest read as '0'), and digit validity."""
    keep = ~_MASKS[8 - valid]  # the high ``valid`` bytes
    w = (words & keep) | (_ZEROS & ~keep)
    ok = ((w & _U64(0xF0F0F0F0F0F0F0F0)) == _ZEROS) & (((w & _U64(0x0F0F0F0F0F0F0F0F)) + _U64(0x0606060606060606))
                                                     & _U64(0xF0F0F0F0F0F0F0F0) == 0)
    with np.errstate(over="ignore"):
        x = w - _ZEROS
        x = (x * _U64(10) + (x >> _U64(8))) & _U64(0x00FF00FF00FF00FF)
        x = (x * _U64(100) + (x >> _U64(16))) & _U64(0x0000FFFF0000FFFF)
        x = (x * _U64(10000) + (x >> _U64(32))) & _U64(0xFFFFFFFF)
    return x, ok


def _parse_integers(data: np.ndarray, words: np.ndarray, start: IntArray, end: IntArray, kind: IntArray) -> IntArray:
    """Integers at ``[start, end)``, range-checked per kind; int64 (uint64 bit patterns for U64).

    Decimal ones eight digits at a time; where any is written otherwise (hex, octal, a '+'),
    every one of them is read by protobuf's own integer parser, so the answer is protobuf's.
    """
    try:
        return _parse_decimal(data, words, start, end, kind)
    except Unrecognised:
        return _parse_each(data, start, end, kind)


def _parse_each(data: np.ndarray, start: IntArray, end: IntArray, kind: IntArray) -> IntArray:
    """Integers at ``[start, end)`` one by one with protobuf's parser (which takes ``0x1F``, ``017``)."""
    from google.protobuf import text_format

    raw = data.tobytes()
    signed = {I64: (True, True), U64: (False, True), I32: (True, False), U32: (False, False)}
    values = np.zeros(len(start), dtype=np.int64)
    try:
        for row, (s, e, k) in enumerate(zip(start.tolist(), end.tolist(), kind.tolist())):
            number = text_format.ParseInteger(raw[s:e].decode("ascii"), *signed[k])
            values[row] = number - (1 << 64) if number >= 1 << 63 else number  # a uint64 as its bit pattern
    except (ValueError, UnicodeDecodeError):
        raise Unrecognised("a value that is not an integer protobuf takes") from None
    return values


def _parse_decimal(data: np.ndarray, words: np.ndarray, start: IntArray, end: IntArray, kind: IntArray) -> IntArray:
    """Decimal integers at ``[start, end)``, range-checked per kind; Unrecognised for any other form."""
    negative = data[start] == ord("-")
    digits_start = start + negative
    ndigits = end - digits_start
    unsigned = (kind == U64) | (kind == U32)
    if (ndigits < 1).any() or (ndigits > 20).any() or (negative & unsigned).any():
        raise Unrecognised("an integer in a form this reader does not take")
    if ((data[digits_start] == ord("0")) & (ndigits > 1)).any():
        raise Unrecognised("an integer with a leading zero (octal)")
    low, ok = _eight_digits(words[end - 8], np.minimum(ndigits, 8))
    mid = np.zeros(len(start), dtype=np.uint64)
    high = np.zeros(len(start), dtype=np.uint64)
    longer = np.flatnonzero(ndigits > 8)  # only these have digits in the next word
    if len(longer):
        mid[longer], ok_mid = _eight_digits(words[end[longer] - 16], np.minimum(ndigits[longer] - 8, 8))
        ok[longer] &= ok_mid
        longer = longer[ndigits[longer] > 16]
        if len(longer):
            high[longer], ok_high = _eight_digits(words[end[longer] - 24], ndigits[longer] - 16)
            ok[longer] &= ok_high
    if not ok.all():
        raise Unrecognised("a value that is not a decimal integer")
    rest = mid * _U64(10**8) + low  # the last 16 digits
    long = np.flatnonzero(ndigits >= 19)  # only these can be out of range
    if len(long):
        h, r, d, neg, k = high[long], rest[long], ndigits[long], negative[long], kind[long]
        signed_ok = (d == 19) & ((h < _U64(922)) | ((h == _U64(922)) & (r <= _U64(_INT64_MAX_LOW16) + neg.astype(np.uint64))))
        unsigned_ok = (d == 19) | (h < _U64(1844)) | ((h == _U64(1844)) & (r <= _U64(_UINT64_MAX_LOW16)))
        if not ((k == U64) & unsigned_ok | (k != U64) & signed_ok).all():
            raise Unrecognised("an integer out of range")
    with np.errstate(over="ignore"):
        value = (high * _U64(10**16) + rest).view(np.int64)
    if negative.any():
        value = value - 2 * value * negative  # (arithmetic: np.where is slow on random masks)
    small = np.flatnonzero((kind == I32) | (kind == U32))
    if len(small):
        v, k, neg = value[small], kind[small], negative[small]
        bound = (k == U32) * (2**32 - 1) + (k != U32) * (2**31 - 1 + neg)
        if (np.abs(v) > bound).any():
            raise Unrecognised("an integer out of range for 32 bits")
    return value


# -- strings ------------------------------------------------------------------------------------

_STRING_TOKEN = re.compile(rb'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'')
# A string in adjacent parts, as protobuf joins them ("a" 'b' "c"): each part in either quotes.
_STRING_PARTS = re.compile(rb'(?:(?:"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\')[ \t]*)+')


def _decode_escaped(raw: bytes) -> str:
    """A quoted string with escapes, or in adjacent parts, exactly as protobuf's text parser reads it:
    each part unescaped on its own, the bytes joined, then decoded as UTF-8."""
    from google.protobuf import text_encoding

    if _STRING_TOKEN.fullmatch(raw) is not None:
        parts = [raw]
    elif _STRING_PARTS.fullmatch(raw) is not None:
        parts = _STRING_TOKEN.findall(raw)
    else:
        raise Unrecognised("a string this reader does not take")
    try:
        return b"".join(text_encoding.CUnescape(part.decode("utf-8")[1:-1]) for part in parts).decode("utf-8")
    except ValueError:  # UnicodeDecodeError included
        raise Unrecognised("a string protobuf must judge") from None


# -- one chunk of lines -------------------------------------------------------------------------


@dataclass
class OpenMessage:
    """A message still open where a chunk ends (its close comes in a later chunk)."""

    kind: int
    ordinal: int = -1  # a DeviceStepStats: its ordinal in the builder
    text: list[bytes] = field(default_factory=list)  # a delegated RunMetadata field: its text so far
    # The mark it began with, '{' or '<' (its end must be '}' or '>': the mark + 2); 0 where a chunk
    # read apart begins inside it and cannot know (see TextState.assumed_closes).
    opener: int = 0


@dataclass
class TextState:
    """What one chunk leaves to the next, and what the whole read collects."""

    root: int
    stack: list[OpenMessage] = field(default_factory=list)
    named_devices: set[int] = field(default_factory=set)
    delegated: list[bytes] = field(default_factory=list)  # complete top-level RunMetadata fields, as text
    step_stats_seen: bool = False
    devices: int = 0  # DeviceStepStats opened so far
    # Ends of messages open where a chunk read apart began, whose opening mark it did not see:
    # (level, closing mark), for the merge to check against the marks they really began with.
    assumed_closes: list[tuple[int, int]] = field(default_factory=list)


def _ranks(opens: IntArray, rows: IntArray) -> IntArray:
    """The rank among the opening lines ``opens`` (sorted) of each parent line in ``rows``."""
    at = np.searchsorted(opens, rows)
    if len(rows) and ((at >= len(opens)).any() or (opens[np.minimum(at, len(opens) - 1)] != rows).any()):
        raise Unrecognised("a field under an unexpected message")
    return at


def _unique(objects: IntArray) -> None:
    if len(objects) > 1 and (np.diff(objects) == 0).any():
        raise Unrecognised("a field given twice in one message")


@dataclass
class _Chunk:
    """One chunk's lines, classified."""

    padded: bytes
    data: np.ndarray
    words: np.ndarray
    starts: IntArray
    ends: IntArray
    level: IntArray
    is_open: np.ndarray
    is_close: np.ndarray
    kind: IntArray  # message type of opening lines, -1 elsewhere
    parent: IntArray  # the parent's line, -1 when the parent opened in an earlier chunk
    fields: IntArray  # lines holding a scalar field of a known message
    field_id: IntArray  # per line in ``fields``
    value_start: IntArray  # per line in ``fields``
    plain_strings: bool = False  # no string holds a quote or an escape (see _check_strings)
    text: str | None = None  # the chunk as text, where it is ASCII


def _classify(padded: bytes, state: TextState) -> _Chunk | None:
    data = np.frombuffer(padded, dtype=np.uint8)
    words = _word_view(padded)
    ends = np.flatnonzero(data == 10)
    starts = np.empty_like(ends)
    starts[0] = _PAD
    starts[1:] = ends[:-1] + 1
    nonblank = (ends > starts) & (data[starts] != ord("#"))  # blank lines and whole-line comments
    if not nonblank.all():
        ends, starts = ends[nonblank], starts[nonblank]
    n = len(ends)
    if not n:
        return None

    # Structure: which lines open or close a message, and the depth of each.
    last = data[ends - 1]
    is_open = last == ord("{")
    is_close = last == ord("}")
    angled = b"<" in padded or b">" in padded  # messages in '<' ... '>', as protobuf also takes
    if angled:
        is_open |= last == ord("<")
        is_close |= last == ord(">")
    base = len(state.stack)
    level = base + np.cumsum(is_open.astype(np.int64) - is_close) - is_open
    if (level < 0).any():
        raise Unrecognised("more closing braces than opening ones")
    _check_marks_pair(last, level, is_open, is_close, state, angled)
    indent = 2 * level
    key_start = starts + indent
    if (key_start >= ends).any() or (data[key_start] == ord(" ")).any():
        raise Unrecognised("indentation that is not two spaces per level")
    first_word = words[starts] & _INDENT_MASKS[np.minimum(level, 4)]
    if (first_word != (_U64(0x2020202020202020) & _INDENT_MASKS[np.minimum(level, 4)])).any():
        raise Unrecognised("indentation that is not two spaces per level")
    deeper = np.flatnonzero(level > 4)
    for j in range(8, int(indent.max()), 8):
        deeper = deeper[indent[deeper] > j]
        masks = _MASKS[np.minimum(indent[deeper] - j, 8)]
        if ((words[starts[deeper] + j] & masks) != (_U64(0x2020202020202020) & masks)).any():
            raise Unrecognised("indentation that is not two spaces per level")
    if (is_close & (key_start != ends - 1)).any():
        raise Unrecognised("a closing brace with something else on its line")

    # Field names: up to the first ':' or ' ', which must begin ": " (fields), " {" or ": {" (messages).
    named = np.flatnonzero(~is_close)
    name_start = key_start[named]
    name_length, matched = _names(words, name_start)
    after = name_start + name_length
    colon = data[after] == ord(":")
    opening = is_open[named]
    line_end = ends[named]
    fine = (opening & (after + 2 + colon == line_end)) | (~opening & colon & (after + 2 < line_end))
    fine &= (data[after + colon] == ord(" ")) & (name_length > 0)
    if not fine.all():
        raise Unrecognised("a line written other than `name: value`, `name {` or `}`")
    key = np.full(n, len(_KEYS), dtype=np.int64)
    key[named] = matched + (matched < 0) * (len(_KEYS) + 1)
    opens = np.flatnonzero(is_open)
    fields = np.compress(~opening, named)
    value_start = np.compress(~opening, after) + 2
    # Blanks around a value: found here, before anything is read, so that the layout is redone.
    blank = data[value_start] == ord(" ")
    blank |= data[value_start] == ord("\t")
    blank |= data[ends[fields] - 1] == ord(" ")
    blank |= data[ends[fields] - 1] == ord("\t")
    if blank.any():
        raise Unrecognised("blanks around a value")

    # Nesting: a line's parent is the last opening line one level up; its type follows from that.
    parent = np.full(n, -1, dtype=np.int64)
    parent_kind = np.full(n, -1, dtype=np.int64)
    kind = np.full(n, -1, dtype=np.int64)
    top = int(level.max())
    by_level = np.argsort(np.maximum(level, is_close * (top + 1)).astype(np.int8), kind="stable")  # a radix sort
    bounds = np.concatenate([[0], np.cumsum(np.bincount(np.compress(~is_close, level), minlength=top + 1))])
    levels = [by_level[bounds[lvl]:bounds[lvl + 1]] for lvl in range(top + 1)]
    for lvl, rows in enumerate(levels):
        if lvl == 0:
            parent_kind[rows] = state.root
        else:
            above = levels[lvl - 1]
            above = np.compress(is_open[above], above)
            at = np.searchsorted(above, rows) - 1
            outside = at < 0  # lines whose parent opened in an earlier chunk
            parent[rows] = above[np.maximum(at, 0)] if len(above) else -1
            parent_kind[rows] = kind[parent[rows]]
            if outside.any():
                if lvl - 1 >= base:
                    raise Unrecognised("a line outside any message")
                parent[rows[outside]] = -1
                parent_kind[rows[outside]] = state.stack[lvl - 1].kind
        opening = np.compress(is_open[rows], rows)
        outer = parent_kind[opening]
        kind[opening] = _CHILD[outer, key[opening]]
        delegated = (outer == DELEG) | (outer == SKIP)
        if delegated.any():
            kind[opening[delegated]] = SKIP
    if (kind[opens] < 0).any():
        _unknown_names(opens, fields, kind, key, parent_kind, starts, key_start)

    # Scalar fields: known to their message.
    outer = parent_kind[fields]
    plain = (outer != DELEG) & (outer != SKIP)
    if not plain.all():
        fields, value_start, outer = fields[plain], value_start[plain], outer[plain]
    if (data[value_start] == ord("[")).any():  # a list (in a delegated field, protobuf's to read): laid out again
        raise Unrecognised("a list of values")
    field_id = _FIELD[outer, key[fields]]
    if (field_id < 0).any():
        _unknown_names(opens, fields, kind, key, parent_kind, starts, key_start)

    # Singular messages given twice in one parent.
    singular = opens[_SINGULAR_CHILD[parent_kind[opens], key[opens]]]
    if len(singular) > 1:
        order = np.lexsort((key[singular], parent[singular]))
        p, k = parent[singular][order], key[singular][order]
        if ((np.diff(p) == 0) & (np.diff(k) == 0) & (p[1:] >= 0)).any():
            raise Unrecognised("a message field given twice")
    return _Chunk(padded, data, words, starts, ends, level, is_open, is_close, kind, parent, fields, field_id,
                  value_start)


class _UnknownName(Unrecognised):
    """A name (or an extension) that the message it is in does not have, where this reader parses
    that message itself (not inside a delegated field): the first such line of a chunk, in bytes
    of the padded chunk. :func:`read_chunk` decides whether it is the text's first error."""

    def __init__(self, line_start: int, name_start: int, message: int):
        super().__init__("a field this reader's schema does not have")
        self.line_start, self.name_start, self.message = line_start, name_start, message


def _unknown_names(opens: IntArray, fields: IntArray, kind: IntArray, key: IntArray, parent_kind: IntArray,
                   starts: IntArray, key_start: IntArray) -> None:
    """Raise :class:`_UnknownName` for the first line (of ``opens`` and ``fields``) whose name its
    message does not have; lines inside an unknown message or a delegated field are not counted."""
    rows = []
    for lines, table in ((opens, _CHILD), (fields, _FIELD)):
        outer = parent_kind[lines]
        parsed = (outer >= 0) & (outer < DELEG)  # (DELEG and SKIP come last)
        known = table[np.maximum(outer, 0), key[lines]] >= 0
        rows.append(lines[parsed & ~known])
    wrong = np.concatenate(rows)
    if not len(wrong):
        raise Unrecognised("a field this reader does not know")
    row = int(wrong.min())
    message = int(parent_kind[row])
    if _CHILD[message, key[row]] >= 0 or _FIELD[message, key[row]] >= 0:  # a known field, written as the other kind
        raise Unrecognised("a message field written as a value, or a value as a message")
    raise _UnknownName(int(starts[row]), int(key_start[row]), message)


def _check_marks_pair(last: np.ndarray, level: IntArray, is_open: np.ndarray, is_close: np.ndarray, state: TextState,
                      angled: bool) -> None:
    """Check that each message ends with the mark that pairs with the one it began with: '{' with
    '}', '<' with '>' (the closing mark is the opening one + 2).

    At each level, marks alternate: an open, its close, the next open... except that the first
    mark at a level below the chunk's start closes a message opened in an earlier chunk, checked
    against ``state`` (or, where a chunk read apart cannot know how it began, noted for the merge).
    The pairs within the chunk need checking only where it has a line ending in '<' or '>'.
    """
    if state.stack:
        marks = np.flatnonzero((is_open | is_close) & (level < len(state.stack)))
        levels, first = np.unique(level[marks], return_index=True)
        for lvl, row in zip(levels.tolist(), marks[first].tolist()):
            opener, closer = state.stack[lvl].opener, int(last[row])
            if not opener:
                state.assumed_closes.append((lvl, closer))
            elif opener + 2 != closer:
                raise Unrecognised("a message closed by another mark than it began with")
    if angled:
        marks = np.flatnonzero(is_open | is_close)
        marks = marks[np.lexsort((marks, level[marks]))]  # by level, then in order
        pairs = np.flatnonzero(is_open[marks[:-1]] & is_close[marks[1:]] & (level[marks[:-1]] == level[marks[1:]]))
        if (last[marks[pairs]].astype(np.int64) + 2 != last[marks[pairs + 1]]).any():
            raise Unrecognised("a message closed by another mark than it began with")


class NodeSink(Protocol):
    """What reading a chunk tells the builder (a :class:`~memtrace.builder.TraceBuilder`, or in a
    worker process a :class:`_Recorder`)."""

    def add_device_stats(self) -> int: ...
    def set_device_name(self, ordinal: int, name: str) -> None: ...
    def add_nodes(self, block: NodeBlock) -> None: ...


def read_chunk(buffer: bytes, state: TextState, builder: NodeSink, first_line: int = 0) -> None:
    """Read complete lines: ``buffer`` ends with a newline, and no node spans two chunks.

    A chunk laid out otherwise than protobuf's printers write (tabs, a message on one line,
    blanks at line ends, lists) is laid out so first (:func:`~memtrace.read.text_layout.canonical_layout`),
    before anything is read. ``first_line`` is the line of the file the chunk begins on, where its
    lines are the file's (0 where they were laid out again): a field the schema does not have is
    then refused here (:class:`~memtrace.read.detect.UnknownField`), as protobuf would refuse it.
    """
    noted = len(state.assumed_closes)
    try:
        chunk = _classify(bytes(_PAD) + buffer + bytes(_PAD), state)
    except Unrecognised as error:
        if first_line and isinstance(error, _UnknownName):
            _refuse_unknown(buffer, error, state, first_line)
        del state.assumed_closes[noted:]  # (noted by the reading that stepped aside)
        laid_out = canonical_layout(buffer, state.root, [entry.kind for entry in state.stack])
        chunk = _classify(bytes(_PAD) + laid_out + bytes(_PAD), state)
    if chunk is None:
        return
    dev_rows = np.flatnonzero(chunk.kind == DEV)
    dev_ordinals = np.array([builder.add_device_stats() for _ in range(len(dev_rows))], dtype=np.int64)
    state.devices += len(dev_rows)
    _read_values(chunk, state, builder, dev_rows, dev_ordinals)
    _close_and_carry(chunk, state, dev_rows, dev_ordinals)


# A name protobuf's tokenizer reads as one identifier; an extension's, in brackets, with the start
# of its last part (where protobuf's error points).
_IDENTIFIER = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*(?=[: ])")
_EXTENSION = re.compile(rb"\[[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\](?=[: ])")


class _Discard:
    """A builder that keeps nothing: the lines before an unknown field are read only to check them."""

    def __init__(self, first_ordinal: int):
        self.devices = first_ordinal

    def add_device_stats(self) -> int:
        self.devices += 1
        return self.devices - 1

    def set_device_name(self, ordinal: int, name: str) -> None:
        pass

    def add_nodes(self, block: NodeBlock) -> None:
        pass


def _refuse_unknown(buffer: bytes, unknown: _UnknownName, state: TextState, first_line: int) -> None:
    """Raise UnknownField for ``unknown`` with protobuf's words, line and column, where it is the
    text's first error; else Unrecognised (protobuf's parser then finds the error before it).

    The chunks before were read, so the lines before it in this chunk are all that is left to
    check: they are read as a chunk of their own (into nothing). A delegated field (a graph) before
    it is parsed only at the end, so there protobuf decides.
    """
    if state.delegated or any(entry.kind >= DELEG for entry in state.stack):
        raise Unrecognised("a field the schema does not have, after a delegated field")
    name_at = unknown.name_start - _PAD
    message = TYPE_NAMES[unknown.message]
    plain = _IDENTIFIER.match(buffer, name_at)
    if plain is not None:
        detail = f'Message type "{message}" has no field named "{plain.group().decode()}".'
        column = name_at
    else:
        extension = _EXTENSION.match(buffer, name_at)
        if extension is None:
            raise Unrecognised("a name protobuf's tokenizer must judge")
        detail = f'Message type "{message}" does not have extensions.'
        column = name_at + max(extension.group().rfind(b"."), 0) + 1  # protobuf points at the last part
    line_start = unknown.line_start - _PAD
    prefix = buffer[:line_start]
    chunk = _classify(bytes(_PAD) + prefix + bytes(_PAD), state) if prefix.strip() else None
    if chunk is not None:
        if (chunk.kind == DELEG).any():
            raise Unrecognised("a field the schema does not have, after a delegated field")
        dev_rows = np.flatnonzero(chunk.kind == DEV)
        sink = _Discard(state.devices)
        dev_ordinals = np.array([sink.add_device_stats() for _ in range(len(dev_rows))], dtype=np.int64)
        _read_values(chunk, state, sink, dev_rows, dev_ordinals)
        _check_step_stats_once(chunk, state)
    raise UnknownField(detail, first_line + prefix.count(b"\n"), column - line_start + 1)


def _check_step_stats_once(chunk: _Chunk, state: TextState) -> None:
    """A RunMetadata's step_stats given twice is invalid (protobuf's reader says so)."""
    if state.root == RM:
        top = np.flatnonzero((chunk.level == 0) & chunk.is_open)
        opened = int((chunk.kind[top] == SS).sum())
        if opened and (state.step_stats_seen or opened > 1):
            raise Unrecognised("step_stats given twice")
        state.step_stats_seen |= bool(opened)


def _close_and_carry(chunk: _Chunk, state: TextState, dev_rows: IntArray, dev_ordinals: IntArray) -> None:
    """Collect delegated top-level fields that closed, and the messages still open, for the next chunk."""
    level, is_open, is_close, kind = chunk.level, chunk.is_open, chunk.is_close, chunk.kind
    top = np.flatnonzero((level == 0) & (is_open | is_close))
    _check_step_stats_once(chunk, state)
    region: list[bytes] | None = None
    region_start = -1
    if state.stack and state.stack[0].kind == DELEG:
        region, region_start = state.stack[0].text, int(chunk.starts[0])
    for row in top.tolist():
        if is_open[row] and kind[row] == DELEG:
            region, region_start = [], int(chunk.starts[row])
        elif is_close[row] and region is not None:
            state.delegated.append(b"".join([*region, chunk.padded[region_start:int(chunk.ends[row]) + 1]]))
            region = None

    stack: list[OpenMessage] = []
    depth = len(state.stack) + int(is_open.sum()) - int(is_close.sum())
    braces = np.flatnonzero(is_open | is_close)
    for lvl in range(depth):
        at_level = braces[level[braces] == lvl]
        if not len(at_level):
            stack.append(state.stack[lvl])
            continue
        row = int(at_level[-1])
        if not is_open[row]:
            raise Unrecognised("inconsistent nesting")
        entry = OpenMessage(int(kind[row]), opener=int(chunk.data[chunk.ends[row] - 1]))
        if entry.kind == DEV:
            entry.ordinal = int(dev_ordinals[np.searchsorted(dev_rows, row)])
        stack.append(entry)
    if any(entry.kind not in (SS, DEV, DELEG, SKIP) for entry in stack):
        raise Unrecognised("a node cut in two")
    if region is not None:
        if not stack or stack[0].kind != DELEG:
            raise Unrecognised("inconsistent nesting")
        stack[0].text = [*region, chunk.padded[region_start:int(chunk.ends[-1]) + 1]]
    state.stack = stack


def _check_strings(chunk: _Chunk, rows: IntArray) -> None:
    """Check that every string field is in double quotes, and whether any holds a quote or escape.

    Where the chunk has exactly two '"' per string field (and no backslash), no string can hold
    a quote or an escape; only otherwise are the quotes located one by one.
    """
    start, end = chunk.value_start[rows], chunk.ends[chunk.fields[rows]]
    data = chunk.data
    if len(rows) and int((end - start).max()) > MAX_STRING_BYTES:
        raise TooLarge(f"a string of over {format_bytes(MAX_STRING_BYTES)} (no name or label in a trace is that long)")
    double = (data[start] == ord('"')) & (data[end - 1] == ord('"'))
    if not double.all():  # single quotes, or parts in either, as protobuf also takes: read one by one
        quoted = ((data[start] == ord('"')) | (data[start] == ord("'"))) & (
            (data[end - 1] == ord('"')) | (data[end - 1] == ord("'")))
        if not quoted.all():
            raise Unrecognised("a string value not in quotes")
    if (end - start < 2).any():
        raise Unrecognised("a string value not in quotes")
    quotes = int(np.count_nonzero(data == ord('"')))
    chunk.plain_strings = quotes == 2 * len(rows) and b"\\" not in chunk.padded and bool(double.all())
    if chunk.padded.isascii():
        chunk.text = chunk.padded.decode("ascii")


def _strings(chunk: _Chunk, rows: IntArray) -> list[str]:
    """The string values of field lines ``rows`` (indices into ``chunk.fields``), checked before."""
    start, end = (chunk.value_start[rows] + 1).tolist(), (chunk.ends[chunk.fields[rows]] - 1).tolist()
    text, padded = chunk.text, chunk.padded
    if chunk.plain_strings:
        if text is not None:
            return list(map(text.__getitem__, map(slice, start, end)))
        try:
            return list(map(bytes.decode, map(padded.__getitem__, map(slice, start, end))))
        except UnicodeDecodeError:
            raise Unrecognised("a string that is not UTF-8") from None
    data = chunk.data
    quotes = np.flatnonzero(data == ord('"'))
    backslashes = np.flatnonzero(data == ord("\\"))
    first, last = chunk.value_start[rows], chunk.ends[chunk.fields[rows]]
    simple = np.searchsorted(quotes, last) - np.searchsorted(quotes, first) == 2
    simple &= (data[first] == ord('"')) & (data[last - 1] == ord('"'))
    simple &= np.searchsorted(backslashes, last) == np.searchsorted(backslashes, first)
    try:
        return [padded[s:e].decode() if ok else _decode_escaped(padded[s - 1:e + 1])
                for s, e, ok in zip(start, end, simple.tolist())]
    except UnicodeDecodeError:
        raise Unrecognised("a string that is not UTF-8") from None


def _read_values(chunk: _Chunk, state: TextState, builder: NodeSink, dev_rows: IntArray,
                 dev_ordinals: IntArray) -> None:
    fields, field_id, parent, kind = chunk.fields, chunk.field_id, chunk.parent, chunk.kind
    kinds = _FIELD_KIND[field_id]
    ends = chunk.ends[fields]

    # Every value, by how it is written.
    numbers = np.zeros(len(fields), dtype=np.int64)
    integer = np.flatnonzero(kinds <= U32)
    numbers[integer] = _parse_integers(chunk.data, chunk.words, chunk.value_start[integer], ends[integer],
                                       kinds[integer])
    for token_kind, tokens in ((BOOL, _BOOL_TOKENS), (ENUM, _DTYPE_TOKENS)):
        rows = np.flatnonzero(kinds == token_kind)
        found = tokens.match(chunk.words, chunk.value_start[rows], ends[rows] - chunk.value_start[rows])
        if token_kind == ENUM and (found < 0).any():  # a number instead of a name
            as_number = rows[found < 0]
            found[found < 0] = _parse_integers(chunk.data, chunk.words, chunk.value_start[as_number],
                                               ends[as_number], np.full(len(as_number), I32))
        elif (found < 0).any():
            raise Unrecognised("a bool written other than true/false")
        numbers[rows] = found
    _check_strings(chunk, np.flatnonzero(kinds == STR))

    # Each field line's message: its rank among the opening lines of that message's type.
    type_rank = np.zeros(len(kind), dtype=np.int64)
    by_kind = np.argsort(kind.astype(np.int8), kind="stable")  # a radix sort; -1 (no message) first
    kind_bounds = np.concatenate([[0], np.cumsum(np.bincount(kind + 1, minlength=TYPES + 1))])
    opens_of = {}
    for t in (NODE, MEM, REC, OUT, TD, SHAPE, DIM, AD, MS, REF, TN):
        opens_of[t] = by_kind[kind_bounds[t + 1]:kind_bounds[t + 2]]
        type_rank[opens_of[t]] = np.arange(len(opens_of[t]))
    owner_rank = type_rank[parent[fields]]
    order = np.argsort(field_id.astype(np.int8), kind="stable")  # a radix sort
    bounds = np.concatenate([[0], np.cumsum(np.bincount(field_id, minlength=len(_FIELD_INFO)))])
    by_field: dict[tuple[int, str], tuple[IntArray, IntArray]] = {}  # -> (rows in fields, owner ranks)
    for fid, (message, name, _, repeated) in enumerate(_FIELD_INFO):
        rows = order[bounds[fid]:bounds[fid + 1]]
        if message == DEV:
            owners = parent[fields[rows]]
            ordinals = np.full(len(rows), -1, dtype=np.int64)
            carried = owners < 0  # a device named after nodes that came in an earlier chunk
            ordinals[carried] = [state.stack[int(chunk.level[fields[r]]) - 1].ordinal for r in rows[carried]]
            ordinals[~carried] = dev_ordinals[_ranks(dev_rows, owners[~carried])]
            by_field[(message, name)] = (rows, ordinals)
            continue
        ranks = owner_rank[rows]
        if (parent[fields[rows]] < 0).any():
            raise Unrecognised("a field of a message opened in an earlier chunk")
        if not repeated:
            _unique(ranks)
        by_field[(message, name)] = (rows, ranks)

    def strings(message: int, name: str, size: int) -> list[str]:
        rows, ranks = by_field[(message, name)]
        texts = _strings(chunk, rows)
        if len(ranks) == size and (size == 0 or (ranks[0] == 0 and (np.diff(ranks) == 1).all())):
            return texts
        values = [""] * size
        for rank, text in zip(ranks.tolist(), texts):
            values[rank] = text
        return values

    for message, name in ((DIM, "name"), (TN, "value")):  # read (and so checked), not kept
        _strings(chunk, by_field[(message, name)][0])
    rows, ordinals = by_field[(DEV, "device")]
    for text, ordinal in zip(_strings(chunk, rows), ordinals.tolist()):
        if ordinal in state.named_devices:
            raise Unrecognised("a device named twice")
        state.named_devices.add(ordinal)
        builder.set_device_name(ordinal, text)

    def column(message: int, name: str, size: int) -> IntArray:
        rows, ranks = by_field[(message, name)]
        values = np.zeros(size, dtype=np.int64)
        values[ranks] = numbers[rows]
        return values

    def owner(child: int, message: int) -> IntArray:
        return _ranks(opens_of[message], parent[opens_of[child]])

    nodes = len(opens_of[NODE])
    if not nodes:
        return
    node_parent = parent[opens_of[NODE]]
    carried = node_parent < 0
    node_dev = np.empty(nodes, dtype=np.int64)
    if carried.any():
        node_dev[carried] = state.stack[-1].ordinal if state.stack and state.stack[-1].kind == DEV else -1
        if (node_dev[carried] < 0).any():
            raise Unrecognised("a node outside a device")
    node_dev[~carried] = dev_ordinals[_ranks(dev_rows, node_parent[~carried])]

    nanos = column(NODE, "all_start_nanos", nodes) != 0
    micros = {name: micros_to_ns(column(NODE, name + "_micros", nodes))
              for name in ("all_start", "op_start_rel", "op_end_rel", "all_end_rel", "scheduled")}
    in_nanos = {name: column(NODE, name + "_nanos", nodes)
                for name in ("all_start", "op_start_rel", "op_end_rel", "all_end_rel", "scheduled")}
    timed = {name: np.where(nanos, in_nanos[name], micros[name]) for name in micros}
    scheduled = np.where(nanos & (in_nanos["scheduled"] != 0), in_nanos["scheduled"], micros["scheduled"])

    ms_node = owner(MS, NODE)
    temp = np.zeros(nodes, dtype=np.int64)
    persistent = np.zeros(nodes, dtype=np.int64)
    temp[ms_node] = column(MS, "temp_memory_size", len(ms_node))
    persistent[ms_node] = column(MS, "persistent_memory_size", len(ms_node))
    device_temp = np.zeros(nodes, dtype=np.int64)
    device_persistent = np.zeros(nodes, dtype=np.int64)
    device_temp[ms_node] = column(MS, "device_temp_memory_size", len(ms_node))
    device_persistent[ms_node] = column(MS, "device_persistent_memory_size", len(ms_node))
    id_rows, id_ms = by_field[(MS, "persistent_tensor_alloc_ids")]
    id_order = np.argsort(id_rows, kind="stable")
    id_node = ms_node[id_ms[id_order]]

    mem_node = owner(MEM, NODE)
    mems = len(mem_node)
    rec_mem = owner(REC, MEM)
    recs = len(rec_mem)
    out_node = owner(OUT, NODE)
    outs = len(out_node)
    td_out = owner(TD, OUT)
    ad_out = td_out[owner(AD, TD)]
    shape_out = td_out[owner(SHAPE, TD)]
    dim_out = shape_out[owner(DIM, SHAPE)]

    def scatter(values: IntArray, where: IntArray, size: int) -> IntArray:
        result = np.zeros(size, dtype=np.int64)
        result[where] = values
        return result

    ads = len(ad_out)
    rank = np.full(outs, -1, dtype=np.int64)
    known = column(SHAPE, "unknown_rank", len(shape_out)) == 0
    rank[shape_out[known]] = 0
    dims_kept = rank[dim_out] >= 0
    rank += np.bincount(dim_out[dims_kept], minlength=outs)
    out_allocator = [""] * outs
    for rank_in_ad, name in enumerate(strings(AD, "allocator_name", ads)):
        out_allocator[int(ad_out[rank_in_ad])] = name

    block = NodeBlock(
        dev=node_dev,
        name=strings(NODE, "node_name", nodes),
        label=strings(NODE, "timeline_label", nodes),
        start_ns=timed["all_start"],
        op_start_rel_ns=timed["op_start_rel"],
        op_end_rel_ns=timed["op_end_rel"],
        end_rel_ns=timed["all_end_rel"],
        scheduled_ns=scheduled,
        thread_id=column(NODE, "thread_id", nodes),
        temp_bytes=temp,
        persistent_bytes=persistent,
        device_temp_bytes=device_temp,
        device_persistent_bytes=device_persistent,
        persistent_count=np.bincount(id_node, minlength=nodes).astype(np.int64),
        persistent_ids=numbers[id_rows[id_order]],
        mem_node=mem_node,
        mem_allocator=strings(MEM, "allocator_name", mems),
        mem_total=column(MEM, "total_bytes", mems),
        mem_peak=column(MEM, "peak_bytes", mems),
        mem_live=column(MEM, "live_bytes", mems),
        mem_in_use=column(MEM, "allocator_bytes_in_use", mems),
        mem_record_count=np.bincount(rec_mem, minlength=mems).astype(np.int64),
        rec_micros=column(REC, "alloc_micros", recs),
        rec_bytes=column(REC, "alloc_bytes", recs),
        out_node=out_node,
        out_slot=column(OUT, "slot", outs),
        out_allocator=out_allocator,
        out_allocation_id=scatter(column(AD, "allocation_id", ads), ad_out, outs),
        out_requested=scatter(column(AD, "requested_bytes", ads), ad_out, outs),
        out_allocated=scatter(column(AD, "allocated_bytes", ads), ad_out, outs),
        out_ptr=scatter(column(AD, "ptr", ads), ad_out, outs).view(np.uint64),
        out_single_ref=scatter(column(AD, "has_single_reference", ads), ad_out, outs).astype(np.bool_),
        out_dtype=scatter(column(TD, "dtype", len(td_out)), td_out, outs),
        out_rank=rank,
        out_dims=column(DIM, "size", len(dim_out))[dims_kept],
    )
    builder.add_nodes(block)


def after_chunk(count: int, on_chunk: Callable[[], None] | None) -> None:
    """After each chunk: now and then give freed memory back, and report progress."""
    if count % _TRIM_EVERY == 0:
        release_memory()
    if on_chunk is not None:
        on_chunk()
