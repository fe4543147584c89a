"""`PieceTokenizer.piece_strings`, the pieces' strings read from a table of the
vocabulary, gives what the tokenizer's own `convert_ids_to_tokens` gives,
special and added tokens included, sees tokens added after its first call, and
is not pickled with the tokenizer."""
import pickle

import numpy as np
import pytest

from spacy_mlm.models.hf import load_tokenizer
from spacy_mlm.testing import make_tiny_bert, make_tiny_roberta
from spacy_mlm.tokenization.tokenizer import PieceTokenizer


@pytest.mark.parametrize("make", [make_tiny_bert, make_tiny_roberta])
def test_piece_strings_are_the_tokenizers_own(tmp_path, make):
    hf = load_tokenizer(str(make(tmp_path / "model")))
    pieces = PieceTokenizer(hf, 64, 8)
    ids = np.arange(len(hf), dtype=np.int64)[::-1]  # every id, specials included, in another order
    assert pieces.piece_strings(ids) == hf.convert_ids_to_tokens(ids.tolist())
    assert pieces.piece_strings(np.zeros(0, dtype=np.int64)) == []
    hf.add_tokens(["zzyzx-added"])
    added = hf.convert_tokens_to_ids("zzyzx-added")
    assert pieces.piece_strings(np.asarray([added, 0])) == ["zzyzx-added", hf.convert_ids_to_tokens(0)]


def test_a_pickled_tokenizer_leaves_its_table_behind_and_makes_its_own(tmp_path):
    hf = load_tokenizer(str(make_tiny_bert(tmp_path / "model")))
    pieces = PieceTokenizer(hf, 64, 8)
    ids = np.asarray([3, 1, 4], dtype=np.int64)
    expected = pieces.piece_strings(ids)
    copy = pickle.loads(pickle.dumps(pieces))
    assert len(pieces._strings) == len(hf) and len(copy._strings) == 0
    assert copy.piece_strings(ids) == expected
