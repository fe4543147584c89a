"""Dropout with its mask drawn as 16-bit integers: the same dropout, about
half the time on CPUs.

torch's CPU dropout draws its mask with `bernoulli_`, a large share of a
MiniLM fine-tuning step in bf16 in torch's profiler. Here the mask comes from
the same generator as 64-bit integers (`random_`), each read as four 16-bit
ones, an element kept where its integer is at or above the rate's threshold:
a [16, 32, 384] bfloat16 tensor's dropout takes 0.7 ms instead of 1.5 ms
(`bench/train_step.py`'s `mask_ms_*`). The drop rate is rounded to a
multiple of 1/65536 (0.1 becomes 0.100006, so scaling by 1 / (1 - p) as
torch does leaves the expected output 7e-6 below the input, relatively),
and runs repeat under `torch.manual_seed` (spaCy's `fix_random_seed`) as
before, with other masks.

`use_int16_mask_dropout` swaps every `nn.Dropout` of a loaded transformer
(hidden states, and attention probabilities where the family's attention uses
an `nn.Dropout` module; dropout inside torch's fused attention is torch's).
Tensors on a GPU keep torch's fused dropout kernel, faster there than three
kernels.
"""
import math

import torch
from torch import nn

from ..errors import SettingError

# 16-bit integers span 65536 values, from -32768.
_LEVELS = 65536
_LOWEST = -32768


def keep_mask(shape: torch.Size, p: float, device: torch.device) -> torch.Tensor:
    """A bool tensor of `shape`, each element True with probability 1 - p
    (p rounded to a multiple of 1/65536), from torch's generator."""
    n = math.prod(shape)
    words = torch.empty((n + 3) // 4, dtype=torch.int64, device=device).random_(-(2**63), None)
    threshold = _LOWEST + round(p * _LEVELS)
    return words.view(torch.int16)[:n].view(shape) >= threshold


def dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """`torch.nn.functional.dropout(x, p, training)` with `keep_mask`'s mask on
    CPUs (torch's own on GPUs)."""
    if not training or p == 0.0:
        return x
    if not 0.0 <= p <= 1.0:
        raise SettingError(f"a dropout rate is between 0 and 1, not {p}")
    if x.is_cuda:
        return nn.functional.dropout(x, p, True)
    if p == 1.0:
        return x * 0.0
    return x * keep_mask(x.shape, p, x.device) * (1.0 / (1.0 - p))


class Int16MaskDropout(nn.Dropout):
    """`nn.Dropout` (same rate, same place in the model) by `dropout` above;
    never in place, which only saves memory."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)


def use_int16_mask_dropout(model: nn.Module) -> int:
    """Replace each `nn.Dropout` module of `model` (exactly that class, not a
    family's own dropout) by an `Int16MaskDropout` of the same rate; returns
    how many. The modules hold no weights, so saved models are unchanged."""
    swaps = [(parent, name, child) for parent in model.modules() for name, child in parent.named_children()
             if type(child) is nn.Dropout]
    for parent, name, child in swaps:
        setattr(parent, name, Int16MaskDropout(child.p))
    return len(swaps)
