"""Turning a stream of parsed trace facts into the columnar :class:`~memtrace.model.Trace`.

Readers (protobuf text, protobuf binary, and any faster path added later) call the ``add_*``
methods in trace order and then :meth:`TraceBuilder.build`; nothing downstream knows which
reader ran. The builder interns strings, parses timeline labels, and notes oddities.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence

import numpy as np

from .labels import parse_input, parse_label
from .model import (
    Devices,
    GraphNodes,
    Memory,
    Nodes,
    Oddity,
    Outputs,
    Records,
    Trace,
    device_kind,
)

_DTYPE_ALIASES = {"FLOAT": "float32", "DOUBLE": "float64", "HALF": "float16"}


def dtype_display_name(enum_name: str) -> str:
    """``DT_FLOAT`` -> ``float32``, ``DT_INT64_REF`` -> ``int64_ref``: the names Python users know."""
    if enum_name in ("", "DT_INVALID"):
        return ""
    base = enum_name.removeprefix("DT_")
    ref = base.endswith("_REF")
    if ref:
        base = base[:-4]
    name = _DTYPE_ALIASES.get(base, base.lower())
    return name + "_ref" if ref else name


class _Inputs:
    """Ragged input lists (name, slot, control flag) for nodes or graph nodes."""

    def __init__(self) -> None:
        self.offsets = array("q", [0])
        self.name = array("i")
        self.slot = array("i")
        self.is_control = array("b")

    def add(self, strings: _Strings, inputs: Iterable[tuple[str, int, bool]]) -> None:
        for name, slot, is_control in inputs:
            self.name.append(strings.intern(name))
            self.slot.append(slot)
            self.is_control.append(is_control)
        self.offsets.append(len(self.name))


class _Strings:
    def __init__(self) -> None:
        self.index: dict[str, int] = {"": 0}
        self.values: list[str] = [""]

    def intern(self, value: str) -> int:
        found = self.index.get(value)
        if found is None:
            found = self.index[value] = len(self.values)
            self.values.append(value)
        return found


class TraceBuilder:
    """Accumulates one trace in trace order; :meth:`build` freezes it into numpy columns."""

    def __init__(self) -> None:
        self._strings = _Strings()
        self._devices: dict[str, int] = {}
        self._allocators: dict[str, int] = {}
        self._node_cols: dict[str, array[int]] = {
            name: array("q")
            for name in (
                "name", "op_label", "device", "start_ns", "op_start_ns", "op_end_ns", "end_ns",
                "scheduled_ns", "thread_id", "label", "temp_bytes", "persistent_bytes",
            )
        }
        self._persistent_offsets = array("q", [0])
        self._persistent_ids = array("q")
        self._node_inputs = _Inputs()
        self._mem_cols: dict[str, array[int]] = {
            name: array("q")
            for name in ("node", "allocator", "total_bytes", "peak_bytes", "live_bytes", "bytes_in_use")
        }
        self._record_offsets = array("q", [0])
        self._rec_cols: dict[str, array[int]] = {
            name: array("q") for name in ("allocator", "time_ns", "bytes", "node", "memory")
        }
        self._out_cols: dict[str, array[int]] = {
            name: array("q")
            for name in (
                "node", "slot", "allocator", "allocation_id", "requested_bytes", "allocated_bytes",
                "has_single_reference", "dtype", "rank",
            )
        }
        self._out_ptr = array("Q")
        self._shape_offsets = array("q", [0])
        self._shape_dims = array("q")
        self._graph: tuple[str, list[tuple[str, str, str, list[str]]]] | None = None
        self._oddities: dict[str, list[object]] = {}

    # -- facts, in trace order ---------------------------------------------------------------

    def note(self, kind: str, example: str) -> None:
        """Count an oddity of this kind, keeping the first example."""
        entry = self._oddities.get(kind)
        if entry is None:
            self._oddities[kind] = [1, example]
        else:
            entry[0] = int(entry[0]) + 1  # type: ignore[call-overload]

    def device(self, name: str) -> int:
        found = self._devices.get(name)
        if found is None:
            found = self._devices[name] = len(self._devices)
        return found

    def _allocator(self, name: str) -> int:
        if not name:
            return -1
        found = self._allocators.get(name)
        if found is None:
            found = self._allocators[name] = len(self._allocators)
        return found

    def add_node(
        self,
        device: int,
        name: str,
        start_ns: int,
        op_start_rel_ns: int,
        op_end_rel_ns: int,
        end_rel_ns: int,
        scheduled_ns: int,
        thread_id: int,
        label: str,
        temp_bytes: int = 0,
        persistent_bytes: int = 0,
        persistent_ids: Sequence[int] = (),
    ) -> int:
        """Add a node; times relative to its start as TensorFlow writes them. Returns its index."""
        node = len(self._node_cols["name"])
        parsed = parse_label(label) if label else None
        cols = self._node_cols
        cols["name"].append(self._strings.intern(name))
        cols["op_label"].append(self._strings.intern(parsed.op_type) if parsed else 0)
        cols["device"].append(device)
        cols["start_ns"].append(start_ns)
        cols["op_start_ns"].append(start_ns + op_start_rel_ns)
        cols["op_end_ns"].append(start_ns + op_end_rel_ns)
        cols["end_ns"].append(start_ns + end_rel_ns)
        cols["scheduled_ns"].append(scheduled_ns)
        cols["thread_id"].append(thread_id)
        cols["label"].append(self._strings.intern(label))
        cols["temp_bytes"].append(temp_bytes)
        cols["persistent_bytes"].append(persistent_bytes)
        self._persistent_ids.extend(persistent_ids)
        self._persistent_offsets.append(len(self._persistent_ids))
        inputs = parsed.inputs if parsed else ()
        self._node_inputs.add(self._strings, ((i.name, i.slot, i.is_control) for i in inputs))
        if start_ns <= 0:
            self.note("node-not-started", f"{name!r} has all_start_micros {start_ns // 1000}")
        elif end_rel_ns < 0 or op_end_rel_ns < op_start_rel_ns:
            self.note("negative-duration", f"{name!r} ends before it starts")
        return node

    def add_memory(
        self,
        node: int,
        allocator_name: str,
        total_bytes: int,
        peak_bytes: int,
        live_bytes: int,
        bytes_in_use: int,
        records: Iterable[tuple[int, int]],
    ) -> None:
        """One allocator entry of a node, with its ``(alloc_micros, alloc_bytes)`` records."""
        allocator = self._allocator(allocator_name)
        memory = len(self._mem_cols["node"])
        for col, value in zip(
            ("node", "allocator", "total_bytes", "peak_bytes", "live_bytes", "bytes_in_use"),
            (node, allocator, total_bytes, peak_bytes, live_bytes, bytes_in_use),
        ):
            self._mem_cols[col].append(value)
        rec = self._rec_cols
        for micros, nbytes in records:
            rec["allocator"].append(allocator)
            rec["time_ns"].append(micros * 1000)
            rec["bytes"].append(nbytes)
            rec["node"].append(node)
            rec["memory"].append(memory)
            if nbytes == 0:
                self.note("zero-byte-record", f"a record of 0 bytes on {self._node_label(node)}")
        self._record_offsets.append(len(rec["bytes"]))
        if not allocator_name and self._record_offsets[-1] > self._record_offsets[-2]:
            self.note("records-without-allocator", f"records with no allocator name on {self._node_label(node)}")

    def add_output(
        self,
        node: int,
        slot: int,
        allocator_name: str,
        allocation_id: int,
        requested_bytes: int,
        allocated_bytes: int,
        ptr: int,
        has_single_reference: bool,
        dtype_enum_name: str,
        dims: Sequence[int] | None,
    ) -> None:
        """One output tensor; ``dims`` is None when the shape is unknown."""
        cols = self._out_cols
        cols["node"].append(node)
        cols["slot"].append(slot)
        cols["allocator"].append(self._allocator(allocator_name))
        cols["allocation_id"].append(allocation_id)
        cols["requested_bytes"].append(requested_bytes)
        cols["allocated_bytes"].append(allocated_bytes)
        cols["has_single_reference"].append(int(has_single_reference))
        cols["dtype"].append(self._strings.intern(dtype_display_name(dtype_enum_name)))
        cols["rank"].append(-1 if dims is None else len(dims))
        self._out_ptr.append(ptr)
        if dims is not None:
            self._shape_dims.extend(dims)
        self._shape_offsets.append(len(self._shape_dims))
        if not allocator_name:
            self.note("output-without-allocator", f"{self._node_label(node)} output {slot}")
        if requested_bytes > allocated_bytes:
            self.note(
                "requested-exceeds-allocated",
                f"{self._node_label(node)} output {slot}: requested {requested_bytes} > allocated {allocated_bytes}",
            )

    def set_graph(self, source: str, nodes: list[tuple[str, str, str, list[str]]]) -> None:
        """The graph's nodes as ``(name, op, device, inputs)``, inputs as GraphDef writes them."""
        self._graph = (source, nodes)

    def _node_label(self, node: int) -> str:
        return repr(self._strings.values[self._node_cols["name"][node]])

    # -- freezing ---------------------------------------------------------------------------

    def build(self, path: str, source_format: str, message: str) -> Trace:
        strings = self._strings
        graph = None
        graph_source = None
        graph_ops: dict[int, int] = {}
        if self._graph is not None:
            graph_source, graph_nodes = self._graph
            inputs = _Inputs()
            name, op, device = array("i"), array("i"), array("i")
            for node_name, node_op, node_device, node_inputs in graph_nodes:
                name.append(strings.intern(node_name))
                op.append(strings.intern(node_op))
                device.append(strings.intern(node_device))
                graph_ops.setdefault(name[-1], op[-1])
                inputs.add(strings, ((i.name, i.slot, i.is_control) for i in map(parse_input, node_inputs)))
            graph = GraphNodes(
                name=_i32(name), op=_i32(op), device=_i32(device), **_ragged_inputs(inputs)
            )

        cols = {k: _i64(v) for k, v in self._node_cols.items()}
        names = cols["name"].astype(np.int32)
        op_type = cols["op_label"].astype(np.int32)
        if graph_ops:
            from_graph = np.array([graph_ops.get(int(n), -1) for n in names], dtype=np.int32)
            op_type = np.where(from_graph >= 0, from_graph, op_type).astype(np.int32)
        nodes = Nodes(
            name=names,
            op_type=op_type,
            device=cols["device"].astype(np.int32),
            start_ns=cols["start_ns"],
            op_start_ns=cols["op_start_ns"],
            op_end_ns=cols["op_end_ns"],
            end_ns=cols["end_ns"],
            scheduled_ns=cols["scheduled_ns"],
            thread_id=cols["thread_id"],
            label=cols["label"].astype(np.int32),
            temp_bytes=cols["temp_bytes"],
            persistent_bytes=cols["persistent_bytes"],
            persistent_ids_offsets=_i64(self._persistent_offsets),
            persistent_ids=_i64(self._persistent_ids),
            **_ragged_inputs(self._node_inputs),
        )
        mem = {k: _i64(v) for k, v in self._mem_cols.items()}
        memory = Memory(
            node=mem["node"].astype(np.int32),
            allocator=mem["allocator"].astype(np.int32),
            total_bytes=mem["total_bytes"],
            peak_bytes=mem["peak_bytes"],
            live_bytes=mem["live_bytes"],
            bytes_in_use=mem["bytes_in_use"],
            record_offsets=_i64(self._record_offsets),
        )
        rec = {k: _i64(v) for k, v in self._rec_cols.items()}
        records = Records(
            allocator=rec["allocator"].astype(np.int32),
            time_ns=rec["time_ns"],
            bytes=rec["bytes"],
            node=rec["node"].astype(np.int32),
            memory=rec["memory"].astype(np.int32),
        )
        out = {k: _i64(v) for k, v in self._out_cols.items()}
        outputs = Outputs(
            node=out["node"].astype(np.int32),
            slot=out["slot"].astype(np.int32),
            allocator=out["allocator"].astype(np.int32),
            allocation_id=out["allocation_id"],
            requested_bytes=out["requested_bytes"],
            allocated_bytes=out["allocated_bytes"],
            ptr=np.array(self._out_ptr, dtype=np.uint64),
            has_single_reference=out["has_single_reference"].astype(np.bool_),
            dtype=out["dtype"].astype(np.int32),
            rank=out["rank"].astype(np.int32),
            shape_offsets=_i64(self._shape_offsets),
            shape_dims=_i64(self._shape_dims),
        )
        device_names = tuple(self._devices)
        return Trace(
            path=path,
            source_format=source_format,
            message=message,
            strings=tuple(strings.values),
            allocators=tuple(self._allocators),
            devices=Devices(name=device_names, kind=tuple(device_kind(d) for d in device_names)),
            nodes=nodes,
            memory=memory,
            records=records,
            outputs=outputs,
            graph=graph,
            graph_source=graph_source,
            oddities=tuple(Oddity(kind, int(c), str(e)) for kind, (c, e) in self._oddities.items()),  # type: ignore[call-overload]
        )


def _i64(values: array[int]) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def _i32(values: array[int]) -> np.ndarray:
    return np.array(values, dtype=np.int32)


def _ragged_inputs(inputs: _Inputs) -> dict[str, np.ndarray]:
    return {
        "input_offsets": _i64(inputs.offsets),
        "input_name": _i32(inputs.name),
        "input_slot": _i32(inputs.slot),
        "input_is_control": np.array(inputs.is_control, dtype=np.bool_),
    }
