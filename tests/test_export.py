"""``memtrace export --format chrome``: Trace Event Format JSON that Perfetto and chrome://tracing open.

The rules checked are the Trace Event Format document's (phases, required keys, numeric counter
values, the JSON Object Format) and what Perfetto's JSON importer needs beyond them: ``X`` slices
on one thread must nest (we make them never overlap), counters need numeric ``args``, metadata
names processes and threads.
"""

from __future__ import annotations

import io
import itertools
import json
import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memtrace
from memtrace.analyses.export import Column, EventColumns, chrome_event_groups, chrome_events, lanes, other_data
from memtrace.analyses.timeline import snapshots
from memtrace.cli import main
from memtrace.reporters import export as export_reporter

from .conftest import ALEXNET, PTB, REAL_TRACES, TINY

HOSTILE = TINY / "hostile_names.pbtxt"
EVERY_FIXTURE = [*REAL_TRACES, *sorted(TINY.glob("*.pbtxt"))]
PHASES = {"X", "C", "M", "i"}  # the phases memtrace writes; all are in the format's list
METADATA = {"process_name": "name", "thread_name": "name", "process_sort_index": "sort_index", "thread_sort_index": "sort_index"}


def _strict(text: str) -> Any:
    def reject(constant: str) -> Any:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=reject)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def validate(document: Any) -> list[dict[str, Any]]:
    """Check a Trace Event Format document; returns its events. Fails the test on the first broken rule."""
    assert isinstance(document, dict) and isinstance(document["traceEvents"], list)
    assert document.get("displayTimeUnit", "ms") in ("ms", "ns")
    assert all(isinstance(v, str) for v in document.get("otherData", {}).values())
    events = document["traceEvents"]
    named_processes, named_threads = set(), set()
    slices: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    for event in events:
        assert isinstance(event, dict) and event.get("ph") in PHASES, event
        assert isinstance(event["name"], str) and event["name"], event
        assert isinstance(event["pid"], int) and isinstance(event["tid"], int), event
        ph = event["ph"]
        if ph == "M":
            key = METADATA[event["name"]]
            value = event["args"][key]
            assert isinstance(value, str if key == "name" else int), event
            if event["name"] == "process_name":
                named_processes.add(event["pid"])
            elif event["name"] == "thread_name":
                named_threads.add((event["pid"], event["tid"]))
            continue
        assert is_number(event["ts"]), event
        if "args" in event:
            assert isinstance(event["args"], dict)
        if ph == "X":
            assert is_number(event["dur"]) and event["dur"] >= 0, event
            slices[(event["pid"], event["tid"])].append((event["ts"], event["ts"] + event["dur"]))
        elif ph == "C":
            assert event["args"] and all(is_number(v) for v in event["args"].values()), event
        elif ph == "i":
            assert event["s"] in ("g", "p", "t"), event
    for thread, spans in slices.items():
        assert thread in named_threads and thread[0] in named_processes, thread
        spans.sort()
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert start >= end - 1e-6, f"overlapping slices on {thread}: one ends at {end}, the next starts at {start}"
    return events


def export(tmp_path: Path, trace: Path, *extra: str) -> list[dict[str, Any]]:
    target = tmp_path / "trace.json"
    assert main(["export", str(trace), "--format", "chrome", "-o", str(target), *extra]) == 0
    return validate(_strict(target.read_text(encoding="utf-8")))


def counter(events: list[dict[str, Any]], allocator: str) -> list[tuple[float, int]]:
    """The allocator's bytes counter as (ts, value) in file order."""
    points = [(e["ts"], v) for e in events if e["ph"] == "C" and e["name"] == allocator for v in e["args"].values()]
    return points


