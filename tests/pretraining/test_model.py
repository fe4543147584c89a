"""The masked-LM model as pretraining gets it from models/hf.py and gives it back."""
import logging

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoModelForMaskedLM, AutoTokenizer

from spacy_mlm.models.hf import load_mlm_model, save_mlm_model
from spacy_mlm.engine.checkpoint import save_checkpoint
from spacy_mlm.pretraining.objectives import set_output_bias


def test_tiny_model_head_is_loaded(tiny_model_dir):
    loaded = load_mlm_model(tiny_model_dir)
    assert not loaded.head_initialised and loaded.pooler == {}  # a BertForMaskedLM saves no pooler
    reference = AutoModelForMaskedLM.from_pretrained(tiny_model_dir)
    torch.testing.assert_close(loaded.model.cls.predictions.transform.dense.weight,
                               reference.cls.predictions.transform.dense.weight)


def test_minilm_without_head_is_initialised_and_says_so(minilm_path, caplog):
    with caplog.at_level(logging.WARNING):
        loaded = load_mlm_model(minilm_path)
    assert loaded.head_initialised
    assert "has no MLM head" in caplog.text
    model = loaded.model
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight
    backbone = AutoModel.from_pretrained(minilm_path)
    torch.testing.assert_close(model.bert.encoder.layer[0].attention.self.query.weight,
                               backbone.encoder.layer[0].attention.self.query.weight)


def test_the_source_pooler_survives_pretraining_outputs_and_checkpoints(tiny_model_dir, tmp_path):
    """A bare encoder with a pooler (as MiniLM) in, an MLM model (no pooler) trained:
    the final model and every checkpoint give AutoModel the source's own pooler."""
    source = tmp_path / "source"
    torch.manual_seed(3)
    AutoModel.from_pretrained(str(tiny_model_dir)).save_pretrained(str(source))
    AutoTokenizer.from_pretrained(str(tiny_model_dir)).save_pretrained(str(source))
    expected = AutoModel.from_pretrained(str(source)).pooler.dense.weight
    loaded = load_mlm_model(source)
    assert loaded.head_initialised and set(loaded.pooler) == {"bert.pooler.dense.weight", "bert.pooler.dense.bias"}
    assert not hasattr(loaded.model, "kept_pooler") and "pooler" not in dict(loaded.model.bert.named_children())
    save_mlm_model(loaded, tmp_path / "final")
    save_checkpoint(tmp_path / "checkpoints", 1, lambda path: save_mlm_model(loaded, path), {"step": 1}, keep=1)
    for out in (tmp_path / "final", tmp_path / "checkpoints" / "step-00000001" / "model"):
        torch.testing.assert_close(AutoModel.from_pretrained(str(out)).pooler.dense.weight, expected, rtol=0, atol=0)
        reloaded = load_mlm_model(out)  # and AutoModelForMaskedLM still loads it whole
        assert not reloaded.head_initialised and set(reloaded.pooler) == set(loaded.pooler)


def test_output_bias_starts_at_log_unigram(tiny_model_dir):
    loaded = load_mlm_model(tiny_model_dir)
    probs = np.zeros(len(loaded.tokenizer))
    probs[10], probs[11] = 0.75, 0.25
    set_output_bias(loaded.model, probs)
    bias = loaded.model.get_output_embeddings().bias
    assert float((bias[10] - bias[11]).detach()) == pytest.approx(np.log(3), rel=1e-3)
    assert float(bias[10].detach()) > float(bias[12].detach())
