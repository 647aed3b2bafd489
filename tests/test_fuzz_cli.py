"""The red-team pass of issue 17 as a test: every command on mutated traces, never a traceback.

Traces are the hand-made fixtures in text, binary and gzip form, damaged byte by byte (as
``fastpaths.damaged`` does) or given semantic nonsense (numbers replaced by int64 extremes, huge,
negative). Fixed seed, bounded count: the same runs every time (90 traces x 20 commands, 40
profiles x 12, 60 console logs x 3: 2,460 runs). Every run must end in exit 0, 1 or 2; exit 2
with exactly one line on stderr; JSON output must be strict JSON. And 30 logs with console debris
between their lines must give the original's events.
"""

from __future__ import annotations

import gzip
import json
import os
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

# The same runs every time; MEMTRACE_FUZZ_SEED=N explores others (as `pytest --hypothesis-seed` does).
SEED = int(os.environ.get("MEMTRACE_FUZZ_SEED", "17"))
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
            if binary is None:  # (a source that is no StepStats text: a RunMetadata, say)
                continue
            name, data = name + ".pb", _damage(rng, binary)
        cases.append(_numbered(rng, len(cases), name, data))
    return cases


def _numbered(rng: random.Random, number: int, name: str, data: bytes) -> tuple[str, bytes]:
    """A case named by its number, gzipped a quarter of the time."""
    if rng.random() < 0.25:
        data = gzip.compress(data, mtime=0)
        name += ".gz"
    return f"{number:02d}-{name}", data


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


# -- values mutated, the trace kept well-formed: protobuf reads every one, so memtrace must too -----

VALUE_TRACES = 60
VALUE_SOURCES = [path for path in sorted(TINY.glob("*.pbtxt")) if path.name != "tf14_memory_stats.pbtxt"]
SIZES = [0, 1, 7, 255, 256, 1000, 4096, 1 << 20, 3 << 28, 1 << 33]
NAMES = ["", " ", "a/b/c", "x:0", "名前/ünïcode", "<b>&amp;</b>", "gradients/" * 20 + "deep", "a" * 300]


def _mutate_value(rng: random.Random, step: pb.StepStats) -> str:
    """One well-formed change: a size, a time, an id, a name, or a count of nodes, records or outputs."""
    nodes = [node for device in step.dev_stats for node in device.node_stats]
    memory = [used for node in nodes for used in node.memory]
    records = [record for used in memory for record in used.allocation_records]
    described = [out.tensor_description for node in nodes for out in node.output]
    allocators = sorted({used.allocator_name for used in memory} | {d.allocation_description.allocator_name
                                                                    for d in described}) or ["bfc"]
    kind = rng.choice(["size", "size", "time", "time", "id", "name", "count", "count"])
    if kind == "size" and records and rng.random() < 0.5:
        record = rng.choice(records)
        record.alloc_bytes = rng.choice(SIZES) * (-1 if record.alloc_bytes < 0 else 1)
    elif kind == "size" and described and rng.random() < 0.6:
        allocation = rng.choice(described).allocation_description
        setattr(allocation, rng.choice(["requested_bytes", "allocated_bytes"]), rng.choice(SIZES))
    elif kind == "size" and memory:
        field = rng.choice(["allocator_bytes_in_use", "total_bytes", "peak_bytes", "live_bytes"])
        setattr(rng.choice(memory), field, rng.choice(SIZES))
    elif kind == "time" and records and rng.random() < 0.4:
        rng.choice(records).alloc_micros += rng.randint(-200, 200)
    elif kind == "time" and nodes:
        node = rng.choice(nodes)
        if rng.random() < 0.5:
            node.all_start_micros = max(0, node.all_start_micros + rng.randint(-200, 200))
        else:
            setattr(node, rng.choice(["op_start_rel_micros", "op_end_rel_micros", "all_end_rel_micros"]),
                    rng.randint(0, 500))
    elif kind == "id" and described:
        allocation = rng.choice(described).allocation_description
        if rng.random() < 0.5:
            allocation.allocation_id = rng.randint(0, 6)
        else:
            allocation.ptr = rng.choice([0, 256, 4096, 8200, 1 << 40])
    elif kind == "name" and nodes:
        pick = rng.random()
        if pick < 0.4:
            rng.choice(nodes).node_name = rng.choice([node.node_name for node in nodes] + NAMES)
        elif pick < 0.7 and (memory or described):
            target = rng.choice(memory) if memory and (not described or rng.random() < 0.5) \
                else rng.choice(described).allocation_description
            target.allocator_name = rng.choice([*allocators, "other_bfc", "cpu"])
        else:
            rng.choice(list(step.dev_stats)).device = rng.choice(
                [d.device for d in step.dev_stats] + ["/device:GPU:1", "/job:w/replica:0/task:3/device:CPU:0"])
    elif kind == "count" and nodes:
        device = rng.choice([d for d in step.dev_stats if d.node_stats] or list(step.dev_stats))
        pick = rng.random()
        if pick < 0.3:
            device.node_stats.add().CopyFrom(rng.choice(list(device.node_stats)))
        elif pick < 0.5 and len(device.node_stats) > 1:
            del device.node_stats[rng.randrange(len(device.node_stats))]
        elif pick < 0.7 and memory:
            used = rng.choice(memory)
            if used.allocation_records:
                used.allocation_records.add().CopyFrom(rng.choice(list(used.allocation_records)))
        elif pick < 0.85:
            step.dev_stats.add().CopyFrom(device)
        else:
            holder = rng.choice(nodes)
            if holder.output:
                del holder.output[rng.randrange(len(holder.output))]
    return kind


