import random

import numpy
import pytest
import spacy
import torch
from spacy.training import Example
from thinc.api import Adam
from transformers import AutoModel, AutoTokenizer

import spacy_mlm
from spacy_mlm.models.encoder import get_hf_model
from spacy_mlm.errors import SpacyMlmError
from spacy_mlm.scoring.textcat import cats_accuracy

# Separable toy task: each class has its own words (all in the tiny model's vocab).
POSITIVE = ["wonderful", "moving", "story", "team", "won", "match", "warm", "quiet"]
NEGATIVE = ["dull", "film", "long", "muddy", "rain", "nobody", "music", "prices"]
EXTRA = ["park", "bank", "river", "town"]


def toy_rows(n, seed, extra=False):
    """(text, gold labels): POS/NEG by word set; with `extra`, half the texts also
    get words from EXTRA and the label EXTRA."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        words, label = (POSITIVE, "POS") if i % 2 == 0 else (NEGATIVE, "NEG")
        tokens = [rng.choice(words) for _ in range(rng.randint(3, 6))]
        gold = {label}
        if extra and rng.random() < 0.5:
            tokens += [rng.choice(EXTRA) for _ in range(2)]
            gold.add("EXTRA")
        rng.shuffle(tokens)
        rows.append((" ".join(tokens), gold))
    return rows


def make_nlp(model_dir, *, pooling="cls", exclusive=True, hidden_width=0, trainable_layers=-1, init_std=0.02, **component):
    spacy.util.fix_random_seed(0)  # the head's random initial weights: same start whatever ran before
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(model_dir), "trainable_layers": trainable_layers}})
    head = {"exclusive_classes": exclusive, "hidden_width": hidden_width, "init_std": init_std,
            "tok2vec": {"pooling": pooling}}
    nlp.add_pipe("mlm_textcat", config={"model": head, **component})
    return nlp


def examples(nlp, rows, labels):
    out = []
    for text, gold in rows:
        doc = nlp.make_doc(text)
        out.append(Example.from_dict(doc, {"cats": {label: float(label in gold) for label in labels}}))
    return out


def train(nlp, egs, steps, learn_rate=5e-3, batch_size=8, seed=0):
    optimizer = Adam(learn_rate)
    rng = random.Random(seed)
    torch.manual_seed(seed)  # the encoder's dropout
    for _ in range(steps):
        batch = rng.sample(egs, min(batch_size, len(egs)))
        nlp.update(batch, sgd=optimizer, drop=0.0)


def test_pair_docs_encode_like_the_hf_pair_template(tiny_model_dir):
    """[CLS] A [SEP] B [SEP] with segment ids 0/1: the pair's [CLS] vector equals the
    HF model's own on tokenizer(a, b), and differs from encoding the joined text."""
    nlp = make_nlp(tiny_model_dir)
    nlp.initialize(lambda: examples(nlp, [("a b", {"POS"}), ("c d", {"NEG"})], ["POS", "NEG"]))
    premise, hypothesis = "The cat sleeps on the wall.", "A cat is resting."
    pair = nlp(spacy_mlm.make_pair_doc(nlp, premise, hypothesis))
    encoding = pair._.mlm_encoding
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    enc = tokenizer(premise, hypothesis, return_tensors="pt")
    ids = enc["input_ids"][0].tolist()
    assert ids[0] == tokenizer.cls_token_id and ids[-1] == tokenizer.sep_token_id
    assert ids.count(tokenizer.sep_token_id) == 2
    sep = ids.index(tokenizer.sep_token_id)
    types = enc["token_type_ids"][0].tolist()
    assert types == [0] * (sep + 1) + [1] * (len(ids) - sep - 1)
    # content pieces (no specials) in order, and offsets pointing at the right side of the doc
    assert encoding.piece_ids.tolist() == ids[1:sep] + ids[sep + 1 : -1]
    b_start = pair[pair._.mlm_pair_start].idx
    n_a = sep - 1
    assert (encoding.piece_offsets[n_a:, 0] >= b_start).all() and (encoding.piece_offsets[:n_a, 1] < b_start).all()
    reference = AutoModel.from_pretrained(str(tiny_model_dir)).eval()
    with torch.no_grad():
        expected = reference(**enc).last_hidden_state[0]
    numpy.testing.assert_allclose(encoding.cls, expected[0].numpy(), atol=1e-5)
    numpy.testing.assert_allclose(encoding.hidden, expected[1:-1][[i for i in range(len(ids) - 2) if i != sep - 1]].numpy(), atol=1e-5)
    joined = nlp(pair.text)._.mlm_encoding
    assert not numpy.allclose(joined.cls, encoding.cls, atol=1e-3)


