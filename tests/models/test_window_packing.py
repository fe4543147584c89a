"""Packed training passes (models/window_packing.py): several windows share a row,
each attending only to itself. Verified per model; where verified, a training
pass gives every window what it gets alone, in its outputs and gradients."""
import logging

import pytest
import spacy
import torch
from transformers import AutoModel, AutoTokenizer

from spacy_mlm import get_hf_model
from spacy_mlm.models import window_packing
from spacy_mlm.testing import SAMPLE_TEXT, make_tiny_family

# BERT with and without a pooler, RoBERTa and MPNet (positions after the padding id), ELECTRA
PACKED = ["bert", "bert-pooler", "roberta", "electra", "mpnet"]
# DistilBERT takes no position ids; DeBERTa-v2, ModernBERT and ALBERT read no 3-d mask as given
KEPT = ["distilbert", "deberta-v2", "modernbert", "albert"]


def model_dir(family, tmp_path):
    if family != "bert-pooler":
        return make_tiny_family(family, tmp_path / family)
    source = make_tiny_family("bert", tmp_path / "bert")
    torch.manual_seed(0)
    model = AutoModel.from_pretrained(str(source))  # a bare BertModel: a pooler, randomly initialised
    model.save_pretrained(str(tmp_path / family))
    AutoTokenizer.from_pretrained(str(source)).save_pretrained(str(tmp_path / family))
    return tmp_path / family


def encoder_pipeline(family, tmp_path):
    spacy.util.fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(model_dir(family, tmp_path))}})
    nlp.initialize()
    model = nlp.get_pipe("mlm_encoder").model
    for module in get_hf_model(model).modules():  # dropout off: a training pass is deterministic
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        if hasattr(module, "dropout_prob"):
            module.dropout_prob = 0.0
    return nlp, model


def masks_seen(model):
    """The attention masks' dimensions of each forward pass of the transformer."""
    seen = []
    get_hf_model(model).register_forward_pre_hook(
        lambda _, args, kwargs: seen.append(kwargs["attention_mask"].dim()), with_kwargs=True)
    return seen


def training_pass(model, docs, row_length):
    """(piece rows, [CLS] rows, pooled rows, parameter gradients) of one training pass."""
    model.attrs["pack_row_length"] = row_length
    hf_model = get_hf_model(model)
    hf_model.zero_grad()
    batch, backprop = model(docs, is_train=True)
    weights = torch.linspace(-1, 1, batch.leaves[0].shape[1])
    loss = sum((rows * weights).pow(2).sum() for rows in batch.hidden) + (batch.cls * weights).sum()
    if batch.pooled is not None:
        loss = loss + batch.pooled.sum()
    loss.backward()
    backprop(batch)
    # the word embeddings' gradient is sparse (models/row_adamw.py)
    grads = {name: p.grad.to_dense() if p.grad.is_sparse else p.grad.clone()
             for name, p in hf_model.named_parameters() if p.grad is not None}
    pooled = None if batch.pooled is None else batch.pooled.detach()
    return [h.detach() for h in batch.hidden], batch.cls.detach(), pooled, grads


@pytest.mark.numerics  # two computations summing in other orders: run again on AVX2 kernels by `make test`
@pytest.mark.parametrize("family", PACKED)
def test_a_packed_training_pass_gives_each_window_its_padded_outputs_and_gradients(family, tmp_path):
    nlp, model = encoder_pipeline(family, tmp_path)
    assert window_packing.packing_verified(get_hf_model(model))
    docs = [nlp.make_doc(text) for text in SAMPLE_TEXT[:12]]
    seen = masks_seen(model)
    alone = training_pass(model, docs, 0)
    assert set(seen) == {2}  # length groups, one window a row
    seen.clear()
    together = training_pass(model, docs, 32)
    assert set(seen) == {3}  # windows side by side under a block-diagonal mask
    for a, b in zip(alone[0], together[0]):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-4)
    assert torch.allclose(alone[1], together[1], atol=1e-5, rtol=1e-4)
    assert (alone[2] is None) == (family != "bert-pooler")
    if alone[2] is not None:  # the pooler reads each window's first row, not the row's
        assert torch.allclose(alone[2], together[2], atol=1e-5, rtol=1e-4)
    assert alone[3].keys() == together[3].keys()
    # float32 sums in another order, at the scale of the model's gradients: a key bias has a zero
    # gradient in exact arithmetic (softmax ignores a constant added to every key), so its own
    # scale is rounding noise (issue 47)
    scale = max(float(grad.abs().max()) for grad in alone[3].values())
    for name, grad in alone[3].items():
        assert torch.allclose(grad, together[3][name], atol=1e-5 * scale, rtol=1e-3), name


@pytest.mark.parametrize("family", KEPT)
def test_a_family_that_fails_the_probe_trains_one_window_a_row(family, tmp_path, caplog):
    nlp, model = encoder_pipeline(family, tmp_path)
    with caplog.at_level(logging.INFO, logger="spacy_mlm.models.window_packing"):
        assert not window_packing.packing_verified(get_hf_model(model))
    assert "keep one window a row" in caplog.text
    seen = masks_seen(model)
    training_pass(model, [nlp.make_doc(text) for text in SAMPLE_TEXT[:6]], 32)
    assert seen and set(seen) == {2}
    assert get_hf_model(model).training  # the probe's eval mode is undone


def test_prediction_keeps_one_window_a_row(tmp_path):
    """Packing is for training passes: a prediction runs the sorted length
    groups, whose padding is already small, with the bits it had."""
    nlp, model = encoder_pipeline("bert", tmp_path)
    seen = masks_seen(model)
    list(nlp.pipe(SAMPLE_TEXT[:8]))
    assert seen and set(seen) == {2}
