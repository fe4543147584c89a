"""Tagging losses: the mean negative log-likelihood per annotated token (or
subword) for the softmax tagger and the CRF, with partial labels (a token
whose annotation is missing may take any tag). Pure torch; the count of
annotated tokens is the whole step's, over every process of a data-parallel
run (`util.global_batch.step_sum`)."""
from typing import Optional, Sequence, Tuple

import torch

from ..util.global_batch import step_sum
from .crf import FORBIDDEN, crf_nll


def softmax_nll(logits: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Per-row -log of the probability of the allowed tags (0 where all are allowed)."""
    return torch.logsumexp(logits, dim=-1) - torch.logsumexp(logits.masked_fill(~allowed, FORBIDDEN), dim=-1)


def n_annotated(allowed: torch.Tensor) -> torch.Tensor:
    """Rows (or positions) with exactly one allowed tag: the annotated ones."""
    return (allowed.sum(dim=-1) == 1).sum()


def subword_softmax_loss(scores: torch.Tensor, allowed_per_token: Sequence[torch.Tensor], pieces_per_token) -> torch.Tensor:
    """Every subword row learns its word's tag: the word's allowed tags repeated
    over its pieces; the mean over annotated rows."""
    allowed = torch.cat([a.repeat_interleave(p, dim=0) for a, p in zip(allowed_per_token, pieces_per_token)])
    return softmax_nll(scores, allowed).sum() / step_sum(n_annotated(allowed)).clamp(min=1)


def sequence_loss(
    emissions: torch.Tensor,
    mask: torch.Tensor,
    tag_mask: torch.Tensor,
    transitions: Optional[Tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
) -> torch.Tensor:
    """Mean NLL per annotated token of (B, T, K) emissions: the CRF likelihood of
    the paths that agree with `tag_mask` when `transitions` (start,
    transitions, end) is given, else a softmax per token."""
    if transitions is not None:
        nll = crf_nll(emissions, tag_mask, mask, *transitions).sum()
    else:
        nll = (softmax_nll(emissions, tag_mask) * mask).sum()
    return nll / step_sum(n_annotated(tag_mask & mask.unsqueeze(-1))).clamp(min=1)
