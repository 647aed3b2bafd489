"""``memtrace oom``: reading BFC out-of-memory dumps, the verdict, the reports, and bad input.

Three kinds of evidence: tiny dumps written here whose answers are worked out by hand; real
OOMs recorded with TensorFlow on CPU (``scripts/record_traces.py oom``), whose numbers are
checked against the dump's own summary lines and against the MemoryDump protobuf TensorFlow
wrote for the same failure; and a real GPU log a user published.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from memtrace.allocator.bfc import bin_for_size
from memtrace.allocator.dump import (
    SECTION_BINS,
    SECTION_CHUNKS,
    SECTION_REQUEST,
    SECTION_STATS,
    SECTION_SUM,
    OomDump,
)
from memtrace.allocator.oom import EXHAUSTED, FRAGMENTATION, analyse, analyse_all
from memtrace.cli import main
from memtrace.errors import TraceFormatError
from memtrace.read.bfc_log import parse_logged_size
from memtrace.read.oom import load_oom_dumps

from .conftest import FIXTURES, require
from .helpers import run

OOM = FIXTURES / "oom"
MIB = 1 << 20

# GIVEN a fragmented pool, absl-prefixed, with CRLF and lines of another thread in between:
#   region 1 (4096 B): InUse 1024, Free 1024, InUse 1024, Free 1024
#   region 2 (2048 B): InUse 1536, Free 512
#   limit 6656, pool 6144 -> room to grow 512; free in pool 1024 + 1024 + 512 = 2560
#   free in all 2560 + 512 = 3072 >= request 2048, largest free chunk 1024 -> fragmentation
#   in use 1024 + 1024 + 1536 = 3584, client-requested 3072 (bin lines) -> 512 lost in chunks
FRAGMENTED = """\
W0000 00:00:1700000000.000001    42 bfc_allocator.cc:502] Allocator (GPU_0_bfc) ran out of memory trying to allocate 2.00KiB (rounded to 2048)requested by op MatMul
If the cause is memory fragmentation maybe the environment variable 'TF_GPU_ALLOCATOR=cuda_malloc_async' will improve the situation.
Current allocation summary follows.
I0000 00:00:1700000000.000002    42 bfc_allocator.cc:1049] BFCAllocator dump for GPU_0_bfc
I0000 00:00:1700000000.000003    42 bfc_allocator.cc:1056] Bin (256): \tTotal Chunks: 0, Chunks in use: 0. 0B allocated for chunks. 0B in use in bin. 0B client-requested in use in bin.
I0000 00:00:1700000000.000004    42 bfc_allocator.cc:1056] Bin (512): \tTotal Chunks: 1, Chunks in use: 0. 512B allocated for chunks. 0B in use in bin. 0B client-requested in use in bin.
I0000 00:00:1700000000.000005    42 bfc_allocator.cc:1056] Bin (1024): \tTotal Chunks: 5, Chunks in use: 3. 5.50KiB allocated for chunks. 3.50KiB in use in bin. 3.00KiB client-requested in use in bin.
I0000 00:00:1700000000.000006    42 bfc_allocator.cc:1072] Bin for 2.00KiB was 2.00KiB, Chunk State: 
I0000 00:00:1700000000.000007    42 bfc_allocator.cc:1085] Next region of size 4096
I0000 00:00:1700000000.000008    42 bfc_allocator.cc:1105] InUse at 1000 of size 1024 next 1
I0000 00:00:1700000000.000009    77 train.py:12] epoch 3 step 100 loss 0.25
I0000 00:00:1700000000.000010    42 bfc_allocator.cc:1105] Free  at 1400 of size 1024 next 2
I0000 00:00:1700000000.000011    42 bfc_allocator.cc:1105] InUse at 1800 of size 1024 next 3
I0000 00:00:1700000000.000012    42 bfc_allocator.cc:1105] Free  at 1c00 of size 1024 next 18446744073709551615
I0000 00:00:1700000000.000013    42 bfc_allocator.cc:1085] Next region of size 2048
I0000 00:00:1700000000.000014    42 bfc_allocator.cc:1105] InUse at 8000 of size 1536 next 5
INFO:root:validation skipped
I0000 00:00:1700000000.000015    42 bfc_allocator.cc:1105] Free  at 8600 of size 512 next 18446744073709551615
I0000 00:00:1700000000.000016    42 bfc_allocator.cc:1110]      Summary of in-use Chunks by size: 
I0000 00:00:1700000000.000017    42 bfc_allocator.cc:1113] 2 Chunks of size 1024 totalling 2.0KiB
I0000 00:00:1700000000.000018    42 bfc_allocator.cc:1113] 1 Chunks of size 1536 totalling 1.5KiB
I0000 00:00:1700000000.000019    42 bfc_allocator.cc:1117] Sum Total of in-use chunks: 3.50KiB
I0000 00:00:1700000000.000020    42 bfc_allocator.cc:1119] Total bytes in pool: 6144 memory_limit_: 6656 available bytes: 512 curr_region_allocation_bytes_: 8192
I0000 00:00:1700000000.000021    42 bfc_allocator.cc:1128] Stats: 
Limit:                            6656
InUse:                            3584
MaxInUse:                         4096
NumAllocs:                          17
MaxAllocSize:                     1536

W0000 00:00:1700000000.000022    42 bfc_allocator.cc:513] ***___***_
"""

# GIVEN an exhausted pool in the old glog style (TF 1.x: "Chunk at" for chunks in use, no regions,
# no "rounded to"), the request known only from the error's shape and type:
#   request [1024,1024] float = 4194304 bytes; pool = limit = 1 + 2 + 1 MiB = 4194304
#   free 1 MiB < 4 MiB -> exhausted, 3 MiB missing; live tensors dense/MatMul 2 + 1 MiB, conv 1 MiB
EXHAUSTED_GLOG = """\
2017-11-06 08:55:24.919606: W tensorflow/core/common_runtime/bfc_allocator.cc:273] Allocator (GPU_0_bfc) ran out of memory trying to allocate 4.00MiB.  Current allocation summary follows.
2017-11-06 08:55:24.919712: I tensorflow/core/common_runtime/bfc_allocator.cc:627] Bin (1048576): \tTotal Chunks: 3, Chunks in use: 2 4.00MiB allocated for chunks. 3.00MiB client-requested for chunks. 3.00MiB in use in bin. 2.50MiB client-requested in use in bin.
2017-11-06 08:55:24.920744: I tensorflow/core/common_runtime/bfc_allocator.cc:661] Chunk at 0x10000 of size 1048576
2017-11-06 08:55:24.920773: I tensorflow/core/common_runtime/bfc_allocator.cc:661] Chunk at 0x110000 of size 2097152
2017-11-06 08:55:24.921335: I tensorflow/core/common_runtime/bfc_allocator.cc:670] Free at 0x310000 of size 1048576
2017-11-06 08:55:24.921452: I tensorflow/core/common_runtime/bfc_allocator.cc:676]      Summary of in-use Chunks by size: 
2017-11-06 08:55:24.921487: I tensorflow/core/common_runtime/bfc_allocator.cc:679] 1 Chunks of size 1048576 totalling 1.00MiB
2017-11-06 08:55:24.921519: I tensorflow/core/common_runtime/bfc_allocator.cc:679] 1 Chunks of size 2097152 totalling 2.00MiB
2017-11-06 08:55:24.921856: I tensorflow/core/common_runtime/bfc_allocator.cc:683] Sum Total of in-use chunks: 3.00MiB
2017-11-06 08:55:24.921887: I tensorflow/core/common_runtime/bfc_allocator.cc:685] Stats: 
Limit:                     4194304
InUse:                     3145728

