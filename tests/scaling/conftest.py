"""Saved pipelines of every component, built once per test session (tiny
models, a few training steps), and a snapshot of every annotation a Doc carries,
for the tests that send Docs and pipelines across process boundaries."""
from pathlib import Path

import numpy
import pytest
import spacy
from spacy.tokens import Doc, Span, Token
from spacy.training import Example
from spacy.util import fix_random_seed, registry

import spacy_mlm
from spacy_mlm.models.encoding import DocEncoding

from ..numerics import PROBABILITY_ATOL, assert_close_nested

NER_DATA = [
    ("Anna Berg works for the Northwind Company in Oslo .", [(0, 2, "PER"), (5, 7, "ORG"), (8, 9, "LOC")]),
    ("Peter Grant flew from Paris to Berlin on Monday .", [(0, 2, "PER"), (4, 5, "LOC"), (6, 7, "LOC")]),
    ("Maria Lopez joined Acme Bank as chief economist .", [(0, 2, "PER"), (3, 5, "ORG")]),
]
TEXTS = [
    "Anna Berg works for the Northwind Company in Oslo .",
    "The river bank was muddy after the rain in Berlin .",
    "She opened an account at the bank on Main Street .",
    "Peter Grant flew from Paris to Berlin on Monday .",
    "Nobody went to the quiet wood .",
]
PAIRS = [("The cat sleeps on the warm wall.", "A cat is resting."), ("Prices rose sharply.", "Prices fell.")]
WIC = Path(__file__).resolve().parents[2] / "project" / "assets_default" / "wic" / "train" / "train.data.txt"


def _ner_examples(nlp):
    out = []
    for i, (text, ents) in enumerate(NER_DATA):
        ref = nlp.make_doc(text)
        ref.ents = [Span(ref, s, e, label=label) for s, e, label in ents]
        ref.cats = {"PEOPLE": float(i != 2), "OTHER": float(i == 2)}
        out.append(Example(nlp.make_doc(text), ref))
    return out


def _ner_pipeline(model_dir, crf: bool):
    """encoder (every layer kept) -> mlm_ner (probabilities stored) -> mlm_textcat
    -> mlm_vectors (with a sense inventory), trained a few steps."""
    fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(model_dir), "output_hidden_states": True}})
    nlp.add_pipe("mlm_ner", name="ner", config={"store_probs": True, "model": {"crf": crf}})
    nlp.add_pipe("mlm_textcat", name="textcat")
    nlp.add_pipe("mlm_vectors", name="vectors")
    egs = _ner_examples(nlp)
    optimizer = nlp.initialize(lambda: egs)
    optimizer.learn_rate = 0.003
    for _ in range(10):
        nlp.update(egs, sgd=optimizer)
    river, money = nlp(TEXTS[1]), nlp(TEXTS[2])
    nlp.get_pipe("vectors").add_sense_examples([(river[2], "bank%shore"), (money[6], "bank%money")])
    return nlp


def _pair_pipeline(model_dir):
    fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(model_dir)}})
    nlp.add_pipe("mlm_textcat", config={"model": {"tok2vec": {"pooling": "cls"}}})
    labels = ["entailment", "contradiction"]
    nlp.initialize(lambda: [Example.from_dict(spacy_mlm.make_pair_doc(nlp, a, b), {"cats": {l: float(i == j) for j, l in enumerate(labels)}})
                            for i, (a, b) in enumerate(PAIRS)])
    return nlp


def _scores_pipeline(model_dir):
    """A pair regressor (relatedness scores, as SICK's)."""
    fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(model_dir)}})
    nlp.add_pipe("mlm_regressor")
    nlp.initialize(lambda: [Example.from_dict(spacy_mlm.make_pair_doc(nlp, a, b), {"cats": {"relatedness": 1.0 + 3 * i}})
                            for i, (a, b) in enumerate(PAIRS)])
    return nlp


def _senses_pipeline(model_dir):
    fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"pairs": "apart", "model": {"path": str(model_dir), "output_hidden_states": True}})
    nlp.add_pipe("mlm_senses", name="senses")
    examples = list(registry.readers.get("spacy_mlm.WiCCorpus.v1")(WIC, limit=4)(nlp))
    nlp.initialize(lambda: examples)
    return nlp


