"""The options and limits each runtime gives a BFC allocator, by the allocator's name, the limit on a GPU card,
and the settings a user has to change them.

TensorFlow builds its GPU allocators (``GPU_n_bfc``) without growth and with garbage collection, its
pinned host allocator (``gpu_host_bfc``, ``cuda_host_bfc``) and its CPU BFC allocator with growth;
XLA (JAX's GPU client) builds its own with its own options: preallocated and, since the flag
``--xla_gpu_enable_allocator_spatial_partitioning`` (on by default with preallocation in JAX
0.11.2's XLA), spatially partitioned. Where a limit depends on the device, :func:`card_limit_bytes`
says what each runtime leaves of a card. :func:`settings_for` names, per runtime and device, the
environment variable or option that changes each thing the model can change (advice must name
the switch of the runtime that wrote the trace: ``TF_GPU_ALLOCATOR`` means nothing to JAX).
"""

from __future__ import annotations

import math
import re
import struct
from dataclasses import dataclass, field

from ..errors import UsageError
from ..trace.data import TraceData
from ..units import MIB
from .bfc import BFCOptions, EndPolicy

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


# XLA's lower end as JAX 0.11.2 runs it (the H200 recordings): a carve from the central gap follows BFC's split
# rule, where openxla/xla's source (00df9eef) splits the gap exactly (docs/fit.md, "Real GPUs").
XLA_0_11_LOWER_END = EndPolicy(gap_split="heuristic")


@dataclass(frozen=True)
class Defaults:
    """The options the runtime that made an allocator gives it, and in whose words."""

    allow_growth: bool
    garbage_collection: bool
    limit_bytes: int | None  # None where it depends on the device (a GPU card)
    source: str
    runtime: str = "TensorFlow"  # or "XLA" (JAX and other PjRt clients build the allocator with their own options)
    partitioned: bool = False  # XLA's spatial partitioning, which the runtime turns on with preallocation
    lower_end: EndPolicy = field(default_factory=EndPolicy)
    device: str = "CPU"  # "GPU", "CPU" or "host" (pinned host memory for a GPU): whose settings apply

    def options(self, limit_bytes: int, allow_growth: bool | None = None, garbage_collection: bool | None = None,
                fragmentation_fraction: float = 0.0, partitioned: bool | None = None,
                gap_split: str | None = None) -> BFCOptions:
        """The model's options for this allocator: what is given, else the runtime's default. Partitioning
        follows growth where it is not given (XLA turns it off when the pool grows); a ValueError for both."""
        growth = self.allow_growth if allow_growth is None else allow_growth
        split = self.partitioned and not growth if partitioned is None else partitioned
        lower = self.lower_end if gap_split is None else EndPolicy(gap_split=gap_split)
        return BFCOptions(limit_bytes, growth, self.garbage_collection if garbage_collection is None else
                          garbage_collection, fragmentation_fraction, partitioned=split,
                          lower_end=lower if split else EndPolicy())


