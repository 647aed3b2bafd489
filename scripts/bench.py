"""Benchmark memtrace's readers against protobuf's text parser and TensorFlow's own tools.

``python scripts/bench.py`` makes the traces under ``bench-out/`` (gitignored), runs every tool
as a separate process, and prints one markdown table: wall time, MB/s of the input file and
peak RSS (the child's ``ru_maxrss``, or where larger and it reads with several processes the
summed PSS of them all, sampled), with each tool's time as a multiple of ``memtrace peak`` on the same
trace, followed by the issue's goals, each PASS or FAIL.

- ``ptb20.pbtxt``: the PTB seed repeated 20 times (29 MB; one valid StepStats), and
  ``ptb20.pb``, the same message in binary.
- ``resnet1g.pbtxt``: 1 GB of ResNet-50 training steps from ``scripts/make_trace.py``, and
  ``resnet1g.pb``, the same steps in binary (both skipped with ``--quick``).

Tools: ``memtrace peak`` (text, binary; on the 1 GB binary also ``summary``, ``ops``, ``frag``,
``timeline``, ``check``, ``report`` and ``export``), ``google.protobuf.text_format.Parse``
alone (timed inside its process, without start-up or reading), and where TensorFlow is installed its client
timeline (``Timeline(step_stats).generate_chrome_trace_format(show_memory=True)``) and tfprof
(``profile(cmd="op")``), both given the message parsed from binary so as not to charge them
protobuf's text parser. ``--doc docs/performance.md`` also writes the table into that page
between its ``bench:begin``/``bench:end`` markers, with the machine it ran on.

``--batch N`` measures ``memtrace batch`` instead: N traces (the bundled fixtures copied in turn
into ``bench-out/batch/``) analysed on 2 local worker processes, against one process that runs
``memtrace peak`` on each of them in turn, and prints the speed-up and the memory of each.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}

PARSE_ALONE = """
import sys, time
from google.protobuf import text_format
from memtrace.read._proto import tf_trace_pb2 as pb
text = open(sys.argv[1], encoding="utf-8").read()
start = time.perf_counter()
text_format.Parse(text, pb.StepStats())
print("WORK", time.perf_counter() - start)
"""

LOAD_ALONE = """
import sys, time
import memtrace
start = time.perf_counter()
memtrace.load(sys.argv[1])
print("WORK", time.perf_counter() - start)
"""

TF_TIMELINE = """
import sys, time
from tensorflow.core.framework import step_stats_pb2
from tensorflow.python.client import timeline
start = time.perf_counter()
step_stats = step_stats_pb2.StepStats.FromString(open(sys.argv[1], "rb").read())
timeline.Timeline(step_stats).generate_chrome_trace_format(show_memory=True)
print("WORK", time.perf_counter() - start)
"""

TF_PROF = """
import sys, time
import tensorflow as tf
from tensorflow.core.framework import step_stats_pb2
from tensorflow.core.protobuf import config_pb2
start = time.perf_counter()
run_meta = config_pb2.RunMetadata()
run_meta.step_stats.CopyFrom(step_stats_pb2.StepStats.FromString(open(sys.argv[1], "rb").read()))
builder = tf.compat.v1.profiler.ProfileOptionBuilder
options = builder(builder.time_and_memory(min_micros=0, min_bytes=0)).with_empty_output().build()
tf.compat.v1.profiler.profile(graph=tf.Graph(), run_meta=run_meta, cmd="op", options=options)
print("WORK", time.perf_counter() - start)
"""


@dataclass
class Run:
    tool: str
    trace: Path
    wall_s: float  # the whole process, best of the repeats
    work_s: float | None  # the timed work alone, where the tool reports it
    rss_mb: float  # peak resident memory of the process (and its children), largest of the repeats
    ok: bool = True


# A minimal process (no site, no imports) starts each command and reports its wall time and peak
# RSS: a child's ru_maxrss also counts the memory of the process it was forked from. For a
# command that reads with several processes ("tree"), which are all resident at once, the
# launcher also samples every 20 ms the summed PSS of the command and its descendants (each
# page shared between them counted once, in shares) and reports the larger figure.
LAUNCHER = """
import os, sys, threading, time

