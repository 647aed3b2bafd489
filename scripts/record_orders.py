"""Record how one program's order of requests varies from run to run, and TF's own outcome under one limit, many times.

The ground truth for issue 34 ("a program's order is not one order"): ``memtrace fit`` replays
one recording exactly, but a Keras program run again under the same limit may request its memory
in another order and need more or less. One small Keras CNN (three ``Conv2D`` layers on 64x64x3
images, batch 32; its source is in ``fixtures/orders/ladders.json``) is run, in two
configurations, on TensorFlow's CPU BFC allocator (``TF_CPU_ALLOCATOR_USE_BFC=true``, allow_growth
on, the default limit 65,536 MiB):

``default``
    what a new user's ``memtrace run --cpu-bfc script.py`` records: TensorFlow's default inter-op
    and intra-op threads (nothing set; ``TF_NUM_*_THREADS`` and ``OMP_NUM_THREADS`` removed from the
    environment) and oneDNN's kernels on (``TF_ENABLE_ONEDNN_OPTS`` removed: TF's default), trained
    with ``model.fit`` (192 samples, batch 32, one epoch: six steps, the data through ``tf.data``);
``steady``
    the docs' recipe for steady peaks: one inter-op and one intra-op thread, ``TF_ENABLE_ONEDNN_OPTS=0``,
    ``train_on_batch`` six times on the same six batches of 32.

Every run is a fresh process with ``TF_CPP_MIN_LOG_LEVEL=0`` (TF's own "ran out of memory" line);
the program prints the allocator's counters (``get_memory_info("CPU:0")``) when it ends.

``python scripts/record_orders.py recordings CONFIG [--runs N]``
    N whole runs under TF's default limit by ``memtrace run --cpu-bfc`` (the profiler on from right
    after ``import tensorflow``, so from the allocator's birth): the run's ``HOST.xplane.pb``,
    gzip-compressed, is ``fixtures/orders/CONFIG.rK.xplane.pb.gz`` (K from 1, after those already
    recorded); each is read by ``memtrace fit --json``: its smallest limit (``min_limit_bytes``)
    and self-check go into ``ladders.json``.
``python scripts/record_orders.py ladder CONFIG --limits L1,L2,... --runs K``
    K runs under each ``TF_CPU_BFC_MEM_LIMIT_IN_MB`` limit, no profiler (``python SCRIPT``, faster):
    per run whether TF completed the program or ran out (TF's log line "ran out of memory trying to
    allocate X (rounded to N) requested by op OP", every one the run logged; oneDNN's kernels often
    crash with SIGSEGV after that line: still an out-of-memory, by the line) and the state in the
    ``MemoryDump`` (``TF_BFC_MEMORY_DUMP``) of the last attempt before the first such line, read
    by ``memtrace.explain_oom``. The runs go round-robin over the limits (each limit sees the
    machine at every moment of the ladder). Runs add to those already recorded. With ``--profiler``,
    each run goes under ``memtrace run --cpu-bfc`` as the recordings do (kept apart, in
    ``runs_profiled``), and its profile, not kept, is read by ``memtrace fit``: whether the model says
    it fits its limit, and its own smallest limit.
``python scripts/record_orders.py oom CONFIG --limit L [--tries T]``
    one whole run from the allocator's birth by ``memtrace run --cpu-bfc`` under a limit of L MiB,
    ``TF_BFC_MEMORY_DUMP`` set, repeated (at most T times) until a run ran out of memory and its
    profile was written: ``fixtures/orders/CONFIG.oom.LLLmib.xplane.pb.gz`` (gzip of the run's
    ``HOST.xplane.pb``), ``.log`` (the run's stderr, unedited) and ``.memdump.pb`` (the
    ``MemoryDump`` of the last failed attempt of the run's first logged OOM); then what
    ``memtrace oom LOG --trace PROFILE`` and ``memtrace fit PROFILE`` say on them, kept in ``ladders.json``.
``python scripts/record_orders.py table``
    the summary tables (markdown) from ``ladders.json``.

Two runs go at once (``--jobs``, at most 2: the machine these were recorded on had two cores,
shared with other work); the recordings and the ladder runs alike, so a run's order is one a
loaded two-core machine gives. An out-of-memory run takes about 10 s more (TF's CPU retry).
``ladders.json`` (schema ``memtrace.orders-evidence/1``) holds, per configuration, the program's
source, how it was run (threads, oneDNN, TF and Keras versions, CPU count), the recordings with
their smallest limits, every ladder run, the ladder summary (per limit: runs, completed, the
failing requests) and the out-of-memory profile with what memtrace said on it.

What was recorded (TensorFlow 2.21.0, Keras 3.15.1, Python 3.11, a 2-CPU x86-64 machine shared with
other work; ``fixtures/orders/``, about 77 minutes of wall time in all)::

    recordings default --runs 6; recordings steady --runs 6
    ladder default --limits 96,100,104,106,108,110,112,114,116,120,124,128,136,144,160 --runs 2
    ladder default --limits 84,86,88,90,92,94,95,96-120,122,124,126,128,130,132,136,144,160,192 --runs 4
    ladder steady --limits 88,92,96-120,124,128 --runs 3
    ladder default --limits 70,74,76,78,80-83 --runs 4
    ladder default --limits 113-124 --runs 2
    ladder default --limits 84-94 --runs 2; ladder default --limits 85,87,89,91,93 --runs 2
    ladder default --limits 96,100,104,108,112 --runs 4 --profiler
    ladder default --limits 65536 --runs 8 --profiler
    oom default --limit 86; oom steady --limit 112

- ``default``: the six recordings need 110, 110, 111, 113, 113 and 113 MiB (``memtrace fit``); eight
  more profiled runs under 65,536 MiB needed 101, 109, 110, 110, 113, 113, 113 and 117. Under a limit
  (286 runs without the profiler): every run ran out from 70 to 83 MiB; from 84 to 113 MiB the share
  that completed was 0 to 83% and not monotone in the limit (84: 2 of 6, 86-88: 0, 89: 2 of 4, 100: 0
  of 6, 101: 3 of 4, 102: 0 of 4, 110: 3 of 6, 111: 2 of 4, 113: 5 of 6); 114 and 115 every run, 116
  7 of 8, and every run from 117 to 192 MiB. At the recordings' own smallest limits 110, 111 and
  113 MiB, 50%, 50% and 83% of TF's runs completed. The first failure is a 16 MiB ``MaxPoolGrad`` of
  ``pool_a`` in most OOMs; every OOM from 90 MiB up ended in SIGSEGV after TF's line (oneDNN).
- ``steady``: the six recordings need 113 MiB each; TF (87 runs, 3 per limit) ran out at every limit
  from 88 to 112 MiB, always on the 27 MiB ``Conv2DBackpropFilter`` of ``conv_b``, and completed
  every run from 113 to 128 MiB: one boundary, the recordings' own.
- ``oom``: ``default`` at 86 MiB ran out on a 2 MiB ``MaxPool2d`` (exhausted); ``memtrace oom --trace``
  fails at that request in the dump's state and names 90 MiB. ``steady`` at 112 MiB ran out on the
  27 MiB ``Conv2DBackpropFilter`` (fragmentation); its profile's memory events stop for 10.0 s (CPU's
  retry) at the dump's bytes in use, then 84 more follow (38 allocations, the largest 42 MiB: ops
  that ran after the failure), and ``memtrace oom --trace`` says the model "does not run out of
  memory where TensorFlow did" and names 94 MiB as enough, where TF ran out at every limit from 88 to
  112 MiB (issue 34's wrong answer, recorded).

Runs recorded before the script wrote ``load_1min`` (the recordings, the first two ``default`` ladders and
the ``steady`` ladder) have none; ``concurrent_runs`` was added to the runs recorded before it was
written per run (2 for the recordings and ladders, 1 for the out-of-memory runs), as they ran.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "fixtures" / "orders"
LADDERS = OUT / "ladders.json"
SCHEMA = "memtrace.orders-evidence/1"
MIB = 1 << 20
RUN_TIMEOUT_S = 600

PRELUDE = """\
import json
import numpy as np
import tensorflow as tf
{threads}