@pytest.mark.parametrize("path", EVERY_FIXTURE, ids=lambda p: p.name)
def test_export_is_valid_and_counters_peak_at_the_peak(tmp_path: Path, path: Path) -> None:
    events = export(tmp_path, path)
    trace = memtrace.load(path)
    for p in trace.peaks():
        values = [v for _, v in counter(events, p.allocator)]
        assert values, p.allocator
        assert max(values) == p.peak_bytes  # absolute where the baseline is known; the level at the start otherwise
        series = {k for e in events if e["ph"] == "C" and e["name"] == p.allocator for k in e["args"]}
        assert series == {"bytes in use" if p.baseline_bytes is not None else "live bytes relative to step start"}
    started = int((trace.nodes.start_ns > 0).sum())
    assert sum(1 for e in events if e["ph"] == "X" and e["cat"] == "op") == started
    processes = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert processes == {f"memory: {a}" for a in trace.allocators} | set(trace.devices.name)


def test_alexnet_counter_agrees_with_every_allocator_snapshot(tmp_path: Path) -> None:
    """The exported counter, read as Perfetto draws it, equals the BFC allocator's own 97 counts."""
    events = export(tmp_path, ALEXNET, "--allocator", "GPU_0_bfc")
    points = counter(events, "GPU_0_bfc")
    snaps = [(e["ts"], e["args"]["allocator_bytes_in_use"]) for e in events if e["name"] == "GPU_0_bfc snapshots"]
    assert len(snaps) == 97
    for ts, value in snaps:
        shown = [v for t, v in points if t <= ts][-1]  # a counter holds its last value until the next
        assert shown == value
    assert max(v for _, v in points) == 1_325_898_496


def test_alexnet_op_slice_matches_the_raw_trace(tmp_path: Path) -> None:
    """conv1/Conv2D on GPU:0, read from the pbtxt with a regex: start relative to the step, 131 us long."""
    text = ALEXNET.read_text()
    step_start = min(int(v) for v in re.findall(r"all_start_micros: (\d+)", text) if int(v) > 0)
    block = text[text.index('node_name: "conv1/Conv2D"\n') :]
    start = int(re.search(r"all_start_micros: (\d+)", block).group(1))  # type: ignore[union-attr]
    end_rel = int(re.search(r"all_end_rel_micros: (\d+)", block).group(1))  # type: ignore[union-attr]
    events = export(tmp_path, ALEXNET)
    gpu = next(e["pid"] for e in events if e["ph"] == "M" and e["args"].get("name") == "/job:localhost/replica:0/task:0/device:GPU:0")
    (op,) = [e for e in events if e["ph"] == "X" and e["pid"] == gpu and e["name"] == "conv1/Conv2D"]
    assert op["ts"] == start - step_start and op["dur"] == end_rel == 131
    assert op["args"]["op"] == "Conv2D"


def test_buffers_are_the_replayed_allocations(tmp_path: Path) -> None:
    events = export(tmp_path, TINY / "producer_free.pbtxt")
    buffers = sorted((e["ts"], e["dur"], e["name"], e["args"]["bytes"], e["args"]["kind"])
                     for e in events if e["ph"] == "X" and e["cat"] == "buffer")
    # conv's output (t=10, freed by its consumer at t=200), its temporary (15..30), the consumer's
    # 2048 bytes never freed: to the step's end, the consumer's end at 210 us.
    assert buffers == [
        (10.0, 190.0, "conv", 1024, "output"),
        (15.0, 15.0, "conv", 1024, "temp"),
        (105.0, 105.0, "consumer", 2048, "persistent"),
    ]
    # Two lanes: the temporary is gone when the consumer allocates, so that one reuses its lane.
    assert len({(e["pid"], e["tid"]) for e in events if e["ph"] == "X" and e["cat"] == "buffer"}) == 2
    without = export(tmp_path, TINY / "producer_free.pbtxt", "--no-buffers")
    assert not [e for e in without if e["ph"] == "X" and e["cat"] == "buffer"]


def test_counter_of_a_relative_allocator_starts_at_zero(tmp_path: Path) -> None:
    events = export(tmp_path, TINY / "ties.pbtxt")
    assert [v for _, v in counter(events, "bfc")] == [0, 256, 768, 512, 0]


