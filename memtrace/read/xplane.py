"""Reading a TensorFlow 2 profile (an ``XSpace``, ``HOST.xplane.pb``): the allocator's own memory events.

TensorFlow's BFC allocator writes every allocation and free as an instant event named
``MemoryAllocation`` or ``MemoryDeallocation`` on the host plane (``/host:CPU``), one line per
thread. An event's time is its line's ``timestamp_ns`` (x1000) plus its ``offset_ps``; its stats
(named in the plane's ``stat_metadata``; a string may come as ``ref_value``, the id of a
metadata entry whose name is the value) say which allocator, the bytes in use after the event
(``bytes_allocated``), the chunk (``allocation_bytes``, ``requested_bytes``, ``addr``), and for
allocations the op (``tf_op``), ``region_type``, ``data_type`` and ``shape``. Steps are events
with a ``step_num`` stat (``tf.profiler.experimental.Trace("train", step_num=i)``, Keras).

**The mapping into the model** (the same model a StepStats fills, so that every analysis works):

- Events are put in time order (nanoseconds, as the profile has them; ties keep file order).
- Each event is one node, at one instant (start = end = the event's time), on the device of its
  allocator (``/device:GPU:N`` for ``GPU_N_bfc``, else ``/device:CPU:0``; with several hosts, the
  host's name first, and in the allocator's name). An allocation's node is named by its
  ``tf_op`` (``(no op)`` when the allocator was not told one); a free's node is ``(free)``.
- Each node has one memory entry for its allocator whose snapshot is ``bytes_allocated``: every
  event counts in the reconciliation, a snapshot of 0 bytes included.
- An allocation's entry holds its record (+``allocation_bytes``) and, as a StepStats does for an
  output freed later by a consumer, its free's record (-``allocation_bytes``, at the free's time).
  Frees are paired with allocations by allocator and ``addr``, the most recent first. A free of
  a chunk allocated before the profile (or the step) holds its own negative record.
- Each allocation is a buffer (an ``Outputs`` row, slot 0) of its node: ``requested_bytes``,
  ``allocated_bytes`` = ``allocation_bytes``, ``ptr`` = ``addr``, dtype and shape, and its kind
  from ``region_type`` (``output``, ``temp``, ``persist`` -> persistent; ``dynamic`` and none ->
  output; see ``REGION_KINDS``); its allocation id is its number among the allocator's
  allocations (1, 2, ...): the profile's ``id`` stat is the step id, the same for a whole step.
- The op type is the one TensorFlow's op events on the same plane give (``name:Type``), else
  guessed from the name (its last part, without a ``_N`` suffix).

With ``step`` given, only events inside that step's window are kept, so the baseline is what
was in use when the step began.

XLA's runtimes (JAX on GPU) write the same events from their own copy of the BFC allocator
(``GPU_0_bfc``, ``xla_gpu_host_bfc``) but name no op in them (no ``tf_op``; the planes' stat names
show XLA, see ``XLA_SIGNS``): they are read the same way, every allocation a ``(no op)`` node, and
the trace carries the oddity ``ops-unknown`` so that every report says the ops are unknown.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import TraceFormatError
from ..trace.data import NO_OP, IntArray, Step
from .builder import CodedTexts, NodeBlock, TraceBuilder, codes_by_first_appearance, constant, release_memory
from .xplane_events import ALLOCATION, DEALLOCATION, NO_FRAGMENTATION, NUMBERS, PS_LIMIT, TEXTS, XLA_SIGNS, Events

FREE = "(free)"
NO_EVENTS_HINT = (
    "On CPU, TensorFlow's default allocator writes none: set TF_CPU_ALLOCATOR_USE_BFC=true before "
    "TensorFlow starts (memtrace.tensorflow.profile does), then record again"
)
NO_XLA_EVENTS_HINT = (
    "XLA writes them only from its BFC allocator (GPU memory and pinned host memory, the default "
    "XLA_PYTHON_CLIENT_ALLOCATOR); its CPU client writes none"
)
# Said (as the oddity "ops-unknown", with how many allocations it concerns) of a profile XLA recorded.
OPS_UNKNOWN = ("recorded by XLA (JAX or another PjRt runtime), whose allocator events name no op: bytes, times "
               "and addresses are the allocator's own, the ops that asked for them unknown")
# region_type -> index into model.OUTPUT_KINDS. TensorFlow names the region of an allocation by
# the OpKernelContext call that made it: allocate_output ("output"), allocate_temp ("temp"),
# allocate_persistent ("persist"); "dynamic" memory is a tensor allocated outside those calls,
# handed on like an output and freed when its last user lets go, so it counts as an output, as
# does an allocation with no region_type (or one memtrace does not know).
REGION_KINDS = {"output": 0, "temp": 1, "persist": 2, "dynamic": 0}
_GPU_ALLOCATOR = re.compile(r"gpu_(\d+)_bfc", re.IGNORECASE)
_SUFFIX = re.compile(r"_\d+$")
_SHAPE = re.compile(r"-?\d+")


def parse(path: str, data: bytes) -> object:
    """The XSpace message of ``data``, or a TraceFormatError saying it is truncated or corrupt."""
    from google.protobuf import message as _message

    from ._proto import xplane_pb2

    space = xplane_pb2.XSpace()
    try:
        space.ParseFromString(data)
    except _message.DecodeError as exc:
        raise TraceFormatError(path, f"truncated or corrupt profile (XSpace): {exc}") from None
    if not any(plane.name for plane in space.planes):
        raise TraceFormatError(path, "truncated or corrupt profile (XSpace): no named plane")
    return space


def _value(stat: object, names: dict[int, str]) -> object:
    kind = stat.WhichOneof("value")  # type: ignore[attr-defined]
    if kind is None:
        return 0
    value = getattr(stat, kind)
    return names.get(value, "") if kind == "ref_value" else value


class BadEvent(ValueError):
    """A memory or step event memtrace cannot take as it is (a stat of the wrong type, a time out of range)."""


_INT64 = 1 << 63


def _integer(stats: dict[str, object], name: str) -> int:
    """An integer stat of a memory event (0 where absent), as the fast path reads it: a uint64 past
    int64 wraps to its int64 bits; a double only where it is a whole number int64 holds."""
    value = stats.get(name, 0)
    if isinstance(value, int):
        return value - (_INT64 << 1) if value >= _INT64 else value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer() and -_INT64 <= value < _INT64:
        return int(value)
    raise BadEvent(f"a memory event's {name} stat is {value!r}, not an integer")


def _time_ps(line: Any, base_ps: int, offset_ps: int) -> int:
    """An event's time in picoseconds, refused beyond PS_LIMIT (the fast path leaves those to here)."""
    time_ps = base_ps + offset_ps
    if not -PS_LIMIT < time_ps < PS_LIMIT or not -PS_LIMIT < base_ps < PS_LIMIT:
        raise BadEvent(f"line {line.name!r}: an event's time (timestamp_ns {line.timestamp_ns} + offset_ps {offset_ps}) "
                       "is out of range (53 days or more from the profile's origin)")
    return time_ps


