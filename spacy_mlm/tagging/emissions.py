"""From a tagger's score rows to the (B, T, K) emission tensor that the
sequence maths (`crf.py`, `losses.py`, `decoding.py`) works on: the batch's
`TagScores` (what the tagging head hands its component), subword rows pooled
into token rows, padding. Pure torch, on the scores' device; below the torch
modules, which import it."""
from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy
import torch

from ..errors import SettingError

SUBWORD_POOLINGS = ("first", "mean")


@dataclass
class TagScores:
    """Tag scores of one batch: every row of every doc in one tensor."""

    scores: torch.Tensor  # (n_rows, n_tags)
    rows_per_doc: List[int]
    pieces_per_token: Optional[List[torch.Tensor]]  # per doc, for subword rows; None for token rows

    def per_doc(self) -> List[torch.Tensor]:
        return list(torch.split(self.scores, self.rows_per_doc))


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


def pool_piece_scores(rows: torch.Tensor, lengths: torch.Tensor, how: str, log_probs: bool) -> torch.Tensor:
    """(n_tokens, K) token scores from (n_rows, K) piece scores grouped by token
    (`lengths`: pieces per token, 0 for a token without pieces).

    ``first``: the token's first piece decides; ``mean``: the pieces'
    distributions are averaged (with `log_probs`, the log of the mean of their
    softmax distributions, for the softmax tagger; else the mean of the raw
    scores, for the CRF whose emissions are unnormalised). A token without
    pieces gets a uniform distribution (zero scores)."""
    if how not in SUBWORD_POOLINGS:
        raise SettingError(f"unknown subword pooling {how!r}: expected one of {', '.join(SUBWORD_POOLINGS)}")
    lengths = torch.as_tensor(lengths, dtype=torch.long, device=rows.device)
    n_tokens, n_tags = len(lengths), rows.shape[1]
    has = (lengths > 0).unsqueeze(1)
    values = torch.log_softmax(rows, dim=-1) if log_probs else rows
    if how == "first":
        starts = torch.cumsum(lengths, 0) - lengths
        present = torch.nonzero(lengths > 0).squeeze(1)
        pooled = rows.new_zeros((n_tokens, n_tags)).index_copy(0, present, values[starts[present]])
        return torch.where(has, pooled, rows.new_full((), -float(numpy.log(n_tags)) if log_probs else 0.0))
    token_of_row = torch.repeat_interleave(torch.arange(n_tokens, device=rows.device), lengths)
    counts = lengths.clamp(min=1).to(rows.dtype).unsqueeze(1)
    if not log_probs:
        return rows.new_zeros((n_tokens, n_tags)).index_add(0, token_of_row, values) / counts
    mean_probs = rows.new_zeros((n_tokens, n_tags)).index_add(0, token_of_row, values.exp()) / counts
    return torch.log(torch.where(has, mean_probs, rows.new_full((), 1.0 / n_tags)))
