"""A 100,000-token document through the CRF NER with `store_probs`: every
marginal row of doc._.tag_probs sums to 1 and the time grows linearly (the
autograd marginals gave rows from 0.12 to 1.05 here, and took 51 s)."""
import time

import numpy as np
import spacy
from spacy.tokens import Doc, Span
from spacy.training import Example

import spacy_mlm  # noqa: F401
from spacy_mlm.tagging.schemes import first_invalid_position, is_valid_sequence

SENTENCE = "Anna Berg works for the Northwind Company in Oslo .".split()


def test_crf_marginals_of_a_100k_token_doc_sum_to_one_in_linear_time(tiny_model_dir):
    spacy.util.fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(tiny_model_dir)}})
    nlp.add_pipe("mlm_ner", name="ner", config={"store_probs": True, "model": {"crf": True}})
    reference = Doc(nlp.vocab, words=SENTENCE)
    reference.ents = [Span(reference, 0, 2, "PER"), Span(reference, 5, 7, "ORG"), Span(reference, 8, 9, "LOC")]
    examples = [Example(Doc(nlp.vocab, words=SENTENCE), reference)]
    optimizer = nlp.initialize(lambda: examples)
    for _ in range(3):
        nlp.update(examples, sgd=optimizer)
    encoder, ner = nlp.get_pipe("mlm_encoder"), nlp.get_pipe("ner")
    seconds = {}
    for n in (10_000, 100_000):
        doc = Doc(nlp.vocab, words=(SENTENCE * (n // len(SENTENCE) + 1))[:n])
        began = time.perf_counter()
        (path,), (probs,), _ = ner.predict([encoder(doc)])
        seconds[n] = time.perf_counter() - began
        assert probs.shape == (n, len(ner.tag_labels)) and np.isfinite(probs).all()
        assert np.abs(probs.sum(axis=1) - 1).max() < 1e-4
        tags = [ner.tag_labels[i] for i in path]
        assert len(tags) == n and is_valid_sequence(tags, "BIO"), first_invalid_position(tags, "BIO")
    assert seconds[100_000] < 25 * seconds[10_000], seconds  # 10x the tokens; quadratic would be 100x
