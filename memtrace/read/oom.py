"""One door to out-of-memory dumps: a log (or console capture) or a ``MemoryDump`` protobuf.

The form is told by content, never by name: text that holds BFC dump lines is a log, anything
else is tried as a MemoryDump. A log is streamed a piece at a time, whatever its size and the
length of its lines (:func:`.bfc_log.lines`), so memory stays bounded; a MemoryDump (small: one
allocator's chunks) is read whole, at most ``files.REFERENCE_MAX_BYTES``. What consoles leave in
logs does not make one binary: NUL bytes (``copytruncate`` pads a log's start with them),
backspaces (Keras progress bars), and UTF-16 (PowerShell 5's redirection, with its byte-order
mark). Every way a file can be wrong is one TraceFormatError line.
"""

from __future__ import annotations

import codecs
import os
import zlib
from collections.abc import Iterator
from typing import IO

from ..allocator.dump import OomDump
from ..errors import TraceFormatError
from . import bfc_log, bfc_memory_dump, files
from .detect import GZIP_MAGIC, TooLarge

SNIFF_BYTES = 65536  # what the form is told from (after any NUL padding)
# Control characters that never occur in a log (tab, newlines, form feed and escape sequences may;
# NUL and backspace are the console's, above).
_BINARY_BYTES = bytes(b for b in range(0x20) if b not in (0x00, 0x08, 0x09, 0x0A, 0x0C, 0x0D, 0x1B))
_BINARY_SHARE = 1000  # a log may hold one stray control byte in this many; a MemoryDump holds far more
_BOMS = ((codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"), (codecs.BOM_UTF8, "utf-8-sig"))


def load_oom_dumps(path: str | os.PathLike[str]) -> list[OomDump]:
    """Every OOM event in the file at ``path``, in order (a MemoryDump holds exactly one)."""
    path = os.fspath(path)
    name = files.STDIN_NAME if path == "-" else path
    with files.open_input(path) as handle:
        try:
            return _load(name, handle)
        except TooLarge as error:
            raise TraceFormatError(name, str(error)) from None
        except (EOFError, zlib.error) as exc:
            raise TraceFormatError(name, f"truncated or corrupt gzip data ({exc})") from None
        except OSError as exc:
            raise TraceFormatError(name, f"cannot read: {exc.strerror or exc}") from None


def _load(name: str, handle: IO[bytes]) -> list[OomDump]:
    compressed = handle.read(2) == GZIP_MAGIC
    handle.seek(0)
    stream = files.inflating(handle) if compressed else handle
    head = stream.read(SNIFF_BYTES)
    if not head:
        raise TraceFormatError(name, "the gzip file holds no data" if compressed else "the file is empty")
    while head and head.count(0) == len(head):  # NUL padding: no part of any form
        head = stream.read(files.PIECE_BYTES)
    encoding = next((coding for bom, coding in _BOMS if head.startswith(bom)), None)
    if encoding is None:
        if _binary(head):
            return [bfc_memory_dump.read(name, _rest(name, head, stream))]
        encoding = "utf-8"
    return bfc_log.read_lines(name, bfc_log.line_batches(_pieces(head, stream), encoding))


def _binary(head: bytes) -> bool:
    """Whether the content's start is no log: control bytes no console writes, more than one in
    _BINARY_SHARE, or bytes that are not UTF-8 (more than 16), unless it shows BFC dump lines."""
    text = head.replace(b"\0", b"")
    odd = sum(text.count(byte) for byte in _BINARY_BYTES)
    decoded = text.decode("utf-8", errors="replace")
    if odd <= len(text) // _BINARY_SHARE and decoded.count("\ufffd") <= 16:
        return False
    return not any(map(bfc_log.looks_like_log, decoded.splitlines()))  # (its patterns match a line, to its end)


def _pieces(head: bytes, stream: IO[bytes]) -> Iterator[bytes]:
    yield head
    while piece := stream.read(files.PIECE_BYTES):
        yield piece


def _rest(name: str, head: bytes, stream: IO[bytes]) -> bytes:
    """The whole content for protobuf's parser (``head`` already read), at most REFERENCE_MAX_BYTES."""
    parts = [head]
    total = len(head)
    while piece := stream.read(min(files.PIECE_BYTES, files.REFERENCE_MAX_BYTES + 1 - total)):
        parts.append(piece)
        total += len(piece)
        if total > files.REFERENCE_MAX_BYTES:
            raise files.too_large_for_reference(name)
    return b"".join(parts)
