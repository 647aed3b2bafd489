"""The suite's one rule for independent checkers (tests/conftest.py): skipped where missing, failed under CI.

.ci/run exports MEMTRACE_CI=1 and most CI services set CI=true; either makes a missing checker
(TensorFlow, tensorboard, xprof, pyarrow, Dask, Graphviz, Chromium, setpriv) a failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import as_unprivileged, require, require_program, under_ci

MISSING_MODULE = "memtrace_tests_no_such_module"
MISSING_PROGRAM = "memtrace-tests-no-such-program"


@pytest.fixture()
def local(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv("MEMTRACE_CI", raising=False)
    monkeypatch.delenv("CI", raising=False)
    return monkeypatch


@pytest.mark.parametrize(("name", "value", "ci"), [
    ("MEMTRACE_CI", "1", True), ("CI", "true", True), ("CI", "1", True), ("CI", "false", False), ("CI", "0", False),
    ("MEMTRACE_CI", "", False),
])
def test_ci_is_memtrace_ci_or_ci(local: pytest.MonkeyPatch, name: str, value: str, ci: bool) -> None:
    assert not under_ci()
    local.setenv(name, value)
    assert under_ci() is ci


def test_a_missing_module_skips_locally(local: pytest.MonkeyPatch) -> None:
    with pytest.raises(pytest.skip.Exception, match=f"{MISSING_MODULE} cannot be imported"):
        require(MISSING_MODULE)


@pytest.mark.parametrize(("name", "value"), [("MEMTRACE_CI", "1"), ("CI", "true")])
def test_a_missing_module_or_program_fails_under_ci(local: pytest.MonkeyPatch, name: str, value: str) -> None:
    local.setenv(name, value)
    with pytest.raises(pytest.fail.Exception, match=f"{MISSING_MODULE} cannot be imported.*must run, not skip"):
        require(MISSING_MODULE)
    with pytest.raises(pytest.fail.Exception, match=f"{MISSING_PROGRAM} is not installed"):
        require_program(MISSING_PROGRAM)


def test_a_module_that_raises_importerror_counts_as_missing(local: pytest.MonkeyPatch) -> None:
    # As an extra that is there but broken: ImportError, not only ModuleNotFoundError.
    local.setitem(sys.modules, MISSING_MODULE, None)  # import raises ImportError
    local.setenv("MEMTRACE_CI", "1")
    with pytest.raises(pytest.fail.Exception):
        require(MISSING_MODULE)


def test_present_ones_are_returned(local: pytest.MonkeyPatch) -> None:
    local.setenv("MEMTRACE_CI", "1")
    assert require("json") is sys.modules["json"]
    assert require_program(MISSING_PROGRAM, "sh") == subprocess.run(
        ["sh", "-c", "command -v sh"], capture_output=True, text=True, check=True).stdout.strip()


def test_a_missing_module_at_module_level_fails_collection_under_ci(tmp_path: Path) -> None:
    # test_batch.py needs pyarrow at module level: there a missing one must fail the run, not skip the file.
    (tmp_path / "test_needs_it.py").write_text(
        f"from tests.conftest import require\nrequire({MISSING_MODULE!r})\n\ndef test_x():\n    pass\n")
    base = {k: v for k, v in os.environ.items() if k not in ("CI", "MEMTRACE_CI")}
    base["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
            str(tmp_path / "test_needs_it.py")]
    skipped = subprocess.run(argv, capture_output=True, text=True, check=False, env=base, cwd=tmp_path)
    assert skipped.returncode == 5 and "1 skipped" in skipped.stdout, skipped.stdout  # 5: no tests ran
    failed = subprocess.run(argv, capture_output=True, text=True, check=False, env={**base, "MEMTRACE_CI": "1"},
                            cwd=tmp_path)
    assert failed.returncode == 2 and "1 error" in failed.stdout, failed.stdout
    assert "must run, not skip" in failed.stdout


def test_setpriv_takes_away_roots_reading_past_permissions(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.write_text("secret")
    locked.chmod(0)
    done = subprocess.run(as_unprivileged(["cat", str(locked)]), capture_output=True, text=True, check=False)
    assert done.returncode == 1 and "Permission denied" in done.stderr and done.stdout == ""
