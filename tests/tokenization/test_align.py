import numpy as np
import spacy
from hypothesis import given, settings
from hypothesis import strategies as st

from spacy_mlm.tokenization.align import align_pieces_to_tokens, align_texts


def brute_force(tok_spans, piece_spans):
    return sorted(
        (t, p)
        for t, (ts, te) in enumerate(tok_spans)
        for p, (ps, pe) in enumerate(piece_spans)
        if pe > ps and te > ts and ps < te and pe > ts
    )


def test_shared_piece_and_unaligned_token():
    # tokens: "ab" "cd" " " ; pieces: "abc" covers two tokens, "d", and an empty special
    align = align_pieces_to_tokens([0, 2, 4], [2, 4, 5], [0, 3, 0], [3, 4, 0])
    assert align.pieces_of(0).tolist() == [0]
    assert align.pieces_of(1).tolist() == [0, 1]
    assert align.pieces_of(2).tolist() == []
    assert align.lengths().tolist() == [1, 2, 0]
    assert align.tokens_of_pieces().tolist() == [0, 1, -1]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 5)), max_size=12),
    st.lists(st.tuples(st.integers(0, 30), st.integers(0, 6)), max_size=15),
)
def test_matches_brute_force(token_gaps_lengths, piece_starts_lengths):
    spans, pos = [], 0
    for gap, length in token_gaps_lengths:
        pos += gap
        spans.append((pos, pos + length))
        pos += length
    pieces = [(s, s + n) for s, n in piece_starts_lengths]
    align = align_pieces_to_tokens(
        np.array([s for s, _ in spans], dtype=np.int64),
        np.array([e for _, e in spans], dtype=np.int64),
        np.array([s for s, _ in pieces], dtype=np.int64),
        np.array([e for _, e in pieces], dtype=np.int64),
    )
    assert list(zip(align.token_index.tolist(), align.piece_index.tolist())) == brute_force(spans, pieces)


def _spans(gaps_lengths):
    spans, pos = [], 0
    for gap, length in gaps_lengths:
        pos += gap
        spans.append((pos, pos + length))
        pos += length
    return np.asarray(spans, dtype=np.int64).reshape(-1, 2)


TEXT = st.tuples(
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 4)), max_size=6),
    st.lists(st.tuples(st.integers(0, 20), st.integers(0, 5)), max_size=8),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(TEXT, max_size=5))
def test_texts_aligned_together_as_each_alone(texts):
    """Pieces past a text's last token (and tokens or pieces of no length) never
    reach the next text's tokens when the texts are aligned as one."""
    tokens = [(s[:, 0], s[:, 1]) for s in (_spans(t) for t, _ in texts)]
    pieces = []
    for _, piece_starts_lengths in texts:
        p = np.asarray([(start, start + n) for start, n in piece_starts_lengths], dtype=np.int64).reshape(-1, 2)
        pieces.append((p[:, 0], p[:, 1]))
    together = align_texts(tokens, pieces)
    assert len(together) == len(texts)
    for got, (t, p) in zip(together, zip(tokens, pieces)):
        alone = align_pieces_to_tokens(t[0], t[1], p[0], p[1])
        assert (got.n_tokens, got.n_pieces) == (alone.n_tokens, alone.n_pieces)
        assert got.token_index.tolist() == alone.token_index.tolist()
        assert got.piece_index.tolist() == alone.piece_index.tolist()


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=80))
def test_encoder_alignment_on_arbitrary_unicode(encoder_nlp, text):
    doc = encoder_nlp(text)
    enc = doc._.mlm_encoding
    assert enc.hidden.shape == (len(enc.piece_ids), enc.width)
    assert enc.token_vectors("mean").shape == (len(doc), enc.width)
    for token in doc:
        for p in enc.alignment.pieces_of(token.i):
            start, end = enc.piece_offsets[p]
            assert start < token.idx + len(token) and end > token.idx
        if token.is_space:
            # whitespace only gets a piece that spans across it (BERT drops control chars like \x1f
            # and joins the characters around them into one piece)
            for p in enc.alignment.pieces_of(token.i):
                start, end = enc.piece_offsets[p]
                assert start < token.idx and end > token.idx + len(token)
    # every piece with a nonempty span aligns to some token
    for p, (start, end) in enumerate(enc.piece_offsets):
        if end > start and text[start:end].strip():
            assert p in set(enc.alignment.piece_index.tolist())
