"""memtrace batch and trend: many traces as Dask tasks into Parquet tables, and peaks across runs."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import memtrace
from memtrace.analyses.ops import ops
from memtrace.analyses.peak import group_live_set
from memtrace.cli import main
from memtrace.errors import UsageError
from memtrace.many import batch as batch_module
from memtrace.many.batch import COLUMNS, TABLES, analyse_trace, batch, find_traces, write_tables

from .conftest import ALEXNET, FIXTURES, RECORDED, ROOT, TINY, as_unprivileged, require

pa = require("pyarrow")
pq = require("pyarrow.parquet")
distributed = require("distributed")

BROKEN = 'dev_stats {\n  device: "x"\n  node_stats { node_name: '  # cut off in the middle of a string


@pytest.fixture()
def traces(tmp_path: Path) -> Path:
    """A directory of traces like a CI job's: a few good ones, one nested, one broken, one README."""
    root = tmp_path / "runs"
    (root / "nested").mkdir(parents=True)
    shutil.copy(TINY / "live_groups.pbtxt", root / "a_live_groups.pbtxt")
    shutil.copy(TINY / "producer_free.pbtxt", root / "b_producer_free.pbtxt")
    shutil.copy(RECORDED[0], root / "nested" / "c_recorded.pbtxt")
    (root / "d_broken.pbtxt").write_text(BROKEN)
    (root / "README.md").write_text("# not a trace\n")
    return root


# -- finding the traces ---------------------------------------------------------------------------


def test_directories_are_searched_by_content_and_files_named_are_taken(traces: Path) -> None:
    found = [Path(p).relative_to(traces).as_posix() for p in find_traces([traces])]
    assert found == ["a_live_groups.pbtxt", "b_producer_free.pbtxt", "d_broken.pbtxt", "nested/c_recorded.pbtxt"]
    readme = traces / "README.md"
    assert find_traces([readme, traces / "a_live_groups.pbtxt", readme]) == sorted(
        [str(readme), str(traces / "a_live_groups.pbtxt")])


def test_glob_patterns_are_expanded_and_a_path_naming_nothing_is_a_usage_error(traces: Path) -> None:
    assert find_traces([str(traces / "*_p*.pbtxt")]) == [str(traces / "b_producer_free.pbtxt")]
    with pytest.raises(UsageError, match="no such file or directory"):
        find_traces([traces / "missing.pbtxt"])
    with pytest.raises(UsageError, match="matches no file"):
        find_traces([str(traces / "*.nothing")])


# -- one trace --------------------------------------------------------------------------------------


def test_one_trace_gives_the_numbers_the_single_trace_commands_give() -> None:
    rows = analyse_trace(str(ALEXNET)).rows
    trace = memtrace.load(ALEXNET)
    assert [r["allocator"] for r in rows["allocators"]] == [p.allocator for p in trace.peaks()]
    for row in rows["allocators"]:
        p = trace.peak(row["allocator"])
        assert (row["peak_bytes"], row["peak_delta_bytes"], row["baseline_bytes"], row["peak_node"]) == (
            p.peak_bytes, p.peak_delta_bytes, p.baseline_bytes, p.peak_node)
        assert (row["snapshots"], row["snapshots_matched"]) == (p.reconciliation.snapshots, p.reconciliation.matched)
    gpu = next(r for r in rows["allocators"] if r["allocator"] == "GPU_0_bfc")
    assert gpu["snapshots"] == gpu["snapshots_matched"] == 97  # the seed: every snapshot reconciles
    assert rows["runs"][0]["error"] is None and rows["runs"][0]["steps"] == 1
    by_node = ops(trace, by="node", sort="name").rows
    assert [(r["name"], r["peak_bytes"], r["at_peak_bytes"]) for r in rows["ops"]] == [
        (r.name, r.peak_bytes, r.at_peak_bytes) for r in by_node]


def test_live_at_peak_rows_are_the_groups_and_add_up_to_the_peak_delta() -> None:
    rows = analyse_trace(str(TINY / "live_groups.pbtxt")).rows["live_at_peak"]
    by_type = [(r["key"], r["count"], r["bytes"]) for r in rows if r["by"] == "type"]
    assert by_type == [("MatMul", 3, 2304), ("BiasAdd", 1, 512)]  # worked by hand in the fixture
    for by in ("scope", "type", "node"):
        assert sum(r["bytes"] for r in rows if r["by"] == by) == 2816
    trace = memtrace.load(TINY / "live_groups.pbtxt")
    assert [(r["key"], r["share"]) for r in rows if r["by"] == "scope"] == [
        (g.key, g.share) for g in group_live_set(trace, trace.peak("bfc"), "scope")]


