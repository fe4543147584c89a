import numpy as np
import pytest

from spacy_mlm.errors import DataError, SettingError
from spacy_mlm.pretraining.packing import IS_NEXT, NOT_NEXT, next_sentence_pairs, pack_documents, truncate_pair

SEP = 3


def seg(*ids):
    return np.array(ids, dtype=np.int64), np.ones(len(ids), dtype=bool)


def docs_of(lengths, start=10):
    """Documents of segments with consecutive ids, so order is easy to check."""
    out, k = [], start
    for doc in lengths:
        segments = []
        for n in doc:
            segments.append(seg(*range(k, k + n)))
            k += n
        out.append(segments)
    return out


def test_packing_keeps_all_text_in_order_within_capacity():
    docs = docs_of([[3, 4], [2], [7, 1, 1], [12], [2, 2]])
    blocks = pack_documents(docs, 8, SEP)
    assert all(len(ids) <= 8 for ids, _ in blocks)
    content = np.concatenate([ids[ids != SEP] for ids, _ in blocks])
    np.testing.assert_array_equal(content, np.arange(10, 10 + 3 + 4 + 2 + 7 + 1 + 1 + 12 + 2 + 2))
    for ids, starts in blocks:
        assert ids[0] != SEP and ids[-1] != SEP
        assert len(starts) == len(ids)
    # a document that does not fit after the separator starts a new block (no separator at the end)
    assert blocks[0][0].tolist() == list(range(10, 17))
    assert blocks[1][0].tolist() == [17, 18]
    # where the next document fits, a separator marks the boundary inside the block
    assert [36, 37, 38, 39, SEP, 40, 41] in [ids.tolist() for ids, _ in blocks]


def test_segments_longer_than_a_block_are_split():
    blocks = pack_documents(docs_of([[20]]), 8, SEP)
    assert [len(ids) for ids, _ in blocks] == [8, 8, 4]


def test_no_separator_option_and_bad_capacity():
    blocks = pack_documents(docs_of([[2], [2]]), 8, None)
    assert blocks[0][0].tolist() == [10, 11, 12, 13]
    with pytest.raises(SettingError):
        pack_documents(docs_of([[2]]), 0, SEP)


def test_truncate_pair_trims_the_longer_side():
    a, b = truncate_pair(seg(*range(10)), seg(*range(3)), 8)
    assert len(a[0]) + len(b[0]) == 8 and len(b[0]) == 3 and a[0].tolist() == list(range(5))


def test_next_sentence_pairs_half_adjacent_half_random():
    docs = docs_of([[2] * 6 for _ in range(60)])
    pairs = next_sentence_pairs(docs, 10, np.random.default_rng(0))
    assert len(pairs) == 60 * 5
    labels = np.array([label for _, _, label in pairs])
    assert abs((labels == IS_NEXT).mean() - 0.5) < 3 * np.sqrt(0.25 / len(labels))
    doc_of = {}
    for d, doc in enumerate(docs):
        for j, (ids, _) in enumerate(doc):
            doc_of[int(ids[0])] = (d, j)
    for a, b, label in pairs:
        (da, ja), (db, jb) = doc_of[int(a[0][0])], doc_of[int(b[0][0])]
        if label == IS_NEXT:
            assert (da, ja + 1) == (db, jb)
        else:
            assert label == NOT_NEXT and da != db
    with pytest.raises(DataError):
        next_sentence_pairs(docs_of([[2, 2]]), 10, np.random.default_rng(0))