def _counters():
    info = tf.config.experimental.get_memory_info("CPU:0")
    print("MEMTRACE_COUNTERS " + json.dumps({{k: int(v) for k, v in info.items()}}), flush=True)
    print("MEMTRACE_TENSORFLOW " + tf.__version__, flush=True)


try:
"""
ONE_THREAD = """\
tf.config.threading.set_inter_op_parallelism_threads(1)
tf.config.threading.set_intra_op_parallelism_threads(1)
"""
EPILOGUE = """\
finally:
    _counters()
"""

MODEL = """\
import keras
keras.utils.set_random_seed(0)
model = keras.Sequential([
    keras.Input((64, 64, 3)),
    keras.layers.Conv2D(32, 3, padding="same", activation="relu", name="conv_a"),
    keras.layers.Conv2D(32, 3, padding="same", activation="relu", name="conv_b"),
    keras.layers.MaxPooling2D(name="pool_a"),
    keras.layers.Conv2D(64, 3, padding="same", activation="relu", name="conv_c"),
    keras.layers.MaxPooling2D(name="pool_b"),
    keras.layers.Flatten(name="flat"),
    keras.layers.Dense(10, name="logits"),
])
model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
rng = np.random.default_rng(0)
x = rng.standard_normal((192, 64, 64, 3)).astype("float32")
y = rng.integers(0, 10, 192)
"""
DRIVERS = {
    "fit": """\
