"""Replay, pairing and reconciliation, on hand-worked traces and the real seeds."""

from __future__ import annotations

import re
from pathlib import Path
from random import Random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memtrace
from memtrace.errors import UsageError
from memtrace.trace.buffers import pair_lifo
from memtrace.trace.replay import reconcile, replay

from .conftest import ALEXNET, PTB, REAL_TRACES, TINY


def _intervals(trace: memtrace.Trace, allocator: str) -> list[tuple[int, int, int | None]]:
    """(bytes, alloc time us, free time us or None) of every allocation, absolute microseconds."""
    r = replay(trace, allocator)
    us = r.time_ns // 1000
    return sorted(
        (int(r.delta_bytes[a]), int(us[a]), int(us[f]) if f >= 0 else None)
        for a, f in zip(r.alloc_event.tolist(), r.free_event.tolist())
    )


def test_ties_keep_trace_order() -> None:
    r = replay(memtrace.load(TINY / "ties.pbtxt"), "bfc")
    assert r.delta_bytes.tolist() == [256, 512, -256, -512]
    assert r.live_bytes.tolist() == [256, 768, 512, 0]


def test_same_size_allocations_pair_with_the_most_recent() -> None:
    """conv's temporary (t=2015) is freed at 2030; its output (t=2010) lives until 2200."""
    trace = memtrace.load(TINY / "producer_free.pbtxt")
    assert _intervals(trace, "bfc") == [(1024, 2010, 2200), (1024, 2015, 2030), (2048, 2105, None)]


