import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spacy_mlm.errors import DataError, SettingError
from spacy_mlm.tokenization.window import context_windows, merge_owner, window_spans


def test_short_sequence_is_one_window():
    assert window_spans(5, 10, 3) == [(0, 5)]
    assert window_spans(0, 10, 3) == [(0, 0)]


def test_windows_overlap_and_cover():
    spans = window_spans(25, 10, 4)
    assert spans[0] == (0, 10) and spans[-1][1] == 25
    for (s1, e1), (s2, e2) in zip(spans, spans[1:]):
        assert e1 - s2 >= 4
    owner, pos = merge_owner(25, spans)
    # the middle of an overlap switches owner; each item's position is inside its window
    for i in range(25):
        s, e = spans[owner[i]]
        assert s <= i < e and pos[i] == i - s


@given(st.integers(0, 300), st.integers(2, 40), st.data())
def test_every_item_owned_by_its_most_central_window(n, size, data):
    overlap = data.draw(st.integers(0, size - 1))
    spans = window_spans(n, size, overlap)
    owner, _ = merge_owner(n, spans)
    for i in range(n):
        margins = [min(i - s, e - 1 - i) if s <= i < e else -1 for s, e in spans]
        assert margins[owner[i]] == max(margins)


def test_bad_window_settings():
    with pytest.raises(SettingError, match=r"window size must be positive, got 0"):
        window_spans(10, 0, 0)
    with pytest.raises(SettingError, match=r"window overlap must be in \[0, 5\), got 5"):
        window_spans(10, 5, 5)


# -- context_windows: each sentence in a window of its own, with its document around it


def test_context_windows_give_each_segment_its_context():
    # 3 margin items, segments [3, 6), [6, 10), then 2 margin items
    spans, owner, position = context_windows([(3, 6), (6, 10)], 12, 100, 2, 10)
    assert spans == [(1, 8), (4, 12)]
    assert owner.tolist() == [0, 0, 0, 1, 1, 1, 1]
    # each item sits where it is in its own segment's window
    assert position.tolist() == [2, 3, 4, 2, 3, 4, 5]


def test_context_windows_at_the_sequence_edges_take_what_there_is():
    spans, _, _ = context_windows([(0, 4), (4, 8)], 8, 100, 64, 10)
    assert spans == [(0, 8), (0, 8)]
    spans, _, _ = context_windows([(0, 8)], 8, 100, 0, 10)
    assert spans == [(0, 8)]


def test_context_windows_cut_context_evenly_to_fit():
    # a 4-item segment in the middle of 100 items, window of 10: 3 a side
    spans, owner, position = context_windows([(48, 52)], 100, 10, 64, 4)
    assert spans == [(45, 55)] and position.tolist() == [3, 4, 5, 6]
    # one side short: the other side takes the room
    spans, _, _ = context_windows([(1, 5)], 100, 10, 64, 4)
    assert spans == [(0, 10)]


def test_context_windows_split_a_segment_longer_than_the_window():
    spans, owner, position = context_windows([(0, 2), (2, 30), (30, 32)], 32, 10, 2, 4)
    assert all(e - s <= 10 for s, e in spans)
    long_windows = set(owner[2:30].tolist())
    assert len(long_windows) > 1 and owner[0] not in long_windows and owner[30] not in long_windows


@given(st.lists(st.integers(0, 40), min_size=1, max_size=6), st.integers(0, 5), st.integers(0, 5),
       st.integers(4, 30), st.integers(0, 8))
def test_context_windows_own_every_item_in_a_window_of_its_segment(lengths, before, after, size, context):
    bounds = np.cumsum([before] + lengths)
    segments = list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))
    n = int(bounds[-1]) + after
    spans, owner, position = context_windows(segments, n, size, context, size // 2)
    assert len(owner) == len(position) == sum(lengths)
    first_window = 0
    items = iter(range(before, before + sum(lengths)))
    for a, b in segments:
        mine = {int(w) for w in owner[a - before : b - before]}
        assert not mine or min(mine) >= first_window
        first_window = max(mine | {first_window - 1}) + 1
        for item in range(a, b):
            assert next(items) == item
            start, end = spans[owner[item - before]]
            assert end - start <= size and start + position[item - before] == item
            # the context each side is what the sequence has, up to `context`, while it fits
            if b - a + 2 * context <= size:
                assert start == max(0, a - context) and end == min(n, b + context)


def test_context_windows_skip_empty_segments_and_check_bounds():
    spans, owner, _ = context_windows([(0, 0), (0, 3)], 3, 10, 2, 2)
    assert spans == [(0, 3)] and owner.tolist() == [0, 0, 0]
    with pytest.raises(DataError):
        context_windows([(2, 5)], 4, 10, 2, 2)