2017-11-06 08:55:24.921993: W tensorflow/core/framework/op_kernel.cc:1192] Resource exhausted: OOM when allocating tensor with shape[1024,1024] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc
\t [[{{node dense/MatMul}}]]
Current usage from device: /job:localhost/replica:0/task:0/device:GPU:0, allocator: GPU_0_bfc
  2.00MiB from dense/MatMul
  1.00MiB from conv/Conv2D
  1.00MiB from dense/MatMul
 Remaining 3 nodes with 768B
ResourceExhaustedError: OOM when allocating tensor with shape[9,9] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc
"""


def write(tmp_path: Path, name: str, text: str, newline: str = "\n") -> Path:
    path = tmp_path / name
    path.write_bytes(text.replace("\n", newline).encode())
    return path


# -- hand-worked dumps ----------------------------------------------------------------------------


def test_fragmented_pool_with_crlf_and_foreign_lines(tmp_path: Path) -> None:
    [event] = analyse_all(load_oom_dumps(write(tmp_path, "frag.log", FRAGMENTED, "\r\n")))
    assert (event.request_bytes, event.dump.op, event.dump.allocator) == (2048, "MatMul", "GPU_0_bfc")
    assert [r.size_bytes for r in event.dump.regions] == [4096, 2048]
    assert [(c.address, c.size_bytes, c.in_use) for c in event.dump.regions[1].chunks] == [
        (0x8000, 1536, True), (0x8600, 512, False)]
    assert (event.limit_bytes, event.pool_bytes, event.in_use_bytes) == (6656, 6144, 3584)
    assert (event.free_in_pool_bytes, event.growth_bytes, event.free_bytes) == (2560, 512, 3072)
    assert (event.largest_free_bytes, event.free_chunks) == (1024, 3)
    assert (event.requested_in_use_bytes, event.internal_waste_bytes) == (3072, 512)
    assert event.verdict == FRAGMENTATION and event.missing_bytes == 0
    assert any("TF_GPU_ALLOCATOR=cuda_malloc_async" in a for a in event.advice)
    assert event.dump.missing == ()


def test_old_glog_dump_is_exhausted_and_request_comes_from_shape_and_type(tmp_path: Path) -> None:
    [event] = analyse_all(load_oom_dumps(write(tmp_path, "old.log", EXHAUSTED_GLOG)))
    assert event.request_bytes == 4 * MIB and event.dump.request_exact
    assert (event.dump.shape, event.dump.dtype, event.dump.op) == ("1024,1024", "float", "dense/MatMul")
    assert not event.dump.regions_listed and [r.size_bytes for r in event.dump.regions] == [4 * MIB]
    assert (event.limit_bytes, event.in_use_bytes, event.free_bytes, event.largest_free_bytes) == (
        4 * MIB, 3 * MIB, MIB, MIB)
    assert event.verdict == EXHAUSTED and event.missing_bytes == 3 * MIB
    # Live tensors of one op are summed; the later OOM text (shape [9,9]) does not overwrite the first.
    assert [(t.op, t.bytes) for t in event.top_holders] == [("dense/MatMul", 3 * MIB), ("conv/Conv2D", MIB)]
    assert event.dump.live_tensors_remaining == (3, 768)
    assert any("dense/MatMul" in sentence for sentence in event.explanation)


def test_several_dumps_in_one_file_come_in_order(tmp_path: Path) -> None:
    events = analyse_all(load_oom_dumps(write(tmp_path, "two.log", FRAGMENTED + "some other output\n" + EXHAUSTED_GLOG)))
    assert [(e.dump.line, e.verdict) for e in events] == [(1, FRAGMENTATION), (33, EXHAUSTED)]


def test_tf10_dump_without_allocator_name_takes_its_request_from_the_trailer(tmp_path: Path) -> None:
    """TF 1.0 named no allocator and repeated the request after the dump; that line starts no new event."""
    body = EXHAUSTED_GLOG.split("\n", 1)[1].split("\n2017-11-06 08:55:24.921993", 1)[0]
    text = (body + "\nW tensorflow/core/common_runtime/bfc_allocator.cc:274] Ran out of memory trying to allocate "
            "3.50MiB.  See logs for memory state.\n")
    [event] = analyse_all(load_oom_dumps(write(tmp_path, "tf10.log", text)))
    # No "ran out" line before the dump, so the request comes from the trailer: 3.5 MiB > 1 MiB free.
    assert (event.dump.allocator, event.request_bytes, event.free_bytes, event.verdict) == (
        None, 3670016, MIB, EXHAUSTED)


def test_newest_summary_line_gives_pool_and_limit(tmp_path: Path) -> None:
    newest = FRAGMENTED.replace(
        "Total bytes in pool: 6144 memory_limit_: 6656 available bytes: 512 curr_region_allocation_bytes_: 8192",
        "Allocator memory summary: rounded request 2.00KiB, total free in pool 2.50KiB, largest free chunk usable "
        "by lower end 1.00KiB, unallocated bytes 512B, pool size 6.00KiB, pool limit 6.50KiB").replace(
        "(rounded to 2048)requested by op", "(rounded to 2048) from the lower end requested by op").replace(
        "Limit:                            6656\n", "")
    [event] = analyse_all(load_oom_dumps(write(tmp_path, "newest.log", newest)))
    assert (event.dump.op, event.dump.pool_bytes_reported, event.limit_bytes, event.dump.limit_exact) == (
        "MatMul", 6144, 6656, False)
    assert (event.free_bytes, event.verdict) == (3072, FRAGMENTATION)


def test_not_a_failure_warning_is_no_oom(tmp_path: Path) -> None:
    text = ("2021-08-30 02:24:22.499646: W tensorflow/core/common_runtime/bfc_allocator.cc:246] Allocator "
            "(GPU_0_bfc) ran out of memory trying to allocate 546.16MiB with freed_by_count=0. The caller indicates "
            "that this is not a failure, but may mean that there could be performance gains if more memory were "
            "available.\n")
    with pytest.raises(TraceFormatError, match="no out-of-memory dump"):
        load_oom_dumps(write(tmp_path, "fine.log", text))


def test_cut_off_dump_says_what_is_missing_and_keeps_what_is_there(tmp_path: Path) -> None:
    cut = FRAGMENTED[: FRAGMENTED.index("I0000 00:00:1700000000.000016")]
    [event] = analyse_all(load_oom_dumps(write(tmp_path, "cut.log", cut)))
    assert event.dump.missing == (SECTION_SUM, SECTION_STATS)
    # No limit line survived: the pool's free chunks alone still hold 2560 >= 2048 bytes.
    assert (event.limit_bytes, event.growth_bytes, event.free_bytes) == (None, None, 2560)
    assert event.verdict == FRAGMENTATION


def test_memory_dump_needs_the_request_for_a_verdict(tmp_path: Path) -> None:
    from memtrace.read._proto import bfc_memory_map_pb2

    # GIVEN chunks 0x1000+1024 (in use, asked 1000), 0x1400+1024 free, 0x1800+2048 (in use, asked 1536),
    # then 0x5000+512 free: 0x2000 != 0x5000, so two regions of 4096 and 512 bytes.
    dump = bfc_memory_map_pb2.MemoryDump(allocator_name="GPU_0_bfc")
    for address, size, requested, in_use in [(0x1000, 1024, 1000, True), (0x1400, 1024, 0, False),
                                             (0x1800, 2048, 1536, True), (0x5000, 512, 0, False)]:
        dump.chunk.add(address=address, size=size, requested_size=requested, in_use=in_use)
    dump.stats.bytes_in_use = 3072
    path = tmp_path / "dump_GPU_0_bfc.1700000000"
    path.write_bytes(dump.SerializeToString())
    [parsed] = load_oom_dumps(path)
    assert parsed.source == "memory-dump" and [r.size_bytes for r in parsed.regions] == [4096, 512]
    unknown = analyse(parsed)
    assert unknown.verdict is None and unknown.requested_in_use_bytes == 2536
    # pool 4608, limit 6144 -> room 1536; free 1024 + 512 + 1536 = 3072 >= 2048, largest chunk 1024
    event = analyse(parsed, request_bytes=2048, limit_bytes=6144)
    assert (event.free_bytes, event.largest_free_bytes, event.verdict) == (3072, 1024, FRAGMENTATION)
    assert analyse(parsed, request_bytes=4096, limit_bytes=6144).missing_bytes == 1024


def test_python_api_explains_every_event_of_a_file() -> None:
    import memtrace

    events = memtrace.explain_oom(OOM / "cpu_fragmented.log")
    assert [e.verdict for e in events] == [EXHAUSTED, FRAGMENTATION]
    [from_dump] = memtrace.explain_oom(OOM / "cpu_fragmented.memdump.pb", request_bytes=2 * MIB, limit_bytes=64 * MIB)
    assert (from_dump.verdict, from_dump.free_bytes, from_dump.largest_free_bytes) == (FRAGMENTATION, 31 * MIB, MIB)


def test_sizes_written_for_people_are_read_back_and_marked_inexact() -> None:
    assert parse_logged_size("64.00MiB") == (64 * MIB, False)
    assert parse_logged_size("67108864") == (67108864, True)
    assert parse_logged_size("0B") == (0, True)
    assert parse_logged_size("198.75MiB") == (208404480, False)


# -- real OOMs recorded with TensorFlow 2.21 on CPU --------------------------------------------


def human_close(parsed: int, logged: int | None) -> bool:
    """A size TensorFlow wrote with two decimals in its unit agrees with the exact count."""
    assert logged is not None
    unit = max(u for u in (1, 1 << 10, 1 << 20, 1 << 30) if logged >= u or u == 1)
    return abs(parsed - logged) <= unit // 200 + 1


def cross_check_log(dump: OomDump) -> None:
    """The dump's own summary lines agree with the chunks parsed from its chunk map."""
    in_use = [c.size_bytes for c in dump.chunks if c.in_use]
    assert Counter(in_use) == Counter(dict(dump.in_use_by_size))  # "N Chunks of size S", exact
    assert human_close(sum(in_use), dump.sum_in_use_bytes)  # "Sum Total of in-use chunks"
    assert dump.stats is not None and dump.stats.in_use_bytes is not None
    assert human_close(sum(in_use), dump.stats.in_use_bytes)  # the Stats block's InUse
    if dump.regions_listed:
        assert all(sum(c.size_bytes for c in r.chunks) == r.size_bytes for r in dump.regions)
    if dump.pool_bytes_reported is not None:
        assert human_close(sum(r.size_bytes for r in dump.regions), dump.pool_bytes_reported)
    chunks_by_bin = sum(b.chunks for b in dump.bins)
    assert chunks_by_bin == len(dump.chunks) and sum(b.chunks_in_use for b in dump.bins) == len(in_use)


