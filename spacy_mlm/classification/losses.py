"""Classification losses as pure array functions.

Each takes the head's *probabilities* and returns (loss, d_logits): the gradient
with respect to the logits before softmax/sigmoid, which is simple and
numerically safe (p - t, reweighted), so the head's output layer passes it
straight to its linear layer instead of multiplying by the activation's Jacobian
(that product is what makes MSE on sigmoid outputs learn slowly when saturated).
Works with numpy and cupy arrays alike.
"""
from typing import Dict, Iterable, Mapping, Optional, Sequence, Tuple

import numpy
from thinc.api import get_array_module

_EPS = 1e-7


def softmax_cross_entropy(probs, truths, class_weights=None) -> Tuple[float, "numpy.ndarray"]:
    """Mean cross-entropy over rows, for exclusive classes.

    probs, truths: (n, n_classes); each truth row is one-hot.
    class_weights: optional (n_classes,); as in torch's CrossEntropyLoss, a row
    is weighted by its gold class's weight and the mean divides by the total
    weight, so rare classes count more without changing the loss scale."""
    xp = get_array_module(probs)
    n = probs.shape[0]
    if n == 0:
        return 0.0, xp.zeros_like(probs)
    weights = xp.ones((probs.shape[1],), dtype=probs.dtype) if class_weights is None else class_weights
    row_weight = (truths * weights[None, :]).sum(axis=1)
    total = float(row_weight.sum()) or 1.0
    gold_prob = (probs * truths).sum(axis=1)
    loss = float(-(row_weight * xp.log(xp.clip(gold_prob, _EPS, 1.0))).sum() / total)
    d_logits = (probs - truths) * (row_weight / total)[:, None]
    return loss, d_logits.astype(probs.dtype, copy=False)


def sigmoid_binary_cross_entropy(probs, truths, known=None, class_weights=None) -> Tuple[float, "numpy.ndarray"]:
    """Mean binary cross-entropy over the known (row, label) cells, for multi-label.

    known: (n, n_labels) 1 where the gold value is given, 0 where it is missing
    (those cells get no gradient). class_weights: optional (n_labels,) weights
    of the *positive* cells, like torch's BCEWithLogitsLoss `pos_weight`: >1
    makes a rare label's positives count more."""
    xp = get_array_module(probs)
    if known is None:
        known = xp.ones_like(probs)
    pos = xp.ones((probs.shape[1],), dtype=probs.dtype) if class_weights is None else class_weights
    pos_w = truths * pos[None, :]
    n_known = float(known.sum()) or 1.0
    p = xp.clip(probs, _EPS, 1.0 - _EPS)
    cell = -(pos_w * xp.log(p) + (1.0 - truths) * xp.log(1.0 - p))
    loss = float((cell * known).sum() / n_known)
    # d/dz of -(w t log s(z) + (1-t) log(1-s(z))) = s(z) (w t + 1 - t) - w t
    d_logits = (probs * (pos_w + 1.0 - truths) - pos_w) * known / n_known
    return loss, d_logits.astype(probs.dtype, copy=False)


def class_weight_vector(labels: Sequence[str], weights: Optional[Mapping[str, float]]) -> Optional[numpy.ndarray]:
    """Per-label weights in label order; labels not named weigh 1.0."""
    if not weights:
        return None
    unknown = set(weights) - set(labels)
    if unknown:
        raise ValueError(f"class_weights name labels the component does not have: {sorted(unknown)}")
    bad = {k: v for k, v in weights.items() if not v > 0}
    if bad:
        raise ValueError(f"class weights must be positive, got {bad}")
    return numpy.asarray([float(weights.get(label, 1.0)) for label in labels], dtype="float32")


def balanced_class_weights(
    label_rows: Iterable[Iterable[str]], labels: Sequence[str], exclusive: bool
) -> Dict[str, float]:
    """Weights that undo label imbalance, computed from the training data.

    exclusive: scikit-learn's "balanced" weights, n_rows / (n_labels * count),
    so every class contributes as if the data were balanced. Multi-label: the
    positive weight (n_rows - count) / count, so a label's positives and
    negatives weigh the same in total (torch's recipe for `pos_weight`).
    Labels never seen as gold keep weight 1.0."""
    counts = {label: 0 for label in labels}
    n_rows = 0
    for gold in label_rows:
        n_rows += 1
        for label in gold:
            if label in counts:
                counts[label] += 1
    weights = {}
    for label, count in counts.items():
        if not count or (not exclusive and count == n_rows):
            weights[label] = 1.0
        elif exclusive:
            weights[label] = n_rows / (len(labels) * count)
        else:
            weights[label] = (n_rows - count) / count
    return weights
