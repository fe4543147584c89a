"""The maths of distillation, pure torch: what a teacher's outputs say as
distributions at a temperature, and how far a student's are from them.

* Tags: a softmax tagger's per-token distribution is the softmax of its scores
  divided by T; a CRF's is its per-token marginal under potentials divided by T
  (the teacher's transition scores included: a token's distribution depends on
  its neighbours). For the student the same distributions are needed with their
  gradient: a CRF's marginals are the gradient of its log partition for the
  emissions, so they are taken as that gradient with `create_graph` and the loss
  differentiates through them (the student's transition scores learn from it too).
* Classes: softmax (exclusive) or per-label sigmoid (multi-label) of logits / T.
* The loss: KL(teacher || student) per token (or Doc), the mean over tokens
  (Docs), times T^2 so that its gradient keeps its scale whatever T is (Hinton
  et al. 2015). Several teachers: the mean of their distributions. In a
  data-parallel run the means are over the whole step's batch (`step_sum`: each
  process divides its sum by the count of every process), so the summed
  gradients are those of one process reading the whole batch.
"""
from typing import Optional, Sequence, Tuple

import torch

from ..tagging.crf import crf_log_partition, crf_marginals
from ..util.global_batch import step_sum

Transitions = Tuple[torch.Tensor, torch.Tensor, torch.Tensor]
# log of a probability that is zero in float32 (a forbidden tag's marginal)
SMALLEST_LOG = -70.0


def _scaled(transitions: Transitions, temperature: float) -> Transitions:
    return tuple(t / temperature for t in transitions)  # type: ignore[return-value]


def tag_distributions(emissions: torch.Tensor, mask: torch.Tensor, transitions: Optional[Transitions],
                      temperature: float) -> torch.Tensor:
    """(B, T, K) per-token tag probabilities at `temperature` (zeros at padding):
    softmax of `emissions` / T without `transitions`, CRF marginals with them.
    No gradient: the teacher's side."""
    if transitions is None:
        return torch.softmax(emissions / temperature, dim=-1) * mask.unsqueeze(-1)
    return crf_marginals(emissions / temperature, mask, *_scaled(transitions, temperature))


def tag_log_distributions(emissions: torch.Tensor, mask: torch.Tensor, transitions: Optional[Transitions],
                          temperature: float) -> torch.Tensor:
    """log of `tag_distributions`, differentiable in the emissions and the
    transition scores: the student's side (anything at padding)."""
    if transitions is None:
        return torch.log_softmax(emissions / temperature, dim=-1)
    scaled = emissions / temperature
    log_z = crf_log_partition(scaled, mask, *_scaled(transitions, temperature))
    marginals, = torch.autograd.grad(log_z.sum(), scaled, create_graph=True)
    return marginals.clamp(min=torch.finfo(marginals.dtype).tiny).log().clamp(min=SMALLEST_LOG)


def tag_kl(targets: torch.Tensor, log_probs: torch.Tensor, mask: torch.Tensor, temperature: float) -> torch.Tensor:
    """Mean over the real positions of KL(targets || exp(log_probs)), times T^2."""
    log_targets = targets.clamp(min=torch.finfo(targets.dtype).tiny).log()
    per_position = (targets * (log_targets - log_probs)).sum(dim=-1)
    return (per_position * mask).sum() / step_sum(mask.sum()).clamp(min=1) * temperature**2


def class_distributions(logits: torch.Tensor, temperature: float, exclusive: bool) -> torch.Tensor:
    """(n, n_classes) probabilities at `temperature`: softmax, or a sigmoid per label."""
    scaled = logits / temperature
    return torch.softmax(scaled, dim=-1) if exclusive else torch.sigmoid(scaled)


def class_kl(targets: torch.Tensor, logits: torch.Tensor, temperature: float, exclusive: bool) -> torch.Tensor:
    """Mean over rows of KL(targets || the student's probabilities), times T^2;
    multi-label: the binary KL of each label, summed over the labels."""
    scaled = logits / temperature
    tiny = torch.finfo(targets.dtype).tiny
    if exclusive:
        per_row = (targets * (targets.clamp(min=tiny).log() - torch.log_softmax(scaled, dim=-1))).sum(dim=-1)
    else:
        rest = 1 - targets
        per_row = (targets * (targets.clamp(min=tiny).log() - torch.nn.functional.logsigmoid(scaled))
                   + rest * (rest.clamp(min=tiny).log() - torch.nn.functional.logsigmoid(-scaled))).sum(dim=-1)
    return per_row.sum() / step_sum(logits.new_tensor(float(len(per_row)))).clamp(min=1) * temperature**2


def hidden_mse(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """Mean squared difference of (n_pieces, width) hidden states."""
    total = torch.nn.functional.mse_loss(student, teacher, reduction="sum")
    return total / step_sum(student.new_tensor(float(student.numel()))).clamp(min=1)


def mean_of_teachers(outputs: Sequence[torch.Tensor]) -> torch.Tensor:
    """The ensemble's target: the mean of the teachers' distributions (or states)."""
    return outputs[0] if len(outputs) == 1 else torch.stack(list(outputs)).mean(dim=0)
