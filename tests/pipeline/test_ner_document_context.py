"""Whole documents (`convert-conll --n-sents 0`) through the encoder's windows with
context = "none" (issue 18's cheap alternative, measured and not chosen: see
docs/ner.md; each sentence read in its document is tested in
test_ner_sentence_context.py).

What holds, and is tested here: the vectors a sentence's tokens get read the rest
of its document; a document longer than the window takes each token's scores from the
window that owns its first piece, equal to running that window's text as a Doc of
its own (so a sentence at the document's start reads only what follows it, one at
the end only what precedes it); and a document's scores do not depend on what it is
batched with. Scores are compared as the softmax head's probabilities
(`store_probs`), which depend on the token's own vector only (a CRF's marginals
depend on the whole Doc by design).
"""
import numpy as np
import pytest
import spacy
from spacy.tokens import Doc
from spacy.training import Example
from spacy.util import fix_random_seed

import spacy_mlm  # noqa: F401
from spacy_mlm.readers.conll import conll_documents_to_docs, read_conll

SENTENCES = [
    ("Anna Berg works for Acme Bank in Oslo .", "B-PER I-PER O O B-ORG I-ORG O B-LOC O"),
    ("The team won the match on Saturday .", "O O O O O O O O"),
    ("Peter Grant flew from Paris to Geneva .", "B-PER I-PER O O B-LOC O B-LOC O"),
    ("She opened an account at the bank .", "O O O O O O O O"),
    ("Maria Lopez joined the committee in Oslo .", "B-PER I-PER O O O O B-LOC O"),
]


def conll_text(n_docs=2):
    """`n_docs` documents, each SENTENCES twice (82 words and pieces, beyond the tiny model's 64 positions)."""
    lines = []
    for _ in range(n_docs):
        lines.append("-DOCSTART- O\n")
        for words, tags in SENTENCES * 2:
            lines.extend(f"{w} {t}" for w, t in zip(words.split(), tags.split()))
            lines.append("")
    return "\n".join(lines) + "\n"


def make_nlp(model_dir, crf=False):
    fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(model_dir)}})
    nlp.add_pipe("mlm_ner", name="ner", config={"store_probs": True, "model": {"crf": crf}})
    return nlp


@pytest.fixture(scope="module")
def documents(tmp_path_factory):
    path = tmp_path_factory.mktemp("conll") / "docs.conll"
    path.write_text(conll_text(), encoding="utf8")
    return read_conll(path)


@pytest.fixture(scope="module")
def trained(tiny_model_dir, documents):
    """A softmax tagger trained a few steps on whole documents."""
    nlp = make_nlp(tiny_model_dir)
    gold = list(conll_documents_to_docs(nlp.vocab, documents, n_sents=0))
    egs = [Example(Doc(nlp.vocab, words=[t.text for t in d]), d) for d in gold]
    optimizer = nlp.initialize(lambda: egs)
    for _ in range(3):
        losses = {}
        nlp.update(egs, sgd=optimizer, losses=losses)
        assert np.isfinite(losses["ner"])
    return nlp


def doc_of(nlp, text):
    return Doc(nlp.vocab, words=text.split())


def probs(nlp, docs, batch_size=64):
    return [d._.tag_probs for d in nlp.pipe(docs, batch_size=batch_size)]


def test_crf_trains_and_decodes_whole_documents(tiny_model_dir, documents):
    nlp = make_nlp(tiny_model_dir, crf=True)
    gold = list(conll_documents_to_docs(nlp.vocab, documents, n_sents=0))
    assert [len(list(d.sents)) for d in gold] == [2 * len(SENTENCES)] * 2
    egs = [Example(Doc(nlp.vocab, words=[t.text for t in d]), d) for d in gold]
    optimizer = nlp.initialize(lambda: egs)
    optimizer.learn_rate = 0.003
    losses = []
    for _ in range(15):
        step = {}
        nlp.update(egs, sgd=optimizer, losses=step)
        losses.append(step["ner"])
    assert losses[-1] < 0.3 * losses[0], losses
    # every entity of each 82-token document, those past the first 64-piece window too
    for eg, ref in zip(egs, gold):
        doc = nlp(eg.predicted.copy())
        assert [(e.start, e.end, e.label_) for e in doc.ents] == [(e.start, e.end, e.label_) for e in ref.ents]
        assert doc._.tag_probs.shape[0] == len(doc) and np.allclose(doc._.tag_probs.sum(axis=1), 1, atol=1e-4)


