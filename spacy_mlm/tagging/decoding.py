"""Decoding tag sequences from (B, T, K) emissions: Viterbi under the tag
scheme's constraints (for the softmax tagger over log-probabilities, the most
probable *valid* sequence under the independence assumption; greedy argmax
could give "O I-PER"), and the per-token probabilities (softmax) or marginals
(CRF). Pure torch on the emissions' device."""
from typing import List, Optional, Tuple

import torch

from .crf import crf_marginals, crf_viterbi


def decode_tags(
    emissions: torch.Tensor,
    mask: torch.Tensor,
    transitions: Tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    *,
    crf: bool,
    constrained: bool,
    with_probs: bool,
) -> Tuple[List[List[int]], Optional[torch.Tensor]]:
    """Tag ids per sequence (cut to the mask's length) and, with `with_probs`,
    (B, T, K) probabilities. `emissions` are log-probabilities for the softmax
    tagger and raw scores for the CRF; `transitions` (start, transitions, end)
    already carry the constraints (zeros + forbidden moves for the softmax)."""
    if not constrained and not crf:
        lengths = mask.sum(dim=1).tolist()
        paths = [row[:n] for row, n in zip(emissions.argmax(dim=-1).tolist(), lengths)]
    else:
        paths = crf_viterbi(emissions, mask, *transitions)
    probs = None
    if with_probs:
        probs = crf_marginals(emissions, mask, *transitions) if crf else emissions.exp() * mask.unsqueeze(-1)
    return paths, probs
