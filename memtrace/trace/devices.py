"""A device where an allocator is asked for: ``CPU:0``, ``GPU:0`` or a full device name.

The CPU allocator is ``mklcpu``, ``cpu`` or ``bfc_cpu_allocator_for_gpu`` depending on how
TensorFlow was built and set up, so a budget written as ``mklcpu`` on one machine names nothing
on another. A device travels: it means the allocator that device's memory went through, the one
with the most memory entries on the device's nodes (then the most output buffers; then the
name), and every command that takes one says which allocator it meant.
"""

from __future__ import annotations

import re

import numpy as np

from ..errors import UsageError
from .data import TraceData

# Allocator names TensorFlow chose that say something else than they mean, and what they mean.
ALLOCATOR_NOTES = {
    "bfc_cpu_allocator_for_gpu": "TensorFlow's name for its CPU BFC allocator (TF_CPU_ALLOCATOR_USE_BFC=true): "
    "CPU memory, no GPU involved",
}

_SPEC = re.compile(r"^(?:.*/)?(?:device:)?(cpu|gpu|tpu|sycl|xla_cpu|xla_gpu):(\d+)$", re.IGNORECASE)


def short_device_name(name: str) -> str | None:
    """``/job:localhost/replica:0/task:0/device:GPU:0`` -> ``GPU:0``; None for what is no device."""
    match = _SPEC.match(name.strip())
    return f"{match.group(1).upper()}:{int(match.group(2))}" if match else None


def device_allocator(trace: TraceData, spec: str) -> str | None:
    """The allocator the device ``spec`` names in this trace, or None when no canonical device matches."""
    wanted = short_device_name(spec)
    matching = [
        index for index, (name, kind) in enumerate(zip(trace.devices.name, trace.devices.kind))
        if kind == "device" and (name == spec or (wanted is not None and short_device_name(name) == wanted))
    ]
    if not matching or not trace.allocators:
        return None
    on_device = np.isin(trace.nodes.device, matching)
    memory = trace.memory
    named = on_device[memory.node] & (memory.allocator >= 0)
    entries = np.bincount(memory.allocator[named], minlength=len(trace.allocators))
    outputs = trace.outputs
    owned = on_device[outputs.node] & (outputs.allocator >= 0)
    buffers = np.bincount(outputs.allocator[owned], minlength=len(trace.allocators))
    ranked = sorted(range(len(trace.allocators)), key=lambda a: (-int(entries[a]), -int(buffers[a]), trace.allocators[a]))
    best = ranked[0]
    return trace.allocators[best] if entries[best] or buffers[best] else None


def resolve_allocator(trace: TraceData, spec: str) -> str:
    """``spec`` as an allocator name: itself when the trace has that allocator, else the allocator
    of the device it names; else a UsageError listing the allocators and devices there are."""
    if spec in trace.allocators:
        return spec
    found = device_allocator(trace, spec)
    if found is not None:
        return found
    allocators = ", ".join(trace.allocators) or "none"
    devices = ", ".join(
        dict.fromkeys(short_device_name(n) or n for n, k in zip(trace.devices.name, trace.devices.kind) if k == "device")
    ) or "none"
    raise UsageError(f"{trace.path}: no allocator {spec!r} in this trace (it has: {allocators}); "
                     f"a device names its allocator too (devices: {devices})")


def meaning(spec: str, allocator: str) -> str:
    """How a device was read, for the user: ``CPU:0 means allocator mklcpu``; empty when ``spec`` was the allocator."""
    return "" if spec == allocator else f"{spec} means allocator {allocator}, the one its memory went through"