def test_a_broken_trace_is_one_row_with_its_error_and_nothing_else(tmp_path: Path) -> None:
    path = tmp_path / "broken.pbtxt"
    path.write_text(BROKEN)
    result = analyse_trace(str(path))
    assert [len(result.rows[name]) for name in TABLES] == [1, 0, 0, 0]
    assert result.error is not None and result.error.startswith(str(path)) and "\n" not in result.error


def test_only_the_allocators_asked_for() -> None:
    rows = analyse_trace(str(ALEXNET), ("GPU_0_bfc",)).rows
    assert {r["allocator"] for r in rows["allocators"]} == {"GPU_0_bfc"}
    assert {r["allocator"] for r in rows["live_at_peak"]} == {"GPU_0_bfc"}


# -- many traces --------------------------------------------------------------------------------------


def test_local_processes_and_a_two_worker_cluster_give_identical_tables(traces: Path) -> None:
    local = batch([traces], workers=2)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        clustered = batch([traces], client=client)
    for name in TABLES:
        assert local[name].schema == clustered[name].schema
        assert local[name].equals(clustered[name]), name
    runs = local["runs"].to_pylist()
    assert [Path(r["run"]).name for r in runs] == ["a_live_groups.pbtxt", "b_producer_free.pbtxt", "d_broken.pbtxt",
                                                    "c_recorded.pbtxt"]
    assert [r["error"] is not None for r in runs] == [False, False, True, False]
    assert local["allocators"].num_rows >= 3


