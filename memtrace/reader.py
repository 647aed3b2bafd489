"""Reading a trace file into a :class:`~memtrace.model.Trace`.

Accepts ``RunMetadata`` or a bare ``StepStats``, in protobuf text or binary form, plain or
gzip-compressed, and tells them apart by content, never by file name. A ``GraphDef`` (text or
binary) may be given separately. Every way a file can be wrong ends in one
:class:`~memtrace.errors.TraceFormatError` naming the file (and line:column for text).

This module is the only one that imports the generated protobuf classes: the walk from messages
into :class:`~memtrace.builder.TraceBuilder` is the seam where a faster reader can slot in.
"""

from __future__ import annotations

import gzip
import os
import re
import zlib
from typing import Any

from google.protobuf import message as _message
from google.protobuf import text_format

from ._proto import tf_trace_pb2 as pb
from .builder import TraceBuilder
from .errors import TraceFormatError
from .model import Trace

_GZIP_MAGIC = b"\x1f\x8b"
_SNIFF_CHARS = 65536
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
_FIRST_FIELD = re.compile(r"\s*(?:#[^\n]*\n\s*)*([A-Za-z_][A-Za-z0-9_]*|\S)")
_PARSE_POSITION = re.compile(r"^(\d+):(\d+) : ")

_STEP_STATS_FIELDS = {"dev_stats"}
_RUN_METADATA_FIELDS = {"step_stats", "cost_graph", "partition_graphs", "function_graphs", "session_metadata"}
_GRAPH_DEF_FIELDS = {"node", "versions", "version", "library", "debug_info"}


def load(path: str | os.PathLike[str], graph: str | os.PathLike[str] | None = None) -> Trace:
    """Read the trace at ``path`` (and optionally a GraphDef at ``graph``) into a Trace."""
    path = os.fspath(path)
    data, compressed = _read_bytes(path)
    return _load_data(path, data, compressed, graph)


def load_bytes(data: bytes, name: str = "<bytes>") -> Trace:
    """Read a trace held in memory (e.g. a serialized ``RunMetadata``); ``name`` stands for its path."""
    if not data:
        raise TraceFormatError(name, "no data")
    data, compressed = _decompress(name, data)
    return _load_data(name, data, compressed, None)


def _load_data(path: str, data: bytes, compressed: bool, graph: str | os.PathLike[str] | None) -> Trace:
    builder = TraceBuilder()
    kind, message = _parse_trace(path, data)
    run_metadata = message if isinstance(message, pb.RunMetadata) else None
    step_stats = run_metadata.step_stats if run_metadata is not None else message
    _feed_step_stats(builder, step_stats)
    if graph is not None:
        graph_path = os.fspath(graph)
        graph_data, _ = _read_bytes(graph_path)
        builder.set_graph("graph file", _graph_nodes([_parse_graph(graph_path, graph_data)]))
    elif run_metadata is not None:
        _feed_run_metadata_graphs(builder, run_metadata)
    source_format = kind + ("+gzip" if compressed else "")
    return builder.build(path, source_format, type(message).__name__)


# -- bytes -------------------------------------------------------------------------------


def _read_bytes(path: str) -> tuple[bytes, bool]:
    """The file's content, decompressed when it is gzip; the flag says whether it was."""
    if os.path.isdir(path):
        raise TraceFormatError(path, "is a directory, not a trace file")
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        raise TraceFormatError(path, "no such file") from None
    except OSError as exc:
        raise TraceFormatError(path, f"cannot read: {exc.strerror or exc}") from None
    if not data:
        raise TraceFormatError(path, "the file is empty")
    return _decompress(path, data)


def _decompress(path: str, data: bytes) -> tuple[bytes, bool]:
    """The data, decompressed when it is gzip; the flag says whether it was."""
    if not data.startswith(_GZIP_MAGIC):
        return data, False
    try:
        data = gzip.decompress(data)
    except (EOFError, OSError, zlib.error) as exc:
        raise TraceFormatError(path, f"truncated or corrupt gzip data ({exc})") from None
    if not data:
        raise TraceFormatError(path, "the gzip file holds no data")
    return data, True


