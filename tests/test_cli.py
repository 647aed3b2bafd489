"""The command line: output, exit codes, and one clear line for every bad input."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memtrace.cli import main

from .conftest import ALEXNET, FIXTURES, PTB, as_unprivileged
from .helpers import run


def test_summary_text_lists_devices_and_allocators(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")  # every column
    code, out, _ = run(capsys, "summary", str(ALEXNET))
    assert code == 0
    assert "/device:GPU:0/stream:all" in out and "stream" in out
    gpu = next(line for line in out.splitlines() if line.startswith("GPU_0_bfc"))
    assert gpu.split()[:1] + gpu.split()[6:12] == ["GPU_0_bfc", "records", "194", "97", "97", "97", "85"]


def test_summary_json_schema_and_counts(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "summary", str(PTB), "--json")
    document = json.loads(out)
    assert code == 0 and document["schema"] == "memtrace.summary/1"
    assert document["trace"] == str(PTB)
    assert document["nodes"] == 2087
    by_name = {a["allocator"]: a for a in document["allocators"]}
    assert sum(a["records"] for a in by_name.values()) == 2128
    assert by_name["cpu"]["sizes_tracked"] == "partly"
    assert by_name["GPU_0_bfc"]["snapshots"] == 556
    kinds = {d["kind"] for d in document["devices"]}
    assert kinds == {"device", "stream", "memcpy"}
    assert {o["kind"] for o in document["oddities"]} >= {"output-without-allocator", "requested-exceeds-allocated"}


def test_output_file_is_written_whole(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "s.json"
    code, out, _ = run(capsys, "summary", str(ALEXNET), "--json", "-o", str(target))
    assert code == 0 and out == ""
    assert json.loads(target.read_text())["schema"] == "memtrace.summary/1"
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]


def test_output_file_gets_the_mode_a_new_file_would_get(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Written through a private temporary file, a report must still be as readable as any new file."""

    old_umask = os.umask(0o022)
    try:
        fresh = tmp_path / "fresh.json"
        assert run(capsys, "summary", str(ALEXNET), "--json", "-o", str(fresh))[0] == 0
        assert fresh.stat().st_mode & 0o777 == 0o644
        kept = tmp_path / "kept.json"
        kept.write_text("old")
        kept.chmod(0o640)
        assert run(capsys, "summary", str(ALEXNET), "--json", "-o", str(kept))[0] == 0
        assert kept.stat().st_mode & 0o777 == 0o640 and kept.read_text() != "old"
    finally:
        os.umask(old_umask)


def test_failed_command_leaves_existing_output_untouched(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "s.json"
    target.write_text("precious")
    code, _, err = run(capsys, "summary", str(tmp_path / "missing.pbtxt"), "-o", str(target))
    assert code == 2 and target.read_text() == "precious"
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    "content",
    [b"", b"\x00\x01garbage\xff" * 50, b'{"a": 1}', b"dev_stats { node_stats { all_start_micros: x } }"],
    ids=["empty", "random", "json", "word-for-number"],
)
def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.pbtxt"
    path.write_bytes(content)
    code, out, err = run(capsys, "summary", str(path))
    assert code == 2 and out == ""
    assert err.startswith(f"memtrace: error: {path}") and err.count("\n") == 1
    assert "Traceback" not in err


def test_unknown_option_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "summary", str(ALEXNET), "--frobnicate")
    assert code == 2 and "--frobnicate" in err


def test_no_command_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys)[0] == 2


