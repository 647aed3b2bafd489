"""Measure how stable the documented TF2 recording route is: the same Keras model in fresh processes, at once.

    python scripts/measure_profile_stability.py [--processes 3] [--rounds 2] [--busy] [--default-threads] [--onednn]
    python scripts/measure_profile_stability.py --busy --route import-first    # a test module, as users write them
    python scripts/measure_profile_stability.py --busy --route plugin          # the same, with the plugin's option

Each process does what docs/testing.md says (``memtrace.tensorflow.use_cpu_bfc()`` before the model
is built, then ``memtrace.tensorflow.profile(model.train_on_batch, x, y, steps=2)`` and
``trace.peak("CPU:0")``) on the small CNN of ``docs/examples/test_keras_memory.py`` at batch 64, and
prints its peak, each profiled step's peak, the allocator's own per-step peak counters and the
step time (the mean of three steps after the profile). ``--processes`` run at once, ``--rounds`` times; ``--busy`` keeps one more process
spinning on a core meanwhile; ``--default-threads`` leaves TensorFlow's thread pools as they are
(``use_cpu_bfc(threads=None)``) to show what one thread buys; ``--onednn`` keeps oneDNN's kernels
(``use_cpu_bfc(onednn=True)``; by default it turns them off); ``--tensors`` passes the batch as
TensorFlow tensors made once, not numpy arrays. ``TF_ENABLE_ONEDNN_OPTS``,
``TF_CPU_ALLOCATOR_USE_BFC`` and TensorFlow's thread variables are removed from the children's environment.
Prints one JSON line per process and the spread of the peaks.

``--route`` says how each process records: ``documented`` (the default) as above, ``use_cpu_bfc()``
before TensorFlow is imported; ``import-first`` as a test module is written, ``import tensorflow`` at
the top of the file, then ``use_cpu_bfc()``, run by pytest, the model profiled by
``memtrace.tensorflow.profile`` (too late to turn oneDNN's kernels off); ``plugin`` the same test module in a pytest session with memtrace's
plugin option ``memtrace_stable_tensorflow`` (``-o memtrace_stable_tensorflow=true``), which sets
TensorFlow's environment before test modules are imported. Each process also says whether
``memtrace.testing`` would accept its recording (``refused``: the reason it would not).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import json, sys, time
import memtrace.tensorflow as mtf
mtf.use_cpu_bfc(threads=None if "default" in sys.argv[1] else 1, onednn="onednn" in sys.argv[1])
import keras, numpy as np, tensorflow as tf
keras.utils.set_random_seed(0)
model = keras.Sequential([
    keras.Input((32, 32, 3)),
    keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
    keras.layers.Conv2D(64, 3, padding="same", activation="relu"),
    keras.layers.MaxPooling2D(),
    keras.layers.Flatten(),
    keras.layers.Dense(128, activation="relu"),
    keras.layers.Dense(10),
])
model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
x = np.ones((64, 32, 32, 3), np.float32)
y = np.zeros(64, np.int64)
if "tensors" in sys.argv[1]:
    x, y = tf.constant(x), tf.constant(y)
started = time.perf_counter()
trace = mtf.profile(model.train_on_batch, x, y, steps=2, logdir=sys.argv[2])
seconds = time.perf_counter() - started
started = time.perf_counter()
for _ in range(3):
    model.train_on_batch(x, y)
step_seconds = (time.perf_counter() - started) / 3
steps = [s.number for s in trace.steps]
print(json.dumps({
    "onednn": mtf.onednn_enabled(),
    "threads": [tf.config.threading.get_inter_op_parallelism_threads(), tf.config.threading.get_intra_op_parallelism_threads()],
    "peak": trace.peak("CPU:0").peak_bytes,
    "peak_delta": trace.peak("CPU:0").peak_delta_bytes,
    "step_peaks": [__import__("memtrace").load(sys.argv[2], step=n).peak("CPU:0").peak_bytes for n in steps],
    "seconds": round(seconds, 2),
    "step_seconds": round(step_seconds, 3),
}))
"""


