"""How far a model's probabilities can be taken at their word, and the
temperature that makes them better: pure numpy.

A score p of "this prediction is right" is calibrated when, of the predictions
scored about p, a fraction p is right. `reliability_bins` groups the scores in
equal-width bins (15, the usual number since Guo et al. 2017), the expected
calibration error is the mean gap between each bin's mean score and its
accuracy, weighted by its count; `binary_nll` is the negative log-likelihood
of the outcomes under the scores, the proper scoring rule a temperature is
fitted to (`fit_temperature`: golden-section search over log T, since the
likelihood of one temperature is cheap to compute again but has no gradient
at hand).

A temperature reshapes every probability of a model alike; what it cannot
do is make mid scores less sure and high ones surer at once, the shape entity
probabilities keep after it (docs/ner.md). `fit_score_scaling` fits the
two-parameter logistic map of Platt (1999) on top, p -> sigmoid(slope *
logit(p) + intercept), by Newton's method on its convex likelihood; (1, 0) is
no change, and the map is increasing, so it orders scores as before and a
threshold on mapped scores is one on the scores (`unscaled_threshold`).
"""
import math
from dataclasses import dataclass
from typing import Callable, List, Sequence, Tuple

import numpy

from ..errors import DataError

ECE_BINS = 15
# probabilities are kept this far from 0 and 1 in the log-likelihood
_EPS = 1e-12


@dataclass
class ReliabilityBin:
    low: float
    high: float
    count: int
    mean_score: float
    accuracy: float


def _checked(probs: Sequence[float], correct: Sequence[bool]):
    probs, correct = numpy.asarray(probs, dtype=float), numpy.asarray(correct, dtype=bool)
    if probs.shape != correct.shape or probs.ndim != 1:
        raise DataError(f"probabilities {probs.shape} and outcomes {correct.shape} must be two lists of one length")
    return probs, correct


def reliability_bins(probs: Sequence[float], correct: Sequence[bool], n_bins: int = ECE_BINS) -> List[ReliabilityBin]:
    """The scores in `n_bins` equal-width bins over [0, 1] (a score of 1 in the
    last): each bin's count, mean score and accuracy (0 for an empty bin)."""
    probs, correct = _checked(probs, correct)
    which = numpy.minimum((probs * n_bins).astype(int), n_bins - 1)
    bins = []
    for b in range(n_bins):
        inside = which == b
        count = int(inside.sum())
        bins.append(ReliabilityBin(b / n_bins, (b + 1) / n_bins, count,
                                   float(probs[inside].mean()) if count else 0.0,
                                   float(correct[inside].mean()) if count else 0.0))
    return bins


def expected_calibration_error(probs: Sequence[float], correct: Sequence[bool], n_bins: int = ECE_BINS) -> float:
    """sum over bins of count / n * |mean score - accuracy| (0 for no scores)."""
    total = len(probs)
    if not total:
        return 0.0
    return float(sum(b.count / total * abs(b.mean_score - b.accuracy) for b in reliability_bins(probs, correct, n_bins)))


def binary_nll(probs: Sequence[float], correct: Sequence[bool]) -> float:
    """Mean -log p of the right predictions and -log(1 - p) of the wrong ones."""
    probs, correct = _checked(probs, correct)
    if not len(probs):
        return 0.0
    probs = numpy.clip(probs, _EPS, 1 - _EPS)
    return float(-numpy.mean(numpy.where(correct, numpy.log(probs), numpy.log1p(-probs))))


def fit_temperature(loss_at: Callable[[float], float], *, start: float = 1.0, low: float = 0.05, high: float = 20.0,
                    tolerance: float = 1e-3) -> float:
    """The temperature in [low, high] with the least `loss_at(T)`, by
    golden-section search over log T to `tolerance` (relative); `start` (the
    temperature in use) is kept unless the search finds a lower loss, so the
    fitted loss is never above the one at `start`."""
    ratio = (math.sqrt(5) - 1) / 2
    a, b = math.log(low), math.log(high)
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = loss_at(math.exp(c)), loss_at(math.exp(d))
    while b - a > tolerance:
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = loss_at(math.exp(c))
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = loss_at(math.exp(d))
    best, best_loss = (math.exp(c), fc) if fc <= fd else (math.exp(d), fd)
    return best if best_loss < loss_at(start) else start


NO_SCALING = (1.0, 0.0)


def _logit(probs: numpy.ndarray) -> numpy.ndarray:
    probs = numpy.clip(probs, _EPS, 1 - _EPS)
    return numpy.log(probs) - numpy.log1p(-probs)