def _value_cases() -> list[tuple[str, bytes, str]]:
    """Tiny fixtures with one to three values changed, as text, binary or gzip; protobuf reads every one."""
    rng = random.Random(SEED + 1)
    cases = []
    while len(cases) < VALUE_TRACES:
        path = rng.choice(VALUE_SOURCES)
        step = text_format.Parse(path.read_text(), pb.StepStats())
        kinds = "+".join(_mutate_value(rng, step) for _ in range(rng.randint(1, 3)))
        if step == text_format.Parse(path.read_text(), pb.StepStats()):
            continue  # the change changed nothing (a name given its own value)
        form = rng.random()
        if form < 0.5:
            name, data = path.stem + ".pbtxt", text_format.MessageToString(step).encode()
        else:
            name, data = path.stem + ".pb", step.SerializeToString()
            if form > 0.8:
                name, data = name + ".gz", gzip.compress(data, mtime=0)
        cases.append((f"{len(cases):02d}-{kinds}-{name}", data, kinds))
    return cases


# A command may refuse what it was asked (a buffer the trace lacks or names ambiguously, an allocator
# it lacks, a limit on something it does not record), never the trace itself.
ASKED = re.compile(r"^memtrace: error: .*: (no buffer '|'.*' names \d+ buffers |no allocator '|max_\w+ of .* cannot be measured: |no allocator here made BFC requests |the allocator '.*' left no allocation records|the allocator '.*' made no allocations in this trace)")


@pytest.mark.parametrize(("name", "data", "kinds"), _value_cases(), ids=[name for name, _, _ in _value_cases()])
def test_a_trace_protobuf_reads_is_never_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str,
                                                 data: bytes, kinds: str) -> None:
    trace = tmp_path / name
    trace.write_bytes(data)
    raw = gzip.decompress(data) if name.endswith(".gz") else data
    parsed = text_format.Parse(raw.decode(), pb.StepStats()) if ".pbtxt" in name else pb.StepStats.FromString(raw)
    loaded = memtrace.load(trace)  # protobuf read it: a MemtraceError here is a valid trace refused
    assert len(loaded.nodes) == sum(len(device.node_stats) for device in parsed.dev_stats)
    allocator = loaded.allocators[0] if loaded.allocators else "GPU_0_bfc"
    for command in COMMANDS:
        argv = _argv(command, trace, allocator, tmp_path)
        code = main(argv)
        out, err = capsys.readouterr()
        assert code in (0, 1) or (code == 2 and ASKED.match(err) and err.count("\n") == 1), (argv, err)
        assert "Traceback" not in err, argv
        if "--json" in argv and code != 2:
            _strict_json(out)
# -- profiles (XSpace) and console logs (issue 25) -------------------------------------------------
#
# The same promise on the inputs added since: TF2 profiles whose stats, times and steps are given
# nonsense (a string where a number goes, NaN and infinite doubles, int64 and uint64 extremes, a
# line starting at int64's ends) or damaged bytes, and console logs with what consoles and hostile
# users leave in them (control bytes, NULs, UTF-16, extreme sizes, cut lines, damaged bytes).

PROFILE_TRACES = 40
LOGS = 60
_STAT_NONSENSE: list[dict[str, object]] = [
    {"int64_value": 2**63 - 1}, {"int64_value": -2**63}, {"int64_value": -1}, {"uint64_value": 2**64 - 1},
    {"uint64_value": 2**63}, {"double_value": float("nan")}, {"double_value": float("inf")},
    {"double_value": float("-inf")}, {"double_value": 1e19}, {"double_value": 0.5}, {"double_value": 256.0},
    {"str_value": "x"}, {"str_value": "0x1000"}, {"str_value": ""}, {"ref_value": 999}, {"bytes_value": b"\x00"},
]
_TIME_NONSENSE = [2**63 - 1, -2**63, 2**62, -2**62, 4611686018427387, 9_000_000_000_000_000, -1]


