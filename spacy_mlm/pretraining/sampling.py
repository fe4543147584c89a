"""Mixing corpora of several languages (XLM / XLM-R).

With p_i the share of language i in the data, examples are drawn with
q_i = p_i^a / sum_j p_j^a. a < 1 flattens the mix, so small languages are
seen more often than their size alone would allow (a = 1: as is; a = 0: equal).
"""
from typing import Sequence

import numpy as np

from ..errors import DataError, SettingError


def sampling_probabilities(sizes: Sequence[int], alpha: float = 0.3) -> np.ndarray:
    sizes = np.asarray(sizes, dtype=np.float64)
    if len(sizes) == 0 or np.any(sizes < 0) or sizes.sum() <= 0:
        raise DataError(f"corpus sizes must be non-negative with a positive total, got {sizes.tolist()}")
    if alpha < 0:
        raise SettingError(f"sampling exponent must be >= 0, got {alpha}")
    p = sizes / sizes.sum()
    q = np.where(p > 0, p**alpha, 0.0)
    return q / q.sum()


def quotas(probs: np.ndarray, total: int) -> np.ndarray:
    """Integer counts summing to `total`, proportional to `probs` (largest remainder)."""
    exact = np.asarray(probs) * total
    counts = np.floor(exact).astype(np.int64)
    remainder = total - counts.sum()
    counts[np.argsort(-(exact - counts), kind="stable")[:remainder]] += 1
    return counts


def epoch_order(sizes: Sequence[int], probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Global example indices (languages laid out one after another) for one epoch
    of sum(sizes) examples: language i contributes its quota, by permutation,
    repeating whole permutations when it is oversampled; then all is shuffled."""
    sizes = np.asarray(sizes, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    parts = []
    for size, offset, count in zip(sizes, offsets, quotas(probs, int(sizes.sum()))):
        if count == 0:
            continue
        reps = -(-count // size)
        picks = np.concatenate([rng.permutation(size) for _ in range(reps)])[:count]
        parts.append(offset + picks)
    order = np.concatenate(parts)
    return order[rng.permutation(len(order))]