def test_hostile_names_are_escaped_in_text(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "evil.pbtxt"
    path.write_text('dev_stats { device: "/cpu:0\\033[31m<script>" node_stats { node_name: "a" all_start_micros: 1 } }')
    code, out, _ = run(capsys, "summary", str(path))
    assert code == 0 and "\x1b" not in out and "\\x1b[31m<script>" in out


def test_console_script_end_to_end_without_traceback(tmp_path: Path) -> None:
    """A real process, as a user runs it: the installed entry point and its exit codes."""
    done = subprocess.run([sys.executable, "-m", "memtrace", "summary", str(FIXTURES / "alexnet_train_gpu.pb.gz")],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0 and "binary+gzip" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "memtrace", "summary", str(tmp_path)], capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and bad.stderr.count("\n") == 1


def test_help_does_not_import_heavy_modules() -> None:
    code = (
        "import sys\nfrom memtrace.cli import main\nassert main(['--help']) == 0\n"
        "heavy = [m for m in ('networkx', 'tensorflow', 'google.protobuf', 'numpy') if m in sys.modules]\n"
        "print('HEAVY=' + ','.join(heavy))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "usage: memtrace" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "HEAVY="


# -- peak and timeline ----------------------------------------------------------------------


def test_peak_text_alexnet(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "peak", str(ALEXNET), "--allocator", "GPU_0_bfc", "--top", "3")
    assert code == 0
    assert out.startswith("GPU_0_bfc: peak 1.23 GiB (1,325,898,496 bytes)")
    assert "gradients/conv4/Conv2D_grad/Conv2DBackpropInput" in out
    assert "97 of 97 snapshots agree" in out
    assert "(16 more allocations)" in out and "1,238,944,256" in out


def test_peak_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "peak", str(ALEXNET), "--json")
    document = json.loads(out)
    assert code == 0 and document["schema"] == "memtrace.peak/1" and document["trace"] == str(ALEXNET)
    gpu = document["allocators"][0]
    assert [a["allocator"] for a in document["allocators"]] == ["GPU_0_bfc", "cuda_host_bfc", "cpu"]
    assert set(gpu) == {
        "allocator", "source", "peak_bytes", "peak_delta_bytes", "baseline_bytes", "peak_time_us", "peak_node",
        "running_at_peak", "reconciliation", "live_at_peak",
    }
    assert gpu["reconciliation"] == {"snapshots": 97, "matched": 97, "max_abs_error_bytes": 0}
    assert sum(a["bytes"] for a in gpu["live_at_peak"]) == gpu["peak_delta_bytes"] == 1_238_944_256
    assert len(gpu["live_at_peak"]) == 21
    assert set(gpu["live_at_peak"][0]) == {
        "node", "kind", "bytes", "alloc_time_us", "free_time_us", "allocation_id", "slot", "requested_bytes", "dtype", "shape",
    }
    assert document["allocators"][1]["source"] == "outputs"


def test_peak_json_top_cuts_the_list(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "peak", str(ALEXNET), "--json", "--top", "2", "--allocator", "GPU_0_bfc")
    assert len(json.loads(out)["allocators"][0]["live_at_peak"]) == 2


def test_peak_unknown_allocator_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "peak", str(ALEXNET), "--allocator", "GPU_9")
    assert code == 2 and out == "" and "GPU_0_bfc" in err and err.count("\n") == 1


@pytest.mark.parametrize("bad", ["0", "-3", "ten"])
def test_top_must_be_positive(capsys: pytest.CaptureFixture[str], bad: str) -> None:
    assert run(capsys, "peak", str(ALEXNET), "--top", bad)[0] == 2


def test_peak_on_trace_without_memory(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "peak", str(FIXTURES / "tiny" / "no_memory.pbtxt"))
    assert code == 0 and "no memory information" in out


def test_timeline_csv(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "timeline", str(FIXTURES / "tiny" / "producer_free.pbtxt"), "--csv")
    assert code == 0
    assert out.splitlines() == [
        "allocator,time_us,live_bytes", "bfc,10,11024", "bfc,15,12048", "bfc,30,11024", "bfc,105,13072", "bfc,200,12048",
    ]


def test_timeline_json_points_keep_peak(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "timeline", str(PTB), "--json", "--points", "20", "--allocator", "GPU_0_bfc")
    document = json.loads(out)
    entry = document["allocators"][0]
    assert code == 0 and document["schema"] == "memtrace.timeline/1" and entry["absolute"] is True
    assert len(entry["points"]) <= 20 and max(b for _, b in entry["points"]) == 77_062_912


def test_timeline_text_sparkline(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "timeline", str(ALEXNET), "--allocator", "GPU_0_bfc")
    assert code == 0 and "max 1.23 GiB" in out and "█" in out


def test_timeline_csv_and_json_together_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "timeline", str(ALEXNET), "--csv", "--json")[0] == 2


