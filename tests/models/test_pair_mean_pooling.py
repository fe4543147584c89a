"""`pooling = "pair_mean"`: Sentence-BERT's [u, v, |u - v|] features from the
two sides of a pair Doc, read from the one cross-encoded pass."""
import numpy
import spacy
import torch
from spacy.training import Example
from thinc.api import Adam

import spacy_mlm
from spacy_mlm.models.pooling import pool_pair_sides
from spacy_mlm.tokenization.align import Alignment

PAIR = ("The cat sleeps on the warm stone wall.", "A cat is resting.")
LABELS = ["entailment", "neutral", "contradiction"]


def test_pool_pair_sides_means_each_side():
    hidden = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    cls = torch.full((3,), -1.0)
    # 3 tokens: token 0 -> pieces 0, 1; token 1 -> piece 2; token 2 -> piece 3
    alignment = Alignment(3, 4, numpy.array([0, 0, 1, 2]), numpy.array([0, 1, 2, 3]))
    row = pool_pair_sides(hidden, cls, alignment, pair_start=1)
    u, v = hidden[:2].mean(0), hidden[2:].mean(0)
    assert row.shape == (1, 9)
    torch.testing.assert_close(row[0], torch.cat([u, v, (u - v).abs()]))
    # a side without pieces reads as [CLS]; a single text as u = v
    torch.testing.assert_close(pool_pair_sides(hidden, cls, alignment, pair_start=3)[0, 3:6], cls)
    single = pool_pair_sides(hidden, cls, alignment, pair_start=None)[0]
    torch.testing.assert_close(single[:3], hidden.mean(0))
    torch.testing.assert_close(single[6:], torch.zeros(3))


def pair_nlp(path):
    spacy.util.fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(path)}})
    nlp.add_pipe("mlm_textcat", config={"model": {"tok2vec": {"pooling": "pair_mean"}}})
    rows = [(PAIR, "entailment"), (("A dog runs.", "Nobody runs."), "contradiction"),
            (("A man sings.", "A man sings well."), "neutral")] * 2
    examples = [Example.from_dict(spacy_mlm.make_pair_doc(nlp, a, b), {"cats": {l: float(l == label) for l in LABELS}})
                for (a, b), label in rows]
    return nlp, examples


def test_pair_mean_listener_rows_come_from_each_side(tiny_model_dir, device):
    nlp, examples = pair_nlp(tiny_model_dir)
    nlp.initialize(lambda: examples)
    width = nlp.get_pipe("mlm_encoder").model.get_dim("nO")
    head = nlp.get_pipe("mlm_textcat").model
    assert head.get_dim("nI") == 3 * width
    doc = nlp(spacy_mlm.make_pair_doc(nlp, *PAIR))
    encoding = doc._.mlm_encoding
    start = doc._.mlm_pair_start
    a_tokens = numpy.array([encoding.alignment.token_index < start]).ravel()
    pieces = encoding.alignment.piece_index
    u, v = encoding.hidden[pieces[a_tokens]].mean(0), encoding.hidden[pieces[~a_tokens]].mean(0)
    rows = head.get_ref("tok2vec").predict([doc])[0].cpu().numpy()  # a torch head's listener gives torch tensors
    numpy.testing.assert_allclose(rows, numpy.concatenate([u, v, numpy.abs(u - v)])[None, :], atol=1e-5)


def test_pair_mean_trains_saves_and_loads(tiny_model_dir, tmp_path, device):
    nlp, examples = pair_nlp(tiny_model_dir)
    nlp.initialize(lambda: examples)
    optimizer = Adam(1e-3)
    losses = [nlp.update(examples, sgd=optimizer, drop=0.0, losses={})["mlm_textcat"] for _ in range(8)]
    assert losses[-1] < losses[0]
    doc = spacy_mlm.make_pair_doc(nlp, *PAIR)
    before = nlp(doc).cats
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")
    after = loaded(spacy_mlm.make_pair_doc(loaded, *PAIR)).cats
    assert after.keys() == before.keys()
    for label in before:
        assert abs(after[label] - before[label]) < 1e-5
