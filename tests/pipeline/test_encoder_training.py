"""spaCy's own components train on top of the encoder through the listener."""
import numpy as np
import pytest
import spacy
import torch
from spacy.training import Example

import spacy_mlm  # noqa: F401
from spacy_mlm.models.encoder import get_hf_model

LISTENER = {"@architectures": "spacy_mlm.EncoderListener.v1", "width": 32, "pooling": "mean"}

NER_DATA = [
    ("Anna Berg works in Oslo.", [(0, 9, "PER"), (19, 23, "LOC")]),
    ("Peter Grant flew to Paris.", [(0, 11, "PER"), (20, 25, "LOC")]),
    ("Maria Lopez lives in Berlin.", [(0, 11, "PER"), (21, 27, "LOC")]),
]
CAT_DATA = [
    ("What a wonderful and moving story.", "POS"),
    ("The film was dull and far too long.", "NEG"),
    ("A wonderful film.", "POS"),
    ("Dull and too long.", "NEG"),
]


def _nlp(path, trainable_layers=-1):
    spacy.util.fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe(
        "mlm_encoder", config={"model": {"path": str(path), "trainable_layers": trainable_layers}}
    )
    return nlp


def _train(nlp, examples, component, steps=12):
    optimizer = nlp.initialize(lambda: examples)
    history = []
    for _ in range(steps):
        losses = {}
        nlp.update(examples, sgd=optimizer, losses=losses, drop=0.0)
        history.append(losses[component])
    return history


def _ner_examples(nlp):
    return [Example.from_dict(nlp.make_doc(t), {"entities": ents}) for t, ents in NER_DATA]


def test_spacy_ner_trains_through_listener(tiny_model_dir, device):
    nlp = _nlp(tiny_model_dir)
    nlp.add_pipe(
        "ner",
        config={
            "model": {
                "@architectures": "spacy.TransitionBasedParser.v2",
                "state_type": "ner",
                "extra_state_tokens": False,
                "hidden_width": 32,
                "maxout_pieces": 2,
                "use_upper": True,
                "tok2vec": LISTENER,
            }
        },
    )
    losses = _train(nlp, _ner_examples(nlp), "ner", steps=20)
    # the transition system's very first loss is on its initial oracle; compare with step 2
    assert min(losses[5:]) < losses[1] * 0.75
    assert nlp.get_pipe("mlm_encoder").listening_components == ["ner"]


def test_spacy_textcat_and_tagger_train_through_listener(tiny_model_dir, device):
    nlp = _nlp(tiny_model_dir)
    nlp.add_pipe(
        "textcat",
        config={
            "model": {
                "@architectures": "spacy.TextCatReduce.v1",
                "exclusive_classes": True,
                "use_reduce_first": False,
                "use_reduce_last": False,
                "use_reduce_max": False,
                "use_reduce_mean": True,
                "tok2vec": LISTENER,
            }
        },
    )
    nlp.add_pipe(
        "tagger",
        config={"model": {"@architectures": "spacy.Tagger.v2", "tok2vec": LISTENER}},
    )
    examples = []
    for text, label in CAT_DATA:
        doc = nlp.make_doc(text)
        tags = ["ADJ" if t.text in ("wonderful", "dull", "long", "moving") else "X" for t in doc]
        cats = {"POS": float(label == "POS"), "NEG": float(label == "NEG")}
        examples.append(Example.from_dict(doc, {"cats": cats, "tags": tags}))
    optimizer = nlp.initialize(lambda: examples)
    first = last = None
    for _ in range(30):
        losses = {}
        nlp.update(examples, sgd=optimizer, losses=losses)
        first = first or dict(losses)
        last = losses
    assert last["textcat"] < first["textcat"] and last["tagger"] < first["tagger"] * 0.5
    # both listeners share one encoder, which got gradients from both
    assert sorted(nlp.get_pipe("mlm_encoder").listening_components) == ["tagger", "textcat"]
    doc = nlp("What a wonderful and moving story.")
    assert doc.cats["POS"] > 0.5
    assert [t.tag_ for t in doc] == ["X", "X", "ADJ", "X", "ADJ", "X", "X"]


@pytest.mark.parametrize("trainable_layers", [0, 1])
def test_frozen_layers_do_not_change(tiny_model_dir, trainable_layers):
    nlp = _nlp(tiny_model_dir, trainable_layers=trainable_layers)
    nlp.add_pipe("tagger", config={"model": {"@architectures": "spacy.Tagger.v2", "tok2vec": LISTENER}})
    examples = [Example.from_dict(nlp.make_doc(t), {"tags": ["X"] * len(t.split())}) for t in ["a b c", "d e"]]
    nlp.initialize(lambda: examples)
    hf = get_hf_model(nlp.get_pipe("mlm_encoder").model)
    before = {k: v.detach().clone() for k, v in hf.state_dict().items()}
    optimizer = nlp.create_optimizer()
    for _ in range(3):
        nlp.update(examples, sgd=optimizer)
    after = hf.state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert not any(k.startswith("embeddings") for k in changed)
    assert not any(k.startswith("encoder.layer.0.") for k in changed)
    last_layer_changed = any(k.startswith("encoder.layer.1.") for k in changed)
    assert last_layer_changed == (trainable_layers == 1)


