"""The options and limits each runtime gives a BFC allocator, by the allocator's name, and the limit on a GPU card.

TensorFlow builds its GPU allocators (``GPU_n_bfc``) without growth and with garbage collection, its
pinned host allocator (``gpu_host_bfc``, ``cuda_host_bfc``) and its CPU BFC allocator with growth;
XLA (JAX's GPU client) builds its own with its own options. Where a limit depends on the device,
:func:`card_limit_bytes` says what each runtime leaves of a card.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import UsageError
from ..trace.data import TraceData
from ..units import MIB

CPU_DEFAULT_LIMIT_BYTES = 65536 * MIB  # TF_CPU_BFC_MEM_LIMIT_IN_MB's default (process_state.cc)
_GPU_ALLOCATOR = re.compile(r"(?:.*:)?gpu_(\d+)_bfc", re.IGNORECASE)
_HOST_ALLOCATOR = re.compile(r"(?:.*:)?(?:cuda|gpu|pluggable_device)_host_bfc", re.IGNORECASE)
# TF_GPU_HOST_MEM_LIMIT_IN_MB's default (process_state.cc, GetGpuHostAllocator); older versions: 65,536 MiB.
HOST_DEFAULT_LIMIT_BYTES = 131072 * MIB

# TF's reserve on a GPU (gpu_device.cc, MinSystemMemory): 225 MiB under 2 GiB of free memory,
# else by compute capability major version: <= 6, 7, 8, and above (before about 2023: 1,536 MiB
# from 8 on). Doubled in debug builds.
_RESERVE_MIB = ((6, 500), (7, 1050), (8, 1536))
_RESERVE_ABOVE_MIB = 1800
_RESERVE_SMALL_MIB = 225


def gpu_reserve_bytes(free_bytes: int, compute_capability_major: int) -> int:
    """What TF leaves to the system on a GPU (``MinSystemMemory``) when no ``memory_limit`` is set."""
    if free_bytes < (1 << 31):
        return _RESERVE_SMALL_MIB * MIB
    for major, mib in _RESERVE_MIB:
        if compute_capability_major <= major:
            return mib * MIB
    return _RESERVE_ABOVE_MIB * MIB


def gpu_limit_bytes(free_bytes: int, compute_capability_major: int) -> int:
    """TF's GPU allocator limit on a card with ``free_bytes`` free: free minus the reserve (when the reserve is smaller)."""
    reserve = gpu_reserve_bytes(free_bytes, compute_capability_major)
    return free_bytes - reserve if reserve < free_bytes else free_bytes


def parse_compute_capability(text: str) -> int:
    """``"8.0"`` or ``"8"`` -> 8 (the major version is what TF's reserve depends on); a UsageError otherwise."""
    match = re.fullmatch(r"\s*(\d{1,3})(?:\.\d{1,3})?\s*", text)
    if match is None:
        raise UsageError(f"not a compute capability: {text!r} (write e.g. 8.0 or 7.5)")
    return int(match.group(1))


@dataclass(frozen=True)
class Defaults:
    """The options the runtime that made an allocator gives it, and in whose words."""

    allow_growth: bool
    garbage_collection: bool
    limit_bytes: int | None  # None where it depends on the device (a GPU card)
    source: str
    runtime: str = "TensorFlow"  # or "XLA" (JAX and other PjRt clients build the allocator with their own options)


XLA_MEM_FRACTION = 0.75  # XLA_PYTHON_CLIENT_MEM_FRACTION's default (JAX 0.4 on; 0.9 before)
XLA_HOST_DEFAULT_LIMIT_BYTES = 64 << 30  # XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB's default (pjrt gpu_helpers.cc)
_XLA_HOST_ALLOCATOR = re.compile(r"(?:.*:)?xla_gpu_host_bfc", re.IGNORECASE)


