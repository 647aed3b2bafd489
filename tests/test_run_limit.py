"""``memtrace run --limit SIZE | --card SIZE``: a script recorded under the limit one asks about.

XLA compiles a jit program for the memory its allocator has, so ``memtrace fit`` answers for another
limit only from a recording made under it. GIVEN a limit or a card WHEN memtrace runs a JAX or a
TensorFlow script THEN the child gets the setting its runtime reads (JAX: the memory fraction of the
GPU, under the name the environment already uses; TF: the CPU BFC limit and each GPU's memory_limit,
in whole MiB), TensorFlow's own events show the limit it got, and nonsense is refused in one line.
No GPU here: JAX's side is checked with a stand-in ``jax`` package that records what it was given.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import memtrace
from memtrace.allocator.defaults import xla_pool_bytes
from memtrace.commands import run as run_command
from memtrace.errors import UsageError

from .conftest import ROOT
from .test_run import memtrace_run

MIB = 1 << 20
H200_BYTES = 143_771 * MIB  # the recorded H200's memory


def args(limit: str | None = None, card: str | None = None, cpu_bfc: bool = False) -> argparse.Namespace:
    return argparse.Namespace(limit=limit, card=card, cpu_bfc=cpu_bfc, compute_capability="8.0")


def test_the_runtime_is_told_from_the_scripts_imports(tmp_path: Path) -> None:
    cases = {"import jax\n": "jax", "from flax import linen\n": "jax", "import tensorflow as tf\n": "tensorflow",
             "import jax\nimport tensorflow as tf\n": "tensorflow", "print(1)\n": "tensorflow",
             "# import jax\nx = 'import jax'\n": "tensorflow", "import os, jax.numpy as jnp\n": "jax",
             "def f(:\n": "tensorflow"}
    for number, (source, runtime) in enumerate(cases.items()):
        script = tmp_path / f"s{number}.py"
        script.write_text(source)
        assert run_command.script_runtime(str(script)) == runtime, source


def test_jax_gets_the_memory_fraction_that_makes_xlas_pool_the_limit() -> None:
    updates, said = run_command.limit_environment(args("930MiB"), "jax", {}, gpu_memory_bytes=H200_BYTES)
    assert set(updates) == {"XLA_PYTHON_CLIENT_MEM_FRACTION", "MEMTRACE_XLA_POOL_BYTES"}
    # XLA's pool: the GPU's memory x the fraction (as a 32-bit float), rounded up to a whole 2 MiB (measured on an
    # H200: tests/test_gpu_heldout.py); the fraction aims half a step below the pool
    fraction = float(updates["XLA_PYTHON_CLIENT_MEM_FRACTION"])
    assert xla_pool_bytes(H200_BYTES, fraction) == 930 * MIB == int(updates["MEMTRACE_XLA_POOL_BYTES"])
    assert abs(H200_BYTES * fraction - (930 * MIB - MIB)) < 1
    assert "975,175,680 bytes" in said and f"{H200_BYTES:,}" in said and "steps" not in said
    # a limit between two steps: the largest step within it, said
    updates, said = run_command.limit_environment(args("931MiB"), "jax", {}, gpu_memory_bytes=H200_BYTES)
    assert xla_pool_bytes(H200_BYTES, float(updates["XLA_PYTHON_CLIENT_MEM_FRACTION"])) == 930 * MIB
    assert "a limit of 930 MiB (975,175,680 bytes) (XLA makes its pool in steps of 2 MiB: the largest within 931 MiB)" \
        in said
    # a card: XLA's default 0.75 of it, rounded up to its step as XLA rounds it (12 GB is not a whole step)
    updates, _ = run_command.limit_environment(args(card="16GB"), "jax", {}, gpu_memory_bytes=H200_BYTES)
    pool = xla_pool_bytes(H200_BYTES, float(updates["XLA_PYTHON_CLIENT_MEM_FRACTION"]))
    assert pool == 5723 * 2 * MIB == 12_002_000_896 and pool - 2 * MIB < 12_000_000_000 < pool
    # the newer name where the environment already uses it (JAX refuses both)
    updates, _ = run_command.limit_environment(args("1GiB"), "jax", {"XLA_CLIENT_MEM_FRACTION": "0.9"},
                                               gpu_memory_bytes=H200_BYTES)
    assert set(updates) == {"XLA_CLIENT_MEM_FRACTION", "MEMTRACE_XLA_POOL_BYTES"}


def test_tensorflow_gets_whole_mib_for_its_cpu_allocator_and_each_gpu() -> None:
    updates, said = run_command.limit_environment(args("1GB"), "tensorflow", {})
    assert updates == {"TF_CPU_BFC_MEM_LIMIT_IN_MB": "953", "MEMTRACE_GPU_MEMORY_LIMIT_MB": "953"}
    assert "rounded down" in said
    # a 16 GB card: TF's limit is the card less its reserve (1,536 MiB at compute capability 8)
    updates, _ = run_command.limit_environment(args(card="16GB"), "tensorflow", {})
    assert updates == {"MEMTRACE_GPU_MEMORY_LIMIT_MB": str((16_000_000_000 - 1536 * MIB) // MIB)}


def test_nonsense_is_refused() -> None:
    for given, runtime, env, words in (
            (args("100KiB"), "tensorflow", {}, "under 1 MiB"),
            (args("-5MiB"), "tensorflow", {}, "must not be negative"),
            (args("lots"), "tensorflow", {}, "not a size"),
            (args(card="16GB", cpu_bfc=True), "tensorflow", {}, "--card is a GPU's memory"),
            (args(card="16GB"), "tensorflow", {"TF_CPU_ALLOCATOR_USE_BFC": "true"}, "--card is a GPU's memory"),
            (args("200GiB"), "jax", {}, "more than this GPU's"),
            (args("1.5MiB"), "jax", {}, "less than its smallest pool, 2 MiB"),
            (args("1GiB"), "jax", {"XLA_CLIENT_MEM_FRACTION": "0.5", "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.5"},
             "which JAX refuses")):
        with pytest.raises(UsageError, match=words):
            run_command.limit_environment(given, runtime, env, gpu_memory_bytes=H200_BYTES)


def test_without_a_cuda_driver_jax_limits_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import ctypes

    def no_driver(name: str) -> None:
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", no_driver)
    with pytest.raises(UsageError, match="no CUDA driver here"):
        run_command.cuda_memory_bytes()


def test_the_command_refuses_in_one_line(tmp_path: Path) -> None:
    script = tmp_path / "step.py"
    script.write_text("import jax\n")
    for argv, words in ((["--cpu-bfc"], "--cpu-bfc is TensorFlow's CPU allocator"),
                        (["--runtime", "torch"], "--runtime must be auto, jax or tensorflow"),
                        (["--limit", "1GiB", "--card", "16GB"], "not allowed with argument")):
        done = subprocess.run([sys.executable, "-m", "memtrace", "run", *argv, str(script)], capture_output=True,
                              text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60, check=False)
        assert done.returncode == 2 and words in done.stderr, done.stderr
        assert "argument" in words or done.stderr.count("\n") == 1


# A stand-in for JAX: its profiler writes an empty profile and notes the memory settings it saw; its device makes
# its pool as an XLA that truncates the GPU's memory x the fraction would (not JAX 0.11.2's 2 MiB steps).
_FAKE_JAX = '''
import json, os
class _Device:
    def memory_stats(self):
        return {"bytes_limit": int(int(os.environ["FAKE_GPU_BYTES"]) * float(os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"]))}
def devices():
    return [_Device()]
class profiler:
    @staticmethod
    def start_trace(logdir, **options):
        os.makedirs(os.path.join(logdir, "plugins", "profile", "run"), exist_ok=True)
        seen = {k: v for k, v in os.environ.items() if k.startswith("XLA_")}
        with open(os.path.join(logdir, "seen.json"), "w") as out:
            json.dump({"env": seen, "options": sorted(options)}, out)
    @staticmethod
    def stop_trace():
        open(os.path.join(os.environ["FAKE_JAX_LOGDIR"], "plugins", "profile", "run", "h.xplane.pb"), "wb").close()
'''


def test_a_jax_script_runs_under_jaxs_profiler_with_the_fraction(tmp_path: Path) -> None:
    (tmp_path / "fake" / "jax").mkdir(parents=True)
    (tmp_path / "fake" / "jax" / "__init__.py").write_text(_FAKE_JAX)
    script = tmp_path / "step.py"
    script.write_text("import sys, jax\nprint('ran', sys.argv[1:])\nsys.exit(3)\n")
    logdir = tmp_path / "log"
    code = ("import sys\nimport memtrace.commands.run as r\nr.cuda_memory_bytes = lambda: " + str(H200_BYTES) + "\n"
            "from memtrace.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path / 'fake'}{os.pathsep}{ROOT}", "FAKE_JAX_LOGDIR": str(logdir),
           "FAKE_GPU_BYTES": str(H200_BYTES)}
    env.pop("XLA_CLIENT_MEM_FRACTION", None)
    env.pop("XLA_PYTHON_CLIENT_MEM_FRACTION", None)
    done = subprocess.run([sys.executable, "-c", code, "run", "--limit", "930MiB", "-o", str(logdir), str(script), "x"],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 3, done.stderr  # the script's own exit code
    assert done.stdout.strip() == "ran ['x']"
    seen = json.loads((logdir / "seen.json").read_text())
    fraction = float(seen["env"]["XLA_PYTHON_CLIENT_MEM_FRACTION"])
    assert xla_pool_bytes(H200_BYTES, fraction) == 930 * MIB and "XLA_CLIENT_MEM_FRACTION" not in seen["env"]
    assert "memtrace: running under a limit of 930 MiB" in done.stderr
    # this stand-in makes another pool than JAX 0.11.2 would, and the child says so, after the script ran
    made = int(H200_BYTES * fraction)
    assert f"memtrace: XLA made a pool of {made:,} bytes, not the {930 * MIB:,} asked for" in done.stderr
    assert "memtrace: profiled " in done.stderr and "read it with: memtrace fit" in done.stderr
    # the script failed (exit code 3) after writing its profile: what the profile cannot show is said
    assert (f"memtrace: the script ended (exit code 3): where it ran out of memory, the profile holds no event for the "
            f"request that failed, and memtrace fit {logdir} answers for the requests before it") in done.stderr


def test_tensorflows_own_events_show_the_limit_it_was_given(tmp_path: Path) -> None:
    # TF's CPU BFC allocator under --limit 3MiB: its events' bytes_available + bytes_allocated is the limit it got
    done = memtrace_run(tmp_path, "import tensorflow as tf\nx = tf.ones((256, 256))\n",
                        options=("--cpu-bfc", "--limit", "3MiB"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "memtrace: running under a limit of 3 MiB: TF_CPU_BFC_MEM_LIMIT_IN_MB=3" in done.stderr
    assert memtrace.load(tmp_path / "log").recorded_limit("bfc_cpu_allocator_for_gpu") == 3 * MIB
