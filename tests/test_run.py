"""``memtrace run`` and ``memtrace.tensorflow.recording``: a whole program under the profiler, from the allocator's birth.

GIVEN a tiny TensorFlow script WHEN memtrace runs it THEN the script sees its own argv, its exit
code comes back, and the profile holds every allocation from the allocator's first one (checked
against the allocator's own counters), also when the script raises or runs out of memory.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import memtrace

from .conftest import ROOT, as_unprivileged, under_ci
from .run_scripts import run_stubbed, stub_tensorflow
from .xspace_events import memory_events as profile_events

BFC = "bfc_cpu_allocator_for_gpu"


def require_tensorflow() -> None:
    """Skip where TensorFlow is missing, except under MEMTRACE_CI, where the check must run."""
    if under_ci():
        import tensorflow  # noqa: F401  (an ImportError here fails the test, as it must in CI)
    else:
        pytest.importorskip("tensorflow")


def memtrace_run(tmp_path: Path, script: str, *args: str, env: dict[str, str] | None = None,
                 options: tuple[str, ...] = ("--cpu-bfc",)) -> subprocess.CompletedProcess[str]:
    require_tensorflow()
    (tmp_path / "script.py").write_text(script)
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    environment.pop("TF_CPU_ALLOCATOR_USE_BFC", None)
    return subprocess.run([sys.executable, "-m", "memtrace", "run", *options, "-o", str(tmp_path / "log"),
                           str(tmp_path / "script.py"), *args], capture_output=True, text=True, cwd=tmp_path,
                          env=environment, timeout=300, check=False)


def memory_events(logdir: Path) -> list[dict[str, object]]:
    """Every MemoryAllocation/MemoryDeallocation event of the run's profile, in time order, read with protobuf."""
    (path,) = (logdir / "plugins" / "profile").glob("*/*.xplane.pb")
    return profile_events(path)


TINY = """
import json, sys
import tensorflow as tf
x = tf.ones((256, 256))
y = tf.matmul(x, x)
print(json.dumps({"argv": sys.argv[1:], "sum": float(tf.reduce_sum(y)),
                  "counters": tf.config.experimental.get_memory_info("CPU:0")}))
sys.exit(int(sys.argv[1]))
"""


def test_a_tiny_script_end_to_end(tmp_path: Path) -> None:
    import json

    done = memtrace_run(tmp_path, TINY, "3", "--flag")
    assert done.returncode == 3, done.stderr[-2000:]  # the script's own exit code
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["argv"] == ["3", "--flag"] and found["sum"] == 256 * 256 * 256
    assert "memtrace: profiled " in done.stderr and "read it with: memtrace summary" in done.stderr
    events = memory_events(tmp_path / "log")
    # From the allocator's birth: its first chunk is all it has in use.
    assert events[0]["kind"] == "MemoryAllocation" and events[0]["allocator_name"] == BFC
    assert events[0]["bytes_allocated"] == events[0]["allocation_bytes"] > 0
    # The profile's peak is the allocator's own peak counter since its birth, and memtrace reads the same.
    assert max(e["bytes_allocated"] for e in events) == found["counters"]["peak"]  # type: ignore[type-var]
    peak = memtrace.load(tmp_path / "log").peak(BFC)
    assert peak.peak_bytes == found["counters"]["peak"] >= 2 * 256 * 256 * 4


def test_a_script_that_raises_keeps_its_profile_and_exit_code(tmp_path: Path) -> None:
    done = memtrace_run(tmp_path, "import tensorflow as tf\nx = tf.ones((512, 512))\nraise ValueError('broken')\n")
    assert done.returncode == 1 and "ValueError: broken" in done.stderr  # Python's own traceback and exit code
    events = memory_events(tmp_path / "log")
    # The ones tensor, made before the raise: 1 MiB asked of the 2 MiB region after a 256-byte chunk; the rest
    # (2 MiB - 256) is under twice the request, so BFC hands it out unsplit.
    (ones,) = [e for e in events if e.get("tf_op") == "Fill"]
    assert (ones["requested_bytes"], ones["allocation_bytes"]) == (1 << 20, (2 << 20) - 256)
    assert "memtrace: profiled " in done.stderr


