"""The red-team pass of issue 17 as a test: every command on mutated traces, never a traceback.

Traces are the hand-made fixtures in text, binary and gzip form, damaged byte by byte (as
``fastpaths.damaged`` does) or given semantic nonsense (numbers replaced by int64 extremes, huge,
negative). Fixed seed, bounded count: the same few hundred runs every time. Every run must end
in exit 0, 1 or 2; exit 2 with exactly one line on stderr; JSON output must be strict JSON.
"""

from __future__ import annotations

import gzip
import json
import random
import re
from pathlib import Path

import pytest
from google.protobuf import text_format

import memtrace
from memtrace.cli import main
from memtrace.errors import MemtraceError
from memtrace.read._proto import tf_trace_pb2 as pb

from .conftest import TINY
from .fastpaths import damaged

SEED = 17
TRACES = 90  # mutated traces; each is run through every command
# Values protobuf accepts (int64) but no allocator or clock produces, and a few it refuses.
EXTREMES = ["0", "-1", "1", "4611686018427387904", "-4611686018427387904", "1099511627776", "-1099511627776",
            "-999999", "977616000000000", "4611686018427387", "9223372036854775807", "-9223372036854775808",
            "9223372036854776", "18446744073709551615"]  # the last four are refused where they are times
_NUMBER = re.compile(rb"(?<=: )-?[0-9]+")


def _sources() -> list[tuple[str, bytes]]:
    """The tiny fixtures' texts."""
    return [(path.stem, path.read_bytes()) for path in sorted(TINY.glob("*.pbtxt"))]


def _nonsense(rng: random.Random, data: bytes) -> bytes:
    """The text with one to four of its numbers replaced by extremes."""
    numbers = list(_NUMBER.finditer(data))
    for match in sorted(rng.sample(numbers, min(len(numbers), rng.randint(1, 4))), key=lambda m: -m.start()):
        data = data[:match.start()] + rng.choice(EXTREMES).encode() + data[match.end():]
    return data


def _damage(rng: random.Random, data: bytes) -> bytes:
    edits = [(rng.randrange(len(data)), rng.randint(0, 3), bytes(rng.randrange(256) for _ in range(rng.randint(0, 3))))
             for _ in range(rng.randint(1, 3))]
    return damaged(data, edits)


def _as_binary(text: bytes) -> bytes | None:
    try:
        return text_format.Parse(text.decode(), pb.StepStats()).SerializeToString()
    except (text_format.ParseError, UnicodeDecodeError):
        return None


def _cases() -> list[tuple[str, bytes]]:
    """Semantic nonsense (text, or its binary form) most of the time; damaged bytes of either form
    otherwise; a quarter of them gzipped."""
    rng = random.Random(SEED)
    sources = _sources()
    cases = []
    while len(cases) < TRACES:
        name, data = rng.choice(sources)
        kind = rng.random()
        if kind < 0.6:
            data = _nonsense(rng, data)
            if rng.random() < 0.4:
                binary = _as_binary(data)
                if binary is None:
                    continue
                name, data = name + ".pb", binary
        elif kind < 0.8:
            data = _damage(rng, data)
        else:
            binary = _as_binary(data)
            assert binary is not None
            name, data = name + ".pb", _damage(rng, binary)
        if rng.random() < 0.25:
            data = gzip.compress(data, mtime=0)
            name += ".gz"
        cases.append((f"{len(cases):02d}-{name}", data))
    return cases


# After the trace; {a} is an allocator of the trace (where it loads), {out} a file in a scratch folder.
COMMANDS: list[list[str]] = [
    ["summary"], ["summary", "--json"], ["peak"], ["peak", "--json"], ["timeline"], ["timeline", "--json"],
    ["ops"], ["ops", "--json"], ["frag"], ["frag", "--json"], ["tensor", "{a}:1"], ["tensor", "{a}:2", "--json"],
    ["graph"], ["graph", "--format", "graphml"], ["check", "--max-peak", "{a}=1KiB", "--max-waste", "{a}=5%"],
    ["check", "--max-peak-delta", "{a}=8000PiB", "--json"], ["diff"], ["diff", "--json", "--max-increase", "5%"],
    ["report", "-o", "{out}.html"], ["export", "-o", "{out}.json"],
    ["fit", "--json"], ["fit", "--allocator", "{a}", "--limit", "1MiB", "--no-alternatives"],
]
BASE = TINY / "producer_free.pbtxt"


def _argv(command: list[str], trace: Path, allocator: str, tmp_path: Path) -> list[str]:
    rest = [a.format(a=allocator, out=tmp_path / "out") for a in command[1:]]
    if command[0] == "diff":
        return ["diff", str(BASE), str(trace), *rest]
    return [command[0], str(trace), *rest]


def _strict_json(text: str) -> None:
    def refuse(constant: str) -> None:
        raise AssertionError(f"not JSON: {constant}")

    json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize(("name", "data"), _cases(), ids=[name for name, _ in _cases()])
def test_every_command_on_a_mutated_trace_exits_cleanly(capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str,
                                                        data: bytes) -> None:
    trace = tmp_path / name
    trace.write_bytes(data)
    try:
        allocator = memtrace.load(trace).allocators[0]
    except (MemtraceError, IndexError):
        allocator = "GPU_0_bfc"
    for command in COMMANDS:
        argv = _argv(command, trace, allocator, tmp_path)
        code = main(argv)  # an exception escaping main is the traceback a user would see
        out, err = capsys.readouterr()
        assert code in (0, 1, 2), argv
        assert "Traceback" not in err, argv
        if code == 2:
            assert err.count("\n") == 1 and err.startswith("memtrace: error: "), (argv, err)
        elif "--json" in argv:
            _strict_json(out)
