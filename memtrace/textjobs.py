"""Reading a text trace's chunks in several processes (``memtrace -j N``, ``load(path, jobs=N)``).

The main process cuts the text into chunks as a reading in one process does
(:func:`memtrace.textreader.read`) and hands them out. Each worker reads its chunk on its own,
against the state its start implies: a chunk cut before a ``node_stats`` line begins inside the
device the previous chunk left open, whose ordinal follows from counting ``dev_stats`` lines; a
chunk cut after a top-level ``}`` begins at the top level. What the worker tells its builder is
recorded, and the main process replays it in order, after checking each assumption against
what the chunks before really left open. So the model is the one a reading in one process
builds, and anything that does not fit is :class:`~memtrace.textreader.Unrecognised`, as there.
"""

from __future__ import annotations

import collections
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .builder import NodeBlock, TraceBuilder
from .textreader import DEV, RM, SS, OpenMessage, TextState, Unrecognised, after_chunk, read_chunk

if TYPE_CHECKING:
    import concurrent.futures


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


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


def _device_opens(chunk: bytes, root: int) -> int:
    """How many devices the chunk opens, counted from its lines (the worker's reading confirms it)."""
    line = b"dev_stats {\n" if root == SS else b"  dev_stats {\n"
    return chunk.count(b"\n" + line) + chunk.startswith(line)


def _read_apart(chunk: bytes, root: int, at_node: bool, first_ordinal: int) -> _ChunkRead:
    """Read one chunk on its own, assuming what is open where it begins (checked when merged)."""
    kinds = ([SS] if root == RM else []) + [DEV] if at_node else []
    state = TextState(root, stack=[OpenMessage(kind) for kind in kinds])
    if at_node:
        state.stack[-1].ordinal = first_ordinal - 1  # the device the previous chunk left open
    start = [(entry.kind, entry.ordinal) for entry in state.stack]
    recorder = _Recorder(first_ordinal)
    read_chunk(chunk, state, recorder)
    return _ChunkRead(start, recorder, state)


def read_in_parallel(chunks: Iterator[tuple[bytes, bool]], state: TextState, builder: TraceBuilder,
                     on_chunk: Callable[[], None] | None, jobs: int) -> None:
    """Read ``chunks`` (and whether each begins at a node) in ``jobs`` processes; merge in order into ``builder``."""
    import concurrent.futures
    import multiprocessing

    # Fork where it is the platform's way (Linux): nothing to import again, and no need to find
    # the parent's main module; elsewhere spawn.
    method = "fork" if sys.platform.startswith("linux") else "spawn"
    context = multiprocessing.get_context(method)
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context, initializer=_worker_start) as pool:
        try:
            reads: collections.deque[tuple[concurrent.futures.Future[_ChunkRead] | None, bytes]] = collections.deque()
            ordinal = merged = 0
            for chunk, at_node in chunks:
                reads.append((_submit(pool, chunk, state.root, at_node, ordinal), chunk))
                ordinal += _device_opens(chunk, state.root)
                while len(reads) > 2 * jobs or (reads and (reads[0][0] is None or reads[0][0].done())):
                    merged += 1
                    _merge_or_read(*reads.popleft(), state, builder)
                    after_chunk(merged, on_chunk)
            while reads:
                merged += 1
                _merge_or_read(*reads.popleft(), state, builder)
                after_chunk(merged, on_chunk)
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise


def _submit(pool: concurrent.futures.Executor, chunk: bytes, root: int, at_node: bool,
            ordinal: int) -> concurrent.futures.Future[_ChunkRead] | None:
    """The chunk's reading in a worker; None where the pool is broken (a worker died)."""
    from concurrent.futures import BrokenExecutor

    try:
        return pool.submit(_read_apart, chunk, root, at_node, ordinal)
    except BrokenExecutor:
        return None


def _merge_or_read(read: concurrent.futures.Future[_ChunkRead] | None, chunk: bytes, state: TextState,
                   builder: TraceBuilder) -> None:
    """Merge a worker's reading of ``chunk``; where no worker could read it (a process that
    died, not a chunk it did not recognise), read it here, as in one process."""
    from concurrent.futures import BrokenExecutor

    try:
        result = read.result() if read is not None else None
    except BrokenExecutor:
        result = None
    if result is None:
        read_chunk(chunk, state, builder)
    else:
        _merge(result, state, builder)


def _worker_start() -> None:
    """In a worker: leave Ctrl-C to the main process, which stops the pool and says so in one line."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _merge(read: _ChunkRead, state: TextState, builder: TraceBuilder) -> None:
    """Check a chunk's assumptions against ``state``, hand its calls to ``builder``, move ``state`` on."""
    if [(entry.kind, entry.ordinal) for entry in state.stack] != read.start:
        raise Unrecognised("a chunk that does not begin where the previous one ended")
    recorded = read.recorded
    for ordinal in range(recorded.first_ordinal, recorded.first_ordinal + recorded.devices):
        if builder.add_device_stats() != ordinal:
            raise Unrecognised("device lines counted other than read")
    for ordinal, name in recorded.names:
        if ordinal in state.named_devices:
            raise Unrecognised("a device named twice")
        state.named_devices.add(ordinal)
        builder.set_device_name(ordinal, name)
    for block in recorded.blocks:
        builder.add_nodes(block)
    after = read.state
    if after.step_stats_seen and state.step_stats_seen:
        raise Unrecognised("step_stats given twice")
    state.step_stats_seen |= after.step_stats_seen
    state.delegated.extend(after.delegated)
    state.stack = after.stack
