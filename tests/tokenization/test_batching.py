import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacy_mlm.errors import DataError, SettingError
from spacy_mlm.tokenization.batching import length_batches, packed_rows


def cost(groups, lengths, pass_cost):
    return sum(len(g) * int(lengths[g].max()) + pass_cost for g in groups)


def brute_force_cost(lengths, max_pieces, pass_cost):
    """Least cost over every split of the sorted order into contiguous runs."""
    order = np.argsort(-np.asarray(lengths), kind="stable")
    n, best = len(order), float("inf")
    for cuts in itertools.product([False, True], repeat=max(n - 1, 0)):
        groups, current = [], [order[0]]
        for i, cut in enumerate(cuts, start=1):
            if cut:
                groups.append(np.asarray(current))
                current = []
            current.append(order[i])
        groups.append(np.asarray(current))
        if all(len(g) == 1 or len(g) * lengths[g].max() <= max_pieces for g in groups):
            best = min(best, cost(groups, np.asarray(lengths), pass_cost))
    return best


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 60), min_size=1, max_size=9),
    st.integers(1, 200),
    st.sampled_from([0.0, 5.0, 40.0]),
)
def test_groups_cover_every_window_once_within_budget_at_least_cost(lengths, max_pieces, pass_cost):
    lengths = np.asarray(lengths)
    groups = length_batches(lengths, max_pieces, pass_cost)
    assert sorted(np.concatenate(groups).tolist()) == list(range(len(lengths)))
    for g in groups:
        assert len(g) == 1 or len(g) * lengths[g].max() <= max_pieces
        assert lengths[g[0]] == lengths[g].max()  # a group's first window is its longest
    assert cost(groups, lengths, pass_cost) == pytest.approx(brute_force_cost(lengths, max_pieces, pass_cost))


def test_no_pass_cost_means_no_padding():
    lengths = np.array([10, 9, 10, 3, 9, 3, 3])
    groups = length_batches(lengths, 1000, pass_cost=0.0)
    assert all(len(set(lengths[g].tolist())) == 1 for g in groups)


def test_a_pass_cost_joins_near_lengths_and_keeps_far_ones_apart():
    lengths = np.array([150, 148, 152, 149, 20, 21, 450])
    groups = [sorted(g.tolist()) for g in length_batches(lengths, 16384, pass_cost=64.0)]
    assert groups == [[6], [0, 1, 2, 3], [4, 5]]


def test_budget_splits_and_long_windows_go_alone():
    lengths = np.array([100] * 10 + [700])
    groups = length_batches(lengths, 512, pass_cost=1e6)
    assert [len(g) for g in groups] == [1, 5, 5]


def test_empty_windows_cost_only_their_passes():
    groups = length_batches(np.array([0, 0, 0]), 1, pass_cost=5.0)
    assert [sorted(g.tolist()) for g in groups] == [[0, 1, 2]]


def test_empty_and_bad_arguments():
    assert length_batches(np.zeros(0, dtype=np.int64), 10) == []
    with pytest.raises(SettingError, match="max_pieces"):
        length_batches(np.array([3]), 0)
    with pytest.raises(DataError, match="one-dimensional"):
        length_batches(np.ones((2, 2)), 10)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 60), min_size=1, max_size=40), st.integers(1, 200),
       st.one_of(st.none(), st.integers(1, 150)))
def test_packed_rows_hold_every_window_once_in_balanced_rows_within_the_cap(lengths, row_length, cap):
    lengths = np.asarray(lengths)
    rows = packed_rows(lengths, row_length, cap)
    assert sorted(np.concatenate(rows).tolist()) == list(range(len(lengths)))
    loads = [int(lengths[row].sum()) for row in rows]
    fewest = min(len(lengths), -(-int(lengths.sum()) // row_length))
    if cap is None:
        assert len(rows) == fewest
    else:  # a row goes over the cap only holding one window
        assert len(rows) >= fewest and all(load <= cap or len(row) == 1 for row, load in zip(rows, loads))
        assert all(row.size for row in rows)
    for row, load in zip(rows, loads):
        assert list(lengths[row]) == sorted(lengths[row], reverse=True)
        if cap is None:
            # longest first into the least-loaded row: no row exceeds another by more than the
            # window it took last, unless that row holds one window only (a long one)
            assert len(row) == 1 or load - min(loads) <= int(lengths[row[-1]])


def test_packed_rows_pad_little_on_sentence_lengths():
    """Sixteen sentence-like windows (lengths of CoNLL-2003 sentences in
    MiniLM's pieces) pad a third of their positions in length groups; packed
    rows of 128 pad a few percent."""
    lengths = np.asarray([15, 9, 44, 23, 12, 31, 7, 19, 26, 11, 38, 14, 5, 21, 17, 29])
    groups = length_batches(lengths, 16384)
    grouped = sum(len(group) * int(lengths[group].max()) for group in groups)
    assert len(groups) >= 2 and grouped >= 1.4 * lengths.sum()  # a third of the positions padding
    rows = packed_rows(lengths, 128)
    padded = len(rows) * max(int(lengths[row].sum()) for row in rows)
    assert len(rows) == 3 and padded <= 1.05 * lengths.sum()


def test_packed_rows_refuse_bad_input():
    assert packed_rows(np.zeros(0, dtype=np.int64), 8) == []
    with pytest.raises(SettingError, match="row_length"):
        packed_rows(np.asarray([3, 4]), 0)
    with pytest.raises(SettingError, match="max_length"):
        packed_rows(np.asarray([3, 4]), 8, 0)
    with pytest.raises(DataError, match="one-dimensional"):
        packed_rows(np.zeros((2, 2)), 8)