def cross_check_memory_dump(dump: OomDump) -> None:
    in_use = [c for c in dump.chunks if c.in_use]
    assert dump.stats is not None and dump.stats.in_use_bytes == sum(c.size_bytes for c in in_use)
    assert len(dump.bins) == 21
    for summary in dump.bins:  # the bin summary TensorFlow computed, against the chunks it listed
        members = [c for c in dump.chunks if 256 << bin_for_size(c.size_bytes) == summary.bin_bytes]
        assert (summary.chunks, summary.allocated_bytes) == (len(members), sum(c.size_bytes for c in members))
        assert (summary.chunks_in_use, summary.in_use_bytes) == (
            sum(c.in_use for c in members), sum(c.size_bytes for c in members if c.in_use))


@pytest.mark.parametrize(
    ("name", "events"),
    [
        # (verdict, request, limit, in use, free in all, largest free chunk, free chunks, missing)
        ("cpu_exhausted", [(EXHAUSTED, 64 * MIB, 32 * MIB, 12583168, 20971264, 2096896, 1, 46137600)]),
        ("cpu_fragmented", [(EXHAUSTED, MIB, 64 * MIB, 64 * MIB, 0, 0, 0, MIB),
                            (FRAGMENTATION, 2 * MIB, 64 * MIB, 34603008, 31 * MIB, MIB, 31, 0)]),
        ("cpu_session_report", [(EXHAUSTED, 64 * MIB, 48 * MIB, 16778240, 33553408, 4194304, 2, 33555456)]),
        ("cpu_keras_fit", [(FRAGMENTATION, 32 * MIB, 96 * MIB, 42128384, 58534912, 8 * MIB, 7, 0)]),
        ("cpu_unsplit_chunk", [(EXHAUSTED, 5 * MIB, 64 * MIB, 64 * MIB, 0, 0, 0, 5 * MIB)]),
    ],
)
def test_recorded_cpu_oom(name: str, events: list[tuple[object, ...]]) -> None:
    dumps = load_oom_dumps(OOM / f"{name}.log")
    results = analyse_all(dumps)
    assert [(e.verdict, e.request_bytes, e.limit_bytes, e.in_use_bytes, e.free_bytes, e.largest_free_bytes,
             e.free_chunks, e.missing_bytes) for e in results] == events
    for dump in dumps:
        cross_check_log(dump)
    # TensorFlow wrote a MemoryDump at the same (last) failure: its exact byte counts agree.
    [memory_dump] = load_oom_dumps(OOM / f"{name}.memdump.pb")
    cross_check_memory_dump(memory_dump)
    last = results[-1]
    assert memory_dump.allocator == last.dump.allocator == "bfc_cpu_allocator_for_gpu"
    assert memory_dump.stats is not None and memory_dump.stats.in_use_bytes == last.in_use_bytes
    assert [(c.address, c.size_bytes, c.in_use) for c in memory_dump.chunks] == sorted(
        (c.address, c.size_bytes, c.in_use) for c in last.dump.chunks)
    from_pb = analyse(memory_dump, last.request_bytes, last.limit_bytes)
    assert (from_pb.verdict, from_pb.free_bytes, from_pb.largest_free_bytes) == (
        last.verdict, last.free_bytes, last.largest_free_bytes)


