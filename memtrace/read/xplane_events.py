"""A profile's memory events as columns: what both ways of reading an XSpace produce.

The reference walk over upb's messages (:func:`.xplane.collect`) and the wire-format fast path
(:func:`.xplane_binary.collect`) each fill an :class:`Events`; :mod:`.xplane` maps it into the
model. Numbers are kept as numpy arrays (a large profile has millions of events), texts as
codes into a table of their distinct values (:class:`~.builder.CodedTexts`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .builder import CodedTexts

ALLOCATION, DEALLOCATION = "MemoryAllocation", "MemoryDeallocation"
# Stat names that only XLA's runtimes (JAX, PyTorch/XLA) write: a profile that is not TensorFlow's.
XLA_SIGNS = ("pjrt", "jit_", "xla/python", "torch_xla")

NUMBERS = {"time_ps": np.int64, "is_alloc": np.bool_, "bytes_allocated": np.int64, "requested": np.int64,
           "allocation": np.int64, "addr": np.uint64, "dtype": np.int64, "thread": np.int64,
           "fragmentation": np.float64, "peak_in_use": np.int64, "available": np.int64}
# An event's time in picoseconds (its line's timestamp_ns x 1000 + its offset_ps, + duration_ps for a
# step) must be under this in magnitude (53 days from the profile's origin): int64 with room for sums.
PS_LIMIT = 1 << 62
NO_FRAGMENTATION = -1.0  # an event without TF's fragmentation stat
TEXTS = ("allocator", "tf_op", "shape", "region")


@dataclass
class Events:
    """Memory events in file order: ``time_ps`` (line start + offset), ``is_alloc``, the allocator's
    ``bytes_allocated`` after the event, ``requested``/``allocation`` bytes, ``addr``, ``dtype``
    (DataType number), the line's id as ``thread``, TF's own ``fragmentation`` metric after the
    event (-1 where absent), the allocator's own ``peak_in_use`` counter (``peak_bytes_in_use``, 0
    where absent), ``available`` (``bytes_available``: the limit minus the bytes in use, 0 where
    absent); ``allocator``, ``tf_op``, ``shape`` and ``region`` (``region_type``) texts;
    plus the step windows and op types the file holds and whether it shows signs of XLA.
    """

    numbers: dict[str, list[np.ndarray]] = field(default_factory=lambda: {name: [] for name in NUMBERS})
    texts: dict[str, list[CodedTexts]] = field(default_factory=lambda: {name: [] for name in TEXTS})
    steps: dict[int, tuple[int, int]] = field(default_factory=dict)  # step -> (start ps, end ps)
    op_types: dict[str, str] = field(default_factory=dict)
    xla_signs: bool = False

    def __len__(self) -> int:
        return sum(map(len, self.texts["allocator"]))

    def add(self, **columns: Any) -> None:
        """Append events: every number column (arrays or lists) and every text column (lists or coded)."""
        if set(columns) != set(NUMBERS) | set(TEXTS):
            raise ValueError(f"events need exactly the columns {sorted(NUMBERS) + sorted(TEXTS)}")
        for name, dtype in NUMBERS.items():
            self.numbers[name].append(np.asarray(columns[name], dtype=dtype))
        for name in TEXTS:
            self.texts[name].append(CodedTexts.of(columns[name]))

    def column(self, name: str) -> np.ndarray:
        """One number column, whole."""
        parts = self.numbers[name]
        if len(parts) > 1:
            self.numbers[name] = parts = [np.concatenate(parts)]
        return parts[0] if parts else np.zeros(0, dtype=NUMBERS[name])

    def text(self, name: str) -> CodedTexts:
        """One text column, whole."""
        parts = self.texts[name]
        if len(parts) != 1:
            self.texts[name] = parts = [CodedTexts.concatenate(parts) if parts else CodedTexts.of([])]
        return parts[0]

    def add_step(self, number: int, start_ps: int, end_ps: int) -> None:
        """A step marker; a step marked several times spans all its markers."""
        old = self.steps.get(number)
        self.steps[number] = (start_ps, end_ps) if old is None else (min(old[0], start_ps), max(old[1], end_ps))

    def extend(self, other: Events) -> None:
        """Append another file's (or reading's) events."""
        for name in NUMBERS:
            self.numbers[name].extend(other.numbers[name])
        for name in TEXTS:
            self.texts[name].extend(other.texts[name])
        for number, (start, end) in other.steps.items():
            self.add_step(number, start, end)
        for op, op_type in other.op_types.items():
            self.op_types.setdefault(op, op_type)
        self.xla_signs = self.xla_signs or other.xla_signs

    def same_as(self, other: Events) -> bool:
        """Equal columns, steps, op types and signs (to compare the two ways of reading)."""
        return (all(np.array_equal(self.column(n), other.column(n)) for n in NUMBERS)
                and all(self.text(n).tolist() == other.text(n).tolist() for n in TEXTS)
                and (self.steps, self.op_types, self.xla_signs) == (other.steps, other.op_types, other.xla_signs))