def test_free_recorded_on_producer_after_op_end_is_the_output() -> None:
    trace = memtrace.load(TINY / "producer_free.pbtxt")
    r = replay(trace, "bfc")
    owner = {int(r.time_ns[e]) // 1000: int(row) for e, row in zip(r.alloc_event, r.output_row)}
    assert owner == {2010: 0, 2015: -1, 2105: -1}


def test_snapshots_reconcile_to_baseline() -> None:
    trace = memtrace.load(TINY / "producer_free.pbtxt")
    rec = reconcile(trace, replay(trace, "bfc"))
    assert (rec.snapshots, rec.matched, rec.max_abs_error_bytes, rec.baseline_bytes) == (2, 2, 0, 10000)


def records_trace(path: Path, *alloc_bytes: int) -> memtrace.Trace:
    """A StepStats trace of one node whose "bfc" records are ``alloc_bytes``, one a microsecond from 11 us."""
    records = " ".join(f"allocation_records {{ alloc_micros: {11 + i} alloc_bytes: {b} }}" for i, b in enumerate(alloc_bytes))
    path.write_text('dev_stats { device: "/device:GPU:0" node_stats { node_name: "n" all_start_micros: 10 '
                    f'all_end_rel_micros: 5 memory {{ allocator_name: "bfc" {records} }} }} }}')
    return memtrace.load(path)


def test_free_without_allocation_is_kept_apart(tmp_path: Path) -> None:
    r = replay(records_trace(tmp_path / "t.pbtxt", -64, 256), "bfc")
    assert r.unpaired_free_events.tolist() == [0]
    assert r.live_bytes.tolist() == [-64, 192]
    assert r.peak_event() == 1


def test_live_bytes_that_never_rise_above_0_have_no_peak_event(tmp_path: Path) -> None:
    # GIVEN a free of 256 bytes allocated before the step, then 256 bytes allocated: live bytes -256, then 0
    r = replay(records_trace(tmp_path / "t.pbtxt", -256, 256), "bfc")
    assert r.live_bytes.tolist() == [-256, 0]
    # THEN the step never held more than it began with: no peak event
    assert r.peak_event() is None
    # AND before its first event nothing is live; after it, -256 bytes (relative to the step's start)
    assert (r.live_at(r.time_ns[0] - 1), r.live_at(r.time_ns[0])) == (0, -256)
    # GIVEN one byte allocated instead: the peak is that event
    assert replay(records_trace(tmp_path / "one.pbtxt", 1), "bfc").peak_event() == 0


def test_outputs_mode_lifetimes_follow_consumers_and_aliases() -> None:
    trace = memtrace.load(TINY / "outputs_only.pbtxt")
    r = replay(trace, "host")
    assert r.source == "outputs"
    assert _intervals(trace, "host") == [(256, 100, 130), (512, 120, 170)]


def test_unknown_allocator_names_the_ones_there() -> None:
    with pytest.raises(UsageError, match=r"no allocator 'GPU_1_bfc'.*GPU_0_bfc"):
        replay(memtrace.load(ALEXNET), "GPU_1_bfc")


def test_alexnet_gpu_reconciles_every_snapshot() -> None:
    """The seed's own allocator snapshots agree with the replay at every one of 97 points."""
    trace = memtrace.load(ALEXNET)
    rec = reconcile(trace, replay(trace, "GPU_0_bfc"))
    assert (rec.snapshots, rec.matched, rec.max_abs_error_bytes, rec.baseline_bytes) == (97, 97, 0, 86_954_240)


def test_ptb_gpu_reconciles_mostly() -> None:
    trace = memtrace.load(PTB)
    rec = reconcile(trace, replay(trace, "GPU_0_bfc"))
    assert (rec.snapshots, rec.matched, rec.baseline_bytes) == (556, 364, 10_703_104)  # as test_proto_replay.py derives


def test_negative_implied_baselines_are_never_chosen() -> None:
    trace = memtrace.load(Path(ALEXNET).parent / "recorded" / "cpu_convnet_b8.pbtxt")
    rec = reconcile(trace, replay(trace, "mklcpu"))
    assert rec.snapshots == 11
    assert rec.baseline_bytes is None or rec.baseline_bytes >= 0


@pytest.mark.parametrize("trace_path", REAL_TRACES, ids=lambda p: p.name)
def test_every_allocation_pairs_within_its_own_node(trace_path: Path) -> None:
    trace = memtrace.load(trace_path)
    for allocator in trace.allocators:
        r = replay(trace, allocator)
        if r.source != "records":
            continue
        paired = r.free_event >= 0
        assert (r.event_node[r.alloc_event[paired]] == r.event_node[r.free_event[paired]]).all()
        assert (r.delta_bytes[r.alloc_event[paired]] == -r.delta_bytes[r.free_event[paired]]).all()
        assert (r.free_event[paired] > r.alloc_event[paired]).all()
        assert np.array_equal(np.sort(r.time_ns), r.time_ns)


def _pair_lifo_by_walking(entries: list[int], events: list[int], sizes: list[int]) -> tuple[list[int], list[int], list[int]]:
    """The pairing as the docstring says it, one record at a time: a stack per (entry, size)."""
    open_allocations: dict[tuple[int, int], list[int]] = {}
    free_of: dict[int, int] = {}
    unpaired = []
    for entry, event, size in sorted(zip(entries, events, sizes), key=lambda r: r[1]):
        if size > 0:
            open_allocations.setdefault((entry, size), []).append(event)
            free_of[event] = -1
        elif size < 0:
            stack = open_allocations.get((entry, -size))
            if stack:
                free_of[stack.pop()] = event
            else:
                unpaired.append(event)
    allocs = sorted(free_of)
    return allocs, [free_of[a] for a in allocs], unpaired


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from([-512, -256, -64, 0, 64, 256, 512])), max_size=60),
       st.randoms(use_true_random=False))
def test_lifo_pairing_equals_walking_the_stacks(records: list[tuple[int, int]], rnd: Random) -> None:
    """The vectorised pairing agrees with a stack walked record by record, on any mix of records."""
    entries = [entry for entry, _ in records]
    sizes = [size for _, size in records]
    events = list(range(len(records)))
    rnd.shuffle(events)  # records reach the pairing in trace order, not replay order
    allocs, frees, unpaired = pair_lifo(np.array(entries, dtype=np.int32), np.array(events, dtype=np.int32),
                                        np.array(sizes, dtype=np.int64))
    assert (allocs.tolist(), frees.tolist(), unpaired.tolist()) == _pair_lifo_by_walking(entries, events, sizes)
    assert allocs.dtype == frees.dtype == unpaired.dtype == np.int64