model.fit(x, y, batch_size=32, epochs=1, shuffle=False, verbose=0)
""",
    "train_on_batch": """\
for i in range(6):
    model.train_on_batch(x[32 * i:32 * (i + 1)], y[32 * i:32 * (i + 1)])
""",
}

# threads: None is TensorFlow's default (nothing set); onednn: whether oneDNN's kernels run (TF's default: on).
CONFIGS: dict[str, dict[str, Any]] = {
    "default": {"threads": None, "onednn": True, "driver": "fit"},
    "steady": {"threads": 1, "onednn": False, "driver": "train_on_batch"},
}

# TF's log line at an out-of-memory (xla/tsl/framework/bfc_allocator.cc); absl's prefix carries the time.
OOM_LINE = re.compile(r"^\w\d{4} \d\d:\d\d:(?P<seconds>\d+)\.(?P<micros>\d{6}) .*?\((?P<allocator>[^)]*)\) ran out of memory "
                      r"trying to allocate (?P<human>\S+) \(rounded to (?P<rounded>\d+)\)\s*requested by op (?P<op>\S*)"
                      r"(?!.*not a failure)", re.MULTILINE)


def program_source(config: str) -> str:
    spec = CONFIGS[config]
    body = MODEL + DRIVERS[spec["driver"]]
    indented = "".join(f"    {line}\n" if line else "\n" for line in body.splitlines())
    return PRELUDE.format(threads=ONE_THREAD if spec["threads"] == 1 else "") + indented + EPILOGUE


def child_env(config: str, limit_mib: int | None, dump_prefix: str | None) -> dict[str, str]:
    """The environment of one run: TF's defaults but for what the configuration sets."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPU_ALLOCATOR_USE_BFC": "true", "TF_CPP_MIN_LOG_LEVEL": "0",
           "CUDA_VISIBLE_DEVICES": ""}
    for name in ("TF_CPU_BFC_MEM_LIMIT_IN_MB", "TF_BFC_MEMORY_DUMP", "TF_ENABLE_ONEDNN_OPTS", "TF_NUM_INTEROP_THREADS",
                 "TF_NUM_INTRAOP_THREADS", "OMP_NUM_THREADS"):
        env.pop(name, None)
    if not CONFIGS[config]["onednn"]:
        env["TF_ENABLE_ONEDNN_OPTS"] = "0"
    if limit_mib is not None:
        env["TF_CPU_BFC_MEM_LIMIT_IN_MB"] = str(limit_mib)
    if dump_prefix is not None:
        env["TF_BFC_MEMORY_DUMP"] = dump_prefix
    return env


