"""Subword-level tagging: the tagger scores every subword piece, not a pooled
token vector.

`spacy_mlm.EncoderPieceListener.v1` reads the same encoder broadcast as
`spacy_mlm.EncoderListener.v1` but hands on one row per (token, piece) pair of
the alignment, grouped by token, as a thinc `Ragged` per doc (`lengths` = the
number of pieces of each token, 0 for tokens without pieces). The tagger's
linear layer scores each row; `pool_piece_scores` turns the rows into one score
row per token, which is where the component's `subword_decode` option acts:

* ``first``: the token's first piece decides;
* ``mean``: the pieces' distributions are averaged (softmax tagger: the log of
  the mean of the pieces' softmax distributions; CRF: the mean of their scores,
  the CRF's emissions being unnormalised).

Tokens without pieces get a uniform distribution (zero scores) and still a tag.
"""
from typing import List

import numpy
import torch
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model, get_current_ops, torch2xp, xp2torch
from thinc.types import Ragged

from ..models.listener import EncoderListener, _check_width, backprop_to_encoder
from ..models.encoding import ENCODING_ATTR

SUBWORD_POOLINGS = ("first", "mean")


class EncoderPieceListener(EncoderListener):
    """An `EncoderListener` (so the encoder component finds and feeds it) whose
    output is per-piece rows instead of pooled token vectors."""

    name = "mlm_encoder_piece_listener"

    def __init__(self, upstream_name: str, width: int):
        Model.__init__(self, name=self.name, forward=piece_listener_forward, dims={"nO": width}, attrs={"pooling": "pieces"})
        self.upstream_name = upstream_name
        self._batch_id = None
        self._outputs = None
        self._backprop = None


@registry.architectures("spacy_mlm.EncoderPieceListener.v1")
def build_encoder_piece_listener_v1(width: int, upstream: str = "*") -> Model[List[Doc], List[Ragged]]:
    """One row per (token, piece) pair, grouped by token (a `Ragged` per doc).
    width: the encoder's hidden size (384 for MiniLM)."""
    return EncoderPieceListener(upstream, width)


def piece_listener_forward(model: EncoderPieceListener, docs: List[Doc], is_train: bool):
    ops = get_current_ops()
    if is_train and model._outputs is not None and model._batch_id == model.get_batch_id(docs):
        batch = model._outputs
        _check_width(model, int(batch.cls.shape[-1]))
        rows = [h[torch.from_numpy(a.piece_index).to(h.device)] for h, a in zip(batch.hidden, batch.alignments)]
        outputs = [
            Ragged(torch2xp(r.detach()), ops.asarray1i(a.lengths())) for r, a in zip(rows, batch.alignments)
        ]

        def backprop(d_outputs: List[Ragged]) -> List[Doc]:
            backprop_to_encoder(model, rows, [xp2torch(d.data) for d in d_outputs])
            return []

        return outputs, backprop
    if is_train and model._outputs is not None:
        model.verify_inputs(docs)  # raises the spaCy error that explains the mismatch
    outputs = []
    for doc in docs:
        encoding = doc._.get(ENCODING_ATTR)
        if encoding is None:
            # spaCy initializes downstream models on docs the encoder has not seen
            outputs.append(Ragged(ops.alloc2f(0, model.get_dim("nO")), ops.asarray1i(numpy.zeros(len(doc), "i"))))
            continue
        _check_width(model, encoding.width)
        alignment = encoding.alignment
        outputs.append(Ragged(ops.asarray2f(encoding.hidden[alignment.piece_index]), ops.asarray1i(alignment.lengths())))
    return outputs, lambda d_outputs: []


def pool_piece_scores(rows: torch.Tensor, lengths, how: str, log_probs: bool) -> torch.Tensor:
    """(n_tokens, K) token scores from (n_rows, K) piece scores grouped by token.

    `log_probs`: return log-probabilities (softmax tagger) rather than raw scores
    (CRF). Differentiable with respect to `rows`."""
    if how not in SUBWORD_POOLINGS:
        raise ValueError(f"unknown subword pooling {how!r}: expected one of {', '.join(SUBWORD_POOLINGS)}")
    lengths = torch.as_tensor(numpy.asarray(lengths), dtype=torch.long)
    n_tokens, n_tags = len(lengths), rows.shape[1]
    has = (lengths > 0).unsqueeze(1)
    values = torch.log_softmax(rows, dim=-1) if log_probs else rows
    if how == "first":
        starts = torch.cumsum(lengths, 0) - lengths
        present = torch.nonzero(lengths > 0).squeeze(1)
        pooled = rows.new_zeros((n_tokens, n_tags)).index_copy(0, present, values[starts[present]])
        return torch.where(has, pooled, rows.new_full((), -float(numpy.log(n_tags)) if log_probs else 0.0))
    token_of_row = torch.repeat_interleave(torch.arange(n_tokens), lengths)
    counts = lengths.clamp(min=1).to(rows.dtype).unsqueeze(1)
    if not log_probs:
        return rows.new_zeros((n_tokens, n_tags)).index_add(0, token_of_row, values) / counts
    mean_probs = rows.new_zeros((n_tokens, n_tags)).index_add(0, token_of_row, values.exp()) / counts
    return torch.log(torch.where(has, mean_probs, rows.new_full((), 1.0 / n_tags)))
