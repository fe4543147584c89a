"""The one training loop of every torch run outside spaCy's: pretraining (masked
LM, NSP, replaced-token detection), sense tuning and distillation.

What differs between them is an `Objective`: this process's micro-batches of a
step, the loss of one (its gradient is what trains), and what a checkpoint
keeps of it beyond the model. Everything else is the `Trainer`'s, alike for
all: gradients accumulated over the micro-batches, summed over the processes
of a `torchrun` launch (`gradient_sync.GradientReducer`, the data-parallel
mechanism of `spacy_mlm train`), the global norm clipped and one AdamW step at
the warmup-linear schedule's rate (`optimizer.py`), by the `TorchStepper` that
steps our components in spaCy's loop, and the optimizer state and step a
checkpoint keeps (`checkpoint.py`).

Losses are sums over a micro-batch divided by counts over the whole step (all
micro-batches, all processes), so the summed gradient is the one of the
whole batch in one process, however the batch is split. Where every process
runs on this machine's CPU the reducer sums through shared memory, as for
`spacy_mlm train`: each process then steps only its own part of the weights
(in the shared copy every process reads), clipped by the whole gradient's
norm the reducer gives, and holds only its part of the optimizer's moments
(ZeRO stage 1), which `Trainer.state` gathers for a checkpoint, so that a
checkpoint resumes in any number of processes.
"""
import logging
from typing import Any, Callable, Dict, Iterable, List, Tuple

import torch
import torch.distributed as dist

from ..models.torch_stepper import StepSettings, TorchStepper
from .gradient_sync import GradientReducer
from .optimizer import step_settings
from .process_group import ProcessGroup, broadcast_parameters

logger = logging.getLogger(__name__)


class Objective:
    """What a run trains for. `batches` and `loss` are the objective's own;
    `backward` may be replaced where the gradients are not a loss's
    (distillation fills them through spaCy's listeners)."""

    def batches(self, step: int) -> Iterable[Any]:
        """This process's micro-batches of `step` (a pure function of the step, so a resumed run goes on alike)."""
        raise NotImplementedError

    def loss(self, batch: Any) -> Tuple[torch.Tensor, Any]:
        """(the loss to differentiate, what the run reports of the batch)."""
        raise NotImplementedError

    def backward(self, batch: Any) -> Any:
        loss, report = self.loss(batch)
        loss.backward()
        return report

    def state(self) -> Dict[str, Any]:
        """What a checkpoint keeps beyond the model and the optimizer (tensors and plain values)."""
        return {}

    def load_state(self, state: Dict[str, Any]) -> None:
        """Restore what `state` gave."""


class Trainer:
    """The weights of `model` stepped by AdamW (`TorchStepper`) at the
    warmup-linear rate of `settings` (learning_rate, beta1, beta2, eps,
    weight_decay, warmup_steps; `optimizer.step_settings`) over `total_steps`,
    the gradient's global norm clipped to `max_grad_norm`; summed over the
    processes of `group` first (which start from the first process's
    weights), through shared memory where `shared_memory` and every process
    can map it. Build it before freezing any weight that trains later: the
    reducer sums, and the optimizer holds, the weights that train now."""

    def __init__(self, model: torch.nn.Module, settings: Dict[str, Any], total_steps: int, max_grad_norm: float,
                 group: ProcessGroup = ProcessGroup(), shared_memory: bool = True):
        self.model, self.settings, self.total_steps = model, settings, total_steps
        self.max_grad_norm = max_grad_norm
        self.stepper = TorchStepper()
        self.stepper.start(model, self._step_settings(0), follows=self)
        self.steps_done = 0
        self.reducer = None
        if group.world > 1:
            broadcast_parameters([model])  # every process starts from the first's weights
            self.reducer = GradientReducer([model], shared_memory=shared_memory)
            if group.main:
                logger.info("Summing the gradients of %d processes %s", group.world, "through shared memory"
                            if self.reducer.shared_memory else f"with {dist.get_backend()} collectives")

    def _step_settings(self, step: int) -> StepSettings:
        return step_settings(self.settings, step, self.total_steps, self.max_grad_norm)

    @property
    def rate(self) -> float:
        """The learning rate of the next step."""
        return self._step_settings(self.steps_done).learn_rate

    def step(self, objective: Objective, step: int) -> List[Any]:
        """Train step `step` (counted from 0); the reports of its micro-batches."""
        if self.reducer is not None:
            self.reducer.begin()
        reports = [objective.backward(batch) for batch in objective.batches(step)]
        if self.reducer is not None:
            self.reducer.finish()
        self.stepper.step_with(self.model, self._step_settings(step), follows=self)
        if self.reducer is not None:
            self.reducer.share_weights()  # nothing reads a weight before its owner has stepped it
        self.steps_done = step + 1
        return reports

    def state(self) -> Dict[str, Any]:
        """The optimizer's state and the step count, for a checkpoint. With the
        weights in shared memory a collective (every process calls it): each
        weight's moments come from the process that steps it."""
        optimizer = self.stepper.state_dict()
        if self.reducer is not None and self.reducer.shared_memory:
            rank = dist.get_rank()
            params = self.stepper.parameters()
            mine = {i: value for i, value in optimizer["state"].items()
                    if self.reducer.owner(params[i]) == rank or (self.reducer.owner(params[i]) is None and rank == 0)}
            everyone = [None] * dist.get_world_size()
            dist.all_gather_object(everyone, mine)
            optimizer = {**optimizer, "state": dict(sorted(kv for part in everyone for kv in part.items()))}
        return {"optimizer": optimizer, "scheduler": {"last_epoch": self.steps_done}}

    def load_state(self, state: Dict[str, Any]) -> None:
        """Restore `state()` (written by any number of processes), or a
        checkpoint of torch's AdamW and LambdaLR (before the engine stepped
        with `TorchStepper`): the same param groups and moments, and the
        schedule's step count. With the weights in shared memory a process
        keeps the moments of the weights it steps."""
        self.stepper.load_state_dict(state["optimizer"])
        if self.reducer is not None and self.reducer.shared_memory:
            rank = dist.get_rank()
            self.stepper.forget([p for p in self.stepper.parameters() if self.reducer.owner(p) not in (None, rank)])
        self.steps_done = int(state["scheduler"]["last_epoch"])

    def close(self) -> None:
        if self.reducer is not None:
            self.reducer.close()


def train(trainer: Trainer, objective: Objective, step: int, max_steps: int,
          after_step: Callable[[int, List[Any]], bool]) -> int:
    """Steps from `step` to `max_steps`; after each, `after_step(steps done,
    reports)` logs, evaluates, checkpoints, and says whether to stop early.
    Returns the number of steps done."""
    try:
        while step < max_steps:
            reports = trainer.step(objective, step)
            step += 1
            if after_step(step, reports):
                break
    finally:
        trainer.close()
    return step