XLA_MEM_FRACTION = 0.75  # XLA_PYTHON_CLIENT_MEM_FRACTION's default (JAX 0.4 on; 0.9 before)
# XLA's GPU pool comes in whole steps of 2 MiB: JAX 0.11.2 on an H200 made the GPU's memory x the fraction (the
# fraction read as a 32-bit float) rounded up to one, in all 220 runs of fixtures/gpu-heldout/ladder.json.
XLA_POOL_STEP_BYTES = 2 << 20
# The pool ``memtrace run --limit`` asked of XLA (bytes), for its JAX child to compare with the one XLA made.
XLA_POOL_VARIABLE = "MEMTRACE_XLA_POOL_BYTES"
XLA_PARTITIONING_FLAG = "XLA_FLAGS=--xla_gpu_enable_allocator_spatial_partitioning"
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
                            "XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB (default 64 GiB)", "XLA", device="host")
        return Defaults(False, False, None, "XLA's GPU allocator (JAX 0.11.2): allow_growth off (on with "
                        "XLA_PYTHON_CLIENT_PREALLOCATE=false), spatial partitioning on with preallocation (off with "
                        f"{XLA_PARTITIONING_FLAG}=false; a central-gap carve split as JAX 0.11.2 splits it), garbage "
                        "collection off, limit the card's memory x XLA_PYTHON_CLIENT_MEM_FRACTION (default 0.75)",
                        "XLA", partitioned=True, lower_end=XLA_0_11_LOWER_END, device="GPU")
    if _GPU_ALLOCATOR.fullmatch(allocator):
        return Defaults(False, True, None, "TF's GPU allocator: allow_growth off (TF_FORCE_GPU_ALLOW_GROWTH), "
                        "garbage collection on (TF_ENABLE_GPU_GARBAGE_COLLECTION)", device="GPU")
    if _HOST_ALLOCATOR.fullmatch(allocator):
        return Defaults(True, False, HOST_DEFAULT_LIMIT_BYTES, "TF's pinned host allocator for GPUs: allow_growth on, "
                        "garbage collection off, limit TF_GPU_HOST_MEM_LIMIT_IN_MB (default 131,072 MiB; older "
                        "versions: 65,536)", device="host")
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
    reserve (:func:`gpu_limit_bytes`); XLA's, its pool for XLA_PYTHON_CLIENT_MEM_FRACTION's default
    (:func:`xla_pool_bytes`)."""
    if runtime == "XLA":
        return xla_pool_bytes(card_bytes, XLA_MEM_FRACTION)
    return gpu_limit_bytes(card_bytes, compute_capability_major)


def xla_pool_bytes(gpu_bytes: int, fraction: float) -> int:
    """The pool XLA's GPU allocator makes of ``gpu_bytes`` under ``XLA_PYTHON_CLIENT_MEM_FRACTION=fraction``: the
    product with the fraction as a 32-bit float, rounded up to a whole :data:`XLA_POOL_STEP_BYTES` (measured)."""
    product = gpu_bytes * struct.unpack("f", struct.pack("f", fraction))[0]
    return math.ceil(product / XLA_POOL_STEP_BYTES) * XLA_POOL_STEP_BYTES


def xla_fraction_for(pool_bytes: int, gpu_bytes: int) -> float:
    """The ``XLA_PYTHON_CLIENT_MEM_FRACTION`` that makes XLA's pool ``pool_bytes`` (a whole step) on a GPU of
    ``gpu_bytes``: aimed half a step below it, so that the 32-bit fraction's error (under 16 KB up to 256 GB) cannot
    reach the next step or the one below."""
    return (pool_bytes - XLA_POOL_STEP_BYTES / 2) / gpu_bytes



@dataclass(frozen=True)
class Settings:
    """How a user changes what the model can change, for one allocator of one runtime ("": no way to).

    Each field is the setting's text as a user would write it (an environment variable, a flag, an
    option); advice and ``fit``'s "what would help" name these, never another runtime's.
    """

    runtime: str  # "TensorFlow" or "XLA"
    device: str  # "GPU", "CPU" or "host"
    limit: str  # what sets the limit
    growth_on: str = ""
    growth_off: str = ""
    garbage_collection_on: str = ""
    garbage_collection_off: str = ""
    fragmentation_fraction: str = ""  # the setting's name; the value follows
    partitioning_on: str = ""
    partitioning_off: str = ""
    other_allocator: str = ""  # an allocator without BFC's regions (CUDA's stream-ordered pool), where there is one

    @property
    def who(self) -> str:
        """``TF CPU``, ``TF GPU``, ``TF pinned host``, ``XLA GPU``...: whose settings these are, for people."""
        runtime = "TF" if self.runtime == "TensorFlow" else "XLA (JAX)"
        return f"{runtime} {'pinned host memory' if self.device == 'host' else self.device}"


def settings_for(allocator: str, runtime: str = "TensorFlow") -> Settings:
    """The settings of ``allocator`` as ``runtime`` builds it (the device from its name, as :func:`defaults_for`)."""
    device = defaults_for(allocator, runtime).device
    if runtime == "XLA":
        if device == "host":
            return Settings(runtime, device, "XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB",
                            growth_on="XLA_PJRT_GPU_HOST_MEMORY_PREALLOCATE=false",
                            growth_off="XLA_PJRT_GPU_HOST_MEMORY_PREALLOCATE=true")
        return Settings(runtime, device, "XLA_PYTHON_CLIENT_MEM_FRACTION (the card's memory x F; XLA_CLIENT_MEM_FRACTION "
                        "in newer JAX, never both)",
                        growth_on="XLA_PYTHON_CLIENT_PREALLOCATE=false (growth, and no partitioning)",
                        growth_off="XLA_PYTHON_CLIENT_PREALLOCATE=true (the default: one preallocated pool)",
                        partitioning_on=f"{XLA_PARTITIONING_FLAG}=true (the default with preallocation)",
                        partitioning_off=f"{XLA_PARTITIONING_FLAG}=false",
                        other_allocator="XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async (CUDA's stream-ordered pool; JAX "
                        "ignores TF_GPU_ALLOCATOR)")
    if device == "GPU":
        return Settings(runtime, device, "a logical device's memory_limit (tf.config.set_logical_device_configuration)",
                        growth_on="TF_FORCE_GPU_ALLOW_GROWTH=true", growth_off="TF_FORCE_GPU_ALLOW_GROWTH=false",
                        garbage_collection_on="TF_ENABLE_GPU_GARBAGE_COLLECTION=true",
                        garbage_collection_off="TF_ENABLE_GPU_GARBAGE_COLLECTION=false",
                        fragmentation_fraction="GPUOptions.experimental.internal_fragmentation_fraction",
                        other_allocator="TF_GPU_ALLOCATOR=cuda_malloc_async (CUDA's stream-ordered pool)")
    if device == "host":
        return Settings(runtime, device, "TF_GPU_HOST_MEM_LIMIT_IN_MB")
    return Settings(runtime, device, "TF_CPU_BFC_MEM_LIMIT_IN_MB",
                    other_allocator="TF_CPU_ALLOCATOR_USE_BFC unset (TF's default CPU allocator has no BFC regions)")