def tree_pss(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            total = next(int(line.split()[1]) for line in f if line.startswith("Pss:"))
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                total += sum(tree_pss(int(child)) for child in f.read().split())
        return total
    except (OSError, ValueError, StopIteration):
        return 0

start = time.perf_counter()
pid = os.posix_spawn(sys.argv[2], sys.argv[2:], os.environ)
peak = [0]
def sample():
    while True:
        peak[0] = max(peak[0], tree_pss(pid))
        time.sleep(0.02)
if sys.argv[1] == "tree":
    threading.Thread(target=sample, daemon=True).start()
_, status, usage = os.wait4(pid, 0)
rss_kib = max(usage.ru_maxrss, peak[0])
sys.stderr.write(f"LAUNCH {time.perf_counter() - start} {rss_kib} {os.waitstatus_to_exitcode(status)}\\n")
"""


def _run(argv: list[str], repeats: int) -> tuple[float, float | None, float, bool]:
    """Best wall time, best reported work time, largest peak RSS (MB) of ``argv`` run ``repeats`` times."""
    walls, works, rss, ok = [], [], 0.0, True
    processes = "tree" if "-j" in argv or "batch" in argv else "one"
    for _ in range(repeats):
        done = subprocess.run([sys.executable, "-S", "-c", LAUNCHER, processes, *argv], capture_output=True, env=ENV, cwd=ROOT,
                              check=False)
        launched = re.search(rb"^LAUNCH ([0-9.e-]+) (\d+) (-?\d+)$", done.stderr, re.MULTILINE)
        if launched is None:
            raise SystemExit(f"could not run {argv}: {done.stderr.decode(errors='replace')}")
        walls.append(float(launched.group(1)))
        rss = max(rss, int(launched.group(2)) / 1024)  # KiB on Linux
        ok &= int(launched.group(3)) == 0
        found = re.search(rb"^WORK ([0-9.e-]+)$", done.stdout, re.MULTILINE)
        if found:
            works.append(float(found.group(1)))
    return min(walls), min(works) if works else None, rss, ok


def _tensorflow_installed() -> bool:
    return subprocess.run([sys.executable, "-c", "import tensorflow"], env=ENV, capture_output=True, check=False).returncode == 0


def make_traces(out: Path, big: bool) -> dict[str, Path]:
    """The benchmark's traces, made once (kept in ``out`` for the next run)."""
    out.mkdir(parents=True, exist_ok=True)
    traces = {"ptb20.pbtxt": out / "ptb20.pbtxt", "ptb20.pb": out / "ptb20.pb"}
    if not traces["ptb20.pbtxt"].exists():
        # The seed's text is one StepStats of dev_stats fields: 20 copies in a row are one too.
        traces["ptb20.pbtxt"].write_bytes((FIXTURES / "ptb_lstm_train_gpu.pbtxt").read_bytes() * 20)
    if not traces["ptb20.pb"].exists():
        subprocess.run([sys.executable, "-c", (
            "import sys; from google.protobuf import text_format; from memtrace.read._proto import tf_trace_pb2 as pb; "
            "open(sys.argv[2], 'wb').write(text_format.Parse(open(sys.argv[1]).read(), pb.StepStats()).SerializeToString())"
        ), str(traces["ptb20.pbtxt"]), str(traces["ptb20.pb"])], env=ENV, check=True)
    if big:
        for name, form in (("resnet1g.pbtxt", []), ("resnet1g.pb", ["--binary"])):
            traces[name] = out / name
            if not traces[name].exists():
                subprocess.run([sys.executable, str(ROOT / "scripts" / "make_trace.py"), str(traces[name]),
                                "--size", "1GB", *form], env=ENV, check=True, stdout=subprocess.DEVNULL)
    return traces


def measure(traces: dict[str, Path], repeats: int, tensorflow: bool) -> list[Run]:
    memtrace = [sys.executable, "-m", "memtrace", "peak"]
    load = [sys.executable, "-c", LOAD_ALONE]
    plan: list[tuple[str, str, list[str], int]] = [
        ("memtrace peak", "ptb20.pbtxt", [*memtrace, str(traces["ptb20.pbtxt"])], repeats),
        ("memtrace peak", "ptb20.pb", [*memtrace, str(traces["ptb20.pb"])], repeats),
        ("memtrace.load (reader alone)", "ptb20.pbtxt", [*load, str(traces["ptb20.pbtxt"])], repeats),
        ("memtrace.load (reader alone)", "ptb20.pb", [*load, str(traces["ptb20.pb"])], repeats),
        ("protobuf text_format.Parse", "ptb20.pbtxt", [sys.executable, "-c", PARSE_ALONE, str(traces["ptb20.pbtxt"])], repeats),
    ]
    if tensorflow:
        plan += [
            ("TF client timeline (show_memory)", "ptb20.pb", [sys.executable, "-c", TF_TIMELINE, str(traces["ptb20.pb"])], 1),
            ("TF tfprof (cmd=op)", "ptb20.pb", [sys.executable, "-c", TF_PROF, str(traces["ptb20.pb"])], 1),
        ]
    plan.append(("memtrace peak -j 2", "ptb20.pbtxt", [*memtrace, str(traces["ptb20.pbtxt"]), "-j", "2"], repeats))
    for name in ("resnet1g.pbtxt", "resnet1g.pb"):
        if name in traces:
            plan.append(("memtrace peak", name, [*memtrace, str(traces[name])], 1))
            plan.append(("memtrace.load (reader alone)", name, [*load, str(traces[name])], 1))
            plan.append(("memtrace peak -j 2", name, [*memtrace, str(traces[name]), "-j", "2"], 1))
    if "resnet1g.pb" in traces:  # the other analyses at scale (from binary, so that reading counts little)
        big = str(traces["resnet1g.pb"])
        out = traces["resnet1g.pb"].parent
        extra = {"check": ["--max-peak", "GPU_0_bfc=1GiB"], "report": ["-o", str(out / "report.html")],
                 "export": ["-o", str(out / "export.json")]}
        for command in ("summary", "ops", "frag", "timeline", "check", "report", "export"):
            plan.append((f"memtrace {command}", "resnet1g.pb", [*memtrace[:3], command, big, *extra.get(command, [])], 1))
    plan += [
        ("memtrace --help", "-", [*memtrace[:3], "--help"], max(repeats, 5)),
        ('python -c "import numpy"', "-", [sys.executable, "-c", "import numpy"], max(repeats, 5)),
    ]
    runs = []
    for tool, name, argv, count in plan:
        wall, work, rss, ok = _run(argv, count)
        runs.append(Run(tool, traces.get(name, Path("-")), wall, work, rss, ok))
        print(f"  {tool} on {name}: {wall:.2f} s", file=sys.stderr)
    return runs


def _mb(path: Path) -> float:
    return path.stat().st_size / 1e6 if path.name != "-" else 0.0


def table(runs: list[Run]) -> str:
    reference = {r.trace: r.wall_s for r in runs if r.tool == "memtrace peak"}  # the ratios' denominators
    text_time = next(r.wall_s for r in runs if r.tool == "memtrace peak" and r.trace.name == "ptb20.pbtxt")
    lines = [
        "| tool | trace | MB | wall s | work s | MB/s | peak RSS MB | time / memtrace peak |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        size = _mb(r.trace)
        timed = r.work_s if r.work_s is not None else r.wall_s
        base = reference.get(r.trace, text_time if r.trace.name.startswith("ptb20") else None)
        ratio = f"{timed / base:.1f}x" if base and r.trace.name != "-" else ""
        lines.append(
            f"| {r.tool}{'' if r.ok else ' (FAILED)'} | {r.trace.name} | {size:.0f} | {r.wall_s:.2f} | "
            f"{'' if r.work_s is None else f'{r.work_s:.2f}'} | {f'{size / timed:.1f}' if size else ''} | {r.rss_mb:.0f} | {ratio} |"
        )
    return "\n".join(lines)


def goals(runs: list[Run]) -> list[str]:
    def find(tool: str, trace: str) -> Run | None:
        return next((r for r in runs if r.tool == tool and r.trace.name == trace), None)

    text, binary = find("memtrace peak", "ptb20.pbtxt"), find("memtrace peak", "ptb20.pb")
    parse = find("protobuf text_format.Parse", "ptb20.pbtxt")
    helps, numpy = find("memtrace --help", "-"), find('python -c "import numpy"', "-")
    assert text and binary and parse and helps and numpy and parse.work_s is not None
    checks = [
        ((f"`memtrace peak` on the 29 MB text, whole process, at least 10x faster than `text_format.Parse` alone: "
         f"{parse.work_s / text.wall_s:.2f}x"), parse.work_s >= 10 * text.wall_s),
        (f"29 MB: binary at least 2x faster than its text form through `memtrace peak`: {text.wall_s / binary.wall_s:.2f}x",
         text.wall_s >= 2 * binary.wall_s),
        (f"`memtrace --help` under 1.5x `import numpy`: {helps.wall_s / numpy.wall_s:.2f}x", helps.wall_s < 1.5 * numpy.wall_s),
    ]
    big, big_load = find("memtrace peak", "resnet1g.pbtxt"), find("memtrace.load (reader alone)", "resnet1g.pbtxt")
    big_binary = find("memtrace peak", "resnet1g.pb")
    if big is not None and big_binary is not None:
        checks.insert(2, ((f"1 GB: binary at least 2x faster than its text form through `memtrace peak`: "
                           f"{big.wall_s / big_binary.wall_s:.2f}x"), big.wall_s >= 2 * big_binary.wall_s and big_binary.ok))
    if big is not None and big_load is not None:
        size_mb = _mb(big.trace)
        checks.append(((f"1 GB text through `memtrace peak`: peak RSS at most half the file: {big.rss_mb:.0f} MB of "
                       f"{size_mb:.0f} MB ({big.rss_mb / size_mb:.2f}; the reader alone: {big_load.rss_mb:.0f} MB, "
                       f"{big_load.rss_mb / size_mb:.2f})"), big.rss_mb <= size_mb / 2 and big.ok))
    return [f"- {'PASS' if ok else 'FAIL'}: {what}" for what, ok in checks]


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        found = re.search(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.MULTILINE)
        cpu = found.group(1) if found else cpu
    except OSError:
        pass
    memory = ""
    try:
        kib = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))  # type: ignore[union-attr]
        memory = f", {kib / 2**20:.0f} GiB RAM"
    except (OSError, AttributeError):
        pass
    versions = subprocess.run([sys.executable, "-c", (
        "import numpy, google.protobuf as p; from google.protobuf.internal import api_implementation as a; "
        "print(f'numpy {numpy.__version__}, protobuf {p.__version__} ({a.Type()})')")], env=ENV, capture_output=True, check=False,
        text=True).stdout.strip()
    return f"{cpu}, {os.cpu_count()} cores{memory}; Python {platform.python_version()}, {versions}"


