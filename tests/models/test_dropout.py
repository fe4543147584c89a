"""Dropout with 16-bit integer masks (models/dropout.py): the rate, the scale,
the gradient, repeatable draws, and the swap in a loaded transformer."""
import pytest
import torch
from torch import nn

from spacy_mlm.errors import SettingError
from spacy_mlm.models.dropout import Int16MaskDropout, dropout, keep_mask, use_int16_mask_dropout
from spacy_mlm.models.hf import load_backbone


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_keep_mask_keeps_one_minus_p(p):
    torch.manual_seed(0)
    keep = keep_mask(torch.Size([200, 1000]), p, torch.device("cpu"))
    assert keep.dtype == torch.bool and keep.shape == (200, 1000)
    # 200,000 draws: the kept share's standard deviation is under 0.0012
    assert abs(keep.float().mean().item() - (1 - p)) < 0.005


def test_keep_mask_has_no_pattern_across_an_int64():
    """The four 16-bit integers of each 64-bit draw keep alike: none of them
    is biased (a draw of [0, 2**63) alone would keep the fourth always)."""
    torch.manual_seed(1)
    keep = keep_mask(torch.Size([400_000]), 0.5, torch.device("cpu")).view(-1, 4).float().mean(0)
    assert torch.all((keep - 0.5).abs() < 0.01), keep


def test_keep_mask_odd_sizes():
    for shape in [(1,), (3,), (5, 7), (2, 3, 5)]:
        assert keep_mask(torch.Size(shape), 0.3, torch.device("cpu")).shape == shape


def test_dropout_scales_kept_values_and_zeroes_the_rest():
    torch.manual_seed(0)
    x = torch.rand(64, 50) + 1.0
    out = dropout(x, 0.2, True)
    kept = out != 0
    assert torch.allclose(out[kept], x[kept] / 0.8)
    assert 0.7 < kept.float().mean().item() < 0.9


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dropout_gradient_is_the_mask_times_the_scale(dtype):
    torch.manual_seed(0)
    x = (torch.rand(16, 30) + 1.0).to(dtype).requires_grad_(True)
    out = dropout(x, 0.25, True)
    assert out.dtype == dtype
    out.backward(torch.ones_like(out))
    expected = (out != 0).to(dtype) / 0.75
    assert torch.equal(x.grad, expected.to(dtype))


def test_dropout_repeats_under_the_torch_seed_and_differs_across_seeds():
    x = torch.ones(1000)
    torch.manual_seed(3)
    first = dropout(x, 0.5, True)
    torch.manual_seed(3)
    assert torch.equal(first, dropout(x, 0.5, True))
    torch.manual_seed(4)
    assert not torch.equal(first, dropout(x, 0.5, True))


def test_dropout_edges():
    x = torch.randn(8, 4)
    assert dropout(x, 0.5, False) is x
    assert dropout(x, 0.0, True) is x
    assert torch.equal(dropout(x, 1.0, True), torch.zeros_like(x))
    with pytest.raises(SettingError, match="between 0 and 1, not 1.5"):
        dropout(x, 1.5, True)


def test_module_follows_train_and_eval():
    layer = Int16MaskDropout(0.5)
    x = torch.ones(1000)
    assert torch.equal(layer.eval()(x), x)
    assert (layer.train()(x) == 0).any()


def test_loaded_transformer_gets_int16_dropout_and_saves_the_same_weights(tiny_model_dir):
    model, _ = load_backbone(tiny_model_dir)
    kinds = {type(m) for m in model.modules() if isinstance(m, nn.Dropout)}
    assert kinds == {Int16MaskDropout}
    rates = sorted({m.p for m in model.modules() if isinstance(m, nn.Dropout)})
    assert rates == [0.1]  # the tiny BERT's hidden and attention dropout
    plain = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.3), nn.Sequential(nn.Dropout(0.2)))
    before = {k: v.clone() for k, v in plain.state_dict().items()}
    assert use_int16_mask_dropout(plain) == 2
    assert [type(m) for m in plain.modules()].count(Int16MaskDropout) == 2
    assert plain[2][0].p == 0.2
    assert all(torch.equal(before[k], v) for k, v in plain.state_dict().items())


@pytest.mark.cuda
def test_cuda_tensors_keep_torch_dropout(torch_cuda):
    torch.manual_seed(0)
    x = torch.ones(10_000, device=torch_cuda)
    out = dropout(x, 0.3, True)
    assert out.is_cuda and 0.65 < (out != 0).float().mean().item() < 0.75


@pytest.mark.parametrize("p", [1 - 2**-17, 0.999995, 1.0])
def test_a_rate_that_rounds_to_one_drops_everything(p):
    """p >= 1 - 2^-17 rounds to 65536/65536: nothing is kept (a threshold of
    32768 past every 16-bit integer once kept everything, scaled by 1 / (1 - p))."""
    torch.manual_seed(0)
    x = torch.ones(100_000)
    assert not keep_mask(x.shape, p, x.device).any()
    assert torch.equal(dropout(x, p, True), torch.zeros_like(x))


@pytest.mark.parametrize("p", [0.1, 0.99999])
def test_kept_values_are_scaled_by_one_over_the_rounded_keep_rate(p):
    """k = round(p * 65536) levels dropped: the kept values are scaled by
    65536 / (65536 - k), so the expected output is the input (1 / (1 - p)
    would be 1.5 times too much at p = 0.99999, where one level in 65536 is
    kept). Two fp32 products: within 3 ulps of the exact scale."""
    torch.manual_seed(0)
    x = torch.rand(1_000_000) + 1.0
    out = dropout(x, p, True)
    kept = out != 0
    assert kept.any()
    k = round(p * 65536)
    assert torch.allclose(out[kept].double(), x[kept].double() * 65536 / (65536 - k), rtol=4e-7, atol=0)
