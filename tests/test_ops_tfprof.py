"""Conformance: TensorFlow's own profiler and `memtrace ops --by node` agree, node for node.

tfprof is run on the same trace (``profile(graph=tf.Graph(), run_meta=..., cmd="graph")`` with
every threshold at 0); every node it reports must have identical requested, peak, residual and
output bytes in memtrace. Runs where TensorFlow is installed (CI installs it).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format

import memtrace
from memtrace.analyses.ops import node_rows

from .conftest import REAL_TRACES, tensorflow_protos

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def tfprof_nodes(path: Path) -> dict[str, tuple[int, int, int, int, int]]:
    """name -> (requested, peak, residual, output bytes, run count) as TensorFlow's profiler reports them."""
    step_stats_pb2, config_pb2, _ = tensorflow_protos()
    import tensorflow as tf

    text = path.read_text()
    run_meta = config_pb2.RunMetadata()
    try:
        run_meta.step_stats.CopyFrom(text_format.Parse(text, step_stats_pb2.StepStats()))
    except text_format.ParseError:
        text_format.Parse(text, run_meta)
    builder = tf.compat.v1.profiler.ProfileOptionBuilder
    options = (
        builder(builder.time_and_memory(min_micros=0, min_bytes=0, min_accelerator_micros=0, min_cpu_micros=0,
                                        min_peak_bytes=0, min_residual_bytes=0, min_output_bytes=0))
        .with_max_depth(10**6)
        .with_empty_output()
        .select(["bytes", "peak_bytes", "residual_bytes", "output_bytes", "occurrence"])
        .build()
    )
    root = tf.compat.v1.profiler.profile(graph=tf.Graph(), run_meta=run_meta, cmd="graph", options=options)
    found: dict[str, tuple[int, int, int, int, int]] = {}
    stack = list(root.children)
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        found[node.name] = (node.requested_bytes, node.peak_bytes, node.residual_bytes, node.output_bytes, node.run_count)
    return found


@pytest.mark.parametrize("trace_path", REAL_TRACES, ids=lambda p: p.name)
def test_memtrace_agrees_with_tfprof_on_every_node(trace_path: Path) -> None:
    theirs = tfprof_nodes(trace_path)
    ours = {r.name: (r.requested_bytes, r.peak_bytes, r.residual_bytes, r.output_bytes, r.occurrences)
            for r in node_rows(memtrace.load(trace_path))}
    assert len(theirs) > 20
    with_memory = [name for name, values in theirs.items() if any(values[:4])]
    assert with_memory, "tfprof reported no memory at all: the comparison would prove nothing"
    # Names tfprof knows only from GPU stream/memcpy pseudo-devices ran 0 times on a device: no row.
    mismatched = {name: (values, ours.get(name)) for name, values in theirs.items() if ours.get(name, (0, 0, 0, 0, 0)) != values}
    assert mismatched == {}
    # Occurrences: tfprof's run counts, and no op that tfprof leaves out (such as _SOURCE).
    assert set(ours) <= set(theirs)