def _step_number(value: object) -> int | None:
    """A step_num stat's value; None where it is no integer (the event then marks no step)."""
    return value if isinstance(value, int) and -_INT64 <= value < _INT64 else None


def collect(space: object, into: Events) -> None:
    """Walk every plane's events: memory events into columns, step windows, op types.

    Raises :class:`BadEvent` for a memory event memtrace cannot take; the callers name the file.
    """
    for plane in space.planes:  # type: ignore[attr-defined]
        columns: dict[str, list[Any]] = {name: [] for name in (*NUMBERS, *TEXTS)}
        names = {key: meta.name for key, meta in plane.stat_metadata.items()}
        if any(sign in name for name in names.values() for sign in XLA_SIGNS):
            into.xla_signs = True
        kinds = {}
        for key, meta in plane.event_metadata.items():
            if meta.name in (ALLOCATION, DEALLOCATION):
                kinds[key] = meta.name == ALLOCATION
            elif ":" in meta.name:  # TensorFlow's op events: "scope/name:Type"
                op, _, op_type = meta.name.rpartition(":")
                if op and op_type and op_type.isidentifier():
                    into.op_types.setdefault(op, op_type)
        step_id = next((key for key, name in names.items() if name == "step_num"), None)
        step_meta = {}
        if step_id is not None:
            for key, meta in plane.event_metadata.items():
                for stat in meta.stats:
                    number = _step_number(_value(stat, names)) if stat.metadata_id == step_id else None
                    if number is not None:
                        step_meta[key] = number
        for line in plane.lines:
            base_ps = line.timestamp_ns * 1000
            for event in line.events:
                is_alloc = kinds.get(event.metadata_id)
                if is_alloc is None:
                    if step_id is None:
                        continue
                    number = step_meta.get(event.metadata_id)
                    if number is None:
                        number = next((_step_number(_value(s, names)) for s in event.stats
                                       if s.metadata_id == step_id), None)
                    if number is not None:
                        start = _time_ps(line, base_ps, event.offset_ps)
                        end = _time_ps(line, start, event.duration_ps)
                        into.add_step(number, start, end)
                    continue
                stats = {names.get(stat.metadata_id, ""): _value(stat, names) for stat in event.stats}
                columns["time_ps"].append(_time_ps(line, base_ps, event.offset_ps))
                columns["is_alloc"].append(is_alloc)
                columns["allocator"].append(str(stats.get("allocator_name", "")))
                columns["bytes_allocated"].append(_integer(stats, "bytes_allocated"))
                columns["requested"].append(_integer(stats, "requested_bytes"))
                columns["allocation"].append(_integer(stats, "allocation_bytes"))
                columns["addr"].append(_integer(stats, "addr") & 0xFFFFFFFFFFFFFFFF)
                op = str(stats.get("tf_op", ""))
                columns["tf_op"].append("" if op == "(null)" else op)
                columns["dtype"].append(_integer(stats, "data_type"))
                columns["shape"].append(str(stats.get("shape", "")))
                columns["region"].append(str(stats.get("region_type", "")))
                columns["peak_in_use"].append(_integer(stats, "peak_bytes_in_use"))
                columns["available"].append(_integer(stats, "bytes_available"))
                columns["thread"].append(line.id)
                fragmentation = stats.get("fragmentation")
                columns["fragmentation"].append(float(fragmentation) if isinstance(fragmentation, (int, float))
                                                else NO_FRAGMENTATION)
        into.add(**columns)