@pytest.fixture(scope="session")
def saved_pipelines(tiny_model_dir, tmp_path_factory):
    """{name: path} of saved pipelines: "ner" (softmax NER, textcat, vectors, senses
    inventory), "crf" (the same with a CRF), "int8" ("crf" run by an int8 ONNX
    graph), "pairs" (a pair classifier), "scores" (a pair regressor), "senses" (mlm_senses)."""
    root = tmp_path_factory.mktemp("pipelines")
    paths = {name: root / name for name in ("ner", "crf", "int8", "pairs", "scores", "senses")}
    _ner_pipeline(tiny_model_dir, crf=False).to_disk(paths["ner"])
    _ner_pipeline(tiny_model_dir, crf=True).to_disk(paths["crf"])
    if _has_onnxruntime():
        int8 = {"components": {"mlm_encoder": {"model": {"backend": "onnx", "precision": "int8"}}}}
        spacy.load(paths["crf"], config=int8).to_disk(paths["int8"])
    else:
        del paths["int8"]
    _pair_pipeline(tiny_model_dir).to_disk(paths["pairs"])
    _scores_pipeline(tiny_model_dir).to_disk(paths["scores"])
    _senses_pipeline(tiny_model_dir).to_disk(paths["senses"])
    return paths


def _has_onnxruntime() -> bool:
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def inputs_for(name: str, nlp):
    """What each pipeline reads: texts, or pair Docs."""
    if name in ("pairs", "scores"):
        return [spacy_mlm.make_pair_doc(nlp, a, b) for a, b in PAIRS]
    if name == "senses":  # WiC pairs (their two targets in doc.spans) and single texts
        return [eg.predicted for eg in registry.readers.get("spacy_mlm.WiCCorpus.v1")(WIC, limit=2)(nlp)] + TEXTS[:2]
    return TEXTS


def _plain(value, exact: bool = True):
    """A user_data value as comparable plain data (a DocEncoding as its arrays):
    an array as its bytes (`exact`), or as its values, to compare floats within a
    tolerance (tests/numerics.py)."""
    if isinstance(value, DocEncoding):
        return _plain(value.to_dict(), exact)
    if isinstance(value, dict):
        return {k: _plain(v, exact) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, exact) for v in value]
    if isinstance(value, numpy.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes() if exact else value.tolist())
    return value


def snapshot(doc: Doc, exact: bool = True):
    """Every annotation our components leave on a Doc: entities, cats, every
    extension value (user_data), and the vectors and similarities the hooks give;
    arrays as bytes (`exact`) or values (see `_plain`)."""
    out = {
        "text": doc.text,
        "ents": [(e.start, e.end, e.label_) for e in doc.ents],
        "cats": dict(doc.cats),
        "user_data": {str(k): _plain(v, exact) for k, v in doc.user_data.items()},
        "spans": {k: [(s.start, s.end) for s in g] for k, g in doc.spans.items()},
    }
    if doc.has_extension("mlm_vectors") and doc._.mlm_vectors is not None:
        out["vectors"] = [_plain(t.vector, exact) for t in doc] + [_plain(doc.vector, exact)]
        out["similarity"] = float(doc[0].similarity(doc[-1]))
    return out


def assert_same_docs(got, expected):
    """The same annotations, bit for bit: for Docs that went through a round trip
    (bytes, DocBin, pickle), whose numbers were computed once."""
    got, expected = list(got), list(expected)
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert snapshot(a) == snapshot(b)


def assert_close_docs(got, expected):
    """The same entities, labels and structure, and numbers within fp32's spread
    (tests/numerics.py): for Docs computed again elsewhere, in another process
    with other threads or in other batches, so by other kernels."""
    got, expected = list(got), list(expected)
    assert len(got) == len(expected)
    for n, (a, b) in enumerate(zip(got, expected)):
        assert_close_nested(snapshot(a, exact=False), snapshot(b, exact=False), PROBABILITY_ATOL, f"doc {n}")
