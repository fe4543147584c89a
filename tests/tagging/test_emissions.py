import numpy
import pytest
import torch

from spacy_mlm.errors import SettingError
from spacy_mlm.tagging.emissions import pool_piece_scores

# 3 tokens: 2 pieces, 0 pieces, 1 piece
ROWS = torch.tensor([[2.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
LENGTHS = [2, 0, 1]


def test_first_piece_decides():
    out = pool_piece_scores(ROWS, LENGTHS, "first", log_probs=False)
    numpy.testing.assert_allclose(out.numpy(), [[2, 0, 0], [0, 0, 0], [0, 0, 1]])
    logp = pool_piece_scores(ROWS, LENGTHS, "first", log_probs=True)
    numpy.testing.assert_allclose(logp[0].numpy(), torch.log_softmax(ROWS[0], 0).numpy())
    numpy.testing.assert_allclose(logp[1].exp().numpy(), [1 / 3] * 3)  # no pieces: uniform


def test_mean_of_distributions():
    logp = pool_piece_scores(ROWS, LENGTHS, "mean", log_probs=True)
    expected = (torch.softmax(ROWS[0], 0) + torch.softmax(ROWS[1], 0)) / 2
    numpy.testing.assert_allclose(logp[0].exp().numpy(), expected.numpy())
    numpy.testing.assert_allclose(logp.exp().sum(1).numpy(), 1.0)
    scores = pool_piece_scores(ROWS, LENGTHS, "mean", log_probs=False)
    numpy.testing.assert_allclose(scores[0].numpy(), [1, 1, 0])


@pytest.mark.parametrize("how", ["first", "mean"])
def test_gradients_are_finite_and_reach_only_used_rows(how):
    rows = ROWS.clone().requires_grad_(True)
    pool_piece_scores(rows, LENGTHS, how, log_probs=True)[:, 0].sum().backward()
    assert torch.isfinite(rows.grad).all()
    if how == "first":
        assert rows.grad[1].abs().sum() == 0 and rows.grad[0].abs().sum() > 0
    else:
        assert rows.grad[1].abs().sum() > 0


def test_unknown_pooling():
    with pytest.raises(SettingError, match="unknown subword pooling"):
        pool_piece_scores(ROWS, LENGTHS, "max", log_probs=True)
