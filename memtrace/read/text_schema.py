"""The part of TensorFlow's trace schema the fast text reader knows: message types and their fields.

Each message type memtrace reads has a number here; each field is a message field (a child of
some type), or a scalar with the form its value is written in. ``DELEG`` is a top-level
RunMetadata field handed to protobuf whole (the graphs), ``SKIP`` anything inside one.
"""

from __future__ import annotations

# StepStats, RunMetadata, DeviceStepStats, NodeExecStats, AllocatorMemoryUsed, AllocationRecord,
# NodeOutput, TensorDescription, TensorShapeProto, its Dim, AllocationDescription, MemoryStats, a
# referenced tensor's AllocationDescription, a thread_names entry; a delegated field, inside one.
(SS, RM, DEV, NODE, MEM, REC, OUT, TD, SHAPE, DIM, AD, MS, REF, TN, DELEG, SKIP) = range(16)
TYPES = 16
I64, U64, I32, U32, BOOL, STR, ENUM = range(7)  # how a scalar field's value is written

# The full names protobuf's errors give them (less the package, as the reference path says them).
TYPE_NAMES = {SS: "StepStats", RM: "RunMetadata", DEV: "DeviceStepStats", NODE: "NodeExecStats",
              MEM: "AllocatorMemoryUsed", REC: "AllocationRecord", OUT: "NodeOutput", TD: "TensorDescription",
              SHAPE: "TensorShapeProto", DIM: "TensorShapeProto.Dim", AD: "AllocationDescription",
              MS: "MemoryStats", REF: "AllocationDescription", TN: "DeviceStepStats.ThreadNamesEntry"}

CHILDREN: dict[int, dict[str, int]] = {
    SS: {"dev_stats": DEV},
    RM: {"step_stats": SS, "cost_graph": DELEG, "partition_graphs": DELEG, "function_graphs": DELEG,
         "session_metadata": DELEG},
    DEV: {"node_stats": NODE, "thread_names": TN},
    NODE: {"memory": MEM, "output": OUT, "referenced_tensor": REF, "memory_stats": MS},
    MEM: {"allocation_records": REC},
    OUT: {"tensor_description": TD},
    TD: {"shape": SHAPE, "allocation_description": AD},
    SHAPE: {"dim": DIM},
}
SINGULAR_CHILDREN = {(RM, "step_stats"), (RM, "cost_graph"), (RM, "session_metadata"), (NODE, "memory_stats"),
                      (OUT, "tensor_description"), (TD, "shape"), (TD, "allocation_description")}
_ALLOCATION_DESCRIPTION = {"requested_bytes": I64, "allocated_bytes": I64, "allocator_name": STR,
                           "allocation_id": I64, "has_single_reference": BOOL, "ptr": U64}
FIELDS: dict[int, dict[str, int]] = {
    DEV: {"device": STR},
    TN: {"key": U32, "value": STR},
    NODE: {"node_name": STR, "all_start_micros": I64, "op_start_rel_micros": I64, "op_end_rel_micros": I64,
           "all_end_rel_micros": I64, "timeline_label": STR, "scheduled_micros": I64, "thread_id": U32,
           "all_start_nanos": I64, "op_start_rel_nanos": I64, "op_end_rel_nanos": I64, "all_end_rel_nanos": I64,
           "scheduled_nanos": I64},
    MEM: {"allocator_name": STR, "total_bytes": I64, "peak_bytes": I64, "live_bytes": I64,
          "allocator_bytes_in_use": I64},
    REC: {"alloc_micros": I64, "alloc_bytes": I64},
    OUT: {"slot": I32},
    TD: {"dtype": ENUM},
    SHAPE: {"unknown_rank": BOOL},
    DIM: {"size": I64, "name": STR},
    AD: _ALLOCATION_DESCRIPTION,
    REF: _ALLOCATION_DESCRIPTION,
    MS: {"temp_memory_size": I64, "persistent_memory_size": I64, "persistent_tensor_alloc_ids": I64,
         "device_temp_memory_size": I64, "device_persistent_memory_size": I64,
         "device_persistent_tensor_alloc_ids": I64},
}
REPEATED_FIELDS = {(MS, "persistent_tensor_alloc_ids"), (MS, "device_persistent_tensor_alloc_ids")}
# Names a field had in older TensorFlow: TF 1.4's step_stats.proto calls MemoryStats fields 1, 3
# and 5 host_temp_memory_size, host_persistent_memory_size and host_persistent_tensor_alloc_ids.
# Text written then uses those names; they are the same fields as today's.
OLD_NAMES: dict[tuple[int, str], str] = {
    (MS, "host_temp_memory_size"): "temp_memory_size",
    (MS, "host_persistent_memory_size"): "persistent_memory_size",
    (MS, "host_persistent_tensor_alloc_ids"): "persistent_tensor_alloc_ids",
}
