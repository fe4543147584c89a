import numpy
import pytest
import spacy
import srsly
from spacy.tokens import Doc, Span
from spacy.training import Example
from spacy.util import fix_random_seed

import spacy_mlm  # noqa: F401
from spacy_mlm.errors import ModelLoadError, NotInitializedError, SpacyMlmError
from spacy_mlm.models.tagger import tagger_head
from spacy_mlm.tagging.schemes import allowed_tag_mask, is_valid_sequence, spans_to_tags

DATA = [
    ("Anna Berg works for the Northwind Company in Oslo .", [(0, 2, "PER"), (5, 7, "ORG"), (8, 9, "LOC")]),
    ("Peter Grant flew from Paris to Berlin on Monday .", [(0, 2, "PER"), (4, 5, "LOC"), (6, 7, "LOC")]),
    ("Maria Lopez joined Acme Bank as chief economist .", [(0, 2, "PER"), (3, 5, "ORG")]),
]


def make_nlp(model_dir, crf=False, scheme="BIO", pooling="first", store_probs=False, init_std=0.02):
    fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"@architectures": "spacy_mlm.HFEncoder.v2", "path": str(model_dir)}})
    nlp.add_pipe(
        "mlm_ner",
        name="ner",
        config={
            "scheme": scheme,
            "store_probs": store_probs,
            "model": {
                "@architectures": "spacy_mlm.TokenTagger.v3",
                "crf": crf,
                "init_std": init_std,
                # no width: the listener takes the encoder's (32) when it loads
                "tok2vec": {"@architectures": "spacy_mlm.EncoderListener.v1", "pooling": pooling},
            },
        },
    )
    return nlp


def examples(nlp):
    out = []
    for text, ents in DATA:
        ref = nlp.make_doc(text)
        ref.ents = [Span(ref, s, e, label=label) for s, e, label in ents]
        out.append(Example(nlp.make_doc(text), ref))
    return out


def train(nlp, n_steps=12, lr=0.003):
    egs = examples(nlp)
    optimizer = nlp.initialize(lambda: egs)
    optimizer.learn_rate = lr
    losses = []
    for _ in range(n_steps):
        step = {}
        nlp.update(egs, sgd=optimizer, losses=step)
        losses.append(step["ner"])
    return egs, losses


def transitions(nlp):
    return tagger_head(nlp.get_pipe("ner").model).transitions.detach().cpu().numpy()


@pytest.mark.parametrize("crf,scheme", [(False, "BIO"), (True, "BIOES")])
def test_trains_saves_and_loads(tiny_model_dir, tmp_path, device, crf, scheme):
    nlp = make_nlp(tiny_model_dir, crf=crf, scheme=scheme)
    egs, losses = train(nlp)
    assert losses[-1] < 0.7 * losses[0]
    ner = nlp.get_pipe("ner")
    assert ner.labels == ("LOC", "ORG", "PER")
    assert len(ner.tag_labels) == (13 if scheme == "BIOES" else 7)
    scores = nlp.evaluate(egs)
    texts = [text for text, _ in DATA] + ["Nobody went to the quiet wood ."]
    before = [[(e.start, e.end, e.label_) for e in doc.ents] for doc in nlp.pipe(texts)]
    # entities found in every training text, and the scores are those of these predictions
    assert all(before[:3]), before
    predicted, gold = {(i, *e) for i, ents in enumerate(before[:3]) for e in ents}, \
        {(i, *e) for i, (_, ents) in enumerate(DATA) for e in ents}
    p, r = len(predicted & gold) / len(predicted), len(predicted & gold) / len(gold)
    assert (scores["ents_p"], scores["ents_r"]) == pytest.approx((p, r)) and scores["ents_f"] > 0.6
    assert set(scores["ents_per_type"]) <= {"LOC", "ORG", "PER"}
    nlp.to_disk(tmp_path / "model")
    loaded = spacy.load(tmp_path / "model")
    after = [[(e.start, e.end, e.label_) for e in doc.ents] for doc in loaded.pipe(texts)]
    assert after == before
    assert loaded.get_pipe("ner").tag_labels == ner.tag_labels
    assert ner.model.get_ref("tok2vec").get_dim("nO") == 32
    if crf:
        numpy.testing.assert_array_equal(transitions(loaded), transitions(nlp))
        assert numpy.abs(transitions(nlp)).sum() > 0  # the CRF learned


def test_learns_the_training_entities(tiny_model_dir):
    nlp = make_nlp(tiny_model_dir)
    egs, _ = train(nlp, n_steps=40)
    assert nlp.evaluate(egs)["ents_f"] > 0.8


@pytest.mark.parametrize("crf", [False, True])
def test_tag_probs_are_distributions_over_the_tags(tiny_model_dir, device, crf):
    nlp = make_nlp(tiny_model_dir, crf=crf, scheme="BIOES", store_probs=True)
    train(nlp, n_steps=3)
    ner = nlp.get_pipe("ner")
    for doc in nlp.pipe([DATA[0][0], "", "   ", "Oslo"]):
        probs = doc._.tag_probs
        assert probs.shape == (len(doc), len(ner.tag_labels))
        numpy.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-4)


