"""The learning-rate schedule of the shipped configs, in a form spaCy's own tools can read.

The configs decay the learning rate to zero at the end of training with
`total_steps = ${training.max_steps}`, so that `--training.max_steps N` moves
both (one number, one place). spaCy resolves that reference everywhere but in
`Language.create_optimizer`, which builds the optimizer from the raw section;
`spacy debug data` (and `nlp.initialize()` / `nlp.resume_training()` without
`sgd=`) go through it, and thinc's `warmup_linear.v1`, typed `total_steps: int`,
then fails validation on the string '${training.max_steps}'.

`spacy_mlm.warmup_linear.v1` is the same schedule (the engine's,
`engine/optimizer.warmup_linear_rate`, which pretraining, sense tuning and
distillation follow), and also accepts the
unresolved reference: the warmup does not depend on the total, so those steps
are produced as usual, and the first step that needs the total is an error
saying how to build the optimizer from the interpolated config. `spacy train`
always resolves the reference, so it never meets that error.
"""
from typing import Iterator, Union

from spacy.util import registry

from ..engine.optimizer import warmup_linear_rate
from ..errors import SpacyMlmError


def unresolved_total_error(total_steps: str) -> SpacyMlmError:
    return SpacyMlmError(
        f"the learning-rate schedule's total_steps is {total_steps!r}, a config reference that was never "
        "resolved: this optimizer was built from the raw [training.optimizer] section (Language.create_optimizer, "
        "used by nlp.initialize(), nlp.update() and nlp.resume_training() when no sgd= is given). Build it from "
        "the interpolated config instead: "
        "sgd = spacy.util.registry.resolve(nlp.config.interpolate()['training'])['optimizer']"
    )


@registry.schedules("spacy_mlm.warmup_linear.v1")
def build_warmup_linear_v1(
    initial_rate: float, warmup_steps: int, total_steps: Union[int, str]
) -> Iterator[float]:
    """thinc's `warmup_linear.v1` (warmup, then a linear decline to zero at
    `total_steps`) whose `total_steps` may be the unresolved
    '${training.max_steps}' that spaCy's tools pass (see the module docstring)."""
    if isinstance(total_steps, str):
        return _warmup_then_unresolved(initial_rate, warmup_steps, total_steps)
    return _warmup_linear(initial_rate, warmup_steps, total_steps)


def _warmup_linear(initial_rate: float, warmup_steps: int, total_steps: int) -> Iterator[float]:
    step = 0
    while True:
        yield warmup_linear_rate(step, initial_rate, warmup_steps, total_steps)
        step += 1


def _warmup_then_unresolved(initial_rate: float, warmup_steps: int, total_steps: str) -> Iterator[float]:
    # thinc takes the first value when it builds the optimizer: step 0 never needs the total
    for step in range(warmup_steps):
        yield warmup_linear_rate(step, initial_rate, warmup_steps, warmup_steps)
    if warmup_steps == 0:
        yield initial_rate  # the decline starts at the full rate, whatever the total
    raise unresolved_total_error(total_steps)
