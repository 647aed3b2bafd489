"""How a profile was recorded, where its recorder said: the configuration, and whether its peak is one to trust.

``memtrace.tensorflow.profile`` writes ``memtrace.recording.json`` beside the profile it records (in
the run directory, with ``HOST.xplane.pb``): TensorFlow's version, whether the CPU allocator was
the BFC allocator, whether oneDNN's kernels ran and whether anyone chose them, the inter-op and
intra-op threads, and ``unstable``: the reasons, in words, why the same model's peak varies from
run to run in that configuration (empty where it does not). ``memtrace.testing`` reads it and
refuses to compare or budget a recording with reasons: a regression test on it would pass or fail
by chance. A profile without the file (recorded otherwise, or copied without it) says nothing.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError

RECORDING_FILE = "memtrace.recording.json"
SCHEMA = "memtrace.recording/1"


@dataclass(frozen=True)
class Recording:
    """What the recorder said of a profile's configuration (``facts``), and why its peak varies (``unstable``)."""

    path: str  # the file it came from
    unstable: tuple[str, ...]
    facts: dict[str, Any]


def recording_file(trace_path: str) -> str | None:
    """The recording file that goes with a profile: beside it (a profile file), in it (a run directory), or
    in the newest run under it (a logdir, as :func:`memtrace.load` reads its newest run); None where there is none."""
    path = os.fspath(trace_path)
    if os.path.isfile(path):
        candidate = os.path.join(os.path.dirname(path), RECORDING_FILE)
        return candidate if os.path.isfile(candidate) else None
    if not os.path.isdir(path):
        return None
    if os.path.isfile(os.path.join(path, RECORDING_FILE)):
        return os.path.join(path, RECORDING_FILE)
    found = [directory for directory, _, names in os.walk(path) if RECORDING_FILE in names]
    # Run directories are named by the time they were taken (2024_01_31_12_00_00): the newest sorts last.
    return os.path.join(max(found, key=os.path.basename), RECORDING_FILE) if found else None


def load_recording(trace_path: str) -> Recording | None:
    """The recorder's word on a profile, or None where it left none; a file that is there but wrong is a
    UsageError naming it."""
    path = recording_file(trace_path)
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except OSError as error:
        raise UsageError(f"{path}: cannot read how the profile was recorded: {error.strerror or error}") from None
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise UsageError(f"{path}: not a recording file ({SCHEMA} JSON)") from None
    if not isinstance(document, dict) or document.get("schema") != SCHEMA or not isinstance(
            document.get("unstable", []), list) or not all(isinstance(r, str) for r in document.get("unstable", [])):
        raise UsageError(f"{path}: not a recording file ({SCHEMA} JSON with a list of reasons, unstable)")
    return Recording(path, tuple(document.get("unstable", [])), document)
