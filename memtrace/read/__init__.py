"""Reading a trace file into the columnar model, :class:`~memtrace.trace.data.TraceData`.

Accepts ``RunMetadata`` or a bare ``StepStats``, in protobuf text or binary form, plain or
gzip-compressed, and tells them apart by content, never by file name. A ``GraphDef`` (text or
binary) may be given separately. Every way a file can be wrong ends in one
:class:`~memtrace.errors.TraceFormatError` naming the file (and line:column for text).

A TensorFlow 2 profile (an ``XSpace``: ``HOST.xplane.pb``) is read by :mod:`.xplane`: given as
the file, as its run directory (``LOGDIR/plugins/profile/RUN``, every host's file in it) or as
the logdir (its newest run, or the one named by ``run``).

Two paths lead to the same model. The fast one streams the file through memtrace's own readers
(:mod:`.text` for text, :mod:`.binary` for binary), which produce columns directly; the
reference one (:mod:`.protobuf`) parses the whole file with protobuf and walks its messages.
The fast readers give up on anything they do not recognise, and then the reference path reads
the file, so a trace never depends on which path read it (the tests check that they agree).
"""

from __future__ import annotations

import os
import stat
import zlib
from collections.abc import Callable
from typing import IO, Any

from ..errors import TraceFormatError, UsageError
from ..trace.data import TraceData
from ..units import format_bytes
from . import binary, detect, files, text
from . import jobs as worker_pool
from .builder import TimeOutOfRange, TraceBuilder, release_memory
from .detect import (
    CONTROL,
    GZIP_MAGIC,
    RUN_METADATA_FIELDS,
    STEP_STATS_FIELDS,
    TooLarge,
    UnknownField,
    Unrecognised,
    first_field,
    looks_like_xspace,
    sniff_text,
)

Progress = Callable[[int, int], None]

# The tests set this, so that a fast reader failing in a way it did not foresee shows up there
# instead of quietly falling back to protobuf.
RAISE_UNEXPECTED = False



def load(
    path: str | os.PathLike[str], graph: str | os.PathLike[str] | None = None, progress: Progress | None = None,
    jobs: int = 1, *, step: int | None = None, run: str | None = None,
) -> TraceData:
    """Read the trace at ``path`` (and optionally a GraphDef at ``graph``) into the columnar model.

    ``path`` may be ``-`` for standard input, or a pipe or FIFO: anything that cannot seek is
    read once, and what the fast path read is kept (spooled to disk when large) in case the
    reference path must read it again. ``progress(bytes_read, file_bytes)``, when given, is
    called as the file is read (bytes of the file as stored, so compressed bytes for gzip), the
    last time with both equal. With ``jobs`` over 1, that many processes read a large trace.
    For a profile (XSpace), ``step`` keeps only that step's window, and ``run`` picks a run of a
    logdir (default: the newest).
    """
    path = os.fspath(path)
    profiles = _profile_files(path, run) if path != "-" else None
    if profiles is not None:
        return _load_profiles(path, profiles, graph, progress, step, jobs)
    if run is not None:
        raise UsageError(f"{path}: --run picks a run of a profile logdir, and this is a file")
    if step is not None:
        raise UsageError(f"{path}: --step needs a profile with steps (a TensorFlow 2 .xplane.pb); this trace is one step already")
    name = files.STDIN_NAME if path == "-" else path
    with files.open_input(path) as handle:
        fast = _load_fast(name, progress, jobs, handle)
        if fast is None:
            handle.seek(0)
            data, compressed = files.read_whole(name, handle)
            trace = _load_data(name, data, compressed, graph)
            if progress is not None:
                size = files.size_of(handle)
                progress(size, size)
            return trace
    builder, source_format, message_name, run_metadata = fast
    return _finish(builder, name, source_format, message_name, run_metadata, graph)


def load_bytes(data: bytes, name: str = "<bytes>") -> TraceData:
    """Read a trace held in memory (e.g. a serialized ``RunMetadata``); ``name`` stands for its path."""
    if not data:
        raise TraceFormatError(name, "no data")
    data, compressed = files.decompress(name, data)
    return _load_data(name, data, compressed, None)


def _load_data(path: str, data: bytes, compressed: bool, graph: str | os.PathLike[str] | None) -> TraceData:
    """The reference path: protobuf parses everything."""
    from . import protobuf

    builder = TraceBuilder()
    try:
        kind, message_name, run_metadata = protobuf.read(path, data, builder)
    except TimeOutOfRange as error:
        raise TraceFormatError(path, str(error)) from None
    del data
    return _finish(builder, path, kind + ("+gzip" if compressed else ""), message_name, run_metadata, graph)


def _finish(
    builder: TraceBuilder, path: str, source_format: str, message_name: str, run_metadata: Any,
    graph: str | os.PathLike[str] | None,
) -> TraceData:
    """Add the graph (a separate GraphDef, else the RunMetadata's own) and freeze the trace."""
    if graph is not None:
        from . import protobuf

        graph_path = os.fspath(graph)
        graph_data, _ = files.read_bytes(graph_path)
        builder.set_graph("graph file", protobuf.read_graph(graph_path, graph_data))
    elif run_metadata is not None:
        from . import protobuf

        protobuf.feed_run_metadata_graphs(builder, run_metadata)
    return builder.build(path, source_format, message_name)


