"""Turning tokenized documents into training examples (pure functions).

A tokenized segment is a pair of arrays `(ids, word_starts)`: piece ids without
special tokens and a flag on each word's first piece (for whole-word masking).

* `pack_documents`: RoBERTa's FULL-SENTENCES packing. Segments are laid end to
  end across document boundaries (an extra separator marks each boundary) until
  the context is full, so no compute is spent on padding.
* `next_sentence_pairs`: BERT's next-sentence data. Half the pairs are a segment
  and its successor, half a segment and a random segment of another document.
"""
from typing import List, Optional, Sequence, Tuple

import numpy as np

from ..errors import DataError, SettingError

Segment = Tuple[np.ndarray, np.ndarray]
Pair = Tuple[Segment, Segment, int]
IS_NEXT, NOT_NEXT = 0, 1  # Hugging Face's next_sentence_label convention


def _concat(parts: List[Segment]) -> Segment:
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def split_segment(segment: Segment, capacity: int) -> List[Segment]:
    ids, starts = segment
    return [(ids[i : i + capacity], starts[i : i + capacity]) for i in range(0, len(ids), capacity)]


def pack_documents(documents: Sequence[Sequence[Segment]], capacity: int, separator_id: Optional[int]) -> List[Segment]:
    """Blocks of at most `capacity` pieces. Segments stay whole unless longer than
    a block; `separator_id` (None: no marker) sits between documents within a block."""
    if capacity < 1:
        raise SettingError(f"packing capacity must be positive, got {capacity}")
    blocks: List[Segment] = []
    current: List[Segment] = []
    size = 0
    sep = None if separator_id is None else (np.array([separator_id], dtype=np.int64), np.array([True]))

    def flush():
        nonlocal current, size
        if size:
            blocks.append(_concat(current))
        current, size = [], 0

    for document in documents:
        boundary = size > 0 and sep is not None
        for segment in document:
            for chunk in split_segment(segment, capacity):
                extra = len(chunk[0]) + (1 if boundary else 0)
                if size + extra > capacity:
                    flush()
                    boundary = False
                if boundary:
                    current.append(sep)
                    size += 1
                    boundary = False
                current.append(chunk)
                size += len(chunk[0])
    flush()
    return blocks


def truncate_pair(a: Segment, b: Segment, capacity: int) -> Tuple[Segment, Segment]:
    """Trim the longer side (from its end) until both fit; each keeps at least one piece."""
    len_a, len_b = len(a[0]), len(b[0])
    while len_a + len_b > capacity and (len_a > 1 or len_b > 1):
        if len_a >= len_b:
            len_a -= 1
        else:
            len_b -= 1
    return (a[0][:len_a], a[1][:len_a]), (b[0][:len_b], b[1][:len_b])


def next_sentence_pairs(
    documents: Sequence[Sequence[Segment]], capacity: int, rng: np.random.Generator
) -> List[Pair]:
    """One pair per segment that has a successor: with probability 1/2 the
    successor (IS_NEXT), else a random segment of a different document (NOT_NEXT)."""
    documents = [doc for doc in documents if len(doc)]
    if len(documents) < 2:
        raise DataError("next-sentence prediction needs a corpus of at least two documents")
    sizes = np.array([len(doc) for doc in documents])
    pairs: List[Pair] = []
    for d, doc in enumerate(documents):
        for j in range(len(doc) - 1):
            if rng.random() < 0.5:
                b, label = doc[j + 1], IS_NEXT
            else:
                other = int(rng.integers(len(documents) - 1))
                other += other >= d
                b, label = documents[other][int(rng.integers(sizes[other]))], NOT_NEXT
            a_fit, b_fit = truncate_pair(doc[j], b, capacity)
            pairs.append((a_fit, b_fit, label))
    if not pairs:
        raise DataError("next-sentence prediction needs documents with at least two segments (lines)")
    return pairs