def test_an_out_of_memory_error_keeps_everything_up_to_the_failure(tmp_path: Path) -> None:
    # Under a 1 MiB limit a 512 KiB tensor fits and the next 2 MiB one does not (TF retries ~10 s on CPU).
    script = ("import tensorflow as tf\nkept = tf.ones((128, 1024))\nprint('made', flush=True)\n"
              "more = tf.ones((512, 1024))\nprint('never')\n")
    done = memtrace_run(tmp_path, script, env={"TF_CPU_BFC_MEM_LIMIT_IN_MB": "1"})
    assert done.returncode == 1 and "ResourceExhaustedError" in done.stderr, done.stderr[-2000:]
    assert done.stdout.split() == ["made"]
    events = memory_events(tmp_path / "log")
    assert [e["requested_bytes"] for e in events if e.get("tf_op") == "Fill"] == [128 * 1024 * 4]  # none for the failure
    assert "memtrace: profiled " in done.stderr


def test_without_cpu_bfc_the_cpu_allocator_is_tensorflows_default(tmp_path: Path) -> None:
    done = memtrace_run(tmp_path, "import tensorflow as tf\nx = tf.ones((512, 512))\n", options=())
    assert done.returncode == 0 and "memtrace: profiled " in done.stderr
    assert {e["allocator_name"] for e in memory_events(tmp_path / "log")} == {"mklcpu"}  # not the BFC allocator


def test_a_missing_script_is_bad_usage(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "memtrace", "run", str(tmp_path / "nowhere.py")], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60, check=False)
    assert done.returncode == 2 and done.stderr == f"memtrace: error: {tmp_path / 'nowhere.py'}: no such script\n"


def test_run_keeps_tensorflow_out_of_the_memtrace_process() -> None:
    code = ("import sys\nfrom memtrace.cli import main\n"
            "assert main(['run', '--help']) == 0\nprint('tensorflow' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60, check=False)
    assert done.returncode == 0 and done.stdout.strip().endswith("False") and "SCRIPT" in done.stdout


def test_a_script_killed_by_a_signal_is_said_and_its_code_passed_on(tmp_path: Path) -> None:
    done = memtrace_run(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    assert done.returncode == 128 + 9
    assert "memtrace: the script was killed by signal 9 (SIGKILL) after " in done.stderr
    assert "before a profile was written to" in done.stderr and not (tmp_path / "log" / "plugins").exists()


# -- the logdir and the script's end, with a stand-in for TensorFlow's profiler (issue 36) ----------------


@pytest.fixture()
def stubbed(tmp_path: Path) -> dict[str, str]:
    from .memory_profiles import write_profile

    profile = write_profile(tmp_path / "made.xplane.pb", [(True, 1000, 1024, 1 << 40, 1024, 0.0, "a")])
    return stub_tensorflow(tmp_path / "stub", profile)


def test_a_logdir_that_is_a_file_is_refused_before_the_script_runs(tmp_path: Path, stubbed: dict[str, str]) -> None:
    script = tmp_path / "script.py"
    script.write_text("open('ran', 'w').write('yes')\n")
    (tmp_path / "taken").write_text("mine\n")
    refusals = [("taken", "taken: exists and is not a directory"),
                ("script.py", "script.py: exists and is not a directory"),
                ("taken/sub", "taken/sub: the profile cannot be written there")]
    for logdir, says in refusals:
        done = run_stubbed(tmp_path, stubbed, "run", "-o", logdir, "script.py")
        # one line, exit 2, the script never started, nothing of the user's changed
        assert (done.returncode, done.stdout) == (2, "") and done.stderr.count("\n") == 1, logdir
        assert done.stderr.startswith(f"memtrace: error: {says}"), done.stderr
        assert not (tmp_path / "ran").exists()
    assert (tmp_path / "taken").read_text() == "mine\n" and script.read_text() == "open('ran', 'w').write('yes')\n"


def test_a_logdir_that_cannot_be_written_is_refused_before_the_script_runs(tmp_path: Path,
                                                                           stubbed: dict[str, str]) -> None:
    (tmp_path / "script.py").write_text("open('ran', 'w').write('yes')\n")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    argv = as_unprivileged([sys.executable, "-m", "memtrace", "run", "-o", "locked/log", "script.py"])
    done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env=stubbed, timeout=60, check=False)
    assert (done.returncode, done.stdout) == (2, "") and done.stderr.count("\n") == 1
    assert done.stderr.startswith("memtrace: error: locked/log: the profile cannot be written there: Permission denied")
    assert not (tmp_path / "ran").exists()


def test_a_script_that_changes_directory_profiles_into_the_logdir_given(tmp_path: Path,
                                                                        stubbed: dict[str, str]) -> None:
    # GIVEN a relative logdir and a script that moves to another directory before it ends
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "script.py").write_text("import os, sys\nos.chdir('elsewhere')\nsys.exit(4)\n")
    done = run_stubbed(tmp_path, stubbed, "run", "-o", "rel_log", "script.py")
    # THEN the profile is in rel_log where memtrace was started, and the command the line suggests reads it
    assert done.returncode == 4 and "before a profile was written" not in done.stderr
    assert (tmp_path / "rel_log" / "plugins" / "profile").is_dir() and not (tmp_path / "elsewhere" / "rel_log").exists()
    suggested = done.stderr.split("read it with: ")[1].splitlines()[0].split()
    assert suggested[:2] == ["memtrace", "summary"]
    read = run_stubbed(tmp_path / "elsewhere", stubbed, *suggested[1:])
    assert read.returncode == 0 and "bfc_cpu_allocator_for_gpu" in read.stdout