def test_the_scheduler_is_picked_by_the_work(traces: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN four small traces: their work (about 0.1 s) would not pay for starting worker processes
    found = find_traces([traces])
    assert batch_module.estimated_seconds(found) < 1
    assert batch_module.local_workers(found, 2) == 1 and batch_module.local_workers(found, None) == 1
    # WHEN each trace is said to cost 10 s, two workers pay (one per trace at most); asked for one, never
    monkeypatch.setattr(batch_module, "TRACE_SECONDS", 10.0)
    assert batch_module.local_workers(found, 2) == 2 and batch_module.local_workers(found[:1], 2) == 1
    assert batch_module.local_workers(found, 1) == 1


def test_local_worker_processes_give_the_tables_one_process_gives(traces: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN worker processes made to pay (no cost to start them), so that batch runs its tasks on two
    monkeypatch.setattr(batch_module, "POOL_START_SECONDS", 0.0)
    assert batch_module.local_workers(find_traces([traces]), 2) == 2
    seen: list[tuple[int, int]] = []
    pooled = batch([traces], workers=2, progress=lambda done, total: seen.append((done, total)))
    # THEN the tables are those of one process, in the same order, and progress counts every trace
    alone = batch([traces], workers=1)
    for name in TABLES:
        assert pooled[name].equals(alone[name]), name
    assert seen[-1] == (4, 4) and [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_progress_counts_every_trace(traces: Path) -> None:
    seen: list[tuple[int, int]] = []
    batch([traces], workers=1, progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (4, 4) and [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_rerunning_writes_the_same_files(traces: Path, tmp_path: Path) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    write_tables(batch([traces], workers=2), first)
    write_tables(batch([traces], workers=1), second)
    for name in TABLES:
        assert (first / f"{name}.parquet").read_bytes() == (second / f"{name}.parquet").read_bytes()
        assert [f.name for f in pq.read_schema(first / f"{name}.parquet")] == [c for c, _ in COLUMNS[name]]


def test_an_empty_table_keeps_its_columns(tmp_path: Path) -> None:
    (tmp_path / "broken.pbtxt").write_text(BROKEN)
    built = batch([tmp_path / "broken.pbtxt"], workers=1)
    assert built["allocators"].num_rows == 0
    assert built["allocators"].column_names == [c for c, _ in COLUMNS["allocators"]]


# -- the command ---------------------------------------------------------------------------------------


def test_batch_exit_codes_and_one_line_per_unreadable_trace(traces: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["batch", str(traces), "-o", str(out), "--workers", "2"]) == 1
    captured = capsys.readouterr()
    assert captured.out.splitlines()[0] == f"4 traces, 3 read, 1 could not be -> {out}"
    assert captured.err.count("\n") == 1 and "d_broken.pbtxt" in captured.err and "Traceback" not in captured.err
    assert sorted(p.name for p in out.iterdir()) == [f"{name}.parquet" for name in sorted(TABLES)]
    good = [traces / "a_live_groups.pbtxt", traces / "b_producer_free.pbtxt"]
    assert main(["batch", *map(str, good), "-o", str(out), "--json", "--workers", "1"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert (document["schema"], document["traces"], document["failed"]) == ("memtrace.batch/1", 2, [])
    assert main(["batch", str(traces / "nothing"), "-o", str(out)]) == 2
    assert main(["batch", str(traces), "-o", str(out), "--workers", "2", "--scheduler", "tcp://127.0.0.1:1"]) == 2


def test_without_the_extra_batch_says_how_to_install_it(traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    for module in ("dask", "dask.bag", "distributed", "pyarrow", "pyarrow.parquet"):
        monkeypatch.setitem(sys.modules, module, None)  # as if not installed: importing it raises ImportError
    assert main(["batch", str(traces), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err == "memtrace: error: memtrace batch needs Dask and pyarrow: pip install 'memtrace[batch]'\n"
    assert not (tmp_path / "out").exists()


# -- trend ------------------------------------------------------------------------------------------------


def _write(traces: list[Path], outdir: Path) -> None:
    write_tables(batch(traces, workers=1), outdir)


def test_trend_orders_runs_by_name_or_by_modification_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = []
    for name, source, mtime in (("jan.pbtxt", "producer_free.pbtxt", 3_000), ("feb.pbtxt", "ties.pbtxt", 1_000),
                                ("mar.pbtxt", "live_groups.pbtxt", 2_000)):
        path = tmp_path / name
        shutil.copy(TINY / source, path)
        os.utime(path, ns=(mtime * 10**9, mtime * 10**9))
        runs.append(path)
    (tmp_path / "bad.pbtxt").write_text(BROKEN)
    out = tmp_path / "out"
    _write([*runs, tmp_path / "bad.pbtxt"], out)

    assert main(["trend", str(out), "--json"]) == 0
    by_run = json.loads(capsys.readouterr().out)
    assert by_run["failed_runs"] == 1
    assert [Path(r).name for r in by_run["runs"]] == ["feb.pbtxt", "jan.pbtxt", "mar.pbtxt"]
    bfc = next(a for a in by_run["allocators"] if a["allocator"] == "bfc")
    assert [(Path(p["run"]).name, p["peak_bytes"]) for p in bfc["points"]] == [
        ("feb.pbtxt", 768), ("jan.pbtxt", 13072), ("mar.pbtxt", 2816)]  # the peaks test_peak works by hand

    assert main(["trend", str(out), "--json", "--by", "mtime"]) == 0
    by_mtime = json.loads(capsys.readouterr().out)
    assert [Path(r).name for r in by_mtime["runs"]] == ["feb.pbtxt", "mar.pbtxt", "jan.pbtxt"]

    assert main(["trend", str(out)]) == 0
    text = capsys.readouterr().out
    assert "+12 KiB (+1602.1%)" in text and "-10 KiB (-78.5%)" in text  # 12,304 B of 768; 10,256 B of 13,072


def test_trend_page_is_self_contained_and_escapes_run_names(tmp_path: Path) -> None:
    hostile = tmp_path / "<img src=x onerror=alert(1)>.pbtxt"
    shutil.copy(TINY / "ties.pbtxt", hostile)
    out = tmp_path / "out"
    _write([hostile], out)
    page = tmp_path / "trend.html"
    assert main(["trend", str(out), "-o", str(page)]) == 0
    html = page.read_text()
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<svg" in html and "<polyline" in html and "http" not in html.replace('lang="en"', "")


def test_trend_of_a_directory_without_tables_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trend", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith(f"memtrace: error: {tmp_path}: no runs.parquet here")


def test_memtrace_batch_from_python_is_the_same_as_the_command(traces: Path) -> None:
    from_python = memtrace.batch([traces], workers=2)
    assert set(from_python) == set(TABLES)
    assert from_python["runs"].equals(batch([traces], workers=1)["runs"])


def test_trend_charts_share_one_run_axis(tmp_path: Path) -> None:
    # "late" has an allocator the others lack: its one point sits at the last run's x, not in the middle.
    runs = []
    for name, source in (("a.pbtxt", "ties.pbtxt"), ("b.pbtxt", "ties.pbtxt"), ("c.pbtxt", "outputs_only.pbtxt")):
        shutil.copy(TINY / source, tmp_path / name)
        runs.append(tmp_path / name)
    out = tmp_path / "out"
    _write(runs, out)
    page = tmp_path / "trend.html"
    assert main(["trend", str(out), "-o", str(page)]) == 0
    from memtrace.reporters.trend import RIGHT, WIDTH

    charts = page.read_text().split("<svg")[1:]
    circles = [[float(x) for x in re.findall(r'<circle cx="([0-9.]+)"', chart)] for chart in charts]
    assert sorted(len(c) for c in circles) == [1, 2]
    lonely = next(c for c in circles if len(c) == 1)
    assert lonely == [WIDTH - RIGHT]


def test_a_device_picks_each_traces_own_allocator() -> None:
    # The same CPU:0 is mklcpu in one recording and bfc_cpu_allocator_for_gpu in the other.
    bfc = min((RECORDED[0].parent / "bfc").glob("*.pbtxt.gz"))
    rows = batch([RECORDED[0], bfc], workers=1, allocators=["CPU:0"])["allocators"].to_pylist()
    assert sorted(r["allocator"] for r in rows) == ["bfc_cpu_allocator_for_gpu", "mklcpu"]


def test_profiles_in_a_tensorboard_logdir_are_read_and_its_other_files_skipped(tmp_path: Path) -> None:
    # A run directory as TensorBoard writes it: the profile, and a gzip'd Chrome trace that is no trace of ours.
    import gzip as gzip_module

    run = tmp_path / "logs" / "plugins" / "profile" / "2026_11_22"
    run.mkdir(parents=True)
    profile = FIXTURES / "profiles" / "keras_mlp.xplane.pb.gz"
    (run / "host.xplane.pb").write_bytes(gzip_module.decompress(profile.read_bytes()))
    (run / "host.trace.json.gz").write_bytes(gzip_module.compress(b'{"traceEvents": []}'))
    assert find_traces([tmp_path / "logs"]) == [str(run / "host.xplane.pb")]
    built = batch([tmp_path / "logs"], workers=1)
    [row] = built["runs"].to_pylist()
    assert row["error"] is None and row["steps"] == 3
    peaks = {r["allocator"]: r["peak_bytes"] for r in built["allocators"].to_pylist()}
    assert peaks == {a: p.peak_bytes for a, p in ((p.allocator, p) for p in memtrace.load(profile).peaks())}


# -- hostile files (issue 25) -----------------------------------------------------------------------


def _cli(argv: list[str], cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The command in a process of its own, so that a hang fails the test instead of stalling it."""
    return subprocess.run([sys.executable, "-m", "memtrace", *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, check=False, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_tables_are_never_written_through_a_planted_symlink(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN an OUTDIR where someone planted links: the old temporary name and a table itself, both to a file outside
    precious = tmp_path / "precious.txt"
    precious.write_text("precious\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "runs.parquet.partial").symlink_to("../precious.txt")
    (out / "ops.parquet").symlink_to("../precious.txt")
    # WHEN batch writes its tables there
    assert main(["batch", str(TINY / "ties.pbtxt"), "-o", str(out), "--workers", "1"]) == 0
    capsys.readouterr()
    # THEN the file outside is untouched, each table is a regular file, and the planted temporary link is left alone
    assert precious.read_text() == "precious\n"
    for name in TABLES:
        assert not (out / f"{name}.parquet").is_symlink()
        assert pq.read_table(out / f"{name}.parquet").column_names == [c for c, _ in COLUMNS[name]]
    assert (out / "runs.parquet.partial").is_symlink()
    assert sorted(p.name for p in out.iterdir()) == sorted([*(f"{n}.parquet" for n in TABLES), "runs.parquet.partial"])


def test_a_table_that_fails_to_write_leaves_no_temporary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built = batch([TINY / "ties.pbtxt"], workers=1)

    def full_disk(table: object, where: object) -> None:  # writes a little, then the disk is full
        with open(where, "wb") if isinstance(where, str) else contextlib.nullcontext(where) as handle:
            handle.write(b"PAR1")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pq, "write_table", full_disk)
    with pytest.raises(UsageError, match="cannot write the tables .No space left on device."):
        write_tables(built, tmp_path / "out")
    assert list((tmp_path / "out").iterdir()) == []


def test_a_table_that_would_replace_an_input_trace_is_refused(tmp_path: Path) -> None:
    # GIVEN a trace that happens to be named ops.parquet WHEN batch . -o . THEN refused before anything is written
    (tmp_path / "ops.parquet").write_bytes((TINY / "ties.pbtxt").read_bytes())
    done = _cli(["batch", ".", "-o", ".", "--workers", "1"], cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == ("memtrace: error: ./ops.parquet: is the input ./ops.parquet; "
                           "writing the output there would destroy it\n")
    assert (tmp_path / "ops.parquet").read_bytes() == (TINY / "ties.pbtxt").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ops.parquet"]
    # and from Python: write_tables refuses a table over one of the traces it read
    with pytest.raises(UsageError, match="is the input"):
        write_tables(batch([tmp_path / "ops.parquet"], workers=1), tmp_path)


def test_a_write_protected_table_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "runs.parquet").write_text("keep\n")
    (out / "runs.parquet").chmod(0o444)
    assert main(["batch", str(TINY / "ties.pbtxt"), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == f"memtrace: error: {out / 'runs.parquet'}: is write-protected (mode 0444); memtrace does not " \
                  "replace it (make it writable, or write elsewhere)\n"
    assert (out / "runs.parquet").read_text() == "keep\n" and len(list(out.iterdir())) == 1


def test_a_trace_with_a_value_beyond_int64_is_its_own_error_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a trace whose requested_bytes are INT64_MIN (its waste, allocated - requested, is beyond int64)
    bad = tmp_path / "min.pbtxt"
    bad.write_text((TINY / "outputs_snapshots.pbtxt").read_text().replace(
        "requested_bytes: 648\n", "requested_bytes: -9223372036854775808\n"))
    good = TINY / "ties.pbtxt"
    out = tmp_path / "out"
    # WHEN it is batched with a good trace THEN the batch completes, exit 1, and the good trace's rows are all there
    assert main(["batch", str(bad), str(good), "-o", str(out), "--workers", "1"]) == 1
    _, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith(f"memtrace: {bad}: ")
    runs = pq.read_table(out / "runs.parquet").to_pylist()
    # (rows come in the order of the sorted paths, wherever the checkout and the temporary directory are)
    assert [(r["run"], r["error"] is None) for r in runs] == sorted([(str(bad), False), (str(good), True)])
    alone = batch([good], workers=1)
    for name in ("allocators", "ops", "live_at_peak"):
        assert pq.read_table(out / f"{name}.parquet").equals(alone[name]), name


def test_rows_that_do_not_fit_a_column_become_that_traces_error_row() -> None:
    # Hand-made rows: the second trace's peak is 2^63, one past int64; the first and third are kept whole.
    from memtrace.many.batch import TraceRows, tables

    results = [analyse_trace(str(TINY / "ties.pbtxt")), analyse_trace(str(TINY / "live_groups.pbtxt")),
               analyse_trace(str(TINY / "producer_free.pbtxt"))]
    results[1].rows["allocators"][0]["peak_bytes"] = 2**63
    built = tables(results)
    runs = built["runs"].to_pylist()
    assert [r["error"] for r in runs][::2] == [None, None]
    assert runs[1]["error"] == (f"{TINY / 'live_groups.pbtxt'}: a value of this trace does not fit the tables' "
                                "columns (Python int too large to convert to C long)")
    assert runs[1]["size_bytes"] == (TINY / "live_groups.pbtxt").stat().st_size
    kept = tables([results[0], results[2]])
    for name in ("allocators", "ops", "live_at_peak"):
        assert built[name].equals(kept[name]), name
    assert isinstance(results[1], TraceRows)


def test_files_named_as_traces_are_taken_from_a_directory_whatever_they_hold(tmp_path: Path) -> None:
    # GIVEN damaged and empty files named as traces, beside a good trace and files that are no trace
    import gzip as gzip_module

    shutil.copy(TINY / "ties.pbtxt", tmp_path / "good.pbtxt")
    claimed = {"empty.pbtxt": b"", "host.xplane.pb": b"", "cut.pb": b"\x0a\xff\xff",
               "garbage.pb.gz": gzip_module.compress(b"\x00\x01garbage", mtime=0),
               "truncated.pbtxt.gz": gzip_module.compress(BROKEN.encode(), mtime=0)[:20],
               "binary.textproto": bytes(range(256))}
    for name, data in claimed.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "README.md").write_text("# not a trace\n")
    (tmp_path / "notes.txt").write_bytes(bytes(range(256)))
    # WHEN the directory is searched THEN every file named as a trace is taken; the others are skipped
    assert [Path(p).name for p in find_traces([tmp_path])] == sorted([*claimed, "good.pbtxt"])
    done = _cli(["batch", str(tmp_path), "-o", str(tmp_path / "out"), "--workers", "1"])
    assert done.returncode == 1
    assert done.stdout.splitlines()[0] == f"7 traces, 1 read, 6 could not be -> {tmp_path / 'out'}"
    assert sorted(line.split(":")[1].strip().rsplit("/", 1)[-1] for line in done.stderr.splitlines()) == sorted(claimed)


def test_a_glob_through_a_symlink_loop_counts_each_file_once(tmp_path: Path) -> None:
    # GIVEN two symlink loops (a/up -> .., b/up -> ..): glob.glob would follow them 2^40 ways
    shutil.copy(TINY / "ties.pbtxt", tmp_path / "ties.pbtxt")
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "up").symlink_to("..")
    os.link(tmp_path / "ties.pbtxt", tmp_path / "a" / "hard.pbtxt")
    # WHEN the pattern is expanded THEN each file once (by device and inode), under its shortest path, no ELOOP
    assert find_traces([str(tmp_path / "**" / "*.pbtxt")]) == [str(tmp_path / "ties.pbtxt")]
    assert find_traces([str(tmp_path / "**" / "*.pbtxt"), tmp_path, tmp_path / "a" / "up" / "ties.pbtxt"]) == [
        str(tmp_path / "ties.pbtxt")]
    [row] = batch([str(tmp_path / "**" / "*.pbtxt")], workers=1)["runs"].to_pylist()
    assert row["error"] is None


def test_a_glob_matches_what_glob_matches_without_loops(traces: Path) -> None:
    # The expansion of ** is memtrace's own (to end at loops); on a tree without links it is glob's.
    import glob as glob_module

    from memtrace.many.batch import expand

    (traces / ".hidden").mkdir()
    (traces / ".hidden" / "x.pbtxt").write_text(BROKEN)
    for pattern in ("**/*.pbtxt", "**", "**/nested/*", "*/**/*.pbtxt", "**/.hidden/*", "nes*/**", "**/", "**/*/"):
        full = str(traces / pattern)
        assert sorted(expand(full)) == sorted(glob_module.glob(full, recursive=True)), pattern


def test_a_fifo_in_a_directory_is_skipped_and_one_named_is_an_error_row(tmp_path: Path) -> None:
    shutil.copy(TINY / "ties.pbtxt", tmp_path / "ties.pbtxt")
    os.mkfifo(tmp_path / "pipe.pbtxt")  # nobody ever writes to it: opening it to read would wait forever
    done = _cli(["batch", str(tmp_path), "-o", str(tmp_path / "out"), "--workers", "1"], timeout=60)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines()[0] == f"1 traces, 1 read, 0 could not be -> {tmp_path / 'out'}"
    done = _cli(["batch", str(tmp_path / "pipe.pbtxt"), "-o", str(tmp_path / "out"), "--workers", "1"], timeout=60)
    assert done.returncode == 1
    assert done.stderr == f"memtrace: {tmp_path / 'pipe.pbtxt'}: is a FIFO, not a regular file; batch reads regular files only\n"


def test_an_unreadable_subdirectory_is_an_error_row_not_left_out(tmp_path: Path) -> None:
    # GIVEN a directory with a trace, and a subdirectory with another that nobody may list
    runs = tmp_path / "runs"
    (runs / "locked").mkdir(parents=True)
    shutil.copy(TINY / "ties.pbtxt", runs / "good.pbtxt")
    shutil.copy(TINY / "ties.pbtxt", runs / "locked" / "hidden.pbtxt")
    (runs / "locked").chmod(0)
    try:
        # WHEN batch searches it, with file permissions enforced (as root: the override capabilities dropped)
        done = subprocess.run(as_unprivileged([sys.executable, "-m", "memtrace", "batch", str(runs), "-o",
                                               str(tmp_path / "out"), "--workers", "1"]),
                              capture_output=True, text=True, timeout=120, check=False,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    finally:
        (runs / "locked").chmod(0o755)
    # THEN the good trace is read and the subdirectory is an error row that says why: exit 1, not a silent 0
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines()[0] == f"2 traces, 1 read, 1 could not be -> {tmp_path / 'out'}"
    rows = {row["run"]: row["error"] for row in pq.read_table(tmp_path / "out" / "runs.parquet").to_pylist()}
    assert rows[str(runs / "good.pbtxt")] is None
    assert "ermission denied" in rows[str(runs / "locked")]

def _tables_with(tmp_path: Path, **columns: object) -> Path:
    """An OUTDIR whose allocators.parquet is memtrace's own with some columns replaced (None: dropped)."""
    out = tmp_path / "out"
    _write([TINY / "ties.pbtxt", TINY / "live_groups.pbtxt"], out)
    table = pq.read_table(out / "allocators.parquet")
    for name, values in columns.items():
        index = table.column_names.index(name)
        table = table.remove_column(index) if values is None else table.set_column(index, name, values)
    pq.write_table(table, out / "allocators.parquet")
    return out


@pytest.mark.parametrize(("columns", "why"), [
    ({"peak_bytes": None}, "no column 'peak_bytes'"),
    ({"peak_bytes": pa.array(["768", "2816"])}, "column 'peak_bytes' holds string, not integers"),
    ({"allocator": pa.array([1, 2])}, "column 'allocator' holds int64, not strings"),
    ({"allocator": pa.array([None, "bfc"], pa.string())}, "column 'allocator' has nulls"),
    # float peaks: NaN and infinity would be written as JSON no parser accepts
    ({"peak_bytes": pa.array([float("nan"), float("inf")])}, "column 'peak_bytes' holds double, not integers"),
])
def test_trend_on_a_table_memtrace_did_not_write_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             columns: dict[str, object], why: str) -> None:
    out = _tables_with(tmp_path, **columns)
    for argv in (["trend", str(out)], ["trend", str(out), "--json"], ["trend", str(out), "-o", str(tmp_path / "t.html")]):
        assert main(argv) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err == f"memtrace: error: {out / 'allocators.parquet'}: not a table memtrace batch wrote ({why})\n"
    assert not (tmp_path / "t.html").exists()


def test_trend_on_a_damaged_table_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN runs.parquet whose footer is zeroed: pyarrow's message for it ends in a newline
    out = tmp_path / "out"
    _write([TINY / "ties.pbtxt"], out)
    data = (out / "runs.parquet").read_bytes()
    footer = int.from_bytes(data[-8:-4], "little")
    (out / "runs.parquet").write_bytes(data[:-8 - footer] + bytes(footer) + data[-8:])
    assert main(["trend", str(out), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err == (f"memtrace: error: {out / 'runs.parquet'}: not a table memtrace batch wrote "
                            "(Couldn't deserialize thrift: TProtocolException: Invalid data)\n")


def test_trend_json_is_strict_json_at_int64_extremes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Integer peaks at both ends of int64 are numbers JSON holds exactly; nothing is NaN or Infinity.
    extremes = pa.array([-(2**63), 2**63 - 1], pa.int64())
    out = _tables_with(tmp_path, peak_bytes=extremes, peak_delta_bytes=extremes)
    assert main(["trend", str(out), "--json"]) == 0

    def refuse(constant: str) -> None:
        raise AssertionError(f"not JSON: {constant}")

    document = json.loads(capsys.readouterr().out, parse_constant=refuse)
    assert sorted(p["peak_bytes"] for a in document["allocators"] for p in a["points"]) == [-(2**63), 2**63 - 1]
    assert main(["trend", str(out)]) == 0 and main(["trend", str(out), "-o", str(tmp_path / "t.html")]) == 0


def test_an_outdir_that_is_a_file_is_one_line_and_the_file_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    taken = tmp_path / "taken"
    taken.write_text("mine\n")
    assert main(["batch", str(TINY / "ties.pbtxt"), "-o", str(taken)]) == 2
    assert capsys.readouterr().err == f"memtrace: error: {taken}: exists and is not a directory\n"
    assert taken.read_text() == "mine\n"
