import numpy
import pytest

from spacy_mlm.classification.losses import (
    balanced_class_weights,
    class_weight_vector,
    sigmoid_binary_cross_entropy,
    softmax_cross_entropy,
)


def softmax(z):
    e = numpy.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def sigmoid(z):
    return 1 / (1 + numpy.exp(-z))


def numeric_grad(f, z, eps=1e-3):
    grad = numpy.zeros_like(z)
    for index in numpy.ndindex(z.shape):
        up, down = z.copy(), z.copy()
        up[index] += eps
        down[index] -= eps
        grad[index] = (f(up) - f(down)) / (2 * eps)
    return grad


RNG = numpy.random.default_rng(0)
LOGITS = RNG.normal(size=(4, 3)).astype("float64")
ONE_HOT = numpy.eye(3)[[0, 2, 1, 2]]


def test_cross_entropy_value_and_logit_gradient():
    loss, d = softmax_cross_entropy(softmax(LOGITS), ONE_HOT)
    expected = -numpy.log(softmax(LOGITS)[numpy.arange(4), [0, 2, 1, 2]]).mean()
    assert loss == pytest.approx(expected, rel=1e-6)
    numeric = numeric_grad(lambda z: softmax_cross_entropy(softmax(z), ONE_HOT)[0], LOGITS)
    numpy.testing.assert_allclose(d, numeric, atol=1e-6)


def test_weighted_cross_entropy_matches_torch_convention():
    weights = numpy.array([1.0, 3.0, 0.5])
    loss, d = softmax_cross_entropy(softmax(LOGITS), ONE_HOT, weights)
    gold = numpy.array([0, 2, 1, 2])
    w = weights[gold]
    expected = -(w * numpy.log(softmax(LOGITS)[numpy.arange(4), gold])).sum() / w.sum()
    assert loss == pytest.approx(expected, rel=1e-6)
    numeric = numeric_grad(lambda z: softmax_cross_entropy(softmax(z), ONE_HOT, weights)[0], LOGITS)
    numpy.testing.assert_allclose(d, numeric, atol=1e-6)


def test_binary_cross_entropy_with_missing_cells_and_pos_weight():
    truths = numpy.array([[1, 0, 1], [0, 0, 1], [1, 1, 0], [0, 1, 0]], dtype="float64")
    known = numpy.ones_like(truths)
    known[1, 0] = 0
    pos_weight = numpy.array([2.0, 1.0, 0.5])
    loss, d = sigmoid_binary_cross_entropy(sigmoid(LOGITS), truths, known, pos_weight)
    p = sigmoid(LOGITS)
    cell = -(pos_weight * truths * numpy.log(p) + (1 - truths) * numpy.log(1 - p))
    assert loss == pytest.approx((cell * known).sum() / known.sum(), rel=1e-6)
    numeric = numeric_grad(lambda z: sigmoid_binary_cross_entropy(sigmoid(z), truths, known, pos_weight)[0], LOGITS)
    numpy.testing.assert_allclose(d, numeric, atol=1e-6)
    assert d[1, 0] == 0.0


def test_exclusive_and_multilabel_losses_differ_on_the_same_scores():
    """Softmax CE only looks at the gold class; BCE also penalises confident non-gold labels."""
    probs = numpy.array([[0.7, 0.2, 0.1]])
    truths = numpy.array([[1.0, 0.0, 0.0]])
    ce, d_ce = softmax_cross_entropy(probs, truths)
    bce, d_bce = sigmoid_binary_cross_entropy(probs, truths)
    assert ce == pytest.approx(-numpy.log(0.7))
    assert bce == pytest.approx(-(numpy.log(0.7) + numpy.log(0.8) + numpy.log(0.9)) / 3)
    numpy.testing.assert_allclose(d_ce, [[-0.3, 0.2, 0.1]])
    numpy.testing.assert_allclose(d_bce, [[-0.1, 0.2 / 3, 0.1 / 3]])


def test_empty_batch():
    loss, d = softmax_cross_entropy(numpy.zeros((0, 2), "f"), numpy.zeros((0, 2), "f"))
    assert loss == 0.0 and d.shape == (0, 2)


def test_class_weight_vector_and_balanced_weights():
    assert class_weight_vector(["a", "b"], None) is None
    numpy.testing.assert_allclose(class_weight_vector(["a", "b", "c"], {"b": 2.0}), [1.0, 2.0, 1.0])
    with pytest.raises(ValueError, match="does not have"):
        class_weight_vector(["a"], {"z": 1.0})
    with pytest.raises(ValueError, match="positive"):
        class_weight_vector(["a"], {"a": 0.0})
    rows = [["a"]] * 6 + [["b"]] * 2
    assert balanced_class_weights(rows, ["a", "b", "c"], exclusive=True) == pytest.approx(
        {"a": 8 / (3 * 6), "b": 8 / (3 * 2), "c": 1.0}
    )
    multi = [["a", "b"], ["a"], ["a"], []]
    assert balanced_class_weights(multi, ["a", "b"], exclusive=False) == pytest.approx({"a": 1 / 3, "b": 3.0})
