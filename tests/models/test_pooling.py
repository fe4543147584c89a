"""Token pooling over a batch in one call gives each doc what pooling it alone gives."""
import numpy
import pytest
import torch

from spacy_mlm.models.pooling import TOKEN_POOLINGS, pool_docs_tokens, pool_tokens
from spacy_mlm.tokenization.align import Alignment


def _alignment(pairs, n_tokens, n_pieces):
    tokens = numpy.asarray([t for t, _ in pairs], dtype=numpy.int64)
    pieces = numpy.asarray([p for _, p in pairs], dtype=numpy.int64)
    return Alignment(n_tokens, n_pieces, tokens, pieces)


# a token of 3 pieces, a piece shared by two tokens, a token without pieces, a doc without tokens,
# a doc whose pieces align to nothing
ALIGNMENTS = [
    _alignment([(0, 0), (1, 1), (1, 2), (1, 3), (2, 4)], 3, 5),
    _alignment([(0, 0), (1, 0), (3, 1), (3, 2)], 4, 3),
    _alignment([], 0, 0),
    _alignment([], 2, 2),
    _alignment([(0, 1), (1, 0)], 2, 2),
]


def _grads(rows, weights, hidden):
    """d(sum of rows x weights)/d(hidden), zeros for a doc the sum does not use."""
    grads = torch.autograd.grad(sum((r * w).sum() for r, w in zip(rows, weights)), hidden, allow_unused=True)
    return [torch.zeros_like(h) if g is None else g for g, h in zip(grads, hidden)]


@pytest.mark.parametrize("pooling", TOKEN_POOLINGS)
def test_batch_pooling_matches_each_doc_and_its_gradients(pooling):
    torch.manual_seed(0)
    hidden = [torch.randn(a.n_pieces, 6, requires_grad=True) for a in ALIGNMENTS]
    alone = [pool_tokens(h, a, pooling) for h, a in zip(hidden, ALIGNMENTS)]
    weights = [torch.randn(a.n_tokens, 6) for a in ALIGNMENTS]
    expected_grads = _grads(alone, weights, hidden)
    together = pool_docs_tokens(hidden, ALIGNMENTS, pooling)
    assert [tuple(r.shape) for r in together] == [(a.n_tokens, 6) for a in ALIGNMENTS]
    for got, want in zip(together, alone):
        assert torch.allclose(got, want, atol=1e-6)
    for got, want in zip(_grads(together, weights, hidden), expected_grads):
        assert torch.allclose(got, want)


def test_batch_pooling_of_no_docs():
    assert pool_docs_tokens([], [], "first") == []


def _reference(hidden, alignment, pooling):
    """Token by token, as the pooling's name says; zeros for a token without pieces."""
    rows = []
    for token in range(alignment.n_tokens):
        pieces = [int(p) for t, p in zip(alignment.token_index, alignment.piece_index) if t == token]
        if not pieces:
            rows.append(torch.zeros(hidden.shape[-1]))
            continue
        chosen = hidden[pieces]
        rows.append({"first": chosen[0], "last": chosen[-1], "mean": chosen.mean(0), "max": chosen.max(0).values}[pooling])
    return torch.stack(rows) if rows else torch.zeros(0, hidden.shape[-1])


@pytest.mark.parametrize("pooling", TOKEN_POOLINGS)
@pytest.mark.parametrize("alignment", ALIGNMENTS)
def test_token_pooling_as_its_name_says(pooling, alignment):
    hidden = torch.randn(alignment.n_pieces, 4)
    assert torch.allclose(pool_tokens(hidden, alignment, pooling), _reference(hidden, alignment, pooling))
