"""Profiles recorded into temporary directories: removed when the process ends, unless a failed assertion cites one.

``memtrace.tensorflow.profile`` without a ``logdir`` records into such a directory. A test that
fails points at the profile it checked (``memtrace.testing``'s messages name it), so that one is
kept for ``memtrace peak`` or ``memtrace report`` afterwards; the others go.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

_DIRECTORIES: dict[str, bool] = {}  # directory -> kept


def directory(prefix: str = "memtrace-profile-") -> str:
    """A new temporary directory, removed at exit unless :func:`keep` is called for a path inside it."""
    if not _DIRECTORIES:
        atexit.register(_remove_unkept)
    path = tempfile.mkdtemp(prefix=prefix)
    _DIRECTORIES[path] = False
    return path


def keep(path: str | os.PathLike[str]) -> str | None:
    """Keep the temporary directory holding ``path``; the directory, or None when ``path`` is in none."""
    name = os.path.abspath(os.fspath(path))
    for directory_ in _DIRECTORIES:
        if name == directory_ or name.startswith(directory_ + os.sep):
            _DIRECTORIES[directory_] = True
            return directory_
    return None


def _remove_unkept() -> None:
    for path, kept in _DIRECTORIES.items():
        if not kept:
            shutil.rmtree(path, ignore_errors=True)
