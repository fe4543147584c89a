"""Overlapping windows over long piece sequences.

A transformer sees at most `size` positions. Long documents are cut into windows
that overlap by `overlap` pieces; each piece then takes its vector from the window
in which it sits furthest from an edge (the owner), so every piece keeps context
on both sides wherever the document allows. Nothing is ever dropped.
"""
from typing import List, Tuple

import numpy as np


def window_spans(n: int, size: int, overlap: int) -> List[Tuple[int, int]]:
    """Half-open spans covering range(n); consecutive spans share `overlap` items."""
    if size <= 0:
        raise ValueError(f"window size must be positive, got {size}")
    if not 0 <= overlap < size:
        raise ValueError(f"window overlap must be in [0, {size}), got {overlap}")
    if n <= size:
        return [(0, n)]
    step = size - overlap
    starts = list(range(0, n - size, step)) + [n - size]
    return [(s, s + size) for s in starts]


def merge_owner(n: int, spans: List[Tuple[int, int]]) -> Tuple[np.ndarray, np.ndarray]:
    """For each item, the window that owns it and its position in that window.

    The owner maximises the distance to the nearest window edge (ties go to the
    earlier window), which splits each overlap down the middle."""
    owner = np.zeros(n, dtype=np.int64)
    position = np.arange(n, dtype=np.int64)
    best = np.full(n, -1, dtype=np.int64)
    idx = np.arange(n, dtype=np.int64)
    for w, (start, end) in enumerate(spans):
        inside = idx[start:end]
        margin = np.minimum(inside - start, end - 1 - inside)
        better = margin > best[start:end]
        owner[start:end][better] = w
        position[start:end][better] = (inside - start)[better]
        best[start:end][better] = margin[better]
    return owner, position