def write_doc(doc: Path, block: str) -> None:
    text = doc.read_text()
    begin, end = "<!-- bench:begin -->", "<!-- bench:end -->"
    if begin not in text or end not in text:
        raise SystemExit(f"{doc}: no {begin} ... {end} markers")
    head, rest = text.split(begin, 1)
    doc.write_text(head + begin + "\n" + block + "\n" + end + rest.split(end, 1)[1])


SEQUENTIAL = """
import subprocess, sys
for path in sys.argv[1:]:
    subprocess.run([sys.executable, "-m", "memtrace", "peak", path], stdout=subprocess.DEVNULL, check=True)
"""


LOOP_ONE_PROCESS = """
import sys
from memtrace.many.batch import analyse_trace, tables
tables([analyse_trace(path) for path in sys.argv[1:]])
"""


def bench_batch(out: Path, count: int, repeats: int) -> str:
    """``memtrace batch`` on ``count`` fixture copies with 2 workers, against one process analysing them in turn (the
    rows batch makes, the same tables), and against ``memtrace peak`` on each in turn."""
    import shutil

    sources = sorted(p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix in (".pbtxt", ".pb", ".gz"))
    folder = out / "batch"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    copies = []
    for number in range(count):
        source = sources[number % len(sources)]
        copies.append(folder / f"{number:04d}-{source.name}")
        shutil.copyfile(source, copies[-1])
    total_mb = sum(p.stat().st_size for p in copies) / 1e6
    batch_wall, _, batch_rss, batch_ok = _run(
        [sys.executable, "-m", "memtrace", "batch", str(folder), "-o", str(out / "batch-tables"), "--workers", "2"],
        repeats)
    loop_wall, _, loop_rss, loop_ok = _run([sys.executable, "-c", LOOP_ONE_PROCESS, *map(str, copies)], repeats)
    one_wall, _, one_rss, one_ok = _run([sys.executable, "-c", SEQUENTIAL, *map(str, copies)], repeats)
    lines = [
        f"{count} traces ({total_mb:.1f} MB, the {len(sources)} bundled fixtures in turn), best of {repeats}:", "",
        "| run | wall s | traces/s | peak memory MB |", "|---|---:|---:|---:|",
        f"| `memtrace batch --workers 2` | {batch_wall:.1f} | {count / batch_wall:.1f} | {batch_rss:.0f} (summed PSS) |",
        (f"| one process, each trace in turn (`analyse_trace`, `tables`) | {loop_wall:.1f} | {count / loop_wall:.1f} | "
         f"{loop_rss:.0f} |"),
        f"| `memtrace peak` on each in turn | {one_wall:.1f} | {count / one_wall:.1f} | {one_rss:.0f} (largest process) |",
        "", (f"Speed-up of batch: {one_wall / batch_wall:.2f}x over `memtrace peak` on each, {loop_wall / batch_wall:.2f}x "
             f"over one process. All runs exit 0 or 1 as expected: {'yes' if one_ok and batch_ok and loop_ok else 'no'}."),
    ]
    return "\n".join(lines)


