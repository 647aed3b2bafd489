"""The fast path for StepStats / RunMetadata in protobuf text format: the whole file, in chunks.

The text is cut into chunks of whole lines, each just before a ``node_stats`` line or after a
top-level message, so the file streams in fixed-size pieces and is never held whole. Each
chunk is parsed into columns by :mod:`memtrace.read.text_chunks`, here or, with ``jobs`` over
1, in worker processes (:mod:`memtrace.read.text_jobs`).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator
from typing import IO

from ..units import format_bytes
from . import text_jobs
from .builder import TraceBuilder
from .detect import TooLarge, Unrecognised
from .text_chunks import TextState, after_chunk, read_chunk
from .text_schema import RM, SS

CHUNK_BYTES = 4 << 20
# A line longer than this is refused: no name or value in a real trace comes near it, and every
# reader would have to hold it whole (protobuf's several times over).
MAX_LINE_BYTES = 64 << 20
# Text with no place to cut in this many bytes is not laid out as protobuf's printers write it.
MAX_UNCUT_BYTES = 64 << 20

# -- the whole file -----------------------------------------------------------------------------

ROOTS = {"StepStats": SS, "RunMetadata": RM}


def read(stream: IO[bytes], head: bytes, root: str, builder: TraceBuilder,
         on_chunk: Callable[[], None] | None = None, chunk_bytes: int | None = None, jobs: int = 1) -> list[bytes]:
    """Read a whole text trace whose first bytes (already read) are ``head``; returns delegated fields.

    The delegated fields are the texts of top-level RunMetadata fields other than ``step_stats``
    (graphs), each a complete RunMetadata text with one field, for protobuf to parse. With
    ``jobs`` over 1, that many processes read the chunks (see :mod:`memtrace.read.text_jobs`).
    """
    state = TextState(ROOTS[root])
    chunks = _chunks(stream, head, state.root, chunk_bytes or CHUNK_BYTES)
    if jobs > 1:  # and more than one chunk: else the processes would only cost their start
        first = [chunk for chunk in (next(chunks, None), next(chunks, None)) if chunk is not None]
        chunks = itertools.chain(first, chunks)
        jobs = jobs if len(first) > 1 else 1
    if jobs > 1:
        text_jobs.read_in_parallel(chunks, state, builder, on_chunk, jobs)
    else:
        for count, (chunk, _) in enumerate(chunks, 1):
            read_chunk(chunk, state, builder)
            after_chunk(count, on_chunk)
    if state.stack:
        raise Unrecognised("the text ends inside a message")
    return state.delegated


def _chunks(stream: IO[bytes], head: bytes, root: int, chunk_bytes: int) -> Iterator[tuple[bytes, bool]]:
    """The text in chunks of whole lines, each cut just before a node or after a top-level message.

    With each chunk, whether it begins at a node (inside a device) rather than at the top level.
    """
    pending, at_node = b"", False
    for data in _tidied(itertools.chain([head], iter(lambda: stream.read(chunk_bytes), b""))):
        pending += data
        if len(pending) < chunk_bytes:
            continue
        cut, cut_at_node = _last_cut(pending, root)
        if not cut:  # no place to cut yet: read on, but not without end
            _check_no_cut(pending)
            continue
        piece = _without_comments(pending[:cut])
        if piece:  # not only comments
            yield piece, at_node
        pending, at_node = pending[cut:], cut_at_node
    if pending:
        piece = _without_comments(pending if pending.endswith(b"\n") else pending + b"\n")
        if piece:
            yield piece, at_node


# A line that begins a node, at a device's indentation (two spaces or a tab a level): the text can be
# cut before it (a line never begins inside a string or a comment). What follows the name says
# it is the field: ` {`, `{`, ` <`, `: [` and so on.
_NODE_LINES = {SS: (b"\n  node_stats", b"\n\tnode_stats"), RM: (b"\n    node_stats", b"\n\t\tnode_stats")}
_AFTER_NODE_NAME = frozenset(b" \t{<:")


def _is_node_line(text: bytes, at: int, line: bytes) -> bool:
    """Whether the ``line`` found at ``at`` goes on as the node_stats field (not a longer name)."""
    after = at + len(line)
    return after < len(text) and text[after] in _AFTER_NODE_NAME


def _last_cut(pending: bytes, root: int) -> tuple[int, bool]:
    """Where to cut ``pending``: before its last node line or after its last top-level message,
    whichever comes later, and whether that is a node; 0 where there is neither."""
    node_cut = 0
    for line in _NODE_LINES[root]:
        at = pending.rfind(line)
        while at >= 0 and not _is_node_line(pending, at, line):
            at = pending.rfind(line, 0, at)
        if at >= 0:
            node_cut = at + 1
            break
    top_cut = pending.rfind(b"\n}\n") + 3
    if node_cut <= 0 and top_cut <= 3:
        top_cut = pending.rfind(b"\n>\n") + 3  # (a message in '<' ... '>')
    if top_cut <= 3 and not node_cut:
        return 0, False
    return (node_cut, True) if node_cut > top_cut else (top_cut, False)


def _tidied(pieces: Iterator[bytes]) -> Iterator[bytes]:
    """The text with CRLF line ends as LF (a trace saved on Windows): whitespace to protobuf, and
    never inside a string, which cannot span lines. A CR that ends a piece is held back until the
    next piece says whether an LF follows it."""
    carry = b""
    for data in pieces:
        if carry:
            data = carry + data
        body = data.rstrip(b"\r")
        carry = data[len(body):]
        if len(carry) > MAX_LINE_BYTES:
            raise TooLarge(f"a line of over {format_bytes(MAX_LINE_BYTES)} (no name or value is that long in a trace)")
        yield body.replace(b"\r\n", b"\n") if b"\r" in body else body
    if carry:
        yield carry


# protobuf text allows a '#' comment wherever whitespace may go, to the end of the line. They are
# cut here, whole lines and the ends of lines: a string cannot span lines, so the first '#' on a
# line outside its strings (in double or single quotes, with escapes) starts one. A line with a
# quote left open keeps its '#' (the text is not valid, and protobuf says so).
_COMMENT_LINE = re.compile(rb"^[ \t]*#[^\n]*\n", re.MULTILINE)
_COMMENT_AFTER = re.compile(rb'''^((?:[^"'\n#]++|"(?:[^"\\\n]|\\.)*+"|'(?:[^'\\\n]|\\.)*+')*+)#[^\n]*$''', re.MULTILINE)


def _without_comments(chunk: bytes) -> bytes:
    """The chunk with its comments cut (see above); the same object where it has no '#'."""
    if b"#" not in chunk:
        return chunk
    chunk = _COMMENT_LINE.sub(b"", chunk)
    return _COMMENT_AFTER.sub(lambda m: m.group(1).rstrip(b" \t"), chunk) if b"#" in chunk else chunk


def _check_no_cut(pending: bytes) -> None:
    """Refuse text that would have to be held whole: one line over MAX_LINE_BYTES (TooLarge), or a
    layout with no place to cut for many chunks (Unrecognised: protobuf's reader decides)."""
    line_start = pending.rfind(b"\n") + 1
    if len(pending) - line_start > MAX_LINE_BYTES:
        raise TooLarge(f"a line of over {format_bytes(MAX_LINE_BYTES)} (no name or value is that long in a trace)")
    if len(pending) > MAX_UNCUT_BYTES:
        raise Unrecognised("no place to cut the text")