def test_sentence_reads_its_document(trained):
    """The vectors the head reads (first piece of each token) for the first sentence change
    with the sentence after it, the last sentence's with the one before."""
    first, middle, last = SENTENCES[0][0], SENTENCES[1][0], SENTENCES[2][0]
    other = SENTENCES[3][0]
    n_first, n_last = len(first.split()), len(last.split())
    a, b, alone = [
        d._.mlm_encoding.token_vectors("first")
        for d in trained.pipe([doc_of(trained, f"{first} {middle} {last}"), doc_of(trained, f"{first} {other} {last}"),
                               doc_of(trained, first)])
    ]
    assert not np.allclose(a[:n_first], b[:n_first], atol=1e-3)
    assert not np.allclose(a[-n_last:], b[-n_last:], atol=1e-3)
    assert not np.allclose(a[:n_first], alone, atol=1e-3)


def test_document_scores_do_not_depend_on_the_batch(trained, documents):
    docs = list(conll_documents_to_docs(trained.vocab, documents, n_sents=0))
    sents = list(conll_documents_to_docs(trained.vocab, documents, n_sents=1))
    (alone,) = probs(trained, [Doc(trained.vocab, words=[t.text for t in docs[0]])])
    batch = [Doc(trained.vocab, words=[t.text for t in d]) for d in sents[:3] + docs[:1] + sents[3:]]
    for batch_size in (1, 2, 64):
        np.testing.assert_allclose(probs(trained, batch, batch_size)[3], alone, atol=1e-5)


def test_document_longer_than_window_equals_its_windows(trained):
    """Each token scores as in the window owning its first piece, run as a Doc of its own:
    the document's first sentence from the first window (context after it only), its last
    sentence from the last window (context before it only)."""
    words = " ".join(s for s, _ in SENTENCES * 2).split()
    encoder = trained.get_pipe("mlm_encoder").model
    original = encoder.attrs["tokenizer"]
    doc = doc_of(trained, " ".join(words))
    pieces = original([doc])[0]
    n = len(pieces.ids)
    assert n > original.content_length  # beyond the model's 64 positions
    token_at = {t.idx: t.i for t in doc}
    word_ends = {t.idx + len(t) for t in doc}
    # A window size (content pieces) whose first window ends and last window starts on word
    # boundaries, so each window's text is a Doc of whole words with the same pieces; two
    # windows need n <= 2 * size - overlap, with overlap = size // 3.
    size = next(
        k for k in range(int(0.65 * n), original.content_length + 1)
        if int(pieces.ends[k - 1]) in word_ends and int(pieces.starts[n - k]) in token_at
    )
    specials = len(original.prefix) + len(original.suffix)
    encoder.attrs["tokenizer"] = type(original)(original.hf, size + specials, size // 3)
    try:
        windowed = encoder.attrs["tokenizer"]([doc])[0]
        assert len(windowed.windows) == 2
        (whole,) = probs(trained, [doc_of(trained, " ".join(words))])
        head_words = [t.text for t in doc if t.idx + len(t) <= pieces.ends[size - 1]]
        tail_start = token_at[int(pieces.starts[n - size])]
        head, tail = probs(trained, [Doc(trained.vocab, words=head_words), Doc(trained.vocab, words=words[tail_start:])])
    finally:
        encoder.attrs["tokenizer"] = original
    owner = windowed.owner[np.searchsorted(windowed.starts, [t.idx for t in doc])]
    from_head, from_tail = np.flatnonzero(owner == 0), np.flatnonzero(owner == 1)
    assert from_head[0] == 0 and from_tail[-1] == len(doc) - 1
    np.testing.assert_allclose(whole[from_head], head[from_head], atol=1e-5)
    np.testing.assert_allclose(whole[from_tail], tail[from_tail - tail_start], atol=1e-5)
