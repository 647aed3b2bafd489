"""An independent replay of a step trace, written from TensorFlow's proto and nothing of memtrace's.

The tests check memtrace's central numbers (peaks, baselines, reconciliations) against this. It
parses the file with protobuf itself (the classes generated from TensorFlow's ``step_stats.proto``)
and follows the proto's own meaning, in as few lines as the rule takes:

- every ``allocation_records`` entry of one allocator, from every node, sorted by ``alloc_micros``
  with ties kept in trace order (node order, then record order); their running sum from 0 is the
  bytes the step added, its maximum the step's peak;
- each ``allocator_bytes_in_use`` snapshot (taken when the node's op ends; 0 is "not taken") minus
  the running sum at that time implies the bytes live before the step; the most common
  non-negative implied value (the earliest snapshot's among equally common ones) is the baseline.

It also says which output created each buffer (:func:`outputs_with_buffers`), from the ids,
pointers and the inputs the timeline labels name.

It shares no code with memtrace's readers, model, replay or analyses (tests/test_architecture.py
would not stop it, so this docstring says it: import nothing from memtrace but the generated
``_pb2`` classes, which are TensorFlow's proto compiled by protobuf's own compiler).
"""

from __future__ import annotations

import bisect
import gzip
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import text_format

from memtrace.read._proto import tf_trace_pb2


def parse_step_stats(path: Path) -> tf_trace_pb2.StepStats:
    """A ``StepStats`` or ``RunMetadata`` file, text or binary, gzipped or not, as protobuf reads it."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    try:
        text = data.decode()
    except UnicodeDecodeError:
        run_metadata = tf_trace_pb2.RunMetadata.FromString(data)
        if run_metadata.HasField("step_stats"):
            return run_metadata.step_stats
        return tf_trace_pb2.StepStats.FromString(data)
    if text.lstrip().startswith("step_stats"):
        return text_format.Parse(text, tf_trace_pb2.RunMetadata()).step_stats
    return text_format.Parse(text, tf_trace_pb2.StepStats())


@dataclass(frozen=True)
class ProtoReplay:
    """One allocator's step, replayed straight from the proto."""

    records: int
    allocs: int  # records with alloc_bytes > 0
    frees: int  # records with alloc_bytes < 0
    outputs: int  # node outputs whose allocation_description names the allocator
    peak_delta_bytes: int
    peak_time_us: int | None
    peak_node: str | None
    snapshots: int
    matched: int
    baseline_bytes: int | None
    live_at_peak: dict[str, tuple[int, int]]  # node name -> (allocations, bytes) of its records live at the peak

    @property
    def peak_bytes(self) -> int:
        return self.peak_delta_bytes + (self.baseline_bytes or 0)


def _op_end_us(node: tf_trace_pb2.NodeExecStats) -> float:
    if node.all_start_nanos:
        return (node.all_start_nanos + node.op_end_rel_nanos) / 1000
    return node.all_start_micros + node.op_end_rel_micros


def replay(step_stats: tf_trace_pb2.StepStats, allocator: str) -> ProtoReplay:
    """The allocator's records summed in time order, its peak, and its snapshot-implied baseline."""
    events = []  # (alloc_micros, trace order, bytes, node name)
    snapshots = []  # (op end in us, allocator_bytes_in_use)
    outputs = 0
    for device in step_stats.dev_stats:
        for node in device.node_stats:
            outputs += sum(out.tensor_description.allocation_description.allocator_name == allocator
                           for out in node.output)
            for used in node.memory:
                if used.allocator_name != allocator:
                    continue
                for record in used.allocation_records:
                    events.append((record.alloc_micros, len(events), record.alloc_bytes, node.node_name))
                if used.allocator_bytes_in_use:
                    snapshots.append((_op_end_us(node), used.allocator_bytes_in_use))
    events.sort(key=lambda event: event[:2])
    times, running = [], []
    peak, peak_time, peak_node, peak_at, total = 0, None, None, -1, 0
    for at, (time_us, _, size, node_name) in enumerate(events):
        total += size
        times.append(time_us)
        running.append(total)
        if total >= peak and size > 0:  # a later record reaching the same height reaches the peak
            peak, peak_time, peak_node, peak_at = total, time_us, node_name, at
    held: dict[str, list[int]] = {}
    for _, _, size, node_name in events[:peak_at + 1]:
        counts_bytes = held.setdefault(node_name, [0, 0])
        counts_bytes[0] += 1 if size > 0 else -1
        counts_bytes[1] += size
    live = {name: (count, size) for name, (count, size) in held.items() if count}
    allocs = sum(size > 0 for _, _, size, _ in events)
    frees = sum(size < 0 for _, _, size, _ in events)
    head = (len(events), allocs, frees, outputs, peak, peak_time, peak_node, len(snapshots))
    implied = []
    for time_us, in_use in snapshots:
        done = bisect.bisect_right(times, time_us)  # records up to and at the snapshot's time
        implied.append(in_use - (running[done - 1] if done else 0))
    counts = Counter(value for value in implied if value >= 0)
    if not counts:
        return ProtoReplay(*head, 0, None, live)
    best = max(counts.values())
    baseline = next(value for value in implied if counts.get(value) == best)
    return ProtoReplay(*head, best, baseline, live)


