"""The seam every torch head shares (`models/torch_head.py`): the generic thinc
model, the loss-and-gradient helper, and the listener handing torch heads
torch tensors and every other model thinc arrays."""
import numpy
import pytest
import torch
from thinc.api import Linear

from spacy_mlm.errors import SpacyMlmError
from spacy_mlm.models.listener import build_encoder_listener_v1, read_as_torch
from spacy_mlm.models.torch_head import build_torch_head, loss_and_gradient, torch_module


def test_loss_and_gradient_gives_the_loss_and_its_gradient_for_the_scores_and_leaves_them_alone():
    scores = torch.tensor([[1.0, -2.0], [0.5, 3.0]])
    loss, grad = loss_and_gradient(lambda s: (s ** 2).sum() / 2, scores)
    assert loss == pytest.approx(7.125)
    assert torch.equal(grad, scores)  # d/ds of s^2 / 2
    assert not scores.requires_grad and scores.grad is None


def test_loss_and_gradient_fills_the_losses_own_parameters_and_gives_zeros_for_unused_scores():
    scale = torch.nn.Parameter(torch.tensor(2.0))
    loss, grad = loss_and_gradient(lambda s: scale * 3.0, torch.ones(3))
    assert loss == pytest.approx(6.0)
    assert torch.equal(grad, torch.zeros(3))
    assert float(scale.grad) == 3.0


def _read_rows(model, X, rows):
    return (torch.cat(rows),), {}


def _linear_head():
    torch.manual_seed(0)
    model = build_torch_head("probe_head", torch.nn.Linear, tok2vec=build_encoder_listener_v1(pooling="doc_mean"),
                             read=_read_rows, init=lambda m, X=None, Y=None: m.shims[0].build(in_features=32, out_features=2))
    model.initialize()
    return model


def test_the_head_predicts_with_its_module_and_backprop_gives_the_modules_gradient(encoder_nlp):
    model = _linear_head()
    module = torch_module(model)
    docs = [encoder_nlp("Anna Berg works in Oslo."), encoder_nlp("It rained.")]
    X = torch.cat(model.get_ref("tok2vec").predict(docs))  # (2, 32): each doc's mean piece vector
    expected = module(X).detach()
    assert torch.equal(model.predict(docs), expected)

    scores, backprop = model.begin_update(docs)
    assert torch.equal(scores, expected) and not scores.requires_grad  # the component's loss makes its own leaf
    _, d_scores = loss_and_gradient(lambda s: (s * torch.tensor([1.0, -1.0])).sum(), scores)
    assert backprop(d_scores) == []
    # d/dW of sum(W x + b) * [1, -1]: rows +sum(x) and -sum(x); the bias +n and -n
    total = X.sum(dim=0)
    torch.testing.assert_close(module.weight.grad, torch.stack([total, -total]))
    torch.testing.assert_close(module.bias.grad, torch.tensor([2.0, -2.0]))


def test_only_an_encoder_listener_can_feed_a_torch_head():
    with pytest.raises(SpacyMlmError, match="EncoderListener"):
        read_as_torch(Linear(2, 2))


def test_the_listener_hands_torch_heads_tensors_and_other_models_thinc_arrays(encoder_nlp):
    ours, theirs = build_encoder_listener_v1(pooling="first"), build_encoder_listener_v1(pooling="first")
    read_as_torch(ours)
    doc = encoder_nlp("Anna Berg works in Oslo.")
    (rows,), (array,) = ours.predict([doc]), theirs.predict([doc])
    assert isinstance(rows, torch.Tensor) and isinstance(array, numpy.ndarray)
    assert rows.shape == (len(doc), 32)
    numpy.testing.assert_array_equal(rows.cpu().numpy(), array)


def test_a_module_whose_weights_share_one_buffer_saves_and_loads():
    # as during data-parallel training on one machine's CPUs, where every weight is a view of one
    # shared buffer (engine/shared_memory.py) and rank 0 saves model-best meanwhile: safetensors
    # takes tensors that share a buffer without overlapping
    from spacy_mlm.models.torch_shim import TorchShim

    shim = TorchShim(build=lambda width: torch.nn.Linear(width, 2))
    module = shim.build(width=3)
    buffer = torch.arange(8, dtype=torch.float32)
    with torch.no_grad():
        module.weight.data = buffer[:6].view(2, 3)
        module.bias.data = buffer[6:]
    loaded = TorchShim(build=lambda width: torch.nn.Linear(width, 2)).from_bytes(shim.to_bytes()).module
    assert torch.equal(loaded.weight, buffer[:6].view(2, 3)) and torch.equal(loaded.bias, buffer[6:])