def run_program(config: str, work: Path, *, limit_mib: int | None = None, profile: bool = False,
                dumps: bool = False) -> dict[str, Any]:
    """One fresh process in ``work``: under ``memtrace run --cpu-bfc`` when ``profile``, else ``python SCRIPT``."""
    script = work / f"{config}.py"
    script.write_text(program_source(config))
    env = child_env(config, limit_mib, str(work / "dump") if dumps else None)
    if profile:
        argv = [sys.executable, "-m", "memtrace", "run", "--cpu-bfc", "-o", str(work / "logdir"), str(script)]
    else:
        argv = [sys.executable, str(script)]
    load_1min = os.getloadavg()[0]  # the machine was shared: how busy it was when the run began
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=work, timeout=RUN_TIMEOUT_S, check=False)
    seconds = time.monotonic() - started
    (work / "stderr.log").write_text(done.stderr)
    failures = [m.groupdict() for m in OOM_LINE.finditer(done.stderr)]
    counters = [json.loads(line.split(" ", 1)[1]) for line in done.stdout.splitlines() if line.startswith("MEMTRACE_COUNTERS ")]
    version = next((line.split()[1] for line in done.stdout.splitlines() if line.startswith("MEMTRACE_TENSORFLOW ")), None)
    # An OOM by TF's own line (oneDNN's kernels may crash the process with SIGSEGV after it); completed when the
    # program ended normally without one; anything else is neither and is kept as "other".
    outcome = "oom" if failures else "completed" if done.returncode == 0 else "other"
    run: dict[str, Any] = {
        "limit_mib": limit_mib, "outcome": outcome, "exit_code": done.returncode, "seconds": round(seconds, 1),
        "load_1min": round(load_1min, 2),
        "failures": [{"request_bytes": int(f["rounded"]), "requested": f["human"], "op": f["op"]} for f in failures],
        "counters": counters[-1] if counters else None,
        # TF says so at start-up when it runs oneDNN's kernels (and says nothing when they are off).
        "onednn_on": "oneDNN custom operations are on" in done.stderr,
    }
    if run["onednn_on"] != CONFIGS[config]["onednn"]:
        raise SystemExit(f"{config}: oneDNN's kernels {'on' if run['onednn_on'] else 'off'}, not as configured:\n"
                         + done.stderr[-2000:])
    if outcome == "other":
        run["stderr_tail"] = done.stderr[-1500:]
    run["_tensorflow"] = version
    run["_failure_micros"] = [int(f["seconds"]) * 1_000_000 + int(f["micros"]) for f in failures]
    return run


def first_failure_dump(work: Path, run: dict[str, Any]) -> Path | None:
    """The ``MemoryDump`` of the last failed attempt before the run's first logged OOM (TF writes one per attempt)."""
    if not run["_failure_micros"]:
        return None
    first = run["_failure_micros"][0]
    dumps = sorted(work.glob("dump_*"), key=lambda d: int(d.name.rsplit(".", 1)[1]))
    mine = [d for d in dumps if int(d.name.rsplit(".", 1)[1]) <= first]
    return mine[-1] if mine else None


def dump_state(path: Path, request_bytes: int, limit_mib: int) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    import memtrace

    (event,) = memtrace.explain_oom(str(path), request_bytes=request_bytes, limit_bytes=limit_mib * MIB)[-1:]
    return {"in_use_bytes": event.in_use_bytes, "pool_bytes": event.pool_bytes, "free_bytes": event.free_bytes,
            "largest_free_bytes": event.largest_free_bytes, "verdict": event.verdict}