def test_tiny_model_learns_separable_task(tiny_model_dir, device):
    nlp = make_nlp(tiny_model_dir, pooling="cls")
    train_egs = examples(nlp, toy_rows(48, seed=0), ["POS", "NEG"])
    nlp.initialize(lambda: train_egs)
    train(nlp, train_egs, steps=25)
    scores = nlp.evaluate(examples(nlp, toy_rows(24, seed=1), ["POS", "NEG"]))
    assert scores["cats_accuracy"] >= 0.9
    assert scores["cats_macro_f"] >= 0.9
    assert set(scores["cats_f_per_type"]) == {"POS", "NEG"}
    doc = nlp("wonderful story")
    assert set(doc.cats) == {"POS", "NEG"} and sum(doc.cats.values()) == pytest.approx(1.0, abs=1e-5)


def test_multilabel_learns_and_scores_auc(tiny_model_dir, device):
    nlp = make_nlp(tiny_model_dir, pooling="doc_mean", exclusive=False, hidden_width=16)
    labels = ["POS", "NEG", "EXTRA"]
    train_egs = examples(nlp, toy_rows(48, seed=0, extra=True), labels)
    nlp.initialize(lambda: train_egs)
    # the encoder steps on each batch's own gradient: 5e-3 overshoots on this toy task
    train(nlp, train_egs, steps=120, learn_rate=1e-3)
    scores = nlp.evaluate(examples(nlp, toy_rows(24, seed=1, extra=True), labels))
    assert scores["cats_score_desc"] == "macro AUC"
    assert scores["cats_macro_auc"] >= 0.9
    # EXTRA (2 of 5-8 words, diluted by mean pooling) is the hardest label and moves with the
    # seed, so the bar is "clearly learned", not a point value
    assert scores["cats_auc_per_type"]["EXTRA"] >= 0.75
    assert scores["cats_f_per_type"]["POS"]["f"] >= 0.9 and scores["cats_f_per_type"]["NEG"]["f"] >= 0.9
    plain, extra = nlp("wonderful story won").cats, nlp("wonderful story won park river town").cats
    assert plain["POS"] > 0.5 > plain["NEG"] and extra["POS"] > 0.5 > extra["NEG"]
    assert extra["EXTRA"] > plain["EXTRA"]
    assert sum(extra.values()) > 1.0  # independent sigmoids, not a softmax


def test_losses_follow_exclusive_setting(tiny_model_dir):
    rows = [("The film was dull .", {"NEG"}), ("What a wonderful story .", {"POS"})]
    for exclusive in (True, False):
        nlp = make_nlp(tiny_model_dir, exclusive=exclusive, class_weights={"POS": 2.0})
        egs = examples(nlp, rows, ["POS", "NEG"])
        nlp.initialize(lambda: egs)
        textcat = nlp.get_pipe("mlm_textcat")
        logits = torch.tensor([[0.4, -1.0], [-0.5, 2.0]])  # rows: NEG gold, POS gold; columns POS, NEG
        loss, d = textcat.get_loss(egs, logits)
        gold = numpy.array([[0.0, 1.0], [1.0, 0.0]])
        if exclusive:
            probs = torch.softmax(logits, dim=-1).numpy()
            weights = numpy.array([1.0, 2.0])  # NEG row weighs 1, POS row 2
            expected = -(weights * numpy.log((probs * gold).sum(1))).sum() / 3.0
            numpy.testing.assert_allclose(d.numpy(), (probs - gold) * weights[:, None] / 3.0, rtol=1e-5)
        else:
            p = torch.sigmoid(logits).numpy()
            pos_weight = numpy.array([2.0, 1.0])
            expected = (-(pos_weight * gold * numpy.log(p) + (1 - gold) * numpy.log(1 - p))).sum() / 4
        assert loss == pytest.approx(expected, rel=1e-5)