def _as_text(data: bytes) -> str | None:
    """The content as text if it looks like protobuf text format (or JSON), else None."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if _CONTROL.search(text, 0, _SNIFF_CHARS) else text


# -- messages ------------------------------------------------------------------------------


def _first_field(text: str) -> str | None:
    match = _FIRST_FIELD.match(text)
    return match.group(1) if match else None


def _parse_text(path: str, text: str, message: _message.Message) -> None:
    try:
        text_format.Parse(text, message)
    except text_format.ParseError as exc:
        detail = _PARSE_POSITION.sub("", str(exc)).replace("memtrace.tf.", "")
        line = exc.GetLine() if hasattr(exc, "GetLine") else None
        column = exc.GetColumn() if hasattr(exc, "GetColumn") else None
        raise TraceFormatError(path, detail, line, column) from None


def _parse_trace(path: str, data: bytes) -> tuple[str, Any]:
    """``("text" | "binary", StepStats or RunMetadata)`` or a TraceFormatError saying why not."""
    text = _as_text(data)
    if text is not None:
        first = _first_field(text)
        if first is None:
            raise TraceFormatError(path, "holds no protobuf fields (only blank lines or comments)")
        if first in ("{", "["):
            raise TraceFormatError(path, "looks like JSON; memtrace reads RunMetadata or StepStats in protobuf text or binary form")
        if first in _GRAPH_DEF_FIELDS:
            raise TraceFormatError(path, "is a GraphDef, not a trace (give a graph with --graph)")
        message: Any
        if first in _STEP_STATS_FIELDS:
            message = pb.StepStats()
        elif first in _RUN_METADATA_FIELDS:
            message = pb.RunMetadata()
        else:
            raise TraceFormatError(
                path,
                f"not a TensorFlow trace: starts with field {first!r}, expected 'dev_stats' (StepStats) "
                "or 'step_stats' (RunMetadata)",
                1,
            )
        _parse_text(path, text, message)
        return "text", message
    return "binary", _parse_binary_trace(path, data)


def _parse_binary(data: bytes, message: Any) -> Any | None:
    try:
        message.ParseFromString(data)
    except (_message.DecodeError, RuntimeError, ValueError):
        return None
    return message


def _looks_like_device(name: str) -> bool:
    return name == "" or name.startswith("/")


def _parse_binary_trace(path: str, data: bytes) -> Any:
    # Binary protobuf carries no type name, and StepStats, RunMetadata and GraphDef all start
    # with a length-delimited field 1; the parse that yields device names is the right one.
    step_stats = _parse_binary(data, pb.StepStats())
    if step_stats is not None and step_stats.dev_stats and all(
        _looks_like_device(d.device) for d in step_stats.dev_stats
    ):
        return step_stats
    run_metadata = _parse_binary(data, pb.RunMetadata())
    if run_metadata is not None and run_metadata.ListFields() and all(
        _looks_like_device(d.device) for d in run_metadata.step_stats.dev_stats
    ) and (run_metadata.HasField("step_stats") or run_metadata.partition_graphs):
        return run_metadata
    graph = _parse_binary(data, pb.GraphDef())
    if graph is not None and graph.node and all(n.op for n in graph.node):
        raise TraceFormatError(path, "is a GraphDef, not a trace (give a graph with --graph)")
    if step_stats is None and run_metadata is None:
        raise TraceFormatError(path, "is neither protobuf text nor a valid binary protobuf message (truncated or not a trace?)")
    raise TraceFormatError(path, "is a binary protobuf message, but not a TensorFlow RunMetadata or StepStats")


def _parse_graph(path: str, data: bytes) -> Any:
    text = _as_text(data)
    graph = pb.GraphDef()
    if text is not None:
        first = _first_field(text)
        if first in _STEP_STATS_FIELDS or first in _RUN_METADATA_FIELDS:
            raise TraceFormatError(path, "is a trace, not a GraphDef")
        if first is None or first not in _GRAPH_DEF_FIELDS:
            raise TraceFormatError(path, "not a GraphDef: expected a 'node' field", 1)
        _parse_text(path, text, graph)
        return graph
    if _parse_binary(data, graph) is None or not graph.node:
        raise TraceFormatError(path, "not a GraphDef (binary parse failed or it has no nodes)")
    if not all(n.op for n in graph.node):
        raise TraceFormatError(path, "not a GraphDef: nodes without an op type")
    return graph


# -- the walk into the builder -------------------------------------------------------------


def _dtype_name(value: int) -> str:
    try:
        return pb.DataType.Name(value)
    except ValueError:  # an enum value newer than our schema
        return f"DT_{value}"


def _feed_step_stats(builder: TraceBuilder, step_stats: Any) -> None:
    for device_stats in step_stats.dev_stats:
        device = builder.device(device_stats.device)
        for stats in device_stats.node_stats:
            # TensorFlow 2.x writes nanoseconds beside microseconds; prefer them when present.
            if stats.all_start_nanos:
                start = stats.all_start_nanos
                op_start, op_end, end = stats.op_start_rel_nanos, stats.op_end_rel_nanos, stats.all_end_rel_nanos
                scheduled = stats.scheduled_nanos or stats.scheduled_micros * 1000
            else:
                start = stats.all_start_micros * 1000
                op_start = stats.op_start_rel_micros * 1000
                op_end = stats.op_end_rel_micros * 1000
                end = stats.all_end_rel_micros * 1000
                scheduled = stats.scheduled_micros * 1000
            memory_stats = stats.memory_stats
            node = builder.add_node(
                device, stats.node_name, start, op_start, op_end, end, scheduled, stats.thread_id,
                stats.timeline_label, memory_stats.temp_memory_size, memory_stats.persistent_memory_size,
                memory_stats.persistent_tensor_alloc_ids,
            )
            for memory in stats.memory:
                builder.add_memory(
                    node, memory.allocator_name, memory.total_bytes, memory.peak_bytes, memory.live_bytes,
                    memory.allocator_bytes_in_use,
                    [(r.alloc_micros, r.alloc_bytes) for r in memory.allocation_records],
                )
            for output in stats.output:
                tensor = output.tensor_description
                alloc = tensor.allocation_description
                dims = None
                if tensor.HasField("shape") and not tensor.shape.unknown_rank:
                    dims = [d.size for d in tensor.shape.dim]
                builder.add_output(
                    node, output.slot, alloc.allocator_name, alloc.allocation_id, alloc.requested_bytes,
                    alloc.allocated_bytes, alloc.ptr, alloc.has_single_reference, _dtype_name(tensor.dtype), dims,
                )


def _graph_nodes(graphs: list[Any]) -> list[tuple[str, str, str, list[str]]]:
    return [(n.name, n.op, n.device, list(n.input)) for g in graphs for n in g.node]


def _feed_run_metadata_graphs(builder: TraceBuilder, run_metadata: Any) -> None:
    sources = []
    graphs = list(run_metadata.partition_graphs)
    if graphs:
        sources.append("partition_graphs")
    function_partitions = [g for f in run_metadata.function_graphs for g in f.partition_graphs]
    if function_partitions:
        sources.append("function_graphs")
        graphs.extend(function_partitions)
    if graphs:
        builder.set_graph("+".join(sources), _graph_nodes(graphs))
