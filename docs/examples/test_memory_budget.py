"""Memory budgets in a test suite: record one training step, state its budget, catch regressions.

memtrace's own tests run this file (tests/test_docs_examples.py), so what it shows keeps working.
Run it yourself with ``pytest docs/examples/test_memory_budget.py`` (needs ``memtrace[tensorflow]``;
the ``memory_budget`` marker and fixture come from memtrace's pytest plugin, loaded automatically
once memtrace is installed).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import memtrace
import memtrace.testing

# oneDNN is on by default in TensorFlow's x86 Linux builds; its CPU allocator is called "mklcpu".
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow")
v1 = tf.compat.v1


def record_training_step(batch: int) -> memtrace.Trace:
    """One SGD step of a two-layer classifier (64 features, 256 hidden units, 10 classes), traced."""
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [batch, 64], name="x")
        labels = v1.placeholder(tf.int32, [batch], name="labels")
        w1 = v1.get_variable("w1", [64, 256], initializer=v1.glorot_uniform_initializer(seed=0))
        w2 = v1.get_variable("w2", [256, 10], initializer=v1.glorot_uniform_initializer(seed=0))
        logits = tf.matmul(tf.nn.relu(tf.matmul(x, w1)), w2, name="logits")
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        train = v1.train.GradientDescentOptimizer(0.1).minimize(loss)
        init = v1.global_variables_initializer()
    feed = {x: np.ones((batch, 64), np.float32), labels: np.zeros(batch, np.int32)}
    config = v1.ConfigProto(device_count={"GPU": 0}, intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    with v1.Session(graph=graph, config=config) as session:
        session.run(init)
        return memtrace.tensorflow.record(session, train, feed, warmup=1)


def test_training_step_fits_its_budget() -> None:
    trace = record_training_step(batch=128)
    memtrace.testing.assert_peak_below(trace, "mklcpu", "2MiB")


# The same, stated on the test. max_peak_delta leaves out the bytes live before the step: mklcpu's
# snapshots disagree about those (see docs/peak.md), so the step's own peak is the steadier number.
@pytest.mark.memory_budget("mklcpu", max_peak_delta="512KiB")
def test_the_budget_stated_as_a_marker(memory_budget) -> None:
    memory_budget(record_training_step(batch=128))


def test_doubling_the_batch_is_caught_as_a_regression() -> None:
    small, large = record_training_step(batch=128), record_training_step(batch=256)
    memtrace.testing.assert_no_regression(large, small, max_increase="5%", exclude_baseline=True)  # shrinking is fine
    with pytest.raises(AssertionError, match="mklcpu peak without baseline grew by"):
        memtrace.testing.assert_no_regression(small, large, max_increase="5%", exclude_baseline=True)