def snapshot(nlp):
    hf = get_hf_model(nlp.get_pipe("mlm_encoder").model)
    return {name: p.detach().clone() for name, p in hf.named_parameters()}


@pytest.mark.parametrize("trainable_layers", [0, 1])
def test_frozen_weights_do_not_change(tiny_model_dir, trainable_layers):
    nlp = make_nlp(tiny_model_dir, trainable_layers=trainable_layers)
    egs = examples(nlp, toy_rows(16, seed=0), ["POS", "NEG"])
    nlp.initialize(lambda: egs)
    head = nlp.get_pipe("mlm_textcat").model.shims[0].module
    before, head_before = snapshot(nlp), head.output.weight.detach().clone()
    train(nlp, egs, steps=3)
    after = snapshot(nlp)
    assert not torch.allclose(head.output.weight.detach(), head_before)
    changed = {name for name in before if not torch.equal(before[name], after[name])}
    if trainable_layers == 0:
        assert changed == set()
    else:
        assert changed and all(name.startswith("encoder.layer.1.") for name in changed)
        assert any(name.startswith("encoder.layer.1.attention") for name in changed)


def test_layer_decay_optimizer_in_training(tiny_model_dir):
    """With decay 0.1, each layer moves 10x less than the one above on the first Adam step."""
    from thinc.api import registry

    nlp = make_nlp(tiny_model_dir)
    egs = examples(nlp, toy_rows(16, seed=0), ["POS", "NEG"])
    nlp.initialize(lambda: egs)
    textcat = nlp.get_pipe("mlm_textcat")
    # large random output weights, so the first backward pass already reaches the encoder
    with torch.no_grad():
        textcat.model.shims[0].module.output.weight.normal_()
    optimizer = registry.resolve({"o": {"@optimizers": "spacy_mlm.LayerDecayAdam.v2", "learn_rate": 1e-3,
                                        "layer_decay": 0.1, "grad_clip": 0.0, "L2": 0.0}})["o"]
    # spaCy applies a shared encoder's gradient at its next finish_update (the
    # encoder runs before the heads' backward pass), so the first Adam step of
    # the transformer happens in the second update.
    nlp.update(egs, sgd=optimizer)
    before = snapshot(nlp)
    nlp.update(egs, sgd=optimizer)
    after = snapshot(nlp)

    def step(name):
        return float((after[name] - before[name]).abs().max())

    top = step("encoder.layer.1.output.dense.weight")
    assert top == pytest.approx(1e-4, rel=0.05)
    assert step("encoder.layer.0.output.dense.weight") == pytest.approx(1e-5, rel=0.05)
    assert step("embeddings.word_embeddings.weight") == pytest.approx(1e-6, rel=0.05)


def test_balanced_class_weights_are_computed_and_saved(tiny_model_dir, tmp_path):
    nlp = make_nlp(tiny_model_dir, class_weights="balanced")
    rows = [("The film was dull .", {"NEG"})] * 3 + [("What a wonderful story .", {"POS"})]
    egs = examples(nlp, rows, ["POS", "NEG"])
    nlp.initialize(lambda: egs)
    assert nlp.get_pipe("mlm_textcat").cfg["class_weights"] == pytest.approx({"POS": 2.0, "NEG": 4 / 6})
    text = "What a wonderful story ."
    cats = nlp(text).cats
    nlp.to_disk(tmp_path / "pipe")
    loaded = spacy.load(tmp_path / "pipe")
    textcat = loaded.get_pipe("mlm_textcat")
    assert textcat.labels == ("POS", "NEG") and textcat.exclusive_classes
    assert textcat.cfg["class_weights"] == pytest.approx({"POS": 2.0, "NEG": 4 / 6})
    assert loaded(text).cats == pytest.approx(cats, abs=1e-5)


