"""The encoder trained under gradient checkpointing (models/encoder.py): the
layers that backward runs again run the plain attention of the forward pass
(models/attention.py), so with dropout the gradients are those of a run
without checkpointing."""
import pytest
import spacy
import torch

import spacy_mlm  # noqa: F401
from spacy_mlm.models import attention
from spacy_mlm.models.encoder import get_hf_model

TEXTS = ["a cat sat on the mat", "the dog ran far away from here", "birds fly"]


def _gradients(model, docs, seed):
    """The transformer's gradients from one training pass with dropout, from `seed`."""
    hf = get_hf_model(model)
    hf.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    batch, backprop = model.begin_update(docs)
    weights = torch.linspace(-1.0, 1.0, batch.hidden[0].shape[1])
    sum((hidden * weights).sum() for hidden in batch.hidden).backward()
    backprop(batch)
    return {name: p.grad.to_dense().clone() for name, p in hf.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_gradients_under_checkpointing_equal_those_without(tiny_model_dir, use_reentrant):
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(tiny_model_dir)}})
    nlp.initialize()
    model = nlp.get_pipe("mlm_encoder").model
    hf = get_hf_model(model)
    assert hf.config.hidden_dropout_prob > 0 and hf.config.attention_probs_dropout_prob > 0
    docs = [nlp.make_doc(text) for text in TEXTS]
    plain = _gradients(model, docs, seed=0)
    assert attention._VERIFIED[hf], "the tiny BERT trains with its plain attention"
    hf.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": use_reentrant})
    checkpointed = _gradients(model, docs, seed=0)
    assert checkpointed.keys() == plain.keys()
    # the recomputation repeats the same fp32 operations: equal up to fp32 rounding of the sums
    scale = max(float(g.abs().max()) for g in plain.values())
    for name, grad in plain.items():
        torch.testing.assert_close(checkpointed[name], grad, rtol=1e-4, atol=1e-5 * scale, msg=name)
