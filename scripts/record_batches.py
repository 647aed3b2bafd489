"""Record whole Keras runs at several batch sizes, and TensorFlow's own answer to "does it fit?".

The evidence for ``memtrace fit SMALL --vs LARGE`` (issue 28): two small models, a Keras CNN and
an LSTM, each run whole (model built, compiled, then ``STEPS`` calls of ``train_on_batch``) in a
fresh process with TensorFlow's BFC allocator on the CPU (``TF_CPU_ALLOCATOR_USE_BFC=true``), one
inter-op and one intra-op thread, and the profiler started right after ``import tensorflow``, so
that the profile holds every request from the allocator's birth. A third, ``cnn3`` (issue 34: the
new user's), is the CNN of ``fixtures/orders`` run as a new user runs it: TensorFlow's default
threads and oneDNN, ``model.fit`` over ``FIT_SAMPLES`` samples (so a smaller batch runs more steps).

``python scripts/record_batches.py profiles [--model M] [--batches 16,32,48,64]``
    one profile per model and batch size: ``fixtures/batches/M_bB.xplane.pb.gz`` (the run's
    ``HOST.xplane.pb``, gzip-compressed).
``python scripts/record_batches.py limit --model M --batch B --low L --high H``
    bisect ``TF_CPU_BFC_MEM_LIMIT_IN_MB`` between L (assumed to run out) and H (assumed to
    complete; both are run to check): the smallest limit, in MiB, at which TensorFlow completed the
    run, the largest limit below it at which it ran out, and every run on the way.
``python scripts/record_batches.py largest --model M --limit L --low B1 --high B2``
    bisect the batch size under a limit of L MiB between B1 (assumed to fit) and B2 (assumed
    to run out; both run to check): the largest batch that completed.

Each ladder run records, besides its exit: for an out-of-memory, TensorFlow's own line "ran out
of memory trying to allocate X (rounded to N) requested by op OP" (``TF_CPP_MIN_LOG_LEVEL=0``)
and the state in the ``MemoryDump`` of its last failed attempt (``TF_BFC_MEMORY_DUMP``: bytes in
use, free and the largest free chunk, read with memtrace's own dump reader). Results are added to
``fixtures/batches/ladders.json`` (a run already recorded for the same model, batch and limit
is replaced). On the CPU, TensorFlow waits about 10 s for other threads to free memory before it
gives up, so every out-of-memory run takes at least that long: the ladders bisect.

Runs the same program every time: seeds fixed, inputs from a seeded NumPy generator. Under
``tf.function`` the order of a few events still varies from run to run; the tests say how far.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "fixtures" / "batches"
LADDERS = OUT / "ladders.json"
SEED = 1234
STEPS = 3
# Run as a new user's ``memtrace run --cpu-bfc`` records them: TensorFlow's default threads and oneDNN,
# ``model.fit`` over FIT_SAMPLES samples (so a smaller batch runs more steps).
DEFAULT_THREADS = ("cnn3",)
FIT_SAMPLES = 256
OOM_EXIT = 3  # the child's exit status when TensorFlow ran out of memory

# TF's log line at an out-of-memory (tsl/framework/bfc_allocator.cc).
OOM_LINE = re.compile(r"ran out of memory trying to allocate (\S+) \(rounded to (\d+)\)\s*requested by op (\S+)"
                      r"(?!.*not a failure)")


# -- the child: one whole run ------------------------------------------------------------------

def child(model_name: str, batch: int, profile_dir: str | None) -> int:
    """One whole run of one model at one batch size, in this (fresh) process."""
    import tensorflow as tf

    if model_name not in DEFAULT_THREADS:
        tf.config.threading.set_inter_op_parallelism_threads(1)
        tf.config.threading.set_intra_op_parallelism_threads(1)
    if profile_dir:
        tf.profiler.experimental.start(profile_dir)  # before the allocator's first request
    code = 0
    try:
        import keras
        import numpy as np

        keras.utils.set_random_seed(SEED)
        rng = np.random.default_rng(SEED)
        if model_name == "cnn":
            layers = [keras.Input((32, 32, 3)), keras.layers.Conv2D(32, 3, activation="relu"),
                      keras.layers.MaxPooling2D(), keras.layers.Flatten(), keras.layers.Dense(10)]
            x = rng.normal(size=(batch, 32, 32, 3)).astype("float32")
            y = rng.integers(0, 10, size=batch)
        elif model_name == "cnn3":
            layers = [keras.Input((64, 64, 3)),
                      keras.layers.Conv2D(32, 3, padding="same", activation="relu", name="conv_a"),
                      keras.layers.Conv2D(32, 3, padding="same", activation="relu", name="conv_b"),
                      keras.layers.MaxPooling2D(name="pool_a"),
                      keras.layers.Conv2D(64, 3, padding="same", activation="relu", name="conv_c"),
                      keras.layers.MaxPooling2D(name="pool_b"), keras.layers.Flatten(name="flat"),
                      keras.layers.Dense(10, name="logits")]
            x = rng.normal(size=(FIT_SAMPLES, 64, 64, 3)).astype("float32")
            y = rng.integers(0, 10, size=FIT_SAMPLES)
        elif model_name == "lstm":
            layers = [keras.Input((16, 32)), keras.layers.LSTM(128), keras.layers.Dense(10)]
            x = rng.normal(size=(batch, 16, 32)).astype("float32")
            y = rng.integers(0, 10, size=batch)
        else:
            raise SystemExit(f"unknown model {model_name}")
        model = keras.Sequential(layers)
        model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        try:
            if model_name in DEFAULT_THREADS:
                model.fit(x, y, batch_size=batch, epochs=1, shuffle=False, verbose=0)
            for _ in range(0 if model_name in DEFAULT_THREADS else STEPS):
                model.train_on_batch(x, y)
        except tf.errors.ResourceExhaustedError:
            code = OOM_EXIT
    finally:
        if profile_dir:
            tf.profiler.experimental.stop()
    return code


def run_child(model: str, batch: int, *, limit_mib: int | None = None, profile_dir: str | None = None,
              dump_prefix: str | None = None) -> tuple[int, str, float]:
    """Run one whole run in a fresh process; (exit status, stderr, seconds)."""
    env = {**os.environ, "TF_CPU_ALLOCATOR_USE_BFC": "true", "CUDA_VISIBLE_DEVICES": "",
           "TF_CPP_MIN_LOG_LEVEL": "0" if limit_mib is not None else "2"}
    env.pop("TF_CPU_BFC_MEM_LIMIT_IN_MB", None)
    if limit_mib is not None:
        env["TF_CPU_BFC_MEM_LIMIT_IN_MB"] = str(limit_mib)
    if dump_prefix:
        env["TF_BFC_MEMORY_DUMP"] = dump_prefix
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", model, str(batch)]
    if profile_dir:
        argv += ["--profile-dir", profile_dir]
    start = time.monotonic()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    return done.returncode, done.stderr.decode("utf-8", "replace"), time.monotonic() - start


# -- profiles ----------------------------------------------------------------------------------

def record_profile(model: str, batch: int, out: Path = OUT, suffix: str = "") -> Path:
    with tempfile.TemporaryDirectory() as logdir:
        code, err, seconds = run_child(model, batch, profile_dir=logdir)
        if code != 0:
            raise SystemExit(f"{model} at batch {batch} failed ({code}):\n{err[-3000:]}")
        (profile,) = Path(logdir).glob("plugins/profile/*/*.xplane.pb")
        path = out / f"{model}_b{batch}{suffix}.xplane.pb.gz"
        path.write_bytes(gzip.compress(profile.read_bytes(), mtime=0))
    print(f"{path}  {path.stat().st_size} bytes  {seconds:.0f} s", flush=True)
    return path


# -- ladders -----------------------------------------------------------------------------------

def one_run(model: str, batch: int, limit_mib: int) -> dict[str, object]:
    """One run under a limit: whether TF completed it, and for an OOM what TF said and dumped."""
    with tempfile.TemporaryDirectory() as scratch:
        prefix = os.path.join(scratch, "dump")
        code, err, seconds = run_child(model, batch, limit_mib=limit_mib, dump_prefix=prefix)
        found = OOM_LINE.search(err)
        run: dict[str, object] = {"model": model, "batch": batch, "limit_mib": limit_mib,
                                  "completed": code == 0, "exit": code, "seconds": round(seconds, 1)}
        # oneDNN's kernels sometimes crash (SIGSEGV) after TF has logged the out-of-memory and
        # its dump: that is still TF running out, and the exit status says which way it ended.
        if code != 0 and not (code == OOM_EXIT or found):
            raise SystemExit(f"{model} batch {batch} limit {limit_mib} MiB: exit {code}\n{err[-3000:]}")
        if code != 0:
            if found:
                run["oom"] = {"requested": found.group(1), "rounded_bytes": int(found.group(2)), "op": found.group(3)}
            dumps = sorted(Path(scratch).glob("dump_*"), key=lambda p: int(p.suffix[1:]))
            if dumps:
                import memtrace

                state = run.setdefault("oom", {})
                assert isinstance(state, dict)
                (event,) = memtrace.explain_oom(str(dumps[-1]), request_bytes=state.get("rounded_bytes"),
                                                limit_bytes=limit_mib << 20)[-1:]
                state.update(in_use_bytes=event.in_use_bytes, pool_bytes=event.pool_bytes,
                             free_bytes=event.free_bytes, largest_free_bytes=event.largest_free_bytes,
                             verdict=event.verdict, dumps=len(dumps))
    print(json.dumps(run), flush=True)
    return run


def save_runs(runs: list[dict[str, object]], summary: dict[str, object]) -> None:
    data: dict[str, list[dict[str, object]]] = {"runs": [], "limits": [], "largest": []}
    if LADDERS.exists():
        data = json.loads(LADDERS.read_text())
    key = ("model", "batch", "limit_mib")
    new = {tuple(r[k] for k in key) for r in runs}
    data["runs"] = [r for r in data["runs"] if tuple(r[k] for k in key) not in new] + runs
    data["runs"].sort(key=lambda r: (str(r["model"]), int(r["batch"]), int(r["limit_mib"])))  # type: ignore[call-overload]
    kind = "largest" if "largest_batch" in summary else "limits"
    same = ("model", "limit_mib") if kind == "largest" else ("model", "batch")
    data[kind] = [s for s in data[kind] if tuple(s[k] for k in same) != tuple(summary[k] for k in same)] + [summary]
    data[kind].sort(key=lambda s: tuple(str(s[k]) if k == "model" else int(s[k]) for k in same))  # type: ignore[call-overload]
    LADDERS.write_text(json.dumps(data, indent=1) + "\n")


def bisect(low: int, high: int, run: Callable[[int], bool]) -> tuple[int, int]:
    """Bisect integers between ``low`` (one outcome) and ``high`` (the other) until they are adjacent."""
    want_low, want_high = run(low), run(high)
    if want_low == want_high:
        raise SystemExit(f"{low} and {high} have the same outcome ({want_low}): widen the ladder")
    while high - low > 1:
        middle = (low + high) // 2
        if run(middle) == want_low:
            low = middle
        else:
            high = middle
    return low, high


def ladder_limit(model: str, batch: int, low: int, high: int) -> None:
    runs: list[dict[str, object]] = []

    def completed(limit: int) -> bool:
        runs.append(one_run(model, batch, limit))
        return bool(runs[-1]["completed"])

    ran_out, fits = bisect(low, high, completed)
    save_runs(runs, {"model": model, "batch": batch, "min_limit_mib": fits, "ran_out_mib": ran_out})


def ladder_batch(model: str, limit: int, low: int, high: int) -> None:
    runs: list[dict[str, object]] = []

    def completed(batch: int) -> bool:
        runs.append(one_run(model, batch, limit))
        return bool(runs[-1]["completed"])

    fits, ran_out = bisect(low, high, completed)
    save_runs(runs, {"model": model, "limit_mib": limit, "largest_batch": fits, "ran_out_batch": ran_out})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", nargs="?", choices=["profiles", "limit", "largest"])
    parser.add_argument("--child", nargs=2, metavar=("MODEL", "BATCH"), help=argparse.SUPPRESS)
    parser.add_argument("--profile-dir", help=argparse.SUPPRESS)
    parser.add_argument("--model", choices=["cnn", "cnn3", "lstm"], action="append")
    parser.add_argument("--batches", default="16,32,48,64")
    parser.add_argument("--batch", type=int)
    parser.add_argument("--limit", type=int)
    parser.add_argument("--low", type=int)
    parser.add_argument("--high", type=int)
    parser.add_argument("--out", type=Path, default=OUT, help="profiles: the directory (default fixtures/batches)")
    parser.add_argument("--repeat", type=int, default=1, help="profiles: record each this many times (NAME.rK)")
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child[0], int(args.child[1]), args.profile_dir)
    OUT.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    models = args.model or ["cnn", "lstm"]
    if args.what == "profiles":
        for model in models:
            for batch in (int(b) for b in args.batches.split(",")):
                for k in range(args.repeat):
                    record_profile(model, batch, args.out, f".r{k + 1}" if args.repeat > 1 else "")
    elif args.what == "limit":
        ladder_limit(models[0], args.batch, args.low, args.high)
    elif args.what == "largest":
        ladder_batch(models[0], args.limit, args.low, args.high)
    else:
        parser.error("say what to record: profiles, limit or largest")
    return 0


if __name__ == "__main__":
    sys.exit(main())