def replay_file(path: Path, allocator: str) -> ProtoReplay:
    return replay(parse_step_stats(path), allocator)


def step_start_ns(step_stats: tf_trace_pb2.StepStats) -> int:
    """The earliest start of any node (``all_start_nanos`` where recorded): times into the step count from here."""
    return min(node.all_start_nanos or node.all_start_micros * 1000
               for device in step_stats.dev_stats for node in device.node_stats)


def into_step_us(step_stats: tf_trace_pb2.StepStats, time_us: int) -> int:
    """A record's ``alloc_micros`` as whole microseconds into the step."""
    return (time_us * 1000 - step_start_ns(step_stats)) // 1000


# -- which output created which buffer ----------------------------------------------------------

# A timeline label names the op's data inputs: "[bfc 1.0KB 2.0KB] conv = Conv2D(x, w:1)".
_LABEL = re.compile(r"^(?:\[[^\]]*\] )?(\S+) = \S+\((.*)\)$")


@dataclass(frozen=True)
class Output:
    """One ``output`` entry of the allocator, and the output (an index in the same list) that created its buffer."""

    node: str
    slot: int
    allocation_id: int
    ptr: int
    requested_bytes: int
    allocated_bytes: int
    buffer: int


def outputs_with_buffers(step_stats: tf_trace_pb2.StepStats, allocator: str) -> list[Output]:
    """The allocator's outputs in trace order, each with the output that created its buffer.

    Only outputs with an allocation id share buffers (the others point at themselves). Walking
    the nodes in start order (ties in trace order): where every id of the allocator comes with
    one pointer (BFC), an id names one buffer, created by its first output. Where ids repeat
    (CPU allocators number them per op), an output with an earlier output's id and pointer is
    that buffer only if its node reads a node holding it (the timeline label names the inputs; a
    node without a label is trusted); otherwise it created a new buffer at a reused address.
    """
    executions = []  # (start ns, trace order, node name, inputs or None, [output index])
    found: list[tuple[str, int, int, int, int, int]] = []
    for device in step_stats.dev_stats:
        for node in device.node_stats:
            named = _LABEL.match(node.timeline_label)
            inputs = None
            if named:
                inputs = [text.partition(":")[0] for text in named.group(2).split(", ")] if named.group(2) else []
            mine = []
            for out in node.output:
                described = out.tensor_description.allocation_description
                if described.allocator_name != allocator:
                    continue
                mine.append(len(found))
                found.append((node.node_name, out.slot, described.allocation_id, described.ptr,
                              described.requested_bytes, described.allocated_bytes))
            start = node.all_start_nanos or node.all_start_micros * 1000
            executions.append((start, len(executions), node.node_name, inputs, mine))
    executions.sort(key=lambda execution: execution[:2])
    pointers: dict[int, set[int]] = {}
    for _, _, allocation_id, ptr, _, _ in found:
        if allocation_id:
            pointers.setdefault(allocation_id, set()).add(ptr)
    ids_unique = all(len(ptrs) == 1 for ptrs in pointers.values())
    buffer_of = list(range(len(found)))
    holders: dict[tuple[int, int], tuple[int, set[str]]] = {}  # (id, ptr) -> creator, names of the nodes holding it
    for _, _, name, inputs, mine in executions:
        for index in mine:
            allocation_id, ptr = found[index][2:4]
            if not allocation_id:
                continue
            held = holders.get((allocation_id, ptr))
            if held is not None and (ids_unique or inputs is None or any(i in held[1] for i in inputs)):
                held[1].add(name)
                buffer_of[index] = held[0]
            else:
                holders[(allocation_id, ptr)] = (index, {name})
    return [Output(*row, buffer) for row, buffer in zip(found, buffer_of)]
