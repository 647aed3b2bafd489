"""Opening an input once, whatever it is: a file, ``-`` for standard input, a pipe or a FIFO.

Every reader reads through here. A stream that cannot seek is read once and what was read is
kept (in memory up to ``SPOOL_IN_MEMORY_BYTES``, then on disk), so the reference path can read it
again after a fast path declined it. Where a reader needs the whole content at once (protobuf's
parsers, a log of out-of-memory dumps) at most ``REFERENCE_MAX_BYTES`` are read, gzip inflated
in pieces, so no input can take unbounded memory. Every way it can fail is one
:class:`~memtrace.errors.TraceFormatError` naming the input.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import stat
import sys
import tempfile
import zlib
from collections.abc import Iterator
from typing import IO, Any

from ..errors import TraceFormatError
from ..units import format_bytes
from .detect import GZIP_MAGIC, TooLarge

STDIN_NAME = "<stdin>"
# protobuf's own parsers hold the whole (decompressed) input and several times its size in
# messages; they are the fallback for forms the streaming readers do not take, not for large files.
REFERENCE_MAX_BYTES = 256 << 20
PIECE_BYTES = 1 << 20  # read at a time where the whole is not needed at once
SPOOL_IN_MEMORY_BYTES = 32 << 20  # of a pipe's content kept for a second reading, before it goes to disk
# Of a pipe's content, no more is kept than the reference path could read again (with room for a
# gzip stream's framing): past it the streaming readers go on, and a second reading is refused.
SPOOL_MAX_BYTES = REFERENCE_MAX_BYTES + (1 << 20)
# What a compressed input may inflate to: past INFLATE_FLOOR_BYTES, no more than INFLATE_RATIO
# times the compressed bytes read so far. Real traces inflate 2 to 25 times (the fixtures), gzip
# itself at most about 1,030 times (all zeros): 4 MiB holding 4 GiB is refused at 256 MiB.
INFLATE_RATIO = 100
INFLATE_FLOOR_BYTES = REFERENCE_MAX_BYTES


def read_bytes(path: str) -> tuple[bytes, bool]:
    """The file's content, decompressed when it is gzip; the flag says whether it was."""
    with open_input(path) as handle:
        return read_whole(path, handle)


@contextlib.contextmanager
def open_input(path: str) -> Iterator[IO[bytes]]:
    """The input opened once, ``-`` being standard input; a stream that cannot seek (a pipe, a
    FIFO) comes wrapped so that it can be read again from the start."""
    if path == "-":
        stream = sys.stdin.buffer if sys.stdin is not None else None
        if stream is None:
            raise TraceFormatError(STDIN_NAME, "standard input is closed")
        with io.BufferedReader(_Replayable(stream, STDIN_NAME)) as replayable:
            yield replayable
        return
    if os.path.isdir(path):
        raise TraceFormatError(path, "is a directory, not a trace file")
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed by the with below
    except FileNotFoundError:
        raise TraceFormatError(path, "no such file") from None
    except OSError as exc:
        raise TraceFormatError(path, f"cannot read: {exc.strerror or exc}") from None
    with handle:
        if _seekable(handle):
            yield handle
            return
        with io.BufferedReader(_Replayable(handle, path)) as replayable:
            yield replayable


def _seekable(handle: IO[bytes]) -> bool:
    try:
        return handle.seekable() and stat.S_ISREG(os.fstat(handle.fileno()).st_mode)
    except (OSError, ValueError):
        return False


def size_of(handle: IO[bytes]) -> int:
    """The size of a regular file; 0 where it has none (a pipe, a device)."""
    try:
        return os.fstat(handle.fileno()).st_size
    except (OSError, ValueError, io.UnsupportedOperation):
        return 0


class _Replayable(io.RawIOBase):
    """A stream read once (a pipe, a FIFO, a device) that can go back to its start: what was read
    is kept in a spooled file (in memory while small, then on disk) and read from there again.

    At most ``SPOOL_MAX_BYTES`` are kept: beyond them the stream is still read (the streaming
    readers take any length), the kept bytes are let go, and going back is refused in one line
    naming the input, as the reference path would refuse a file that large.
    """

    def __init__(self, stream: IO[bytes], name: str):
        super().__init__()
        self._stream = stream
        self._name = name
        self._kept: IO[bytes] | None = tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY_BYTES)  # noqa: SIM115 - closed in close()
        self._kept_bytes = 0
        self._position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        if self._kept is not None and self._position < self._kept_bytes:
            self._kept.seek(self._position)
            count = self._kept.readinto(view[:self._kept_bytes - self._position])  # type: ignore[attr-defined]
        else:
            data = self._stream.read(min(len(view), PIECE_BYTES))
            count = len(data or b"")
            view[:count] = data or b""
            if self._kept is not None:
                if self._kept_bytes + count > SPOOL_MAX_BYTES:
                    self._kept.close()  # the disk it took is given back now, not when the read ends
                    self._kept = None
                else:
                    self._kept.seek(self._kept_bytes)
                    self._kept.write(view[:count])
                    self._kept_bytes += count
        self._position += count
        return count

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        target = {io.SEEK_SET: 0, io.SEEK_CUR: self._position}.get(whence)
        if target is not None and target + offset == self._position:
            return self._position
        if self._kept is None and target is not None and 0 <= target + offset < self._position:
            raise too_large_for_reference(self._name)
        if target is None or not 0 <= target + offset <= self._kept_bytes:
            raise io.UnsupportedOperation("a pipe can go back, not ahead or from its end")
        self._position = target + offset
        return self._position

    def tell(self) -> int:
        return self._position

    def close(self) -> None:
        if self._kept is not None:
            self._kept.close()
        super().close()


