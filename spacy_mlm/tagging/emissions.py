"""From a tagger's score rows to the (B, T, K) emission tensor that the
sequence maths (`crf.py`, `losses.py`, `decoding.py`) works on. Pure torch,
on the scores' device."""
from typing import List, Optional, Tuple

import torch

from ..models.pooling import pool_piece_scores


def token_emissions(
    rows: List[torch.Tensor], pieces_per_token: Optional[List[torch.Tensor]], how: str, log_probs: bool
) -> List[torch.Tensor]:
    """One (n_tokens, K) score tensor per doc: the rows themselves for token
    rows; pooled from the subword rows (`how` = first | mean) otherwise."""
    if pieces_per_token is None:
        return rows
    return [pool_piece_scores(r, lengths, how, log_probs) for r, lengths in zip(rows, pieces_per_token)]


def pad_rows(rows: List[torch.Tensor], n_tags: int, device: torch.device) -> Tuple[torch.Tensor, torch.Tensor]:
    """Per-doc (n_tokens, K) tensors as one zero-padded (B, T, K) tensor and its
    (B, T) mask (differentiable). Every row gets at least one position (the
    CRF recursions start from one); an empty doc's dummy position is cut off
    again by its length."""
    longest = max([1] + [len(r) for r in rows])
    if not rows:
        return torch.zeros((0, longest, n_tags), device=device), torch.zeros((0, longest), dtype=torch.bool, device=device)
    padded = torch.nn.utils.rnn.pad_sequence(rows, batch_first=True)
    if padded.shape[1] < longest:
        padded = torch.nn.functional.pad(padded, (0, 0, 0, longest - padded.shape[1]))
    lengths = torch.tensor([max(len(r), 1) for r in rows], device=device)
    mask = torch.arange(longest, device=device)[None, :] < lengths[:, None]
    return padded, mask