def test_a_script_that_changes_directory_under_tensorflow(tmp_path: Path) -> None:
    # the same with TensorFlow's own profiler and a relative -o
    require_tensorflow()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "script.py").write_text("import os\nimport tensorflow as tf\nx = tf.ones((64, 64))\nos.chdir('elsewhere')\n")
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2"}
    environment.pop("TF_CPU_ALLOCATOR_USE_BFC", None)
    done = subprocess.run([sys.executable, "-m", "memtrace", "run", "--cpu-bfc", "-o", "log", "script.py"],
                          capture_output=True, text=True, cwd=tmp_path, env=environment, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert memory_events(tmp_path / "log") and not (tmp_path / "elsewhere" / "log").exists()
    suggested = done.stderr.split("read it with: ")[1].splitlines()[0].split()
    read = subprocess.run([sys.executable, "-m", *suggested], capture_output=True, text=True, cwd=tmp_path / "elsewhere",
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120, check=False)
    assert read.returncode == 0 and BFC in read.stdout


@pytest.mark.parametrize("offset", [1, 5])
def test_a_script_killed_by_a_real_time_signal_is_said(tmp_path: Path, stubbed: dict[str, str], offset: int) -> None:
    import signal

    (tmp_path / "script.py").write_text(f"import os, signal\nos.kill(os.getpid(), signal.SIGRTMIN + {offset})\n")
    done = run_stubbed(tmp_path, stubbed, "run", "-o", "log", "script.py")
    number = signal.SIGRTMIN + offset
    assert done.returncode == 128 + number and "Traceback" not in done.stderr
    assert f"memtrace: the script was killed by signal {number} (SIGRTMIN+{offset}) after " in done.stderr


_CONTEXT_SCRIPT = """
import json, os, sys
import tensorflow as tf
import memtrace.tensorflow as mtf
with mtf.recording(sys.argv[1]) as rec:  # TensorFlow's default CPU allocator: its few events
    x = tf.ones((256, 256))
sizes = sum(os.path.getsize(f) for f in rec.files)
tf.constant(1.0) + 1
try:
    with mtf.recording(sys.argv[1] + "-late", cpu_bfc=True):
        pass
except mtf.MemtraceError as error:
    late = str(error)
print(json.dumps({"from_birth": rec.from_birth, "seconds": rec.seconds, "files": rec.files, "size": rec.size_bytes,
                  "sizes": sizes, "late": late}))
"""


def test_the_context_manager_says_how_long_and_how_large_and_refuses_a_late_cpu_bfc(tmp_path: Path) -> None:
    import json

    require_tensorflow()
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2"}
    environment.pop("TF_CPU_ALLOCATOR_USE_BFC", None)
    done = subprocess.run([sys.executable, "-c", _CONTEXT_SCRIPT, str(tmp_path / "log")], capture_output=True, text=True,
                          env=environment, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["from_birth"] and found["seconds"] > 0 and found["size"] == found["sizes"] > 0
    (path,) = found["files"]
    assert path.startswith(str(tmp_path / "log" / "plugins" / "profile")) and path.endswith(".xplane.pb")
    assert f"memtrace: profiled {found['seconds']:.1f} s into {path} (" in done.stderr
    assert found["late"].startswith("TensorFlow's runtime has started already") and "TF_CPU_ALLOCATOR_USE_BFC" in found["late"]
