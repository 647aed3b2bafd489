"""``memtrace run`` without TensorFlow: a stand-in for its profiler, so that tests of what ``run`` itself does
(exit codes, signals, the logdir) start a plain Python child, in a tenth of a second rather than ten.

The stand-in's ``profiler.experimental.start(logdir)`` remembers the logdir as given and ``stop()`` writes a
profile under it then, relative to the working directory of that moment, as TensorFlow's does; the profile
is a copy of ``MEMTRACE_STUB_PROFILE``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .conftest import ROOT

STUB = '''\
import os
import shutil


class _Experimental:
    logdir = None

    def start(self, logdir):
        _Experimental.logdir = logdir

    def stop(self):
        run = os.path.join(_Experimental.logdir, "plugins", "profile", "2026_01_01_00_00_00")
        os.makedirs(run, exist_ok=True)
        shutil.copyfile(os.environ["MEMTRACE_STUB_PROFILE"], os.path.join(run, "host.xplane.pb"))


class _Profiler:
    experimental = _Experimental()


profiler = _Profiler()
'''


def stub_tensorflow(where: Path, profile: Path) -> dict[str, str]:
    """Write the stand-in under ``where``; the environment that makes a child import it as ``tensorflow``."""
    (where / "tensorflow").mkdir(parents=True, exist_ok=True)
    (where / "tensorflow" / "__init__.py").write_text(STUB)
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(where)]),
                   "MEMTRACE_STUB_PROFILE": str(profile)}
    environment.pop("TF_CPU_ALLOCATOR_USE_BFC", None)
    return environment


def run_stubbed(cwd: Path, environment: dict[str, str], *argv: str, timeout: int = 60) -> subprocess.CompletedProcess[str]:
    """``python -m memtrace ARGV...`` in ``cwd`` with the stand-in."""
    return subprocess.run([sys.executable, "-m", "memtrace", *argv], capture_output=True, text=True, cwd=cwd,
                          env=environment, timeout=timeout, check=False)