# -- profiles (XSpace) -------------------------------------------------------------------------

PROFILE_SUFFIX = ".xplane.pb"


def _profile_files(path: str, run: str | None) -> list[str] | None:
    """The profile files ``path`` stands for (a file that is an XSpace, a run directory, a logdir); None for any other file."""
    if not os.path.isdir(path):
        # Only a regular file is sniffed here: reading a pipe's first bytes would take them from the one read it allows.
        return [path] if os.path.isfile(path) and _is_xspace_file(path) else None
    here = _host_files(path)
    if here and run is None:
        return here
    runs = _runs(path)
    if not runs:
        raise TraceFormatError(path, f"no profile here: no RUN/HOST{PROFILE_SUFFIX} under it "
                               "(tf.profiler.experimental.start(LOGDIR) writes LOGDIR/plugins/profile/RUN/HOST.xplane.pb, "
                               "Keras's TensorBoard(log_dir=LOGDIR, profile_batch=...) LOGDIR/train/plugins/profile/RUN/...)")
    if run is None:
        # Run directories are named by the time they were taken (2024_01_31_12_00_00), so the newest sorts last.
        run = max(runs)
    elif run not in runs:
        raise UsageError(f"{path}: no run {run!r} (runs: {', '.join(sorted(runs))})")
    return _host_files(runs[run])


def _runs(path: str) -> dict[str, str]:
    """The runs under a logdir, by name: in ``plugins/profile`` (the profiler's own), ``profile``, or
    ``SUBDIR/plugins/profile`` (Keras's TensorBoard callback writes under ``train/``), else ``path`` itself."""
    roots = [os.path.join(path, "plugins", "profile"), os.path.join(path, "profile")]
    try:
        roots += [os.path.join(path, name, "plugins", "profile") for name in sorted(os.listdir(path))]
    except OSError:
        pass
    roots = [root for root in roots if os.path.isdir(root)] or [path]
    runs: dict[str, str] = {}
    for root in roots:
        try:
            names = os.listdir(root)
        except OSError as error:
            raise TraceFormatError(root, f"cannot read the directory: {error.strerror or error}") from None
        for name in sorted(names):
            if name not in runs and _host_files(os.path.join(root, name)):
                runs[name] = os.path.join(root, name)
    return runs


def input_files(path: str) -> list[str]:
    """Every file reading ``path`` may read, so that no output replaces one: the file itself, or for a
    directory every profile file in it and in each of its runs (whichever ``--run`` picks)."""
    if not os.path.isdir(path):
        return [path]
    found = _host_files(path)
    try:
        runs = _runs(path)
    except TraceFormatError:
        runs = {}  # reading it says so in one line
    found += [name for directory in runs.values() for name in _host_files(directory)]
    return list(dict.fromkeys(found)) or [path]


def _host_files(directory: str) -> list[str]:
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return [os.path.join(directory, name) for name in sorted(names)
            if name.endswith((PROFILE_SUFFIX, PROFILE_SUFFIX + ".gz")) and os.path.isfile(os.path.join(directory, name))]


def _is_xspace_file(path: str) -> bool:
    """Whether the file's content opens like an XSpace (gzip or not); False when it cannot be read."""
    head = files.peek(path, 256)
    return head is not None and looks_like_xspace(head)


def _load_profiles(path: str, files: list[str], graph: str | os.PathLike[str] | None, progress: Progress | None,
                   step: int | None, jobs: int = 1) -> TraceData:
    from . import xplane

    if graph is not None:
        raise UsageError(f"{path}: --graph does not apply to a profile (an XSpace has no graph to replace)")
    builder = TraceBuilder()
    compressed = []

    def content(name: str) -> bytearray:
        data, was_gzip = _read_padded(name)
        compressed.append(was_gzip)
        return data

    hosts = [(name, os.path.basename(name).removesuffix(".gz").removesuffix(PROFILE_SUFFIX)) for name in files]
    xplane.read(hosts, content, builder, step, read_gzip=compressed, jobs=min(jobs, worker_pool.cores()))
    if progress is not None:
        size = sum(os.path.getsize(name) for name in files)
        progress(size, size)
    trace = builder.build(path, "xplane" + ("+gzip" if any(compressed) else ""), "XSpace")
    release_memory()  # what the reading freed, before the analyses allocate theirs
    return trace


