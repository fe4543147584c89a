"""`pooling = "pooler"`: the model's own pretrained pooler (dense + tanh over
[CLS], what BertForSequenceClassification reads) reaches the listener, trains
with the head, and a model without one says so and reads [CLS] instead."""
import numpy
import pytest
import spacy
import torch
from spacy.training import Example
from thinc.api import Adam
from transformers import AutoModel, AutoTokenizer

import spacy_mlm
from spacy_mlm.testing import make_tiny_bert, make_tiny_distilbert

PAIR = ("The cat sleeps on the warm stone wall.", "A cat is resting.")
LABELS = ["entailment", "neutral", "contradiction"]


@pytest.fixture(scope="module")
def pooler_dir(tmp_path_factory):
    """A tiny bare BertModel whose saved pooler has recognisable weights."""
    source = make_tiny_bert(tmp_path_factory.mktemp("tiny_mlm"))
    model = AutoModel.from_pretrained(str(source))
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        model.pooler.dense.weight.copy_(torch.randn(model.pooler.dense.weight.shape, generator=generator))
        model.pooler.dense.bias.copy_(torch.linspace(-1, 1, model.config.hidden_size))
    out = tmp_path_factory.mktemp("tiny_with_pooler")
    model.save_pretrained(str(out))
    AutoTokenizer.from_pretrained(str(source)).save_pretrained(str(out))
    return out


def textcat_nlp(path, pooling="pooler"):
    spacy.util.fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(path)}})
    nlp.add_pipe("mlm_textcat", config={"model": {"tok2vec": {"pooling": pooling}}})
    return nlp


def pair_examples(nlp):
    rows = [(PAIR, "entailment"), (("A dog runs.", "Nobody runs."), "contradiction"),
            (("A man sings.", "A man sings well."), "neutral")] * 2
    return [Example.from_dict(spacy_mlm.make_pair_doc(nlp, a, b), {"cats": {l: float(l == label) for l in LABELS}})
            for (a, b), label in rows]


def listener_rows(nlp, doc):
    listener = nlp.get_pipe("mlm_textcat").model.get_ref("tok2vec")
    return listener.predict([doc])[0].cpu().numpy()  # a torch head's listener gives torch tensors


def test_pooler_pooling_reads_the_pretrained_pooler(pooler_dir):
    nlp = textcat_nlp(pooler_dir)
    nlp.initialize(lambda: pair_examples(nlp))
    doc = nlp(spacy_mlm.make_pair_doc(nlp, *PAIR))
    encoding = doc._.mlm_encoding
    saved = AutoModel.from_pretrained(str(pooler_dir)).pooler.dense
    expected = torch.tanh(saved(torch.from_numpy(encoding.cls))).detach().numpy()
    numpy.testing.assert_allclose(encoding.pooled, expected, atol=1e-5)
    reference = AutoModel.from_pretrained(str(pooler_dir)).eval()
    with torch.no_grad():
        theirs = reference(**AutoTokenizer.from_pretrained(str(pooler_dir))(*PAIR, return_tensors="pt")).pooler_output
    numpy.testing.assert_allclose(encoding.pooled, theirs[0].numpy(), atol=1e-5)
    numpy.testing.assert_allclose(listener_rows(nlp, doc), expected[None, :], atol=1e-5)
    assert not numpy.allclose(encoding.pooled, encoding.cls, atol=1e-2)


def test_the_pooler_trains_with_the_head(pooler_dir):
    nlp = textcat_nlp(pooler_dir)
    egs = pair_examples(nlp)
    nlp.initialize(lambda: egs)
    pooler = spacy_mlm.get_hf_model(nlp.get_pipe("mlm_encoder").model).pooler.dense
    before = pooler.weight.detach().clone()
    optimizer = Adam(1e-3)
    for _ in range(3):
        nlp.update(egs, sgd=optimizer, drop=0.0)
    assert not torch.allclose(pooler.weight.detach(), before)
    # ... and a cls head leaves it alone (it never reads it)
    cls_nlp = textcat_nlp(pooler_dir, pooling="cls")
    cls_egs = pair_examples(cls_nlp)
    cls_nlp.initialize(lambda: cls_egs)
    untouched = spacy_mlm.get_hf_model(cls_nlp.get_pipe("mlm_encoder").model).pooler.dense
    for _ in range(2):
        cls_nlp.update(cls_egs, sgd=Adam(1e-3), drop=0.0)
    assert torch.equal(untouched.weight.detach(), before)


def test_a_saved_pipeline_keeps_its_pooler(pooler_dir, tmp_path):
    nlp = textcat_nlp(pooler_dir)
    nlp.initialize(lambda: pair_examples(nlp))
    doc = spacy_mlm.make_pair_doc(nlp, *PAIR)
    before = nlp(doc)._.mlm_encoding.pooled
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")
    again = loaded(spacy_mlm.make_pair_doc(loaded, *PAIR))
    numpy.testing.assert_allclose(again._.mlm_encoding.pooled, before, atol=1e-6)


@pytest.mark.parametrize("family", ["bert_without_pooler", "distilbert"])
def test_a_model_without_pooler_says_so_and_reads_cls(family, tiny_model_dir, tmp_path, caplog):
    """A *ForMaskedLM checkpoint holds no pooler: the encoder drops the random one
    transformers would make (also after saving and loading), and DistilBERT has none."""
    path = tiny_model_dir if family == "bert_without_pooler" else make_tiny_distilbert(tmp_path / "distilbert")
    nlp = textcat_nlp(path)
    with caplog.at_level("WARNING", logger="spacy_mlm.models.listener"):
        nlp.initialize(lambda: pair_examples(nlp))
        doc = nlp(spacy_mlm.make_pair_doc(nlp, *PAIR))
        nlp(spacy_mlm.make_pair_doc(nlp, "A dog runs.", "Nobody runs."))
    assert getattr(spacy_mlm.get_hf_model(nlp.get_pipe("mlm_encoder").model), "pooler", None) is None
    assert doc._.mlm_encoding.pooled is None
    numpy.testing.assert_allclose(listener_rows(nlp, doc), doc._.mlm_encoding.cls[None, :], atol=1e-6)
    warnings = [r.getMessage() for r in caplog.records if "no pretrained pooler" in r.getMessage()]
    assert len(warnings) == 1 and "[CLS] vector is used instead" in warnings[0]
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")
    assert loaded(spacy_mlm.make_pair_doc(loaded, *PAIR))._.mlm_encoding.pooled is None
