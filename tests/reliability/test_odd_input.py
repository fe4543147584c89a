"""Messy text through the encoder and through spaCy components listening to it:
every doc gets a well-formed result (right shapes, finite numbers, pieces inside
their tokens), whatever characters it holds."""
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spacy.training import Example

import spacy_mlm

ODD_TEXTS = {
    "empty": "",
    "space": " ",
    "whitespace": "\n\t  \n\u3000\u00a0",
    "control": "\x00\x01\x07abc\x1b[31m red\x7f\x0c",
    "zero_width": "a\u200bb\u200dc\ufeffd \u2060 \u200b",
    "combining": "e\u0301\u0301\u0301 n\u0303 \u0301\u0301",
    "lone_combining": "\u0301",
    "emoji": "👍🏽 👨‍👩‍👧 🇳🇴 fine 🙂🙂🙂",
    "arabic": "مرحبا بالعالم، كيف حالك؟",
    "hebrew": "שלום עולם",
    "mixed_bidi": "The word \u202bשלום\u202c means peace \u202e reversed \u202c.",
    "cjk": "你好世界。東京タワーに行きました。한국어",
    "all_unknown": "zzqxj qqqz xxzy",
    "private_use": "\ue000\U0010ffff\ufffd",
    "long_word": "a" * 1000,
    "mixed": "Anna Berg 👍 works\u200b in Оslo (Cyrillic O) — 東京 ok.",
}


def check_encoding(doc) -> None:
    """The invariants every encoded doc must satisfy."""
    enc = doc._.mlm_encoding
    n_pieces = len(enc.piece_ids)
    assert enc.hidden.shape == (n_pieces, enc.width) and enc.hidden.dtype == np.float32
    assert enc.cls.shape == (enc.width,)
    assert len(enc.pieces) == n_pieces and enc.piece_offsets.shape == (n_pieces, 2)
    assert np.isfinite(enc.hidden).all() and np.isfinite(enc.cls).all()
    assert enc.alignment.n_tokens == len(doc)
    vectors = enc.token_vectors()
    assert vectors.shape == (len(doc), enc.width) and np.isfinite(vectors).all()
    starts, ends = enc.piece_offsets[:, 0], enc.piece_offsets[:, 1]
    assert np.all((0 <= starts) & (starts <= ends) & (ends <= len(doc.text)))
    for i, token in enumerate(doc):  # a piece aligns to the tokens it overlaps
        for p in enc.alignment.pieces_of(i):
            assert starts[p] < token.idx + len(token) and token.idx < ends[p]


def check_predictions(doc, tag_labels) -> None:
    assert len([t.tag_ for t in doc]) == len(doc)
    assert all(t.tag_ in tag_labels for t in doc)
    assert set(doc.cats) == {"POS", "NEG"}
    scores = np.array(list(doc.cats.values()))
    assert np.isfinite(scores).all()
    # spaCy's textcat returns all-zero scores when no doc of the batch has a token
    assert abs(scores.sum() - 1.0) < 1e-4 or (len(doc) == 0 and scores.sum() == 0.0)


@pytest.mark.parametrize("name", list(ODD_TEXTS))
def test_encoder_on_odd_text(encoder_nlp, name):
    doc = encoder_nlp(ODD_TEXTS[name])
    check_encoding(doc)


def test_odd_texts_give_expected_pieces(encoder_nlp):
    pieces = {name: encoder_nlp(text)._.mlm_encoding.pieces for name, text in ODD_TEXTS.items()}
    for name in ("empty", "space", "whitespace", "lone_combining"):
        assert pieces[name] == [], name
    # the BERT normaliser drops control, zero-width and combining characters
    assert pieces["zero_width"] == ["a", "##b", "##c", "##d"]
    assert pieces["combining"][:2] == ["e", "n"]
    # scripts the vocab never saw become [UNK] pieces that still align to their tokens
    for name in ("arabic", "hebrew", "all_unknown"):
        assert pieces[name] and set(pieces[name]) == {"[UNK]"}, name
    assert len(pieces["cjk"]) > 10  # one piece per CJK character


def test_odd_docs_do_not_change_their_batch_neighbours(encoder_nlp):
    normal = "Anna Berg works for the Northwind Company in Oslo."
    alone = encoder_nlp(normal)._.mlm_encoding
    docs = list(encoder_nlp.pipe([*ODD_TEXTS.values(), normal], batch_size=64))
    together = docs[-1]._.mlm_encoding
    np.testing.assert_allclose(together.hidden, alone.hidden, atol=1e-5)
    np.testing.assert_allclose(together.cls, alone.cls, atol=1e-5)
    for doc in docs:
        check_encoding(doc)


def test_tagger_and_textcat_predict_on_odd_text(tagger_textcat_nlp):
    tags = set(tagger_textcat_nlp.get_pipe("tagger").labels) | {""}
    docs = list(tagger_textcat_nlp.pipe(ODD_TEXTS.values(), batch_size=4))
    for doc in docs:
        check_encoding(doc)
        check_predictions(doc, tags)


def test_training_on_a_batch_with_odd_docs(tiny_model_dir):
    from .conftest import build_tagger_textcat, tagger_textcat_examples

    nlp = build_tagger_textcat(tiny_model_dir)
    examples = tagger_textcat_examples(nlp)
    for text in ODD_TEXTS.values():
        doc = nlp.make_doc(text)
        examples.append(Example.from_dict(doc, {"tags": ["X"] * len(doc), "cats": {"POS": 1.0, "NEG": 0.0}}))
    optimizer = nlp.initialize(lambda: examples)
    for _ in range(2):
        losses = {}
        nlp.update(examples, sgd=optimizer, losses=losses)
        assert set(losses) == {"mlm_encoder", "textcat", "tagger"}
        assert all(np.isfinite(v) for v in losses.values()), losses
    # a batch of nothing but empty docs trains too (nothing to learn, nothing breaks)
    empty = [Example.from_dict(nlp.make_doc(""), {"tags": [], "cats": {"POS": 1.0, "NEG": 0.0}})] * 3
    losses = {}
    nlp.update(empty, sgd=optimizer, losses=losses)
    assert all(np.isfinite(v) for v in losses.values()), losses


