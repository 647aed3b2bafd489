"""``memtrace fit SMALL --vs LARGE``: the largest batch that fits, from two recordings (issue 28).

Three kinds of evidence: tiny request sequences written here whose alignment and predicted sizes
are worked out by hand; real whole runs of a Keras CNN and an LSTM recorded from the allocator's
birth at batch 16, 32, 48 and 64 (``scripts/record_batches.py profiles``), where the sizes
predicted from batch 16 and 64 are held to the recordings of batch 32 and 48 size by size; and
TensorFlow's own outcome under ``TF_CPU_BFC_MEM_LIMIT_IN_MB`` ladders
(``fixtures/batches/ladders.json``): the smallest limit per batch and the largest batch per limit.
"""

from __future__ import annotations

import numpy as np
import pytest

from memtrace import batch_fit
from memtrace.batch_fit import BatchInputError, align, batch_model
from memtrace.bfc import MIB, BFCOptions, Requests

A, F = "a", "f"


def seq(*events: tuple[str, int] | tuple[str, int, str]) -> Requests:
    return Requests.from_events(list(events))  # type: ignore[arg-type]


def pairs(first: Requests, second: Requests) -> list[tuple[int, int]]:
    rows_a, rows_b = align(first, second)
    return list(zip(rows_a.tolist(), rows_b.tolist()))


# -- alignment, by hand ------------------------------------------------------------------------

def test_identical_order_aligns_row_for_row() -> None:
    small = seq((A, 64, "x"), (A, 4, "s"), (F, 0), (A, 128, "y"), (F, 1), (F, 3))
    large = seq((A, 256, "x"), (A, 4, "s"), (F, 0), (A, 512, "y"), (F, 1), (F, 3))
    assert pairs(small, large) == [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 5)]


def test_two_ops_swapped_still_align_by_op() -> None:
    # GIVEN the order of x and y swapped in the second run (tf.function's few events)
    small = seq((A, 64, "x"), (A, 32, "y"), (F, 0), (F, 1))
    large = seq((A, 128, "y"), (A, 256, "x"), (F, 0), (F, 1))  # y freed first here
    # THEN x pairs with x and y with y; each free with the free of the same op's allocation
    assert pairs(small, large) == [(0, 1), (1, 0), (2, 3), (3, 2)]


def test_extra_event_is_left_over_and_the_rest_keeps_its_order() -> None:
    small = seq((A, 8, "x"), (A, 8, "x"), (A, 16, "z"), (F, 2))
    large = seq((A, 8, "x"), (A, 4, "extra"), (A, 8, "x"), (A, 64, "z"), (F, 3))
    assert pairs(small, large) == [(0, 0), (1, 2), (2, 3), (3, 4)]


def test_free_is_keyed_by_its_allocations_op() -> None:
    # Frees carry no op of their own: a free of x only pairs with a free of x.
    small = seq((A, 8, "x"), (A, 8, "y"), (F, 1), (F, 0))
    large = seq((A, 8, "x"), (A, 8, "y"), (F, 0), (F, 1))
    assert pairs(small, large) == [(0, 0), (1, 1), (2, 3), (3, 2)]


def test_ops_moved_past_an_anchor_still_pair() -> None:
    # GIVEN b's allocation moved past four anchors in the second run
    small = seq((A, 8, "b"), (A, 8, "p"), (A, 8, "q"), (A, 8, "r"), (A, 8, "s"))
    large = seq((A, 8, "p"), (A, 8, "q"), (A, 8, "r"), (A, 8, "s"), (A, 32, "b"))
    assert sorted(pairs(small, large)) == [(0, 4), (1, 0), (2, 1), (3, 2), (4, 3)]


# -- sizes at batch N, by hand -----------------------------------------------------------------

def test_affine_sizes_are_exact_integers() -> None:
    # 100 B at batch 2 and 400 B at batch 8: 50 B per sample, 0 B fixed; a scalar of 4 B stays.
    small = seq((A, 100, "x"), (A, 4, "s"), (F, 0), (F, 1))
    large = seq((A, 400, "x"), (A, 4, "s"), (F, 0), (F, 1))
    model = batch_model(small, large, (2, 8))
    assert (model.affine_allocations, model.growing_allocations, model.aligned_allocations) == (2, 1, 2)
    assert model.sizes_at(5).tolist() == [250, 4, 0, 0]
    assert model.sizes_at(100).tolist() == [5000, 4, 0, 0]
    assert model.sizes_at(1).tolist() == [50, 4, 0, 0]
    requests = model.requests_at(5)
    assert requests.frees.tolist() == [-1, -1, 0, 1] and requests.op_names == ("x", "s")


