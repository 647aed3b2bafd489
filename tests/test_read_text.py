"""The fast text reader: the same model as protobuf's parser on every input, or it steps aside."""

from __future__ import annotations

import gzip
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import text_format
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memtrace.errors import TraceFormatError
from memtrace.read import detect, jobs
from memtrace.read import text as textreader
from memtrace.read import text_jobs as textjobs
from memtrace.read._proto import tf_trace_pb2 as pb
from memtrace.read.dtypes import DATA_TYPE_NAMES

from .conftest import ALEXNET, PTB, REAL_TRACES, TINY
from .fastpaths import DiesInAWorker, Edit, check, damaged, edits, fast, reference, same

WHILE_RNN = PTB.parent / "recorded" / "cpu_while_rnn.pbtxt"  # RunMetadata with partition graphs




# -- real traces ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", REAL_TRACES, ids=lambda p: p.name)
def test_every_real_trace_reads_fast_and_identically(path: Path) -> None:
    check(path)


@pytest.mark.parametrize("path", sorted(TINY.glob("*.pbtxt")), ids=lambda p: p.name)
def test_hand_written_traces_read_identically(path: Path) -> None:
    # Some put a message on one line (`records { alloc_micros: 1 alloc_bytes: 2 }`): protobuf reads those.
    check(path, expect_fast=None)


def test_gzip_text_streams_through_the_fast_reader(tmp_path: Path) -> None:
    path = tmp_path / "t.pbtxt.gz"
    path.write_bytes(gzip.compress(PTB.read_bytes()))
    check(path)
    assert fast(path).source_format == "text+gzip"  # type: ignore[union-attr]


