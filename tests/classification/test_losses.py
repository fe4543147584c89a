import numpy
import pytest
import torch

from spacy_mlm.classification.losses import (
    balanced_class_weights,
    class_weight_vector,
    sigmoid_binary_cross_entropy,
    softmax_cross_entropy,
)
from spacy_mlm.errors import SettingError


def softmax(z):
    e = numpy.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def sigmoid(z):
    return 1 / (1 + numpy.exp(-z))


def value_and_grad(loss_fn, logits, *args):
    z = torch.tensor(logits, requires_grad=True)
    loss = loss_fn(z, *[None if a is None else torch.tensor(a) for a in args])
    loss.backward()
    return float(loss.detach()), z.grad.numpy()


RNG = numpy.random.default_rng(0)
LOGITS = RNG.normal(size=(4, 3)).astype("float64")
GOLD = numpy.array([0, 2, 1, 2])
ONE_HOT = numpy.eye(3)[GOLD]


def test_cross_entropy_value_and_logit_gradient():
    loss, d = value_and_grad(softmax_cross_entropy, LOGITS, ONE_HOT)
    assert loss == pytest.approx(-numpy.log(softmax(LOGITS)[numpy.arange(4), GOLD]).mean(), rel=1e-6)
    numpy.testing.assert_allclose(d, (softmax(LOGITS) - ONE_HOT) / 4, atol=1e-8)


def test_weighted_cross_entropy_matches_torch_convention():
    weights = numpy.array([1.0, 3.0, 0.5])
    loss, d = value_and_grad(softmax_cross_entropy, LOGITS, ONE_HOT, weights)
    expected = torch.nn.functional.cross_entropy(torch.tensor(LOGITS), torch.tensor(GOLD), weight=torch.tensor(weights))
    assert loss == pytest.approx(float(expected), rel=1e-6)
    w = weights[GOLD]
    numpy.testing.assert_allclose(d, (softmax(LOGITS) - ONE_HOT) * (w / w.sum())[:, None], atol=1e-8)


def test_binary_cross_entropy_with_missing_cells_and_pos_weight():
    truths = numpy.array([[1, 0, 1], [0, 0, 1], [1, 1, 0], [0, 1, 0]], dtype="float64")
    known = numpy.ones_like(truths)
    known[1, 0] = 0
    pos_weight = numpy.array([2.0, 1.0, 0.5])
    loss, d = value_and_grad(sigmoid_binary_cross_entropy, LOGITS, truths, known, pos_weight)
    p = sigmoid(LOGITS)
    cell = -(pos_weight * truths * numpy.log(p) + (1 - truths) * numpy.log(1 - p))
    assert loss == pytest.approx((cell * known).sum() / known.sum(), rel=1e-6)
    # d/dz of -(w t log s(z) + (1-t) log(1-s(z))) = s(z) (w t + 1 - t) - w t
    expected = (p * (pos_weight * truths + 1 - truths) - pos_weight * truths) * known / known.sum()
    numpy.testing.assert_allclose(d, expected, atol=1e-8)
    assert d[1, 0] == 0.0


def test_exclusive_and_multilabel_losses_differ_on_the_same_scores():
    """Softmax CE only looks at the gold class; BCE also penalises confident non-gold labels."""
    logits = numpy.log(numpy.array([[0.7, 0.2, 0.1]]))
    truths = numpy.array([[1.0, 0.0, 0.0]])
    ce, _ = value_and_grad(softmax_cross_entropy, logits, truths)
    bce, d_bce = value_and_grad(sigmoid_binary_cross_entropy, logits, truths)
    assert ce == pytest.approx(-numpy.log(0.7))
    p = sigmoid(logits)
    assert bce == pytest.approx(-(numpy.log(p[0, 0]) + numpy.log(1 - p[0, 1]) + numpy.log(1 - p[0, 2])) / 3)
    assert d_bce[0, 0] < 0 < d_bce[0, 1]


def test_empty_batch():
    loss, d = value_and_grad(softmax_cross_entropy, numpy.zeros((0, 2)), numpy.zeros((0, 2)))
    assert loss == 0.0 and d.shape == (0, 2)


def test_class_weight_vector_and_balanced_weights():
    assert class_weight_vector(["a", "b"], None) is None
    numpy.testing.assert_allclose(class_weight_vector(["a", "b", "c"], {"b": 2.0}), [1.0, 2.0, 1.0])
    with pytest.raises(SettingError, match="does not have"):
        class_weight_vector(["a"], {"z": 1.0})
    with pytest.raises(SettingError, match="positive"):
        class_weight_vector(["a"], {"a": 0.0})
    rows = [["a"]] * 6 + [["b"]] * 2
    assert balanced_class_weights(rows, ["a", "b", "c"], exclusive=True) == pytest.approx(
        {"a": 8 / (3 * 6), "b": 8 / (3 * 2), "c": 1.0}
    )
    multi = [["a", "b"], ["a"], ["a"], []]
    assert balanced_class_weights(multi, ["a", "b"], exclusive=False) == pytest.approx({"a": 1 / 3, "b": 3.0})