def test_lifo_pairing_by_hand() -> None:
    """Entry 0: +64 +64 -64 -64 -64 (the third free finds nothing); entry 1: -256 then +256, never freed."""
    entries = np.array([0, 0, 0, 1, 0, 0, 1], dtype=np.int32)
    events = np.array([0, 1, 2, 3, 4, 5, 6], dtype=np.int32)
    sizes = np.array([64, 64, -64, -256, -64, -64, 256], dtype=np.int64)
    allocs, frees, unpaired = pair_lifo(entries, events, sizes)
    assert allocs.tolist() == [0, 1, 6]
    assert frees.tolist() == [4, 2, -1]
    assert unpaired.tolist() == [3, 5]


# -- ground truth: the BFC allocator's own counters -----------------------------------------------

BFC_RECORDED = sorted((Path(ALEXNET).parent / "recorded" / "bfc").glob("*.json"))


def test_bfc_recordings_exist() -> None:
    assert [p.stem for p in BFC_RECORDED] == ["cpu_cast_concat_slice", "cpu_convnet_b8", "cpu_while_rnn"]


@pytest.mark.parametrize("counters_path", BFC_RECORDED, ids=lambda p: p.stem)
def test_peak_and_baseline_equal_the_allocators_own_counters(counters_path: Path) -> None:
    """GIVEN a step recorded by scripts/record_traces.py with TensorFlow's BFC allocator on the CPU
    (TF_CPU_ALLOCATOR_USE_BFC=true), and beside it what the allocator itself said:
    get_memory_info("CPU:0")["current"] just before the step, and ["peak"] after the step with
    reset_memory_stats just before it
    THEN memtrace's baseline is the bytes in use before the step, and its absolute peak the
    allocator's peak, to the byte."""
    import json

    counters = json.loads(counters_path.read_text())
    trace = memtrace.load(counters_path.with_suffix(".pbtxt.gz"))
    found = trace.peak(counters["allocator"])
    assert found.source == "records"
    assert found.baseline_bytes == counters["bytes_in_use_before_step"]
    assert found.peak_bytes == counters["peak_bytes_in_step"]


# -- outputs only, with snapshots: the snapshots decide what the step allocated ---------------------

OUTPUTS_SNAPSHOTS = TINY / "outputs_snapshots.pbtxt"


def test_outputs_mode_leaves_buffers_from_before_the_step_to_the_baseline() -> None:
    """GIVEN tfprof's GPU test trace's shape (tiny/outputs_snapshots.pbtxt): GPU_0_bfc left no
    records; snapshots at op ends: image (Const, 512 B) 6,656, DW (768 B) 6,656, DW/read (alias)
    6,656, DW2 (1,280 B) 6,656, Conv2D (768 B, reads image and DW/read) 7,424, Conv2D_1 (512 B,
    reads Conv2D and DW2) 7,936.
    Counting every output as allocated by the step, implied baselines were 6,144, 5,376, 5,376,
    4,096, 4,096, 5,376: baseline 5,376 (3 of 6 agree), peak 5,376 + 3,328 = 8,704 B.
    By the snapshots: DW's interval moves 0 where the model added 768, so DW was there before
    the step; likewise DW2 (1,280). Conv2D: +768 as modelled. Conv2D_1's interval: +512 in the
    snapshots, but the model adds 512 and frees image's 512 (its last reader Conv2D ended): image,
    unchecked before the first snapshot, was never freed, so it too was there before the step.
    THEN baseline 6,656 with all 6 snapshots agreeing, and the peak 6,656 + 768 + 512 = 7,936 B
    when Conv2D_1 starts (50 us)."""
    trace = memtrace.load(OUTPUTS_SNAPSHOTS)
    found = trace.peak("GPU_0_bfc")
    assert found.source == "outputs"
    assert (found.baseline_bytes, found.peak_bytes, found.peak_delta_bytes, found.peak_time_us) == (6656, 7936, 1280, 50)
    rec = found.reconciliation
    assert (rec.snapshots, rec.matched, rec.max_abs_error_bytes) == (6, 6, 0)
    assert rec.model_agrees is True and rec.before_step_outputs == ("image:0", "DW:0", "DW2:0")
    assert sorted((a.node, a.bytes) for a in found.live_at_peak) == [("Conv2D", 768), ("Conv2D_1", 512)]


