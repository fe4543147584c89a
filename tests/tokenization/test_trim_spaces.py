import numpy as np

from spacy_mlm.tokenization.tokenizer import trim_spaces


def test_piece_spans_lose_the_whitespace_at_their_edges():
    text = " ab \u3000c\u00a0 d"
    # "▁ab" with its space, a lone "▁" over two spaces, "c" with the no-break space after it, an empty special
    offsets = np.array([[0, 3], [3, 5], [5, 8], [4, 4], [7, 9]])
    assert trim_spaces(text, offsets).tolist() == [[1, 3], [5, 5], [5, 6], [4, 4], [8, 9]]
    assert trim_spaces("", np.zeros((0, 2), np.int64)).shape == (0, 2)