def test_listener_gradient_matches_plain_torch(tiny_model_dir):
    """Gradients reaching the transformer through listener + encoder equal plain autograd."""
    from spacy_mlm.models.listener import build_encoder_listener_v1
    from spacy_mlm.models.encoding import pool_tokens

    nlp = _nlp(tiny_model_dir)
    nlp.initialize()
    encoder = nlp.get_pipe("mlm_encoder")
    listener = build_encoder_listener_v1(width=32, pooling="first")
    encoder.add_listener(listener, "probe")
    docs = [nlp.make_doc("Anna Berg works in Oslo."), nlp.make_doc("The cat sleeps on the warm stone wall.")]
    hf = get_hf_model(encoder.model)
    for module in hf.modules():  # no dropout, so both passes compute the same function
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        if hasattr(module, "dropout_prob"):  # sdpa attention keeps its own rate
            module.dropout_prob = 0.0
    weights = [np.random.RandomState(i).randn(len(d), 32).astype("float32") for i, d in enumerate(docs)]

    encoder.update([Example(d, d) for d in docs])
    outputs, backprop = listener.begin_update(docs)
    backprop(weights)
    # the word embeddings' gradient is a sparse one (rows); compared as the dense matrix it stands for
    ours = {k: p.grad.to_dense().clone() for k, p in hf.named_parameters() if p.grad is not None}
    hf.zero_grad()

    batch, _ = encoder.model(docs, is_train=False)
    total = 0
    tok = encoder.model.attrs["tokenizer"]
    for doc, pieces, alignment, w in zip(docs, batch.pieces, batch.alignments, weights):
        ids = torch.from_numpy(pieces.windows[0].input_ids)[None]
        hidden = hf(ids).last_hidden_state[0, len(tok.prefix) : len(tok.prefix) + len(pieces.ids)]
        total = total + (pool_tokens(hidden, alignment, "first") * torch.from_numpy(w)).sum()
    total.backward()
    theirs = {k: p.grad.to_dense() for k, p in hf.named_parameters() if p.grad is not None}
    assert set(ours) == set(theirs) and len(ours) > 10
    for k in ours:
        torch.testing.assert_close(ours[k], theirs[k], atol=1e-5, rtol=1e-4)


def _textcat_update_pair(tiny_model_dir):
    """A pipeline and two gradient-equivalent copies of its encoder weights:
    one stepped through `nlp.update(sgd=...)`, the other by hand."""
    nlp = _nlp(tiny_model_dir)
    nlp.add_pipe("mlm_textcat", config={"model": {"tok2vec": {**LISTENER, "pooling": "cls"}}})
    examples = [Example.from_dict(nlp.make_doc(t), {"cats": {"POS": float(c == "POS"), "NEG": float(c == "NEG")}})
                for t, c in CAT_DATA]
    return nlp, examples


@pytest.mark.parametrize("via", ["nlp.update", "spacy train"])
def test_encoder_step_uses_this_batchs_gradient(tiny_model_dir, via):
    """`Language.update(sgd=...)` calls each component's finish_update right after
    its own update, i.e. before the listeners have sent the encoder its gradient.
    The encoder must still take its step with this batch's gradient (not the
    previous one's): after the very first update its weights have moved, and by
    exactly what the `spacy train` order (update all, then finish_update all) gives."""
    results = []
    for order in ("nlp.update", "spacy train"):
        nlp, examples = _textcat_update_pair(tiny_model_dir)
        optimizer = nlp.initialize(lambda: examples)
        before = {n: p.detach().clone() for n, p in get_hf_model(nlp.get_pipe("mlm_encoder").model).named_parameters()}
        if order == "nlp.update":
            nlp.update(examples, sgd=optimizer, drop=0.0)
        else:
            nlp.update(examples, sgd=False, drop=0.0)
            for _, proc in nlp.pipeline:
                proc.finish_update(optimizer)
        after = dict(get_hf_model(nlp.get_pipe("mlm_encoder").model).named_parameters())
        results.append({n: (after[n].detach() - before[n]) for n in before})
    moved = results[0] if via == "nlp.update" else results[1]
    assert max(float(d.abs().max()) for d in moved.values()) > 0
    for name in results[0]:
        assert torch.allclose(results[0][name], results[1][name], atol=1e-7), name
