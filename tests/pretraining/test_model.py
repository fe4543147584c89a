import logging

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoModelForMaskedLM, AutoTokenizer

from spacy_mlm.errors import ModelLoadError
from spacy_mlm.pretraining.checkpoint import save_checkpoint
from spacy_mlm.pretraining.model import load_mlm_model, save_mlm_model, set_output_bias


def test_tiny_model_head_is_loaded(tiny_model_dir):
    model, tokenizer, head_missing = load_mlm_model(tiny_model_dir)
    assert not head_missing
    reference = AutoModelForMaskedLM.from_pretrained(tiny_model_dir)
    torch.testing.assert_close(model.cls.predictions.transform.dense.weight, reference.cls.predictions.transform.dense.weight)


def test_minilm_without_head_is_initialised_and_says_so(minilm_path, caplog):
    with caplog.at_level(logging.WARNING):
        model, tokenizer, head_missing = load_mlm_model(minilm_path)
    assert head_missing
    assert "has no MLM head" in caplog.text
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
    model, tokenizer, head_missing = load_mlm_model(source)
    assert head_missing and set(model.kept_pooler) == {"bert.pooler.dense.weight", "bert.pooler.dense.bias"}
    save_mlm_model(model, tokenizer, tmp_path / "final")
    save_checkpoint(tmp_path / "checkpoints", 1, model, tokenizer, {"step": 1}, keep=1)
    for out in (tmp_path / "final", tmp_path / "checkpoints" / "step-00000001" / "model"):
        torch.testing.assert_close(AutoModel.from_pretrained(str(out)).pooler.dense.weight, expected, rtol=0, atol=0)
        reloaded, _, head_missing = load_mlm_model(out)  # and AutoModelForMaskedLM still loads it whole
        assert not head_missing and set(reloaded.kept_pooler) == set(model.kept_pooler)


def test_output_bias_starts_at_log_unigram(tiny_model_dir):
    model, tokenizer, _ = load_mlm_model(tiny_model_dir)
    probs = np.zeros(len(tokenizer))
    probs[10], probs[11] = 0.75, 0.25
    set_output_bias(model, probs)
    bias = model.get_output_embeddings().bias
    assert float((bias[10] - bias[11]).detach()) == pytest.approx(np.log(3), rel=1e-3)
    assert float(bias[10]) > float(bias[12])


@pytest.mark.parametrize("case", ["missing", "file", "no_config", "no_weights"])
def test_bad_directories(tmp_path, tiny_model_dir, case):
    path = tmp_path / "m"
    if case == "file":
        path.write_text("x")
    elif case == "no_config":
        path.mkdir()
    elif case == "no_weights":
        path.mkdir()
        (path / "config.json").write_text((tiny_model_dir / "config.json").read_text())
    with pytest.raises(ModelLoadError):
        load_mlm_model(path)


def test_truncated_weights(tmp_path, tiny_model_dir):
    import shutil

    path = tmp_path / "m"
    shutil.copytree(tiny_model_dir, path)
    data = (path / "model.safetensors").read_bytes()
    (path / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelLoadError, match="cannot load"):
        load_mlm_model(path)
