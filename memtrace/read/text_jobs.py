"""Reading a text trace's chunks in several processes (``memtrace -j N``, ``load(path, jobs=N)``).

The main process cuts the text into chunks as a reading in one process does
(:func:`memtrace.read.text.read`) and hands them out. Each worker reads its chunk on its own,
against the state its start implies: a chunk cut before a ``node_stats`` line begins inside the
device the previous chunk left open; a chunk cut after a top-level ``}`` begins at the top
level. It numbers the devices it opens from a base of its own, and notes how it ends any message
it did not see begin. What the worker tells its builder is recorded, and the main process
replays it in order, devices renumbered, after checking each assumption against what the chunks
before really left open. So the model is the one a reading in one process builds, and anything
that does not fit is :class:`~memtrace.read.detect.Unrecognised`, as there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .builder import NodeBlock, TraceBuilder
from .detect import UnknownField, Unrecognised
from .jobs import InOrder
from .text_chunks import OpenMessage, TextState, after_chunk, read_chunk
from .text_schema import DEV, RM, SS

# A worker numbers the devices its chunk opens from here (the one it begins inside is one less),
# far from any real ordinal; the merge moves them to where the builder really is.
_APART_BASE = 1 << 40


class _Recorder:
    """Stands in for the builder in a worker: numbers devices from ``first_ordinal``, keeps the rest.

    A chunk's reading opens its devices, then names them, then adds its nodes (see
    :func:`read_chunk`), so that order is all there is to keep.
    """

    def __init__(self, first_ordinal: int):
        self.first_ordinal = first_ordinal
        self.devices = 0
        self.names: list[tuple[int, str]] = []
        self.blocks: list[NodeBlock] = []

    def add_device_stats(self) -> int:
        self.devices += 1
        return self.first_ordinal + self.devices - 1

    def set_device_name(self, ordinal: int, name: str) -> None:
        self.names.append((ordinal, name))

    def add_nodes(self, block: NodeBlock) -> None:
        self.blocks.append(block)


@dataclass
class _ChunkRead:
    """What a worker made of one chunk, for the main process to check and hand to the builder."""

    start: list[tuple[int, int]]  # (kind, ordinal) of the messages assumed open where it begins
    recorded: _Recorder  # what it told its builder
    state: TextState  # what it leaves: the messages still open, delegated fields, step_stats seen


def _read_apart(chunk: bytes, root: int, at_node: bool, first_line: int = 0) -> _ChunkRead:
    """Read one chunk on its own, assuming what is open where it begins (checked when merged).

    How the messages open at its start began ('{' or '<') it cannot know: their openers stay 0,
    and how it ends them is noted (``state.assumed_closes``). A field the schema does not have is
    raised with what the lines before it assumed and did, for the merge to check
    (:func:`_check_unknown_field`).
    """
    kinds = ([SS] if root == RM else []) + [DEV] if at_node else []
    state = TextState(root, stack=[OpenMessage(kind) for kind in kinds])
    if at_node:
        state.stack[-1].ordinal = _APART_BASE - 1  # the device the previous chunk left open
    start = [(entry.kind, entry.ordinal) for entry in state.stack]
    recorder = _Recorder(_APART_BASE)
    try:
        read_chunk(chunk, state, recorder, first_line)
    except UnknownField as error:
        error.context = _ChunkRead(start, recorder, state)
        raise
    return _ChunkRead(start, recorder, state)


def read_in_parallel(chunks: Iterator[tuple[bytes, bool, int]], state: TextState, builder: TraceBuilder,
                     on_chunk: Callable[[], None] | None, jobs: int) -> None:
    """Read ``chunks`` (with whether each begins at a node, and its first line) in ``jobs`` processes;
    merge in order into ``builder``."""
    merged = 0

    def merge(read: _ChunkRead) -> None:
        nonlocal merged
        _merge(read, state, builder)
        merged += 1
        after_chunk(merged, on_chunk)

    try:
        with InOrder(_read_apart, jobs) as pool:
            for chunk, at_node, first_line in chunks:
                pool.submit((chunk, state.root, at_node, first_line), merge)
            pool.finish()
    except UnknownField as error:  # (raised in order: every chunk before it is merged)
        _check_unknown_field(error, state)
        raise


def _check_unknown_field(error: UnknownField, state: TextState) -> None:
    """Check what the chunk that found an unknown field assumed and did before it against ``state``
    (the chunks before it, merged); Unrecognised where that does not fit or protobuf must judge
    (a delegated field before it, a device or step_stats given twice)."""
    read = error.context
    if not isinstance(read, _ChunkRead) or [kind for kind, _ in read.start] != [entry.kind for entry in state.stack] \
            or state.delegated:
        raise Unrecognised("an unknown field in a chunk that does not begin where the previous one ended")
    apart = read.state
    for level, closer in apart.assumed_closes:
        if state.stack[level].opener + 2 != closer:
            raise Unrecognised("a message closed by another mark than it began with")
    if apart.step_stats_seen and state.step_stats_seen:
        raise Unrecognised("step_stats given twice")
    if _APART_BASE - 1 in apart.named_devices and state.stack and state.stack[-1].ordinal in state.named_devices:
        raise Unrecognised("a device named twice")


def _merge(read: _ChunkRead, state: TextState, builder: TraceBuilder) -> None:
    """Check a chunk's assumptions against ``state``, hand its calls to ``builder``, move ``state`` on.

    The chunk's devices are numbered from :data:`_APART_BASE`: each ordinal moves by where the
    builder's next device really is.
    """
    recorded = read.recorded
    shift = state.devices - recorded.first_ordinal
    start = [(kind, ordinal + shift if kind == DEV else ordinal) for kind, ordinal in read.start]
    if [(entry.kind, entry.ordinal) for entry in state.stack] != start:
        raise Unrecognised("a chunk that does not begin where the previous one ended")
    after = read.state
    for level, closer in after.assumed_closes:
        if state.stack[level].opener + 2 != closer:
            raise Unrecognised("a message closed by another mark than it began with")
    for _ in range(recorded.devices):
        builder.add_device_stats()
    state.devices += recorded.devices
    for ordinal, name in recorded.names:
        if ordinal + shift in state.named_devices:
            raise Unrecognised("a device named twice")
        state.named_devices.add(ordinal + shift)
        builder.set_device_name(ordinal + shift, name)
    for block in recorded.blocks:
        block.dev += shift
        builder.add_nodes(block)
    if after.step_stats_seen and state.step_stats_seen:
        raise Unrecognised("step_stats given twice")
    state.step_stats_seen |= after.step_stats_seen
    state.delegated.extend(after.delegated)
    for level, entry in enumerate(after.stack):
        if entry.kind == DEV:
            entry.ordinal += shift
        if not entry.opener:  # open where the chunk began, and still: as it began there
            entry.opener = state.stack[level].opener
    state.stack = after.stack
