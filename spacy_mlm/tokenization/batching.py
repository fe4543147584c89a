"""Grouping windows of different lengths into forward passes.

A padded batch computes every position up to its longest window, so mixing
lengths wastes work; but a forward pass also has a fixed cost (Python and
kernel overhead, and small matrix products run far below the machine's peak),
so one pass per length wastes more. `length_batches` picks the grouping that
minimises padded positions plus a fixed `pass_cost` per pass (in pieces),
exactly, by dynamic programming over the windows sorted by length (an optimal
grouping of this cost uses contiguous runs of the sorted order). The default,
64, was the fastest of the values tried (16, 64, 160, 400) with MiniLM on a
2-core CPU.

A training batch is a few random sentences, too few to group without padding
(tests/tokenization/test_batching.py has 16 sentence lengths that pad a third
of their positions in length groups). There
`packed_rows` puts several windows into one row instead, side by side, each
attending only to itself (`models/window_packing.py`): one pass, and a row pads only
to the longest row, which balanced rows keep close to the mean.
"""
from typing import List

import numpy as np

from ..errors import DataError, SettingError


def length_batches(lengths: np.ndarray, max_pieces: int, pass_cost: float = 64.0) -> List[np.ndarray]:
    """Indices of `lengths`, in groups (longest first, each group longest
    first), such that no group pads more than `max_pieces` positions (a window
    longer than that goes alone) and the sum over groups of
    `len(group) * longest + pass_cost` is the least possible."""
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.ndim != 1:
        raise DataError(f"lengths must be one-dimensional, got shape {lengths.shape}")
    if max_pieces < 1 or pass_cost < 0:
        raise SettingError(f"need max_pieces >= 1 and pass_cost >= 0, got {max_pieces} and {pass_cost}")
    n = len(lengths)
    order = np.argsort(-lengths, kind="stable")
    longest = lengths[order].astype(np.float64)
    # best[j]: least cost of the first j sorted windows; start[j]: where its last group starts.
    best = np.zeros(n + 1)
    start = np.zeros(n + 1, dtype=np.int64)
    first = 0  # the earliest group start that keeps the group within max_pieces
    for j in range(1, n + 1):
        # Windows first..j-1 all fit after a group head at i while (j - i) * longest[i] <= max_pieces;
        # as j grows the feasible heads only move right.
        while first < j - 1 and (j - first) * longest[first] > max_pieces:
            first += 1
        heads = np.arange(first, j)
        costs = best[first:j] + (j - heads) * longest[first:j] + pass_cost
        k = int(np.argmin(costs))
        best[j], start[j] = costs[k], first + k
    groups = []
    j = n
    while j > 0:
        groups.append(order[start[j] : j])
        j = start[j]
    return groups[::-1]


def packed_rows(lengths: np.ndarray, row_length: int, max_length: int = None) -> List[np.ndarray]:
    """Indices of `lengths`, in rows of about `row_length` summed length, none
    over `max_length` (a window that long or longer takes a row of its own),
    as even as it goes: the fewest rows that hold the total at `row_length`
    each, and each window, longest first, into the row holding the least so
    far (longest-processing-time scheduling), or a new row where that one
    would go over `max_length`. The rows then pad little to the longest of
    them: a row holding more than one window exceeds the least-loaded one by
    no more than the last window it took, and with many short windows that
    is a short one. Each row lists its windows longest first."""
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.ndim != 1:
        raise DataError(f"lengths must be one-dimensional, got shape {lengths.shape}")
    if row_length < 1 or (max_length is not None and max_length < 1):
        raise SettingError(f"need row_length >= 1 and max_length >= 1, got {row_length} and {max_length}")
    if not len(lengths):
        return []
    n_rows = min(len(lengths), max(1, -(-int(lengths.sum()) // row_length)))
    loads: List[int] = [0] * n_rows
    rows: List[List[int]] = [[] for _ in range(n_rows)]
    for i in np.argsort(-lengths, kind="stable"):
        row = int(np.argmin(loads))
        if rows[row] and max_length is not None and loads[row] + lengths[i] > max_length:
            rows.append([])
            loads.append(0)
            row = len(rows) - 1
        rows[row].append(int(i))
        loads[row] += int(lengths[i])
    return [np.asarray(row, dtype=np.int64) for row in rows if row]