class _Inflating(io.RawIOBase):
    """gzip content inflated as it is read, refused (:class:`~.detect.TooLarge`) once it inflates
    past INFLATE_FLOOR_BYTES at more than INFLATE_RATIO times the compressed bytes read."""

    def __init__(self, raw: IO[bytes]):
        super().__init__()
        self._raw = raw
        self._start = raw.tell()
        self._unpacked = gzip.GzipFile(fileobj=raw, mode="rb")
        self._out = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        count = self._unpacked.readinto(buffer)
        self._out += count
        if self._out > INFLATE_FLOOR_BYTES and self._out > INFLATE_RATIO * (self._raw.tell() - self._start):
            raise inflated_too_far()
        return count

    def close(self) -> None:
        self._unpacked.close()  # not the raw handle: its opener closes it
        super().close()


def inflated_too_far() -> TooLarge:
    """The refusal of a compressed input that inflates past the cap (see INFLATE_RATIO)."""
    return TooLarge(f"gzip data that inflates to over {format_bytes(INFLATE_FLOOR_BYTES)}, over {INFLATE_RATIO} times "
                    "its compressed size (memtrace inflates no more: a compression bomb, or not a trace?)")


def inflating(raw: IO[bytes]) -> IO[bytes]:
    """``raw`` (positioned at gzip data) inflated as it is read, in bounded memory, with the cap of
    INFLATE_RATIO; reading past the cap raises :class:`~.detect.TooLarge`."""
    return io.BufferedReader(_Inflating(raw), buffer_size=PIECE_BYTES)


def read_whole(path: str, handle: IO[bytes]) -> tuple[bytes, bool]:
    """The whole content for protobuf's own parsers, decompressed when it is gzip; the flag says
    whether it was. Those parsers hold it all, so at most REFERENCE_MAX_BYTES are read."""
    try:
        start = handle.read(2)
        if start == GZIP_MAGIC:
            data = _gunzip_capped(path, handle, start)
            if not data:
                raise TraceFormatError(path, "the gzip file holds no data")
            return data, True
        handle.seek(0)
        parts: list[bytes] = []
        total = 0
        while piece := handle.read(min(PIECE_BYTES, REFERENCE_MAX_BYTES + 1 - total)):
            parts.append(piece)
            total += len(piece)
            if total > REFERENCE_MAX_BYTES:
                raise too_large_for_reference(path)
        data = b"".join(parts)
        del parts
    except OSError as exc:
        raise TraceFormatError(path, f"cannot read: {exc.strerror or exc}") from None
    if not data:
        raise TraceFormatError(path, "the file is empty")
    return data, False


def too_large_for_reference(path: str) -> TraceFormatError:
    return TraceFormatError(
        path, f"over {format_bytes(REFERENCE_MAX_BYTES)} in a form memtrace's streaming readers do not take, "
        "and too large for protobuf's own parser (damaged, or not written by a protobuf printer?)")


def _gunzip_capped(path: str, handle: IO[bytes], start: bytes) -> bytes:
    """Decompress gzip (every member) from ``handle`` whose first bytes are ``start``, refusing
    more than REFERENCE_MAX_BYTES of output (a small file can hold gigabytes of zeros)."""
    parts: list[bytes] = []
    total = 0
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    pending = start
    try:
        while True:
            if not pending:
                pending = handle.read(PIECE_BYTES)
                if not pending:
                    break
            room = REFERENCE_MAX_BYTES + 1 - total
            out = inflater.decompress(pending, min(room, PIECE_BYTES))
            parts.append(out)
            total += len(out)
            if total > REFERENCE_MAX_BYTES:
                raise too_large_for_reference(path)
            pending = inflater.unconsumed_tail
            if inflater.eof:
                pending = inflater.unused_data + pending
                if not pending:
                    pending = handle.read(PIECE_BYTES)
                if not pending.strip(b"\0"):  # gzip allows zero padding after the last member
                    break
                inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        if not inflater.eof:
            raise EOFError("the compressed data ends before its end-of-stream marker")
    except (EOFError, zlib.error) as exc:
        raise TraceFormatError(path, f"truncated or corrupt gzip data ({exc})") from None
    return b"".join(parts)


def decompress(path: str, data: bytes) -> tuple[bytes, bool]:
    """The data, decompressed when it is gzip; the flag says whether it was."""
    if not data.startswith(GZIP_MAGIC):
        return data, False
    data = _gunzip_capped(path, io.BytesIO(data[2:]), data[:2])
    if not data:
        raise TraceFormatError(path, "the gzip file holds no data")
    return data, True


def peek(path: str, size: int) -> bytes | None:
    """The first ``size`` bytes of a file's content, of what it holds where it is gzip; None when it
    cannot be read. For telling files apart by content before reading one (a regular file only:
    peeking at a pipe would take bytes its one reading needs)."""
    try:
        with open(path, "rb") as raw:
            head = raw.read(size)
            if head.startswith(GZIP_MAGIC):
                raw.seek(0)
                with gzip.GzipFile(fileobj=raw, mode="rb") as unpacked:
                    head = unpacked.read(size)
    except (OSError, EOFError, zlib.error):
        return None
    return head