def test_fragmentation_recording_freed_every_other_block() -> None:
    second = analyse_all(load_oom_dumps(OOM / "cpu_fragmented.log"))[1]
    big_region = second.dump.regions[0]
    assert big_region.size_bytes == 32 * MIB
    assert [c.in_use for c in big_region.chunks] == [False, True] * 16


def test_session_reports_live_tensors_by_op() -> None:
    [event] = analyse_all(load_oom_dumps(OOM / "cpu_session_report.log"))
    assert event.dump.op == "wide4" and event.dump.shape == "4096,4096" and event.dump.dtype == "float"
    assert [(t.op, t.bytes) for t in event.top_holders] == [("stack4", 16 * MIB)]
    assert event.dump.device == "/job:localhost/replica:0/task:0/device:CPU:0"


# -- a real GPU log a user published ------------------------------------------------------------


def test_public_tf14_alexnet_log_is_exhausted_and_its_numbers_agree() -> None:
    [dump] = load_oom_dumps(OOM / "public_tf14_alexnet_k40c.md")
    cross_check_log(dump)
    in_use = sum(c.size_bytes for c in dump.chunks if c.in_use)
    # TF 1.4 wrote the Stats block in exact bytes: InUse and Limit agree with the chunk map exactly.
    assert dump.stats is not None and (dump.stats.in_use_bytes, dump.stats.limit_bytes) == (in_use, 285474816)
    assert in_use == 208404480 and sum(c.size_bytes for c in dump.chunks) == dump.limit_bytes
    event = analyse(dump)
    assert (event.free_bytes, event.largest_free_bytes, event.free_chunks) == (77070336, 69648384, 4)
    # "74.16MiB" has no "rounded to" in TF 1.4 and the error gives no dtype: the request is approximate,
    # but 74.16 MiB or the float tensor [128,225,225,3] (77760000 bytes) both exceed the 77070336 free.
    assert not dump.request_exact and event.request_bytes == 77762560
    assert event.verdict == EXHAUSTED and dump.op == "conv1/Conv2D"


def test_public_tf2_gpu_log_is_fragmentation_and_its_numbers_agree() -> None:
    """A student's CIFAR-10 run on an RTX 3070 Ti (TF 2.x, tsl): 2.71 GiB free, no hole of 586 MiB."""
    [dump] = load_oom_dumps(OOM / "public_tf2_rtx3070ti_cifar10.log")
    cross_check_log(dump)
    in_use = sum(c.size_bytes for c in dump.chunks if c.in_use)
    # This version logged the pool and the Stats block in exact bytes: they agree with the chunk map exactly.
    assert dump.stats is not None and (dump.stats.in_use_bytes, dump.stats.limit_bytes) == (in_use, 3502964736)
    assert dump.pool_bytes_reported == sum(r.size_bytes for r in dump.regions) == 3502964736
    event = analyse(dump)
    assert (event.request_bytes, event.dump.op, event.limit_bytes) == (614400000, "_EagerConst", 3502964736)
    # free = pool - InUse from the Stats line, independent of the free chunks parsed: 3502964736 - 589212672
    assert event.free_bytes == 2913752064 and event.free_chunks == 40
    assert event.largest_free_bytes == 558759936
    assert event.largest_free_bytes < event.request_bytes < event.free_bytes
    assert event.verdict == FRAGMENTATION



# -- real GPU dumps recorded on an H100: XLA (JAX 0.11.2) runs the same BFC allocator as TensorFlow ----


def _h100_summary_line(path: Path, occurrence: int) -> tuple[float, float]:
    """The allocator's own answer, which XLA's BFC allocator logs after the chunk map: (total free, largest free) in MiB."""
    lines = [line for line in path.read_text().splitlines() if "Allocator memory summary" in line]
    found = re.search(r"total free in pool ([0-9.]+)MiB, largest free chunk usable by lower end ([0-9.]+)MiB",
                      lines[occurrence])
    assert found is not None
    return float(found.group(1)), float(found.group(2))


def _h100_checks(dump: OomDump) -> None:
    """What this allocator version keeps true: the in-use summary lines, and one region of the whole pool.

    Its bins leave out the region's last free chunk (tagged ``central_gap``), so bins count one chunk fewer.
    """
    in_use = [c.size_bytes for c in dump.chunks if c.in_use]
    assert Counter(in_use) == Counter(dict(dump.in_use_by_size))  # "N Chunks of size S", exact
    assert human_close(sum(in_use), dump.sum_in_use_bytes)  # "Sum Total of in-use chunks"
    assert all(sum(c.size_bytes for c in r.chunks) == r.size_bytes for r in dump.regions)
    assert sum(b.chunks for b in dump.bins) in (len(dump.chunks), len(dump.chunks) - 1)


