"""The benchmark's helpers: the generated trace is valid, deterministic and self-consistent."""

from __future__ import annotations

import importlib.util
import io
import sys
from pathlib import Path
from types import ModuleType

import memtrace

from .conftest import ROOT
from .fastpaths import fast, reference, same


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_generated_trace_is_deterministic_and_reads_identically(tmp_path: Path) -> None:
    make_trace = _script("make_trace")
    first, second = io.BytesIO(), io.BytesIO()
    assert make_trace.write(first, 4_000_000) == make_trace.write(second, 4_000_000) == 2
    assert first.getvalue() == second.getvalue()
    path = tmp_path / "r.pbtxt"
    path.write_bytes(first.getvalue())
    trace = fast(path)
    assert trace is not None and same(trace, reference(path))
    assert len(trace.nodes) == 2 * (2467 + 617)  # every node on the GPU, every fourth on stream:all



def test_generated_binary_holds_the_same_steps_as_the_text(tmp_path: Path) -> None:
    make_trace = _script("make_trace")
    text, binary = tmp_path / "r.pbtxt", tmp_path / "r.pb"
    with open(text, "wb") as out:
        assert make_trace.write(out, 4_000_000) == 2
    with open(binary, "wb") as out:
        assert make_trace.write(out, 4_000_000, binary=True) == 2
    assert binary.stat().st_size < text.stat().st_size / 2
    from_binary = fast(binary)
    assert from_binary is not None and from_binary.source_format == "binary"
    assert same(from_binary, reference(binary))
    assert from_binary.same_content(fast(text))  # type: ignore[arg-type]


def test_generated_trace_snapshots_agree_with_its_records(tmp_path: Path) -> None:
    make_trace = _script("make_trace")
    path = tmp_path / "r.pbtxt"
    with open(path, "wb") as out:
        make_trace.write(out, 1)
    peak = memtrace.load(path).peak("GPU_0_bfc")
    # A 100 MiB baseline, and every allocator_bytes_in_use snapshot equal to it plus the replay.
    assert peak.baseline_bytes == 100 << 20
    assert peak.reconciliation.matched == peak.reconciliation.snapshots == 617
    assert peak.reconciliation.max_abs_error_bytes == 0
    assert peak.live_bytes_total == peak.peak_delta_bytes


def test_bench_table_and_goals_from_runs() -> None:
    bench = _script("bench")
    ptb, binary, none = Path("bench-out/ptb20.pbtxt"), Path("bench-out/ptb20.pb"), Path("-")
    runs = [
        bench.Run("memtrace peak", ptb, 0.5, None, 120.0),
        bench.Run("memtrace peak", binary, 0.2, None, 110.0),
        bench.Run("protobuf text_format.Parse", ptb, 5.6, 5.5, 150.0),
        bench.Run("memtrace --help", none, 0.03, None, 12.0),
        bench.Run('python -c "import numpy"', none, 0.08, None, 30.0),
    ]
    sizes = {ptb: 29_000_000, binary: 11_000_000}
    bench._mb = lambda path: sizes.get(path, 0) / 1e6
    lines = bench.table(runs).splitlines()
    assert lines[4].startswith("| protobuf text_format.Parse | ptb20.pbtxt | 29 | 5.60 | 5.50 | 5.3 | 150 | 11.0x |")
    assert bench.goals(runs) == [
        "- PASS: `memtrace peak` on the 29 MB text, whole process, at least 10x faster than `text_format.Parse` alone: 11.00x",
        "- PASS: 29 MB: binary at least 2x faster than its text form through `memtrace peak`: 2.50x",
        "- PASS: `memtrace --help` under 1.5x `import numpy`: 0.38x",
    ]
    big, big_binary = Path("bench-out/resnet1g.pbtxt"), Path("bench-out/resnet1g.pb")
    sizes.update({big: 1_000_000_000, big_binary: 294_000_000})
    runs[1] = bench.Run("memtrace peak", binary, 0.3, None, 110.0)
    runs += [
        bench.Run("memtrace peak", big, 17.0, None, 430.0),
        bench.Run("memtrace.load (reader alone)", big, 16.0, 15.9, 320.0),
        bench.Run("memtrace peak", big_binary, 5.0, None, 450.0),
    ]
    assert bench.goals(runs) == [
        "- PASS: `memtrace peak` on the 29 MB text, whole process, at least 10x faster than `text_format.Parse` alone: 11.00x",
        "- FAIL: 29 MB: binary at least 2x faster than its text form through `memtrace peak`: 1.67x",
        "- PASS: 1 GB: binary at least 2x faster than its text form through `memtrace peak`: 3.40x",
        "- PASS: `memtrace --help` under 1.5x `import numpy`: 0.38x",
        ("- PASS: 1 GB text through `memtrace peak`: peak RSS at most half the file: 430 MB of 1000 MB (0.43; the reader "
         "alone: 320 MB, 0.32)"),
    ]


def test_bench_fit_table_pairs_versions_and_says_the_goals() -> None:
    bench = _script("bench")
    runs = []
    for what, now, before in (("peak xspace100m", 2.0, 2.1), ("fit xspace100m", 2.8, 26.0), ("peak lstm69", 7.0, 7.2),
                              ("fit lstm69", 11.0, 24.0), ("peak lstm13_b16", 1.5, 1.5), ("peak lstm13_b64", 1.5, 1.5),
                              ("fit lstm13_b16 --vs lstm13_b64", 9.5, 19.0), ("fit lstm69 --orders 0", 5.0, 6.0),
                              ("fit lstm13_b16 --vs lstm13_b64 --orders 0", 3.0, 4.0)):
        runs += [bench.CpuRun(what, "now", now, 200.0, 0), bench.CpuRun(what, "before", before, 300.0, 0)]
    lines = bench.fit_table(runs)
    assert lines[2] == "| `memtrace peak xspace100m` | 2.00 | 200 | 0 | 2.10 | 300 | 0.95x |"
    assert lines[3] == "| `memtrace fit xspace100m` | 2.80 | 200 | 0 | 26.00 | 300 | 0.11x |"
    assert lines[-5:] == [
        "- PASS: default `fit` at most 1.5x `peak` on the 100 MB profile: 1.40x",
        "- FAIL: default `fit` at most 1.5x `peak` on the LSTM profile repeated 69 times: 1.57x",
        "- FAIL: `fit --vs` with its tables at most 3x `peak` on the two recordings (both): 3.17x",
        "- PASS: the band at most 3x a plain fit: `fit lstm69` against `fit lstm69 --orders 0`: 2.20x",
        ("- FAIL: the band at most 3x a plain fit: `fit lstm13_b16 --vs lstm13_b64` against "
         "`fit lstm13_b16 --vs lstm13_b64 --orders 0`: 3.17x"),
    ]
