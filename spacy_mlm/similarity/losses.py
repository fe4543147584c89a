"""The loss that trains a sense head from labelled pairs ("same sense" /
"different sense"), as pure torch.

A pair's score is the cosine of its two target vectors, and the decision the
component makes is "same sense iff cosine >= threshold". The loss is binary
cross-entropy on `scale * cosine + bias` with the scale and the bias learned:

* it trains the decision that is used: `-bias / scale` is a threshold on the
  cosine, and the logistic fit puts it where the classes separate, so the
  threshold tuned afterwards on the training pairs only refines it;
* the cosine is bounded in [-1, 1], so with a fixed scale of 1 the sigmoid
  could never approach 0 or 1 and every pair would keep pulling; a learned
  scale (a temperature) lets well-separated pairs stop contributing;
* unlike a contrastive or cosine-with-margin loss it has no margins to choose
  by hand (where "different sense" should sit on the cosine scale depends on
  the encoder: MiniLM's cosines of one word in two contexts rarely fall below 0.2).
"""
import torch

from ..errors import SpacyMlmError
from ..util.global_batch import step_sum


def pair_cosines(first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    """(n,) cosine of each row of `first` with the same row of `second`; 0 where a row is zero."""
    if first.shape != second.shape or first.dim() != 2:
        raise SpacyMlmError(f"pair_cosines needs two (n, width) tensors of one shape, got {tuple(first.shape)} and {tuple(second.shape)}")
    return torch.nn.functional.cosine_similarity(first, second, dim=-1, eps=1e-8)


def sense_pair_loss(
    first: torch.Tensor, second: torch.Tensor, same: torch.Tensor, log_scale: torch.Tensor, bias: torch.Tensor
) -> torch.Tensor:
    """Mean binary cross-entropy of "same sense" (`same`: (n,) 0/1) against
    `exp(log_scale) * cosine(first, second) + bias` (the mean over the whole
    step's pairs, over every process of a data-parallel run). The scale is kept as its
    log so that it stays positive (a negative scale would reward dissimilar
    same-sense pairs)."""
    if same.shape != first.shape[:1]:
        raise SpacyMlmError(f"need one label per pair: {tuple(same.shape)} labels for {first.shape[0]} pairs")
    logits = log_scale.exp() * pair_cosines(first, second) + bias
    total = torch.nn.functional.binary_cross_entropy_with_logits(logits, same.to(logits.dtype), reduction="sum")
    return total / step_sum(logits.new_tensor(float(len(same)))).clamp(min=1.0)