@pytest.mark.parametrize("chunk_bytes", [1, 3000, 50_000])
@pytest.mark.parametrize("path", [PTB, WHILE_RNN], ids=lambda p: p.name)
def test_any_chunk_size_gives_the_same_model(path: Path, chunk_bytes: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Chunks end before a node; small ones make devices, graphs and names span many chunks.
    monkeypatch.setattr(textreader, "CHUNK_BYTES", chunk_bytes)
    check(path)


# -- several processes ----------------------------------------------------------------------------


def _small_chunks(monkeypatch: pytest.MonkeyPatch, chunk_bytes: int) -> None:
    """Chunks of about ``chunk_bytes``, the first one too: it is what the reader sniffed the format
    from, so the sniff shrinks with it, for protobuf's reading as much as for the fast one."""
    monkeypatch.setattr(textreader, "CHUNK_BYTES", chunk_bytes)
    if chunk_bytes < detect.SNIFF_BYTES:
        monkeypatch.setattr(detect, "SNIFF_BYTES", chunk_bytes)
        monkeypatch.setattr(detect, "SNIFF_CHARS", max(1, chunk_bytes // 4))  # (what those bytes hold at least)
    monkeypatch.setattr(jobs, "cores", lambda: 4)  # (jobs are capped at the cores: CI may have one)


@pytest.mark.parametrize("chunk_bytes", [300, 3000, 50_000])
@pytest.mark.parametrize("path", [ALEXNET, PTB, WHILE_RNN], ids=lambda p: p.name)
def test_several_processes_give_the_same_model(path: Path, chunk_bytes: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks read apart, each from the state its start implies, merged in order: the same model."""
    _small_chunks(monkeypatch, chunk_bytes)
    merged: list[int] = []
    monkeypatch.setattr(textjobs, "_merge", lambda read, state, builder, merge=textjobs._merge: (
        merged.append(len(read.recorded.blocks)), merge(read, state, builder))[1])
    check(path, jobs=2)
    assert len(merged) >= 3 and sum(merged) > 0


@pytest.mark.parametrize("path", sorted(TINY.glob("*.pbtxt")), ids=lambda p: p.name)
def test_several_processes_read_hand_written_traces_identically(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _small_chunks(monkeypatch, 100)
    check(path, expect_fast=None, jobs=2)
    assert (fast(path, jobs=2) is None) == (fast(path) is None)


_ODD_FORMS = (  # each applied to every few matches through a real trace: forms laid out again or read as protobuf reads them
    (r"\n(\s+)(all_start_micros: \d+)\n", lambda m: "\n" + "\t" * (len(m.group(1)) // 2) + m.group(2) + " \n"),
    (r"(node_stats) \{\n\s+(node_name:)", r"\1 { \2"),
    (r"(op_start_rel_micros: )(\d+)\n", lambda m: m.group(1) + hex(int(m.group(2))) + "\n"),
    (r'(node_name: )"([^"\\\n\']*)"\n', r"\1'\2'  # a name\n"),
    (r'(timeline_label: )"([^"\\\n]{3})([^"\\\n]*)"\n', r"""\1"\2" '\3'  # in "two" parts\n"""),
    (r"(\n *)(allocation_records) \{\n *(alloc_micros: \d+)\n *(alloc_bytes: -?\d+)\n *\}\n",
     r"\1\2: [\n<\3, \4>\n]\n"),
    (r"\n( *)(memory) \{\n((?:\1  .*\n)*?)\1\}\n", r"\n\1\2 <\n\3\1>\n"),
    (r'(node_name: )"([^"\\\n\']*)"\n', r"\1'#\2'  # and a '#'\n"),
)


@pytest.mark.parametrize(("chunk_bytes", "processes"), [(300, 1), (3000, 2), (50_000, 1)])
def test_odd_forms_scattered_through_a_trace_are_read_as_protobuf_reads_them(
        chunk_bytes: int, processes: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = PTB.read_text()
    for number, (pattern, replacement) in enumerate(_ODD_FORMS):
        hits = [0]

        def every_fifth(m: re.Match[str], replacement: Any = replacement, hits: list[int] = hits,
                        number: int = number) -> str:
            hits[0] += 1
            if hits[0] % 5 != number % 5:
                return m.group(0)
            return replacement(m) if callable(replacement) else m.expand(replacement)

        text = re.sub(pattern, every_fifth, text)
    path = tmp_path / "odd.pbtxt"
    path.write_text(text)
    assert "\t" in text and "0x" in text and "'" in text and "node_stats { node_name" in text
    assert "allocation_records: [" in text and "memory <" in text and "'#" in text
    _small_chunks(monkeypatch, chunk_bytes)
    check(path, jobs=processes)


def _node_lists(text: str) -> str:
    """Each device's nodes in one list, ``node_stats: [{...}, {...}]``."""
    out: list[str] = []
    list_indent, in_node = -1, False  # the indentation of the list open, and whether a node of it is
    for line in text.split("\n"):
        body = line.lstrip(" ")
        indent = len(line) - len(body)
        if in_node and indent == list_indent and body == "}":
            in_node = False
        elif list_indent >= 0 and not in_node and indent <= list_indent:
            if body == "node_stats {":
                out[-1] += ", {"
                in_node = True
                continue
            out[-1] += "]"
            list_indent = -1
        if body == "node_stats {":
            line, list_indent, in_node = " " * indent + "node_stats: [{", indent, True
        out.append(line)
    return "\n".join(out)


_FORMS_THROUGHOUT: list[tuple[str, Callable[[str], str]]] = [  # the other valid forms, on every line they can be
    ("adjacent strings", lambda t: re.sub(r'"((?:[^"\\\n]|\\.)*)"', r"""'' "\1" ''""", t)),
    ("angle brackets", lambda t: re.sub(r"(?m)^( *)\}$", r"\1>", t.replace(" {\n", " <\n"))),
    ("lists of records and dims", lambda t: re.sub(
        r"(?m)^( *)(allocation_records|dim) \{\n((?:\1  .*\n)*?)\1\}$", r"\1\2: [{\n\3\1}]", t)),
    ("node lists", _node_lists),
    ("nodes indented by four", lambda t: re.sub(r"(?m)^( +)", r"\1\1", t)),
    ("four spaces a level, and comments", lambda t: re.sub(r"(?m)^( +)(.*)$", r"\1\1\2  # 'a' {\n\1\1# } a line", t)),
    ("all on one line", lambda t: re.sub(r"\n\s*", " ", t)),
    ("all on one line, in angle brackets", lambda t: re.sub(r"\n\s*", " ", t).replace("{", "<").replace("}", ">")),
    ("a # in every string", lambda t: re.sub(r'"((?:[^"\\\n]|\\.)*)"', r"""'#\1' "#"  # '#'""", t)),
]
_CHANGES_THE_STRINGS = {"a # in every string"}


@pytest.mark.parametrize(("chunk_bytes", "processes"), [(200, 1), (997, 2), (40_000, 1), (40_000, 2)])
@pytest.mark.parametrize("form", [form for form, _ in _FORMS_THROUGHOUT])
@pytest.mark.parametrize("path", [ALEXNET, WHILE_RNN], ids=lambda p: p.name)
def test_each_form_throughout_a_trace_reads_fast_and_as_protobuf_reads_it(
        path: Path, form: str, chunk_bytes: int, processes: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Small chunks cut inside the forms (strings in parts, lists, '<...>', lines of any length);
    read in one process or two, the model is protobuf's."""
    rewrite = dict(_FORMS_THROUGHOUT)[form]
    odd = tmp_path / "odd.pbtxt"
    odd.write_text(rewrite(path.read_text()))
    assert odd.read_text() != path.read_text()
    _small_chunks(monkeypatch, chunk_bytes)
    check(odd, jobs=processes)
    if form not in _CHANGES_THE_STRINGS:
        assert fast(odd, jobs=processes).same_content(reference(path))  # type: ignore[union-attr]


@pytest.mark.parametrize(("chunk_bytes", "processes"), [(300, 1), (3000, 2)])
@pytest.mark.parametrize("path", [PTB, WHILE_RNN], ids=lambda p: p.name)
def test_a_trace_indented_with_tabs_throughout_is_cut_and_read_fast(path: Path, chunk_bytes: int, processes: int,
                                                                     tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tabbed = tmp_path / "tabs.pbtxt"
    tabbed.write_text(re.sub(r"(?m)^((?:  )+)", lambda m: "\t" * (len(m.group(1)) // 2), path.read_text()))
    _small_chunks(monkeypatch, chunk_bytes)
    check(tabbed, jobs=processes)


@pytest.mark.parametrize("long_line_bytes", [0, 1 << 30], ids=["findall", "a-match-at-a-time"])
@pytest.mark.parametrize(("chunk_bytes", "processes"), [(211, 1), (4001, 2)])
def test_a_trace_on_one_line_streams_laid_out_again(long_line_bytes: int, chunk_bytes: int, processes: int,
                                                    tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No line to cut before: the text goes through the layout piece by piece (each piece ends
    inside a token, a string, between a string's parts), and its own lines are cut."""
    from memtrace.read import text_layout

    laid_out: list[int] = []
    monkeypatch.setattr(text_layout, "_LONG_LINE_BYTES", long_line_bytes)
    monkeypatch.setattr(textreader, "_laid_out", lambda layout, text, *rest, lay=textreader._laid_out: (
        laid_out.append(len(text)), (yield from lay(layout, text, *rest)))[1])
    by_findall: list[bool] = []
    monkeypatch.setattr(text_layout.Layout, "_lay_out_line_start", lambda self, text, start,
                        lay=text_layout.Layout._lay_out_line_start: (by_findall.append(lay(self, text, start)),
                                                                     by_findall[-1])[1])
    one_line = tmp_path / "one-line.pbtxt"
    parts = re.sub(r'"([^"\\\n]{2})', lambda m: f"""'' "{m.group(1)}" 'x' \"""", ALEXNET.read_text())  # "ab" 'x' "..."
    one_line.write_text(re.sub(r"\n\s*", " ", parts))
    _small_chunks(monkeypatch, chunk_bytes)
    check(one_line, jobs=processes)
    assert len(laid_out) == 1 and laid_out[0] < 3 * chunk_bytes  # once, from a piece or two in, to the end
    assert any(by_findall) == (long_line_bytes == 0)


@pytest.mark.parametrize("processes", [1, 2])
@pytest.mark.parametrize(("opener", "closer", "valid"), [("<", ">", True), ("<", "}", False), ("{", ">", False)])
def test_a_device_ends_with_the_mark_it_began_with_across_chunks(opener: str, closer: str, valid: bool, processes: int,
                                                                 tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """'<' pairs with '>' and '{' with '}' however many chunks lie between; read apart, the chunk
    that ends the device cannot see how it began, and the merge checks the end it noted."""
    _small_chunks(monkeypatch, 100)
    noted: list[tuple[int, int]] = []
    monkeypatch.setattr(textjobs, "_merge", lambda read, state, builder, merge=textjobs._merge: (
        noted.extend(read.state.assumed_closes), merge(read, state, builder))[1])
    node = '  node_stats {\n    node_name: "n%d"\n    all_start_micros: %d\n  }\n'
    nodes = "".join(node % (i, 10 + i) for i in range(12))
    path = tmp_path / "marks.pbtxt"
    path.write_text(f'dev_stats {opener}\n  device: "/cpu:0"\n{nodes}{closer}\ndev_stats {{\n{nodes}}}\n')
    check(path, expect_fast=valid, jobs=processes)
    if processes > 1:
        assert (0, ord(closer)) in noted


def test_a_device_named_after_its_nodes_in_a_later_chunk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The name of the device a chunk inherits, and a second name for it, are judged across chunks."""
    _small_chunks(monkeypatch, 100)
    node = '  node_stats {\n    node_name: "n%d"\n    all_start_micros: %d\n  }\n'
    nodes = "".join(node % (i, 10 + i) for i in range(8))
    path = tmp_path / "late.pbtxt"
    path.write_text("dev_stats {\n" + nodes + '  device: "/cpu:0"\n}\ndev_stats {\n' + nodes + '  device: "/gpu:0"\n}\n')
    check(path, jobs=2)
    assert list(fast(path, jobs=2).devices.name) == ["/cpu:0", "/gpu:0"]  # type: ignore[union-attr]
    path.write_text("dev_stats {\n" + '  device: "/cpu:0"\n' + nodes + '  device: "/cpu:1"\n}\n')
    check(path, expect_fast=False, jobs=2)  # named twice: protobuf keeps the last, the fast readers step aside


def test_a_chunk_whose_assumed_start_is_wrong_is_left_to_protobuf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A node line at node depth where the text is not inside a device: the merge sees it and steps aside."""
    _small_chunks(monkeypatch, 60)
    path = tmp_path / "odd.pbtxt"
    path.write_text("dev_stats {\n  node_stats {\n    node_name: \"a\"\n  }\n}\n"
                    "# the next line sits at node depth, outside any device\n  node_stats {\n  }\n")
    check(path, expect_fast=False, jobs=2)


def test_chunks_a_dead_worker_leaves_are_read_in_the_main_process(monkeypatch: pytest.MonkeyPatch) -> None:
    _small_chunks(monkeypatch, 50_000)
    monkeypatch.setattr(textjobs, "_read_apart", DiesInAWorker(textjobs._read_apart))
    here: list[int] = []
    monkeypatch.setattr(textjobs, "read_chunk", lambda chunk, state, builder, line, read=textjobs.read_chunk: (
        here.append(len(chunk)), read(chunk, state, builder, line))[1])
    check(PTB, jobs=2)
    assert len(here) > 3 and sum(here) == PTB.stat().st_size


def test_jobs_are_at_most_one_a_core_and_one_chunk_needs_none(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(textjobs, "read_in_parallel", lambda *a, read=textjobs.read_in_parallel: (
        calls.append(a[-1]), read(*a))[1])
    monkeypatch.setattr(jobs, "cores", lambda: 3)
    monkeypatch.setattr(textreader, "CHUNK_BYTES", 50_000)
    assert fast(PTB, jobs=8) is not None and calls == [3]
    assert fast(ALEXNET, jobs=8) is not None and calls == [3]  # 174 KB: one chunk, read here


def test_the_command_reads_with_several_processes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from memtrace.cli import main

    _small_chunks(monkeypatch, 50_000)
    calls: list[int] = []
    monkeypatch.setattr(textjobs, "read_in_parallel", lambda *a, read=textjobs.read_in_parallel: (
        calls.append(a[-1]), read(*a))[1])
    assert main(["peak", str(PTB), "--json", "-j", "2"]) == 0
    parallel = capsys.readouterr().out
    assert calls == [2]
    assert main(["peak", str(PTB), "--json"]) == 0
    assert capsys.readouterr().out == parallel and calls == [2]
    assert main(["peak", str(PTB), "-j", "0"]) == 2
    assert "must be at least 1" in capsys.readouterr().err


def test_seed_repeated_is_one_valid_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(textreader, "CHUNK_BYTES", 200_000)
    path = tmp_path / "ptb3.pbtxt"
    path.write_bytes(PTB.read_bytes() * 3)
    check(path)
    assert len(reference(path).nodes) == 3 * len(reference(PTB).nodes)


def test_dtype_table_matches_the_schema() -> None:
    assert DATA_TYPE_NAMES == {v: k for k, v in pb.DataType.items()}


# -- text format variants: recognised ones agree, the rest go to protobuf ---------------------------

BASE = '''dev_stats {
  device: "/job:localhost/replica:0/task:0/device:GPU:0"
  node_stats {
    node_name: "conv1/Conv2D"
    all_start_micros: 1000
    op_start_rel_micros: 2
    op_end_rel_micros: 30
    all_end_rel_micros: 31
    memory {
      allocator_name: "GPU_0_bfc"
      total_bytes: 4096
      peak_bytes: 4096
      allocator_bytes_in_use: 9000
      allocation_records {
        alloc_micros: 1005
        alloc_bytes: 4096
      }
      allocation_records {
        alloc_micros: 1020
        alloc_bytes: -1024
      }
    }
    output {
      slot: 1
      tensor_description {
        dtype: DT_FLOAT
        shape {
          dim {
            size: 32
          }
          dim {
            size: -1
            name: "batch"
          }
        }
        allocation_description {
          requested_bytes: 3000
          allocated_bytes: 3072
          allocator_name: "GPU_0_bfc"
          allocation_id: 7
          has_single_reference: true
          ptr: 140193369704128
        }
      }
    }
    timeline_label: "[GPU_0_bfc 4.0KB 4.0KB] conv1/Conv2D = Conv2D(x, conv1/w/read:1, ^init)"
    scheduled_micros: 990
    thread_id: 3
    memory_stats {
      temp_memory_size: 1024
      persistent_memory_size: 8
      persistent_tensor_alloc_ids: 3
      persistent_tensor_alloc_ids: 4
    }
  }
  node_stats {
    node_name: "relu"
    all_start_micros: 1040
    op_end_rel_micros: 5
    all_end_rel_micros: 6
    output {
      tensor_description {
        dtype: DT_HALF
        shape {
          unknown_rank: true
        }
        allocation_description {
          requested_bytes: 64
          allocator_name: "cpu"
        }
      }
    }
    timeline_label: "relu = Relu(conv1/Conv2D:1)"
  }
}
dev_stats {
  device: "/job:localhost/replica:0/task:0/device:GPU:0/stream:all"
  node_stats {
    node_name: "conv1/Conv2D:Conv2D"
    all_start_micros: 1001
    op_end_rel_micros: 20
    all_end_rel_micros: 20
    timeline_label: "Conv2D"
  }
}
'''


def _move_device_last(text: str) -> str:
    lines = text.split("\n")
    device = lines.pop(1)
    end = lines.index("}")
    lines.insert(end, device)
    return "\n".join(lines)


def _reverse_scalars(text: str) -> str:
    """Reverse the order of each run of consecutive scalar lines (fields in any order)."""
    out: list[str] = []
    run: list[str] = []
    for line in text.split("\n"):
        if ": " in line and not line.endswith("{"):
            run.append(line)
            continue
        out.extend(reversed(run))
        run = []
        out.append(line)
    return "\n".join(out + run[::-1])


VARIANTS: list[tuple[str, Callable[[str], str], bool]] = [
    ("as printed", lambda t: t, True),
    ("device named after its nodes", _move_device_last, True),
    ("fields in another order", _reverse_scalars, True),
    ("colon before a message", lambda t: t.replace("memory {", "memory: {"), True),
    ("enum by number", lambda t: t.replace("dtype: DT_FLOAT", "dtype: 1"), True),
    ("enum by an unknown number", lambda t: t.replace("dtype: DT_FLOAT", "dtype: 400"), True),
    ("bool as t and 1", lambda t: t.replace("has_single_reference: true", "has_single_reference: t").replace(
        "unknown_rank: true", "unknown_rank: 1"), True),
    ("bool as False", lambda t: t.replace("has_single_reference: true", "has_single_reference: False"), True),
    ("comments and blank lines", lambda t: "# a trace\n\n" + t.replace("  node_stats {\n", "# node\n\n  node_stats {\n", 1) + "\n", True),
    ("indented comment", lambda t: t.replace("  node_stats {\n", "  # node\n  node_stats {\n", 1), True),
    ("comment after a string", lambda t: t.replace('"relu"', '"re#lu"  # a "name"'), True),
    ("comment holding quotes", lambda t: t.replace("total_bytes: 4096", 'total_bytes: 4096 # "x\\" y'), True),
    ("comment after a brace", lambda t: t.replace("memory {", "memory {  # the GPU"), True),
    ("comment after two strings", lambda t: t.replace('"relu"', '"re" "lu"  # two'), True),
    ("octal escapes", lambda t: t.replace('"relu"', '"r\\303\\251lu"'), True),
    ("quote and newline escapes", lambda t: t.replace('"relu"', '"re\\"l\\nu\\\\"'), True),
    ("raw UTF-8", lambda t: t.replace('"relu"', '"rélu ∑"'), True),
    ("int64 extremes", lambda t: t.replace("alloc_bytes: -1024", "alloc_bytes: -9223372036854775808").replace(
        "total_bytes: 4096", "total_bytes: 9223372036854775807"), True),
    ("uint64 extreme", lambda t: t.replace("ptr: 140193369704128", "ptr: 18446744073709551615"), True),
    ("negative zero", lambda t: t.replace("slot: 1", "slot: -0"), True),
    ("thread names and referenced tensors", lambda t: t.replace(
        '  node_stats {\n    node_name: "relu"',
        '  thread_names {\n    key: 3\n    value: "pool-1"\n  }\n  node_stats {\n    node_name: "relu"\n'
        '    referenced_tensor {\n      requested_bytes: 4\n      allocator_name: "cpu"\n    }'), True),
    ("nanoseconds", lambda t: t.replace("    scheduled_micros: 990\n", "    scheduled_micros: 990\n"
                                        "    all_start_nanos: 1000123\n    op_end_rel_nanos: 29999\n"
                                        "    all_end_rel_nanos: 31000\n    scheduled_nanos: 990001\n"), True),
    ("single quotes", lambda t: t.replace('"relu"', "'relu'"), True),
    ("single quotes with escapes", lambda t: t.replace('"relu"', "'re\\'l\\\"u'"), True),
    ("comment after a single-quoted string", lambda t: t.replace('"relu"', "'relu'  # a name"), True),
    ("hex uint64 extreme", lambda t: t.replace("ptr: 140193369704128", "ptr: 0xFFFFFFFFFFFFFFFF"), True),
    ("hex beyond int32", lambda t: t.replace("slot: 1", "slot: 0x80000000"), False),
    ("a message on one line", lambda t: re.sub(r"memory \{\n\s*", "memory { ", t, count=1), True),
    ("a blank after a value", lambda t: t.replace('"relu"\n', '"relu" \n'), True),
    ("blanks before a value", lambda t: t.replace('node_name: "relu"', 'node_name:  \t"relu"'), True),
    ("tabs and blanks mixed", lambda t: t.replace("    node_name", "\t \tnode_name"), True),
    ("adjacent strings", lambda t: t.replace('"relu"', '"re" "lu"'), True),
    ("adjacent strings in both quotes", lambda t: t.replace('"relu"', "'r' \"e\"'l'\t\"u\""), True),
    ("adjacent strings each escaped", lambda t: t.replace('"relu"', "\"r\\303\" '\\251lu'"), True),  # é in two parts
    ("an octal escape then digits", lambda t: t.replace('"relu"', '"\\1" "23"'), True),  # \x01 then "23", not "\123"
    ("adjacent strings on two lines", lambda t: t.replace('"relu"', '"re"\n      "lu"'), True),
    ("adjacent strings around a comment", lambda t: t.replace('"relu"', '"re"  # "x\n  \'lu\''), True),
    ("adjacent strings after a separator", lambda t: t.replace('"relu"', '"re", "lu"'), False),
    ("a # in a single-quoted string", lambda t: t.replace('"relu"', "'re#lu'"), True),
    ("a # in single quotes, then a comment", lambda t: t.replace('"relu"', "'re#lu' # it's a 'name'"), True),
    ("a # in both quotes, then a comment", lambda t: t.replace('"relu"', "'r#e' \"#l'u\" # \"a\""), True),
    ("hex integer", lambda t: t.replace("total_bytes: 4096", "total_bytes: 0x1000"), True),
    ("octal integer", lambda t: t.replace("total_bytes: 4096", "total_bytes: 010000"), True),
    ("trailing comment", lambda t: t.replace("total_bytes: 4096", "total_bytes: 4096  # bytes"), True),
    ("angle brackets", lambda t: t.replace("memory_stats {", "memory_stats <").replace(
        "      persistent_tensor_alloc_ids: 4\n    }", "      persistent_tensor_alloc_ids: 4\n    >"), True),
    ("angle brackets throughout", lambda t: re.sub(r"(?m)^( *)\}$", r"\1>", t.replace(" {\n", " <\n")), True),
    ("angle brackets on one line", lambda t: re.sub(r"\n\s*", " ", t.replace("{", "<").replace("}", ">")), True),
    ("angle bracket closed by a brace", lambda t: t.replace("memory_stats {", "memory_stats <"), False),
    ("brace closed by an angle bracket", lambda t: t.replace(
        "      persistent_tensor_alloc_ids: 4\n    }", "      persistent_tensor_alloc_ids: 4\n    >"), False),
    ("device closed by an angle bracket", lambda t: t[:-2] + ">\n", False),
    ("list syntax", lambda t: t.replace("persistent_tensor_alloc_ids: 3\n      persistent_tensor_alloc_ids: 4",
                                        "persistent_tensor_alloc_ids: [3, 4]"), True),
    ("list over lines with comments", lambda t: t.replace(
        "persistent_tensor_alloc_ids: 3\n      persistent_tensor_alloc_ids: 4",
        "persistent_tensor_alloc_ids: [  # ids\n  3 ,\n0x4 ]  # done"), True),
    ("empty list", lambda t: t.replace("persistent_tensor_alloc_ids: 3\n", "persistent_tensor_alloc_ids: []\n"), True),
    ("list of messages", lambda t: re.sub(
        r"allocation_records \{\s*alloc_micros: (\d+)\s*alloc_bytes: (\d+)\s*\}\s*"
        r"allocation_records \{\s*alloc_micros: (\d+)\s*alloc_bytes: (-\d+)\s*\}",
        r"allocation_records: [{alloc_micros: \1 alloc_bytes: \2}, <alloc_micros: \3, alloc_bytes: \4;>]", t), True),
    ("list of messages without a colon", lambda t: t.replace("    output {", "    output [{", 1).replace(
        "          ptr: 140193369704128\n        }\n      }\n    }", "          ptr: 140193369704128\n        }\n      }\n    }]"), True),
    ("list of nodes", lambda t: t.replace('  node_stats {\n    node_name: "conv1/Conv2D"', '  node_stats: [{\n'
                                          '    node_name: "conv1/Conv2D"', 1).replace(
        '  }\n  node_stats {\n    node_name: "relu"', '  }, {\n    node_name: "relu"').replace(
        '    timeline_label: "relu = Relu(conv1/Conv2D:1)"\n  }', '    timeline_label: "relu = Relu(conv1/Conv2D:1)"\n  }]'), True),
    ("list of a singular field", lambda t: t.replace("slot: 1", "slot: [1]"), False),
    ("list of a singular message", lambda t: t.replace("memory_stats {", "memory_stats: [{").replace(
        "      persistent_tensor_alloc_ids: 4\n    }", "      persistent_tensor_alloc_ids: 4\n    }]"), False),
    ("list of numbers without a colon", lambda t: t.replace(
        "persistent_tensor_alloc_ids: 3\n      persistent_tensor_alloc_ids: 4", "persistent_tensor_alloc_ids [3, 4]"), False),
    ("list with a comma at its end", lambda t: t.replace(
        "persistent_tensor_alloc_ids: 3\n      persistent_tensor_alloc_ids: 4", "persistent_tensor_alloc_ids: [3, 4,]"), False),
    ("list without commas", lambda t: t.replace(
        "persistent_tensor_alloc_ids: 3\n      persistent_tensor_alloc_ids: 4", "persistent_tensor_alloc_ids: [3 4]"), False),
    ("list of messages holding scalars", lambda t: t.replace(
        "persistent_tensor_alloc_ids: 3\n      persistent_tensor_alloc_ids: 4", "persistent_tensor_alloc_ids: [{}]"), False),
    ("fields ended by , and ;", lambda t: t.replace("slot: 1", "slot: 1,").replace("total_bytes: 4096", "total_bytes: 4096;")
     .replace("      }\n      allocation_records {", "      };\n      allocation_records {"), True),
    ("a field ended twice", lambda t: t.replace("slot: 1", "slot: 1,;"), False),
    ("a message begun with a separator", lambda t: t.replace("memory {", "memory { ,"), False),
    ("one line", lambda t: re.sub(r"\n\s*", " ", t), True),
    ("tabs", lambda t: t.replace("  ", "\t"), True),
    ("CRLF", lambda t: t.replace("\n", "\r\n"), True),
    ("blanks at line ends", lambda t: t.replace("\n", " \t \n"), True),
    ("a lone CR", lambda t: t.replace("slot: 1\n", "slot: 1\r"), True),
    ("no space after colon", lambda t: t.replace("slot: 1", "slot:1"), True),
    ("unknown field", lambda t: t.replace("slot: 1", "slot: 1\n      bogus: 2"), False),
    ("extension", lambda t: t.replace("slot: 1", "[ext.field]: 1"), False),
    ("scalar twice", lambda t: t.replace("slot: 1", "slot: 1\n      slot: 2"), False),
    ("message twice", lambda t: t.replace("    memory_stats {", "    memory_stats {\n    }\n    memory_stats {"), False),
    ("int64 overflow", lambda t: t.replace("total_bytes: 4096", "total_bytes: 9223372036854775808"), False),
    ("uint64 overflow", lambda t: t.replace("ptr: 140193369704128", "ptr: 18446744073709551616"), False),
    ("negative unsigned", lambda t: t.replace("thread_id: 3", "thread_id: -3"), False),
    ("int32 overflow", lambda t: t.replace("slot: 1", "slot: 2147483648"), False),
    ("bad bool", lambda t: t.replace("has_single_reference: true", "has_single_reference: yes"), False),
    ("unknown enum name", lambda t: t.replace("dtype: DT_FLOAT", "dtype: DT_NOPE"), False),
    ("unclosed message", lambda t: t[: t.rindex("}")], False),
    ("extra close", lambda t: t + "}\n", False),
    ("wrong indentation", lambda t: t.replace("    node_name: \"relu\"", "     node_name: \"relu\""), True),
    ("junk in the indentation", lambda t: t.replace("    node_name: \"relu\"", "  xxnode_name: \"relu\""), False),
]


@pytest.mark.parametrize(("transform", "expect_fast"), [(t, f) for _, t, f in VARIANTS], ids=[n for n, _, _ in VARIANTS])
def test_text_variant(transform: Callable[[str], str], expect_fast: bool, tmp_path: Path) -> None:
    path = tmp_path / "t.pbtxt"
    path.write_bytes(transform(BASE).encode())
    check(path, expect_fast)


def test_invalid_utf8_in_a_string_is_left_to_protobuf(tmp_path: Path) -> None:
    path = tmp_path / "t.pbtxt"
    path.write_bytes(BASE.encode().replace(b'"relu"', b'"r\xffelu"'))
    check(path, False)


def test_run_metadata_graphs_between_step_stats_fields(tmp_path: Path) -> None:
    graph = 'partition_graphs {\n  node {\n    name: "relu"\n    op: "Relu"\n    input: "conv1/Conv2D:1"\n  }\n}\n'
    step_stats = "step_stats {\n" + "".join("  " + line + "\n" if line else "\n" for line in BASE.split("\n")[:-1]) + "}\n"
    path = tmp_path / "rm.pbtxt"
    path.write_text(graph + step_stats + "cost_graph {\n}\n" + graph)
    check(path)
    trace = fast(path)
    assert trace is not None and trace.message == "RunMetadata" and trace.graph_source == "partition_graphs"
    assert len(trace.graph) == 2  # type: ignore[arg-type]


# -- generated and fuzzed traces ------------------------------------------------------------------

_names = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_int64 = st.integers(-(2**63), 2**63 - 1)
_micros = st.integers(-(2**52), 2**52)  # times scaled to nanoseconds must stay in int64
_nanos = st.integers(-(2**62) + 1, 2**62 - 1)  # 146 years or more is refused (tests/test_read_hostile.py)


@st.composite
def step_stats(draw: st.DrawFn) -> pb.StepStats:
    message = pb.StepStats()
    for _ in range(draw(st.integers(0, 3))):
        device = message.dev_stats.add()
        device.device = draw(st.sampled_from(["/job:w/device:GPU:0", "/device:CPU:0", "", "/gpu:0/stream:7"]))
        for _ in range(draw(st.integers(0, 3))):
            node = device.node_stats.add()
            node.node_name = draw(_names)
            node.all_start_micros = draw(_micros)
            node.op_start_rel_micros = draw(_micros)
            node.op_end_rel_micros = draw(_micros)
            node.all_end_rel_micros = draw(_micros)
            node.scheduled_micros = draw(_micros)
            node.thread_id = draw(st.integers(0, 2**32 - 1))
            node.timeline_label = draw(st.sampled_from(["", "a = Add(b, c:1, ^d)", "[cpu 1B 1B] x = Op()"]) | _names)
            if draw(st.booleans()):
                node.all_start_nanos = draw(_nanos)
                node.op_end_rel_nanos = draw(_nanos)
                node.scheduled_nanos = draw(_nanos)
            for _ in range(draw(st.integers(0, 2))):
                memory = node.memory.add()
                memory.allocator_name = draw(st.sampled_from(["GPU_0_bfc", "cpu", ""]))
                memory.total_bytes = draw(_int64)
                memory.allocator_bytes_in_use = draw(_int64)
                for _ in range(draw(st.integers(0, 3))):
                    record = memory.allocation_records.add()
                    record.alloc_micros = draw(_micros)
                    record.alloc_bytes = draw(_int64)
            for _ in range(draw(st.integers(0, 2))):
                output = node.output.add()
                output.slot = draw(st.integers(-(2**31), 2**31 - 1))
                if draw(st.booleans()):
                    tensor = output.tensor_description
                    tensor.dtype = draw(st.sampled_from([0, 1, 19, 101, 500]))  # 500: newer than our schema
                    if draw(st.booleans()):
                        tensor.shape.unknown_rank = draw(st.booleans())
                        for size in draw(st.lists(_int64, max_size=3)):
                            tensor.shape.dim.add().size = size
                    allocation = tensor.allocation_description
                    allocation.requested_bytes = draw(_int64)
                    allocation.allocated_bytes = draw(_int64)
                    allocation.allocator_name = draw(st.sampled_from(["GPU_0_bfc", "cpu", ""]))
                    allocation.allocation_id = draw(_int64)
                    allocation.has_single_reference = draw(st.booleans())
                    allocation.ptr = draw(st.integers(0, 2**64 - 1))
            if draw(st.booleans()):
                node.memory_stats.temp_memory_size = draw(_int64)
                node.memory_stats.persistent_memory_size = draw(_int64)
                node.memory_stats.persistent_tensor_alloc_ids.extend(draw(st.lists(_int64, max_size=3)))
    return message


_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_SETTINGS
@given(message=step_stats(), as_utf8=st.booleans())
def test_generated_traces_read_identically(message: pb.StepStats, as_utf8: bool, tmp_path: Path) -> None:
    if not message.dev_stats:
        return  # an empty text file is not a trace
    path = tmp_path / "g.pbtxt"
    path.write_text(text_format.MessageToString(message, as_utf8=as_utf8), encoding="utf-8")
    check(path, expect_fast=None)
    assert fast(path) is not None  # protobuf's own printer writes nothing the fast reader leaves


_VALID = BASE.encode()  # as printed, so that the fast reader has to judge every damage itself


@_SETTINGS
@given(changes=edits(len(_VALID)))
def test_damaged_text_is_read_identically_or_left_to_protobuf(changes: list[Edit], tmp_path: Path) -> None:
    path = tmp_path / "d.pbtxt"
    path.write_bytes(damaged(_VALID, changes))
    check(path, expect_fast=None)


@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize("where", ["a comment", "a string"])
def test_a_byte_that_is_not_utf8_past_the_first_chunk_is_refused_as_protobuf_refuses_it(
        where: str, jobs: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # protobuf decodes the whole text first: one such byte anywhere, a comment's included, and it is no text.
    # The fast reader had accepted it in a comment (its chunks never see comments) when past the first chunk.
    _small_chunks(monkeypatch, 50)
    text = _VALID * 3
    cut = text.index(b"\n", len(text) // 2) + 1
    path = tmp_path / "d.pbtxt"
    path.write_bytes(text[:cut] + (b"# caf\xe9\n" if where == "a comment" else b'  node_stats { node_name: "caf\xe9" }\n')
                     + text[cut:])
    assert fast(path, jobs) is None  # stepped aside
    with pytest.raises(TraceFormatError) as refused:
        reference(path)
    assert str(refused.value) == f"{path}: is neither protobuf text nor a valid binary protobuf message (truncated or not a trace?)"
    # ... while the same character in valid UTF-8, cut between two pieces read, is text as before
    path.write_bytes(text[:cut] + "# café\n".encode() + text[cut:])
    monkeypatch.setattr(textreader, "CHUNK_BYTES", cut + len("# caf") + 1)  # (the stream read ends inside the 'é')
    check(path, expect_fast=True, jobs=jobs)


def test_the_whole_alexnet_text_without_protobuf_imports_reads_fast() -> None:
    assert fast(ALEXNET) is not None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=edits(len(_VALID)), chunk_bytes=st.integers(20, 200))
@example(changes=[(23, 0, b"\x00")], chunk_bytes=20)  # a NUL just past a sniff that had shrunk alone
@example(changes=[(225, 1, b"")], chunk_bytes=20)  # a name cut short: a field the schema does not have
@example(changes=[(71, 1, b""), (171, 0, b"\x80")], chunk_bytes=20)  # that, then a byte that is not UTF-8: no text at all
@example(changes=[(346, 0, b"#\x80")], chunk_bytes=20)  # a byte that is not UTF-8 in a comment past the first chunk
def test_damaged_text_in_several_processes_is_read_identically_or_left_to_protobuf(
        changes: list[Edit], chunk_bytes: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _small_chunks(monkeypatch, chunk_bytes)
    path = tmp_path / "d.pbtxt"
    path.write_bytes(damaged(_VALID * 3, changes))
    check(path, expect_fast=None, jobs=2)
    one, several = _fast_or_refused(path), _fast_or_refused(path, jobs=2)
    if isinstance(one, str) or isinstance(several, str):  # refused (an unknown field): as protobuf refuses it
        assert one in (several, None) or several is None
        with pytest.raises(TraceFormatError) as said:
            reference(path)
        assert str(said.value) in (one, several)
        return
    assert (one is None) == (several is None) and (one is None or one.same_content(several))  # type: ignore[arg-type]


def _fast_or_refused(path: Path, jobs: int = 1) -> Any:
    """The fast reader's model, None where it steps aside, or the line it refuses the trace with."""
    try:
        return fast(path, jobs)
    except TraceFormatError as refused:
        return str(refused)


_ONE_LINE = re.sub(rb"\n\s*", b" ", _VALID * 3)  # no line to cut before: the layout pass streams it


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=edits(len(_ONE_LINE)), chunk_bytes=st.integers(20, 300), processes=st.sampled_from([1, 2]))
@example(changes=[(5, 0, b" # x")], chunk_bytes=20, processes=1)  # a comment to the end of the text
@example(changes=[(300, 0, b'"')], chunk_bytes=31, processes=2)  # a string left open
def test_damaged_text_on_one_line_is_read_identically_or_left_to_protobuf(
        changes: list[Edit], chunk_bytes: int, processes: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _small_chunks(monkeypatch, chunk_bytes)
    path = tmp_path / "d.pbtxt"
    path.write_bytes(damaged(_ONE_LINE, changes))
    check(path, expect_fast=None, jobs=processes)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(message=step_stats(), chunk_bytes=st.integers(20, 400))
def test_generated_traces_in_several_processes_read_identically(message: pb.StepStats, chunk_bytes: int, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    if not message.dev_stats:
        return
    _small_chunks(monkeypatch, chunk_bytes)
    path = tmp_path / "g.pbtxt"
    path.write_text(text_format.MessageToString(message), encoding="utf-8")
    check(path, jobs=2)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(message=step_stats(), chunk_bytes=st.integers(20, 400), processes=st.sampled_from([1, 2]),
       one_line=st.booleans(), pointy_brackets=st.booleans(), short_lists=st.booleans())
def test_generated_traces_printed_every_way_read_identically(
        message: pb.StepStats, chunk_bytes: int, processes: int, one_line: bool, pointy_brackets: bool,
        short_lists: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """protobuf's printer on one line, with '<...>', with '[a, b]' lists: read fast, as protobuf reads it."""
    if not message.dev_stats:
        return
    _small_chunks(monkeypatch, chunk_bytes)
    path = tmp_path / "g.pbtxt"
    path.write_text(text_format.MessageToString(message, as_one_line=one_line, pointy_brackets=pointy_brackets,
                                                use_short_repeated_primitives=short_lists), encoding="utf-8")
    check(path, jobs=processes)


def test_several_processes_where_they_are_spawned(monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """Spawned workers (macOS, Windows) import the reader afresh rather than inherit it: the same model."""
    _small_chunks(monkeypatch, 100_000)
    monkeypatch.setattr(jobs.sys, "platform", "darwin")
    import multiprocessing

    started: list[str] = []
    context = multiprocessing.get_context
    monkeypatch.setattr(multiprocessing, "get_context", lambda method: (started.append(method), context(method))[1])
    taken: list[bool] = []
    take = jobs.InOrder._take
    monkeypatch.setattr(jobs.InOrder, "_take", lambda self: (taken.append(self.calls[0][0] is not None
                                                                          and self.calls[0][0].exception() is None),
                                                             take(self))[1])
    check(PTB, jobs=2)
    assert started == ["spawn"] and len(taken) > 3 and all(taken)  # every chunk read by a worker
    assert capfd.readouterr().err == ""


def test_a_read_in_several_processes_that_fails_leaves_no_pool_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pool left to wind down after an error kept a thread that took its lock now and then; a later
    read's worker forked while it was held, collected the old pool and hung (one fuzz run in 30)."""
    import concurrent.futures.process
    import threading

    _small_chunks(monkeypatch, 50)
    path = tmp_path / "d.pbtxt"
    path.write_bytes(damaged(_VALID * 3, [(225, 1, b"")]))  # a field the schema does not have, in a later chunk
    with pytest.raises(TraceFormatError, match="has no field named"):
        fast(path, 2)
    assert not [t for t in threading.enumerate() if isinstance(t, concurrent.futures.process._ExecutorManagerThread)]


def test_a_worker_never_collects_what_its_fork_copied() -> None:
    import gc

    frozen: list[int] = []
    with jobs.InOrder(gc.get_freeze_count, 2) as pool:
        pool.submit((), frozen.append)
        pool.finish()
    assert frozen[0] > 1000  # the main process's objects, all of them frozen before the worker's first call


def test_where_no_process_can_start_the_chunks_are_read_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """No /dev/shm (AWS Lambda, some sandboxes): the pool cannot be made, and one process reads."""
    import concurrent.futures

    def no_pool(*_: object, **__: object) -> None:
        raise OSError(38, "Function not implemented")

    _small_chunks(monkeypatch, 50_000)
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", no_pool)
    merged: list[int] = []
    monkeypatch.setattr(textjobs, "_merge", lambda read, state, builder, merge=textjobs._merge: (
        merged.append(1), merge(read, state, builder))[1])
    check(PTB, jobs=2)
    assert len(merged) > 3  # every chunk read here, and merged as a worker's would be


def test_comments_anywhere_keep_the_fast_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One '# comment' once sent a whole trace to protobuf's reader (25 times slower); now it is cut."""
    _small_chunks(monkeypatch, 1 << 16)
    lines = ALEXNET.read_text().splitlines(keepends=True)
    commented = []
    for number, line in enumerate(lines):
        indent = line[: len(line) - len(line.lstrip())]
        commented.append(f"{indent}# line {number}\n" if number % 97 == 0 else "")
        commented.append(line.replace("\n", "  # after\n") if number % 89 == 0 and '"' not in line else line)
    path = tmp_path / "commented.pbtxt"
    path.write_text("".join(commented))
    got, plain = fast(path), fast(ALEXNET)
    assert got is not None and plain is not None and got.same_content(plain)


@pytest.mark.parametrize("chunk_bytes", [997, 1 << 16])
def test_crlf_line_ends_keep_the_fast_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         chunk_bytes: int) -> None:
    """A trace saved on Windows (CRLF) reads as fast, and as the original."""
    _small_chunks(monkeypatch, chunk_bytes)
    text = (PTB if chunk_bytes == 1 << 16 else ALEXNET).read_text()
    path = tmp_path / "crlf.pbtxt"
    path.write_bytes(text.replace("\n", "\r\n").encode())
    original = tmp_path / "original.pbtxt"
    original.write_text(text)
    got, plain = fast(path), fast(original)
    assert plain is not None and got is not None and got.same_content(plain)


# -- fields the schema does not have ------------------------------------------------------------


def _insert(text: str, pattern: str, which: int, line: str) -> tuple[str, int]:
    """``text`` with ``line`` inserted after the ``which``-th match of ``pattern`` (a match ends a
    line), and the number of the line inserted."""
    match = list(re.finditer(pattern, text, re.MULTILINE))[which]
    at = match.end()
    return text[:at] + line + text[at:], text.count("\n", 0, at) + 1


_LAST_NODE_END = r"\n(?=  \}\n\}\n?$)"
_UNKNOWN = [  # (id, where, which match, the line, the column protobuf gives, its words)
    ("node-first", r"^    node_name: .*\n", 0, "    bogus: 1\n", 5, 'Message type "NodeExecStats" has no field named "bogus".'),
    ("node-middle", r"^    node_name: .*\n", 150, "    bogus: 1\n", 5,
     'Message type "NodeExecStats" has no field named "bogus".'),
    ("node-last", _LAST_NODE_END, 0, "    bogus: 1\n", 5, 'Message type "NodeExecStats" has no field named "bogus".'),
    ("device", r"^  device: .*\n", 3, '  bogus: "x"\n', 3, 'Message type "DeviceStepStats" has no field named "bogus".'),
    ("top-level", r"\n(?=\}\n?$)", 0, "}\nbogus: 1\ndev_stats {\n", 1,
     'Message type "StepStats" has no field named "bogus".'),
    ("memory", r"^    memory \{\n", 20, "      bogus: 1\n", 7,
     'Message type "AllocatorMemoryUsed" has no field named "bogus".'),
    ("allocation-record", r"^      allocation_records \{\n", 30, "        bogus: -1\n", 9,
     'Message type "AllocationRecord" has no field named "bogus".'),
    ("allocation-description", r"^        allocation_description \{\n", 10, "          bogus: 1\n", 11,
     'Message type "AllocationDescription" has no field named "bogus".'),
    ("a-field-of-another-message", r"^    node_name: .*\n", 40, "    slot: 1\n", 5,
     'Message type "NodeExecStats" has no field named "slot".'),
    ("an-old-name-outside-memory-stats", r"^    node_name: .*\n", 40, "    host_temp_memory_size: 1\n", 5,
     'Message type "NodeExecStats" has no field named "host_temp_memory_size".'),
    ("a-message", r"^    node_name: .*\n", 60, "    bogus {\n      slot: 1\n    }\n", 5,
     'Message type "NodeExecStats" has no field named "bogus".'),
    ("extension", r"^    node_name: .*\n", 70, "    [ext.field]: 1\n", 10,
     'Message type "NodeExecStats" does not have extensions.'),
    ("extension-message", r"^    node_name: .*\n", 70, "    [ext] {\n      slot: 1\n    }\n", 6,
     'Message type "NodeExecStats" does not have extensions.'),
    ("two-unknown-fields", r"^    node_name: .*\n", 90, "    bogus: 1\n    [ext.field]: 1\n    other: 2\n", 5,
     'Message type "NodeExecStats" has no field named "bogus".'),
]


@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize("chunk_bytes", [300, 4096, None])
@pytest.mark.parametrize("case", _UNKNOWN, ids=lambda case: case[0])
def test_an_unknown_field_is_refused_as_protobuf_refuses_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            case: tuple[str, str, int, str, int, str], chunk_bytes: int | None,
                                                            jobs: int) -> None:
    """GIVEN a trace with a field its message does not have (or an extension) in printed layout,
    WHEN the fast reader reads it (in chunks of any size, in one process or two),
    THEN it refuses it itself, with protobuf's words, line and column."""
    name, pattern, which, line, column, words = case
    text, line_number = _insert(ALEXNET.read_text(), pattern, which, line)
    path = tmp_path / f"{name}.pbtxt"
    path.write_text(text)
    if chunk_bytes is not None:
        _small_chunks(monkeypatch, chunk_bytes)
    expected = f"{path}:{line_number + (name == 'top-level')}:{column}: {words}"
    with pytest.raises(TraceFormatError) as refused:
        fast(path, jobs)
    assert str(refused.value) == expected
    with pytest.raises(TraceFormatError) as also:
        reference(path)
    assert str(also.value) == expected


def test_an_unknown_field_keeps_its_line_after_comments_and_crlf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whole-line comments are cut, CRLF read as LF: the lines keep the file's numbers."""
    text, line_number = _insert(ALEXNET.read_text(), r"^    node_name: .*\n", 100, "    bogus: 1\n")
    text = re.sub(r"(?m)^(  node_stats \{)$", r"  # a node\n\1  # opens", text)
    line_number += text[:text.index("bogus")].count("# a node")
    path = tmp_path / "commented.pbtxt"
    path.write_bytes(text.replace("\n", "\r\n").encode())
    _small_chunks(monkeypatch, 2000)
    expected = f'{path}:{line_number}:5: Message type "NodeExecStats" has no field named "bogus".'
    for processes in (1, 2):
        with pytest.raises(TraceFormatError) as refused:
            fast(path, processes)
        assert str(refused.value) == expected
    with pytest.raises(TraceFormatError) as also:
        reference(path)
    assert str(also.value) == expected


@pytest.mark.parametrize("jobs", [1, 2])
def test_an_error_before_an_unknown_field_is_left_to_protobuf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              jobs: int) -> None:
    """protobuf stops at the first error: where one comes before the unknown field (in its chunk or
    a chunk before), the fast reader steps aside and protobuf names that one."""
    text, _ = _insert(ALEXNET.read_text(), r"^    node_name: .*\n", 100, "    bogus: 1\n")
    for bad, at in (("    all_start_micros: x\n", 99), ("    node_name: \"twice\"\n", 99), ("    all_start_micros: x\n", 2)):
        damaged_text, line_number = _insert(text, r"^    node_name: .*\n", at, bad)
        path = tmp_path / "two-errors.pbtxt"
        path.write_text(damaged_text)
        _small_chunks(monkeypatch, 3000)
        assert fast(path, jobs) is None
        with pytest.raises(TraceFormatError) as said:
            reference(path)
        assert f"{path}:{line_number}:" in str(said.value) and "bogus" not in str(said.value)


_RUN_METADATA_HEAD = 'step_stats {\n  dev_stats {\n    device: "/cpu:0"\n    node_stats {\n      node_name: "a"\n'
_GRAPH = 'partition_graphs {\n  node {\n    name: "a"\n    op: "NoOp"\n    bogus: 1\n  }\n}\n'


@pytest.mark.parametrize("jobs", [1, 2])
def test_unknown_fields_in_delegated_fields_are_protobufs_to_judge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   jobs: int) -> None:
    """A graph is parsed by protobuf, so is an unknown field in it; one in the steps after a graph
    (parsed only at the end) is left to protobuf, which meets the graph's error first."""
    _small_chunks(monkeypatch, 100)
    after = tmp_path / "graph-after.pbtxt"
    after.write_text(_RUN_METADATA_HEAD + "    }\n  }\n}\n" + _GRAPH)
    before = tmp_path / "graph-before.pbtxt"
    before.write_text(_GRAPH + _RUN_METADATA_HEAD + "      bogus: 1\n    }\n  }\n}\n")
    for path, line in ((after, 13), (before, 5)):
        with pytest.raises(TraceFormatError) as said:
            reference(path)
        assert str(said.value) == f'{path}:{line}:5: Message type "NodeDef" has no field named "bogus".'
        try:
            got = fast(path, jobs)
        except TraceFormatError as refused:
            assert str(refused) == str(said.value)
        else:
            assert got is None


def test_old_field_names_inside_memory_stats_still_read(tmp_path: Path) -> None:
    """TF 1.4's names are MemoryStats fields, not unknown ones."""
    text = ALEXNET.read_text().replace("      temp_memory_size:", "      host_temp_memory_size:")
    path = tmp_path / "old-names.pbtxt"
    path.write_text(text)
    assert "host_temp_memory_size" in text
    got = fast(path)
    assert got is not None and same(got, reference(path))


def test_the_fast_schema_has_every_field_of_its_messages() -> None:
    """An unknown field is refused only where it is one: each message the fast reader parses knows
    every field protobuf's schema gives it (by its name there), and its type name is protobuf's."""
    from memtrace.read import text_schema as schema

    pool = pb.StepStats.DESCRIPTOR.file.pool
    for message, name in schema.TYPE_NAMES.items():
        descriptor = pool.FindMessageTypeByName("memtrace.tf." + name)
        known = set(schema.CHILDREN.get(message, {})) | set(schema.FIELDS.get(message, {}))
        assert known == set(descriptor.fields_by_name), name


def test_an_unknown_field_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from memtrace.cli import main

    text, line_number = _insert(ALEXNET.read_text(), _LAST_NODE_END, 0, "    bogus: 1\n")
    path = tmp_path / "bogus.pbtxt"
    path.write_text(text)
    assert main(["summary", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == f'memtrace: error: {path}:{line_number}:5: Message type "NodeExecStats" has no field named "bogus".\n'


_RUN_METADATA_UNKNOWN = [  # (text, the error after the path)
    (_RUN_METADATA_HEAD + "      memory_stats {\n        host_temp_memory_size: 3\n        bogus: 1\n      }\n    }\n  }\n}\n",
     '8:9: Message type "MemoryStats" has no field named "bogus".'),
    (_RUN_METADATA_HEAD + "    }\n  }\n}\nbogus: 2\n", '9:1: Message type "RunMetadata" has no field named "bogus".'),
    (_RUN_METADATA_HEAD + '    }\n    thread_names {\n      key: 1\n      [a.b.c] {\n      }\n    }\n  }\n}\n',
     '9:12: Message type "DeviceStepStats.ThreadNamesEntry" does not have extensions.'),
]


@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize("case", _RUN_METADATA_UNKNOWN, ids=["in-memory-stats", "top-level", "extension-in-a-map-entry"])
def test_an_unknown_field_in_a_run_metadata_is_refused_as_protobuf_refuses_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: tuple[str, str], jobs: int) -> None:
    text, said = case
    path = tmp_path / "run.pbtxt"
    path.write_text(text)
    _small_chunks(monkeypatch, 60)
    with pytest.raises(TraceFormatError) as refused:
        fast(path, jobs)
    assert str(refused.value) == f"{path}:{said}"
    with pytest.raises(TraceFormatError) as also:
        reference(path)
    assert str(also.value) == f"{path}:{said}"


_ALEXNET_LINES = ALEXNET.read_text().splitlines(keepends=True)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(after=st.integers(0, len(_ALEXNET_LINES) - 2), chunk_bytes=st.integers(300, 5000), processes=st.sampled_from([1, 2]),
       extension=st.booleans())
def test_an_unknown_field_anywhere_is_refused_as_protobuf_refuses_it(
        after: int, chunk_bytes: int, processes: int, extension: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An unknown field (or extension) after any line of a real trace, in the message that line is in
    (or opens), in chunks from 300 bytes (smaller ones are laid out again, as below), in one process
    or two: the fast reader's line is protobuf's."""
    line = _ALEXNET_LINES[after]
    indent = len(line) - len(line.lstrip(" ")) + 2 * line.rstrip().endswith("{")
    name = "[x.y]" if extension else "bogus"
    path = tmp_path / "anywhere.pbtxt"
    path.write_text("".join([*_ALEXNET_LINES[:after + 1], " " * indent + name + ": 1\n", *_ALEXNET_LINES[after + 1:]]))
    _small_chunks(monkeypatch, chunk_bytes)
    with pytest.raises(TraceFormatError) as said:
        reference(path)
    assert str(said.value).startswith(f"{path}:{after + 2}:{indent + 1 + 3 * extension}: Message type ")
    with pytest.raises(TraceFormatError) as refused:
        fast(path, processes)
    assert str(refused.value) == str(said.value)


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_chunk_laid_out_again_leaves_an_unknown_field_to_protobuf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    jobs: int) -> None:
    """Where the field's chunk is laid out again (here a tab in it), its lines are not the file's:
    the fast reader steps aside, and protobuf's parser names the field, as before."""
    text, line_number = _insert(ALEXNET.read_text(), r"^    node_name: .*\n", 100, "    bogus: 1\n")
    text = text.replace("\n    all_start_micros:", "\n\tall_start_micros:", 1)
    path = tmp_path / "tab.pbtxt"
    path.write_text(text)
    assert fast(path, jobs) is None
    with pytest.raises(TraceFormatError) as said:
        reference(path)
    assert str(said.value) == f'{path}:{line_number}:5: Message type "NodeExecStats" has no field named "bogus".'
