"""The red-team pass of issue 36 as a test: ``memtrace run`` on scripts that end every way a script ends.

Scripts exit with codes (0, 3, 255, 256, -1, a message), raise, leave with ``os._exit``, are killed by
signals (SIGKILL, SIGTERM, SIGHUP, SIGUSR1 and real-time ones, which have no name of their own), or
change their working directory first; the logdir is relative, a file that exists (the script itself
too), below a file, or fine. TensorFlow's profiler is the stand-in of ``tests/run_scripts.py``, so
each run is two plain Python processes (about 0.3 s): the fixed 16 runs take about 5 s
(MEMTRACE_FUZZ_SEED=N runs 16 drawn at random instead). Every run must end in the script's own exit
code (128 + N for a signal N), or 2 with exactly one line on stderr where the logdir cannot take a
profile (and then the script never starts); memtrace's own lines say what happened, no traceback
but the script's own, and the profile lands in the logdir given, relative to where memtrace started.
"""

from __future__ import annotations

import os
import random
import signal
from pathlib import Path

import pytest

from .memory_profiles import write_profile
from .run_scripts import run_stubbed, stub_tensorflow

SEED = os.environ.get("MEMTRACE_FUZZ_SEED")

# How a script ends: (the script's last lines, the exit code memtrace must give)
ENDINGS: dict[str, tuple[str, int]] = {
    "exits 0": ("pass\n", 0),
    "exits 3": ("sys.exit(3)\n", 3),
    "exits 255": ("sys.exit(255)\n", 255),
    "exits 256": ("sys.exit(256)\n", 0),  # the OS keeps 8 bits
    "exits -1": ("sys.exit(-1)\n", 255),
    "exits with a message": ("sys.exit('done badly')\n", 1),
    "raises": ("raise ValueError('broken')\n", 1),
    "os._exit 7": ("os._exit(7)\n", 7),
    "SIGKILL": ("os.kill(os.getpid(), signal.SIGKILL)\n", 128 + signal.SIGKILL),
    "SIGTERM": ("os.kill(os.getpid(), signal.SIGTERM)\n", 128 + signal.SIGTERM),  # the child turns it into an exit
    # (a shell started with nohup ignores SIGHUP, and its children inherit that: the script takes it back)
    "SIGHUP": ("signal.signal(signal.SIGHUP, signal.SIG_DFL)\nos.kill(os.getpid(), signal.SIGHUP)\n", 128 + signal.SIGHUP),
    "SIGUSR1": ("os.kill(os.getpid(), signal.SIGUSR1)\n", 128 + signal.SIGUSR1),
    "SIGRTMIN+1": ("os.kill(os.getpid(), signal.SIGRTMIN + 1)\n", 128 + signal.SIGRTMIN + 1),
    "SIGRTMAX": ("os.kill(os.getpid(), signal.SIGRTMAX)\n", 128 + signal.SIGRTMAX),
}
LOGDIRS = ["log", "deep/er/log", "{abs}/abslog", "script.py", "taken", "taken/below", "."]
MOVES = [False, True]
FIXED = [("exits 0", "log", True), ("exits 3", "deep/er/log", False), ("exits 256", "log", False),
         ("exits -1", "{abs}/abslog", True), ("exits with a message", "log", False), ("raises", "log", True),
         ("os._exit 7", "log", False), ("SIGKILL", "log", True), ("SIGTERM", "log", False), ("SIGHUP", "log", False),
         ("SIGRTMIN+1", "log", True), ("SIGRTMAX", "log", False), ("exits 0", "script.py", False),
         ("exits 3", "taken", False), ("exits 3", "taken/below", True), ("exits 0", ".", True)]


def _cases() -> list[tuple[str, str, bool]]:
    if SEED is None:
        return FIXED
    rng = random.Random(int(SEED))
    return [(rng.choice(sorted(ENDINGS)), rng.choice(LOGDIRS), rng.choice(MOVES)) for _ in range(len(FIXED))]


@pytest.fixture(scope="module")
def stubbed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    where = tmp_path_factory.mktemp("stub")
    profile = write_profile(where / "made.xplane.pb", [(True, 1000, 1024, 1 << 40, 1024, 0.0, "a")])
    return stub_tensorflow(where, profile)


@pytest.mark.parametrize(("ending", "logdir", "moves"), _cases(),
                         ids=[f"{e}-{d.replace('{abs}', 'abs')}-{'moves' if m else 'stays'}" for e, d, m in _cases()])
def test_run_keeps_the_promise_however_the_script_ends(tmp_path: Path, stubbed: dict[str, str], ending: str,
                                                       logdir: str, moves: bool) -> None:
    lines, wanted = ENDINGS[ending]
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "taken").write_text("mine\n")
    script = ("import os, signal, sys\nopen('started', 'w').close()\n" + ("os.chdir('elsewhere')\n" if moves else "")
              + lines)
    (tmp_path / "script.py").write_text(script)
    logdir = logdir.format(abs=tmp_path)
    done = run_stubbed(tmp_path, stubbed, "run", "-o", logdir, "script.py")
    ours = [line for line in done.stderr.splitlines() if line.startswith("memtrace")]
    refused = logdir in ("script.py", "taken", "taken/below")
    if refused:  # the logdir cannot take a profile: one line, exit 2, the script never started
        assert (done.returncode, done.stdout) == (2, "") and done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.startswith(f"memtrace: error: {logdir}: ")
        assert not (tmp_path / "started").exists() and (tmp_path / "taken").read_text() == "mine\n"
        assert (tmp_path / "script.py").read_text() == script
        return
    assert done.returncode == wanted, done.stderr
    assert "Traceback" not in done.stderr or ending == "raises", done.stderr
    where = (tmp_path / logdir).resolve()
    written = sorted(where.glob("plugins/profile/*/*.xplane.pb"))
    # a script that failed after its profile was written: a line says what such a profile cannot show (the
    # request that ran out of memory has no event), naming the logdir as the first line's command does
    failed = [line for line in ours if line.startswith("memtrace: the script ") and "where it ran out of memory" in line]
    assert len(failed) == (1 if wanted and written else 0), done.stderr
    if failed:
        assert f"memtrace oom LOG --trace {ours[0].split('read it with: memtrace summary ')[1]} replays" in failed[0]
    ours = [line for line in ours if line not in failed]
    assert len(ours) == 1, done.stderr  # what happened, in one line: profiled, or ended before a profile
    if ending.startswith("SIG") and ending != "SIGTERM":  # killed: no profile, and memtrace says which signal
        number = wanted - 128
        name = signal.Signals(number).name if number in signal.Signals._value2member_map_ else f"SIGRTMIN+{number - signal.SIGRTMIN}"
        assert ours[0].startswith(f"memtrace: the script was killed by signal {number} ({name}) after ")
        assert not written
    elif ending == "os._exit 7":  # gone without stopping the profiler: no profile, and memtrace says so
        assert ours[0].startswith("memtrace: the script ended (exit code 7) after ") and not written
    else:  # the profile is in the logdir given, relative to where memtrace started, and the line names it
        assert len(written) == 1 and not list((tmp_path / "elsewhere").rglob("*.xplane.pb")), done.stderr
        assert ours[0].startswith("memtrace: profiled ") and "read it with: memtrace summary " in ours[0]
        assert (tmp_path / ours[0].split("read it with: memtrace summary ")[1]).resolve() == where  # (it reads that)