def collect_named(path: str, space: object, into: Events) -> None:
    """:func:`collect`, a memory event it cannot take refused in one line naming the file."""
    try:
        collect(space, into)
    except BadEvent as error:
        raise TraceFormatError(path, str(error)) from None


def device_of(allocator: str) -> str:
    """The device an allocator's memory belongs to: ``/device:GPU:N`` for ``GPU_N_bfc``, else ``/device:CPU:0``."""
    gpu = _GPU_ALLOCATOR.fullmatch(allocator)
    return f"/device:GPU:{gpu.group(1)}" if gpu else "/device:CPU:0"


def op_type_of(name: str, known: dict[str, str]) -> str:
    """The op type TensorFlow's op events gave the name, else its last part without a ``_N`` suffix."""
    found = known.get(name)
    if found:
        return found
    last = name.rsplit("/", 1)[-1]
    return _SUFFIX.sub("", last) or last


def _shape(text: str) -> list[int] | None:
    """``"[32,20]"`` -> ``[32, 20]``; ``"[]"`` -> ``[]`` (a scalar); anything else unknown."""
    text = text.strip()
    if not (text.startswith("[") and text.endswith("]")):
        return None
    return [int(dim) for dim in _SHAPE.findall(text)]


# The tests set this, so that the fast path failing in a way it did not foresee shows up there
# instead of quietly falling back to upb.
RAISE_UNEXPECTED = False


def read_events(path: str, data: bytearray, into: Events) -> None:
    """One file's events into ``into``: the fast path where it can, else upb (which names what is wrong).

    ``data`` is the file's content followed by ``wire.PAD`` zero bytes.
    """
    from . import xplane_binary
    from .detect import Unrecognised
    from .wire import PAD

    fast = Events()
    try:
        xplane_binary.collect(data, fast)
    except Unrecognised:
        pass
    except Exception:
        if RAISE_UNEXPECTED:
            raise
    else:
        into.extend(fast)
        return
    space = parse(path, bytes(memoryview(data)[:len(data) - PAD]))
    collect_named(path, space, into)


