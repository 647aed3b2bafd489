"""Record the evidence for ``memtrace fit``: whole programs on TensorFlow's CPU BFC allocator, and limit ladders.

    python scripts/record_fit.py PROGRAM... [--out fixtures/fit] [--centre MIB] [--runs N]

PROGRAM is one of ``cnn`` (a small Keras CNN, ``train_on_batch``), ``lstm`` (a Keras LSTM),
``transformer`` (a transformer block trained in a ``tf.function``) and ``eager`` (eager tensors
of many sizes up to 300 MiB, the same sequence every run). Each run is a fresh process started
by ``memtrace run --cpu-bfc`` (the profiler starts right after ``import tensorflow``, before the
allocator's first allocation, and stops however the program ends) with one inter-op and one
intra-op thread, ``TF_CPU_ALLOCATOR_USE_BFC=true``, ``TF_CPP_MIN_LOG_LEVEL=0``,
``TF_BFC_MEMORY_DUMP=PREFIX`` and ``TF_ENABLE_ONEDNN_OPTS=0`` (oneDNN's kernels crash the process
with SIGSEGV after an out-of-memory error on CPU, so the profile would be lost); runs go one at a time.

For each program:

1. a run without a limit (TF's default, 65,536 MiB): its profile, from the allocator's birth, is
   ``OUT/PROGRAM.xplane.pb.gz``; the program prints the allocator's own counters
   (``tf.config.experimental.get_memory_info("CPU:0")``) at its end;
2. a ladder of ``TF_CPU_BFC_MEM_LIMIT_IN_MB`` runs that finds, with TensorFlow itself, the smallest
   limit in MiB under which the program completes: from ``--centre`` (a model's prediction) or the
   peak bytes in use of step 1, upward until a run completes (from a failed run straight to its dump's
   pool plus the failed request: below that the same request fails again), then bisecting; then
   one run just above and runs well below (other failing requests, other states). An out-of-memory run costs about 10 s
   on CPU (TF retries the allocation before giving up);
3. ``OUT/PROGRAM.json`` (schema ``memtrace.fit-evidence/1``): per run the limit, the outcome
   (``completed`` or ``oom``), the allocator's counters, and for an OOM the failing request from
   TF's log line ("ran out of memory trying to allocate X (rounded to N)requested by op OP") and
   the allocator's state from its ``MemoryDump`` (in use, free chunks, pool, largest free chunk,
   regions and chunks, offsets relative to their region); and the profiles kept: the completed
   runs at the two limits nearest the boundary and every OOM run (a ``tf.function`` program's
   requests vary by a few events from run to run, so an OOM's state is checked against that run's
   own requests) (``OUT/PROGRAM.LIMITmib.xplane.pb.gz``).

A program under ``tf.function`` may vary by a few events from run to run; the eager one does not,
and gives the exact boundary.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20

PRELUDE = """\
import json, sys
import numpy as np
import tensorflow as tf
tf.config.threading.set_inter_op_parallelism_threads(1)
tf.config.threading.set_intra_op_parallelism_threads(1)


def _counters():
    info = tf.config.experimental.get_memory_info("CPU:0")
    print("MEMTRACE_COUNTERS " + json.dumps({k: int(v) for k, v in info.items()}), flush=True)
    print("MEMTRACE_TENSORFLOW " + tf.__version__, flush=True)


try:
"""
EPILOGUE = """\
finally:
    _counters()
"""

PROGRAMS = {
    "cnn": """\
import keras
keras.utils.set_random_seed(0)
model = keras.Sequential([
    keras.Input((32, 32, 3)),
    keras.layers.Conv2D(16, 3, activation="relu", name="conv_a"),
    keras.layers.MaxPooling2D(name="pool"),
    keras.layers.Conv2D(32, 3, activation="relu", name="conv_b"),
    keras.layers.Flatten(name="flat"),
    keras.layers.Dense(10, name="logits"),
])
model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
rng = np.random.default_rng(0)
x = rng.standard_normal((32, 32, 32, 3)).astype("float32")
y = rng.integers(0, 10, 32)
for _ in range(3):
    model.train_on_batch(x, y)
""",
    "lstm": """\
import keras
keras.utils.set_random_seed(0)
model = keras.Sequential([
    keras.Input((16,), dtype="int32"),
    keras.layers.Embedding(500, 64, name="embed"),
    keras.layers.LSTM(128, name="lstm"),
    keras.layers.Dense(5, name="logits"),
])
model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
rng = np.random.default_rng(0)
x = rng.integers(0, 500, (64, 16)).astype("int32")
y = rng.integers(0, 5, 64)
for _ in range(2):
    model.train_on_batch(x, y)
""",
    "transformer": """\
