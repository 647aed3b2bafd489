"""Record JAX programs on a GPU the way a user would, through ``memtrace run``, and run each under a ladder of limits
several times: the ground truth for "does fit's answer hold for the runs to come" on XLA (``fixtures/gpu-heldout``).

For each program (``scripts/jax_programs/NAME.py``):

1. ``memtrace run --limit AMPLE --runs 3 -o OUT/NAME/ample SCRIPT``: three recordings under an ample limit (and
   the band ``memtrace run --runs`` prints over them);
2. the ladder: ``memtrace run --limit L -o OUT/NAME/ladder/L-K SCRIPT`` for every limit L (factors of the first
   recording's peak, whole MiB) and K = 1..REPEATS, several at a time on the one GPU, in a shuffled order;
3. ``OUT/ladder.json``: every run's limit, outcome (the program's own ``RESULT`` line: ``ok`` or ``oom``), exit
   code, seconds and the allocator's ``memory_stats()``, written after each run (a run cut short keeps what
   finished); ``OUT/recordings.tar.gz``: the profiles (gzipped) and logs, the ample ones first, within a size budget.

Needs JAX with a GPU (run it on the device machine); nothing here imports JAX. Usage:
``python scripts/record_jax_ladder.py --out $OUT --deadline-s 380``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import gzip
import io
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tarfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MIB = 1 << 20
FRACTION = re.compile(r"XLA_PYTHON_CLIENT_MEM_FRACTION=(\S+) ")
# Each program: the ample limit, and the ladder's factors of the ample recording's peak in use.
PROGRAMS = {
    "mlp": ("4GiB", (0.94, 0.97, 0.99, 1.0, 1.01, 1.02, 1.03, 1.04, 1.06, 1.08, 1.1)),
    "transformer": ("8GiB", (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0, 1.02, 1.05, 1.1)),
}
ENVIRONMENT = {
    "XLA_PYTHON_CLIENT_PREALLOCATE": "true",  # XLA's default: the pool made at the limit, partitioned
    "XLA_PYTHON_CLIENT_ALLOCATOR": "bfc",
    "XLA_FLAGS": "--xla_gpu_autotune_level=0",  # autotuning's trial buffers vary run to run
    "TF_CPP_MIN_LOG_LEVEL": "0",  # XLA's log: its pool, rematerialization, the BFC dump at an OOM
}


def memtrace_run(limit: str, logdir: str, script: str, log: str, runs: int = 1, timeout: float = 240) -> dict:
    """One ``memtrace run`` (``runs`` recordings); its output in ``log``; the RESULT lines and the exit code."""
    command = [sys.executable, "-m", "memtrace", "run", "--limit", limit, "-o", logdir]
    if runs > 1:
        command += ["--runs", str(runs)]
    command.append(script)
    env = dict(os.environ, **ENVIRONMENT)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")]))
    started = time.monotonic()
    with open(log, "w") as out:
        try:
            code = subprocess.run(command, check=False, stdout=out, stderr=subprocess.STDOUT, env=env,
                                  timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            code = None
    with open(log, errors="replace") as out:
        lines = out.readlines()
    results = [json.loads(line[len("RESULT "):]) for line in lines if line.startswith("RESULT ")]
    fractions = [m.group(1) for m in map(FRACTION.search, lines) if m]
    other_pool = [line.strip() for line in lines if "XLA made a pool" in line]
    return {"code": code, "seconds": round(time.monotonic() - started, 1), "results": results,
            "fraction": fractions[0] if fractions else None, "other_pool": other_pool}


def profiles(logdir: str) -> list[str]:
    found = []
    for directory, _, names in os.walk(logdir):
        found += [os.path.join(directory, n) for n in names if n.endswith(".xplane.pb")]
    return sorted(found)


def pack(record: dict, programs: list[str], work: str, tarball: str, budget: int) -> list[str]:
    """Write ``tarball``: each program's ample recordings and log, then one ladder run of each limit and outcome,
    then the others, the profiles gzipped, while they fit ``budget`` bytes; the names packed."""
    order: list[tuple[str, str]] = []
    for name in programs:
        order += [(p, f"{name}/ample/{os.path.relpath(p, os.path.join(work, name, 'ample'))}")
                  for p in profiles(os.path.join(work, name, "ample"))]
        order.append((os.path.join(work, f"{name}-ample.log"), f"{name}/ample.log"))
    seen, rest = set(), []
    for name in programs:
        for entry in sorted(record["programs"].get(name, {}).get("ladder", []), key=lambda e: e["repeat"]):
            tag = f"{entry['limit_mib']}-{entry['repeat']}"
            files = [(p, f"{name}/ladder/{tag}.xplane.pb") for p in profiles(os.path.join(work, name, "ladder", tag))]
            files.append((os.path.join(work, name, f"ladder-{tag}.log"), f"{name}/ladder/{tag}.log"))
            key = (name, entry["limit_mib"], entry["outcome"])
            (order if key not in seen else rest).extend(files)
            seen.add(key)
    packed = []
    with tarfile.open(tarball, "w:gz") as tar:
        for path, arcname in order + rest:
            if not os.path.exists(path):
                continue
            with open(path, "rb") as source:
                data = source.read()
            if path.endswith(".xplane.pb"):
                data, arcname = gzip.compress(data, 6), arcname + ".gz"
            if len(data) > budget:
                continue
            budget -= len(data)
            info = tarfile.TarInfo(arcname)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
            packed.append(arcname)
    return packed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--programs", nargs="*", default=list(PROGRAMS))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=10)
    parser.add_argument("--deadline-s", type=float, default=380, help="start no run after this many seconds")
    parser.add_argument("--pack-mib", type=float, default=15)
    parser.add_argument("--limits", nargs="*", default=[], metavar="NAME=MIB,MIB,...",
                        help="a ladder of these limits for a program, in place of the ample recordings' factors "
                        "(the ample recordings are then skipped)")
    parser.add_argument("--programs-dir", default=os.path.join(HERE, "jax_programs"))
    args = parser.parse_args()
    given = {name: sorted(int(v) for v in values.split(",")) for name, _, values in
             (each.partition("=") for each in args.limits)}
    if given:
        args.programs = list(given)
    started = time.monotonic()
    work = os.path.join("/tmp", "memtrace-ladder")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(args.out, exist_ok=True)
    record: dict = {"environment": ENVIRONMENT, "programs": {}}
    lock = threading.Lock()

    def save() -> None:
        with lock, open(os.path.join(args.out, "ladder.json"), "w") as out:
            json.dump(record, out, indent=1)

    def say(text: str) -> None:
        print(f"[{time.monotonic() - started:6.1f} s] {text}", flush=True)

    # 1. The ample recordings, every program at once.
    for name in args.programs:
        os.makedirs(os.path.join(work, name), exist_ok=True)
    with concurrent.futures.ThreadPoolExecutor(len(args.programs)) as pool:
        ample = {} if given else {name: pool.submit(memtrace_run, PROGRAMS[name][0], os.path.join(work, name, "ample"),
                                   os.path.join(args.programs_dir, f"{name}.py"),
                                   os.path.join(work, f"{name}-ample.log"), runs=3, timeout=400)
                 for name in args.programs}
    tasks = []
    for name, limits in given.items():
        record["programs"][name] = {"limits_mib": limits, "ladder": []}
        tasks += [(name, limit, k) for limit in limits for k in range(1, args.repeats + 1)]
    for name, future in ample.items():
        result = future.result()
        peaks = [r["stats"].get("peak_bytes_in_use") for r in result["results"]]
        say(f"{name} ample: exit {result['code']}, {result['seconds']} s, outcomes "
            f"{[r['status'] for r in result['results']]}, peaks {peaks}")
        record["programs"][name] = {"ample_limit": PROGRAMS[name][0], "ample": result, "ladder": []}
        if not peaks or peaks[0] is None:
            continue
        peak_mib = peaks[0] / MIB
        limits = sorted({math.ceil(peak_mib * f) for f in PROGRAMS[name][1]})
        record["programs"][name]["limits_mib"] = limits
        tasks += [(name, limit, k) for limit in limits for k in range(1, args.repeats + 1)]
    save()
    random.Random(0).shuffle(tasks)

    # 2. The ladders, shuffled, several runs at a time on the one GPU.
    def one(task: tuple[str, int, int]) -> None:
        name, limit, k = task
        if time.monotonic() - started > args.deadline_s:
            return
        tag = f"{limit}-{k}"
        result = memtrace_run(f"{limit}MiB", os.path.join(work, name, "ladder", tag),
                              os.path.join(args.programs_dir, f"{name}.py"),
                              os.path.join(work, name, f"ladder-{tag}.log"))
        outcome = result["results"][0]["status"] if result["results"] else "no-result"
        entry = {"limit_mib": limit, "repeat": k, "outcome": outcome, "code": result["code"],
                 "fraction": result["fraction"], "other_pool": result["other_pool"],
                 "seconds": result["seconds"], "stats": result["results"][0]["stats"] if result["results"] else {}}
        with lock:
            record["programs"][name]["ladder"].append(entry)
        save()
        say(f"{name} {limit} MiB #{k}: {outcome} ({result['seconds']} s)")

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(one, tasks))
    for name in record["programs"]:
        ladder = record["programs"][name]["ladder"]
        for limit in record["programs"][name].get("limits_mib", []):
            outcomes = [e["outcome"] for e in ladder if e["limit_mib"] == limit]
            say(f"{name} {limit} MiB: {outcomes.count('ok')} of {len(outcomes)} ran ({sorted(set(outcomes))})")

    # 3. Pack: the ample recordings and logs first, then one ladder run of each limit and outcome, then the rest.
    record["packed"] = pack(record, args.programs, work, os.path.join(args.out, "recordings.tar.gz"),
                            int(args.pack_mib * MIB))
    save()
    say(f"packed {len(record['packed'])} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
