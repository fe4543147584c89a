import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spacy_mlm.tokenization.window import merge_owner, window_spans


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
    with pytest.raises(ValueError):
        window_spans(10, 0, 0)
    with pytest.raises(ValueError):
        window_spans(10, 5, 5)
