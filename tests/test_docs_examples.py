"""The documented examples run, and the docs show them as they are."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest

from .conftest import ROOT, require

EXAMPLE = ROOT / "docs" / "examples" / "test_memory_budget.py"
KERAS_EXAMPLE = ROOT / "docs" / "examples" / "test_keras_memory.py"


@pytest.mark.parametrize("example", [EXAMPLE, KERAS_EXAMPLE], ids=lambda p: p.name)
def test_testing_page_shows_the_example_verbatim(example) -> None:  # type: ignore[no-untyped-def]
    page = (ROOT / "docs" / "testing.md").read_text()
    blocks = re.findall(rf"<!-- docs/examples/{example.name} -->\n```python\n(.*?)```", page, re.DOTALL)
    assert blocks == [example.read_text()]


def test_testing_page_leads_with_the_keras_route() -> None:
    page = (ROOT / "docs" / "testing.md").read_text()
    assert page.index(KERAS_EXAMPLE.name) < page.index(EXAMPLE.name)
    assert page.index("profile(model.train_on_batch") < page.index("tf.compat.v1.Session")


@pytest.mark.parametrize("example", [EXAMPLE, KERAS_EXAMPLE], ids=lambda p: p.name)
def test_memory_budget_example_passes_under_pytest(example) -> None:  # type: ignore[no-untyped-def]
    """In a pytest of its own, with memtrace's plugin loaded as its entry point loads it."""
    require("tensorflow")
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    env.pop("TF_CPU_ALLOCATOR_USE_BFC", None)
    env.pop("TF_ENABLE_ONEDNN_OPTS", None)  # the documented route as a user runs it: the plugin turns oneDNN off
    for name in ("TF_NUM_INTEROP_THREADS", "TF_NUM_INTRAOP_THREADS"):
        env.pop(name, None)
    # The Keras example as its docstring says to run it: with the plugin's stable route turned on.
    stable = ["-o", "memtrace_stable_tensorflow=true"] if example == KERAS_EXAMPLE else []
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "memtrace.pytest_plugin", "-p", "no:cacheprovider", "-q", *stable,
         str(example)],
        capture_output=True, text=True, check=False, cwd=ROOT, env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^3 passed", done.stdout, re.MULTILINE), done.stdout


COMMAND_BLOCK = re.compile(r"```\n\$ memtrace ([^\n]*)\n(.*?)```", re.DOTALL)


def documented_commands() -> list[tuple[str, str, str]]:
    found = []
    for page in sorted((ROOT / "docs").glob("*.md")):
        for match in COMMAND_BLOCK.finditer(page.read_text()):
            if " -o " not in f" {match.group(1)} ":
                found.append((page.name, match.group(1), match.group(2)))
    return found


@pytest.mark.parametrize(("page", "command", "shown"), documented_commands(), ids=lambda v: str(v)[:60])
def test_documented_command_output_is_what_the_command_writes(
    page: str, command: str, shown: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The docs show each command as it prints in a 100-column terminal, from the repository root.
    from memtrace.cli import main

    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.chdir(ROOT)
    main(shlex.split(command))
    assert capsys.readouterr().out == shown, f"{page}: regenerate the output of 'memtrace {command}'"
