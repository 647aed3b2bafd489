"""The fast path for StepStats / RunMetadata in protobuf text format: the whole file, in chunks.

The text is cut into chunks of whole lines, each just before a ``node_stats`` line or after a
top-level message, so the file streams in fixed-size pieces and is never held whole. Where it
has no such line to cut at (nodes not on lines of their own: a file on one line, a list of
nodes), it streams through :class:`~memtrace.read.text_layout.Layout`, which lays it out again
with such lines, until its own lines can be cut again. Each chunk is parsed into columns by
:mod:`memtrace.read.text_chunks`, here or, with ``jobs`` over 1, in worker processes
(:mod:`memtrace.read.text_jobs`).
"""

from __future__ import annotations

import codecs
import itertools
import re
from collections.abc import Callable, Generator, Iterator
from typing import IO

from ..units import format_bytes
from . import text_chunks, text_jobs
from .builder import TraceBuilder
from .detect import TooLarge, Unrecognised
from .text_chunks import TextState, after_chunk, read_chunk
from .text_layout import Layout
from .text_schema import DEV, RM, SS

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
    # Where text must be laid out again before it can be cut, the layout starts inside the
    # messages open there: read in order, the state knows them; chunks read apart assume them
    # from where the text was cut, and the merge checks the assumption.
    open_kinds = (lambda: [entry.kind for entry in state.stack]) if jobs == 1 else None
    chunks: Iterator[tuple[bytes, bool, int]] = _chunks(stream, head, state.root, chunk_bytes or CHUNK_BYTES, open_kinds)
    if jobs > 1:  # and more than one chunk: else the processes would only cost their start
        first = [chunk for chunk in (next(chunks, None), next(chunks, None)) if chunk is not None]
        chunks = itertools.chain(first, chunks)
        jobs = jobs if len(first) > 1 else 1
    if jobs > 1:
        text_jobs.read_in_parallel(chunks, state, builder, on_chunk, jobs)
    else:
        for count, (chunk, _, first_line) in enumerate(chunks, 1):
            read_chunk(chunk, state, builder, first_line)
            after_chunk(count, on_chunk)
    if state.stack:
        raise Unrecognised("the text ends inside a message")
    return state.delegated


def _chunks(stream: IO[bytes], head: bytes, root: int, chunk_bytes: int,
            open_kinds: Callable[[], list[int]] | None) -> Generator[tuple[bytes, bool, int], None, None]:
    """The text in chunks of whole lines, each cut just before a node or after a top-level message.

    With each chunk, whether it begins at a node (inside a device) rather than at the top level,
    and the line of the file it begins on (0 for lines laid out again, which are not the file's).
    Where a chunk's worth of text holds nodes but no line to cut before (nodes not on lines of
    their own: a whole file on one line, a list of nodes), the text is laid out again as it
    streams (:func:`_laid_out`), and cut where the layout's lines can be, until its own lines can
    be cut again. ``open_kinds`` says which messages are open where that begins (see :func:`read`).
    """
    pieces = _tidied(_utf8_checked(itertools.chain([head], iter(lambda: stream.read(chunk_bytes), b""))))
    pending, at_node = b"", False
    line = 1  # the line of the file ``pending`` begins on
    for data in pieces:
        pending += data
        if len(pending) < chunk_bytes:
            continue
        cut, cut_at_node = _last_cut(pending, root)
        if not cut:
            if not _holds_nodes_off_their_lines(pending):  # one large node or graph: read on, but not without end
                _check_no_cut(pending)
                continue
            kinds = open_kinds() if open_kinds is not None else _open_at(root, at_node)
            pending, at_node, lines = yield from _laid_out(Layout(root, kinds, at_node), pending, pieces, root)
            line += lines
            continue
        piece = _without_comments(pending[:cut])
        if piece:
            yield piece, at_node, line
        line += pending.count(b"\n", 0, cut)
        pending, at_node = pending[cut:], cut_at_node
    if pending:
        piece = _without_comments(pending if pending.endswith(b"\n") else pending + b"\n")
        if piece:
            yield piece, at_node, line


def _open_at(root: int, at_node: bool) -> list[int]:
    """The types of the messages open where a chunk begins: a device's (and step_stats's), or none."""
    return ([SS] if root == RM else []) + [DEV] if at_node else []


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


