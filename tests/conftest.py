"""Shared paths and helpers for the tests."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
TINY = FIXTURES / "tiny"
ALEXNET = FIXTURES / "alexnet_train_gpu.pbtxt"
PTB = FIXTURES / "ptb_lstm_train_gpu.pbtxt"
RECORDED = sorted((FIXTURES / "recorded").glob("*.pbtxt"))
OOM = FIXTURES / "oom"  # out-of-memory dumps (logs, MemoryDump protobufs), not step traces


def trace_files(*suffixes: str) -> list[Path]:
    """Every bundled step trace whose name ends in one of ``suffixes`` (the OOM dumps and logs left out)."""
    return sorted(p for p in FIXTURES.rglob("*") if p.name.endswith(suffixes) and OOM not in p.parents
                  and not p.name.endswith((".memdump.pb", ".log")))
# Every real trace we bundle, text form: the seeds and the traces recorded with TensorFlow.
REAL_TRACES = [ALEXNET, PTB, *RECORDED]


# -- independent checkers: skipped where missing, a failure under CI ------------------------------


def under_ci() -> bool:
    """Whether this is CI: ``.ci/run`` exports MEMTRACE_CI=1, most CI services set CI=true."""
    return any(os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no") for name in ("MEMTRACE_CI", "CI"))


def unavailable(what: str) -> NoReturn:
    """A check's independent checker is missing: skip it here, fail it under CI, where .ci/run installs every one.

    One rule for every checker (TensorFlow, tensorboard, xprof, pyarrow, Dask, Graphviz, Chromium,
    setpriv): a check that cannot run must not pass in silence where it is meant to run.
    """
    if under_ci():
        pytest.fail(f"{what}; under CI (MEMTRACE_CI or CI set) this check must run, not skip", pytrace=False)
    pytest.skip(what, allow_module_level=True)


def require(module: str) -> ModuleType:
    """``module`` imported, or :func:`unavailable` (any ImportError, as an extra that is absent or broken raises)."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        unavailable(f"{module} cannot be imported ({type(error).__name__}: {error})")


def require_program(*names: str) -> str:
    """The path of the first of ``names`` on PATH, or :func:`unavailable`."""
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    unavailable(f"{' or '.join(names)} is not installed")


# setpriv runs a child as root without the capabilities that let root ignore file permissions.
WITHOUT_DAC_OVERRIDE = ["--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search"]


def as_unprivileged(argv: list[str]) -> list[str]:
    """``argv`` to run with file permissions enforced: as root, under setpriv without the override capabilities.

    CI runs as root, which reads and writes past any permission bits; a check of a permission error
    must still run there, so the child drops CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH first.
    """
    if os.geteuid() != 0:
        return argv
    setpriv = require_program("setpriv")
    probe = subprocess.run([setpriv, *WITHOUT_DAC_OVERRIDE, "true"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        unavailable(f"setpriv cannot drop root's capabilities here: {probe.stderr.strip()}")
    return [setpriv, *WITHOUT_DAC_OVERRIDE, *argv]


def tensorflow_protos():
    """TensorFlow's own generated classes, or :func:`unavailable` where TensorFlow is not installed."""
    require("tensorflow")
    from tensorflow.core.framework import graph_pb2, step_stats_pb2
    from tensorflow.core.protobuf import config_pb2

    return step_stats_pb2, config_pb2, graph_pb2


@pytest.fixture
def replays_as_a_command_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test replays as a fresh ``memtrace`` process would: in Python until its own replays pay for the compiled
    loop's start. Otherwise the loop a test checks depends on what ran before it (after a million rows replayed in
    Python, a process switches to the compiled loop), and a rule worked out by hand for the Python loop goes unchecked
    in a full run."""
    from memtrace.allocator import bfc

    monkeypatch.setattr(bfc, "_python_rows", [0])