def test_hostile_names_survive_as_data(tmp_path: Path) -> None:
    events = export(tmp_path, HOSTILE)
    names = {e["name"] for e in events}
    assert "<script>alert(1)</script>" in names
    assert '"quotes" & ampersands </script><img src=x onerror=alert(2)>' in names
    assert "escape\x1b[31m-red" in names  # JSON escapes the control character; the name is kept exact
    assert max(v for _, v in counter(events, '<b>alloc</b> & "q"')) == 8072


def test_lanes_never_overlap_and_use_the_fewest() -> None:
    import numpy as np

    start = np.array([0, 5, 10, 12], dtype=np.int64)
    end = np.array([10, 15, 20, 13], dtype=np.int64)
    assert lanes(start, end).tolist() == [0, 1, 0, 2]
    # Without touching, [10, 20] may not follow [0, 10] in lane 0; [12, 13] can.
    assert lanes(start, end, touching=False).tolist() == [0, 1, 2, 0]


def test_export_api_streams_events() -> None:
    trace = memtrace.load(PTB)
    events = chrome_events(trace, ["GPU_0_bfc"], buffers=False)
    assert next(events) == {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "memory: GPU_0_bfc"}}
    counted = sum(1 for e in events if e["ph"] == "C" and e["name"] == "GPU_0_bfc")
    assert counted == 1 + len(trace.timeline("GPU_0_bfc").time_us)
    assert len(snapshots(trace, "GPU_0_bfc").time_us) == 556


def test_export_to_stdout_and_bad_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["export", str(TINY / "ties.pbtxt")]) == 0
    document = validate(_strict(capsys.readouterr().out))
    assert document
    assert main(["export", str(ALEXNET), "--allocator", "nope"]) == 2
    assert capsys.readouterr().err.startswith("memtrace: error: ")
    assert main(["export", str(ALEXNET), "--format", "pprof"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_free_of_memory_from_before_the_step_is_an_instant(tmp_path: Path) -> None:
    """A free with no allocation in the step: an instant on its own thread, and the counter dips below zero."""
    source = tmp_path / "unpaired.pbtxt"
    source.write_text(
        'dev_stats { device: "/job:localhost/replica:0/task:0/device:GPU:0"\n'
        '  node_stats { node_name: "a" all_start_micros: 100 all_end_rel_micros: 10\n'
        '    memory { allocator_name: "bfc" allocation_records { alloc_micros: 102 alloc_bytes: -512 }\n'
        '                                   allocation_records { alloc_micros: 104 alloc_bytes: 256 } } } }\n'
    )
    events = export(tmp_path, source)
    (instant,) = [e for e in events if e["ph"] == "i"]
    assert (instant["name"], instant["ts"], instant["args"]["bytes"]) == ("a", 2.0, -512)
    thread = next(e for e in events if e["ph"] == "M" and e["name"] == "thread_name" and e["tid"] == instant["tid"]
                  and e["pid"] == instant["pid"])
    assert thread["args"]["name"] == "frees of memory from before the step"
    assert [v for _, v in counter(events, "bfc")] == [0, -512, -256]


# -- the writer: columns written as json writes the same events -------------------------------------


def _json_document(events: list[dict[str, Any]], other: dict[str, str]) -> str:
    """The file as ``json`` writes it, event by event: what the column writer must match byte for byte."""
    encode = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
    return ('{"traceEvents":[\n' + ",\n".join(map(encode, events)) + '\n],\n"displayTimeUnit":"ms",\n"otherData":'
            + json.dumps(other, separators=(",", ":")) + "}\n")


@pytest.mark.parametrize("path", EVERY_FIXTURE, ids=lambda p: p.name)
def test_columns_are_written_byte_for_byte_as_json_writes_the_events(path: Path) -> None:
    trace = memtrace.load(path)
    out = io.StringIO()
    count = export_reporter.render_chrome(chrome_event_groups(trace), other_data(trace), out)
    events = list(chrome_events(trace))
    assert count == len(events) and any(isinstance(g, EventColumns) for g in chrome_event_groups(trace))
    assert out.getvalue() == _json_document(events, other_data(trace))


_TEXTS = st.text(st.sampled_from('%sd"\\/\x1b\x00\u2028é😀 a')) | st.text()  # what a format string or JSON could trip on
_VALUES = st.one_of(
    _TEXTS, st.integers(-(2**63), 2**64), st.floats(allow_nan=False, allow_infinity=False), st.booleans(), st.none(),
    st.lists(st.integers(-1, 2**40), max_size=4),
)
_KEYS = _TEXTS.filter(lambda key: 0 < len(key) <= 6)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), count=st.integers(0, 5))
def test_any_columns_are_written_as_json_writes_them(data: st.DataObject, count: int) -> None:
    """Names with quotes, '%', control and non-ASCII characters; mixed and uniform columns; extra args."""
    def column(rows: int) -> Column:  # of one type, or mixed
        values = data.draw(st.sampled_from([*_VALUES.branches, _VALUES]))  # type: ignore[attr-defined]
        return Column(data.draw(st.lists(values, min_size=rows, max_size=rows)))

    def fields(keys: list[str], rows: int) -> dict[str, Any]:
        return {key: column(rows) if data.draw(st.booleans()) else data.draw(_VALUES) for key in keys}

    keys = data.draw(st.lists(_KEYS, unique=True, max_size=4).filter(lambda k: "args" not in k))
    arg_keys = data.draw(st.lists(_KEYS, unique=True, max_size=3))
    extra_keys = data.draw(st.lists(_KEYS.filter(lambda k: k not in arg_keys), unique=True, max_size=2))
    extra_rows = sorted(data.draw(st.sets(st.integers(0, max(count - 1, 0)), max_size=count))) if extra_keys else []
    group = EventColumns(count, fields(keys, count), fields(arg_keys, count), extra_rows,
                         {key: column(len(extra_rows)) for key in extra_keys})
    out = io.StringIO()
    export_reporter.render_chrome([group], {}, out)
    assert out.getvalue() == _json_document(list(group.events()), {})