XPROF_ALONE = """
import sys, time
from xprof.convert import raw_to_tool_data
start = time.perf_counter()
raw_to_tool_data.xspace_to_tool_data([sys.argv[1]], "memory_profile", {})
print("WORK", time.perf_counter() - start)
"""


def measure_xplane(out: Path, repeats: int) -> list[str]:
    """Time ``memtrace peak`` on a 100 MB profile against xprof's memory_profile conversion; the report's lines."""
    profile = out / "xspace100m.xplane.pb"
    if not profile.exists():
        subprocess.run([sys.executable, str(ROOT / "scripts" / "make_trace.py"), str(profile), "--xplane", "--size", "100MB"],
                       env=ENV, check=True)
    runs = [Run("memtrace peak", profile, *_run([sys.executable, "-m", "memtrace", "peak", str(profile)], repeats))]
    has_xprof = subprocess.run([sys.executable, "-c", "import xprof.convert.raw_to_tool_data"], env=ENV,
                               capture_output=True, check=False).returncode == 0
    if has_xprof:
        runs.append(Run("xprof memory_profile", profile, *_run([sys.executable, "-c", XPROF_ALONE, str(profile)], repeats)))
    mb = _mb(profile)
    lines = ["| tool | trace | MB | wall s | work s | peak RSS MB |", "|---|---|---:|---:|---:|---:|"]
    lines += [f"| {r.tool}{'' if r.ok else ' (FAILED)'} | {r.trace.name} | {mb:.0f} | {r.wall_s:.2f} | "
              f"{'' if r.work_s is None else f'{r.work_s:.2f}'} | {r.rss_mb:.0f} |" for r in runs]
    lines.append("")
    mine = runs[0]
    if has_xprof and runs[1].work_s:
        ratio = runs[1].work_s / mine.wall_s
        for target in (3, 5):
            verdict = "PASS" if ratio >= target else "FAIL"
            lines.append(f"- {verdict}: `memtrace peak` (whole process, {mine.wall_s:.2f} s) at least {target}x faster than "
                         f"xprof's conversion alone ({runs[1].work_s:.2f} s): {ratio:.2f}x")
    else:
        lines.append("- (xprof is not installed: no comparison)")
    verdict = "PASS" if mine.rss_mb <= mb / 2 else "FAIL"
    lines.append(f"- {verdict}: peak RSS of `memtrace peak` ({mine.rss_mb:.0f} MB) at most half the file ({mb / 2:.0f} MB)")
    return lines