def _profile_cases() -> list[tuple[str, bytes]]:
    """The hand-made profile of tests/test_xplane.py given nonsense (stats, times, steps) or damaged bytes."""
    from .test_xplane import HAND, HAND_STEPS, _space

    rng = random.Random(SEED + 25)
    cases = []
    while len(cases) < PROFILE_TRACES:
        space = _space(HAND, HAND_STEPS)
        host = space.planes[0]
        kind = rng.random()
        if kind < 0.8:
            for _ in range(rng.randint(1, 4)):
                what = rng.random()
                if what < 0.6:
                    event = rng.choice(host.lines[0].events)
                    stat = rng.choice(event.stats)
                    for field, value in rng.choice(_STAT_NONSENSE).items():
                        setattr(stat, field, value)
                elif what < 0.75:
                    rng.choice(host.lines).timestamp_ns = rng.choice(_TIME_NONSENSE)
                elif what < 0.9:
                    line = rng.choice(host.lines)
                    if line.events:
                        setattr(rng.choice(line.events), rng.choice(["offset_ps", "duration_ps"]), rng.choice(_TIME_NONSENSE))
                else:
                    step = rng.choice(host.lines[1].events)
                    for field, value in rng.choice(_STAT_NONSENSE).items():
                        setattr(step.stats[0], field, value)
            data = space.SerializeToString()
        else:
            data = _damage(rng, space.SerializeToString())
        name = "host.xplane.pb"
        cases.append(_numbered(rng, len(cases), name, data))
    return cases


PROFILE_COMMANDS: list[list[str]] = [
    ["summary"], ["summary", "--json"], ["peak"], ["peak", "--json"], ["timeline", "--json"], ["ops", "--json"],
    ["frag"], ["frag", "--json"], ["report", "--json"], ["check", "--max-peak", "{a}=1KiB"], ["tensor", "{a}:1"],
    ["export", "-o", "{out}.json"],
]


