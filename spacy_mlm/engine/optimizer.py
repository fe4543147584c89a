"""The optimizer and schedule of every run the engine trains: AdamW without
decay on biases and norms, warmup then a linear decline to zero.

`warmup_linear_rate` is also the schedule of `spacy train`'s configs
(`training/schedules.py`, thinc's `warmup_linear.v1`) and equals Hugging
Face's `get_linear_schedule_with_warmup`, which pretraining used before:
the same numbers in the same float operations, so the rates are equal bit
for bit and old checkpoints' scheduler states load.

Why not `models/torch_stepper.TorchStepper`, the optimizer of our components
in spaCy's loop: it follows a thinc optimizer (its rate from thinc's
schedule, L2 on every weight, the clip riding on the fused step's
`grad_scale`, which rounds otherwise), and its moments live in each module's
shim. Pretraining's checkpoints hold this AdamW's state (two groups:
decayed and not), so the runs it resumes, and its results, stay the same.
"""
from typing import Iterable

import torch


def warmup_linear_rate(step: int, initial_rate: float, warmup_steps: int, total_steps: int) -> float:
    """Linear warmup from 0 to `initial_rate` over `warmup_steps`, then a linear
    decline to 0 at `total_steps`."""
    if step < warmup_steps:
        return initial_rate * step / max(1, warmup_steps)
    return initial_rate * max(0.0, (total_steps - step) / max(1.0, total_steps - warmup_steps))


def adamw(parameters: Iterable[torch.nn.Parameter], settings) -> torch.optim.AdamW:
    """AdamW (fused: one pass over the weights where foreach makes ~6) over the
    trainable `parameters`, `settings["weight_decay"]` on matrices only (not on
    biases and norms); `settings`: learning_rate, beta1, beta2, eps, weight_decay."""
    params = [p for p in parameters if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": settings["weight_decay"]},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=settings["learning_rate"], betas=(settings["beta1"], settings["beta2"]),
                             eps=settings["eps"], fused=True)


def warmup_linear(optimizer: torch.optim.Optimizer, warmup_steps: int, total_steps: int):
    """The optimizer's rate times `warmup_linear_rate` at each step."""
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: warmup_linear_rate(step, 1.0, warmup_steps, total_steps))
