"""Record small, real TensorFlow CPU step traces for memtrace's test fixtures.

Run from anywhere: ``python scripts/record_traces.py [--out DIR]`` (default
``fixtures/recorded`` in the repository). It needs TensorFlow (CPU is enough) and memtrace
(``pip install -e .[tensorflow]``; it records through ``memtrace.tensorflow``), makes no
network access and finishes in well under a minute on two cores.

Each model is built in its own ``tf.Graph`` in TF1 graph mode and run in a
``tf.compat.v1.Session``: one warm-up run without tracing (after variable
initialisation), then exactly ONE traced step with
``RunOptions(trace_level=FULL_TRACE, output_partition_graphs=True)``. The resulting
``RunMetadata`` (step_stats with per-node memory / allocation_records, plus the partition
graphs) is written in protobuf text format to ``DIR/NAME.pbtxt``:

* ``cpu_convnet_b8``  -- a convnet training step (conv2d, bias add, relu, max-pool,
  dense, softmax cross-entropy, ``GradientDescentOptimizer``) at batch 8, 32x32x3 input;
  also written in binary form as ``cpu_convnet_b8.pb`` (the same message).
* ``cpu_convnet_b16`` -- the same graph (identical node names) at batch 16.
* ``cpu_while_rnn``   -- a tanh RNN whose time loop is a ``tf.while_loop`` over 6 steps,
  with gradients. TF1 (v1) control flow is used, so the loop is made of
  Enter/Merge/Switch/NextIteration/Exit nodes and a node's name repeats once per
  iteration in the step stats.
* ``cpu_cast_concat_slice`` -- casts, concats, slices, strided slices, reshapes and
  identities, so that buffer forwarding / aliasing shows up in the allocation data.

Ground truth from the allocator itself (``DIR/bfc/``): TensorFlow runs its BFC allocator on the
CPU when ``TF_CPU_ALLOCATOR_USE_BFC=true`` is set before TensorFlow starts (the allocator is then
``bfc_cpu_allocator_for_gpu``), and then ``tf.config.experimental.get_memory_info("CPU:0")``
reports the allocator's own ``current`` and ``peak`` bytes, and ``reset_memory_stats`` resets the
peak. The script runs itself again in a child process with that variable set (``--bfc``) and
records ``cpu_convnet_b8``, ``cpu_while_rnn`` and ``cpu_cast_concat_slice`` once more, the same
way, writing next to each ``bfc/NAME.pbtxt.gz`` a ``bfc/NAME.json`` with the allocator's bytes in use
just before the traced step (``bytes_in_use_before_step``) and its peak during it
(``peak_bytes_in_step``, read after ``reset_memory_stats`` just before the step). memtrace's
baseline and absolute peak must equal these two counters exactly (``tests/test_replay.py``).

Seeds and shapes are fixed and inputs come from a seeded NumPy generator, so node names,
shapes and byte counts are reproducible; timings, pointers and execution order are not.
What TensorFlow's grappler and oneDNN rewrite depends on the build and the CPU: with
oneDNN on (the default on recent x86 Linux builds) the allocator is ``mklcpu`` and ops
are fused (e.g. ``_MklNativeFusedConv2D``); set ``TF_ENABLE_ONEDNN_OPTS=0`` to get the
plain ``cpu`` allocator instead.

``python scripts/record_traces.py oom [--out DIR]`` (default ``fixtures/oom``) records real
out-of-memory events of TensorFlow's BFC allocator on CPU instead, for ``memtrace oom``. Each
case runs in a fresh Python process (the allocator is chosen when TensorFlow starts) with
``TF_CPU_ALLOCATOR_USE_BFC=true``, ``TF_CPU_BFC_MEM_LIMIT_IN_MB=N`` (the limit),
``TF_CPP_MIN_LOG_LEVEL=0`` (the dump is logged at INFO and WARNING) and
``TF_BFC_MEMORY_DUMP=PREFIX`` (a ``MemoryDump`` protobuf per failed attempt); its stderr becomes
``DIR/NAME.log`` and the protobuf of its last failed attempt ``DIR/NAME.memdump.pb``:

* ``cpu_exhausted``     -- eager: 4 MiB and 8 MiB tensors under a 32 MiB limit, then a 64 MiB one.
* ``cpu_fragmented``    -- eager: 1 MiB tensors until the allocator refuses one (a first OOM,
  exhaustion), every other one freed, then a 2 MiB tensor (a second OOM: fragmentation).
* ``cpu_session_report`` -- TF1 graph mode in a ``Session`` with
  ``RunOptions(report_tensor_allocations_upon_oom=True)``, so the error lists the live tensors.
* ``cpu_keras_fit``     -- ``keras.Model.fit`` of a wide dense model at a batch too large.
* ``cpu_unsplit_chunk`` -- a 16 MiB tensor in a 29 MiB chunk handed out whole; more lost inside
  chunks than the failed request lacked.

``python scripts/record_traces.py --profiles [--out DIR]`` (default ``fixtures/profiles``)
records TensorFlow 2 profiles instead: small Keras training steps (an MLP, a CNN and an LSTM,
``train_on_batch``, one warm-up step then 3 profiled steps) through
``memtrace.tensorflow.record_profile``, with ``TF_CPU_ALLOCATOR_USE_BFC=true`` set before
TensorFlow is imported so that the CPU allocator writes memory events. Each profile is written
as ``NAME.xplane.pb.gz`` (the run's ``HOST.xplane.pb``, gzip-compressed) next to
``NAME.steps.json``: per step, the allocator's own counters from
``tf.config.experimental.get_memory_info("CPU:0")``: ``current`` before the step and ``peak``
after it, its statistics reset by ``reset_memory_stats`` just before the step.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
if "--profiles" in sys.argv[1:]:
    # Read by TensorFlow when it creates its CPU allocator: only the BFC allocator writes memory events.
    os.environ["TF_CPU_ALLOCATOR_USE_BFC"] = "true"

import numpy as np
import tensorflow as tf
from google.protobuf import text_format
from tensorflow.core.protobuf.config_pb2 import RunMetadata

from memtrace.tensorflow import record_metadata, save_metadata

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "fixtures" / "recorded"
SEED = 1234

v1 = tf.compat.v1


@dataclass
class Built:
    """A graph ready to trace: what to fetch and what to feed."""

    graph: tf.Graph
    fetches: list[tf.Tensor | tf.Operation]
    feed: dict[tf.Tensor, np.ndarray]


def _rng() -> np.random.Generator:
    return np.random.default_rng(SEED)


def _glorot(shape: list[int], name: str) -> tf.Variable:
    init = v1.glorot_uniform_initializer(seed=SEED)
    return v1.get_variable(name, shape=shape, dtype=tf.float32, initializer=init)


def build_convnet(batch: int) -> Built:
    """conv2d -> bias add -> relu -> max-pool -> dense -> softmax cross-entropy, SGD step."""
    graph = tf.Graph()
    with graph.as_default():
        v1.set_random_seed(SEED)
        images = v1.placeholder(tf.float32, [batch, 32, 32, 3], name="images")
        labels = v1.placeholder(tf.int32, [batch], name="labels")
        with v1.variable_scope("conv1"):
            kernel = _glorot([3, 3, 3, 8], "kernel")
            bias = v1.get_variable("bias", [8], initializer=v1.zeros_initializer())
            conv = tf.nn.conv2d(images, kernel, strides=1, padding="SAME")
            act = tf.nn.relu(tf.nn.bias_add(conv, bias))
        pool = tf.nn.max_pool2d(act, ksize=2, strides=2, padding="VALID", name="pool1")
        flat = tf.reshape(pool, [batch, 16 * 16 * 8], name="flatten")
        with v1.variable_scope("dense"):
            weights = _glorot([16 * 16 * 8, 10], "weights")
            dbias = v1.get_variable("bias", [10], initializer=v1.zeros_initializer())
            logits = tf.matmul(flat, weights) + dbias
        xent = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=logits
        )
        loss = tf.reduce_mean(xent, name="loss")
        train = v1.train.GradientDescentOptimizer(0.01).minimize(loss, name="train")
        rng = _rng()
        feed = {
            images: rng.standard_normal((batch, 32, 32, 3), dtype=np.float32),
            labels: rng.integers(0, 10, size=batch, dtype=np.int32),
        }
    return Built(graph, [train, loss], feed)


def build_while_rnn(steps: int = 6, batch: int = 4, units: int = 16) -> Built:
    """A tanh cell unrolled by ``tf.while_loop`` over ``steps`` time steps, with gradients."""
    graph = tf.Graph()
    with graph.as_default():
        v1.set_random_seed(SEED)
        inputs = v1.placeholder(tf.float32, [steps, batch, units], name="inputs")
        w_in = _glorot([units, units], "w_in")
        w_rec = _glorot([units, units], "w_rec")
        b = v1.get_variable("b", [units], initializer=v1.zeros_initializer())
        xs = tf.TensorArray(tf.float32, size=steps, name="xs").unstack(inputs)

        def body(t: tf.Tensor, h: tf.Tensor, acc: tf.Tensor) -> tuple[tf.Tensor, ...]:
            h_next = tf.tanh(tf.matmul(xs.read(t), w_in) + tf.matmul(h, w_rec) + b)
            return t + 1, h_next, acc + tf.reduce_sum(tf.square(h_next))

        h0 = tf.zeros([batch, units])
        _, h_last, acc = v1.while_loop(
            lambda t, h, acc: t < steps,
            body,
            [tf.constant(0), h0, tf.constant(0.0)],
            name="rnn",
        )
        loss = tf.identity(acc / steps + tf.reduce_mean(h_last), name="loss")
        train = v1.train.GradientDescentOptimizer(0.01).minimize(loss, name="train")
        feed = {inputs: _rng().standard_normal((steps, batch, units), dtype=np.float32)}
    return Built(graph, [train, loss], feed)


def build_cast_concat_slice() -> Built:
    """Casts, concats, slices, strided slices, reshapes and identities (forwarding/aliasing)."""
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [8, 64], name="x")
        ids = v1.placeholder(tf.int32, [8, 64], name="ids")
        half = tf.cast(x, tf.float16, name="to_half")
        back = tf.cast(half, tf.float32, name="to_float")
        ids_f = tf.cast(ids, tf.float32, name="ids_to_float")
        cat = tf.concat([back, ids_f, x], axis=1, name="concat")  # [8, 192]
        left = tf.slice(cat, [0, 0], [8, 96], name="slice_left")
        right = tf.identity(cat[:, 96:], name="strided_right")
        rows = tf.strided_slice(cat, [0, 0], [8, 192], [2, 1], name="every_other_row")
        square = tf.reshape(left + right, [8, 8, 12], name="to_3d")
        flat = tf.reshape(square, [-1], name="flat")
        same = tf.identity(flat, name="identity")
        sums = tf.concat([same, tf.reshape(rows, [-1])], axis=0, name="concat_flat")
        as_int = tf.cast(sums * 10.0, tf.int64, name="to_int64")
        out = tf.reduce_sum(tf.cast(as_int, tf.float64), name="total")
        rng = _rng()
        feed = {
            x: rng.standard_normal((8, 64), dtype=np.float32),
            ids: rng.integers(0, 100, size=(8, 64), dtype=np.int32),
        }
    return Built(graph, [out, same], feed)


def _config() -> v1.ConfigProto:
    return v1.ConfigProto(
        intra_op_parallelism_threads=1,
        inter_op_parallelism_threads=1,
        device_count={"GPU": 0},
    )


def trace(built: Built) -> RunMetadata:
    """Initialise variables, run one untraced warm-up step, then one FULL_TRACE step.

    The traced step goes through ``memtrace.tensorflow.record_metadata``, the one recording path
    that users' tests take too.
    """
    with built.graph.as_default():
        init = v1.global_variables_initializer()
    with v1.Session(graph=built.graph, config=_config()) as sess:
        sess.run(init)
        return record_metadata(sess, built.fetches, built.feed, warmup=1)


def trace_with_counters(built: Built) -> tuple[RunMetadata, dict[str, int | str]]:
    """As :func:`trace`, on the CPU BFC allocator, with its own counters around the traced step.

    Bytes in use are read just before the step; the peak is reset then and read just after.
    """
    with built.graph.as_default():
        init = v1.global_variables_initializer()
    with v1.Session(graph=built.graph, config=_config()) as sess:
        sess.run(init)
        sess.run(built.fetches, feed_dict=built.feed)  # the warm-up step
        tf.config.experimental.reset_memory_stats("CPU:0")
        before = tf.config.experimental.get_memory_info("CPU:0")
        metadata = record_metadata(sess, built.fetches, built.feed, warmup=0)
        during = tf.config.experimental.get_memory_info("CPU:0")
    counters: dict[str, int | str] = {
        "allocator": BFC_ALLOCATOR,
        "bytes_in_use_before_step": int(before["current"]),
        "peak_bytes_in_step": int(during["peak"]),
        "bytes_in_use_after_step": int(during["current"]),
        "tensorflow": tf.__version__,
    }
    return metadata, counters


MODELS: dict[str, Callable[[], Built]] = {
    "cpu_convnet_b8": lambda: build_convnet(8),
    "cpu_convnet_b16": lambda: build_convnet(16),
    "cpu_while_rnn": build_while_rnn,
    "cpu_cast_concat_slice": build_cast_concat_slice,
}
BINARY_TOO = {"cpu_convnet_b8"}
BFC_MODELS = ("cpu_convnet_b8", "cpu_while_rnn", "cpu_cast_concat_slice")
BFC_ALLOCATOR = "bfc_cpu_allocator_for_gpu"  # TensorFlow's name for its BFC allocator on the CPU


def write(metadata: RunMetadata, out: Path, name: str) -> list[Path]:
    """Write ``NAME.pbtxt`` (and ``NAME.pb`` for models in BINARY_TOO); return the paths."""
    paths = [out / f"{name}.pbtxt"]
    paths[0].write_text(text_format.MessageToString(metadata), encoding="utf-8")
    if name in BINARY_TOO:
        paths.append(out / f"{name}.pb")
        paths[1].write_bytes(metadata.SerializeToString())
    return paths


# -- out-of-memory events of the BFC allocator (``record_traces.py oom``) ------------------

OOM_OUT = ROOT / "fixtures" / "oom"
MIB = 1 << 20


def oom_exhausted() -> None:
    """Two tensors live (12 MiB), then 64 MiB asked under a 32 MiB limit: not enough bytes at all."""
    keep = [tf.ones([1024, 1024]), tf.ones([2048, 1024])]
    try:
        tf.ones([4096, 4096])
    except tf.errors.ResourceExhaustedError as error:
        print(f"caught: {error.message.splitlines()[0]}", file=sys.stderr)
    del keep


def oom_fragmented() -> None:
    """Equal 1 MiB blocks until the limit, every other one freed, then one block twice as large."""
    blocks = []
    try:
        while True:
            blocks.append(tf.zeros([MIB // 4]))  # 1 MiB of float32
    except tf.errors.ResourceExhaustedError as error:
        print(f"caught while filling after {len(blocks)} blocks: {error.message.splitlines()[0]}", file=sys.stderr)
    kept = blocks[::2]
    del blocks
    try:
        tf.zeros([MIB // 2])  # 2 MiB
    except tf.errors.ResourceExhaustedError as error:
        print(f"caught with {len(kept)} blocks kept: {error.message.splitlines()[0]}", file=sys.stderr)


def oom_session_report() -> None:
    """A TF1 graph whose matmul outputs outgrow the limit; the error then lists live tensors by op."""
    v1.disable_eager_execution()
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [1024, 1024], name="x")
        a = tf.matmul(x, x, name="square")
        b = tf.concat([a, a, a, a], axis=0, name="stack4")
        c = tf.concat([b, b, b, b], axis=1, name="wide4")  # 64 MiB
        total = tf.reduce_sum(c + 1.0, name="total")
    options = v1.RunOptions(report_tensor_allocations_upon_oom=True)
    config = v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    with v1.Session(graph=graph, config=config) as sess:
        try:
            sess.run(total, {x: _rng().standard_normal((1024, 1024), dtype=np.float32)}, options=options)
        except tf.errors.ResourceExhaustedError as error:
            print(f"caught: {error.message.splitlines()[0]}", file=sys.stderr)


def oom_keras_fit() -> None:
    """A wide dense model fitted at a batch whose activations do not fit under the limit."""
    tf.keras.utils.set_random_seed(SEED)
    model = tf.keras.Sequential([
        tf.keras.Input((1024,)),
        tf.keras.layers.Dense(2048, activation="relu", name="wide"),
        tf.keras.layers.Dense(10, name="logits"),
    ])
    model.compile(optimizer="sgd", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rng = _rng()
    features = rng.standard_normal((4096, 1024), dtype=np.float32)
    labels = rng.integers(0, 10, size=4096)
    try:
        model.fit(features, labels, batch_size=4096, epochs=1, verbose=0)
    except tf.errors.ResourceExhaustedError as error:
        print(f"caught: {error.message.splitlines()[0]}", file=sys.stderr)


def oom_unsplit_chunk() -> None:
    """A 16 MiB tensor in a freed 29 MiB chunk that BFC hands out whole (29 < 2 x 16), then 5 MiB
    blocks until the limit: the bytes lost inside chunks exceed the shortfall of the failed request."""
    keep = [tf.fill([MIB // 4], 1.0)]  # 1 MiB: fills the first small region's remainder
    hole = tf.fill([29 * MIB // 4], 2.0)  # 29 MiB in a new region ...
    keep.append(tf.fill([MIB // 4], 3.0))  # ... bounded by a 1 MiB tensor, so that freeing it leaves a 29 MiB chunk
    del hole
    keep.append(tf.fill([16 * MIB // 4], 4.0))  # takes the 29 MiB chunk unsplit
    try:
        while True:
            keep.append(tf.fill([5 * MIB // 4], 5.0))
    except tf.errors.ResourceExhaustedError as error:
        print(f"caught after {len(keep)} tensors: {error.message.splitlines()[0]}", file=sys.stderr)


# name -> (recipe, limit in MiB)
OOM_CASES: dict[str, tuple[Callable[[], None], int]] = {
    "cpu_exhausted": (oom_exhausted, 32),
    "cpu_fragmented": (oom_fragmented, 64),
    "cpu_session_report": (oom_session_report, 48),
    "cpu_keras_fit": (oom_keras_fit, 96),
    "cpu_unsplit_chunk": (oom_unsplit_chunk, 64),
}


def record_oom(name: str, out: Path) -> list[Path]:
    """Run one OOM case in a fresh process; keep its stderr and the last MemoryDump it wrote."""
    import subprocess
    import tempfile

    limit_mib = OOM_CASES[name][1]
    with tempfile.TemporaryDirectory() as scratch:
        env = {
            **os.environ,
            "TF_CPU_ALLOCATOR_USE_BFC": "true",
            "TF_CPU_BFC_MEM_LIMIT_IN_MB": str(limit_mib),
            "TF_CPP_MIN_LOG_LEVEL": "0",
            "TF_BFC_MEMORY_DUMP": os.path.join(scratch, "dump"),
            "CUDA_VISIBLE_DEVICES": "",
        }
        done = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--oom-case", name],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False,
        )
        log = out / f"{name}.log"
        log.write_bytes(done.stderr)
        paths = [log]
        # One dump per failed attempt, named PREFIX_ALLOCATOR.MICROS: the last is the final failure.
        dumps = sorted(Path(scratch).glob("dump_*"), key=lambda p: int(p.suffix[1:]))
        if dumps:
            paths.append(out / f"{name}.memdump.pb")
            paths[-1].write_bytes(dumps[-1].read_bytes())
    return paths


# -- TF2 profiles of Keras training steps ----------------------------------------------------

PROFILES_OUT = ROOT / "fixtures" / "profiles"
PROFILED_STEPS = 3


def keras_models() -> dict[str, tuple[object, np.ndarray, np.ndarray]]:
    """Tiny Keras models with one batch each: (model, x, y)."""
    import keras

    keras.utils.set_random_seed(SEED)
    rng = _rng()

    def compiled(layers: list[object]) -> object:
        model = keras.Sequential(layers)
        model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        return model

    mlp = compiled([keras.Input((20,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(10)])
    cnn = compiled([keras.Input((16, 16, 3)), keras.layers.Conv2D(8, 3, activation="relu"), keras.layers.MaxPooling2D(),
                    keras.layers.Flatten(), keras.layers.Dense(10)])
    lstm = compiled([keras.Input((10, 8)), keras.layers.LSTM(16), keras.layers.Dense(3)])
    return {
        "keras_mlp": (mlp, rng.normal(size=(32, 20)).astype("float32"), rng.integers(0, 10, size=32)),
        "keras_cnn": (cnn, rng.normal(size=(8, 16, 16, 3)).astype("float32"), rng.integers(0, 10, size=8)),
        "keras_lstm": (lstm, rng.normal(size=(8, 10, 8)).astype("float32"), rng.integers(0, 3, size=8)),
    }


def record_profiles(out: Path) -> None:
    import gzip
    import json
    import tempfile

    from memtrace.tensorflow import record_profile

    for name, (model, x, y) in keras_models().items():
        with tempfile.TemporaryDirectory() as logdir:
            counters = record_profile(model.train_on_batch, x, y, steps=PROFILED_STEPS, warmup=1, logdir=logdir)  # type: ignore[attr-defined]
            (profile,) = Path(logdir).glob("plugins/profile/*/*.xplane.pb")
            path = out / f"{name}.xplane.pb.gz"
            path.write_bytes(gzip.compress(profile.read_bytes(), mtime=0))
        steps = [{"step": c.step, "current_bytes_before": c.current_bytes_before, "peak_bytes": c.peak_bytes} for c in counters]
        counters_path = out / f"{name}.steps.json"
        counters_path.write_text(json.dumps({"tensorflow": tf.__version__, "allocator": "CPU:0", "steps": steps}, indent=1) + "\n")
        print(f"{path}  {path.stat().st_size} bytes; {counters_path}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", nargs="?", choices=["traces", "oom"], default="traces",
                        help="step traces (default) or out-of-memory events of the BFC allocator")
    parser.add_argument("--out", type=Path, help="output directory (default fixtures/recorded, fixtures/oom or fixtures/profiles)")
    parser.add_argument("--oom-case", choices=sorted(OOM_CASES), help=argparse.SUPPRESS)
    parser.add_argument(
        "--bfc", action="store_true",
        help="record only the BFC traces with their counters into OUT/bfc (needs TF_CPU_ALLOCATOR_USE_BFC=true)",
    )
    parser.add_argument("--profiles", action="store_true",
                        help="record TF2 profiles of Keras training steps (see above) instead of RunMetadata")
    return parser.parse_args(argv)


def record_bfc(out: Path) -> None:
    """The BFC recordings, in this process: TensorFlow must have started with the BFC allocator."""
    if os.environ.get("TF_CPU_ALLOCATOR_USE_BFC", "").lower() not in ("true", "1"):
        raise SystemExit("--bfc needs TF_CPU_ALLOCATOR_USE_BFC=true set before TensorFlow starts")
    out.mkdir(parents=True, exist_ok=True)
    for name in BFC_MODELS:
        metadata, counters = trace_with_counters(MODELS[name]())
        path = out / f"{name}.pbtxt.gz"  # gzip: the while loop's text is over 600 KB
        save_metadata(metadata, path)
        (out / f"{name}.json").write_text(json.dumps(counters, indent=2) + "\n", encoding="utf-8")
        print(f"{path}  {path.stat().st_size} bytes  {counters}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.oom_case:  # the child process of record_oom, allocator already configured
        OOM_CASES[args.oom_case][0]()
        return 0
    if args.what == "oom":
        out = args.out or OOM_OUT
        out.mkdir(parents=True, exist_ok=True)
        for name in OOM_CASES:
            for path in record_oom(name, out):
                print(f"{path}  {path.stat().st_size} bytes")
        return 0
    if args.profiles:
        args.out = args.out or PROFILES_OUT
        args.out.mkdir(parents=True, exist_ok=True)
        record_profiles(args.out)
        return 0
    args.out = args.out or DEFAULT_OUT
    # Classic Enter/Merge/Switch/NextIteration loops, so node names repeat per iteration.
    v1.disable_control_flow_v2()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.bfc:
        record_bfc(args.out / "bfc")
        return 0
    for name, build in MODELS.items():
        for path in write(trace(build()), args.out, name):
            print(f"{path}  {path.stat().st_size} bytes")
    # The allocator is chosen when TensorFlow starts: the BFC recordings need a process of their own.
    env = {**os.environ, "TF_CPU_ALLOCATOR_USE_BFC": "true"}
    return subprocess.run([sys.executable, __file__, "--out", str(args.out), "--bfc"], env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