# The same launcher, also reporting the child's CPU time (user + system): on a machine shared with other work, wall
# time says little, and the CPU time of paired runs is what compares two versions.
CPU_LAUNCHER = """
import os, sys, time
start = time.perf_counter()
pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ)
_, status, usage = os.wait4(pid, 0)
sys.stderr.write(f"LAUNCH {time.perf_counter() - start} {usage.ru_maxrss} {os.waitstatus_to_exitcode(status)} "
                 f"{usage.ru_utime + usage.ru_stime}\\n")
"""


@dataclass
class CpuRun:
    what: str
    version: str  # "now", or "before" (the checkout given with --compare)
    cpu_s: float  # least of the repeats
    rss_mb: float  # largest of the repeats
    exit_code: int


def _cpu(argv: list[str], root: Path, cwd: Path) -> tuple[float, float, int]:
    """CPU seconds, peak RSS (MB) and exit code of ``argv`` run with memtrace from ``root``."""
    env = {**ENV, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-S", "-c", CPU_LAUNCHER, *argv], capture_output=True, env=env, cwd=cwd,
                          check=False)
    found = re.search(rb"^LAUNCH [0-9.e-]+ (\d+) (-?\d+) ([0-9.e-]+)$", done.stderr, re.MULTILINE)
    if found is None:
        raise SystemExit(f"could not run {argv}: {done.stderr.decode(errors='replace')}")
    return float(found.group(3)), int(found.group(1)) / 1024, int(found.group(2))


