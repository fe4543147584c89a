"""BERT's masking, as pure numpy functions of a seeded generator.

Each batch gets a fresh mask from its own generator (seeded by the global step),
so masking is dynamic across epochs (RoBERTa) yet a resumed or distributed run
sees exactly the masks an uninterrupted single-process run would.
"""
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from ..errors import DataError, SettingError

IGNORE_INDEX = -100  # label of positions the loss skips (the torch/HF convention)


@dataclass
class MaskedBatch:
    input_ids: np.ndarray  # (B, L) int64, after replacement
    labels: np.ndarray  # (B, L) int64, original id at chosen positions, IGNORE_INDEX elsewhere
    chosen: np.ndarray  # (B, L) bool


def unigram_distribution(counts: np.ndarray, special_ids: Sequence[int]) -> np.ndarray:
    """Replacement distribution from corpus token counts. Special tokens get zero
    mass so a 'random' replacement never creates a fake [CLS] or [SEP]."""
    probs = np.asarray(counts, dtype=np.float64).copy()
    probs[list(special_ids)] = 0.0
    total = probs.sum()
    if total <= 0:
        raise DataError("the corpus has no non-special tokens to estimate unigram probabilities from")
    return probs / total


def uniform_distribution(vocab_size: int, special_ids: Sequence[int]) -> np.ndarray:
    """Hugging Face's choice: every non-special vocabulary entry equally likely."""
    return unigram_distribution(np.ones(vocab_size), special_ids)


def word_index(word_starts: np.ndarray) -> np.ndarray:
    """(B, L) running word number per position, from flags marking each word's first piece."""
    return np.cumsum(word_starts, axis=1) - 1


def choose_positions(
    candidates: np.ndarray,
    rate: float,
    rng: np.random.Generator,
    word_starts: Optional[np.ndarray] = None,
) -> np.ndarray:
    """Choose round(rate * n) of the n candidate positions of each row.

    With `word_starts`, words are chosen whole, in random order, while the count
    stays nearest to the target (so the realised rate is unbiased). Rows keep at
    least one chosen unit when they have any candidate."""
    if not 0.0 < rate < 1.0:
        raise SettingError(f"masking rate must be between 0 and 1, got {rate}")
    n_rows, length = candidates.shape
    n_cand = candidates.sum(axis=1)
    target = np.maximum(np.rint(rate * n_cand), np.minimum(n_cand, 1))
    if word_starts is None:
        scores = rng.random((n_rows, length))
        scores[~candidates] = np.inf
        ranks = np.argsort(np.argsort(scores, axis=1, kind="stable"), axis=1, kind="stable")
        return ranks < target[:, None]
    words = word_index(word_starts)
    chosen = np.zeros_like(candidates)
    for row in range(n_rows):
        numbers, sizes = np.unique(words[row][candidates[row]], return_counts=True)
        order = rng.permutation(len(numbers))
        before = np.cumsum(sizes[order]) - sizes[order]
        take = before + 0.5 * sizes[order] < target[row]
        take[:1] = len(numbers) > 0
        chosen[row] = candidates[row] & np.isin(words[row], numbers[order][take])
    return chosen


def mask_tokens(
    input_ids: np.ndarray,
    special_mask: np.ndarray,
    rng: np.random.Generator,
    mask_token_id: int,
    replacement_probs: np.ndarray,
    rate: float = 0.15,
    mask_fraction: float = 0.8,
    random_fraction: float = 0.1,
    word_starts: Optional[np.ndarray] = None,
) -> MaskedBatch:
    """Choose `rate` of the non-special positions; of those, `mask_fraction` become
    the mask token, `random_fraction` a token drawn from `replacement_probs`, and
    the rest keep their token (all of them are predicted)."""
    if mask_fraction < 0 or random_fraction < 0 or mask_fraction + random_fraction > 1:
        raise SettingError("mask_fraction and random_fraction must be >= 0 and sum to at most 1, "
                           f"got {mask_fraction} and {random_fraction}")
    input_ids = np.asarray(input_ids, dtype=np.int64)
    chosen = choose_positions(~np.asarray(special_mask, dtype=bool), rate, rng, word_starts)
    labels = np.where(chosen, input_ids, IGNORE_INDEX)
    draw = rng.random(input_ids.shape)
    to_mask = chosen & (draw < mask_fraction)
    to_random = chosen & (draw >= mask_fraction) & (draw < mask_fraction + random_fraction)
    corrupted = input_ids.copy()
    corrupted[to_mask] = mask_token_id
    n_random = int(to_random.sum())
    if n_random:
        corrupted[to_random] = rng.choice(len(replacement_probs), size=n_random, p=replacement_probs)
    return MaskedBatch(corrupted, labels, chosen)