import keras
keras.utils.set_random_seed(0)
BATCH, SEQ, DIM = 16, 64, 64
attention = keras.layers.MultiHeadAttention(4, 16, name="attention")
norm_a, norm_b = keras.layers.LayerNormalization(name="norm_a"), keras.layers.LayerNormalization(name="norm_b")
ffn_in, ffn_out = keras.layers.Dense(256, activation="relu", name="ffn_in"), keras.layers.Dense(DIM, name="ffn_out")
head = keras.layers.Dense(1, name="head")
optimizer = keras.optimizers.Adam()


def block(x):
    x = norm_a(x + attention(x, x))
    return norm_b(x + ffn_out(ffn_in(x)))


rng = np.random.default_rng(0)
x = tf.constant(rng.standard_normal((BATCH, SEQ, DIM)).astype("float32"))
y = tf.constant(rng.standard_normal((BATCH, SEQ, 1)).astype("float32"))
head(block(x))  # build the layers
weights = [w for layer in (attention, norm_a, norm_b, ffn_in, ffn_out, head) for w in layer.trainable_variables]


@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(head(block(x)) - y))
    optimizer.apply_gradients(zip(tape.gradient(loss, weights), weights))
    return loss


for _ in range(3):
    train_step(x, y)
""",
    "eager": """\
# Eager tensors of many sizes, the same sequence every run: a seeded choice of sizes (256 B to
# 300 MiB, float32) made with tf.fill, some kept, some freed, at most about 700 MiB alive.
rng = np.random.default_rng(20261124)
live = []
alive_bytes = 0
for i in range(120):
    if i % 17 == 16:
        elements = (300 << 20) // 4 - int(rng.integers(0, 4096))
    else:
        elements = int(np.exp(rng.uniform(np.log(64), np.log(48 << 20))))
    while alive_bytes + 4 * elements > (640 << 20) and live:
        gone = live.pop(int(rng.integers(0, len(live))))
        alive_bytes -= 4 * int(gone.shape[0])
        del gone
    live.append(tf.fill([elements], 1.0))
    alive_bytes += 4 * elements
    if rng.uniform() < 0.3 and len(live) > 1:
        gone = live.pop(int(rng.integers(0, len(live) - 1)))
        alive_bytes -= 4 * int(gone.shape[0])
        del gone