def fit_traces(out: Path) -> dict[str, Path]:
    """The traces ``--fit`` measures: the 100 MB profile of ``--xplane``, a Keras LSTM profile repeated 69 times
    (517,000 events, from the allocator's birth, with growth), and a pair of recordings at batch 16 and 64 for
    ``fit --vs`` (each of the fixtures repeated 13 times: 93,000 events)."""
    import gzip

    out.mkdir(parents=True, exist_ok=True)
    traces = {"xspace100m": out / "xspace100m.xplane.pb", "lstm69": out / "lstm69.xplane.pb",
              "lstm13_b16": out / "lstm13_b16.xplane.pb", "lstm13_b64": out / "lstm13_b64.xplane.pb"}
    if not traces["xspace100m"].exists():
        subprocess.run([sys.executable, str(ROOT / "scripts" / "make_trace.py"), str(traces["xspace100m"]), "--xplane",
                        "--size", "100MB"], env=ENV, check=True)
    for name, source, copies in (("lstm69", FIXTURES / "fit" / "lstm.xplane.pb.gz", 69),
                                 ("lstm13_b16", FIXTURES / "batches" / "lstm_b16.xplane.pb.gz", 13),
                                 ("lstm13_b64", FIXTURES / "batches" / "lstm_b64.xplane.pb.gz", 13)):
        if not traces[name].exists():
            traces[name].write_bytes(gzip.decompress(source.read_bytes()) * copies)  # one XSpace: its planes repeated
    return traces