def test_h100_exhausted_log_agrees_with_its_own_region_line() -> None:
    """Filled with 64 MiB arrays until the 812 MiB pool ran out: nothing left but one 256 B chunk."""
    [dump] = load_oom_dumps(OOM / "jax_h100_exhausted.log")
    _h100_checks(dump)
    event = analyse(dump)
    # "Next region of size 851443712" is the whole pool, which is the limit: 812 MiB exactly.
    assert [r.size_bytes for r in dump.regions] == [851443712] == [event.limit_bytes]
    assert event.in_use_bytes + event.free_bytes == 851443712
    assert (event.request_bytes, event.free_bytes, event.largest_free_bytes) == (64 * MIB, 256, 256)
    # Eleven 64 MiB chunks, one that holds a 64 MiB request unsplit (the pool's rest), and 256 B.
    assert sorted(c.size_bytes for c in dump.chunks if c.in_use) == [256, *[64 * MIB] * 11, 851443712 - 11 * 64 * MIB - 512]
    assert event.verdict == EXHAUSTED


def test_h100_every_other_block_freed_is_fragmentation() -> None:
    """26 blocks of 32 MiB filled the pool (first OOM); with every other one and the last two freed,
    428 MiB are free but no hole holds the 64 MiB asked for (second OOM)."""
    path = OOM / "jax_h100_fragmented.log"
    first, second = analyse_all(load_oom_dumps(path))
    for event in (first, second):
        _h100_checks(event.dump)
        assert event.in_use_bytes + event.free_bytes == event.limit_bytes == 851443712
    assert (first.verdict, first.request_bytes, first.free_bytes) == (EXHAUSTED, 32 * MIB, 256)
    # "Sum Total of in-use chunks: 384.00MiB": twelve 32 MiB chunks and the 256 B one.
    assert second.in_use_bytes == 12 * 32 * MIB + 256 == 402653440
    # The last hole, "Free at 332000200 of size 46136832 tag central_gap", is the largest.
    assert (second.free_bytes, second.free_chunks, second.largest_free_bytes) == (448790272, 14, 46136832)
    # The allocator's own summary line says the same, rounded: 428.00 MiB free, the largest usable chunk 44.00 MiB.
    ours = (round(second.free_bytes / MIB, 2), round(second.largest_free_bytes / MIB, 2))
    assert _h100_summary_line(path, 1) == ours == (428.0, 44.0)
    assert second.largest_free_bytes < second.request_bytes == 64 * MIB < second.free_bytes
    assert second.verdict == FRAGMENTATION

def test_public_issue_excerpt_of_a_chunk_map_is_a_headless_dump() -> None:
    """tensorflow/tensorflow#22586: eleven chunk lines of a TF 1.x dump, cut where the excerpt ends.

    Worked by hand: the addresses are contiguous (0x7f94a939ca00 + 917504 = 0x7f94a947ca00, ...), so one
    region of 158064640 bytes; free 917504 + 139264 + 819200 = 1875968 in 3 chunks, the rest in use.
    """
    [dump] = load_oom_dumps(OOM / "issue_tf22586_excerpt.log")
    assert dump.allocator is None and dump.missing == (SECTION_REQUEST, SECTION_BINS, SECTION_SUM, SECTION_STATS)
    assert [r.size_bytes for r in dump.regions] == [158064640]
    event = analyse(dump)
    assert (event.in_use_bytes, event.free_bytes, event.largest_free_bytes, event.free_chunks) == (
        156188672, 1875968, 917504, 3)
    assert event.verdict is None
    # With the request given (1 MiB) and no limit, the free chunks hold enough bytes but none is large enough.
    assert analyse(dump, request_bytes=MIB).verdict == FRAGMENTATION


def test_public_issue_excerpt_of_the_summary_uses_the_stats_block() -> None:
    """tflearn/tflearn#505: the end of a Windows dump's in-use summary and its Stats block in bytes."""
    [dump] = load_oom_dumps(OOM / "issue_tflearn505_excerpt.log")
    assert dump.missing == (SECTION_REQUEST, SECTION_BINS, SECTION_CHUNKS)
    assert dump.stats is not None and (dump.stats.limit_bytes, dump.stats.in_use_bytes) == (1548284723, 1273852672)
    # The excerpt begins inside the summary: its rows hold 1267538688 of the 1273852672 bytes in use.
    assert sum(size * count for size, count in dump.in_use_by_size) == 1267538688
    assert human_close(1273852672, dump.sum_in_use_bytes)  # "1.19GiB"
    event = analyse(dump)
    assert (event.in_use_bytes, event.limit_bytes, event.pool_bytes, event.free_bytes, event.verdict) == (
        1273852672, 1548284723, None, None, None)


def test_public_log_with_only_retry_warnings_has_no_oom(capsys: pytest.CaptureFixture[str]) -> None:
    path = OOM / "public_tf24_not_a_failure.log"
    code, out, err = run(capsys, "oom", str(path))
    assert (code, out) == (2, "")
    assert err == f"memtrace: error: {path}: no out-of-memory dump in it (no 'ran out of memory trying to allocate' " \
                  "line of the BFC allocator, nor a 'BFCAllocator dump')\n"


# -- the command line ---------------------------------------------------------------------------


def test_json_contract(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, "frag.log", FRAGMENTED)
    code, out, _ = run(capsys, "oom", str(path), str(OOM / "cpu_exhausted.log"), "--json")
    document = json.loads(out)
    assert code == 0 and document["schema"] == "memtrace.oom/1"
    first, second = document["events"]
    for key in ("allocator", "request_bytes", "op", "limit_bytes", "in_use_bytes", "requested_in_use_bytes",
                "free_bytes", "largest_free_bytes", "free_chunks", "regions", "bins", "live_tensors", "verdict"):
        assert key in first
    assert {k: first[k] for k in ("allocator", "request_bytes", "op", "limit_bytes", "in_use_bytes",
                                  "requested_in_use_bytes", "free_bytes", "largest_free_bytes", "free_chunks",
                                  "verdict")} == {
        "allocator": "GPU_0_bfc", "request_bytes": 2048, "op": "MatMul", "limit_bytes": 6656, "in_use_bytes": 3584,
        "requested_in_use_bytes": 3072, "free_bytes": 3072, "largest_free_bytes": 1024, "free_chunks": 3,
        "verdict": "fragmentation"}
    assert [(r["address"], r["size_bytes"], r["in_use_bytes"], r["free_bytes"]) for r in first["regions"]] == [
        (0x1000, 4096, 2048, 2048), (0x8000, 2048, 1536, 512)]
    assert [b["bin_bytes"] for b in first["bins"]] == [256, 512, 1024]
    assert first["live_tensors"] == []
    assert (second["verdict"], second["request_bytes"]) == ("exhausted", 64 * MIB)