def _first_cut(data: bytes, root: int) -> tuple[int, bool]:
    """Where ``data`` could be cut first, as :func:`_last_cut` says, and whether that is a node; 0 where nowhere."""
    node_cut = 0
    for line in _NODE_LINES[root]:
        at = data.find(line)
        while at >= 0 and not _is_node_line(data, at, line):
            at = data.find(line, at + 1)
        if at >= 0 and (not node_cut or at + 1 < node_cut):
            node_cut = at + 1
    top_cut = min((at + 3 for at in (data.find(b"\n}\n"), data.find(b"\n>\n")) if at >= 0), default=0)
    if top_cut and (not node_cut or top_cut < node_cut):
        return top_cut, False
    return node_cut, bool(node_cut)


_NODE_LIST = re.compile(rb"node_stats[ \t\n]*:?[ \t\n]*\[")


def _holds_nodes_off_their_lines(pending: bytes) -> bool:
    """Whether text with no line to cut before holds nodes (``node_stats`` twice, or a list of
    them), rather than being one large node or graph that the chunk must hold whole."""
    first = pending.find(b"node_stats")
    return first >= 0 and (pending.find(b"node_stats", first + 1) >= 0 or _NODE_LIST.search(pending, first) is not None)


def _laid_out(layout: Layout, text: bytes, pieces: Iterator[bytes], root: int) -> Generator[
        tuple[bytes, bool, int], None, tuple[bytes, bool, int]]:
    """Stream ``text``, then ``pieces``, through ``layout``, and yield its lines in chunks, each cut
    where the layout says (before a node, after a top-level message).

    Returns the text from the first line where the text's own lines can be cut again (a node's
    line or the end of a top-level message, with the layout at rest there), and whether that is a
    node, and how many lines of the text it laid out; or nothing, where the text ends first. Memory stays a chunk or two: a token the next
    piece may continue is all that is held back, and a stretch with no place to cut is refused.
    """
    uncut = line_bytes = 0  # bytes read since the last chunk, and since the last line end
    lines = 0
    for data in itertools.chain([text], pieces):
        lines += data.count(b"\n")
        back, at_node = _first_cut(data, root)
        if back:
            layout.feed(data[:back])
            if layout.at_rest(_open_at(root, at_node)):
                rest = layout.take_all()
                if rest is not None:
                    yield (*rest, 0)
                return data[back:], at_node, lines - data.count(b"\n", back)
            data = data[back:]
        layout.feed(data)
        chunk = layout.take()
        if chunk is not None:
            yield (*chunk, 0)
        uncut = 0 if chunk is not None else uncut + len(data)
        newline = data.rfind(b"\n")
        line_bytes = len(data) - newline - 1 if newline >= 0 else line_bytes + len(data)
        if len(layout.held) > text_chunks.MAX_STRING_BYTES + 2:
            raise TooLarge(f"a value of over {format_bytes(text_chunks.MAX_STRING_BYTES)} "
                           "(no name or label in a trace is that long)")
        if line_bytes > MAX_LINE_BYTES and uncut >= line_bytes:
            raise TooLarge(f"a line of over {format_bytes(MAX_LINE_BYTES)} (no name or value is that long in a trace)")
        if uncut > MAX_UNCUT_BYTES:
            raise Unrecognised("no place to cut the text")
    layout.end()
    rest = layout.take_all()
    if rest is not None:
        yield (*rest, 0)
    return b"", False, lines


def _utf8_checked(pieces: Iterator[bytes]) -> Iterator[bytes]:
    """The pieces as they come, once each is known to continue valid UTF-8: protobuf decodes the whole
    text before it parses, so a byte that is not UTF-8 anywhere (a comment's included, which the chunks
    never see) makes the text not protobuf text. ASCII pieces cost a scan; others are decoded, a character
    cut between two pieces carried over."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        for data in pieces:
            if not data.isascii() or decoder.getstate()[0]:
                decoder.decode(data)
            yield data
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        raise Unrecognised("text that is not UTF-8") from None


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
    """The chunk with its comments cut (see above), each line kept; the same object where it has no '#'."""
    if b"#" not in chunk:
        return chunk
    chunk = _COMMENT_LINE.sub(b"\n", chunk)  # (a blank line: the lines keep the file's numbers)
    return _COMMENT_AFTER.sub(lambda m: m.group(1).rstrip(b" \t"), chunk) if b"#" in chunk else chunk


def _check_no_cut(pending: bytes) -> None:
    """Refuse text that would have to be held whole: one line over MAX_LINE_BYTES (TooLarge), or a
    layout with no place to cut for many chunks (Unrecognised: protobuf's reader decides)."""
    line_start = pending.rfind(b"\n") + 1
    if len(pending) - line_start > MAX_LINE_BYTES:
        raise TooLarge(f"a line of over {format_bytes(MAX_LINE_BYTES)} (no name or value is that long in a trace)")
    if len(pending) > MAX_UNCUT_BYTES:
        raise Unrecognised("no place to cut the text")