def test_outputs_mode_says_when_no_model_agrees_with_the_snapshots(tmp_path: Path) -> None:
    """The same trace with Conv2D's snapshot at 7,000: its interval rose by 344 B, which no set of
    buffers allocated in it explains (Conv2D's is 768 B). The model says it cannot agree."""
    path = tmp_path / "t.pbtxt"
    path.write_text(OUTPUTS_SNAPSHOTS.read_text().replace("allocator_bytes_in_use: 7424", "allocator_bytes_in_use: 7000"))
    rec = memtrace.load(path).peak("GPU_0_bfc").reconciliation
    assert rec.model_agrees is False and rec.matched < rec.snapshots == 6


def test_outputs_mode_snapshots_below_the_steps_own_bytes_give_no_baseline_and_no_agreement(tmp_path: Path) -> None:
    """The same trace with every snapshot 6,657 B lower (-1, -1, -1, -1, 767, 1,279): each interval still changes
    as the model does, but every implied baseline is -1 B, and bytes live before the step cannot be negative: no
    baseline, and the model is not said to agree (a damaged trace: the reader flags the negative sizes)."""
    path = tmp_path / "t.pbtxt"
    path.write_text(re.sub(r"allocator_bytes_in_use: (\d+)", lambda m: f"allocator_bytes_in_use: {int(m[1]) - 6657}",
                           OUTPUTS_SNAPSHOTS.read_text()))
    rec = memtrace.load(path).peak("GPU_0_bfc").reconciliation
    assert (rec.snapshots, rec.matched, rec.max_abs_error_bytes, rec.baseline_bytes) == (6, 0, 1, None)
    assert rec.model_agrees is False


def test_outputs_mode_without_snapshots_counts_every_output() -> None:
    rec = memtrace.load(TINY / "outputs_only.pbtxt").peak("host").reconciliation
    assert rec.model_agrees is None and rec.before_step_outputs == ()


def test_outputs_mode_buffer_allocated_and_freed_between_two_snapshots_changes_nothing(tmp_path: Path) -> None:
    """A 256 B output nobody reads, made and freed between DW2's and Conv2D's snapshots, is not
    something the snapshots could see: it stays the step's, and the rest is decided as before."""
    noise = (
        '  node_stats {\n    node_name: "noise"\n    all_start_micros: 135\n    op_end_rel_micros: 1\n'
        '    all_end_rel_micros: 2\n    output {\n      slot: 0\n      tensor_description {\n        dtype: DT_FLOAT\n'
        '        allocation_description {\n          requested_bytes: 256\n          allocated_bytes: 256\n'
        '          allocator_name: "GPU_0_bfc"\n          allocation_id: 9\n          ptr: 9000\n        }\n'
        '      }\n    }\n    timeline_label: "noise = Const()"\n  }\n'
    )
    text = OUTPUTS_SNAPSHOTS.read_text()
    at = text.index('  node_stats {\n    node_name: "Conv2D"')
    path = tmp_path / "t.pbtxt"
    path.write_text(text[:at] + noise + text[at:])
    found = memtrace.load(path).peak("GPU_0_bfc")
    rec = found.reconciliation
    assert rec.model_agrees is True and rec.before_step_outputs == ("image:0", "DW:0", "DW2:0")
    assert (found.baseline_bytes, found.peak_bytes) == (6656, 7936)


def test_an_allocator_whose_records_add_up_past_int64_is_uncounted_and_says_why(tmp_path: Path) -> None:
    from memtrace.errors import BeyondInt64Error
    from memtrace.trace.replay import uncounted

    # GIVEN three records of 2**62 bytes each: 1.38e19 in all, past int64
    trace = records_trace(tmp_path / "t.pbtxt", 2**62, 2**62, 2**62)
    # THEN it has no replay, and says why in words
    found = uncounted(trace, "bfc")
    assert found is not None and found.reason == "beyond int64: its records add up to 1.38e+19 bytes"
    with pytest.raises(BeyondInt64Error):
        replay(trace, "bfc")



