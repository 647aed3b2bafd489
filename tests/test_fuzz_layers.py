"""The red-team pass of issue 36 as a test: the layer-names file (``layers.json``) malformed, deep, huge, of wrong types.

Beside a small hand-made profile whose ops are named as Keras names them, a ``layers.json`` (or
``NAME.layers.json``) is written from a fixed seed: JSON damaged byte by byte, nested 100,000 deep,
a million names, numbers of thousands of digits, NaN, every JSON type where a name belongs, not
UTF-8, empty, a directory, a dangling link. Each is read by the commands that group by layer and
by one that is asked to write its output over the file. 40 files x 5 commands, 200 runs, about
8 s (MEMTRACE_FUZZ_SEED=N explores others). Every run must end in exit 0, 1 or 2; exit 2 with
exactly one line on stderr; ``--json`` strict JSON; no traceback; and the layer-names file, an
input, unchanged.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from pathlib import Path

import pytest

from memtrace.cli import main

from .fastpaths import damaged
from .memory_profiles import write_profile

SEED = int(os.environ.get("MEMTRACE_FUZZ_SEED", "36"))
FILES = 40
COMMANDS = [["peak", "{trace}", "--group-by", "layer"], ["peak", "{trace}", "--group-by", "layer", "--json"],
            ["ops", "{trace}", "--by", "layer", "--json"], ["report", "{trace}", "--group-by", "layer", "-o", "{page}"],
            ["peak", "{trace}", "--group-by", "layer", "-o", "{names}"]]
BASE = 0x7F00_0000_0000
OPS = ["StatefulPartitionedCall/sequential_1/dense_1/MatMul", "StatefulPartitionedCall/sequential_1/dense_1_2/BiasAdd",
       "StatefulPartitionedCall/gradient_tape/sequential_1/dense_1_2/MatMul", "StatefulPartitionedCall/adam/Sqrt_9",
       "StatefulPartitionedCall/compile_loss/Sum"]
EVENTS = [(True, 1024 * (n + 1), 1024 * (n + 1), BASE + (n << 20), sum(1024 * (k + 1) for k in range(n + 1)), 0.0, op)
          for n, op in enumerate(OPS)]
GOOD = {"model": "sequential", "layers": ["dense", "dense_1"], "optimizer": "adam"}
VALUES = [None, True, 0, -1, 1.5, float("nan"), "", "x" * 10_000, [], {}, ["dense", 1], [["dense"]], {"dense": 1},
          "sequential"]


def _content(rng: random.Random) -> bytes | str:
    """A hostile layer-names file's bytes; ``"dir"`` or ``"dangling"`` for a directory or a dangling link."""
    good = json.dumps(GOOD).encode()
    kind = rng.choice(["damaged", "damaged", "deep", "deep-object", "huge", "digits", "nan", "types", "types", "types",
                       "not-utf8", "empty", "bom", "dir", "dangling", "good", "scalar", "duplicate"])
    if kind == "damaged":
        edits = [(rng.randrange(len(good)), rng.randint(0, 3), bytes(rng.randrange(256) for _ in range(rng.randint(0, 3))))
                 for _ in range(rng.randint(1, 3))]
        return damaged(good, edits)
    if kind == "deep":
        depth = rng.choice([1_000, 100_000])
        return ("[" * depth + "]" * depth).encode()
    if kind == "deep-object":
        depth = rng.choice([2_000, 50_000])
        return ('{"layers": ' + '{"a": ' * depth + "1" + "}" * depth + "}").encode()
    if kind == "huge":
        return json.dumps({"layers": [f"dense_{n}" for n in range(rng.choice([10_000, 1_000_000]))]}).encode()
    if kind == "digits":
        return ('{"layers": ' + "9" * rng.choice([4_000, 5_000, 100_000]) + "}").encode()
    if kind == "nan":
        return rng.choice([b'{"model": NaN}', b"Infinity", b'{"layers": [-Infinity]}'])
    if kind == "types":
        document = dict(GOOD)
        document[rng.choice(["model", "layers", "optimizer", "other"])] = rng.choice(VALUES)
        return json.dumps(document).encode()
    if kind == "not-utf8":
        return b'{"model": "\xff\xfe"}'
    if kind == "empty":
        return b""
    if kind == "bom":
        return b"\xef\xbb\xbf" + good
    if kind == "scalar":
        return rng.choice([b"1", b'"sequential"', b"null", b"[]", b"true"])
    if kind == "duplicate":
        return b'{"layers": ["a"], "layers": ["dense", "dense_1"]}'
    return kind if kind in ("dir", "dangling") else good


def _cases() -> list[tuple[int, str, int]]:
    rng = random.Random(SEED)
    return [(n, rng.choice(["layers.json", "run.layers.json"]), rng.randrange(1 << 30)) for n in range(FILES)]


def _strict_json(text: str) -> None:
    def refuse(constant: str) -> None:
        raise AssertionError(f"not JSON: {constant}")

    json.loads(text, parse_constant=refuse)


def _fingerprint(path: Path) -> str:
    if path.is_symlink():
        return "link:" + os.readlink(path)
    if path.is_dir():
        return "dir"
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(("number", "name", "seed"), _cases(), ids=[f"{n:02d}-{name}" for n, name, _ in _cases()])
@pytest.mark.parametrize("command", COMMANDS, ids=["peak", "peak-json", "ops-json", "report", "over-the-file"])
def test_a_hostile_layer_names_file_keeps_the_promise(capsys: pytest.CaptureFixture[str], tmp_path: Path, number: int,
                                                      name: str, seed: int, command: list[str]) -> None:
    trace = write_profile(tmp_path / "run.xplane.pb", EVENTS)
    names = tmp_path / name
    content = _content(random.Random(seed))
    if content == "dir":
        names.mkdir()
    elif content == "dangling":
        names.symlink_to(tmp_path / "nowhere.json")
    else:
        assert isinstance(content, bytes)
        names.write_bytes(content)
    before = _fingerprint(names)
    argv = [a.format(trace=trace, page=tmp_path / "page.html", names=names) for a in command]
    code = main(argv)  # an exception escaping main is the traceback a user would see
    out, err = capsys.readouterr()
    assert code in (0, 1, 2), argv
    assert "Traceback" not in err, (argv, err)
    assert all(line.startswith("memtrace: ") for line in err.splitlines()), (argv, err)
    if code == 2:
        assert err.count("\n") == 1 and err.startswith("memtrace: error: "), (argv, err)
    elif "--json" in argv:
        _strict_json(out)
    assert _fingerprint(names) == before, argv  # an input: never replaced, whatever it holds
    if command[-1] == "{names}" and content not in ("dir", "dangling"):
        assert code == 2 and "is the input" in err, argv