SIDES = ["", " ", "The cat sleeps.", "你好 👍", "\u200b"]


@pytest.mark.parametrize("a", SIDES)
@pytest.mark.parametrize("b", SIDES)
def test_pair_docs_with_odd_sides(tagger_textcat_nlp, a, b):
    nlp = tagger_textcat_nlp
    doc = nlp(spacy_mlm.make_pair_doc(nlp, a, b))
    check_encoding(doc)
    check_predictions(doc, set(nlp.get_pipe("tagger").labels) | {""})
    n_a = len(nlp.make_doc(a))
    assert doc._.mlm_pair_start == n_a
    window = nlp.get_pipe("mlm_encoder").model.attrs["tokenizer"]([doc])[0].windows[0]
    hf = nlp.get_pipe("mlm_encoder").model.attrs["tokenizer"].hf
    # always [CLS] A [SEP] B [SEP], even when a side has no pieces
    assert window.input_ids[0] == hf.cls_token_id
    assert (window.input_ids == hf.sep_token_id).sum() == 2


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.text(max_size=60), min_size=1, max_size=4))
def test_random_unicode_through_the_whole_pipeline(tagger_textcat_nlp, texts):
    tags = set(tagger_textcat_nlp.get_pipe("tagger").labels) | {""}
    for doc in tagger_textcat_nlp.pipe(texts):
        check_encoding(doc)
        check_predictions(doc, tags)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(a=st.text(max_size=40), b=st.text(max_size=40))
def test_random_unicode_pairs(tagger_textcat_nlp, a, b):
    nlp = tagger_textcat_nlp
    doc = nlp(spacy_mlm.make_pair_doc(nlp, a, b))
    check_encoding(doc)
    enc = doc._.mlm_encoding
    b_start = doc[doc._.mlm_pair_start].idx if doc._.mlm_pair_start < len(doc) else len(doc.text)
    # no piece straddles the boundary between the two sides
    assert not np.any((enc.piece_offsets[:, 0] < b_start) & (enc.piece_offsets[:, 1] > b_start))


LONG_DOC_SCRIPT = textwrap.dedent(
    """
    import json, resource, sys
    import spacy, spacy_mlm
    from spacy_mlm.models.encoder import get_hf_model

    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": sys.argv[1], "overlap": 8}})
    nlp.initialize()
    encoder = nlp.get_pipe("mlm_encoder")
    hf = get_hf_model(encoder.model)
    shapes = []
    hf.register_forward_pre_hook(lambda m, args, kwargs: shapes.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True)
    words = "the pond lies in a quiet wood near the town of concord".split()
    doc = nlp.make_doc(" ".join(words[i % len(words)] for i in range(int(sys.argv[2]))))
    encoder(nlp("warm up"))
    shapes.clear()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    doc = encoder(doc)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    enc = doc._.mlm_encoding
    print(json.dumps({
        "tokens": len(doc), "pieces": len(enc.piece_ids), "rows": int(enc.hidden.shape[0]),
        "tokens_without_pieces": int((enc.alignment.lengths() == 0).sum()),
        "max_window": max(s[1] for s in shapes), "max_batch": max(s[0] * s[1] for s in shapes),
        "budget": encoder.model.attrs["max_batch_pieces"], "passes": len(shapes),
        "peak_growth_mb": (after - before) / 1024,
    }))
    """
)


def test_100k_token_doc_is_windowed_and_memory_bounded(tiny_model_dir):
    """100,000 tokens: every token encoded, no forward pass longer than the model's
    64 positions or bigger than max_batch_pieces, and peak RSS grows by far less
    than one full-length attention pass would need (100k^2 scores = 40 GB)."""
    out = subprocess.run(
        [sys.executable, "-c", LONG_DOC_SCRIPT, str(tiny_model_dir), "100000"],
        capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["tokens"] == 100_000 and result["rows"] == result["pieces"] >= 100_000
    assert result["tokens_without_pieces"] == 0
    assert result["max_window"] <= 64
    assert result["max_batch"] <= result["budget"]
    assert result["passes"] > 1
    # the output itself is 100k x 32 floats (12.8 MB); allow generous overhead
    assert result["peak_growth_mb"] < 400, result


@pytest.mark.parametrize("setting, value, message", [
    ("overlap", -1, "the mlm_encoder model's overlap must be at least 0, got -1"),  # at build (issue 32)
    ("trainable_layers", 7, "trainable_layers must be -1 or between 0 and 2, got 7"),  # at load: the depth
    ("window", -5, "the mlm_encoder model's window must be at least 0, got -5"),  # at build (issue 32)
])
def test_odd_encoder_settings_are_errors_that_name_them(tiny_model_dir, setting, value, message):
    """They were ValueErrors from deep inside (the CLI reports those as internal errors)."""
    import spacy

    from spacy_mlm.errors import SpacyMlmError

    nlp = spacy.blank("en")
    with pytest.raises(SpacyMlmError, match=message):
        nlp.add_pipe("mlm_encoder", config={"model": {"path": str(tiny_model_dir), setting: value}})
        nlp.initialize()
        nlp("Anna Berg works in Oslo.")