""",
}

OOM_LINE = re.compile(r"^\w\d{4} \d\d:\d\d:(?P<seconds>\d+)\.(?P<micros>\d{6}) .*?\((?P<allocator>[^)]*)\) ran out of memory "
                      r"trying to allocate (?P<human>\S+) \(rounded to (?P<rounded>\d+)\)\s*requested by op (?P<op>\S*)",
                      re.MULTILINE)


def program_source(name: str) -> str:
    body = "".join(f"    {line}\n" if line else "\n" for line in PROGRAMS[name].splitlines())
    return PRELUDE + body + EPILOGUE


def run_once(name: str, limit_mib: int | None, scratch: Path) -> dict[str, Any]:
    """One fresh process under ``memtrace run --cpu-bfc``; what happened, and where its profile and dumps are."""
    work = Path(tempfile.mkdtemp(prefix=f"{name}-{limit_mib}-", dir=scratch))
    script = work / f"{name}.py"
    script.write_text(program_source(name))
    # oneDNN off: its kernels crash the process (SIGSEGV) after an out-of-memory error on CPU, losing the profile.
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "0", "TF_ENABLE_ONEDNN_OPTS": "0",
           "TF_BFC_MEMORY_DUMP": str(work / "dump")}
    env.pop("TF_CPU_BFC_MEM_LIMIT_IN_MB", None)
    if limit_mib is not None:
        env["TF_CPU_BFC_MEM_LIMIT_IN_MB"] = str(limit_mib)
    done = subprocess.run([sys.executable, "-m", "memtrace", "run", "--cpu-bfc", "-o", str(work / "log"), str(script)],
                          capture_output=True, text=True, env=env, timeout=900, check=False)
    (work / "stderr.log").write_text(done.stderr)
    counters = [json.loads(line.split(" ", 1)[1]) for line in done.stdout.splitlines()
                if line.startswith("MEMTRACE_COUNTERS ")]
    failures = [m.groupdict() for m in OOM_LINE.finditer(done.stderr)]
    oom = "ResourceExhaustedError" in done.stderr or bool(failures)
    if done.returncode != 0 and not oom:
        raise SystemExit(f"{name} at {limit_mib} MiB failed otherwise (exit {done.returncode}):\n{done.stderr[-3000:]}")
    profiles = sorted((work / "log").glob("plugins/profile/*/*.xplane.pb"))
    run: dict[str, Any] = {
        "limit_mib": limit_mib, "limit_bytes": None if limit_mib is None else limit_mib * MIB,
        "outcome": "oom" if oom else "completed", "exit_code": done.returncode,
        "counters": counters[-1] if counters else None,
        "_tensorflow": next((line.split()[1] for line in done.stdout.splitlines()
                             if line.startswith("MEMTRACE_TENSORFLOW ")), None),
        "failure": None, "dump": None, "later_failures": [], "profile": None,
        "_profile_path": str(profiles[0]) if len(profiles) == 1 else None,
    }
    if oom:
        if not failures:
            raise SystemExit(f"{name} at {limit_mib} MiB: an OOM without a 'ran out of memory' line")
        # TF writes its dumps (one a failed attempt) before the log line of the failure they belong to.
        # The first failure is the one that decides; with one inter-op thread, ops already scheduled
        # may still run and fail after it ("later_failures").
        dumps = sorted(work.glob("dump_*"), key=lambda d: int(d.name.rsplit(".", 1)[1]))
        described = []
        previous = 0
        for f in failures:
            logged = int(f["seconds"]) * 1_000_000 + int(f["micros"])
            mine = [d for d in dumps if previous < int(d.name.rsplit(".", 1)[1]) <= logged]
            previous = logged
            described.append(({"allocator": f["allocator"], "request_bytes": int(f["rounded"]),
                               "requested_human": f["human"], "op": f["op"]}, read_dumps(mine)))
        run["failure"], run["dump"] = described[0]
        run["later_failures"] = [{"failure": f, "dump": d} for f, d in described[1:]]
    run.update(profile_facts(run["_profile_path"]))
    return run


def read_dumps(paths: list[Path]) -> dict[str, Any]:
    """The allocator's state at the failure, from the ``MemoryDump`` of its last failed attempt (read with protobuf).

    TensorFlow writes one dump per failed attempt (CPU retries for about 10 s), so one OOM leaves
    several; the last is the one at the logged failure. ``same_as_first`` says whether the state was
    the same at the first attempt.
    """
    sys.path.insert(0, str(ROOT))
    from memtrace.read._proto import bfc_memory_map_pb2

    if not paths:
        raise SystemExit("an OOM without a MemoryDump: is TF_BFC_MEMORY_DUMP honoured?")

    def state(path: Path) -> dict[str, Any]:
        dump = bfc_memory_map_pb2.MemoryDump()
        dump.ParseFromString(path.read_bytes())
        regions: list[list[int]] = []  # [base address, size]; chunks are listed region by region in address order
        chunks = []
        for c in dump.chunk:
            if not regions or regions[-1][0] + regions[-1][1] != c.address:
                regions.append([c.address, 0])
            offset = c.address - regions[-1][0]
            regions[-1][1] += c.size
            chunks.append([len(regions) - 1, offset, c.size, bool(c.in_use), c.requested_size if c.in_use else 0,
                           c.op_name])
        free_sizes = [c.size for c in dump.chunk if not c.in_use]
        s = dump.stats
        return {
            "allocator": dump.allocator_name,
            "in_use_bytes": sum(c.size for c in dump.chunk if c.in_use),
            "free_chunk_bytes": sum(free_sizes),
            "largest_free_bytes": max(free_sizes, default=0),
            "pool_bytes": sum(size for _, size in regions),
            "stats": {"num_allocs": s.num_allocs, "bytes_in_use": s.bytes_in_use, "peak_bytes_in_use": s.peak_bytes_in_use,
                      "largest_alloc_size": s.largest_alloc_size},
            "regions": [size for _, size in regions],
            "chunks": chunks,
        }

    last, first = state(paths[-1]), state(paths[0])
    return {**last, "files": len(paths), "same_as_first": first == last}


def profile_facts(path: str | None) -> dict[str, Any]:
    """How many memory events the profile holds and whether it starts at the allocator's birth."""
    if path is None:
        return {"events": None, "from_birth": None}
    sys.path.insert(0, str(ROOT))
    from memtrace.read._proto import xplane_pb2

    space = xplane_pb2.XSpace()
    space.ParseFromString(Path(path).read_bytes())
    first: tuple[int, int, int] | None = None
    count = 0
    for plane in space.planes:
        names = {k: m.name for k, m in plane.stat_metadata.items()}
        kinds = {k for k, m in plane.event_metadata.items() if m.name in ("MemoryAllocation", "MemoryDeallocation")}
        for line in plane.lines:
            for event in line.events:
                if event.metadata_id not in kinds:
                    continue
                count += 1
                time_ps = line.timestamp_ns * 1000 + event.offset_ps
                stats = {names[s.metadata_id]: s.int64_value or s.uint64_value for s in event.stats}
                if first is None or time_ps < first[0]:
                    first = (time_ps, stats.get("bytes_allocated", -1), stats.get("allocation_bytes", -2))
    return {"events": count, "from_birth": first is not None and first[1] == first[2]}