def test_a_binary_trace_cut_short_while_it_is_read_is_one_clear_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The binary reader reads the file as a stream: a file cut short under a mapping would kill the process."""
    from google.protobuf import text_format

    from memtrace.read import binary as binreader
    from memtrace.read._proto import tf_trace_pb2 as pb

    path = tmp_path / "growing.pb"
    path.write_bytes(text_format.Parse(PTB.read_text(), pb.StepStats()).SerializeToString())  # 546 KB
    monkeypatch.setattr(binreader, "READ_BYTES", 10_000)
    fill, cut = binreader._Window.fill, []

    def cut_then_fill(self: binreader._Window, upto: int, keep: int) -> None:
        if not cut and upto > len(self.buf):  # past the first 256 KB: the file loses its second half
            cut.append(path.stat().st_size)
            path.write_bytes(path.read_bytes()[:300_000])
        fill(self, upto, keep)

    monkeypatch.setattr(binreader._Window, "fill", cut_then_fill)
    code, out, err = run(capsys, "peak", str(path))
    assert cut == [546306]
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"memtrace: error: {path}:") and "truncated" in err


def test_peak_says_which_outputs_were_there_before_the_step(capsys: pytest.CaptureFixture[str]) -> None:
    from .conftest import TINY

    assert main(["peak", str(TINY / "outputs_snapshots.pbtxt")]) == 0
    out = capsys.readouterr().out
    assert "6 of 6 snapshots agree" in out
    assert "3 output buffer(s) already existed" in out and "image:0, DW:0, DW2:0" in out
    assert "no model of output lifetimes" not in out


# -- peak: groups, repeats, filters ---------------------------------------------------------------


def test_peak_group_by_scope_text_as_worked_by_hand(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "peak", str(FIXTURES / "tiny" / "live_groups.pbtxt"), "--group-by", "scope:2")
    assert code == 0
    assert out.splitlines()[4:] == [
        "  scope           count      size    bytes    share",
        "  ------------  -------  --------  -------  -------",
        "  lstm/cell_0        x2   1.5 KiB    1,536    54.5%",
        "  lstm/cell_1        x1     1 KiB    1,024    36.4%",
        "  dense/MatMul       x1     256 B      256     9.1%",
        "  total                  2.75 KiB    2,816   100.0%",
        "  share: of the 2.75 KiB allocated during the step and live at the peak (peak_delta_bytes)",
    ]


@pytest.mark.parametrize("by", ["node", "type", "scope", "scope:3"])
def test_peak_json_groups_add_up_to_the_peak_delta(capsys: pytest.CaptureFixture[str], by: str) -> None:
    code, out, _ = run(capsys, "peak", str(PTB), "--json", "--group-by", by)
    assert code == 0
    for allocator in json.loads(out)["allocators"]:
        assert allocator["grouped_by"] == by
        assert set(allocator["groups"][0]) == {"key", "count", "bytes", "share", "requested_bytes"}
        assert sum(g["bytes"] for g in allocator["groups"]) == allocator["peak_delta_bytes"]
        # requested: each live allocation's requested_bytes, or its chunk where the trace does not say
        assert sum(g["requested_bytes"] for g in allocator["groups"]) == sum(
            a["bytes"] if a["requested_bytes"] is None or a["bytes"] < 0 else a["requested_bytes"]
            for a in allocator["live_at_peak"])
        assert sum(g["count"] for g in allocator["groups"]) == len(allocator["live_at_peak"])


def test_peak_text_folds_repeated_rows_with_a_count(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")  # every column
    code, out, _ = run(capsys, "peak", str(PTB), "--allocator", "GPU_0_bfc")
    assert code == 0
    lines = out.splitlines()
    assert "in 112 allocations made during the step" in lines[3]
    header = lines[4].split()
    assert header == ["node", "count", "kind", "allocated", "requested", "bytes", "share", "tensor"]
    first = lines[6].split()
    assert first[1:] == ["x38", "output", "46.4", "MiB", "46.4", "MiB", "48,653,568", "73.3%", "float32", "[400,800]"]
    # 18 float32 [20,20,200] tensors requested 18 x 320,000 B = 5.49 MiB in 7.51 MiB of chunks
    assert lines[8].split()[1:7] == ["x18", "output", "7.51", "MiB", "5.49", "MiB"]
    assert first[0].endswith("LSTMBlockCell_*_grad/MatMul_*")


def test_peak_filters_by_name_and_size(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "peak", str(FIXTURES / "tiny" / "live_groups.pbtxt"), "--name", "^lstm", "--min-bytes", "1000")
    assert code == 0
    assert "  matching the filter: 2 KiB (2,048 bytes) in 2 allocations" in out.splitlines()
    code, out, _ = run(capsys, "peak", str(FIXTURES / "tiny" / "live_groups.pbtxt"), "--json", "--name", "BiasAdd")
    assert [a["node"] for a in json.loads(out)["allocators"][0]["live_at_peak"]] == ["lstm/cell_0/BiasAdd"]
    code, _, err = run(capsys, "peak", str(PTB), "--name", "(")
    assert code == 2 and "not a regular expression" in err
    code, _, err = run(capsys, "peak", str(PTB), "--min-bytes", "lots")
    assert code == 2 and "not a size" in err


# -- summary: each allocator's peak ---------------------------------------------------------------


def test_summary_text_shows_each_allocators_peak_largest_first(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")  # every column
    code, out, _ = run(capsys, "summary", str(ALEXNET))
    assert code == 0
    lines = out.splitlines()
    assert lines[1] == "step: 220 ms (219,951 us), 390 nodes, 96 outputs"
    start = lines.index("Allocators (largest peak first)")
    rows = [line.split()[:5] for line in lines[start + 3:start + 6]]
    assert rows[0] == ["GPU_0_bfc", "1.23", "GiB", "1.39", "ms"]
    assert [r[0] for r in rows] == ["GPU_0_bfc", "cuda_host_bfc", "cpu"]
    assert "gradients/conv4/Conv2D_grad/Conv2DBackpropInput" in lines[start + 3]


def test_summary_json_has_each_allocators_peak_as_peak_says(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "summary", str(ALEXNET), "--json")
    assert code == 0
    allocators = json.loads(out)["allocators"]
    gpu = allocators[0]
    assert (gpu["allocator"], gpu["peak_bytes"], gpu["peak_delta_bytes"], gpu["peak_time_us"], gpu["peak_node"]) == (
        "GPU_0_bfc", 1_325_898_496, 1_238_944_256, 1387, "gradients/conv4/Conv2D_grad/Conv2DBackpropInput")
    # one word for where a peak comes from, the same as memtrace peak's
    code, out, _ = run(capsys, "peak", str(ALEXNET), "--json")
    sources = {a["allocator"]: a["source"] for a in json.loads(out)["allocators"]}
    assert {a["allocator"]: a["source"] for a in allocators} == sources
    assert sources["cpu"] == "outputs"


def test_summary_step_length_is_rounded_one_way(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    trace = tmp_path / "step.pbtxt"
    trace.write_text('dev_stats { device: "/job:a/replica:0/task:0/device:CPU:0" node_stats { node_name: "a" '
                     'all_start_nanos: 1000000 all_end_rel_nanos: 700600 } }\n')
    code, out, _ = run(capsys, "summary", str(trace))
    assert code == 0 and out.splitlines()[1].startswith("step: 701 us (701 us)")


# -- a new user's typos ----------------------------------------------------------------------------


def test_unknown_command_suggests_the_nearest(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "peek", str(ALEXNET))
    assert code == 2 and out == ""
    assert err.splitlines()[-1] == "memtrace: error: unknown command 'peek'; did you mean 'peak'?"


def test_unknown_option_shows_the_commands_usage(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "peak", str(ALEXNET), "--bogus")
    assert code == 2
    assert err.startswith("usage: memtrace peak ")
    assert err.splitlines()[-1] == "memtrace peak: error: unrecognized arguments: --bogus"


@pytest.mark.parametrize(("content", "name", "message"), [
    ('[project]\nname = "x"\n', "pyproject.toml", "looks like TOML or INI; memtrace reads RunMetadata or StepStats"),
    ('{"schema": 1}\n', "trace.json", "looks like JSON; memtrace reads RunMetadata or StepStats"),
    ('[{"a": 1}]\n', "list.json", "looks like JSON; memtrace reads RunMetadata or StepStats"),
    ("# memtrace\n\nMemory forensics\n", "README.md",
     "README.md:3:1: not a TensorFlow trace: starts with field 'Memory', expected 'dev_stats'"),
    ("\n\n  hello world\n", "notes.txt", "notes.txt:3:3: not a TensorFlow trace: starts with field 'hello'"),
])
def test_files_that_are_no_trace_are_named_for_what_they_are(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str, name: str, message: str
) -> None:
    path = tmp_path / name
    path.write_text(content)
    code, _, err = run(capsys, "peak", str(path))
    assert code == 2 and message in err and err.count("\n") == 1



@pytest.mark.parametrize("locked", ["logs", "logs/plugins/profile"])
def test_an_unreadable_logdir_is_one_line(tmp_path: Path, locked: str) -> None:
    run_dir = tmp_path / "logs" / "plugins" / "profile" / "2026_01_31_12_00_00"
    run_dir.mkdir(parents=True)
    (run_dir / "host.xplane.pb").write_bytes(gzip.decompress((FIXTURES / "profiles" / "keras_mlp.xplane.pb.gz").read_bytes()))
    (tmp_path / locked).chmod(0)
    try:
        done = subprocess.run(as_unprivileged([sys.executable, "-m", "memtrace", "summary", "logs"]),
                              cwd=tmp_path, capture_output=True, text=True, check=False)
    finally:
        (tmp_path / locked).chmod(0o755)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"memtrace: error: {locked}: cannot read the directory: Permission denied\n"



@pytest.mark.parametrize("command", ["summary", "peak", "timeline", "ops", "frag", "tensor", "graph", "check", "diff",
                                     "report", "export"])
def test_every_command_takes_json_as_the_readme_says(capsys: pytest.CaptureFixture[str], command: str) -> None:
    assert main([command, "--help"]) == 0
    assert "--json" in capsys.readouterr().out


def test_report_json_is_the_reports_data(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "report", str(FIXTURES / "tiny" / "live_groups.pbtxt"), "--json")
    document = json.loads(out)
    assert code == 0 and document["schema"] == "memtrace.report/1"
    (bfc,) = document["allocators"]
    assert (bfc["allocator"], bfc["peak_bytes"], bfc["peak_node"]) == ("bfc", 2816, "dense/MatMul")
    assert [(r["node"], r["count"], r["bytes"]) for r in bfc["live_at_peak"]] == [
        ("lstm/cell_*/MatMul", 2, 2048), ("lstm/cell_0/BiasAdd", 1, 512), ("dense/MatMul", 1, 256)]


def test_export_json_is_the_export(capsys: pytest.CaptureFixture[str]) -> None:
    tiny = str(FIXTURES / "tiny" / "live_groups.pbtxt")
    assert run(capsys, "export", tiny)[1] == run(capsys, "export", tiny, "--json")[1]


def test_bidi_overrides_and_c1_controls_are_escaped_in_tables(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "evil.pbtxt"
    path.write_text('dev_stats { device: "/cpu:0\\u202egpj.exe\\u009b31m\\u2066" '
                    'node_stats { node_name: "a" all_start_micros: 1 } }')
    code, out, _ = run(capsys, "summary", str(path))
    assert code == 0
    assert not any(c in out for c in "\u202e\u2066\x9b")
    assert "/cpu:0\\u202egpj.exe\\x9b31m\\u2066" in out


# -- what a new user stumbled on (issue 35, items 9, 11 and 12) ---------------------------------------------------

CNN_RUN = FIXTURES / "fit" / "cnn.xplane.pb.gz"  # a whole Keras run under the profiler, no step markers
# What each command needs besides the option, to reach the option's check.
_POSITIONAL = {"diff": [str(ALEXNET), str(ALEXNET)], "oom": [str(FIXTURES / "oom" / "cpu_exhausted.log")],
               "batch": [str(ALEXNET), "-o", "OUT"], "trend": [str(ALEXNET)], "run": ["no_such_script.py"]}


def _size_options() -> list[tuple[str, str]]:
    """Every option of every command that takes a size or a percentage."""
    from memtrace.cli import build_parser

    commands = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    return [(name, action.option_strings[-1]) for name, parser in commands.choices.items()  # type: ignore[attr-defined]
            for action in parser._actions
            if action.option_strings and str(action.metavar).split("=")[-1] in ("SIZE", "PERCENT", "LIMIT")]


def test_every_size_option_is_found() -> None:
    found = _size_options()
    assert {("fit", "--limit"), ("fit", "--card"), ("fit", "--recorded-limit"), ("peak", "--min-bytes"),
            ("ops", "--min-bytes"), ("oom", "--limit"), ("oom", "--request"), ("diff", "--max-increase"),
            ("check", "--max-peak"), ("check", "--fits")} <= set(found)


@pytest.mark.parametrize(("command", "option"), _size_options(), ids=lambda v: str(v))
def test_a_size_that_starts_with_a_minus_gets_one_line_as_with_an_equals_sign(
        command: str, option: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # GIVEN each size option of each command, given -5MiB (or -5%) as its own word and joined by "="
    value = "-5%" if option in ("--max-increase", "--max-waste") else "-5MiB"
    if option.startswith("--max-") or option == "--fits":  # ALLOC=SIZE: the value's minus is inside
        value = f"GPU_0_bfc={value}"
    words = [str(tmp_path / "out") if a == "OUT" else a for a in _POSITIONAL.get(command, [str(ALEXNET)])]
    separate = run(capsys, command, *words, option, value)
    joined = run(capsys, command, *words, f"{option}={value}")
    # THEN both are refused in the same one line, never argparse's usage
    assert separate == joined and separate[0] == 2 and separate[2].count("\n") == 1, separate
    assert "usage:" not in separate[2] and separate[2].startswith("memtrace: error:")


def test_help_says_what_memtrace_reads(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # (argparse wraps at hyphens too)
    assert main(["--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for form in ("RunMetadata", "StepStats", "TF2", "XLA", "xplane.pb", "out-of-memory dumps", "memtrace run"):
        assert form in text, form


def test_ops_says_nothing_matched_the_filter(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "ops", str(CNN_RUN), "--name", "NOMATCH")
    assert code == 0 and out == "no op matched --name 'NOMATCH' (of 107 ops on memory-owning devices)\n"
    code, out, _ = run(capsys, "ops", str(CNN_RUN), "--min-bytes", "1GiB")
    assert out == "no op matched --min-bytes 1 GiB (of 107 ops on memory-owning devices)\n"


def test_a_whole_profile_without_step_markers_is_no_step(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # GIVEN three train_on_batch steps and their start-up, profiled whole by memtrace run (no step markers)
    words = {
        ("summary",): ["profile (no step markers): 1.03 s (1,034,372 us)"],
        ("peak",): ["at 1.02 s into the profile", "live before the profile", "made during the profile"],
        ("frag",): ["1.02 s into the profile", "live since the profile start"],
        ("check", "--max-peak", "CPU:0=1MiB"): ["peak at 1.02 s into the profile", "live before the profile"],
    }
    for argv, says in words.items():
        _, out, _ = run(capsys, argv[0], str(CNN_RUN), *argv[1:])
        text = " ".join(out.split())
        assert all(s in text for s in says) and " the step" not in text, (argv, text)
    page = tmp_path / "report.html"
    assert main(["report", str(CNN_RUN), "-o", str(page)]) == 0
    html = page.read_text()
    assert "<dt>profile (no step markers)</dt>" in html and "into the profile" in html and "' into the profile ('" in html
    assert "into the step" not in html.replace("' into the step ('", "")
    # a profile of marked steps keeps its steps, and a StepStats is one step
    _, out, _ = run(capsys, "summary", str(FIXTURES / "profiles" / "keras_cnn.xplane.pb.gz"), "--step", "1")
    assert out.splitlines()[1].startswith("step: ")
    _, out, _ = run(capsys, "peak", str(ALEXNET))
    assert "into the step" in out
