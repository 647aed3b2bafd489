"""Write a large synthetic StepStats text trace, deterministically, for benchmarks.

``python scripts/make_trace.py OUT --size 1GB [--gzip]`` writes training steps of a ResNet-50
until the file reaches the size. The node names are the real ones of a TF2 ResNet-50 training
function (``fixtures/resnet50_node_names.txt``, seed 003); op types follow from the names, and
each node's label names the two nodes before it as inputs. Per step, every node runs on
``/job:localhost/replica:0/task:0/device:GPU:0`` with one ``GPU_0_bfc`` memory entry (an
allocation when it starts, freed when a later node ends: the free is recorded on the producer,
as TensorFlow does), an ``allocator_bytes_in_use`` snapshot on every fourth node that agrees
with the records plus a 100 MiB baseline, one output with a 4-D shape and its allocation
description; every fourth node also has a kernel entry on the ``stream:all`` pseudo-device.
Sizes come from a hash of the name, so the same arguments always write the same bytes.

Only ever write these files under /tmp or the gitignored ``bench-out/``: they are not fixtures.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NAMES = ROOT / "fixtures" / "resnet50_node_names.txt"
GPU = "/job:localhost/replica:0/task:0/device:GPU:0"
STREAM = "/device:GPU:0/stream:all"
BASELINE_BYTES = 100 << 20
START_MICROS = 1_700_000_000_000_000
NODE_MICROS = 10  # each node starts 10 us after the previous one and runs 8 us
STEP_GAP_MICROS = 1000
_OPS = ("Conv2DBackpropFilter", "Conv2DBackpropInput", "Conv2D", "FusedBatchNormGradV3", "FusedBatchNormV3",
        "ReadVariableOp", "ReluGrad", "Relu", "BiasAddGrad", "BiasAdd", "MatMul", "Reshape", "Shape", "Pad",
        "Mean", "Tile", "Slice", "Cast", "AddN", "Const", "Identity")


def _op_type(name: str) -> str:
    last = name.rsplit("/", 1)[-1]
    for op in _OPS:
        if re.match(op + r"(_\d+)?($|[-_])", last):
            return op
    return "Identity"


def _unit(name: str, salt: str) -> int:
    return int.from_bytes(hashlib.sha256((salt + name).encode()).digest()[:8], "little")


class _Node:
    """What stays the same for one name in every step: sizes, shape, how long its output lives."""

    def __init__(self, index: int, name: str, names: list[str]):
        self.name = name
        op = _op_type(name)
        inputs = [names[index - 1], names[index - 2] + ":1"] if index >= 2 else []
        self.label = f"[GPU_0_bfc {{mb}}MB {{mb}}MB] {name} = {op}({', '.join(inputs)})"
        h = _unit(name, "shape")
        self.shape = [32, 7 << (h % 4), 7 << ((h >> 2) % 4), 64 << ((h >> 4) % 4)]
        elements = self.shape[0] * self.shape[1] * self.shape[2] * self.shape[3]
        self.requested = 4 * elements if op != "Const" else 4 * (1 + h % 1000)
        self.allocated = (self.requested + 255) // 256 * 256
        self.lifetime = 1 + (h >> 8) % 5  # freed when the node this many places later ends
        self.kernel = index % 4 == 0


def _chunk(step: int, nodes: list[_Node]) -> str:
    """One step as text: the GPU's nodes, then the stream's kernels."""
    n = len(nodes)
    step_start = START_MICROS + step * (n * NODE_MICROS + STEP_GAP_MICROS)
    out = [f'dev_stats {{\n  device: "{GPU}"\n']
    live: list[tuple[int, int]] = []  # (last node it outlives, allocated) of outputs not yet freed
    for i, node in enumerate(nodes):
        start = step_start + i * NODE_MICROS
        allocation_id = step * n + i + 1
        until = min(i + node.lifetime, n - 1)  # freed when that node ends; every step frees all it allocates
        free_at = step_start + until * NODE_MICROS + 8
        live = [(last, size) for last, size in live if last >= i]
        live.append((until, node.allocated))
        # The snapshot at op end (start + 7): this node's output and every earlier one not yet freed.
        in_use = BASELINE_BYTES + sum(size for _, size in live)
        snapshot = f"      allocator_bytes_in_use: {in_use}\n" if i % 4 == 0 else ""
        mb = f"{node.allocated / 1e6:.1f}"
        out.append(
            f"  node_stats {{\n"
            f'    node_name: "{node.name}"\n'
            f"    all_start_micros: {start}\n"
            f"    op_start_rel_micros: 1\n"
            f"    op_end_rel_micros: 7\n"
            f"    all_end_rel_micros: 8\n"
            f"    memory {{\n"
            f'      allocator_name: "GPU_0_bfc"\n'
            f"      total_bytes: {node.allocated}\n"
            f"      peak_bytes: {node.allocated}\n"
            f"      live_bytes: {node.allocated}\n"
            f"{snapshot}"
            f"      allocation_records {{\n"
            f"        alloc_micros: {start + 1}\n"
            f"        alloc_bytes: {node.allocated}\n"
            f"      }}\n"
            f"      allocation_records {{\n"
            f"        alloc_micros: {free_at}\n"
            f"        alloc_bytes: {-node.allocated}\n"
            f"      }}\n"
            f"    }}\n"
            f"    output {{\n"
            f"      tensor_description {{\n"
            f"        dtype: DT_FLOAT\n"
            f"        shape {{\n"
            + "".join(f"          dim {{\n            size: {d}\n          }}\n" for d in node.shape)
            + f"        }}\n"
            f"        allocation_description {{\n"
            f"          requested_bytes: {node.requested}\n"
            f"          allocated_bytes: {node.allocated}\n"
            f'          allocator_name: "GPU_0_bfc"\n'
            f"          allocation_id: {allocation_id}\n"
            f"          has_single_reference: true\n"
            f"          ptr: {0x7F0000000000 + (allocation_id * 4096) % (1 << 36)}\n"
            f"        }}\n"
            f"      }}\n"
            f"    }}\n"
            f'    timeline_label: "{node.label.format(mb=mb)}"\n'
            f"    scheduled_micros: {start - 1}\n"
            f"    thread_id: {1 + i % 8}\n"
            f"    memory_stats {{\n"
            f"      temp_memory_size: {node.allocated // 16 // 256 * 256}\n"
            f"    }}\n"
            f"  }}\n"
        )
    out.append(f'}}\ndev_stats {{\n  device: "{STREAM}"\n')
    for i, node in enumerate(nodes):
        if node.kernel:
            start = step_start + i * NODE_MICROS + 2
            op = node.label.split(" = ", 1)[1].split("(", 1)[0]
            out.append(
                f"  node_stats {{\n"
                f'    node_name: "{node.name}:{op}"\n'
                f"    all_start_micros: {start}\n"
                f"    op_end_rel_micros: 5\n"
                f"    all_end_rel_micros: 5\n"
                f'    timeline_label: "{op}"\n'
                f"    thread_id: {i % 4}\n"
                f"  }}\n"
            )
    out.append("}\n")
    return "".join(out)


def _names() -> list[str]:
    return [line for line in NAMES.read_text().splitlines() if line]


def write(stream: Any, size: int) -> int:
    """Write steps until ``size`` bytes are out; returns the number of steps."""
    names = _names()
    nodes = [_Node(i, name, names) for i, name in enumerate(names)]
    written = step = 0
    while written < size:
        text = _chunk(step, nodes).encode()
        stream.write(text)
        written += len(text)
        step += 1
    return step


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the file to write (under /tmp or bench-out/)")
    parser.add_argument("--size", default="1GB", help="stop once the text has at least this size (default 1GB)")
    parser.add_argument("--gzip", action="store_true", help="gzip the output")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from memtrace.units import parse_size

    size = parse_size(args.size)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "wb") as raw, (gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1, mtime=0) if args.gzip else raw) as stream:
        steps = write(stream, size)
    print(f"{args.out}: {steps} steps of {len(_names())} nodes, {args.out.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