def _keeps_the_promise(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code = main(argv)  # an exception escaping main is the traceback a user would see
    out, err = capsys.readouterr()
    assert code in (0, 1, 2), argv
    assert "Traceback" not in err, argv
    if code == 2:
        assert err.count("\n") == 1 and err.startswith("memtrace: error: "), (argv, err)
    elif "--json" in argv:
        _strict_json(out)


@pytest.mark.parametrize(("name", "data"), _profile_cases(), ids=[name for name, _ in _profile_cases()])
def test_every_command_on_a_mutated_profile_exits_cleanly(capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str,
                                                          data: bytes) -> None:
    trace = tmp_path / name.split("-", 1)[1]
    trace.write_bytes(data)
    try:
        allocator = memtrace.load(trace).allocators[0]
    except (MemtraceError, IndexError):
        allocator = "cpu_bfc"
    if allocator.startswith("-"):  # (a name from a mutated stat: argparse would take it for an option)
        allocator = "cpu_bfc"
    for command in PROFILE_COMMANDS:
        _keeps_the_promise([command[0], str(trace), *(a.format(a=allocator, out=tmp_path / "out") for a in command[1:])],
                           capsys)


_LOG_SOURCES = ["cpu_exhausted.log", "cpu_fragmented.log", "cpu_session_report.log", "issue_tf22586_excerpt.log",
                "issue_tflearn505_excerpt.log", "jax_h100_fragmented.log", "public_tf14_alexnet_k40c.md"]
_SIZE_NONSENSE = [b"9223372036854775807", b"18446744073709551616", b"-1", b"0", b"99999999999999999999999",
                  b"1e308", b"nan"]
_UNIT_NONSENSE = [b"99999999999999EiB", b"-5.0MiB", b"1e308GiB", b"0.0000001B", b"inf KiB"]


def _log_cases() -> list[tuple[str, bytes]]:
    """The public and recorded logs with console debris, encodings, extreme sizes, cuts or damage."""
    from .conftest import FIXTURES

    rng = random.Random(SEED + 19)
    sources = [(name, (FIXTURES / "oom" / name).read_bytes()) for name in _LOG_SOURCES]
    cases = []
    while len(cases) < LOGS:
        name, data = rng.choice(sources)
        for _ in range(rng.randint(1, 3)):
            kind = rng.random()
            if kind < 0.3:
                numbers = list(re.finditer(rb"(?<=[ :(])[0-9]+(?:\.[0-9]+)?(?:[KMGTPE]?i?B)?", data))
                if numbers:
                    match = rng.choice(numbers)
                    data = data[:match.start()] + rng.choice(_SIZE_NONSENSE + _UNIT_NONSENSE) + data[match.end():]
            elif kind < 0.45:
                at = rng.randrange(len(data))
                data = data[:at] + rng.choice([b"\b" * 30, b"\0", b"\x07", b"\x1b[2K", b"\r", b"\x0b", b"\xff\xfe"]) + data[at:]
            elif kind < 0.55:
                data = b"\0" * rng.randint(1, 70000) + data
            elif kind < 0.65:
                data = data[:rng.randrange(len(data))]
            elif kind < 0.75:
                at = rng.randrange(len(data))
                data = data[:at] + b"y" * rng.randint(70000, 200000) + data[at:]
            else:
                data = _damage(rng, data)
        if rng.random() < 0.15:
            text = data.decode("utf-8", errors="replace")
            data = b"\xff\xfe" + text.encode("utf-16-le") if rng.random() < 0.7 else text.encode("utf-16-le")
        if rng.random() < 0.2:
            data = gzip.compress(data, mtime=0)
        cases.append((f"{len(cases):02d}-{name}", data))
    return cases


@pytest.mark.parametrize(("name", "data"), _log_cases(), ids=[name for name, _ in _log_cases()])
def test_oom_on_a_mutated_log_exits_cleanly(capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str,
                                            data: bytes) -> None:
    log = tmp_path / name
    log.write_bytes(data)
    for command in (["oom"], ["oom", "--json"], ["oom", "--html", "-o", str(tmp_path / "oom.html")]):
        _keeps_the_promise([command[0], str(log), *command[1:]], capsys)


BENIGN_LOGS = 30
_DEBRIS = [
    b"".join(b"%d/10 [%s>%s] - ETA: 1s%s" % (i, b"=" * i, b"." * (9 - i), b"\b" * 30) for i in range(10)) + b"\n",
    b"\0" * 5000, b"\0", b"\x07\x07 done\n", b"y" * 100_000 + b"\n", b" 10%|#         | 1/10 [00:01<00:09]\r 20%|##\r",
]


_DUMP_LINE = re.compile(rb"(?i:ran out of memory)|BFCAllocator dump|InUse|Free|Chunk|Bin \(|Stats:|Sum Total")


def _benign_log_cases() -> list[tuple[str, bytes, str]]:
    """Logs with console debris between their lines (progress bars with backspaces, NULs, bells, a
    very long line, tqdm's carriage returns), perhaps NUL padding first, UTF-16 or gzip: the dumps
    are untouched, so the events must be the original's."""
    from .conftest import FIXTURES

    rng = random.Random(SEED + 1919)
    cases = []
    for number in range(BENIGN_LOGS):
        name = rng.choice(_LOG_SOURCES)
        lines = (FIXTURES / "oom" / name).read_bytes().splitlines(keepends=True)
        # Lines go before the first line of a dump or after the last (inside one, a line of
        # another program ends a Stats block or a list of live tensors); NULs go anywhere.
        first = next(k for k, line in enumerate(lines) if _DUMP_LINE.search(line))
        for _ in range(rng.randint(1, 4)):
            debris = rng.choice(_DEBRIS)
            if debris.strip(b"\0"):
                lines.insert(rng.choice([rng.randint(0, first), len(lines)]), debris)
                first += 1
            else:
                k = rng.randrange(len(lines))
                at = rng.randrange(len(lines[k]) + 1)
                lines[k] = lines[k][:at] + debris + lines[k][at:]
        data = b"".join(lines)
        if rng.random() < 0.3:
            data = b"\0" * rng.randint(1, 200_000) + data
        if rng.random() < 0.25:
            data = b"\xff\xfe" + data.decode("utf-8", errors="replace").encode("utf-16-le")
        if rng.random() < 0.2:
            data = gzip.compress(data, mtime=0)
        cases.append((f"{number:02d}-{name}", data, name))
    return cases


def _oom_events(path: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    code = main(["oom", str(path), "--json"])
    out, err = capsys.readouterr()
    assert code in (0, 2), err  # 2: an excerpt's dump is cut off (said on stderr), its events still reported
    events = json.loads(out)["events"]
    for event in events:
        del event["path"], event["line"]  # (debris lines before an event move it down)
    return events  # type: ignore[no-any-return]


@pytest.mark.parametrize(("name", "data", "source"), _benign_log_cases(), ids=[n for n, _, _ in _benign_log_cases()])
def test_console_debris_between_a_logs_lines_changes_none_of_its_events(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, data: bytes, source: str) -> None:
    from .conftest import FIXTURES

    log = tmp_path / name
    log.write_bytes(data)
    expected = _oom_events(FIXTURES / "oom" / source, capsys)
    assert expected and _oom_events(log, capsys) == expected
