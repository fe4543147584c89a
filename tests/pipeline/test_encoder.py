import numpy as np
import pytest
import spacy
import torch
from transformers import AutoModel, AutoTokenizer

import spacy_mlm
from spacy_mlm.models.encoder import get_hf_model
from spacy_mlm.errors import ModelLoadError, NotInitializedError

TEXTS = ["Anna Berg works for the Northwind Company in Oslo.", "The river bank was muddy.", ""]


def make_nlp(path, **model_cfg):
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(path), **model_cfg}})
    nlp.initialize()
    return nlp


def test_round_trip_to_disk_and_bytes(tmp_path, encoder_nlp):
    docs = list(encoder_nlp.pipe(TEXTS))
    encoder_nlp.to_disk(tmp_path / "pipe")
    loaded = spacy.load(tmp_path / "pipe")
    for doc, again in zip(docs, loaded.pipe(TEXTS)):
        np.testing.assert_array_equal(doc._.mlm_encoding.hidden, again._.mlm_encoding.hidden)
        np.testing.assert_array_equal(doc._.mlm_encoding.cls, again._.mlm_encoding.cls)
    from_bytes = spacy.blank("en")
    from_bytes.add_pipe("mlm_encoder", config={"model": {"path": "/nonexistent"}})
    from_bytes.get_pipe("mlm_encoder").from_bytes(encoder_nlp.get_pipe("mlm_encoder").to_bytes())
    np.testing.assert_array_equal(from_bytes(TEXTS[0])._.mlm_encoding.hidden, docs[0]._.mlm_encoding.hidden)


def test_export_loads_with_plain_transformers(tmp_path, encoder_nlp):
    from typer.testing import CliRunner

    from spacy_mlm.cli import app

    encoder_nlp.to_disk(tmp_path / "pipe")
    result = CliRunner().invoke(app, ["export-encoder", str(tmp_path / "pipe"), str(tmp_path / "hf")])
    assert result.exit_code == 0, result.output
    model = AutoModel.from_pretrained(str(tmp_path / "hf")).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(tmp_path / "hf"))
    with torch.no_grad():
        ours = encoder_nlp(TEXTS[0])._.mlm_encoding
        theirs = model(**tokenizer(TEXTS[0], return_tensors="pt")).last_hidden_state[0]
    np.testing.assert_allclose(ours.hidden, theirs[1:-1].numpy(), atol=1e-5)
    np.testing.assert_allclose(ours.cls, theirs[0].numpy(), atol=1e-5)


def test_long_document_is_windowed_not_truncated(tiny_model_dir):
    nlp = make_nlp(tiny_model_dir, overlap=16)
    text = " ".join(["the pond lies in a quiet wood near the town"] * 30)
    doc = nlp(text)
    enc = doc._.mlm_encoding
    assert len(enc.piece_ids) > 200  # far beyond the 64 positions
    assert enc.hidden.shape[0] == len(enc.piece_ids)
    assert np.all(enc.alignment.lengths() > 0)
    # the pieces owned by the first window equal running that window alone
    hf = get_hf_model(nlp.get_pipe("mlm_encoder").model)
    tok = nlp.get_pipe("mlm_encoder").model.attrs["tokenizer"]
    first = np.concatenate([tok.prefix, enc.piece_ids[: tok.content_length], tok.suffix])
    with torch.no_grad():
        out = hf(torch.from_numpy(first)[None]).last_hidden_state[0, 1:-1].numpy()
    n_owned = tok.content_length - tok.overlap // 2 - 1
    np.testing.assert_allclose(enc.hidden[:n_owned], out[:n_owned], atol=1e-5)
    assert not np.allclose(enc.hidden[tok.content_length + 5], out[5], atol=1e-3)