def measure_fit(out: Path, repeats: int, compare: Path | None) -> list[str]:
    """CPU time and peak RSS of ``fit`` against ``peak`` on the same traces, paired with ``compare``'s where given."""
    traces = fit_traces(out)
    memtrace = [sys.executable, "-m", "memtrace"]
    p, k, s, l = (str(traces[n]) for n in ("xspace100m", "lstm69", "lstm13_b16", "lstm13_b64"))
    plan = [
        ("peak xspace100m", [*memtrace, "peak", p]),
        ("fit xspace100m --limit 600MiB", [*memtrace, "fit", p, "--limit", "600MiB"]),
        ("fit xspace100m --limit 600MiB --no-smallest", [*memtrace, "fit", p, "--limit", "600MiB", "--no-smallest"]),
        ("fit xspace100m --no-alternatives", [*memtrace, "fit", p, "--no-alternatives"]),
        ("fit xspace100m", [*memtrace, "fit", p]),
        ("peak lstm69", [*memtrace, "peak", k]),
        ("fit lstm69", [*memtrace, "fit", k]),
        ("fit lstm69 --limit 4GiB --no-smallest", [*memtrace, "fit", k, "--limit", "4GiB", "--no-smallest"]),
        ("fit lstm69 --orders 0", [*memtrace, "fit", k, "--orders", "0"]),
        ("peak lstm13_b16", [*memtrace, "peak", s]),
        ("peak lstm13_b64", [*memtrace, "peak", l]),
        ("fit lstm13_b16 --vs lstm13_b64", [*memtrace, "fit", s, "--vs", l]),
        ("fit lstm13_b16 --vs lstm13_b64 --orders 0", [*memtrace, "fit", s, "--vs", l, "--orders", "0"]),
        ("fit lstm13_b16 --vs lstm13_b64 --batch 256 --limit 4GiB",
         [*memtrace, "fit", s, "--vs", l, "--batch", "256", "--limit", "4GiB"]),
    ]
    versions = [("now", ROOT)] + ([("before", compare)] if compare is not None else [])
    runs = []
    for what, argv in plan:
        found: dict[str, list[tuple[float, float, int]]] = {name: [] for name, _ in versions}
        for _ in range(repeats):  # paired: each version in turn, so both see the same load
            for name, root in versions:
                found[name].append(_cpu(argv, root, out))
        for name, _ in versions:
            cpu, rss, code = min(r[0] for r in found[name]), max(r[1] for r in found[name]), found[name][-1][2]
            runs.append(CpuRun(what, name, cpu, rss, code))
            print(f"  {what} ({name}): {cpu:.2f} s of CPU", file=sys.stderr)
    return fit_table(runs)


