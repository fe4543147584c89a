import pytest
import torch
from thinc.api import Adam, RAdam, registry

from spacy_mlm.errors import SettingError, SpacyMlmError
from spacy_mlm.models.torch_stepper import TorchStepper, layer_lr_scale, layer_lr_scales, parameter_depth


@pytest.mark.parametrize(
    "name,depth",
    [
        ("embeddings.word_embeddings.weight", 0),
        ("roberta.embeddings.position_embeddings.weight", 0),
        ("encoder.layer.0.attention.self.query.weight", 1),
        ("encoder.layer.11.output.dense.bias", 12),
        ("transformer.layer.3.ffn.lin1.weight", 4),
        ("pooler.dense.weight", None),
        ("W", None),
    ],
)
def test_parameter_depth(name, depth):
    assert parameter_depth(name) == depth


def test_layer_scales_decay_from_the_top():
    assert layer_lr_scale(None, 6, 0.8) == 1.0
    assert layer_lr_scale(6, 6, 0.8) == pytest.approx(0.8)
    assert layer_lr_scale(1, 6, 0.8) == pytest.approx(0.8**6)
    assert layer_lr_scale(0, 6, 0.8) == pytest.approx(0.8**7)
    with pytest.raises(SettingError, match="num_layers"):
        layer_lr_scale(7, 6, 0.8)


class Stack(torch.nn.Module):
    """Parameter names like a transformer's: embeddings, encoder.layer.i, a head."""

    def __init__(self, n_layers=2):
        super().__init__()
        self.embeddings = torch.nn.ModuleDict({"word": torch.nn.Linear(3, 3)})
        self.encoder = torch.nn.ModuleDict({"layer": torch.nn.ModuleList(torch.nn.Linear(3, 3) for _ in range(n_layers))})
        self.head = torch.nn.Linear(3, 1)

    def forward(self, x):
        x = self.embeddings["word"](x)
        for layer in self.encoder["layer"]:
            x = layer(x)
        return self.head(x).sum()


def first_steps(module, optimizer, scale_grad=1.0):
    """|change| of each parameter after one torch_step from a backward pass."""
    before = {n: p.detach().clone() for n, p in module.named_parameters()}
    (module(torch.ones(2, 3)) * scale_grad).backward()
    TorchStepper().step(module, optimizer)
    return {n: float((p.detach() - before[n]).abs().max()) for n, p in module.named_parameters()}


def test_layer_scales_come_from_the_module_depth():
    names = ["embeddings.word.weight", "encoder.layer.0.weight", "encoder.layer.1.weight", "head.weight"]
    assert layer_lr_scales(names, 0.5) == pytest.approx([0.125, 0.25, 0.5, 1.0])


def test_torch_step_scales_per_layer_and_clears_gradients():
    """Adam's first step moves each weight by lr * scale whatever the gradient's size."""
    torch.manual_seed(0)
    module = Stack()
    optimizer = registry.resolve(
        {"o": {"@optimizers": "spacy_mlm.LayerDecayAdam.v2", "learn_rate": 0.01, "layer_decay": 0.5, "grad_clip": 0.0,
               "L2": 0.0}}
    )["o"]
    steps = first_steps(module, optimizer)
    assert steps["head.weight"] == pytest.approx(0.01, rel=1e-3)
    assert steps["encoder.layer.1.weight"] == pytest.approx(0.005, rel=1e-3)
    assert steps["encoder.layer.0.weight"] == pytest.approx(0.0025, rel=1e-3)
    assert steps["embeddings.word.weight"] == pytest.approx(0.00125, rel=1e-3)
    assert all(p.grad is None for p in module.parameters())
    with pytest.raises(SettingError, match="layer_decay"):
        registry.resolve({"o": {"@optimizers": "spacy_mlm.LayerDecayAdam.v2", "layer_decay": 1.5}})


def test_torch_step_follows_the_schedule_and_weight_decay():
    torch.manual_seed(0)
    module = torch.nn.Linear(3, 1)
    optimizer = Adam(learn_rate=[0.1, 0.01], L2=0.0, grad_clip=0.0, use_averages=False)
    stepper = TorchStepper()
    for expected_lr in (0.1, 0.01):
        before = module.weight.detach().clone()
        module(torch.ones(1, 3)).sum().backward()
        stepper.step(module, optimizer)
        optimizer.step_schedules()
        # every gradient is 1 here, so each Adam step is exactly the learning rate
        assert float((module.weight.detach() - before).abs().max()) == pytest.approx(expected_lr, rel=1e-4)
    # decoupled weight decay with a zero gradient: w <- w - lr * L2 * w
    module = torch.nn.Linear(3, 1, bias=False)
    optimizer = Adam(learn_rate=0.1, L2=0.5, grad_clip=0.0, use_averages=False)
    w = module.weight.detach().clone()
    module.weight.grad = torch.zeros_like(w)
    TorchStepper().step(module, optimizer)
    torch.testing.assert_close(module.weight.detach(), w * (1 - 0.1 * 0.5))


def test_torch_step_clips_the_global_norm():
    """grad_clip bounds the norm of all the module's gradients together, as
    Hugging Face's max_grad_norm (thinc clips each parameter on its own)."""
    module = torch.nn.Linear(4, 1, bias=False)
    module.weight.grad = torch.full_like(module.weight, 10.0)
    stepper = TorchStepper()
    stepper.step(module, Adam(learn_rate=0.0, grad_clip=1.0, use_averages=False))
    state = next(iter(stepper._torch.state.values()))
    # Adam's first moment after one step is (1 - b1) * clipped gradient
    torch.testing.assert_close(state["exp_avg"].norm(), torch.tensor(0.1), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("scale", [10.0, 1e-3])  # clipped, and under the bound
def test_torch_step_with_clipping_is_clip_grad_norm_then_adamw(scale):
    """The clip folded into the fused step updates as clip_grad_norm_ followed
    by AdamW does, up to rounding, and leaves no scale behind for later steps."""
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 3))
    reference = [p.detach().clone().requires_grad_(True) for p in module.parameters()]
    torch_adamw = torch.optim.AdamW(reference, lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
    stepper = TorchStepper()
    optimizer = Adam(learn_rate=0.01, beta1=0.9, beta2=0.999, eps=1e-8, L2=0.1, L2_is_weight_decay=True,
                     grad_clip=1.0, use_averages=False)
    for _ in range(3):
        grads = [torch.randn_like(p) * scale for p in reference]
        for p, q, g in zip(module.parameters(), reference, grads):
            p.grad, q.grad = g.clone(), g.clone()
        stepper.step(module, optimizer)
        torch.nn.utils.clip_grad_norm_(reference, 1.0)
        torch_adamw.step()
        assert not hasattr(stepper._torch, "grad_scale")
    for p, q in zip(module.parameters(), reference):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-5, atol=1e-7)


def test_radam_is_refused_for_torch_parameters():
    module = torch.nn.Linear(2, 1)
    module(torch.ones(1, 2)).sum().backward()
    with pytest.raises(SpacyMlmError, match="Adam"):
        TorchStepper().step(module, RAdam(learn_rate=0.01))
