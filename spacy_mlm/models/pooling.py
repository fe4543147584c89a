"""Pooling as pure torch functions: from the encoder's piece vectors to one
vector per token or per doc, and from per-piece tag scores to per-token ones.
Differentiable and device-agnostic (index tensors follow the input's device),
so training and prediction pool the same way on CPU and GPU."""
from typing import List, Optional, Sequence

import numpy
import torch

from ..errors import SettingError
from ..tokenization.align import Alignment

TOKEN_POOLINGS = ("first", "mean", "last", "max")
DOC_POOLINGS = ("cls", "doc_mean", "pooler", "pair_mean")
# doc poolings whose row is wider than the encoder: pair_mean is [u, v, |u - v|]
POOLING_WIDTH_FACTOR = {"pair_mean": 3}


def _index(array: numpy.ndarray, device: torch.device) -> torch.Tensor:
    return torch.from_numpy(numpy.ascontiguousarray(array, dtype=numpy.int64)).to(device)


def pool_tokens(hidden: torch.Tensor, alignment: Alignment, pooling: str) -> torch.Tensor:
    """(n_tokens, width): one row per spaCy token from the rows of its pieces;
    tokens without pieces get zeros."""
    n_tokens, width = alignment.n_tokens, hidden.shape[-1]
    if len(alignment.token_index) == 0:
        return hidden.new_zeros((n_tokens, width))
    if pooling in ("first", "last"):
        # one row look-up (index_select: on a CPU faster than indexing with a tensor or index_copy
        # into zeros), a token without pieces reading an appended zero row
        lengths = alignment.lengths()
        ends = numpy.cumsum(lengths)
        has = lengths > 0
        rows = numpy.full(n_tokens, len(hidden), dtype=numpy.int64)  # the zero row's index
        rows[has] = alignment.piece_index[(ends - lengths)[has] if pooling == "first" else ends[has] - 1]
        source = hidden if has.all() else torch.cat([hidden, hidden.new_zeros((1, width))])
        return source.index_select(0, _index(rows, hidden.device))
    out = hidden.new_zeros((n_tokens, width))
    tok = _index(alignment.token_index, hidden.device)
    piece_rows = hidden.index_select(0, _index(alignment.piece_index, hidden.device))
    if pooling == "mean":
        out = out.index_add(0, tok, piece_rows)
        counts = torch.bincount(tok, minlength=n_tokens).clamp(min=1).to(hidden.dtype)
        return out / counts[:, None]
    if pooling == "max":
        index = tok[:, None].expand(-1, width)
        return out.scatter_reduce(0, index, piece_rows, reduce="amax", include_self=False)
    raise SettingError(f"unknown pooling {pooling!r}: expected one of {', '.join(TOKEN_POOLINGS)}")


def pool_docs_tokens(hidden: Sequence[torch.Tensor], alignments: Sequence[Alignment], pooling: str) -> List[torch.Tensor]:
    """`pool_tokens` of each doc, computed as one call over the batch: the docs'
    pieces stacked and their alignments joined (each doc's pieces and tokens
    offset by those before it): a doc's handful of small tensor operations
    costs more than their arithmetic on a batch of sentences. Each doc's rows
    are a view of the batch's; gradients flow back to every doc's `hidden`."""
    if not hidden:
        return []
    n_pieces = numpy.cumsum([0] + [a.n_pieces for a in alignments])
    n_tokens = numpy.cumsum([0] + [a.n_tokens for a in alignments])
    joined = Alignment(
        n_tokens=int(n_tokens[-1]), n_pieces=int(n_pieces[-1]),
        token_index=numpy.concatenate([a.token_index + n_tokens[i] for i, a in enumerate(alignments)]),
        piece_index=numpy.concatenate([a.piece_index + n_pieces[i] for i, a in enumerate(alignments)]),
    )
    device = hidden[0].device
    rows = pool_tokens(torch.cat([h.to(device) for h in hidden]), joined, pooling)
    return list(torch.split(rows, [a.n_tokens for a in alignments]))


def pool_pair_sides(hidden: torch.Tensor, cls: torch.Tensor, alignment: Alignment, pair_start: Optional[int]) -> torch.Tensor:
    """(1, 3 * width): [u, v, |u - v|] with u the mean of side A's pieces and v
    of side B's (the tokens from `pair_start` on), both read from the one
    cross-encoded pass: Sentence-BERT's classification features. Encoders trained
    as mean-pooled sentence embedders (the sentence-transformers family) put
    their meaning in the mean of the pieces, not in [CLS]. A side without pieces
    reads as the [CLS] vector; a single text (`pair_start` None) as u = v."""
    pieces = alignment.piece_index  # grouped by token, in token order
    if pair_start is None:
        a_rows = b_rows = pieces
    else:
        split = int(numpy.searchsorted(alignment.token_index, pair_start))
        a_rows, b_rows = pieces[:split], pieces[split:]
    u, v = (hidden[_index(rows, hidden.device)].mean(dim=0) if len(rows) else cls for rows in (a_rows, b_rows))
    return torch.cat([u, v, (u - v).abs()])[None, :]


def pool_doc(
    hidden: torch.Tensor, cls: torch.Tensor, alignment: Alignment, pooling: str, pooled: Optional[torch.Tensor] = None,
    pair_start: Optional[int] = None,
) -> torch.Tensor:
    """A listener's rows for one doc: (1, width) for "cls" (the [CLS] vector),
    "doc_mean" (mean over the pieces; [CLS] for a doc without pieces) and "pooler"
    (`pooled`, the model's pretrained dense + tanh over [CLS]; the [CLS] vector
    where the model has no pooler), (1, 3 * width) for "pair_mean"
    (`pool_pair_sides`, with side B from token `pair_start`), else (n_tokens,
    width) by `pool_tokens`."""
    if pooling == "pair_mean":
        return pool_pair_sides(hidden, cls, alignment, pair_start)
    if pooling == "pooler" and pooled is not None:
        return pooled[None, :]
    if pooling in ("cls", "pooler"):
        return cls[None, :]
    if pooling == "doc_mean":
        return cls[None, :] if len(hidden) == 0 else hidden.mean(dim=0, keepdim=True)
    return pool_tokens(hidden, alignment, pooling)


def piece_rows(hidden: torch.Tensor, alignment: Alignment) -> torch.Tensor:
    """(n_pairs, width): one row per (token, piece) pair of the alignment,
    grouped by token (a piece shared by two tokens appears under both)."""
    return hidden[_index(alignment.piece_index, hidden.device)]
