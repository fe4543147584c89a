"""The optimizer settings and schedule of every run the engine trains: AdamW
without decay on biases and norms, warmup then a linear decline to zero.

`warmup_linear_rate` is also the schedule of `spacy train`'s configs
(`training/schedules.py`, thinc's `warmup_linear.v1`) and equals Hugging
Face's `get_linear_schedule_with_warmup`, which pretraining used before:
the same numbers in the same float operations, so the rates are equal bit
for bit.

The step itself is `models/torch_stepper.TorchStepper`'s, the optimizer of
our components in spaCy's loop too (fused AdamW). `step_settings` asks it for
what the engine's runs had when they stepped torch's AdamW under a LambdaLR:
the rate as LambdaLR computes it (the initial rate times the schedule's factor),
decay on matrices only, and the clip as `clip_grad_norm_` rounds it, so
pretraining keeps its bits and resumes checkpoints written before.
"""
from typing import Any, Dict

from ..models.torch_stepper import StepSettings


def warmup_linear_rate(step: int, initial_rate: float, warmup_steps: int, total_steps: int) -> float:
    """Linear warmup from 0 to `initial_rate` over `warmup_steps`, then a linear
    decline to 0 at `total_steps`."""
    if step < warmup_steps:
        return initial_rate * step / max(1, warmup_steps)
    return initial_rate * max(0.0, (total_steps - step) / max(1.0, total_steps - warmup_steps))


def step_settings(settings: Dict[str, Any], step: int, total_steps: int, max_grad_norm: float) -> StepSettings:
    """The AdamW step `step` (from 0) of a run of `total_steps`; `settings`:
    learning_rate, beta1, beta2, eps, weight_decay, warmup_steps."""
    factor = warmup_linear_rate(step, 1.0, settings["warmup_steps"], total_steps)
    return StepSettings(
        learn_rate=settings["learning_rate"] * factor, betas=(settings["beta1"], settings["beta2"]),
        eps=settings["eps"], weight_decay=settings["weight_decay"], grad_clip=max_grad_norm,
        decay_vectors=False, clip_in_step=False,
    )
