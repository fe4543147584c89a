"""Overlapping windows over long piece sequences.

A transformer sees at most `size` positions. Long documents are cut into windows
that overlap by `overlap` pieces; each piece then takes its vector from the window
in which it sits furthest from an edge (the owner), so every piece keeps context
on both sides wherever the document allows. Nothing is ever dropped.
"""
from typing import List, Tuple

import numpy as np

from ..errors import DataError, SettingError


def window_spans(n: int, size: int, overlap: int) -> List[Tuple[int, int]]:
    """Half-open spans covering range(n); consecutive spans share `overlap` items."""
    if size <= 0:
        raise SettingError(f"window size must be positive, got {size}")
    if not 0 <= overlap < size:
        raise SettingError(f"window overlap must be in [0, {size}), got {overlap}")
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
    if len(spans) == 1 and spans[0][0] == 0:  # most texts: one window from the first item owns them all
        return owner, position
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


def context_windows(
    segments: List[Tuple[int, int]], n: int, size: int, context: int, overlap: int
) -> Tuple[List[Tuple[int, int]], np.ndarray, np.ndarray]:
    """Windows that read each segment (a sentence) with up to `context` items of
    the surrounding sequence on either side (FLERT, Schweter & Akbik 2020).

    `segments` are half-open, in order, without gaps, and lie in range(n) (the
    items outside them are context only). A segment gets one window: itself with
    `context` items a side where the sequence has them; when that is more than
    `size`, the context is cut, evenly where both sides have it; a segment
    longer than `size` is cut into windows overlapping by `overlap` (as
    `window_spans`) over itself and its context. Returns the windows and, for
    each item of the segments (in order), its owner window and its position
    there; an item is owned by a window of its own segment only, so no vector
    is ever taken from a window read for a neighbour."""
    if size <= 0 or context < 0:
        raise SettingError(f"need size > 0 and context >= 0, got size {size} and context {context}")
    spans: List[Tuple[int, int]] = []
    owners, positions = [], []
    for a, b in segments:
        if not 0 <= a <= b <= n:
            raise DataError(f"segment ({a}, {b}) is not inside a sequence of {n} items")
        if a == b:
            continue
        lo, hi = max(0, a - context), min(n, b + context)
        if hi - lo <= size:
            local = [(lo, hi)]
        elif b - a <= size:
            room = size - (b - a)
            left = min(a - lo, max(room - (hi - b), room // 2))
            local = [(a - left, a - left + size)]
        else:
            local = [(lo + s, lo + e) for s, e in window_spans(hi - lo, size, min(overlap, size - 1))]
        owner, position = merge_owner(hi - lo, [(s - lo, e - lo) for s, e in local])
        owners.append(owner[a - lo : b - lo] + len(spans))
        positions.append(position[a - lo : b - lo])
        spans.extend(local)
    empty = np.zeros(0, dtype=np.int64)
    return spans, np.concatenate(owners) if owners else empty, np.concatenate(positions) if positions else empty
