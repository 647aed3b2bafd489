"""Oddities the builder notes over the whole trace: numbers no allocator or clock produces (issue 17, item 9)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import memtrace
from memtrace.cli import main

from .conftest import REAL_TRACES, TINY, require
from .fastpaths import fast, reference, same

GPU = "/job:localhost/replica:0/task:0/device:GPU:0"

# Three allocations of 2^62 bytes: a running total wraps to -2^63.
_HUGE_NODE = '''    node_name: "huge"
    all_start_micros: 1000
    all_end_rel_micros: 10
    memory {
      allocator_name: "GPU_0_bfc"
      allocation_records { alloc_micros: 1001 alloc_bytes: 4611686018427387904 }
      allocation_records { alloc_micros: 1002 alloc_bytes: 4611686018427387904 }
      allocation_records { alloc_micros: 1003 alloc_bytes: 4611686018427387904 }
    }
'''
WRAPPING = f'''dev_stats {{
  device: "{GPU}"
  node_stats {{
{_HUGE_NODE}  }}
}}
'''

# A record a second before its node, a free larger than the node's allocation, a negative
# temp_memory_size, a node of 31 years, and a free before its node's allocation.
NONSENSE = f'''dev_stats {{
  device: "{GPU}"
  node_stats {{
    node_name: "early"
    all_start_micros: 1000000
    all_end_rel_micros: 10
    memory {{
      allocator_name: "GPU_0_bfc"
      allocation_records {{ alloc_micros: 5 alloc_bytes: 256 }}
      allocation_records {{ alloc_micros: 1000005 alloc_bytes: -512 }}
    }}
    memory_stats {{ temp_memory_size: -1099511627776 }}
  }}
  node_stats {{
    node_name: "long"
    all_start_micros: 1000001
    all_end_rel_micros: 977616000000000
    memory {{
      allocator_name: "GPU_0_bfc"
      allocation_records {{ alloc_micros: 1000002 alloc_bytes: -64 }}
      allocation_records {{ alloc_micros: 1000003 alloc_bytes: 64 }}
    }}
  }}
}}
'''


def _trace(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "t.pbtxt"
    path.write_text(text)
    return path


def test_byte_totals_past_int64_are_an_oddity(tmp_path: Path) -> None:
    path = _trace(tmp_path, WRAPPING)
    trace = memtrace.load(path)
    assert [(o.kind, o.count, o.example, o.allocator) for o in trace.oddities] == [
        ("bytes-beyond-int64", 1,
         "the records of 'GPU_0_bfc' add up to 1.38e+19 bytes: a running total of them wraps around", "GPU_0_bfc")]


def test_semantic_nonsense_is_noted_kind_by_kind(tmp_path: Path) -> None:
    trace = memtrace.load(_trace(tmp_path, NONSENSE))
    # A node's sizes and times are the whole trace's; records and memory entries their allocator's.
    assert [(o.kind, o.count, o.example, o.allocator) for o in trace.oddities] == [
        ("node-lasts-over-a-day", 1, "'long' lasts 1.13e+04 days", None),
        ("negative-size", 1, "'early' has temp_memory_size -1099511627776", None),
        ("record-outside-its-node", 1, "a record of 'early' at -999,995 us from the node's start", "GPU_0_bfc"),
        ("free-exceeds-allocation", 1, "'early' frees 512 bytes but allocates 256", "GPU_0_bfc"),
        ("free-before-allocation", 1, "'long' frees 64 bytes before it allocates any", "GPU_0_bfc"),
    ]


@pytest.mark.parametrize("text", [WRAPPING, NONSENSE], ids=["wrapping", "nonsense"])
def test_both_reading_paths_note_the_same_oddities(tmp_path: Path, text: str) -> None:
    from google.protobuf import text_format

    from memtrace.read._proto import tf_trace_pb2 as pb

    path = _trace(tmp_path, text_format.MessageToString(text_format.Parse(text, pb.StepStats())))
    got = fast(path)
    assert got is not None and same(got, reference(path))


@pytest.mark.parametrize("path", [*REAL_TRACES, *sorted(TINY.glob("*.pbtxt"))], ids=lambda p: p.name)
def test_sound_traces_have_none_of_these_oddities(path: Path) -> None:
    kinds = {o.kind for o in memtrace.load(path).oddities}
    assert not kinds & {"bytes-beyond-int64", "negative-size", "record-outside-its-node", "free-exceeds-allocation",
                        "free-before-allocation", "node-lasts-over-a-day"}


def test_summary_lists_them_and_the_numbers_they_bend_carry_a_caution(capsys: pytest.CaptureFixture[str],
                                                                       tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # the caution in one line (a narrower terminal wraps it, as all text)
    path = _trace(tmp_path, NONSENSE)
    assert main(["summary", str(path)]) == 0
    out = capsys.readouterr().out
    assert "  negative-size: 1 (e.g. 'early' has temp_memory_size -1099511627776)\n" in out
    assert "  record-outside-its-node on GPU_0_bfc: 1 (e.g. a record of 'early' at -999,995 us from the node's start)\n" in out
    caution = ("caution: oddities in this trace bend the numbers below: node-lasts-over-a-day (durations), "
               "negative-size (sizes below zero), record-outside-its-node on GPU_0_bfc (peak times), "
               "free-exceeds-allocation on GPU_0_bfc (live bytes), free-before-allocation on GPU_0_bfc (live bytes); "
               "see 'memtrace summary'\n\n")
    for command in ("peak", "timeline", "ops"):
        assert main([command, str(path)]) == 0
        assert capsys.readouterr().out.startswith(caution)
    assert main(["check", str(path), "--max-peak", "GPU_0_bfc=1GiB"]) == 0
    assert capsys.readouterr().out.startswith(caution)
    assert main(["peak", str(TINY / "ties.pbtxt")]) == 0
    assert not capsys.readouterr().out.startswith("caution")


def test_numbers_the_oddities_bend_are_marked_where_they_stand(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    path = _trace(tmp_path, NONSENSE)
    assert main(["peak", str(path)]) == 0
    assert ("GPU_0_bfc: peak 256 B (256 bytes) (bent: free-exceeds-allocation, free-before-allocation) "
            "at -1e+03 ms (bent: record-outside-its-node) into the step (from records)\n") in capsys.readouterr().out
    assert main(["summary", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "step: 9.78e+08 s (977,616,000,000,001 us) (bent: node-lasts-over-a-day), 2 nodes, 0 outputs"
    assert out[11].startswith("GPU_0_bfc    256 B*  -1e+03 ms*  early ")
    assert out[12] == "* bent by record-outside-its-node, free-exceeds-allocation, free-before-allocation: see Oddities"


def test_json_carries_the_oddities_that_bend_its_numbers(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = _trace(tmp_path, NONSENSE)
    expected = [
        {"kind": "node-lasts-over-a-day", "count": 1, "example": "'long' lasts 1.13e+04 days"},
        {"kind": "negative-size", "count": 1, "example": "'early' has temp_memory_size -1099511627776"},
        {"kind": "record-outside-its-node", "allocator": "GPU_0_bfc", "count": 1,
         "example": "a record of 'early' at -999,995 us from the node's start"},
        {"kind": "free-exceeds-allocation", "allocator": "GPU_0_bfc", "count": 1,
         "example": "'early' frees 512 bytes but allocates 256"},
        {"kind": "free-before-allocation", "allocator": "GPU_0_bfc", "count": 1,
         "example": "'long' frees 64 bytes before it allocates any"},
    ]
    for command in (["peak"], ["timeline"], ["ops"], ["summary"], ["check", "--max-peak", "GPU_0_bfc=1GiB"]):
        assert main([*command, str(path), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["oddities"] == expected, command
    for command in (["peak"], ["timeline"], ["ops"], ["check", "--max-peak", "bfc=1GiB"]):
        assert main([*command, str(TINY / "ties.pbtxt"), "--json"]) == 0
        assert "oddities" not in json.loads(capsys.readouterr().out), command  # a sound trace's JSON as it always was


def test_a_peak_beyond_int64_is_unknown_never_wrapped(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    path = _trace(tmp_path, WRAPPING)
    # Its one allocator is beyond int64: nothing is left to report, so the command is refused.
    refused = (f"memtrace: error: {path}: the records of 'GPU_0_bfc' add up to 1.38e+19 bytes, beyond int64: "
               "its live bytes and peak cannot be counted (oddity bytes-beyond-int64)\n")
    for command in ("peak", "timeline", "ops", "frag", "report"):
        assert main([command, str(path), "-o", str(tmp_path / "out")]) == 2
        assert capsys.readouterr().err == refused, command
    assert main(["summary", str(path)]) == 0
    assert "GPU_0_bfc    unknown (beyond int64)     -  -             records " in capsys.readouterr().out
    assert main(["summary", str(path), "--json"]) == 0
    (allocator,) = json.loads(capsys.readouterr().out)["allocators"]
    assert (allocator["peak_bytes"], allocator["peak_delta_bytes"], allocator["peak_time_us"]) == (None, None, None)
    assert allocator["unknown"] == "beyond int64: its records add up to 1.38e+19 bytes"



def test_ops_stars_a_negative_size_and_check_a_bent_measure(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    path = _trace(tmp_path, NONSENSE)
    assert main(["ops", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    [total] = [line for line in out if line.startswith("total")]
    assert total.split() == ["total", "(1", "row)", "2", "-1", "TiB*", "-1", "TiB*", "0", "B", "0", "B", "-1", "TiB*",
                               "0", "B", "256", "B", "0", "B"]
    assert out[-1] == "* below zero: sizes in the trace are negative (oddity negative-size), so this is no size"
    assert main(["check", str(path), "--max-peak", "GPU_0_bfc=1GiB"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[5].startswith("GPU_0_bfc    max_peak  ") and " 256 B (256 B)*  +1024 MiB  PASS" in out[5]
    assert out[6] == "* bent by free-exceeds-allocation, free-before-allocation: see 'memtrace summary'"
    assert main(["check", str(TINY / "ties.pbtxt"), "--max-peak", "bfc=1GiB"]) == 0
    assert "*" not in capsys.readouterr().out


# -- an oddity of one allocator marks that allocator's numbers only ------------------------------

# GPU_0_bfc is sound: 1 KiB from 1 us to 5 us. The node's cpu entry allocates 256 B at 2 us and frees
# 512 B at 4 us (free-exceeds-allocation on cpu).
ONE_ODD_ALLOCATOR = f'''dev_stats {{
  device: "{GPU}"
  node_stats {{
    node_name: "conv"
    all_start_micros: 1000
    all_end_rel_micros: 10
    memory {{
      allocator_name: "GPU_0_bfc"
      allocation_records {{ alloc_micros: 1001 alloc_bytes: 1024 }}
      allocation_records {{ alloc_micros: 1005 alloc_bytes: -1024 }}
    }}
    memory {{
      allocator_name: "cpu"
      allocation_records {{ alloc_micros: 1002 alloc_bytes: 256 }}
      allocation_records {{ alloc_micros: 1004 alloc_bytes: -512 }}
    }}
  }}
}}
'''
CPU_CAUTION = ("caution: oddities in this trace bend the numbers below: free-exceeds-allocation on cpu (live bytes); "
               "see 'memtrace summary'\n\n")
CPU_ODDITY = {"kind": "free-exceeds-allocation", "allocator": "cpu", "count": 1,
              "example": "'conv' frees 512 bytes but allocates 256"}


def test_an_oddity_is_noted_on_the_allocator_it_is_found_on(tmp_path: Path) -> None:
    trace = memtrace.load(_trace(tmp_path, ONE_ODD_ALLOCATOR))
    assert [(o.kind, o.count, o.example, o.allocator) for o in trace.oddities] == [
        ("free-exceeds-allocation", 1, "'conv' frees 512 bytes but allocates 256", "cpu")]


def test_peak_marks_only_the_odd_allocator(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    path = _trace(tmp_path, ONE_ODD_ALLOCATOR)
    assert main(["peak", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(CPU_CAUTION)
    peak_lines = [line for line in out.splitlines() if ": peak " in line]
    assert peak_lines == ["GPU_0_bfc: peak 1 KiB (1,024 bytes) at 1 us into the step (from records)",
                          "cpu: peak 256 B (256 bytes) (bent: free-exceeds-allocation) at 2 us into the step (from records)"]
    # Asked for the sound allocator alone: nothing below is bent, so no caution and no mark.
    assert main(["peak", str(path), "--allocator", "GPU_0_bfc"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("GPU_0_bfc: peak 1 KiB (1,024 bytes) at 1 us into the step (from records)\n")
    assert "bent" not in out and "caution" not in out


def test_peak_json_lists_an_allocators_oddities_in_its_entry(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = _trace(tmp_path, ONE_ODD_ALLOCATOR)
    assert main(["peak", str(path), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    gpu, cpu = document["allocators"]
    assert (gpu["allocator"], "oddities" in gpu) == ("GPU_0_bfc", False)
    assert (cpu["allocator"], cpu["oddities"]) == ("cpu", [CPU_ODDITY])
    assert document["oddities"] == [CPU_ODDITY]
    assert main(["peak", str(path), "--json", "--allocator", "GPU_0_bfc"]) == 0
    assert "oddities" not in capsys.readouterr().out


def test_summary_stars_only_the_odd_allocators_peak(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    path = _trace(tmp_path, ONE_ODD_ALLOCATOR)
    assert main(["summary", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "step: 10 us (10 us), 1 node, 0 outputs"
    assert out[11].split() == ["GPU_0_bfc", "1", "KiB", "1", "us", "conv", "records", "2", "1", "1", "0", "0", "0", "no"]
    assert out[12].split() == ["cpu", "256", "B*", "2", "us", "conv", "records", "2", "1", "1", "0", "0", "0", "no"]
    assert out[13:] == ["* bent by free-exceeds-allocation: see Oddities", "", "Oddities",
                        "  free-exceeds-allocation on cpu: 1 (e.g. 'conv' frees 512 bytes but allocates 256)"]
    assert main(["summary", str(path), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["oddities"] == [CPU_ODDITY]
    assert [a.get("oddities") for a in document["allocators"]] == [None, [CPU_ODDITY]]


def test_timeline_marks_the_odd_allocators_maximum(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    path = _trace(tmp_path, ONE_ODD_ALLOCATOR)
    assert main(["timeline", str(path)]) == 0
    bars, axis = "  " + "█" * 63 + " ", " " * 56  # the last bucket holds the level after the free: 0
    assert capsys.readouterr().out == CPU_CAUTION + (
        "GPU_0_bfc (records, bytes relative to the step start): max 1 KiB, 2 points\n"
        f"{bars}\n  1 us{axis}5 us\n"
        "cpu (records, bytes relative to the step start): max 256 B (bent: free-exceeds-allocation), 2 points\n"
        f"{bars}\n  2 us{axis}4 us\n")


def test_timeline_json_lists_an_allocators_oddities_in_its_entry(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = _trace(tmp_path, ONE_ODD_ALLOCATOR)
    assert main(["timeline", str(path), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [a.get("oddities") for a in document["allocators"]] == [None, [CPU_ODDITY]]
    assert document["oddities"] == [CPU_ODDITY]


def test_timeline_marks_times_records_outside_their_node_bend(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    assert main(["timeline", str(_trace(tmp_path, NONSENSE))]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[2] == ("GPU_0_bfc (records, bytes relative to the step start): max 256 B "
                      "(bent: free-exceeds-allocation, free-before-allocation), 4 points")
    assert out[4].split() == ["-1e+03", "ms", "5", "us", "(bent:", "record-outside-its-node)"]


def test_check_stars_only_the_odd_allocators_budget(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    path = _trace(tmp_path, ONE_ODD_ALLOCATOR)
    budgets = ["--max-peak", "cpu=1KiB", "--max-peak", "GPU_0_bfc=1MiB"]
    assert main(["check", str(path), *budgets]) == 0
    out = capsys.readouterr().out
    assert out.startswith(CPU_CAUTION)
    rows = out.splitlines()[5:9]
    assert [row.split() for row in rows] == [
        ["cpu", "max_peak", "1", "KiB", "(1,024", "B)", "256", "B", "(256", "B)*", "+768", "B", "PASS"],
        ["GPU_0_bfc", "max_peak", "1", "MiB", "(1,048,576", "B)", "1", "KiB", "(1,024", "B)", "+1023", "KiB", "PASS"],
        ["*", "bent", "by", "free-exceeds-allocation:", "see", "'memtrace", "summary'"],
        []]
    assert main(["check", str(path), *budgets, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [b.get("oddities") for b in document["budgets"]] == [[CPU_ODDITY], None]
    assert document["oddities"] == [CPU_ODDITY]
    assert main(["check", str(path), "--max-peak", "GPU_0_bfc=1MiB"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("memtrace check ") and "*" not in out


def test_ops_cautions_about_the_allocators_its_at_peak_covers(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    path = _trace(tmp_path, ONE_ODD_ALLOCATOR)
    assert main(["ops", str(path)]) == 0
    assert capsys.readouterr().out.startswith(CPU_CAUTION)
    assert main(["ops", str(path), "--allocator", "GPU_0_bfc"]) == 0
    assert capsys.readouterr().out.startswith("op type ")
    assert main(["ops", str(path), "--allocator", "GPU_0_bfc", "--json"]) == 0
    assert "oddities" not in json.loads(capsys.readouterr().out)
    assert main(["ops", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["oddities"] == [CPU_ODDITY]


def test_negative_sizes_are_noted_on_their_allocator_and_bend_every_ops_size(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a negative total_bytes on cpu's memory entry and a negative temp_memory_size (the node's)
    text = ONE_ODD_ALLOCATOR.replace('allocator_name: "cpu"', 'allocator_name: "cpu"\n      total_bytes: -4096')
    text = text.replace("    all_end_rel_micros: 10\n", "    all_end_rel_micros: 10\n    memory_stats { temp_memory_size: -8 }\n")
    path = _trace(tmp_path, text)
    # THEN the node's is the whole trace's and the entry's cpu's, each with its count and example
    assert [(o.kind, o.count, o.example, o.allocator) for o in memtrace.load(path).oddities] == [
        ("negative-size", 1, "'conv' has temp_memory_size -8", None),
        ("negative-size", 1, "'conv' has total_bytes -4096", "cpu"),
        ("free-exceeds-allocation", 1, "'conv' frees 512 bytes but allocates 256", "cpu")]
    # AND ops, whose size columns add every allocator up, names both, whichever peaks it covers
    monkeypatch.setenv("COLUMNS", "400")
    assert main(["ops", str(path), "--allocator", "GPU_0_bfc"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("caution: oddities in this trace bend the numbers below: negative-size (sizes below zero); "
                          "see 'memtrace summary'\n\n")
    assert out.endswith("* below zero: sizes in the trace are negative (oddity negative-size), so this is no size\n")
    assert main(["summary", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.endswith("Oddities\n  negative-size: 1 (e.g. 'conv' has temp_memory_size -8)\n"
                        "  negative-size on cpu: 1 (e.g. 'conv' has total_bytes -4096)\n"
                        "  free-exceeds-allocation on cpu: 1 (e.g. 'conv' frees 512 bytes but allocates 256)\n")


def test_an_allocators_name_is_escaped_where_its_oddity_is_named(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    path = _trace(tmp_path, ONE_ODD_ALLOCATOR.replace('"cpu"', '"\\033[31mcpu"'))
    assert main(["peak", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("caution: oddities in this trace bend the numbers below: free-exceeds-allocation on "
                          "\\x1b[31mcpu (live bytes); see 'memtrace summary'\n\n")
    assert "\x1b" not in out
    assert main(["summary", str(path)]) == 0
    out = capsys.readouterr().out
    assert "  free-exceeds-allocation on \\x1b[31mcpu: 1 (e.g. 'conv' frees 512 bytes but allocates 256)\n" in out
    assert "\x1b" not in out


# -- an allocator beyond int64 is unknown; the others are reported ------------------------------

# GPU_0_bfc's records add up to 3 x 2^62 bytes (beyond int64), and it made one buffer of 1000 B in a
# chunk of 1 KiB; cpu is sound: 256 B from 2 us to 4 us.
GPU_BEYOND_INT64 = f'''dev_stats {{
  device: "{GPU}"
  node_stats {{
{_HUGE_NODE}    memory {{
      allocator_name: "cpu"
      allocation_records {{ alloc_micros: 1002 alloc_bytes: 256 }}
      allocation_records {{ alloc_micros: 1004 alloc_bytes: -256 }}
    }}
    output {{
      tensor_description {{
        dtype: DT_FLOAT
        allocation_description {{ requested_bytes: 1000 allocated_bytes: 1024 allocator_name: "GPU_0_bfc" allocation_id: 1 ptr: 4096 }}
      }}
    }}
  }}
}}
'''
GPU_CAUTION = ("caution: oddities in this trace bend the numbers below: bytes-beyond-int64 on GPU_0_bfc "
               "(byte totals unknown); see 'memtrace summary'\n\n")
GPU_REASON = "beyond int64: its records add up to 1.38e+19 bytes"
GPU_ODDITY = {"kind": "bytes-beyond-int64", "allocator": "GPU_0_bfc", "count": 1,
              "example": "the records of 'GPU_0_bfc' add up to 1.38e+19 bytes: a running total of them wraps around"}


def test_peak_shows_an_allocator_beyond_int64_as_unknown_and_the_others_as_they_are(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    path = _trace(tmp_path, GPU_BEYOND_INT64)
    assert main(["peak", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(GPU_CAUTION + "GPU_0_bfc: peak unknown (beyond int64): its records add up to 1.38e+19 bytes\n\n"
                          "cpu: peak 256 B (256 bytes) at 2 us into the step (from records)\n"
                          "  reached by  huge\n")
    assert main(["peak", str(path), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    gpu, cpu = document["allocators"]
    assert gpu == {"allocator": "GPU_0_bfc", "source": "records", "peak_bytes": None, "peak_delta_bytes": None,
                   "baseline_bytes": None, "peak_time_us": None, "peak_node": None, "running_at_peak": None,
                   "reconciliation": None, "live_at_peak": None, "unknown": GPU_REASON, "oddities": [GPU_ODDITY]}
    assert (cpu["allocator"], cpu["peak_bytes"], cpu["peak_node"], "unknown" in cpu, "oddities" in cpu) == (
        "cpu", 256, "huge", False, False)
    assert document["oddities"] == [GPU_ODDITY]


def test_asking_for_an_allocator_beyond_int64_by_name_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = _trace(tmp_path, GPU_BEYOND_INT64)
    refused = (f"memtrace: error: {path}: the records of 'GPU_0_bfc' add up to 1.38e+19 bytes, beyond int64: "
               "its live bytes and peak cannot be counted (oddity bytes-beyond-int64)\n")
    for command in ("peak", "timeline", "ops", "frag"):
        assert main([command, str(path), "--allocator", "GPU_0_bfc"]) == 2
        assert capsys.readouterr() == ("", refused), command
        assert main([command, str(path), "--allocator", "cpu", "--allocator", "GPU_0_bfc"]) == 2
        assert capsys.readouterr() == ("", refused), command
        # The sound allocator alone: its numbers, and no caution about the other one.
        assert main([command, str(path), "--allocator", "cpu"]) == 0
        out, err = capsys.readouterr()
        assert (err, "caution" in out, "beyond int64" in out) == ("", False, False), command


def test_timeline_shows_an_allocator_beyond_int64_as_unknown(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    path = _trace(tmp_path, GPU_BEYOND_INT64)
    assert main(["timeline", str(path)]) == 0
    assert capsys.readouterr().out == GPU_CAUTION + (
        "GPU_0_bfc: live bytes unknown (beyond int64): its records add up to 1.38e+19 bytes\n"
        "cpu (records, bytes relative to the step start): max 256 B, 2 points\n"
        f"  {'█' * 63} \n  2 us{' ' * 56}4 us\n")
    assert main(["timeline", str(path), "--json"]) == 0
    gpu, cpu = json.loads(capsys.readouterr().out)["allocators"]
    assert gpu == {"allocator": "GPU_0_bfc", "source": "records", "baseline_bytes": None, "absolute": None,
                   "points": None, "unknown": GPU_REASON, "oddities": [GPU_ODDITY]}
    assert cpu == {"allocator": "cpu", "source": "records", "baseline_bytes": None, "absolute": False,
                   "points": [[2, 256], [4, 0]]}
    # CSV has no row for an unknown curve: it is left out, and stderr says so.
    assert main(["timeline", str(path), "--csv"]) == 0
    assert capsys.readouterr() == ("allocator,time_us,live_bytes\ncpu,2,256\ncpu,4,0\n",
                                   f"memtrace: GPU_0_bfc left out: its live bytes are unknown ({GPU_REASON})\n")


def test_ops_at_peak_leaves_out_an_allocator_beyond_int64_and_says_so(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    path = _trace(tmp_path, GPU_BEYOND_INT64)
    assert main(["ops", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(GPU_CAUTION)
    assert out.splitlines()[-1] == "sorted by peak_bytes; 'at peak' covers the peaks of: cpu; GPU_0_bfc's is unknown (beyond int64)"
    assert main(["ops", str(path), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert (document["allocators"], document["unknown_peaks"]) == (["cpu"], {"GPU_0_bfc": GPU_REASON})
    assert (document["total"]["at_peak_bytes"], document["total"]["waste_bytes"]) == (256, 24)


def test_frag_measures_the_waste_of_an_allocator_beyond_int64_but_no_moment(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    path = _trace(tmp_path, GPU_BEYOND_INT64)
    assert main(["frag", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:5] == ["GPU_0_bfc (BFC): 1 buffer, requested 1000 B, allocated 1 KiB (1,024 bytes)",
                       "  waste 24 B, 2.3% of allocated",
                       "  in plain words: most waste is rounding up to 256 B, above all in requests of <= 1 KiB",
                       "  BFC model: rounding up to 256 B 24 B (100.0% of the waste), whole chunks handed out unsplit 0 B (0.0%)",
                       "  at the peak: unknown (beyond int64): its records add up to 1.38e+19 bytes"]
    assert "cpu: no output buffer with an allocation id and an allocated size; no internal fragmentation to measure" in out
    assert main(["frag", str(path), "--json"]) == 0
    gpu, cpu = json.loads(capsys.readouterr().out)["allocators"]
    assert (gpu["waste_bytes"], gpu["at_peak"], gpu["external"], gpu["unknown"]) == (24, None, None, GPU_REASON)
    assert (cpu["at_peak"]["replay_live_bytes"], "unknown" in cpu) == (256, False)


def test_check_refuses_a_peak_budget_beyond_int64_and_measures_waste(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    path = _trace(tmp_path, GPU_BEYOND_INT64)
    # A peak budget on it cannot be measured: never a pass, and the other budgets are no excuse.
    for metric in ("max-peak", "max-peak-delta"):
        assert main(["check", str(path), "--max-peak", "cpu=1KiB", f"--{metric}", "GPU_0_bfc=1TiB"]) == 2
        refused = (f"memtrace: error: {path}: {metric.replace('-', '_')} of GPU_0_bfc cannot be measured: "
                   f"its peak is unknown, {GPU_REASON} (oddity bytes-beyond-int64)\n")
        assert capsys.readouterr() == ("", refused)
    # Its waste needs no replay, and the sound allocator's peak is as it is.
    assert main(["check", str(path), "--max-waste", "GPU_0_bfc=2%", "--max-peak", "cpu=1KiB"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert [row.split() for row in out[5:7]] == [["GPU_0_bfc", "max_waste", "2%", "2.34%", "-0.344%", "FAIL"],
                                                 ["cpu", "max_peak", "1", "KiB", "(1,024", "B)", "256", "B", "(256", "B)",
                                                  "+768", "B", "PASS"]]
    assert main(["check", str(path), "--max-peak", "cpu=1KiB"]) == 0
    assert capsys.readouterr().out.startswith("memtrace check ")


def test_summary_json_says_why_a_peak_is_unknown(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["summary", str(_trace(tmp_path, GPU_BEYOND_INT64)), "--json"]) == 0
    gpu, cpu = json.loads(capsys.readouterr().out)["allocators"]
    assert (gpu["peak_bytes"], gpu["unknown"], gpu["oddities"]) == (None, GPU_REASON, [GPU_ODDITY])
    assert (cpu["peak_bytes"], "unknown" in cpu) == (256, False)


def test_peaks_and_unknown_set_an_allocator_beyond_int64_apart(tmp_path: Path) -> None:
    from memtrace.analyses.peak import peaks, peaks_and_unknown
    from memtrace.errors import BeyondInt64Error
    from memtrace.trace.replay import Uncounted, uncounted

    trace = memtrace.load(_trace(tmp_path, GPU_BEYOND_INT64))
    unknown = Uncounted("GPU_0_bfc", "records", 3 * 2.0**62)
    assert (uncounted(trace, "GPU_0_bfc"), uncounted(trace, "cpu")) == (unknown, None)
    found, apart = peaks_and_unknown(trace)
    assert ([p.allocator for p in found], [p.peak_bytes for p in found], apart) == (["cpu"], [256], [unknown])
    found, apart = peaks_and_unknown(trace, ["GPU_0_bfc", "cpu"])
    assert ([p.allocator for p in found], apart) == (["cpu"], [unknown])
    with pytest.raises(BeyondInt64Error):
        peaks(trace)  # every peak, or none


GPU_REFUSED = ("the records of 'GPU_0_bfc' add up to 1.38e+19 bytes, beyond int64: "
               "its live bytes and peak cannot be counted (oddity bytes-beyond-int64)")


def test_report_shows_an_allocator_beyond_int64_as_unknown_and_draws_the_others(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = _trace(tmp_path, GPU_BEYOND_INT64)
    page = tmp_path / "report.html"
    assert main(["report", str(path), "-o", str(page)]) == 0
    assert capsys.readouterr() == ("", "")
    html = page.read_text()
    # Its own section, first, saying why there is nothing to draw; no chart of it.
    assert ('<main>\n<section class="allocator unknown" id="allocator-unknown-0">\n<h2>GPU_0_bfc</h2>\n'
            '<p class="lead">Peak and live bytes unknown: beyond int64: its records add up to 1.38e+19 bytes '
            "(oddity bytes-beyond-int64). A running total of them would wrap around, so there is no chart and no "
            "live set; its waste, which needs no running total, is under Fragmentation.</p>\n</section>\n"
            '<section class="allocator" id="allocator-0">\n<h2>cpu</h2>\n') in html
    assert ('<tr><td class=""><a href="#allocator-unknown-0">GPU_0_bfc</a></td><td class="">records</td>'
            '<td class="num"><span class="none">-</span></td><td class="num">'
            '<span title="beyond int64: its records add up to 1.38e+19 bytes">unknown (beyond int64)</span></td>') in html
    # The sound allocator as usual: one chart, its peak of 256 B.
    assert html.count('<figure class="chart"') == 1 and 'data-peak-bytes="256" data-peak-time-us="2"' in html
    assert "<em>At peak</em> leaves out <code>GPU_0_bfc</code>, whose peak is unknown (beyond int64).</p>" in html
    # Its waste needs no replay: measured; no moment at the peak.
    assert ('<tr><td class="">GPU_0_bfc (BFC)</td><td class="num">1</td><td class="num"><span title="1,000 bytes">1000 B'
            '</span></td><td class="num"><span title="1,024 bytes">1 KiB</span></td><td class="num"><span title="24 bytes">'
            '24 B</span> (2.3%)</td>') in html

    assert main(["report", str(path), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    gpu, cpu = document["allocators"]
    assert gpu == {"allocator": "GPU_0_bfc", "source": "records", "peak_bytes": None, "peak_delta_bytes": None,
                   "baseline_bytes": None, "peak_time_us": None, "peak_node": None, "live_at_peak": None,
                   "opens_on_us": None, "timeline": None, "snapshots": None,
                   "fragmentation": {"bfc": True, "buffers": 1, "requested_bytes": 1000, "allocated_bytes": 1024,
                                     "waste_bytes": 24},
                   "unknown": GPU_REASON}
    assert (cpu["allocator"], cpu["peak_bytes"], cpu["peak_node"], cpu["timeline"]["bytes"], "unknown" in cpu) == (
        "cpu", 256, "huge", [256, 0], False)
    assert [(o["name"], o["at_peak_bytes"], o["waste_bytes"]) for o in document["top_ops"]] == [("huge", 256, 24)]


def test_report_escapes_the_name_of_an_allocator_beyond_int64(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = _trace(tmp_path, GPU_BEYOND_INT64.replace('"GPU_0_bfc"', '"</section><script>x</script>"'))
    page = tmp_path / "report.html"
    assert main(["report", str(path), "-o", str(page)]) == 0
    html = page.read_text()
    assert "<script>x</script>" not in html
    assert ('<section class="allocator unknown" id="allocator-unknown-0">\n'
            "<h2>&lt;/section&gt;&lt;script&gt;x&lt;/script&gt;</h2>\n") in html
    assert '<a href="#allocator-unknown-0">&lt;/section&gt;&lt;script&gt;x&lt;/script&gt;</a>' in html


def test_export_leaves_out_an_allocator_beyond_int64_and_says_so(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = _trace(tmp_path, GPU_BEYOND_INT64)
    assert main(["export", str(path)]) == 0
    out, err = capsys.readouterr()
    left_out = f"GPU_0_bfc left out: its live bytes are unknown ({GPU_REASON})"
    assert err == f"memtrace: {left_out}\n"  # once, in one line
    document = json.loads(out)
    # No process, counter or buffer of it: the sound allocator's memory first, then the device's ops.
    processes = [e["args"]["name"] for e in document["traceEvents"] if e["name"] == "process_name"]
    assert processes == ["memory: cpu", GPU]
    counters = [(e["name"], e["ts"], e["args"]) for e in document["traceEvents"] if e["ph"] == "C"]
    assert counters == [("cpu", 0.0, {"live bytes relative to step start": 0}),
                        ("cpu", 2.0, {"live bytes relative to step start": 256}),
                        ("cpu", 4.0, {"live bytes relative to step start": 0})]
    buffers = [(e["name"], e["pid"], e["ts"], e["dur"], e["args"]["bytes"]) for e in document["traceEvents"]
               if e.get("cat") == "buffer"]
    assert buffers == [("huge", 1, 2.0, 2.0, 256)]
    assert document["otherData"]["left_out"] == f"GPU_0_bfc: its live bytes are unknown ({GPU_REASON})"
    # A sound trace's file says nothing of the kind.
    assert main(["export", str(TINY / "ties.pbtxt")]) == 0
    out, err = capsys.readouterr()
    assert (err, "left_out" in json.loads(out)["otherData"]) == ("", False)


def _base_and_new(tmp_path: Path) -> tuple[Path, Path]:
    """The same step twice: GPU_0_bfc sound in the base (3 x 1 KiB, peak 3 KiB) and beyond int64 in the new."""
    base, new = tmp_path / "base.pbtxt", tmp_path / "new.pbtxt"
    base.write_text(GPU_BEYOND_INT64.replace("4611686018427387904", "1024"))
    new.write_text(GPU_BEYOND_INT64)
    return base, new


def test_diff_lists_an_allocator_beyond_int64_on_either_side_as_unknown(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    base, new = _base_and_new(tmp_path)
    assert main(["diff", str(base), str(new)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split() for line in out[5:7]] == [
        ["GPU_0_bfc", "3", "KiB", "(3,072", "B)", "unknown", "(beyond", "int64)", "unknown", "-"],
        ["cpu", "256", "B", "(256", "B)", "256", "B", "(256", "B)", "+0", "B", "+0%"]]
    # Never a wrapped delta; at-peak bytes cover the peaks known in both traces, so nothing else changed.
    assert out[7:] == [f"  note: GPU_0_bfc's peak is unknown in new ({GPU_REASON}): no change is computed", "",
                       "no op's peak, residual or at-peak bytes changed", "",
                       "new at the new peak: nothing; every allocation there has a counterpart at the base peak"]
    assert main(["diff", str(base), str(new), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    gpu, cpu = document["allocators"]
    assert gpu == {"allocator": "GPU_0_bfc", "base_peak_bytes": 3072, "new_peak_bytes": None, "delta_bytes": None,
                   "delta_fraction": None, "base_peak_delta_bytes": 3072, "new_peak_delta_bytes": None,
                   "weak_baseline": False, "status": "both", "base_baseline_bytes": None, "new_baseline_bytes": None,
                   "exceeds_max_increase": False, "unknown": f"new: {GPU_REASON}",
                   # the base's three 1 KiB chunks live at its peak: one holds the 1000 B tensor, two no tensor
                   # the trace describes (counted at their chunk's size)
                   "base_live_allocated_bytes": 3 * 1024, "base_live_requested_bytes": 1000 + 2 * 1024,
                   "new_live_allocated_bytes": None, "new_live_requested_bytes": None}
    assert (cpu["delta_bytes"], "unknown" in cpu) == (0, False)
    assert (document["ops"], document["new_at_peak"], document["passed"]) == ([], [], None)
    # Unknown in both: each side says so.
    assert main(["diff", str(new), str(new), "--exclude-baseline"]) == 0
    assert (f"  note: GPU_0_bfc's peak is unknown in base ({GPU_REASON}) and in new ({GPU_REASON}): "
            "no change is computed\n") in capsys.readouterr().out
    assert main(["diff", str(new), str(base), "--json"]) == 0
    gpu = json.loads(capsys.readouterr().out)["allocators"][0]
    assert (gpu["base_peak_bytes"], gpu["new_peak_bytes"], gpu["delta_bytes"], gpu["unknown"]) == (
        None, 3072, None, f"base: {GPU_REASON}")


def test_diff_max_increase_cannot_be_measured_on_an_allocator_beyond_int64(capsys: pytest.CaptureFixture[str],
                                                                           tmp_path: Path) -> None:
    from memtrace.errors import UsageError
    from memtrace.testing import assert_no_regression

    base, new = _base_and_new(tmp_path)
    # As check treats a peak budget it cannot measure: a usage error in one line, never a pass.
    refused = (f"memtrace: error: {new}: max_increase of GPU_0_bfc cannot be measured: its peak is unknown, "
               f"{GPU_REASON} (oddity bytes-beyond-int64)\n")
    for first, second in ((base, new), (new, base)):
        assert main(["diff", str(first), str(second), "--max-increase", "1000%"]) == 2
        assert capsys.readouterr() == ("", refused)
    with pytest.raises(UsageError, match="max_increase of GPU_0_bfc cannot be measured"):
        assert_no_regression(base, new, max_increase="1000%")
    # The sound allocator alone is measured.
    assert main(["diff", str(base), str(new), "--max-increase", "5%", "--allocator", "cpu"]) == 0
    assert capsys.readouterr().out.endswith("\nPASS: no allocator's peak grew by more than 5%\n")


def test_batch_records_an_allocator_beyond_int64_with_a_null_peak_and_why(capsys: pytest.CaptureFixture[str],
                                                                          tmp_path: Path) -> None:
    require("pyarrow")
    require("dask")
    from memtrace.many.batch import COLUMNS, analyse_trace

    base, new = _base_and_new(tmp_path)
    rows = analyse_trace(str(new)).rows
    assert rows["runs"][0]["error"] is None and rows["runs"][0]["allocators"] == 2
    gpu, cpu = rows["allocators"]
    assert gpu == {**dict.fromkeys(name for name, _ in COLUMNS["allocators"]), "run": str(new), "allocator": "GPU_0_bfc",
                   "source": "records", "requested_bytes": 1000, "allocated_bytes": 1024, "waste_bytes": 24,
                   "unknown": GPU_REASON}
    assert (cpu["allocator"], cpu["peak_bytes"], cpu["peak_node"], cpu["snapshots"], cpu["unknown"]) == (
        "cpu", 256, "huge", 0, None)
    # No live set for it; the ops' at-peak bytes cover the sound allocator's peak only.
    assert {(r["allocator"], r["by"], r["key"], r["bytes"]) for r in rows["live_at_peak"]} == {
        ("cpu", "scope", "huge", 256), ("cpu", "type", "(unknown)", 256), ("cpu", "node", "huge", 256)}
    assert [(r["name"], r["at_peak_bytes"], r["waste_bytes"]) for r in rows["ops"]] == [("huge", 256, 24)]
    # Named, or the only allocator: the run is refused, as the single-trace commands refuse it.
    named = analyse_trace(str(new), ("GPU_0_bfc",))
    assert (named.error, [len(named.rows[t]) for t in ("allocators", "ops", "live_at_peak")]) == (
        f"{new}: {GPU_REFUSED}", [0, 0, 0])
    assert analyse_trace(str(_trace(tmp_path, WRAPPING))).error == f"{tmp_path / 't.pbtxt'}: {GPU_REFUSED}"

    # The command reads both runs; trend has no point for the unknown peak, as for a run without the allocator.
    out = tmp_path / "tables"
    assert main(["batch", str(base), str(new), "-o", str(out), "--workers", "1"]) == 0
    assert capsys.readouterr().err == ""
    assert main(["trend", str(out), "--json"]) == 0
    allocators = json.loads(capsys.readouterr().out)["allocators"]
    assert [(a["allocator"], [(Path(p["run"]).name, p["peak_bytes"]) for p in a["points"]]) for a in allocators] == [
        ("GPU_0_bfc", [("base.pbtxt", 3072)]), ("cpu", [("base.pbtxt", 256), ("new.pbtxt", 256)])]


def test_report_export_diff_and_batch_refuse_an_allocator_beyond_int64_asked_for_by_name(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    base, new = _base_and_new(tmp_path)
    refused = f"memtrace: error: {new}: {GPU_REFUSED}\n"
    for command in (["report", str(new), "--json"], ["export", str(new)], ["diff", str(base), str(new)]):
        for named in (["GPU_0_bfc"], ["cpu", "GPU_0_bfc"], ["GPU:0"]):
            argv = [*command, *(part for name in named for part in ("--allocator", name))]
            assert main(argv) == 2, argv
            assert capsys.readouterr().err.endswith(refused), argv  # after the line saying what GPU:0 means
        # The sound allocator alone: its numbers, and no word of the other one.
        assert main([*command, "--allocator", "cpu"]) == 0, command
        out, err = capsys.readouterr()
        assert (err, "beyond int64" in out, "GPU_0_bfc" in out) == ("", False, False), command
    # Every allocator beyond int64: nothing would be left, so each is refused without a name too.
    only = _trace(tmp_path, WRAPPING)
    for command in (["report", str(only), "--json"], ["export", str(only)], ["diff", str(only), str(only)]):
        assert main(command) == 2, command
        assert capsys.readouterr() == ("", f"memtrace: error: {only}: {GPU_REFUSED}\n"), command
    require("pyarrow")
    require("dask")
    assert main(["batch", str(new), "-o", str(tmp_path / "tables"), "--workers", "1", "--allocator", "GPU_0_bfc"]) == 1
    assert capsys.readouterr().err == f"memtrace: {new}: {GPU_REFUSED}\n"


def test_constant_columns_stay_one_number_only_while_every_part_is_that_number() -> None:
    from memtrace.read.builder import TraceBuilder, constant

    def column(parts: list[np.ndarray], first: int | None = None) -> np.ndarray:
        builder = TraceBuilder()
        builder._parts["c"] = parts
        return builder._column("c", np.int64, first)

    same = column([constant(0, 3), constant(0, 0), constant(0, 2)], first=0)
    assert same.strides == (0,) and same.tolist() == [0] * 6
    assert column([constant(0, 2), constant(5, 2)]).tolist() == [0, 0, 5, 5]
    after_empty = column([constant(0, 0), constant(7, 2)], first=0)
    assert after_empty.tolist() == [0, 7, 7] and after_empty.strides == (8,)
    assert column([constant(4, 2), np.array([4, 4])]).tolist() == [4, 4, 4, 4]
