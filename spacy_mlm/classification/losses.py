"""Classification and regression losses as pure torch functions of the logits
(or, for regression, of the predicted values).

Each returns the mean loss as a scalar tensor; its gradient comes from
autograd on the logits' device. The mean is over the whole step's batch: in
a data-parallel run its denominator is summed over the processes
(`util.global_batch.step_sum`). Working on logits (log_softmax,
binary_cross_entropy_with_logits) rather than on probabilities keeps them
numerically safe, and unlike spaCy's textcat (a squared error on the
probabilities) the gradient does not vanish when a sigmoid saturates.
"""
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy
import torch

from ..errors import SettingError
from ..util.global_batch import step_sum


def softmax_cross_entropy(logits: torch.Tensor, truths: torch.Tensor, class_weights: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Mean cross-entropy over rows, for exclusive classes.

    logits, truths: (n, n_classes); each truth row is one-hot.
    class_weights: optional (n_classes,); as in torch's CrossEntropyLoss, a row
    is weighted by its gold class's weight and the mean divides by the total
    weight, so rare classes count more without changing the loss scale."""
    row_weight = truths.sum(dim=1) if class_weights is None else (truths * class_weights[None, :]).sum(dim=1)
    nll = -(torch.log_softmax(logits, dim=-1) * truths).sum(dim=1)
    return (row_weight * nll).sum() / step_sum(row_weight.sum()).clamp(min=1e-12)


def sigmoid_binary_cross_entropy(
    logits: torch.Tensor,
    truths: torch.Tensor,
    known: Optional[torch.Tensor] = None,
    class_weights: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Mean binary cross-entropy over the known (row, label) cells, for multi-label.

    known: (n, n_labels) 1 where the gold value is given, 0 where it is missing
    (those cells get no gradient). class_weights: optional (n_labels,) weights
    of the *positive* cells, torch's `pos_weight`: >1 makes a rare label's
    positives count more."""
    if known is None:
        known = torch.ones_like(truths)
    cells = torch.nn.functional.binary_cross_entropy_with_logits(
        logits, truths, pos_weight=class_weights, reduction="none"
    )
    return (cells * known).sum() / step_sum(known.sum()).clamp(min=1.0)


def class_weight_vector(labels: Sequence[str], weights: Optional[Mapping[str, float]]) -> Optional[numpy.ndarray]:
    """Per-label weights in label order; labels not named weigh 1.0."""
    if not weights:
        return None
    unknown = set(weights) - set(labels)
    if unknown:
        raise SettingError(f"class_weights name labels the component does not have: {sorted(unknown)}")
    bad = {k: v for k, v in weights.items() if not v > 0}
    if bad:
        raise SettingError(f"class weights must be positive, got {bad}")
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


def mean_squared_error(predictions: torch.Tensor, targets: torch.Tensor, known: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Mean squared error over the known (row, target) cells, for regression.
    known: (n, n_targets) 1 where the gold value is given, 0 where it is missing."""
    if known is None:
        known = torch.ones_like(targets)
    return (((predictions - targets) ** 2) * known).sum() / step_sum(known.sum()).clamp(min=1.0)


def target_standardization(columns: Sequence[Sequence[float]]) -> Tuple[List[float], List[float]]:
    """(means, scales) of each target's training values, so that a regressor
    learns (y - mean) / scale. Adam moves each weight by about the learning rate
    per step, so a head learning raw SICK scores (1 to 5, mean 3.5) at 5e-5 would
    need tens of thousands of steps just to bring its bias to the mean; on the
    standardized scale it starts there. A target without values gets mean 0,
    one without spread (a single value, or all alike) scale 1."""
    means, scales = [], []
    for values in columns:
        values = numpy.asarray(values, dtype="float64")
        mean = float(values.mean()) if len(values) else 0.0
        spread = float(values.std()) if len(values) > 1 else 0.0
        means.append(mean)
        scales.append(spread if spread > 0 else 1.0)
    return means, scales