def read_file_events(path: str, into: Events, jobs: int = 1) -> bool | None:
    """One file's events read by the fast path a piece at a time, never the whole file in memory.

    A gzip-compressed profile is decompressed as it is read into an unnamed temporary file (the
    plane's metadata comes after its lines, so a profile is read out of order), then read from
    there; it may inflate no further than :func:`.files.inflating` lets it (a TraceFormatError
    says so). Returns whether the file was gzip, or None where the fast path cannot read it (not a
    regular file, or content it does not recognise): the caller then reads it whole.
    """
    import os
    import shutil
    import stat
    import tempfile
    import zlib

    from . import files, xplane_binary
    from .detect import GZIP_MAGIC, TooLarge, Unrecognised

    fast = Events()
    try:
        with open(path, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return None
            compressed = handle.read(2) == GZIP_MAGIC
            handle.seek(0)
            if compressed:
                with tempfile.TemporaryFile() as plain:
                    with files.inflating(handle) as unpacked:
                        shutil.copyfileobj(unpacked, plain, 1 << 20)
                    xplane_binary.collect_file(plain, plain.tell(), fast, jobs=jobs)  # type: ignore[arg-type]
            else:
                xplane_binary.collect_file(handle, os.fstat(handle.fileno()).st_size, fast, jobs=jobs)
    except TooLarge as error:
        raise TraceFormatError(path, str(error)) from None
    except (Unrecognised, OSError, EOFError, zlib.error):
        return None
    except Exception:
        if RAISE_UNEXPECTED:
            raise
        return None
    into.extend(fast)
    return compressed


def read(files: Sequence[tuple[str, str]], content: Callable[[str], bytearray], builder: TraceBuilder,
         step: int | None = None, fast: bool = True, read_gzip: list[bool] | None = None, jobs: int = 1) -> None:
    """Read profiles (``(path, host)`` each; several files are several hosts) into ``builder``.

    The fast path reads each file a piece at a time (:func:`read_file_events`, which appends to
    ``read_gzip`` whether the file was gzip); where it cannot, ``content(path)`` gives the file's
    content followed by ``wire.PAD`` zero bytes, dropped once its events are read.
    ``fast=False`` reads with upb alone (the reference). ``jobs``: processes that decode the events.
    Raises a TraceFormatError for a profile that holds no memory events. A profile XLA recorded (JAX:
    its events name no op) is read all the same, with the oddity ``ops-unknown`` saying so.
    """
    from .wire import PAD

    events = Events()
    read_gzip = [] if read_gzip is None else read_gzip
    several = len(files) > 1
    xla_allocations = 0
    xla_allocators: list[str] = []
    for path, host in files:
        mine = Events()
        streamed = read_file_events(path, mine, jobs) if fast else None
        if streamed is not None:
            read_gzip.append(streamed)
            release_memory()  # the pieces and their temporaries
        else:
            data = content(path)
            if fast:
                read_events(path, data, mine)
            else:
                collect_named(path, parse(path, bytes(memoryview(data)[:len(data) - PAD])), mine)
            del data
            release_memory()
        if several:
            mine.texts["allocator"] = [mine.text("allocator").map(f"{host}:".__add__)]
        # XLA's runtimes (JAX) write the same allocator events from their own copy of the BFC
        # allocator, but never name an op in them: read them, and say that the ops are unknown.
        xla = mine.xla_signs and not any(mine.text("tf_op").distinct())
        if xla and not len(mine):
            raise TraceFormatError(path, f"this profile was recorded by JAX or another XLA runtime (PjRt) and holds no memory "
                                   f"events (MemoryAllocation, MemoryDeallocation). {NO_XLA_EVENTS_HINT}")
        if xla:
            xla_allocations += int(mine.column("is_alloc").sum())
            xla_allocators.extend(mine.text("allocator").distinct())
        if not len(mine):
            raise TraceFormatError(path, f"the profile holds no memory events (MemoryAllocation, MemoryDeallocation). {NO_EVENTS_HINT}")
        events.extend(mine)
        del mine
    if xla_allocations:
        builder.note("ops-unknown", f"{OPS_UNKNOWN} (every allocation is shown as {NO_OP})", xla_allocations)
    builder.set_xla_allocators(xla_allocators)
    steps = [Step(number, start // 1000, end // 1000) for number, (start, end) in sorted(events.steps.items())]
    window = None
    if step is not None:
        chosen = [s for s in steps if s.number == step]
        if not chosen:
            have = ", ".join(str(s.number) for s in steps) or "none"
            raise TraceFormatError(files[0][0], f"no step {step} in this profile (its steps: {have})")
        window = (chosen[0].start_ns, chosen[0].end_ns)
    builder.set_steps(steps, step)
    _feed(events, builder, window, [host for _, host in files] if several else None)


def _ragged(offsets: IntArray, values: IntArray, rows: IntArray) -> tuple[IntArray, IntArray]:
    from .builder import ragged_take

    counts, taken = ragged_take(offsets, values, rows)
    return counts, taken.astype(np.int64)


def _pair(allocator: IntArray, addr: np.ndarray, is_alloc: np.ndarray) -> IntArray:
    """Per event (in replay order): for an allocation, its free's position; -1 when never freed.

    A free takes the allocation just before it at the same allocator and address.
    """
    n = len(is_alloc)
    order = np.lexsort((np.arange(n), addr, allocator))
    same = (allocator[order][1:] == allocator[order][:-1]) & (addr[order][1:] == addr[order][:-1])
    pairs = same & is_alloc[order][:-1] & ~is_alloc[order][1:]
    free_of = np.full(n, -1, dtype=np.int64)
    free_of[order[:-1][pairs]] = order[1:][pairs]
    return free_of


def _feed(events: Events, builder: TraceBuilder, window: tuple[int, int] | None, hosts: list[str] | None) -> None:
    """The events (emptied as they are read: a large profile holds millions) into ``builder`` as nodes.

    The block is made by a function of its own so that everything it needed on the way is freed
    before the builder copies the block in.
    """
    block = _block(events, builder, window, hosts)
    release_memory()  # the events' columns, gone into the block
    builder.add_nodes(block)
    del block
    release_memory()  # the block, gone into the builder


def _check_peak_counter(builder: TraceBuilder, allocator_names: CodedTexts, allocator: IntArray, rows: IntArray,
                        is_alloc: np.ndarray, size: IntArray, in_use: IntArray, counter: IntArray, what: str) -> None:
    """Hold each allocator's peak to its own peak counter (``peak_bytes_in_use``) where that starts the trace fresh.

    The counter is the most the allocator held since it was made or since its stats were last
    reset. Where its first value in the trace is what the allocator held around the first event
    (a reset just before the trace, or a trace that opens at the highest point so far), its
    highest value must be the replay's peak (the bytes before the first event included); where
    it is not, a ``peak-counter-differs`` oddity says so.
    """
    for code in np.flatnonzero(np.bincount(allocator[rows])).tolist():  # (np.unique would import numpy.ma)
        mine = rows[allocator[rows] == code]
        first = int(mine[0])
        after = int(in_use[first])
        before = after - int(size[first]) if is_alloc[first] else after + int(size[first])
        if int(counter[first]) <= 0 or int(counter[first]) != max(before, after):
            continue
        ours, theirs = max(before, int(in_use[mine].max())), int(counter[mine].max())
        if ours != theirs:
            builder.note("peak-counter-differs", f"{allocator_names[first]}: its own peak counter (peak_bytes_in_use) "
                         f"says {theirs} bytes over the {what}, its bytes in use rise to {ours}")


def _recorded_limits(builder: TraceBuilder, names: list[str], allocator: IntArray, available: IntArray,
                     in_use: IntArray) -> None:
    """Each allocator's limit, where its events say it: ``bytes_available`` is the limit minus the bytes
    in use (BFC's stats), so ``bytes_available + bytes_allocated`` is the limit, the same in every event."""
    said = available > 0
    # (where the sum passes int64, as in a hostile profile, it is taken whole: Python's integers do not wrap)
    wraps = said & (in_use > np.iinfo(np.int64).max - available)
    limit = available + np.where(wraps, 0, in_use)
    for code, name in enumerate(names):
        rows = said & (allocator == code)
        if not rows.any():
            continue
        if wraps[rows].any():
            whole = {int(a) + int(u) for a, u in zip(available[rows].tolist(), in_use[rows].tolist())}
            if len(whole) == 1:
                builder.set_recorded_limit(name, whole.pop())
            continue
        mine = limit[rows]
        if (mine == mine[0]).all():
            builder.set_recorded_limit(name, int(mine[0]))


def _block(events: Events, builder: TraceBuilder, window: tuple[int, int] | None, hosts: list[str] | None) -> NodeBlock:
    # The events in replay order (time, ties in file order); each file-order column is dropped as
    # soon as it is reordered, and a profile already in time order (one line) is not copied.
    time_ns = events.column("time_ps") // 1000
    events.numbers["time_ps"] = []
    order = None if not len(time_ns) or (time_ns[1:] >= time_ns[:-1]).all() else np.argsort(time_ns, kind="stable")
    column: dict[str, np.ndarray] = {"time_ns": time_ns if order is None else time_ns[order]}
    del time_ns
    for name in NUMBERS:
        if name != "time_ps":
            column[name] = events.column(name) if order is None else events.column(name)[order]
            events.numbers[name] = []
    text: dict[str, CodedTexts] = {}
    for name in TEXTS:
        text[name] = events.text(name) if order is None else events.text(name).take(order)
        events.texts[name] = []
    del order
    time_ns, is_alloc, addr, size = column["time_ns"], column["is_alloc"], column["addr"], column["allocation"]
    allocator, allocator_order, _ = codes_by_first_appearance(text["allocator"])  # numbered by first appearance
    allocator_names = text["allocator"]
    free_of = _pair(allocator, addr, is_alloc)
    alloc_of = np.full(len(is_alloc), -1, dtype=np.int64)
    freed = np.flatnonzero(free_of >= 0)
    alloc_of[free_of[freed]] = freed
    mismatched = np.flatnonzero(size[freed] != size[free_of[freed]])
    if len(mismatched):
        first = int(freed[mismatched[0]])
        builder.note("free-size-differs", f"{allocator_names[first]} chunk at {int(addr[first]):#x}: allocated "
                     f"{int(size[first])} bytes, freed {int(size[free_of[first]])}", len(mismatched))
    del freed, mismatched
    keep = np.ones(len(is_alloc), dtype=np.bool_) if window is None else (time_ns >= window[0]) & (time_ns <= window[1])
    # Within the kept events: an allocation's free counts only if kept too; a free whose
    # allocation is not kept (or not in the profile) holds its own record.
    free_kept = np.where((free_of >= 0) & keep[np.maximum(free_of, 0)], free_of, -1)
    own_free = ~is_alloc & ((alloc_of < 0) | ~keep[np.maximum(alloc_of, 0)])
    del free_of, alloc_of
    unpaired = np.flatnonzero(own_free & keep)
    if len(unpaired):
        first = int(unpaired[0])
        builder.note("free-of-earlier-allocation", f"{allocator_names[first]} chunk at {int(addr[first]):#x} "
                     f"({int(size[first])} bytes) freed, allocated before the {'step' if window else 'profile'}",
                     len(unpaired))
    rows = np.flatnonzero(keep)
    everything = len(rows) == len(keep)
    del keep, unpaired

    def kept(values: np.ndarray) -> np.ndarray:
        """The kept events' values: the column itself where every event is kept."""
        return values if everything else values[rows]

    n = len(rows)
    _check_peak_counter(builder, allocator_names, allocator, rows, is_alloc, size, column["bytes_allocated"],
                        column["peak_in_use"], "step" if window else "profile")
    del column["peak_in_use"]
    _recorded_limits(builder, allocator_order, allocator, column.pop("available"), column["bytes_allocated"])

    devices: dict[str, int] = {}
    device_of_code = []
    for name in allocator_order:
        host_prefix = ""
        if hosts is not None:
            host_prefix = "/host:" + name.split(":", 1)[0]
            name = name.split(":", 1)[1]
        device = host_prefix + device_of(name)
        if device not in devices:
            devices[device] = builder.add_device_stats(device)
        device_of_code.append(devices[device])
    dev = (constant(device_of_code[0], n) if len(devices) == 1
           else np.array(device_of_code or [0], dtype=np.int64)[kept(allocator)])

    kept_alloc = kept(is_alloc)
    alloc_rows = rows[kept_alloc]
    # Node names and labels per distinct tf_op, not per event; frees take the last code.
    ops = text["tf_op"].values
    name_code = np.where(kept_alloc, kept(text["tf_op"].codes), len(ops)).astype(np.int32)
    names = CodedTexts.from_table(name_code, [*(op or NO_OP for op in ops), FREE])
    labels = CodedTexts.from_table(
        name_code, [*(f"{op} = {op_type_of(op, events.op_types)}()" if op else "" for op in ops), ""])
    del name_code

    # Records: an allocation's own (+bytes) and its kept free's (-bytes); a free's own (-bytes).
    has_free = kept(free_kept) >= 0
    record_count = np.where(kept_alloc, 1 + has_free, kept(own_free)).astype(np.int64)
    del own_free
    rec_event = np.repeat(rows, record_count)
    second = np.zeros(len(rec_event), dtype=np.bool_)
    second[(np.cumsum(record_count) - record_count + 1)[record_count == 2]] = True
    rec_event = np.where(second, free_kept[rec_event], rec_event)
    del second, free_kept
    rec_bytes = np.where(is_alloc[rec_event], size[rec_event], -size[rec_event])
    rec_time_ns = time_ns[rec_event]
    del rec_event

    kept_size = kept(size)
    alloc_bytes = np.where(kept_alloc, kept_size, 0)
    live_bytes = np.where(kept_alloc & ~has_free, kept_size, 0)
    del has_free, kept_size
    shape_codes = text["shape"].codes[alloc_rows]
    shapes = [_shape(value) for value in text["shape"].values]  # parsed once per distinct shape
    shape_rank = np.array([-1 if shape is None else len(shape) for shape in shapes] or [0], dtype=np.int64)
    ranks = shape_rank[shape_codes] if len(shape_codes) else np.zeros(0, dtype=np.int64)
    shape_offsets = np.concatenate([[0], np.cumsum(np.maximum(shape_rank, 0))])
    shape_dims = np.array([dim for shape in shapes for dim in shape or []], dtype=np.int64)
    _, dims = _ragged(shape_offsets, shape_dims, shape_codes)
    del shape_codes
    # Allocation ids: 1, 2, ... per allocator, over the whole profile.
    allocations = np.flatnonzero(is_alloc)
    by_allocator = np.argsort(allocator[allocations], kind="stable")
    allocation_id = np.empty(len(allocations), dtype=np.int64)
    counts = np.bincount(allocator[allocations], minlength=len(allocator_order))
    allocation_id[by_allocator] = np.arange(len(allocations)) - np.repeat(np.cumsum(counts) - counts, counts) + 1
    out_allocation_id = allocation_id[np.searchsorted(allocations, alloc_rows)]
    del allocations, by_allocator, allocation_id
    out_node = np.flatnonzero(kept_alloc)
    region_codes = text["region"].codes[alloc_rows]
    region_kind = np.array([REGION_KINDS.get(region, 0) for region in text["region"].values] or [0], dtype=np.int8)
    zeros = constant(0, n)
    return NodeBlock(
        dev=dev, name=names, label=labels, start_ns=kept(time_ns), op_start_rel_ns=zeros, op_end_rel_ns=zeros,
        end_rel_ns=zeros, scheduled_ns=zeros, thread_id=kept(column["thread"]),
        temp_bytes=zeros, persistent_bytes=zeros, device_temp_bytes=zeros, device_persistent_bytes=zeros,
        persistent_count=zeros, persistent_ids=np.zeros(0, dtype=np.int64),
        mem_node=np.arange(n, dtype=np.int32), mem_allocator=allocator_names if everything else allocator_names.take(rows),
        mem_total=alloc_bytes, mem_peak=alloc_bytes, mem_live=live_bytes,
        mem_in_use=kept(column["bytes_allocated"]), mem_record_count=record_count,
        rec_micros=rec_time_ns // 1000, rec_bytes=rec_bytes,
        out_node=out_node, out_slot=constant(0, len(out_node)),
        out_allocator=allocator_names.take(alloc_rows),
        out_allocation_id=out_allocation_id, out_requested=column["requested"][alloc_rows],
        out_allocated=size[alloc_rows], out_ptr=addr[alloc_rows], out_single_ref=np.zeros(len(out_node), dtype=np.bool_),
        out_dtype=column["dtype"][alloc_rows], out_rank=ranks,
        out_dims=dims, rec_time_ns=rec_time_ns,
        mem_has_snapshot=np.broadcast_to(True, (n,)), mem_fragmentation=kept(column["fragmentation"]),
        out_kind=region_kind[region_codes] if len(region_codes) else np.zeros(0, dtype=np.int8),
    )