def test_classify_pair_returns_label_probabilities(tiny_model_dir, device):
    nlp = make_nlp(tiny_model_dir)
    labels = ["entailment", "neutral", "contradiction"]

    def get_examples():
        out = []
        for (a, b), label in [(("A cat sleeps .", "A cat rests ."), "entailment"), (("A cat .", "A dog ."), "neutral"),
                              (("It rains .", "It is dry ."), "contradiction")]:
            doc = spacy_mlm.make_pair_doc(nlp, a, b)
            out.append(Example.from_dict(doc, {"cats": {l: float(l == label) for l in labels}}))
        return out

    nlp.initialize(get_examples)
    cats = spacy_mlm.classify_pair(nlp, "A man sleeps .", "A person rests .")
    assert set(cats) == set(labels) and sum(cats.values()) == pytest.approx(1.0, abs=1e-5)
    many = spacy_mlm.classify_pairs(nlp, [("A man sleeps .", "A person rests ."), ("It rains .", "It is dry .")])
    assert many[0] == pytest.approx(cats, abs=1e-5) and len(many) == 2


def test_bad_settings_raise(tiny_model_dir):
    nlp = spacy.blank("en")
    with pytest.raises(SpacyMlmError, match="balanced"):
        nlp.add_pipe("mlm_textcat", config={"class_weights": "inverse"})
    nlp = make_nlp(tiny_model_dir)
    one_label = examples(nlp, [("a b", {"POS"})], ["POS"])
    with pytest.raises(SpacyMlmError, match="at least two"):
        nlp.initialize(lambda: one_label)
    nlp = make_nlp(tiny_model_dir, class_weights={"MAYBE": 2.0})
    with pytest.raises(ValueError, match="MAYBE"):
        nlp.initialize(lambda: examples(nlp, [("a", {"POS"}), ("b", {"NEG"})], ["POS", "NEG"]))


def test_cats_accuracy():
    pairs = [({"a": 0.7, "b": 0.3}, {"a": 1.0, "b": 0.0}), ({"a": 0.6, "b": 0.4}, {"a": 0.0, "b": 1.0}), ({}, {})]
    assert cats_accuracy(pairs, ["a", "b"], exclusive_classes=True) == 0.5
    multi = [({"a": 0.7, "b": 0.6}, {"a": 1.0, "b": 1.0}), ({"a": 0.7, "b": 0.6}, {"a": 1.0, "b": 0.0}),
             ({"a": 0.2}, {"a": 0.0})]
    assert cats_accuracy(multi, ["a", "b"], exclusive_classes=False, threshold=0.5) == pytest.approx(2 / 3)
    assert cats_accuracy([], ["a"], exclusive_classes=True) is None


@pytest.mark.parametrize("std", [0.0, 0.02])
def test_head_output_initialisation(tiny_model_dir, std):
    """The output layer starts as Normal(0, 0.02) like Hugging Face's heads
    (init_std = 0: zeros); the listener takes the encoder's width."""
    nlp = make_nlp(tiny_model_dir, init_std=std)
    egs = examples(nlp, [("a good film", {"POS"}), ("a bad film", {"NEG"})], ["POS", "NEG"])
    nlp.initialize(lambda: egs)
    head = nlp.get_pipe("mlm_textcat").model.shims[0].module
    assert head.output.weight.shape == (2, 32)
    assert abs(float(head.output.weight.detach().std()) - std) < 0.01
