"""Alignment of subword pieces to spaCy tokens by character offsets.

Pieces and tokens come from different tokenizers, so the only ground truth they
share is the text. A piece aligns to every token whose character span it
overlaps. That covers every awkward case without special rules: a whitespace
token overlaps no piece; a piece spanning two tokens is shared by both; characters
the subword tokenizer drops (control, zero-width) leave their token without
pieces; special tokens have empty spans and align to nothing.
"""
from dataclasses import dataclass
from typing import List, Sequence, Tuple

import numpy as np

from ..errors import DataError


@dataclass(frozen=True)
class Alignment:
    """A many-to-many alignment as (token, piece) pairs sorted by token then piece."""

    n_tokens: int
    n_pieces: int
    token_index: np.ndarray  # int64 (n_pairs,)
    piece_index: np.ndarray  # int64 (n_pairs,)

    def pieces_of(self, token: int) -> np.ndarray:
        lo, hi = np.searchsorted(self.token_index, [token, token + 1])
        return self.piece_index[lo:hi]

    def lengths(self) -> np.ndarray:
        """Number of pieces of each token."""
        return np.bincount(self.token_index, minlength=self.n_tokens).astype(np.int64)

    def tokens_of_pieces(self) -> np.ndarray:
        """For each piece the first token it aligns to, or -1."""
        first = np.full(self.n_pieces, -1, dtype=np.int64)
        # pairs are sorted by token, so the reversed assignment leaves the smallest token
        first[self.piece_index[::-1]] = self.token_index[::-1]
        return first

    @classmethod
    def checked(cls, n_tokens: int, n_pieces: int, token_index: np.ndarray, piece_index: np.ndarray,
                where: str) -> "Alignment":
        """An alignment read from outside (a serialized encoding), refused with a
        `DataError` starting with `where` unless `align_pieces_to_tokens` could
        have made it: index arrays of one length, each index within its count,
        the (token, piece) pairs sorted and each there once (`pieces_of` searches
        them). Only the arrays present are read: the counts are compared, never
        allocated, so a count that claims 10**9 tokens costs nothing here (the
        Doc it is read with decides whether it is true)."""
        if len(token_index) != len(piece_index):
            raise DataError(f"{where}: its alignment has {len(token_index)} token indices but {len(piece_index)} "
                            "piece indices (one of each per pair)")
        for name, index, count in (("token", token_index, n_tokens), ("piece", piece_index, n_pieces)):
            if len(index) and not (0 <= index.min() and index.max() < count):
                bad = index.min() if index.min() < 0 else index.max()
                raise DataError(f"{where}: its alignment names {name} {bad}, outside the {count} {name}s it covers")
        same_token = np.diff(token_index) == 0
        if np.any(np.diff(token_index) < 0) or np.any(same_token & (np.diff(piece_index) <= 0)):
            raise DataError(f"{where}: its alignment's (token, piece) pairs are not sorted by token then piece, "
                            "each pair once")
        return cls(n_tokens, n_pieces, token_index, piece_index)


def align_pieces_to_tokens(
    token_starts: np.ndarray,
    token_ends: np.ndarray,
    piece_starts: np.ndarray,
    piece_ends: np.ndarray,
) -> Alignment:
    """Align pieces to the tokens they overlap. Token spans must be sorted and
    non-overlapping (spaCy's are); pieces may come in any order."""
    token_starts = np.asarray(token_starts, dtype=np.int64)
    token_ends = np.asarray(token_ends, dtype=np.int64)
    piece_starts = np.asarray(piece_starts, dtype=np.int64)
    piece_ends = np.asarray(piece_ends, dtype=np.int64)
    n_tokens, n_pieces = len(token_starts), len(piece_starts)
    nonempty = piece_ends > piece_starts
    # first token ending after the piece starts; last token starting before it ends
    first = np.searchsorted(token_ends, piece_starts, side="right")
    last = np.searchsorted(token_starts, piece_ends, side="left") - 1
    # a zero-length token (possible with spaCy) never overlaps anything
    counts = np.where(nonempty, np.maximum(last - first + 1, 0), 0)
    piece_index = np.repeat(np.arange(n_pieces, dtype=np.int64), counts)
    offsets = np.arange(counts.sum(), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    token_index = np.repeat(first, counts) + offsets
    keep = token_ends[token_index] > token_starts[token_index] if len(token_index) else np.zeros(0, bool)
    token_index, piece_index = token_index[keep], piece_index[keep]
    order = np.lexsort((piece_index, token_index))
    return Alignment(n_tokens, n_pieces, token_index[order], piece_index[order])


def align_texts(tokens: Sequence[Tuple[np.ndarray, np.ndarray]], pieces: Sequence[Tuple[np.ndarray, np.ndarray]]) -> List[Alignment]:
    """`align_pieces_to_tokens` of each text's (starts, ends) of tokens and of
    pieces, computed as one call: the texts laid end to end (each shifted past
    the last character of those before it, so no piece reaches another text's
    tokens), the pairs split back by token. A dozen numpy calls per text cost
    more than their work on a batch of sentences."""
    if not tokens:
        return []
    reach = [max(int(t_ends.max(initial=0)), int(p_ends.max(initial=0))) + 1 for (_, t_ends), (_, p_ends) in zip(tokens, pieces)]
    shifts = np.cumsum([0] + reach[:-1])
    n_tokens = [len(starts) for starts, _ in tokens]
    n_pieces = [len(starts) for starts, _ in pieces]
    token_starts, token_ends, piece_starts, piece_ends = (
        np.concatenate([np.asarray(bounds[k], dtype=np.int64) + shift for bounds, shift in zip(side, shifts)])
        for side, k in ((tokens, 0), (tokens, 1), (pieces, 0), (pieces, 1))
    )
    joined = align_pieces_to_tokens(token_starts, token_ends, piece_starts, piece_ends)
    token_offsets = np.cumsum([0] + n_tokens)
    piece_offsets = np.cumsum([0] + n_pieces)
    cuts = np.searchsorted(joined.token_index, token_offsets)
    return [
        Alignment(n_tokens[i], n_pieces[i], joined.token_index[cuts[i]:cuts[i + 1]] - token_offsets[i],
                  joined.piece_index[cuts[i]:cuts[i + 1]] - piece_offsets[i])
        for i in range(len(tokens))
    ]