def defaults_for(allocator: str, runtime: str = "TensorFlow") -> Defaults:
    """The options of an allocator by its name and the runtime that built it (:meth:`TraceData.runtime_of`).

    TensorFlow: GPU (``GPU_n_bfc``), pinned host memory (``gpu_host_bfc``, ``cuda_host_bfc``) or
    TF's CPU BFC (anything else). XLA (JAX's GPU client, pjrt's gpu_helpers.cc): its pinned host
    allocator (``xla_gpu_host_bfc``) or a device's (``GPU_n_bfc``, anything else).
    """
    if runtime == "XLA":
        if _XLA_HOST_ALLOCATOR.fullmatch(allocator):
            return Defaults(True, False, XLA_HOST_DEFAULT_LIMIT_BYTES, "XLA's pinned host allocator (JAX): allow_growth "
                            "on (off with XLA_PJRT_GPU_HOST_MEMORY_PREALLOCATE), garbage collection off, limit "
                            "XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB (default 64 GiB)", "XLA")
        return Defaults(False, False, None, "XLA's GPU allocator (JAX): allow_growth off (on with "
                        "XLA_PYTHON_CLIENT_PREALLOCATE=false), garbage collection off, limit the card's memory x "
                        "XLA_PYTHON_CLIENT_MEM_FRACTION (default 0.75)", "XLA")
    if _GPU_ALLOCATOR.fullmatch(allocator):
        return Defaults(False, True, None, "TF's GPU allocator: allow_growth off (TF_FORCE_GPU_ALLOW_GROWTH), "
                        "garbage collection on (TF_ENABLE_GPU_GARBAGE_COLLECTION)")
    if _HOST_ALLOCATOR.fullmatch(allocator):
        return Defaults(True, False, HOST_DEFAULT_LIMIT_BYTES, "TF's pinned host allocator for GPUs: allow_growth on, "
                        "garbage collection off, limit TF_GPU_HOST_MEM_LIMIT_IN_MB (default 131,072 MiB; older "
                        "versions: 65,536)")
    return Defaults(True, False, CPU_DEFAULT_LIMIT_BYTES, "TF's CPU BFC allocator (TF_CPU_ALLOCATOR_USE_BFC): "
                    "allow_growth on, garbage collection off, limit TF_CPU_BFC_MEM_LIMIT_IN_MB (default 65,536 MiB)")


def trace_defaults(trace: TraceData, allocator: str) -> Defaults:
    """:func:`defaults_for` the runtime that recorded ``allocator``'s events in ``trace`` (XLA's or TF's)."""
    return defaults_for(allocator, trace.runtime_of(allocator))


def is_host_allocator(allocator: str) -> bool:
    """Whether the allocator holds pinned host memory (RAM) for a GPU: TF's ``gpu_host_bfc``/``cuda_host_bfc``,
    XLA's ``xla_gpu_host_bfc``. A card's memory does not limit it."""
    return bool(_HOST_ALLOCATOR.fullmatch(allocator) or _XLA_HOST_ALLOCATOR.fullmatch(allocator))


def limit_on_card(allocator: str, runtime: str, card_bytes: int, compute_capability_major: int,
                  card_text: str = "the card") -> tuple[int, str | None]:
    """The limit ``--card`` sets on an allocator, and a note where it is not the card's.

    The card limits the GPU's allocators (:func:`card_limit_bytes`); a pinned host allocator holds
    RAM, so it keeps its own limit (``TF_GPU_HOST_MEM_LIMIT_IN_MB``, 131,072 MiB; XLA's
    ``XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB``, 64 GiB), and the note says so. Any other allocator
    (a CPU allocator's trace asked about a card, as ``fit --vs`` does) takes the card's limit.
    """
    defaults = defaults_for(allocator, runtime)
    if is_host_allocator(allocator) and defaults.limit_bytes is not None:
        setting = "XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB" if runtime == "XLA" else "TF_GPU_HOST_MEM_LIMIT_IN_MB"
        return defaults.limit_bytes, (
            f"{card_text} is a GPU's memory and limits the GPU's allocators only: {allocator} holds pinned host "
            f"memory (RAM), so it keeps its own limit, {setting}'s default ({defaults.limit_bytes // MIB:,} MiB)")
    return card_limit_bytes(card_bytes, compute_capability_major, runtime), None


def card_limit_bytes(card_bytes: int, compute_capability_major: int, runtime: str = "TensorFlow") -> int:
    """The limit a runtime gives its GPU allocator on a card of ``card_bytes``: TF's, the card minus its
    reserve (:func:`gpu_limit_bytes`); XLA's, the card x XLA_PYTHON_CLIENT_MEM_FRACTION's default."""
    if runtime == "XLA":
        return int(card_bytes * XLA_MEM_FRACTION)
    return gpu_limit_bytes(card_bytes, compute_capability_major)

