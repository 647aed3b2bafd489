"""Memory budgets for a Keras model: profile two training steps, state the budget, catch regressions.

memtrace's own tests run this file (tests/test_docs_examples.py), so what it shows keeps working.
A test suite turns on memtrace's stable route once, in its pytest configuration::

    # pyproject.toml
    [tool.pytest.ini_options]
    memtrace_stable_tensorflow = true

Before any test module is imported, memtrace's pytest plugin then sets what TensorFlow reads when
this module imports it below: the CPU's allocator is TensorFlow's BFC allocator (which writes memory
events), ops run on one inter-op and one intra-op thread and on TensorFlow's own kernels (oneDNN's
off), so that the same model gives the same peak run after run. Without it memtrace.testing refuses
these recordings, saying why. For this file alone:
``pytest -o memtrace_stable_tensorflow=true docs/examples/test_keras_memory.py`` (needs
``memtrace[tensorflow]``).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import memtrace
import memtrace.testing

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
mtf = pytest.importorskip("memtrace.tensorflow")
import keras  # TensorFlow with it, at the top of the module, as test modules are written


def profile_training(batch: int) -> memtrace.Trace:
    """Two train_on_batch steps of a small CNN, after warm-up steps until its memory has settled."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([
        keras.Input((32, 32, 3)),
        keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Flatten(),
        keras.layers.Dense(10),
    ])
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = np.ones((batch, 32, 32, 3), np.float32)
    y = np.zeros(batch, np.int64)
    return mtf.profile(model.train_on_batch, x, y, steps=2)


def test_training_fits_its_budget() -> None:
    trace = profile_training(batch=32)
    print(trace.peak("CPU:0").peak_bytes)
    memtrace.testing.assert_peak_below(trace, "CPU:0", "40MiB")


@pytest.mark.memory_budget("CPU:0", max_peak="40MiB")
def test_the_budget_stated_as_a_marker(memory_budget) -> None:
    memory_budget(profile_training(batch=32))


def test_doubling_the_batch_is_caught_as_a_regression() -> None:
    # (up to batch 64, the workspace of TensorFlow's convolution gradient, not the batch, sets this CNN's peak)
    small, large = profile_training(batch=64), profile_training(batch=128)
    memtrace.testing.assert_no_regression(large, small, max_increase="1%")  # shrinking is fine
    with pytest.raises(AssertionError, match="peak grew by"):
        memtrace.testing.assert_no_regression(small, large, max_increase="1%")
