"""Helpers the tests share: running the command line as a user would."""

from __future__ import annotations

import pytest

from memtrace.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``memtrace ARGV...`` in this process: its exit code, stdout and stderr."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err
