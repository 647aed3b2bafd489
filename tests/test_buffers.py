"""Buffer identity, worked out once in ``memtrace.trace.buffers``: peak, tensor, frag, summary and the graph agree on it."""

from __future__ import annotations

import memtrace
from memtrace.analyses.frag import fragmentation
from memtrace.analyses.summary import summarize
from memtrace.analyses.tensor import buffer_story

from .conftest import TINY

POINTER_ALIAS = TINY / "pointer_alias.pbtxt"
CPU_ID_REUSE = TINY / "cpu_id_reuse.pbtxt"


def test_untracked_buffer_forwarded_by_pointer_is_one_buffer() -> None:
    """GIVEN an old trace (allocation_id 0 everywhere, allocator ``cpu``, no records): the variable
    DW2 (1,152 B at 0x1000, 100-101 us), DW2/read = Identity(DW2) and update =
    ApplyGradientDescent(DW2, ...) at the same pointer, x (896 B), mul = MatMul(x, DW2/read)
    (1,048 B, 106-110 us)
    WHEN the buffers are worked out
    THEN DW2/read and update are aliases of DW2 (their ops read it, same allocator and pointer):
    at mul's start (6 us) 1,152 + 896 + 1,048 = 3,096 B are live, not 4,248 B (DW2 twice), and
    frag sees no overlapping live buffers."""
    trace = memtrace.load(POINTER_ALIAS)
    peak = trace.peak("cpu")
    assert (peak.peak_delta_bytes, peak.peak_time_us) == (3096, 6)
    assert sorted((a.node, a.bytes) for a in peak.live_at_peak) == [("DW2", 1152), ("mul", 1048), ("x", 896)]
    story = buffer_story(trace, "DW2/read:0")
    assert story.producer.node == "DW2" and [a.node for a in story.aliases] == ["DW2/read", "update"]
    assert "overlapping-live-buffers" not in {a.kind for a in fragmentation(trace, "cpu").anomalies}
    assert summarize(trace).allocators[0].buffers == 3  # DW2, x, mul


def test_same_pointer_without_reading_is_another_buffer(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A pointer handed out again to an op that does not read its holder is a new buffer."""
    path = tmp_path / "t.pbtxt"
    path.write_text(POINTER_ALIAS.read_text().replace("DW2/read = Identity(DW2)", "DW2/read = Const()"))
    trace = memtrace.load(path)
    assert buffer_story(trace, "DW2/read:0").producer.node == "DW2/read"


def test_cpu_id_reused_at_one_address_with_separate_lifetimes_is_two_buffers() -> None:
    """GIVEN a CPU allocator that numbers every buffer 1: a (256 B at 0x1000, 100-101 us),
    b = Neg(a) (256 B at 0x2000), c = Tile(b) (512 B at 0x1000 again, 104-105 us, after a's last
    use at 103 us), d = Identity(c) (c's buffer)
    THEN there are 3 buffers (a, b, c with its alias d), as summary, frag and the dataflow count
    them (summary used to say 1: one distinct id), and a and c are not one id reused with another
    size (frag used to say so); the peak is b + c = 256 + 512 = 768 B at c's start (4 us)."""
    trace = memtrace.load(CPU_ID_REUSE)
    assert summarize(trace).allocators[0].buffers == 3
    frag = fragmentation(trace, "cpu")
    assert len(frag.buffers) == 3 and frag.anomalies == ()
    assert buffer_story(trace, "d:0").producer.node == "c" and buffer_story(trace, "c:0").aliases[0].node == "d"
    assert (trace.peak("cpu").peak_delta_bytes, trace.peak("cpu").peak_time_us) == (768, 4)
    from memtrace.analyses.graph import graph

    creators = {(a, b): data["creator"] for a, b, data in graph(trace).edges(data=True)}
    assert creators == {("a", "b"): "a", ("b", "c"): "b", ("c", "d"): "c", ("d", "e"): "c"}