def test_fractional_growth_rounds_up_and_shrinking_size_holds_the_larger() -> None:
    # x: 10 B at batch 1, 22 B at batch 4: 4 B per sample, exact; y grows 1 B over 3 samples (not a
    # whole byte per sample): at batch 2, 10 + 1/3 -> 11, at 7, 10 + 6/3 = 12; z shrinks 16 -> 8: held at 16.
    small = seq((A, 10, "x"), (A, 10, "y"), (A, 16, "z"))
    large = seq((A, 22, "x"), (A, 11, "y"), (A, 8, "z"))
    model = batch_model(small, large, (1, 4))
    assert model.sizes_at(2).tolist() == [14, 11, 16]
    assert model.sizes_at(7).tolist() == [34, 12, 16]
    assert (model.affine_allocations, model.rounded_allocations, model.shrinking_allocations) == (1, 1, 1)


def test_order_is_the_nearer_recordings() -> None:
    small = seq((A, 10, "x"), (A, 20, "y"), (F, 0), (F, 1))
    large = seq((A, 20, "y"), (A, 40, "x"), (F, 1), (F, 0))  # y before x here
    model = batch_model(small, large, (1, 3))
    assert model.base_for(1) == "small" and model.base_for(2) == "large" and model.base_for(3) == "large"
    assert model.requests_at(1).requested_bytes.tolist() == [10, 20, 0, 0]
    assert model.requests_at(5).requested_bytes.tolist() == [20, 70, 0, 0]  # y stays 20, x 10 + 15 * 4


def test_left_over_allocation_keeps_its_recorded_size() -> None:
    small = seq((A, 100, "x"), (A, 7, "only_small"), (F, 0))
    large = seq((A, 300, "x"), (F, 0), (A, 9, "only_large"))
    model = batch_model(small, large, (1, 3))
    assert (model.left_over_small, model.left_over_large, model.aligned_events) == (1, 1, 2)
    assert model.requests_at(1).requested_bytes.tolist() == [100, 7, 0]
    assert model.requests_at(9).requested_bytes.tolist() == [900, 0, 9]


def test_largest_batch_and_its_boundary_by_hand() -> None:
    # 1 MiB per sample, one allocation, no growth: batch N needs N MiB in one region.
    small = seq((A, MIB, "x"), (F, 0))
    large = seq((A, 2 * MIB, "x"), (F, 0))
    model = batch_model(small, large, (1, 2))
    options = BFCOptions(10 * MIB, allow_growth=False)
    assert batch_fit.largest_batch(model, options) == 10
    assert batch_fit.fits_at(model, 10, options) and not batch_fit.fits_at(model, 11, options)
    limits = batch_fit.batch_limit(model, 7, options)
    assert (limits.min_limit_bytes, limits.other_order_min_limit_bytes) == (7 * MIB, 7 * MIB)
    assert limits.close_to(8 * MIB) and not limits.close_to(9 * MIB)


# -- bad input ---------------------------------------------------------------------------------

SMALL = seq((A, 100, "x"), (A, 4, "s"), (F, 0), (F, 1))
LARGE = seq((A, 400, "x"), (A, 4, "s"), (F, 0), (F, 1))


@pytest.mark.parametrize(("sizes", "words"), [
    ((8, 8), "equal"),
    ((8, 2), "must increase"),
    ((0, 8), "positive"),
    ((2,), "two batch sizes"),
])
def test_bad_batch_sizes_are_refused(sizes: tuple[int, ...], words: str) -> None:
    with pytest.raises(BatchInputError, match=words):
        batch_model(SMALL, LARGE, sizes)


def test_sizes_that_do_not_grow_are_refused() -> None:
    with pytest.raises(BatchInputError, match=r"asks for no more .* 0 grow"):
        batch_model(LARGE, SMALL, (2, 8))
    with pytest.raises(BatchInputError, match="0 grow"):
        batch_model(SMALL, SMALL, (2, 8))


def test_different_steps_are_refused_saying_how_much_aligned() -> None:
    other = seq((A, 100, "p"), (A, 400, "q"), (A, 8, "r"), (F, 0), (F, 1), (F, 2))
    with pytest.raises(BatchInputError, match=r"only 0 of 6 events \(0%\) align"):
        batch_model(SMALL, other, (2, 8))


def test_no_allocations_are_refused() -> None:
    with pytest.raises(BatchInputError, match="no allocations"):
        batch_model(Requests.from_events([]), LARGE, (2, 8))


def test_alignment_of_empty_sequences_is_empty() -> None:
    rows_a, rows_b = align(Requests.from_events([]), LARGE)
    assert len(rows_a) == len(rows_b) == 0 and rows_a.dtype == np.int64
