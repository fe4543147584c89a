"""Dropout with its mask drawn as 16-bit integers: the same dropout, drawn
more cheaply on CPUs.

torch's CPU dropout draws its mask with `bernoulli_`, a large share of a
MiniLM fine-tuning step in bf16 in torch's profiler. Here the mask comes from
the same generator as 64-bit integers (`random_`), each read as four 16-bit
ones, an element kept where its integer is at or above the rate's threshold:
one integer draw gives the masks of four elements (docs/benchmarks.md:
`bench/train_step.py`'s `mask_ms_*`). The drop rate is rounded to a
multiple of 1/65536, k/65536 (0.1 becomes 0.100006), and the kept elements
are scaled by 65536 / (65536 - k), one over the rounded keep rate, so the
expected output is the input (scaling by 1 / (1 - p) as torch does would
leave it 7e-6 below at p = 0.1, and 1.5 times above at p = 0.99999); a rate
that rounds to 65536/65536 (p >= 1 - 2^-17) drops everything, as p = 1 does.
Runs repeat under `torch.manual_seed` (spaCy's `fix_random_seed`) as before,
with other masks.

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


def _dropped_levels(p: float) -> int:
    """The drop rate `p` rounded to k/65536: k, from 0 to 65536."""
    return round(p * _LEVELS)


def keep_mask(shape: torch.Size, p: float, device: torch.device) -> torch.Tensor:
    """A bool tensor of `shape`, each element True with probability 1 - p
    (p rounded to a multiple of 1/65536), from torch's generator."""
    dropped = _dropped_levels(p)
    if dropped == _LEVELS:  # no 16-bit integer is at or above the threshold, 32768
        return torch.zeros(shape, dtype=torch.bool, device=device)
    n = math.prod(shape)
    words = torch.empty((n + 3) // 4, dtype=torch.int64, device=device).random_(-(2**63), None)
    return words.view(torch.int16)[:n].view(shape) >= _LOWEST + dropped


def dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """`torch.nn.functional.dropout(x, p, training)` with `keep_mask`'s mask on
    CPUs, scaled by one over its rounded keep rate (torch's own on GPUs)."""
    if not training or p == 0.0:
        return x
    if not 0.0 <= p <= 1.0:
        raise SettingError(f"a dropout rate is between 0 and 1, not {p}")
    if x.is_cuda:
        return nn.functional.dropout(x, p, True)
    dropped = _dropped_levels(p)
    if dropped == _LEVELS:
        return x * 0.0
    return x * keep_mask(x.shape, p, x.device) * (_LEVELS / (_LEVELS - dropped))


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