def test_sentence_pair_template_and_segments(encoder_nlp):
    doc = spacy_mlm.make_pair_doc(encoder_nlp, "A man plays.", "Nobody plays music.")
    assert doc._.mlm_pair_start == 4 and doc.text == "A man plays. Nobody plays music."
    doc = encoder_nlp(doc)
    tok = encoder_nlp.get_pipe("mlm_encoder").model.attrs["tokenizer"]
    pieces = tok([doc])[0]
    window = pieces.windows[0]
    hf = tok.hf
    assert window.input_ids[0] == hf.cls_token_id and window.input_ids[-1] == hf.sep_token_id
    seps = np.flatnonzero(window.input_ids == hf.sep_token_id)
    assert len(seps) == 2
    assert np.all(window.token_type_ids[: seps[0] + 1] == 0) and np.all(window.token_type_ids[seps[0] + 1 :] == 1)
    # pieces of side B align to side B's tokens, specials to none
    enc = doc._.mlm_encoding
    assert [t.text for t in doc[4:]] == ["Nobody", "plays", "music", "."]
    assert all(len(enc.alignment.pieces_of(i)) > 0 for i in range(len(doc)))
    assert len(enc.piece_ids) == len(window.input_ids) - 3


def test_empty_side_of_a_pair(encoder_nlp):
    doc = encoder_nlp(spacy_mlm.make_pair_doc(encoder_nlp, "", "The cat."))
    assert doc._.mlm_pair_start == 0
    assert doc._.mlm_encoding.pieces == ["the", "cat", "."]
    doc = encoder_nlp(spacy_mlm.make_pair_doc(encoder_nlp, "The cat.", ""))
    assert doc._.mlm_pair_start == 3 and doc._.mlm_encoding.pieces == ["the", "cat", "."]


def test_missing_and_broken_model_dirs(tmp_path):
    with pytest.raises(ModelLoadError, match="no such directory"):
        make_nlp(tmp_path / "missing")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{not json")
    with pytest.raises(ModelLoadError, match="not valid JSON"):
        make_nlp(tmp_path / "broken")


def test_using_before_initialize_is_a_clear_error(tiny_model_dir):
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(tiny_model_dir)}})
    with pytest.raises(NotInitializedError, match="initialize"):
        nlp("text")


def test_all_layers_on_request(tiny_model_dir):
    nlp = make_nlp(tiny_model_dir, output_hidden_states=True)
    enc = nlp("The cat sleeps.")._.mlm_encoding
    assert enc.layers.shape == (3, len(enc.piece_ids), enc.width)
    np.testing.assert_allclose(enc.layers[-1], enc.hidden, atol=1e-6)
    assert enc.token_vectors("first", layer=0).shape == (4, enc.width)


def test_bf16_on_a_cpu_where_it_is_slow_warns_once_naming_the_cpu_and_the_cost(tiny_model_dir, monkeypatch):
    import warnings

    from spacy_mlm.models import encoder as encoder_module
    from spacy_mlm.util.machine import cpu_model, warn_slow_bf16

    nlp = make_nlp(tiny_model_dir, precision="bf16")
    monkeypatch.setattr(encoder_module, "cpu_bf16_is_faster", lambda: False)
    warn_slow_bf16.cache_clear()  # an earlier test on such a CPU has had its warning
    with pytest.warns(UserWarning, match="bfloat16") as seen:
        nlp(TEXTS[0])
    assert f"this CPU ({cpu_model()})" in str(seen[0].message) and "docs/speed.md" in str(seen[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nlp(TEXTS[1])  # once: not at every batch


def test_bf16_is_close_to_float32(tiny_model_dir, encoder_nlp):
    nlp = make_nlp(tiny_model_dir, precision="bf16")
    fast = nlp(TEXTS[0])._.mlm_encoding.hidden
    exact = encoder_nlp(TEXTS[0])._.mlm_encoding.hidden
    assert fast.dtype == np.float32
    assert not np.array_equal(fast, exact)
    np.testing.assert_allclose(fast, exact, atol=0.15)
    cosines = (fast * exact).sum(1) / (np.linalg.norm(fast, axis=1) * np.linalg.norm(exact, axis=1))
    assert cosines.min() > 0.99
