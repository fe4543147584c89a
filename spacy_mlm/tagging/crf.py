"""Linear-chain CRF math in torch, as pure functions of the emission scores and
the start / transition / end parameters, so that the same code serves the CRF
head (learned parameters) and constrained decoding of a softmax tagger (zero
parameters, forbidden moves masked).

Shapes: emissions ``(B, T, K)``, ``mask`` ``(B, T)`` bool with each row's true
entries first (padding after), ``start``/``end`` ``(K,)``, ``transitions``
``(K, K)`` where ``[i, j]`` scores tag j following tag i. Every row needs at least
one real position.

Constraints enter as boolean tables (see `schemes.transition_constraints`):
forbidden moves get a score of `FORBIDDEN`, which is finite so that gradients
stay defined, yet so low that no forbidden path carries any probability mass in
float32 and the decoder never picks one while an allowed path exists.
"""
from typing import List, Optional

import torch

FORBIDDEN = -1.0e4


def apply_constraints(
    start: torch.Tensor,
    transitions: torch.Tensor,
    end: torch.Tensor,
    allowed_start: Optional[torch.Tensor] = None,
    allowed_transitions: Optional[torch.Tensor] = None,
    allowed_end: Optional[torch.Tensor] = None,
):
    """The parameters with forbidden entries replaced by `FORBIDDEN`."""
    if allowed_start is not None:
        start = start.masked_fill(~allowed_start, FORBIDDEN)
    if allowed_transitions is not None:
        transitions = transitions.masked_fill(~allowed_transitions, FORBIDDEN)
    if allowed_end is not None:
        end = end.masked_fill(~allowed_end, FORBIDDEN)
    return start, transitions, end


def _forward_alphas(emissions, mask, start, transitions):
    """Forward algorithm: log-sum over paths ending in each tag at each row's
    last real position, ``(B, K)``."""
    alpha = start + emissions[:, 0]
    for t in range(1, emissions.shape[1]):
        step = torch.logsumexp(alpha.unsqueeze(2) + transitions, dim=1) + emissions[:, t]
        alpha = torch.where(mask[:, t : t + 1], step, alpha)
    return alpha


def crf_log_partition(emissions, mask, start, transitions, end) -> torch.Tensor:
    """log Z per sequence, ``(B,)``."""
    return torch.logsumexp(_forward_alphas(emissions, mask, start, transitions) + end, dim=1)


def crf_nll(emissions, tag_mask, mask, start, transitions, end) -> torch.Tensor:
    """Negative log-likelihood per sequence, ``(B,)``, of the gold tags.

    `tag_mask` ``(B, T, K)`` bool marks the tags each position may have: one per
    position for fully annotated data, all of them where the annotation is
    missing. The likelihood is then the mass of every path consistent with the
    annotation (the partial-label CRF), which is the gold path's probability when
    all positions are annotated."""
    log_z = crf_log_partition(emissions, mask, start, transitions, end)
    clamped = emissions.masked_fill(~tag_mask, FORBIDDEN)
    log_gold = crf_log_partition(clamped, mask, start, transitions, end)
    return log_z - log_gold


def crf_marginals(emissions, mask, start, transitions, end) -> torch.Tensor:
    """Per-position tag marginals ``(B, T, K)`` (zeros at padding): the gradient
    of log Z with respect to the emissions is exactly the marginal distribution."""
    with torch.enable_grad():
        em = emissions.detach().requires_grad_(True)
        log_z = crf_log_partition(em, mask, start.detach(), transitions.detach(), end.detach())
        (grad,) = torch.autograd.grad(log_z.sum(), em)
    return grad * mask.unsqueeze(2)


@torch.no_grad()
def crf_viterbi(emissions, mask, start, transitions, end) -> List[List[int]]:
    """Best tag path per sequence, cut to its real length."""
    lengths = mask.sum(dim=1).tolist()
    score = start + emissions[:, 0]
    backpointers = []
    for t in range(1, emissions.shape[1]):
        candidates = score.unsqueeze(2) + transitions
        best, idx = candidates.max(dim=1)
        step = best + emissions[:, t]
        keep = mask[:, t : t + 1]
        score = torch.where(keep, step, score)
        # At padding a tag "follows" itself, so backtracking passes through unchanged.
        identity = torch.arange(emissions.shape[2], device=emissions.device).expand_as(idx)
        backpointers.append(torch.where(keep, idx, identity))
    last = (score + end).argmax(dim=1)
    path = [last]
    for bp in reversed(backpointers):
        last = bp.gather(1, last.unsqueeze(1)).squeeze(1)
        path.append(last)
    path.reverse()
    full = torch.stack(path, dim=1).tolist()
    return [row[:n] for row, n in zip(full, lengths)]
