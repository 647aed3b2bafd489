"""The documented examples run, and the docs show them as they are."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from .conftest import ROOT

EXAMPLE = ROOT / "docs" / "examples" / "test_memory_budget.py"


def test_testing_page_shows_the_example_verbatim() -> None:
    page = (ROOT / "docs" / "testing.md").read_text()
    blocks = re.findall(r"<!-- docs/examples/test_memory_budget.py -->\n```python\n(.*?)```", page, re.DOTALL)
    assert blocks == [EXAMPLE.read_text()]


def test_memory_budget_example_passes_under_pytest() -> None:
    """In a pytest of its own, with memtrace's plugin loaded as its entry point loads it."""
    pytest.importorskip("tensorflow")
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "memtrace.pytest_plugin", "-p", "no:cacheprovider", "-q", str(EXAMPLE)],
        capture_output=True, text=True, check=False, cwd=ROOT, env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^3 passed", done.stdout, re.MULTILINE), done.stdout