@settings(max_examples=300, deadline=None)
@given(origin=st.integers(0, 2**61), offsets=st.lists(st.integers(-(2**61), 2**61), min_size=1, max_size=50),
       short=st.lists(st.integers(-(2**45), 2**45), min_size=1, max_size=50))
def test_times_in_microseconds_are_what_rounding_to_three_decimals_gives(origin: int, offsets: list[int],
                                                                          short: list[int]) -> None:
    """ns / 1000 is correctly rounded, so the exporter may skip round(x, 3); durations likewise from whole ns.

    (Durations agree for times within 2**45 ns, nine hours, of the step start; further out the
    old way, a difference of rounded floats, lost nanoseconds and the new one does not.)
    """
    import numpy as np

    from memtrace.analyses.export import _durations_us, _us

    times = np.array([origin + o for o in offsets], dtype=np.int64)
    assert _us(times, origin) == [round(t, 3) for t in ((times - origin) / 1000).tolist()]
    start = np.array([origin + o for o in short], dtype=np.int64)
    end = start + np.abs(np.array(short[::-1], dtype=np.int64))
    exact = [max(0.0, round(e - s, 3)) for s, e in zip(_us(start, origin), _us(end, origin))]
    assert [repr(d) for d in _durations_us(start, end)] == [repr(d) for d in exact]


def test_export_lists_allocators_largest_peak_first() -> None:
    from memtrace.analyses.export import chrome_event_groups

    trace = memtrace.load(PTB)
    memory = [e["args"]["name"] for e in chrome_event_groups(trace) if isinstance(e, dict)
              and e.get("name") == "process_name" and e["args"]["name"].startswith("memory: ")]
    assert memory == ["memory: GPU_0_bfc", "memory: cuda_host_bfc", "memory: cpu_pool", "memory: cpu"]