@pytest.mark.parametrize("crf", [False, True])
def test_decoded_tags_are_valid_where_the_scores_favour_invalid_ones(tiny_model_dir, device, crf):
    """Constrained decoding: with the output layer pushed to score I-PER highest
    everywhere (which no BIOES sequence may start or end with), every path that
    `predict` decodes is still a well-formed BIOES sequence."""
    import torch

    nlp = make_nlp(tiny_model_dir, crf=crf, scheme="BIOES")
    train(nlp, n_steps=3)
    ner = nlp.get_pipe("ner")
    with torch.no_grad():
        tagger_head(ner.model).output.bias[ner.tag_labels.index("I-PER")] += 20.0
    docs = [nlp.make_doc(text) for text in [DATA[0][0], "Oslo", "Peter Grant"]]
    paths, *_ = ner.predict(docs)
    for doc, path in zip(docs, paths, strict=True):
        tags = [ner.tag_labels[i] for i in path]
        assert len(tags) == len(doc)
        assert is_valid_sequence(tags, "BIOES"), tags


def test_missing_annotation_is_not_taught_as_outside(tiny_model_dir):
    nlp = make_nlp(tiny_model_dir)
    text, ents = DATA[0]
    words = text.split()
    full = Doc(nlp.vocab, words=words, ents=spans_to_tags(len(words), ents, "BIO"))
    partial = Doc(nlp.vocab, words=words, ents=["B-PER", "I-PER"] + [None] * (len(words) - 2))
    nlp.initialize(lambda: [Example(nlp.make_doc(text), full)])
    ner = nlp.get_pipe("ner")
    allowed = allowed_tag_mask(Example(nlp.make_doc(text), partial).get_aligned_ner(), ner.tag_labels, "BIO")
    assert allowed[:2].sum(axis=1).tolist() == [1, 1]
    assert allowed[2:].all()  # unknown: every tag allowed, no loss
    scores = ner.model.predict([nlp.make_doc(text)])
    loss, grads = ner.get_loss([Example(nlp.make_doc(text), partial)], scores)
    assert grads[2:].abs().sum() == 0 and grads[:2].abs().sum() > 0


def test_mean_pooling_and_io_scheme(tiny_model_dir):
    nlp = make_nlp(tiny_model_dir, scheme="IO", pooling="mean")
    _, losses = train(nlp, n_steps=8)
    assert losses[-1] < losses[0]
    assert nlp.get_pipe("ner").tag_labels == ["O", "I-LOC", "I-ORG", "I-PER"]


def test_errors(tiny_model_dir):
    nlp = make_nlp(tiny_model_dir)
    with pytest.raises(NotInitializedError):
        nlp.get_pipe("ner").predict([nlp.make_doc("Oslo")])
    with pytest.raises(SpacyMlmError, match="no entity labels"):
        nlp.initialize(lambda: [Example(nlp.make_doc("a b"), nlp.make_doc("a b"))])
    with pytest.raises(SpacyMlmError, match="Unknown tag scheme"):
        make_nlp(tiny_model_dir, scheme="BILOU2")


PIECES = {"@architectures": "spacy_mlm.EncoderPieceListener.v1"}


@pytest.mark.parametrize("crf,loss,decode", [(False, "all", "mean"), (False, "first", "first"), (True, "all", "mean")])
def test_subword_level_tagging(tiny_model_dir, tmp_path, device, crf, loss, decode):
    nlp = make_nlp(tiny_model_dir, crf=crf, store_probs=True)
    ner_config = nlp.config["components"]["ner"]
    nlp.remove_pipe("ner")
    ner_config.update({"subword_loss": loss, "subword_decode": decode})
    ner_config["model"]["tok2vec"] = PIECES
    nlp.add_pipe("mlm_ner", name="ner", config={k: v for k, v in ner_config.items() if k != "factory"})
    egs, losses = train(nlp, n_steps=12)
    assert losses[-1] < 0.8 * losses[0]
    text = "Northwind Company in Oslo"  # several words split into subwords by the tiny vocab
    doc = nlp(text)
    assert doc._.tag_probs.shape == (len(doc), 7)
    nlp.to_disk(tmp_path / "model")
    again = spacy.load(tmp_path / "model")(text)
    assert [(e.start, e.end, e.label_) for e in again.ents] == [(e.start, e.end, e.label_) for e in doc.ents]
    numpy.testing.assert_allclose(again._.tag_probs, doc._.tag_probs, atol=1e-5)


@pytest.mark.parametrize("std", [0.0, 0.02])
def test_tagger_output_initialisation(tiny_model_dir, std):
    """The output layer starts like Hugging Face's head, Normal(0, 0.02), so the
    encoder gets a gradient from the first step; init_std = 0 gives zeros."""
    nlp = make_nlp(tiny_model_dir, init_std=std)
    nlp.initialize(lambda: examples(nlp))
    W = tagger_head(nlp.get_pipe("ner").model).output.weight.detach()
    assert abs(float(W.std()) - std) < 0.006


def test_saved_labels_must_fit_the_weights(tiny_model_dir, tmp_path):
    nlp = make_nlp(tiny_model_dir)
    train(nlp, n_steps=1)
    nlp.to_disk(tmp_path / "model")
    cfg_path = tmp_path / "model" / "ner" / "cfg"
    cfg = srsly.read_json(cfg_path)
    cfg["labels"] = cfg["labels"][:-1]
    srsly.write_json(cfg_path, cfg)
    with pytest.raises(ModelLoadError, match="weights score 7 tags"):
        spacy.load(tmp_path / "model")