def test_snapshots_whose_sums_with_the_records_could_pass_int64_are_refused(tmp_path: Path) -> None:
    from memtrace.errors import BeyondInt64Error

    # The reconciliation takes snapshot - live bytes and the peak adds the baseline to the live bytes: with snapshots
    # of magnitude S and records of M bytes, 2 (S + M) must stay below 2^63, so S + M below 2^62 (checked in float64,
    # whose steps there are 1 KiB: the totals below are exact)
    def trace(snapshot: int) -> memtrace.Trace:
        path = tmp_path / f"s{snapshot}.pbtxt"
        path.write_text('dev_stats { device: "/device:GPU:0" node_stats { node_name: "n" all_start_micros: 10 '
                        f'all_end_rel_micros: 5 memory {{ allocator_name: "bfc" allocator_bytes_in_use: {snapshot} '
                        'allocation_records { alloc_micros: 11 alloc_bytes: 1048576 } } } }')
        return memtrace.load(path)

    # GIVEN records of 1 MiB and a snapshot 4 KiB short of 2^62 in all: counted
    assert replay(trace(2**62 - 2**20 - 4096), "bfc").live_bytes.tolist() == [2**20]
    # GIVEN a snapshot that brings the total to 2^62: refused, naming that total and the snapshots
    with pytest.raises(BeyondInt64Error) as refused:
        replay(trace(2**62 - 2**20), "bfc")
    assert (refused.value.total_bytes, refused.value.source) == (2.0**62, "snapshots")


def test_the_largest_total_int64_holds_is_counted_and_the_first_it_does_not_is_refused(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    import json

    from memtrace.cli import main

    # GIVEN one record of 2^62 bytes, and then two (their running total reaches 2^63, one past int64's largest)
    records_trace(tmp_path / "one.pbtxt", 2**62)
    assert main(["peak", str(tmp_path / "one.pbtxt"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["allocators"][0]["peak_bytes"] == 2**62
    records_trace(tmp_path / "two.pbtxt", 2**62, 2**62)
    # THEN the first is counted whole, the second refused: its total cannot be held
    assert main(["peak", str(tmp_path / "two.pbtxt")]) == 2
    assert "add up to 9.22e+18 bytes, beyond int64" in capsys.readouterr().err

def test_alive_after_each_event_by_hand() -> None:
    # ties.pbtxt: a (256 B) allocated at event 0 and freed at 2; b (512 B) allocated at 1 and freed at 3
    replayed = replay(memtrace.load(TINY / "ties.pbtxt"), "bfc")
    assert (replayed.alloc_event.tolist(), replayed.free_event.tolist()) == ([0, 1], [2, 3])
    # THEN after each event: a; a and b; b alone (a is freed by event 2 itself); neither
    assert [replayed.alive_after(e).tolist() for e in range(4)] == [[True, False], [True, True], [False, True],
                                                                   [False, False]]


SNAPSHOT_BELOW_LIVE = """dev_stats {
  device: "/job:localhost/replica:0/task:0/device:CPU:0"
  node_stats {
    node_name: "a"
    all_start_micros: 1000
    op_end_rel_micros: 30
    all_end_rel_micros: 30
    memory {
      allocator_name: "mklcpu"
      allocation_records { alloc_micros: 1010 alloc_bytes: 1024 }
      allocator_bytes_in_use: 512
    }
  }
}
"""


def test_snapshots_that_count_less_than_the_records_give_no_baseline(tmp_path: Path) -> None:
    # GIVEN 1,024 bytes recorded and a snapshot of 512 in use at the op's end (an allocator that counts part of what
    # it hands out); and a trace without snapshots
    path = tmp_path / "below.pbtxt"
    path.write_text(SNAPSHOT_BELOW_LIVE)
    trace = memtrace.load(path)
    rec = reconcile(trace, replay(trace, "mklcpu"))
    # THEN the one snapshot implies -512 bytes before the step: no baseline, none matched, off by 512
    assert (rec.snapshots, rec.matched, rec.max_abs_error_bytes, rec.baseline_bytes) == (1, 0, 512, None)
    plain = memtrace.load(TINY / "ties.pbtxt")
    rec = reconcile(plain, replay(plain, "bfc"))
    assert (rec.snapshots, rec.matched, rec.max_abs_error_bytes, rec.baseline_bytes) == (0, 0, 0, None)