def _read_padded(path: str) -> tuple[bytearray, bool]:
    """The file's content (decompressed when gzip) followed by the zero bytes the wire decoders read past the end.

    A plain file is read straight into its final buffer: no copy of a large profile is made. This
    is the reference path (upb holds the whole message): as for protobuf's other inputs, at most
    ``files.REFERENCE_MAX_BYTES`` are read, gzip inflated included.
    """
    from .wire import PAD

    try:
        with open(path, "rb") as raw:
            size = os.fstat(raw.fileno()).st_size
            if size > files.REFERENCE_MAX_BYTES and stat.S_ISREG(os.fstat(raw.fileno()).st_mode):
                raise TraceFormatError(
                    path, f"a profile of {format_bytes(size)} that memtrace's fast reader cannot read (damaged, or not "
                    f"an XSpace?), and over the {format_bytes(files.REFERENCE_MAX_BYTES)} protobuf's own parser is given")
            if raw.read(2) != GZIP_MAGIC:
                raw.seek(0)
                buffer = bytearray(size + PAD)
                if raw.readinto(memoryview(buffer)[:size]) == size and size:
                    return buffer, False
    except OSError:
        pass  # _read_bytes says what is wrong
    data, compressed = files.read_bytes(path)
    return bytearray(data) + bytes(PAD), compressed


# -- the fast path ---------------------------------------------------------------------------


def _load_fast(path: str, progress: Progress | None, jobs: int = 1,
               handle: IO[bytes] | None = None) -> tuple[TraceBuilder, str, str, Any] | None:
    """Stream the file through memtrace's own readers; None where protobuf must decide.

    Returns the filled builder, the source format, the message name and, for a RunMetadata,
    a message holding its graphs. Anything unusual (every kind of bad input included) is left
    to the reference path, which says precisely what is wrong. ``jobs`` is capped at the cores.
    """
    if jobs > 1:
        jobs = min(jobs, worker_pool.cores())
    if handle is None:
        with files.open_input(path) as opened:
            return _load_fast(path, progress, jobs, opened)
    raw = handle
    try:
        size = files.size_of(raw)
        compressed = raw.read(2) == GZIP_MAGIC
        raw.seek(0)
        stream: Any = files.inflating(raw) if compressed else raw
        head = stream.read(detect.SNIFF_BYTES)
        sniffed = sniff_text(head, complete=len(head) < detect.SNIFF_BYTES)
        if not head:
            return None
        if sniffed is None or CONTROL.search(sniffed, 0, detect.SNIFF_CHARS):
            # Offsets in the message are bytes of the file unless it is compressed.
            on_block = None if progress is None else (
                (lambda _: progress(raw.tell(), size)) if compressed else (lambda offset: progress(offset, size)))
            fast = _load_fast_binary(stream, head, on_block, jobs)
            if fast is None:
                return None
            message_name, builder, run_metadata = fast
            if progress is not None:
                progress(size, size)
            return builder, "binary" + ("+gzip" if compressed else ""), message_name, run_metadata
        first = first_field(sniffed)
        if first in STEP_STATS_FIELDS:
            message_name = "StepStats"
        elif first in RUN_METADATA_FIELDS:
            message_name = "RunMetadata"
        else:
            return None
        builder = TraceBuilder()
        on_chunk = None if progress is None else (lambda: progress(raw.tell(), size))
        delegated = text.read(stream, head, message_name, builder, on_chunk, jobs=jobs)
        run_metadata = None
        if message_name == "RunMetadata":
            from . import protobuf  # only a RunMetadata's graphs need it

            run_metadata = protobuf.parse_delegated(delegated)
    except (TooLarge, TimeOutOfRange) as error:
        raise TraceFormatError(path, str(error)) from None
    except UnknownField as error:
        # protobuf reads a file as text only where all of it is UTF-8; elsewhere its error is another.
        if not _utf8_throughout(raw, compressed):
            return None
        raise TraceFormatError(path, error.detail, error.line, error.column) from None
    except (Unrecognised, EOFError, OSError, zlib.error):
        return None
    except Exception:  # an optimisation must never be why a trace fails to load
        if RAISE_UNEXPECTED:
            raise
        return None
    if progress is not None:
        progress(size, size)
    return builder, "text" + ("+gzip" if compressed else ""), message_name, run_metadata


def _utf8_throughout(raw: IO[bytes], compressed: bool) -> bool:
    """Whether the whole input (decompressed) is UTF-8, read again from its start a piece at a time."""
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        raw.seek(0)
        stream: Any = files.inflating(raw) if compressed else raw
        while piece := stream.read(1 << 20):
            decoder.decode(piece)
        decoder.decode(b"", final=True)
    except (UnicodeDecodeError, OSError, EOFError, zlib.error, TooLarge):
        return False
    return True


def _load_fast_binary(stream: IO[bytes], head: bytes, on_block: Callable[[int], None] | None = None,
                      jobs: int = 1) -> tuple[str, TraceBuilder, Any] | None:
    """Decode binary protobuf from ``stream`` (``head`` already read) with memtrace's own reader; None where upb must decide."""
    builder = TraceBuilder()
    try:
        message_name, rest = binary.read(stream, builder, on_block, head, jobs)
    except Unrecognised:
        return None
    except (TimeOutOfRange, TooLarge):
        raise  # the trace itself is wrong, or too large for any path to hold
    except Exception:  # as for text: the reference path decides
        if RAISE_UNEXPECTED:
            raise
        return None
    run_metadata = None
    if rest is not None:
        from . import protobuf  # only a RunMetadata's graphs need it

        run_metadata = protobuf.parse_binary_run_metadata(rest)
        if run_metadata is None:
            return None
    return message_name, builder, run_metadata