def keep_profile(run: dict[str, Any], out: Path, stem: str) -> None:
    source = run["_profile_path"]
    if source is None:
        return
    target = out / f"{stem}.xplane.pb.gz"
    target.write_bytes(gzip.compress(Path(source).read_bytes(), mtime=0))
    run["profile"] = target.name


def record(name: str, out: Path, scratch: Path, centre: int | None, budget: int) -> None:
    runs: dict[int | None, dict[str, Any]] = {}

    def at(limit: int | None) -> dict[str, Any]:
        if limit not in runs:
            runs[limit] = run_once(name, limit, scratch)
            r = runs[limit]
            print(f"{name}: limit {limit} MiB: {r['outcome']}"
                  + (f" ({r['failure']['op']} {r['failure']['request_bytes']} B)" if r["failure"] else ""), flush=True)
        return runs[limit]

    birth = at(None)
    if birth["outcome"] != "completed" or not birth["from_birth"]:
        raise SystemExit(f"{name}: the run without a limit did not complete from the allocator's birth: {birth}")
    peak = birth["counters"]["peak"]
    low = max(1, -(-peak // MIB) if centre is None else centre)
    # Up from the first guess until a run completes. A run that failed proves the boundary is above its
    # limit, and TF's own dump says by how much at least: the failed request found no free chunk large
    # enough, so it needs a new region of its size beside the pool it saw.
    probe = low
    while at(probe)["outcome"] == "oom":
        failed = runs[probe]
        low, probe = probe, max(probe + 1, -(-(failed["dump"]["pool_bytes"] + failed["failure"]["request_bytes"]) // MIB))
    high = probe
    if low == high:  # the first guess completed: walk down, farther each time, until one fails
        step = 1
        probe = high - step
        while probe >= 1 and at(probe)["outcome"] == "completed":
            high, step = probe, step * 2
            probe = max(0, high - step)
        low = probe
        if low < 1:
            raise SystemExit(f"{name}: completes under a limit of 1 MiB: too small to bracket in MiB")
    # ... then bisect between the highest failure and the lowest success.
    while high - low > 1:
        middle = (low + high) // 2
        if at(middle)["outcome"] == "oom":
            low = middle
        else:
            high = middle
    boundary = {"oom_mib": low, "fits_mib": high}
    at(high + 1)
    for fraction in (0.4, 0.7):  # well below: the program fails earlier, at other requests, in other states
        extra = max(1, int(peak * fraction) // MIB)
        if (fraction == 0.4 or len(runs) < budget) and extra < low and extra not in runs:
            at(extra)
    keep_profile(birth, out, name)
    completed = sorted(k for k, r in runs.items() if k is not None and r["outcome"] == "completed" and k >= high)
    for limit in completed[:2]:
        keep_profile(runs[limit], out, f"{name}.{limit}mib")
    for limit, r in runs.items():  # every OOM run: its own requests up to the failure, for the dump's state
        if r["outcome"] == "oom":
            keep_profile(r, out, f"{name}.{limit}mib")
    ladder = [runs[k] for k in sorted(k for k in runs if k is not None)]
    version = birth["_tensorflow"]
    for r in [birth, *ladder]:
        r.pop("_profile_path", None)
        r.pop("_tensorflow", None)
    result = {
        "schema": "memtrace.fit-evidence/1",
        "program": name,
        "source": program_source(name),
        "recorded_with": {"tensorflow": version, "python": sys.version.split()[0],
                          "env": {"TF_CPU_ALLOCATOR_USE_BFC": "true", "TF_CPP_MIN_LOG_LEVEL": "0", "TF_ENABLE_ONEDNN_OPTS": "0",
                                  "TF_BFC_MEMORY_DUMP": "PREFIX"},
                          "threads": {"inter_op": 1, "intra_op": 1}, "how": "memtrace run --cpu-bfc"},
        "allocator": "bfc_cpu_allocator_for_gpu",
        "default_limit_mib": 65536,
        "birth": birth,
        "boundary": boundary,
        "ladder": ladder,
    }
    (out / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n")
    print(f"{name}: boundary: {low} MiB out of memory, {high} MiB fits ({len(runs)} runs)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("programs", nargs="+", choices=sorted(PROGRAMS), metavar="PROGRAM")
    parser.add_argument("--out", type=Path, default=ROOT / "fixtures" / "fit")
    parser.add_argument("--centre", type=int, metavar="MIB", help="start the ladder here (a model's min_limit)")
    parser.add_argument("--runs", type=int, default=7, help="stop adding runs beyond the boundary search at N")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory (logs, dumps)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="record-fit-"))
    try:
        for name in args.programs:
            record(name, args.out, scratch, args.centre, args.runs)
    finally:
        if args.keep:
            print(f"scratch kept in {scratch}", file=sys.stderr)
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