def scaled_scores(probs: Sequence[float], scaling: Sequence[float]) -> numpy.ndarray:
    """sigmoid(slope * logit(p) + intercept) for each p; `scaling` = (slope, intercept)."""
    slope, intercept = scaling
    probs = numpy.asarray(probs, dtype=float)
    if (slope, intercept) == NO_SCALING:
        return probs
    return 1.0 / (1.0 + numpy.exp(-(slope * _logit(probs) + intercept)))


def unscaled_threshold(threshold: float, scaling: Sequence[float]) -> float:
    """The score whose scaled value is `threshold` (0 and 1 stay), so that
    keeping scaled scores >= threshold keeps the same predictions as keeping
    scores >= unscaled_threshold(threshold)."""
    slope, intercept = scaling
    if (slope, intercept) == NO_SCALING or threshold <= 0.0 or threshold >= 1.0:
        return threshold
    return float(1.0 / (1.0 + math.exp(-(float(_logit(numpy.asarray(threshold))) - intercept) / slope)))


def fit_score_scaling(probs: Sequence[float], correct: Sequence[bool], *, max_iterations: int = 50,
                      min_slope: float = 1e-3) -> Tuple[float, float]:
    """The (slope, intercept) with the least `binary_nll` of
    `scaled_scores(probs, (slope, intercept))`, by Newton's method (a logistic
    regression on logit p, with a small ridge so that outcomes all alike stay
    finite); the slope is kept above `min_slope`, so the map stays increasing.
    (1, 0) where it would not lower the likelihood."""
    probs, correct = _checked(probs, correct)
    if not len(probs):
        return NO_SCALING
    x, y = _logit(probs), correct.astype(float)
    features = numpy.stack([x, numpy.ones_like(x)], axis=1)
    ridge = 1e-6 * len(x)
    weights = numpy.array(NO_SCALING)
    for _ in range(max_iterations):
        q = 1.0 / (1.0 + numpy.exp(-(features @ weights)))
        gradient = features.T @ (q - y) + ridge * (weights - NO_SCALING)
        hessian = (features * (q * (1 - q))[:, None]).T @ features + ridge * numpy.eye(2)
        step = numpy.linalg.solve(hessian, gradient)
        weights = weights - step
        if numpy.abs(step).max() < 1e-10:
            break
    scaling = (max(float(weights[0]), min_slope), float(weights[1]))
    if not numpy.all(numpy.isfinite(scaling)):
        return NO_SCALING
    return scaling if binary_nll(scaled_scores(probs, scaling), correct) < binary_nll(probs, correct) else NO_SCALING


def _precision_by_rank(scores: Sequence[float], correct: Sequence[bool]) -> numpy.ndarray:
    """Precision of the k highest-scored predictions, k = 1..n (ties in the
    given order: a stable sort)."""
    scores, correct = _checked(scores, correct)
    ranked = correct[numpy.argsort(-scores, kind="stable")]
    return numpy.cumsum(ranked) / numpy.arange(1, len(ranked) + 1)


def precision_coverage_area(scores: Sequence[float], correct: Sequence[bool]) -> float:
    """The area under the precision-coverage curve: keeping the k most
    confident predictions (coverage k / n), the mean of their precision over
    k = 1..n. 1 when every right prediction scores above every wrong one;
    the overall precision for scores that say nothing (0 for no predictions)."""
    precision = _precision_by_rank(scores, correct)
    return float(precision.mean()) if len(precision) else 0.0


def precision_at_coverage(scores: Sequence[float], correct: Sequence[bool], coverage: float) -> float:
    """The precision of the ceil(coverage * n) highest-scored predictions
    (those above the score threshold that keeps that share)."""
    precision = _precision_by_rank(scores, correct)
    if not len(precision):
        return 0.0
    return float(precision[max(1, math.ceil(coverage * len(precision))) - 1])


def decision_confidence(probs: numpy.ndarray, truths: numpy.ndarray, known: numpy.ndarray,
                        exclusive: bool) -> Tuple[numpy.ndarray, numpy.ndarray]:
    """A classifier's decisions as (score, right) pairs for the ECE. probs,
    truths, known: (n, n_labels). Exclusive classes: one per row, the top
    class's probability and whether it is the gold class. Multi-label: one per
    known cell, the probability of the side decided (p >= 0.5: the label is
    on) and whether the gold value agrees."""
    probs, truths, known = numpy.asarray(probs), numpy.asarray(truths) >= 0.5, numpy.asarray(known) > 0
    if exclusive:
        top = probs.argmax(axis=1)
        rows = numpy.arange(len(probs))
        return probs[rows, top], truths[rows, top]
    on = probs >= 0.5
    return numpy.where(on, probs, 1 - probs)[known], (on == truths)[known]