def memtrace_json(*args: str) -> tuple[int, Any]:
    done = subprocess.run([sys.executable, "-m", "memtrace", *args, "--json"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
    if done.returncode not in (0, 1):
        raise SystemExit(f"memtrace {' '.join(args)}: exit {done.returncode}\n{done.stderr}")
    return done.returncode, json.loads(done.stdout)


def memtrace_text(*args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "memtrace", *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "100"}, check=False)
    return {"command": "memtrace " + " ".join(args), "exit_code": done.returncode, "stdout": done.stdout,
            "stderr": done.stderr}


def fit_facts(profile: Path) -> dict[str, Any]:
    """What ``memtrace fit --json`` says of a recording: its smallest limit, and how well the model reproduced it."""
    code, result = memtrace_json("fit", str(profile))
    (fit,) = result["allocators"]
    reproduced = fit["reproduced"]
    return {
        "fit_exit_code": code, "fits": fit["fits"], "min_limit_bytes": fit["min_limit_bytes"],
        "min_limit_mib": None if fit["min_limit_bytes"] is None else -(-fit["min_limit_bytes"] // MIB),
        "peak_in_use_bytes": fit["peak_in_use_bytes"], "requested_peak_bytes": fit["requested_peak_bytes"],
        "monotone": fit["monotone"], "events": fit["events"], "allocations": fit["allocations"],
        "failure": None if fit["failure"] is None else {k: fit["failure"].get(k) for k in
                                                         ("event", "op", "request_bytes", "in_use_bytes", "verdict")},
        "reproduced": None if reproduced is None else {k: reproduced[k] for k in (
            "allocations", "addresses_equal", "chunks_equal", "events", "bytes_in_use_equal", "fragmentation_equal",
            "limit_bytes", "first_difference")},
    }


RETRY_GAP_S = 5.0  # CPU's retry: a failed request waits about 10 s for frees before TF logs the OOM


def profile_around_failures(profile: Path, dump_in_use_bytes: int) -> dict[str, Any]:
    """Where the failures sit in a profile: the gaps of CPU's retry between memory events, and what came after.

    A failed request writes no event; while TF retries it (about 10 s) nothing else is allocated if no
    other op runs, so the failure shows as a gap. Read with TensorFlow's own XSpace protobuf.
    """
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    space.ParseFromString(profile.read_bytes())
    events: list[tuple[int, bool, int, int]] = []  # (time in ps, allocation?, chunk bytes, bytes in use after)
    for plane in space.planes:
        names = {k: m.name for k, m in plane.stat_metadata.items()}
        kinds = {k: m.name == "MemoryAllocation" for k, m in plane.event_metadata.items()
                 if m.name in ("MemoryAllocation", "MemoryDeallocation")}
        for line in plane.lines:
            for event in line.events:
                if event.metadata_id in kinds:
                    stats = {names[s.metadata_id]: s.int64_value or s.uint64_value for s in event.stats}
                    events.append((line.timestamp_ns * 1000 + event.offset_ps, kinds[event.metadata_id],
                                   stats.get("allocation_bytes", 0), stats.get("bytes_allocated", 0)))
    events.sort()
    gaps = [{"after_event": i, "seconds": round((events[i][0] - events[i - 1][0]) / 1e12, 3),
             "in_use_bytes_before": events[i - 1][3]}
            for i in range(1, len(events)) if events[i][0] - events[i - 1][0] >= RETRY_GAP_S * 1e12]
    after = events[gaps[0]["after_event"]:] if gaps else []
    return {
        "events": len(events), "retry_gaps": gaps,
        "dump_in_use_bytes": dump_in_use_bytes,
        "first_gap_matches_dump": bool(gaps) and gaps[0]["in_use_bytes_before"] == dump_in_use_bytes,
        "events_after_first_gap": len(after),
        "allocations_after_first_gap": sum(1 for e in after if e[1]),
        "largest_allocation_after_first_gap_bytes": max((e[2] for e in after if e[1]), default=0),
    }


def the_profile(work: Path) -> Path | None:
    found = sorted((work / "logdir").glob("plugins/profile/*/*.xplane.pb"))
    return found[0] if len(found) == 1 else None


# -- ladders.json --------------------------------------------------------------------------------

def load() -> dict[str, Any]:
    if LADDERS.exists():
        return json.loads(LADDERS.read_text())
    return {"schema": SCHEMA, "configs": {}}


def section(data: dict[str, Any], config: str) -> dict[str, Any]:
    spec = CONFIGS[config]
    entry = data["configs"].setdefault(config, {"recordings": [], "runs": [], "ladder": [], "oom_profiles": []})
    entry.setdefault("runs_profiled", [])
    entry["source"] = program_source(config)
    entry["configuration"] = {
        "threads": {"inter_op": spec["threads"], "intra_op": spec["threads"]} if spec["threads"] else "TensorFlow's default",
        "onednn": spec["onednn"], "driver": spec["driver"], "batch": 32, "steps": 6,
        "env": {"TF_CPU_ALLOCATOR_USE_BFC": "true", "TF_CPP_MIN_LOG_LEVEL": "0",
                "TF_ENABLE_ONEDNN_OPTS": "unset (TF's default: on)" if spec["onednn"] else "0",
                "TF_NUM_INTEROP_THREADS, TF_NUM_INTRAOP_THREADS, OMP_NUM_THREADS": "unset",
                "TF_CPU_BFC_MEM_LIMIT_IN_MB": "unset (65,536 MiB) for the recordings; the ladder's limit",
                "TF_BFC_MEMORY_DUMP": "PREFIX for the ladder and out-of-memory runs"},
        "allocator": "bfc_cpu_allocator_for_gpu", "default_limit_mib": 65536,
    }
    return entry


def note_versions(entry: dict[str, Any], run: dict[str, Any], jobs: int) -> None:
    version = run.pop("_tensorflow", None)
    run.pop("_failure_micros", None)
    entry.setdefault("recorded_with", {})
    entry["recorded_with"].update({"python": sys.version.split()[0], "cpu_count": os.cpu_count(),
                                   "machine": platform.machine()})
    run["concurrent_runs"] = jobs
    if version:
        entry["recorded_with"]["tensorflow"] = version
    with contextlib.suppress(metadata.PackageNotFoundError):
        entry["recorded_with"]["keras"] = metadata.version("keras")


def summarize(entry: dict[str, Any]) -> None:
    """Per limit: runs, completed, OOMs, other endings, the first failing requests; and each recording against it."""
    entry["ladder"] = ladder_rows(entry["runs"])
    if entry.get("runs_profiled"):
        entry["ladder_profiled"] = ladder_rows(entry["runs_profiled"])
    limits = {row["limit_mib"]: row for row in entry["ladder"]}
    for recording in entry["recordings"]:
        mib = recording.get("min_limit_mib")
        row = limits.get(mib)
        recording["ladder_at_min_limit"] = None if row is None else {"runs": row["runs"], "completed": row["completed"]}


def ladder_rows(runs_recorded: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_limit: dict[int, list[dict[str, Any]]] = {}
    for run in runs_recorded:
        by_limit.setdefault(run["limit_mib"], []).append(run)
    ladder = []
    for limit in sorted(by_limit):
        runs = by_limit[limit]
        first: dict[str, int] = {}
        for run in runs:
            if run["failures"]:
                f = run["failures"][0]
                key = f"{f['request_bytes']} {f['op']}"
                first[key] = first.get(key, 0) + 1
        ladder.append({"limit_mib": limit, "runs": len(runs), "completed": sum(r["outcome"] == "completed" for r in runs),
                       "oom": sum(r["outcome"] == "oom" for r in runs), "other": sum(r["outcome"] == "other" for r in runs),
                       "first_failures": [{"request_bytes": int(k.split()[0]), "op": k.split(" ", 1)[1], "runs": n}
                                          for k, n in sorted(first.items(), key=lambda kv: -kv[1])]})
    return ladder


def save(data: dict[str, Any]) -> None:
    for entry in data["configs"].values():
        summarize(entry)
    order = ["source", "configuration", "recorded_with", "recordings", "ladder", "ladder_profiled", "oom_profiles", "runs",
             "runs_profiled"]
    data["configs"] = {config: {k: data["configs"][config][k] for k in sorted(data["configs"][config], key=order.index)}
                       for config in CONFIGS if config in data["configs"]}
    OUT.mkdir(parents=True, exist_ok=True)
    LADDERS.write_text(render(data) + "\n")


def render(value: Any, depth: int = 0) -> str:
    """JSON with the file's outline indented and each run, recording and row on one line of its own."""
    if depth >= 4 or not isinstance(value, (dict, list)) or not value:
        return json.dumps(value)
    inner = " " * (depth + 1)
    if isinstance(value, dict):
        items = [f"{inner}{json.dumps(k)}: {render(v, depth + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * depth + "}"
    return "[\n" + ",\n".join(inner + render(v, depth + 1) for v in value) + "\n" + " " * depth + "]"


# -- the three kinds of run ----------------------------------------------------------------------

def in_parallel(jobs: int, tasks: list[Callable[[], dict[str, Any]]], done: Callable[[dict[str, Any]], None]) -> None:
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for result in pool.map(lambda task: task(), tasks):
            done(result)


def record_recordings(config: str, count: int, jobs: int, scratch: Path) -> None:
    data = load()
    entry = section(data, config)
    start = 1 + max((int(r["file"].split(".r")[1].split(".")[0]) for r in entry["recordings"]), default=0)

    def one(k: int) -> dict[str, Any]:
        work = Path(tempfile.mkdtemp(prefix=f"{config}-r{k}-", dir=scratch))
        run = run_program(config, work, profile=True)
        if run["outcome"] != "completed":
            raise SystemExit(f"{config} recording {k} did not complete: {run}")
        profile = the_profile(work)
        if profile is None:
            raise SystemExit(f"{config} recording {k}: no single profile under {work}")
        target = OUT / f"{config}.r{k}.xplane.pb.gz"
        target.write_bytes(gzip.compress(profile.read_bytes(), mtime=0))
        run.update(file=target.name, gz_bytes=target.stat().st_size, **fit_facts(target))
        shutil.rmtree(work, ignore_errors=True)
        return run

    def keep(run: dict[str, Any]) -> None:
        note_versions(entry, run, jobs)
        for key in ("limit_mib", "failures"):
            run.pop(key, None)
        entry["recordings"].append(run)
        print(f"{config}: {run['file']}: smallest limit {run['min_limit_mib']} MiB "
              f"(peak in use {run['counters']['peak']} B, {run['gz_bytes']} B gz, {run['seconds']} s)", flush=True)
        save(data)

    OUT.mkdir(parents=True, exist_ok=True)
    in_parallel(jobs, [lambda k=k: one(k) for k in range(start, start + count)], keep)


def record_ladder(config: str, limits: list[int], count: int, jobs: int, scratch: Path, profiler: bool) -> None:
    data = load()
    entry = section(data, config)

    def one(limit: int) -> dict[str, Any]:
        work = Path(tempfile.mkdtemp(prefix=f"{config}-{limit}-", dir=scratch))
        run = run_program(config, work, limit_mib=limit, profile=profiler, dumps=True)
        dump = first_failure_dump(work, run)
        if dump is not None:
            run["dump"] = dump_state(dump, run["failures"][0]["request_bytes"], limit)
        if profiler:  # the run's own profile (not kept): what memtrace fit says of it under its limit
            run["profiler"] = True
            profile = the_profile(work)
            run["fit"] = None if profile is None else fit_facts(profile)
        run["failures"] = run["failures"][:8]  # the first decides; a few more say what else was running
        run["counters"] = None if run["counters"] is None else {"peak": run["counters"]["peak"]}
        shutil.rmtree(work, ignore_errors=True)
        return run

    def keep(run: dict[str, Any]) -> None:
        note_versions(entry, run, jobs)
        entry["runs_profiled" if profiler else "runs"].append(run)
        first = run["failures"][0] if run["failures"] else None
        fit = run.get("fit")
        print(f"{config}: {run['limit_mib']} MiB: {run['outcome']} (exit {run['exit_code']}, {run['seconds']} s)"
              + (f" {first['request_bytes']} B {first['op']}" if first else "")
              + (f"; its profile: fits {fit['fits']}, smallest limit {fit['min_limit_mib']} MiB" if fit else ""), flush=True)
        save(data)

    order = [limit for _ in range(count) for limit in limits]  # round-robin: every limit sees the whole session
    in_parallel(jobs, [lambda limit=limit: one(limit) for limit in order], keep)


def record_oom(config: str, limit: int, tries: int, scratch: Path) -> None:
    data = load()
    entry = section(data, config)
    stem = OUT / f"{config}.oom.{limit}mib"
    for attempt in range(1, tries + 1):
        work = Path(tempfile.mkdtemp(prefix=f"{config}-oom-{limit}-", dir=scratch))
        run = run_program(config, work, limit_mib=limit, profile=True, dumps=True)
        profile = the_profile(work)
        dump = first_failure_dump(work, run)
        print(f"{config}: oom try {attempt} at {limit} MiB: {run['outcome']} (exit {run['exit_code']}), "
              f"profile {'written' if profile else 'missing'}, dump {'found' if dump else 'missing'}", flush=True)
        if run["outcome"] == "oom" and profile is not None and dump is not None:
            break
        shutil.rmtree(work, ignore_errors=True)
    else:
        raise SystemExit(f"{config}: no run under {limit} MiB ran out of memory with its profile written in {tries} tries")
    OUT.mkdir(parents=True, exist_ok=True)
    paths = {"profile": Path(f"{stem}.xplane.pb.gz"), "log": Path(f"{stem}.log"), "memdump": Path(f"{stem}.memdump.pb")}
    paths["profile"].write_bytes(gzip.compress(profile.read_bytes(), mtime=0))
    shutil.copyfile(work / "stderr.log", paths["log"])
    shutil.copyfile(dump, paths["memdump"])
    relative = {k: str(p.relative_to(ROOT)) for k, p in paths.items()}
    note_versions(entry, run, 1)
    run.update(attempt=attempt, files={k: p.name for k, p in paths.items()},
               sizes={k: p.stat().st_size for k, p in paths.items()},
               dumps_written=len(list(work.glob("dump_*"))), dump=dump_state(dump, run["failures"][0]["request_bytes"], limit))
    run["profile_around_failures"] = profile_around_failures(profile, run["dump"]["in_use_bytes"])
    run["memtrace_oom"] = memtrace_text("oom", relative["log"], "--trace", relative["profile"])
    _, explained = memtrace_json("oom", relative["log"], "--trace", relative["profile"])
    run["memtrace_oom_json"] = [{k: event.get(k) for k in ("verdict", "request_bytes", "op", "in_use_bytes", "free_bytes",
                                                           "largest_free_bytes", "limit_bytes", "avoided_by")}
                                for event in explained["events"]]
    run["memtrace_oom_memdump"] = memtrace_text("oom", relative["memdump"], "--request",
                                                str(run["failures"][0]["request_bytes"]), "--limit", f"{limit}MiB",
                                                "--trace", relative["profile"])
    run["memtrace_fit"] = memtrace_text("fit", relative["profile"])
    run["fit_under_its_limit"] = fit_facts(paths["profile"])
    entry["oom_profiles"] = [p for p in entry["oom_profiles"] if p["limit_mib"] != limit] + [run]
    save(data)
    shutil.rmtree(work, ignore_errors=True)
    print(run["memtrace_oom"]["stdout"])
    print(f"kept {', '.join(relative.values())}")


# -- the table -------------------------------------------------------------------------------------

def short(op: str) -> str:
    """An op's name without the prefixes every one of this program's ops has."""
    return op.replace("StatefulPartitionedCall/", "").replace("sequential_1/", "")


def table(data: dict[str, Any]) -> str:
    lines = []
    for config, entry in data["configs"].items():
        lines.append(f"### {config}\n")
        recordings = sorted(entry["recordings"], key=lambda r: int(r["file"].split(".r")[1].split(".")[0]))
        mins = ", ".join(f"{r['file'].split('.')[1]} {r['min_limit_mib']}" for r in recordings)
        lines.append(f"recordings' smallest limits (memtrace fit, MiB): {mins}\n")
        for key, title in (("ladder", "no profiler"), ("ladder_profiled", "under memtrace run, as the recordings")):
            if not entry.get(key):
                continue
            profiled = key == "ladder_profiled"
            lines.append(f"ladder ({title}):\n")
            lines.append("| limit (MiB) | runs | completed | share fit | "
                         + ("completed runs' own smallest limits (MiB) | " if profiled else "recordings whose smallest limit this is | ")
                         + "first failing requests |")
            lines.append("|---|---|---|---|---|---|")
            for row in entry[key]:
                if profiled:
                    own = sorted(r["fit"]["min_limit_mib"] for r in entry["runs_profiled"]
                                 if r["limit_mib"] == row["limit_mib"] and r["outcome"] == "completed" and r.get("fit"))
                    middle = ", ".join(map(str, own))
                else:
                    middle = ", ".join(r["file"].split(".")[1] for r in recordings if r["min_limit_mib"] == row["limit_mib"])
                fails = "; ".join(f"{f['runs']}x {f['request_bytes']} B {short(f['op'])}" for f in row["first_failures"])
                other = f" ({row['other']} other)" if row["other"] else ""
                lines.append(f"| {row['limit_mib']} | {row['runs']} | {row['completed']}{other} | "
                             f"{row['completed'] / row['runs']:.0%} | {middle} | {fails} |")
            lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["recordings", "ladder", "oom", "table"])
    parser.add_argument("config", nargs="?", choices=sorted(CONFIGS))
    parser.add_argument("--runs", type=int, default=4, help="recordings: how many; ladder: runs per limit")
    parser.add_argument("--limits", help="ladder: TF_CPU_BFC_MEM_LIMIT_IN_MB values, MiB, comma-separated (A-B for a range)")
    parser.add_argument("--limit", type=int, help="oom: the limit, MiB")
    parser.add_argument("--tries", type=int, default=6, help="oom: at most this many runs")
    parser.add_argument("--profiler", action="store_true",
                        help="ladder: run under memtrace run --cpu-bfc, as the recordings (profiles read, not kept)")
    parser.add_argument("--jobs", type=int, default=2, choices=[1, 2], help="runs at once")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args(argv)
    if args.what == "table":
        print(table(load()))
        return 0
    if args.config is None:
        parser.error("say which configuration: " + ", ".join(CONFIGS))
    scratch = Path(tempfile.mkdtemp(prefix="record-orders-"))
    try:
        if args.what == "recordings":
            record_recordings(args.config, args.runs, args.jobs, scratch)
        elif args.what == "ladder":
            if not args.limits:
                parser.error("ladder needs --limits")
            limits: list[int] = []
            for part in args.limits.split(","):
                low, _, high = part.partition("-")
                limits += range(int(low), int(high or low) + 1)
            record_ladder(args.config, limits, args.runs, args.jobs, scratch, args.profiler)
        else:
            if args.limit is None:
                parser.error("oom needs --limit")
            record_oom(args.config, args.limit, args.tries, scratch)
    finally:
        if args.keep:
            print(f"scratch kept in {scratch}", file=sys.stderr)
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