def test_text_report_gives_verdict_and_advice(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "oom", str(OOM / "cpu_session_report.log"))
    assert code == 0
    assert "verdict: EXHAUSTED" in out
    assert "  missing       32 MiB\n" in out
    assert "Look first at stack4" in out


def test_html_is_written_with_names_escaped(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    hostile = FRAGMENTED.replace("requested by op MatMul", "requested by op <script>alert(1)</script>")
    path = write(tmp_path, "hostile.log", hostile)
    target = tmp_path / "oom.html"
    code, out, _ = run(capsys, "oom", str(path), "--html", "-o", str(target))
    page = target.read_text()
    assert (code, out) == (0, "")
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "") and "<svg" in page
    assert "the request: 2 KiB, beside the largest hole: 1 KiB" in page


def test_html_memory_map_stays_small_for_a_huge_dump(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    lines = [FRAGMENTED.split("\n")[0], "Next region of size 40960000"]
    lines += [f"{'InUse' if i % 2 else 'Free '} at {0x10000 + 4096 * i:x} of size 4096 next {i + 1}" for i in range(10000)]
    path = write(tmp_path, "huge.log", "\n".join(lines) + "\n")
    target = tmp_path / "huge.html"
    code, _, _ = run(capsys, "oom", str(path), "--html", "-o", str(target))
    assert code == 2  # cut off: no bins, no sums, no stats; the page is written all the same
    assert target.read_text().count("<rect") < 1000


def test_cut_off_dump_reports_then_exits_2_with_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cut = FRAGMENTED[: FRAGMENTED.index("I0000 00:00:1700000000.000016")]
    path = write(tmp_path, "cut.log", cut)
    code, out, err = run(capsys, "oom", str(path))
    assert code == 2 and "verdict: FRAGMENTATION" in out
    assert err == (f"memtrace: error: {path}:1: the dump is cut off, missing {SECTION_SUM}, {SECTION_STATS}; "
                   "reported what is there\n")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (bytes(range(256)) * 4, "neither a log with a BFC dump nor a MemoryDump protobuf"),
        (b"epoch 1 loss 0.5\nepoch 2 loss 0.4\n", "no out-of-memory dump in it"),
        (b"", "the file is empty"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path, content: bytes,
                                          message: str) -> None:
    path = tmp_path / "input"
    path.write_bytes(content)
    code, out, err = run(capsys, "oom", str(path))
    assert (code, out) == (2, "")
    assert err.startswith(f"memtrace: error: {path}: {message}") and err.count("\n") == 1


def test_missing_file_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run(capsys, "oom", str(tmp_path / "nope.log"))
    assert (code, out, err) == (2, "", f"memtrace: error: {tmp_path / 'nope.log'}: no such file\n")


def test_docs_worked_example_shows_both_verdicts() -> None:
    # The block's text is checked against what memtrace prints by tests/test_docs_examples.py.
    page = (FIXTURES.parent / "docs" / "oom.md").read_text()
    shown = page.split("$ memtrace oom fixtures/oom/cpu_fragmented.log --top 3\n", 1)[1].split("```", 1)[0]
    first, second = shown.split("OOM 2 of 2", 1)
    assert "verdict: EXHAUSTED" in first and "verdict: FRAGMENTATION" in second


def test_vendored_memory_dump_schema_matches_tensorflows() -> None:
    """Our bfc_memory_map.proto has TensorFlow's field names, numbers and types, under our own package."""
    require("tensorflow")
    try:  # TensorFlow 2.21 keeps it in XLA's tsl; tensorflow/core/protobuf only re-exports it
        from tensorflow.compiler.xla.tsl.protobuf import bfc_memory_map_pb2 as theirs
    except ImportError:
        from tensorflow.core.protobuf import bfc_memory_map_pb2 as theirs

    from memtrace.read._proto import bfc_memory_map_pb2 as ours

    assert ours.DESCRIPTOR.package == "memtrace.bfc" and theirs.DESCRIPTOR.package == "tensorflow"
    for name in ("MemAllocatorStats", "MemChunk", "BinSummary", "SnapShot", "MemoryDump"):
        mine, tf = ours.DESCRIPTOR.message_types_by_name[name], theirs.DESCRIPTOR.message_types_by_name[name]
        assert [(f.name, f.number, f.type) for f in mine.fields] == [(f.name, f.number, f.type) for f in tf.fields]


def test_the_drawn_request_stays_inside_the_map_when_the_largest_hole_ends_the_region(tmp_path: Path) -> None:
    # On the H100 log the largest hole is the region's last chunk, and the request is larger than it.
    from memtrace.reporters.oom import LABEL, WIDTH

    page = tmp_path / "oom.html"
    assert main(["oom", str(OOM / "jax_h100_fragmented.log"), "--html", "-o", str(page)]) == 0
    boxes = re.findall(r'<rect x="([0-9.]+)" y="[0-9.]+" width="([0-9.]+)" height="[0-9.]+" fill="none" stroke="#dc2626"',
                       page.read_text())
    assert len(boxes) == 2
    assert all(float(x) + float(width) <= LABEL + WIDTH + 0.01 for x, width in boxes)


def test_one_region_and_one_chunk_are_singular(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["oom", str(OOM / "jax_h100_exhausted.log")]) == 0
    out = capsys.readouterr().out
    assert "812 MiB in 1 region\n" in out and "256 B in 1 chunk\n" in out and "in 1 free chunk of the pool" in out


def test_output_that_is_the_dump_is_refused_and_the_dump_kept(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    log = tmp_path / "oom.log"
    log.write_bytes((OOM / "cpu_exhausted.log").read_bytes())
    assert main(["oom", str(log), "--html", "-o", str(log)]) == 2
    assert log.read_bytes() == (OOM / "cpu_exhausted.log").read_bytes()
    assert capsys.readouterr().err.count("\n") == 1


def test_a_log_from_standard_input_is_read_like_a_file(capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import sys

    data = (OOM / "jax_h100_fragmented.log").read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert main(["oom", "-", "--json"]) == 0
    events = json.loads(capsys.readouterr().out)["events"]
    assert [e["verdict"] for e in events] == ["exhausted", "fragmentation"]


def _events(capsys: pytest.CaptureFixture[str], path: Path | str) -> list[dict[str, object]]:
    """``oom --json``'s events, without the file's name (compared across files)."""
    assert main(["oom", str(path), "--json"]) == 0
    events = json.loads(capsys.readouterr().out)["events"]
    for event in events:
        event.pop("path", None)
    return events  # type: ignore[no-any-return]


def _shifted(events: list[dict[str, object]], lines: int) -> list[dict[str, object]]:
    return [{**e, "line": e["line"] + lines} for e in events]  # type: ignore[operator]


def test_a_log_larger_than_the_reference_cap_is_streamed(capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 25 item 11: a log is no longer held whole, so it has no size limit (it was refused past 256 MiB)."""
    from memtrace.read import files

    path = OOM / "jax_h100_fragmented.log"
    expected = _events(capsys, path)
    monkeypatch.setattr(files, "REFERENCE_MAX_BYTES", 1000)
    monkeypatch.setattr(files, "PIECE_BYTES", 4096)  # and cut into many pieces
    assert _events(capsys, path) == expected and [e["verdict"] for e in expected] == ["exhausted", "fragmentation"]


_RSS = ("import sys\nfrom memtrace.cli import main\ncode = main(sys.argv[1:])\nsys.stdout.flush()\n"
        "peak = next(line for line in open('/proc/self/status') if line.startswith('VmHWM:'))\n"
        "print('RSS_MB', int(peak.split()[1]) // 1024, file=sys.stderr)\nsys.exit(code)")


@pytest.mark.parametrize("before", ["NUL-padding", "one-long-line", "console-lines"])
def test_a_large_console_log_ending_in_a_dump_streams_in_bounded_memory(tmp_path: Path, before: str) -> None:
    """300 MB of NULs (sparse: what ``copytruncate`` leaves), a 100 MB line, or 50 MB of console lines
    before a real dump: the same events (their lines shifted), in bounded memory and seconds."""
    import os
    import subprocess
    import sys
    import time

    dump = (OOM / "cpu_fragmented.log").read_bytes()
    path = tmp_path / "console.log"
    lines = 0
    with path.open("wb") as out:
        if before == "NUL-padding":
            out.truncate(300 << 20)
            out.seek(300 << 20)
        elif before == "one-long-line":
            piece = b"x" * (1 << 20)
            for _ in range(100):
                out.write(piece)
            out.write(b"\n")
            lines = 1
        else:
            block = b"Epoch 3/10 step 100/1000 - loss: 0.5312 - accuracy: 0.8123\n" * 16384
            for _ in range(50 << 20 // len(block)):
                out.write(block)
                lines += 16384
        out.write(dump)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", _RSS, "oom", str(path), "--json"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(FIXTURES.parent)}, timeout=120, check=False)
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    rss_mb = int(done.stderr.split()[-1])
    events = json.loads(done.stdout)["events"]
    assert rss_mb < 200 and seconds < 30, (rss_mb, seconds)
    # the recording's two OOMs (1 MiB blocks until the limit, then 2 MiB with every other one freed: fixtures/README.md)
    assert [(e["line"], e["verdict"], e["request_bytes"]) for e in events] == [
        (7 + lines, "exhausted", 1 << 20), (124 + lines, "fragmentation", 2 << 20)]


def _progress_bar() -> bytes:
    """What Keras writes to a console: a bar redrawn with backspaces, on one line."""
    return b"".join(b"%d/10 [%s>%s] - ETA: 1s - loss: 0.5%s" % (i, b"=" * i, b"." * (9 - i), b"\b" * 40)
                    for i in range(10)) + b"\n"


_CONSOLE_FORMS = {
    "keras-backspaces": (lambda log: _progress_bar() + log, 1),
    "NUL-padding-at-the-start": (lambda log: b"\0" * 200_000 + log, 0),
    "one-NUL-midway": (lambda log: log[:len(log) // 2] + b"\0" + log[len(log) // 2:], 0),
    "utf-16-with-bom": (lambda log: b"\xff\xfe" + log.decode().replace("\n", "\r\n").encode("utf-16-le"), 0),
    "utf-16-big-endian": (lambda log: b"\xfe\xff" + log.decode().encode("utf-16-be"), 0),
    "utf-8-with-bom": (lambda log: b"\xef\xbb\xbf" + log, 0),
}


@pytest.mark.parametrize("form", list(_CONSOLE_FORMS))
@pytest.mark.parametrize("name", ["cpu_fragmented.log", "jax_h100_exhausted.log", "public_tf2_rtx3070ti_cifar10.log"])
def test_what_consoles_leave_in_a_log_does_not_make_it_binary(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                              form: str, name: str) -> None:
    """Issue 25 item 19: one control byte in the first 64 KiB made a whole log "binary"."""
    make, extra_lines = _CONSOLE_FORMS[form]
    path = tmp_path / "console.log"
    path.write_bytes(make((OOM / name).read_bytes()))
    assert _events(capsys, path) == _shifted(_events(capsys, OOM / name), extra_lines)


def test_a_short_excerpt_of_summary_and_stats_with_a_console_bell_is_still_a_log(tmp_path: Path) -> None:
    # A forum excerpt of the dump's size summary and stats alone (1,427 bytes), and a program's "\a\a done"
    # after it: two control bytes in so little made it "binary", and no dump line was known to say
    # otherwise, so the log was refused (found by MEMTRACE_FUZZ_SEED=20).
    path = tmp_path / "excerpt.log"
    path.write_bytes((OOM / "issue_tflearn505_excerpt.log").read_bytes() + b"\x07\x07 done\n")
    [dump] = load_oom_dumps(path)
    [original] = load_oom_dumps(OOM / "issue_tflearn505_excerpt.log")
    assert dataclasses.replace(dump, path=original.path) == original and dump.stats is not None and dump.stats.limit_bytes == 1548284723


def test_more_lost_inside_chunks_than_missing_is_said_with_the_chunks_named(capsys: pytest.CaptureFixture[str],
                                                                              tmp_path: Path) -> None:
    # GIVEN a real OOM (scripts/record_traces.py oom, cpu_unsplit_chunk): a 16 MiB tensor (tf.fill of
    # 4 Mi float32) in a freed 29 MiB chunk BFC handed out whole (29 < 2 x 16), then 5 MiB tensors
    # until a 5 MiB one fails under the 64 MiB limit with nothing free
    [event] = analyse_all(load_oom_dumps(OOM / "cpu_unsplit_chunk.log"))
    # THEN the 64 MiB of chunks in use (the chunk map) hold what the bins say clients asked for,
    # 2 + 30 + 16 MiB + 4 B: 16 MiB less 4 B lost, more than the 5 MiB missing
    assert (event.verdict, event.missing_bytes) == (EXHAUSTED, 5 * MIB)
    assert event.internal_waste_bytes == 64 * MIB - (48 * MIB + 4) and event.lost_exceeds_missing
    # the 29 MiB chunk is the only one in use in the 16 MiB bin: the log names it ("InUse at
    # 7f55062ff040 of size 30408704") and its bin says 16 MiB of it was asked for
    first = event.lost_chunks[0]
    assert (first.address, first.size_bytes, first.requested_bytes, first.chunks) == (0x7F55062FF040, 30408704, 16 * MIB, 1)
    # the MemoryDump TensorFlow wrote at the same failure says each chunk's request exactly
    [exact] = analyse_all(load_oom_dumps(OOM / "cpu_unsplit_chunk.memdump.pb"), 5 * MIB, 64 * MIB)
    assert exact.internal_waste_bytes == 64 * MIB - (16 * MIB + 6 * 5 * MIB + 2 * MIB + 4)
    assert [(c.address, c.size_bytes, c.requested_bytes) for c in exact.lost_chunks] == [
        (0x7F55062FF040, 30408704, 16 * MIB), (0x7F55130FE040, 7340032, 5 * MIB), (0x556F2DDF7B00, 2096896, MIB)]
    assert exact.lost_exceeds_missing
    # WHEN it is read as text THEN the verdict says so and names the chunk; the advice works in eager mode
    assert main(["oom", str(OOM / "cpu_unsplit_chunk.log")]) == 0
    out = capsys.readouterr().out.replace("\n  ", " ")
    assert "verdict: EXHAUSTED (yet 16 MiB lost inside chunks, more than the 5 MiB missing)" in out
    assert "a 29 MiB chunk at 0x7f55062ff040 holds about 16 MiB (about 13 MiB lost)" in out
    assert "in eager mode and under Keras, profile a step" in out
    # and the memory map draws that chunk half filled: loss from 1 + 16 MiB into its 30 MiB region
    page = tmp_path / "oom.html"
    assert main(["oom", str(OOM / "cpu_unsplit_chunk.memdump.pb"), "--request", "5MiB", "--limit", "64MiB",
                 "--html", "-o", str(page)]) == 0
    lost = re.findall(r'<rect class="lost" x="([0-9.]+)" y="[0-9]+" width="([0-9.]+)"', page.read_text())
    scale = 900 / (32 * MIB)  # the widest region, 32 MiB, is 900 units wide
    drawn = [(round(float(x), 1), round(float(w), 1)) for x, w in lost]
    assert len(drawn) == 3  # the three chunks named
    assert (round(150 + (MIB + 16 * MIB) * scale, 1), round((30408704 - 16 * MIB) * scale, 1)) in drawn


def test_fragmentation_and_plain_exhaustion_say_nothing_of_chunks_lost() -> None:
    # cpu_keras_fit loses 10.4 KiB inside chunks and is fragmentation; cpu_exhausted loses 248 B of 44 MiB missing
    for name in ("cpu_keras_fit", "cpu_exhausted"):
        [event] = analyse_all(load_oom_dumps(OOM / f"{name}.log"))
        assert not event.lost_exceeds_missing
        assert not any("lost inside chunks" in s for s in event.explanation)


# -- a console of several dumps: which one ended the run (issue 35, item 8) ---------------------------------------


def test_which_failure_ended_the_run_is_the_one_the_last_uncaught_error_names(tmp_path: Path,
                                                                             capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the real log of two CPU failures 10 s apart (fixtures/oom/cpu_fragmented.log: the program caught both,
    # so no error ends it), and the same log ended as a program ends that does not catch the first: the
    # exception naming the first failure's tensor (shape [262144]) printed last, after the second dump
    real = OOM / "cpu_fragmented.log"
    ended = tmp_path / "ended.log"
    ended.write_text(real.read_text() + "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n"
                     "tensorflow.python.framework.errors_impl.ResourceExhaustedError: {{function_node "
                     "__wrapped__Fill_device_/job:localhost/replica:0/task:0/device:CPU:0}} OOM when allocating tensor "
                     "with shape[262144] and type float on /job:localhost/replica:0/task:0/device:CPU:0 by allocator "
                     "bfc_cpu_allocator_for_gpu [Op:Fill] name: \n")
    assert [(d.ended_run, d.time_s) for d in load_oom_dumps(str(real))] == [(None, 1795366430.8543),
                                                                           (None, 1795366440.856205)]
    assert [d.ended_run for d in load_oom_dumps(str(ended))] == [True, False]
    # THEN the text says so under each event's heading, with the time between them from the log's own stamps
    code, out, _ = run(capsys, "oom", str(ended))
    assert code == 0
    lines = out.replace("\n  ", " ").splitlines()  # (a long line goes on, indented, on the next)
    first, second = (lines[i + 1] for i, line in enumerate(lines) if line.startswith("OOM "))
    assert first.startswith("this failure ended the run: the program's last error reports its request")
    assert second == "10.0 s after OOM 1; not the failure that ended the run: OOM 1 of 2 did (the program's last error reports it)"
    code, out, _ = run(capsys, "oom", str(real))
    assert "which of them ended the run the log does not say" in out.replace("\n  ", " ")
    # AND the JSON and the page carry it
    code, out, _ = run(capsys, "oom", str(ended), "--json")
    assert [(e["ended_run"], e["time_s"]) for e in json.loads(out)["events"]] == [(True, 1795366430.8543),
                                                                                 (False, 1795366440.856205)]
    page = tmp_path / "oom.html"
    assert main(["oom", str(ended), "--html", "-o", str(page)]) == 0
    assert page.read_text().count('<p class="answer">This failure ended the run') == 1


def test_a_jax_error_names_the_failure_by_its_size() -> None:
    # the H100 log (32 MiB, then 64 MiB 10 s later) ends with "JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory
    # while trying to allocate 64.00MiB": the second
    assert [d.ended_run for d in load_oom_dumps(str(OOM / "jax_h100_fragmented.log"))] == [False, True]
    # one dump and the traceback after it (fixtures/fit/eager.1000mib.log)
    assert [d.ended_run for d in load_oom_dumps(str(FIXTURES / "fit" / "eager.1000mib.log"))] == [True]


def test_regions_of_a_dump_come_in_address_order_as_the_pages_number_them() -> None:
    # region 1 is the lowest addresses on the out-of-memory page and on fit's (reporters/address_space.py)
    for name in ("cpu_regions_49mib.log", "cpu_fragmented.log", "cpu_keras_fit.log"):
        for dump in load_oom_dumps(str(OOM / name)):
            addresses = [r.address for r in dump.regions]
            assert addresses == sorted(addresses) and None not in addresses
