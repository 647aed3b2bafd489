"""Writing an output file without destroying anything the user has.

Every file memtrace writes (a report, a Parquet table) is replaced only whole: the new content
goes into a temporary file created exclusively beside its destination (``O_CREAT | O_EXCL``, so
never through a link someone planted there) and is renamed into place once complete; on any
error the temporary file is removed and the old file is as it was. Two outputs are refused
before anything is written:

- an output that is one of the inputs (the same file through any symlink or hard link; a
  directory given as input stands for every file reading it may read);
- an existing file that is write-protected: no write bit for anyone (``chmod 444``), or one the
  user may not write. Renaming needs only the directory's permission, so without this rule a
  report would replace a file its mode protects; as root, whom permissions do not stop, the
  mode bits alone decide.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator, Sequence
from typing import IO, Any

from .errors import UsageError


def refuse_input_as_output(path: str | None, inputs: Sequence[str | None]) -> None:
    """A UsageError where the output ``path`` is the same file as one of ``inputs`` (through any link)."""
    if path is None or path == "-":
        return
    try:
        output = os.stat(path)
    except OSError:
        return  # no such file yet (or not reachable): it cannot be an input
    if not stat.S_ISREG(output.st_mode):
        return  # /dev/stdout and friends: writing to them destroys nothing
    for source in inputs:
        if source is None or source == "-":
            continue
        try:
            same = os.path.samestat(output, os.stat(source))
        except OSError:
            continue
        if same:
            raise UsageError(f"{path}: is the input {source}; writing the output there would destroy it")


def refuse_protected(path: str) -> None:
    """A UsageError where ``path`` (through any links) is an existing regular file that is write-protected:
    no write bit for anyone, or (for a user permissions apply to) not writable by this user."""
    try:
        status = os.stat(path)
    except OSError:
        return  # none yet: nothing to protect
    if not stat.S_ISREG(status.st_mode):
        return
    if status.st_mode & 0o222 == 0 or not os.access(path, os.W_OK):
        raise UsageError(f"{path}: is write-protected (mode {stat.S_IMODE(status.st_mode):04o}); memtrace does not "
                         "replace it (make it writable, or write elsewhere)")


@contextlib.contextmanager
def replacing(target: str, binary: bool = False) -> Iterator[IO[Any]]:
    """A stream to a fresh temporary file beside ``target``, renamed over ``target`` when the block
    ends without error (removed when it does not). ``target`` itself is replaced, never followed
    (resolve a link first where its destination is meant)."""
    directory = os.path.dirname(target) or "."
    # mkstemp opens with O_CREAT | O_EXCL (and O_NOFOLLOW): a planted file or link is never written through.
    descriptor, temporary = tempfile.mkstemp(dir=directory, prefix=".memtrace-", suffix=".tmp")
    try:
        with (os.fdopen(descriptor, "wb") if binary else os.fdopen(descriptor, "w", encoding="utf-8")) as handle:
            yield handle
        # The temporary file is private (0600); the output gets the mode a new file would get,
        # or keeps the mode of the file it replaces.
        os.chmod(temporary, _mode_for(target))
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _mode_for(path: str) -> int:
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