def fit_table(runs: list[CpuRun]) -> list[str]:
    """The table of ``--fit`` (each command, now and before side by side) and the issue's goals, PASS or FAIL."""
    def cpu(what: str, version: str = "now") -> float:
        return next(r.cpu_s for r in runs if r.what == what and r.version == version)

    before = any(r.version == "before" for r in runs)
    lines = ["| command | CPU s now | peak RSS MB now | exit |" + (" CPU s before | peak RSS MB before | now / before |"
                                                                   if before else ""),
             "|---|---:|---:|---:|" + ("---:|---:|---:|" if before else "")]
    for r in runs:
        if r.version != "now":
            continue
        row = f"| `memtrace {r.what}` | {r.cpu_s:.2f} | {r.rss_mb:.0f} | {r.exit_code} |"
        if before:
            b = next(x for x in runs if x.what == r.what and x.version == "before")
            row += f" {b.cpu_s:.2f} | {b.rss_mb:.0f} | {r.cpu_s / b.cpu_s:.2f}x |"
        lines.append(row)
    fit, peak = cpu("fit xspace100m"), cpu("peak xspace100m")
    fit_k, peak_k = cpu("fit lstm69"), cpu("peak lstm69")
    pair = cpu("peak lstm13_b16") + cpu("peak lstm13_b64")
    vs = cpu("fit lstm13_b16 --vs lstm13_b64")
    checks = [
        (f"default `fit` at most 1.5x `peak` on the 100 MB profile: {fit / peak:.2f}x", fit <= 1.5 * peak),
        (f"default `fit` at most 1.5x `peak` on the LSTM profile repeated 69 times: {fit_k / peak_k:.2f}x",
         fit_k <= 1.5 * peak_k),
        (f"`fit --vs` with its tables at most 3x `peak` on the two recordings (both): {vs / pair:.2f}x", vs <= 3 * pair),
    ]
    for plain, banded in (("fit lstm69 --orders 0", "fit lstm69"),
                          ("fit lstm13_b16 --vs lstm13_b64 --orders 0", "fit lstm13_b16 --vs lstm13_b64")):
        ratio = cpu(banded) / cpu(plain)
        checks.append((f"the band at most 3x a plain fit: `{banded}` against `{plain}`: {ratio:.2f}x", ratio <= 3))
    return [*lines, "", *[f"- {'PASS' if ok else 'FAIL'}: {what}" for what, ok in checks]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench-out", help="where the traces go (default bench-out/)")
    parser.add_argument("--quick", action="store_true", help="skip the 1 GB trace")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each measurement on the 29 MB traces (memtrace and text_format.Parse); the best counts")
    parser.add_argument("--doc", type=Path, help="also write the results into this page (docs/performance.md)")
    parser.add_argument("--batch", type=int, metavar="N", help="measure memtrace batch on N traces instead")
    parser.add_argument("--xplane", action="store_true", help="measure a 100 MB TF2 profile against xprof instead")
    parser.add_argument("--fit", action="store_true", help="measure fit against peak (CPU time) instead")
    parser.add_argument("--compare", type=Path, metavar="ROOT",
                        help="with --fit: also run the memtrace of this checkout, paired run by run")
    args = parser.parse_args(argv)
    if args.fit:
        for root in (ROOT, args.compare):
            if root is not None:
                subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "memtrace")], env=ENV, check=True)
        print(f"Machine: {machine()}. Run on {time.strftime('%Y-%m-%d')} with `python scripts/bench.py --fit"
              f"{' --compare ROOT' if args.compare else ''}` (least CPU time of {min(args.repeats, 3)} paired runs).\n")
        print("\n".join(measure_fit(args.out, min(args.repeats, 3), args.compare)))
        return 0
    if args.batch is not None:
        print(machine())
        print(bench_batch(args.out, args.batch, min(args.repeats, 2)))
        return 0
    if args.xplane:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "memtrace")], env=ENV, check=True)
        print(f"Machine: {machine()}. Run on {time.strftime('%Y-%m-%d')} with `python scripts/bench.py --xplane`.\n")
        print("\n".join(measure_xplane(args.out, min(args.repeats, 3))))
        return 0
    # Time memtrace as an installed package runs, from compiled bytecode, even where the
    # environment says not to write it (PYTHONDONTWRITEBYTECODE): compiling every module on
    # every start would add its cost to each small run.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "memtrace")], env=ENV, check=True)
    traces = make_traces(args.out, big=not args.quick)
    runs = measure(traces, args.repeats, _tensorflow_installed())
    block = "\n".join([
        (f"Machine: {machine()}. Run on {time.strftime('%Y-%m-%d')} with `python scripts/bench.py"
        f"{' --quick' if args.quick else ''}`."), "", table(runs), "", *goals(runs),
    ])
    print(block)
    if args.doc is not None:
        write_doc(args.doc, block)
    return 0 if all(r.ok for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
