import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from spacy_mlm.tokenization.tokenizer import trim_spaces


def test_piece_spans_lose_the_whitespace_at_their_edges():
    text = " ab \u3000c\u00a0 d"
    # "▁ab" with its space, a lone "▁" over two spaces, "c" with the no-break space after it, an empty special
    offsets = np.array([[0, 3], [3, 5], [5, 8], [4, 4], [7, 9]])
    assert trim_spaces([text], [offsets])[0].tolist() == [[1, 3], [5, 5], [5, 6], [4, 4], [8, 9]]
    assert trim_spaces([""], [np.zeros((0, 2), np.int64)])[0].shape == (0, 2)
    assert trim_spaces([], []) == []


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=" \t\n\u00a0\u2028\u3000\u3001ab\U0001f600", max_size=12), st.data())
def test_trimming_agrees_with_str_isspace_on_any_code_point(text, data):
    """Every whitespace code point (U+3000 is the last), and those above the
    table's end (U+3001, an emoji) read as text."""
    bounds = st.integers(0, len(text))
    pairs = data.draw(st.lists(st.tuples(bounds, bounds).map(sorted), max_size=6))
    offsets = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    expected = []
    for start, end in offsets.tolist():
        trimmed_start = start
        while trimmed_start < end and text[trimmed_start].isspace():
            trimmed_start += 1
        trimmed_end = end
        while trimmed_end > trimmed_start and text[trimmed_end - 1].isspace():
            trimmed_end -= 1
        expected.append([trimmed_start, trimmed_end])
    assert trim_spaces([text], [offsets])[0].tolist() == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=" \u3000ab", max_size=6), min_size=1, max_size=4), st.data())
def test_texts_trimmed_together_as_each_alone(texts, data):
    """A piece at the edge of its text never reaches into the next one's
    characters or spaces when the texts are read as one."""
    offsets = []
    for text in texts:
        bounds = st.integers(0, len(text))
        pairs = data.draw(st.lists(st.tuples(bounds, bounds).map(sorted), max_size=4))
        offsets.append(np.asarray(pairs, dtype=np.int64).reshape(-1, 2))
    together = trim_spaces(texts, offsets)
    assert [o.tolist() for o in together] == [trim_spaces([t], [o])[0].tolist() for t, o in zip(texts, offsets)]
