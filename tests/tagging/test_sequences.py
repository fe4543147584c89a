"""tagging/sequences.py: a batch's tag scores read as sequences (whole Docs or
their sentences), decoded back into one path per Doc, and their loss."""
import pytest
import spacy
import torch
from spacy.tokens import Doc

from spacy_mlm.tagging.emissions import TagScores
from spacy_mlm.tagging.sequences import decode_docs, join_sequences, sentence_lengths, split_sequences, tagging_loss

NO_MOVES = (torch.zeros(2), torch.zeros(2, 2), torch.zeros(2))


def _docs():
    vocab = spacy.blank("en").vocab
    two = Doc(vocab, words=["a", "b", ".", "c", "d"], sent_starts=[True, False, False, True, False])
    one = Doc(vocab, words=["e", "f"])
    return [two, one]


def test_a_doc_splits_into_its_sentences_and_joins_back():
    docs = _docs()
    assert [sentence_lengths(d) for d in docs] == [[3, 2], [2]]
    per_doc = [torch.arange(5.0), torch.arange(2.0)]
    parts = split_sequences(per_doc, docs, by_sentence=True)
    assert [p.tolist() for p in parts] == [[0, 1, 2], [3, 4], [0, 1]]
    assert split_sequences(per_doc, docs, by_sentence=False) == per_doc
    joined = join_sequences([p.tolist() for p in parts], docs, lambda ps: sum(ps, []))
    assert joined == [[0, 1, 2, 3, 4], [0, 1]]


def test_decoding_gives_one_path_per_doc_whether_read_by_doc_or_by_sentence():
    docs = _docs()
    # tag 1 wins on odd rows, tag 0 on even rows: without transitions the path is each row's argmax
    scores = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 0.0], [0.0, 2.0]])
    tag_scores = TagScores(scores, [5, 2], None)
    for by_sentence in (False, True):
        paths, probs, _ = decode_docs(tag_scores, docs, NO_MOVES, how="first", crf=False, by_sentence=by_sentence,
                                   constrained=True, with_probs=True)
        assert paths == [[0, 1, 0, 1, 0], [0, 1]]
        assert [p.shape for p in probs] == [(5, 2), (2, 2)]


def test_the_loss_counts_only_annotated_tokens():
    docs = _docs()
    scores = TagScores(torch.zeros(7, 2), [5, 2], None)
    known = torch.tensor([[True, False]] * 5), torch.tensor([[True, True]] * 2)  # the second doc is unannotated
    loss = tagging_loss(scores, docs, list(known), None, how="first", subword_loss="all", by_sentence=True)
    assert float(loss) == pytest.approx(0.693147, abs=1e-6)  # log 2: uniform over two tags, five annotated tokens