# The same model as a test module is written: TensorFlow imported at the top of the file.
TEST_MODULE = """
import tensorflow as tf
import json, os, sys, time
import keras, numpy as np
import memtrace, memtrace.testing
import memtrace.tensorflow as mtf

mtf.use_cpu_bfc()  # as docs/testing.md says, before the model is built; here after TensorFlow was imported


def test_record():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([
        keras.Input((32, 32, 3)),
        keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
        keras.layers.Conv2D(64, 3, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Flatten(),
        keras.layers.Dense(128, activation="relu"),
        keras.layers.Dense(10),
    ])
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = np.ones((64, 32, 32, 3), np.float32)
    y = np.zeros(64, np.int64)
    logdir = os.environ["MEMTRACE_MEASURE_LOGDIR"]
    started = time.perf_counter()
    trace = mtf.profile(model.train_on_batch, x, y, steps=2, logdir=logdir)
    seconds = time.perf_counter() - started
    try:
        memtrace.testing.assert_peak_below(trace, "CPU:0", "1TiB")
        refused = None
    except memtrace.UsageError as error:
        refused = str(error)
    print("MEMTRACE_RESULT " + json.dumps({
        "onednn": mtf.onednn_enabled(),
        "threads": [tf.config.threading.get_inter_op_parallelism_threads(),
                    tf.config.threading.get_intra_op_parallelism_threads(),
                    os.environ.get("TF_NUM_INTEROP_THREADS"), os.environ.get("TF_NUM_INTRAOP_THREADS")],
        "peak": trace.peak("CPU:0").peak_bytes,
        "peak_delta": trace.peak("CPU:0").peak_delta_bytes,
        "step_peaks": [memtrace.load(logdir, step=s.number).peak("CPU:0").peak_bytes for s in trace.steps],
        "seconds": round(seconds, 2),
        "refused": refused,
    }), flush=True)
"""


def _child(route: str, how: str, logdir: str, scratch: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """One recording process: the documented script, or pytest on the test module (with the plugin's option)."""
    if route == "documented":
        return subprocess.Popen([sys.executable, "-c", CHILD, how, logdir], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env)
    module = os.path.join(scratch, "test_measure_cnn.py")
    if not os.path.exists(module):
        Path(module).write_text(TEST_MODULE)
    option = ["-o", "memtrace_stable_tensorflow=true"] if route == "plugin" else []
    return subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "--rootdir", scratch,
                             *option, module], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**env, "MEMTRACE_MEASURE_LOGDIR": logdir}, cwd=scratch)


def _result(out: str) -> dict[str, Any]:
    lines = [line for line in out.splitlines() if line.startswith("MEMTRACE_RESULT ")]
    found: dict[str, Any] = json.loads(lines[-1].split(" ", 1)[1] if lines else out.strip().splitlines()[-1])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--busy", action="store_true")
    parser.add_argument("--default-threads", action="store_true")
    parser.add_argument("--onednn", action="store_true")
    parser.add_argument("--tensors", action="store_true")
    parser.add_argument("--route", choices=("documented", "import-first", "plugin"), default="documented")
    args = parser.parse_args()
    import tempfile

    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2"}
    env.pop("TF_CPU_ALLOCATOR_USE_BFC", None)
    for name in ("TF_ENABLE_ONEDNN_OPTS", "TF_NUM_INTEROP_THREADS", "TF_NUM_INTRAOP_THREADS"):
        env.pop(name, None)
    how = ("default" if args.default_threads else "one") + ("+onednn" if args.onednn else "") + ("+tensors" if args.tensors else "")
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.busy else None
    results = []
    try:
        with tempfile.TemporaryDirectory() as scratch:
            for round_ in range(args.rounds):
                children = [_child(args.route, how, os.path.join(scratch, f"{round_}-{i}"), scratch, env)
                            for i in range(args.processes)]
                for child in children:
                    out, err = child.communicate()
                    if child.returncode != 0:
                        raise SystemExit((out + err)[-3000:])
                    results.append(_result(out))
                    print(json.dumps(results[-1]), flush=True)
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()
    peaks = [r["peak"] for r in results]
    highest = [max(r["step_peaks"]) for r in results]
    deltas = [r["peak_delta"] for r in results]
    print(json.dumps({"route": args.route, "recordings": len(results), "peaks": sorted(set(peaks)), "spread": (max(peaks) - min(peaks)) / min(peaks),
                      "highest_step_spread": (max(highest) - min(highest)) / min(highest),
                      "peak_deltas": sorted(set(deltas)), "delta_spread": (max(deltas) - min(deltas)) / min(deltas)}))


if __name__ == "__main__":
    main()
