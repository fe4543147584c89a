"""Pure scoring for binary same-meaning decisions: row-wise cosine and the
single threshold on it that best separates True from False pairs."""
from typing import Sequence, Tuple

import numpy

from ..errors import SpacyMlmError


def cosine_rows(A, B) -> numpy.ndarray:
    """Cosine of each row of A with the same row of B; 0.0 where either is zero."""
    A = numpy.asarray(A, dtype="float64")
    B = numpy.asarray(B, dtype="float64")
    if A.shape != B.shape:
        raise SpacyMlmError(f"cosine_rows needs equal shapes, got {A.shape} and {B.shape}")
    norms = numpy.linalg.norm(A, axis=-1) * numpy.linalg.norm(B, axis=-1)
    dots = (A * B).sum(axis=-1)
    return numpy.divide(dots, norms, out=numpy.zeros_like(dots), where=norms > 0)


def accuracy_at(scores: Sequence[float], labels: Sequence[bool], threshold: float) -> float:
    """Accuracy of predicting True iff score >= threshold."""
    scores = numpy.asarray(scores, dtype="float64")
    labels = numpy.asarray(labels, dtype=bool)
    if scores.shape != labels.shape or scores.size == 0:
        raise SpacyMlmError(f"need equally many scores and labels (>0), got {scores.size} and {labels.size}")
    return float(((scores >= threshold) == labels).mean())


def tune_threshold(scores: Sequence[float], labels: Sequence[bool]) -> Tuple[float, float]:
    """The threshold (predict True iff score >= threshold) with the highest
    accuracy on (scores, labels), and that accuracy. Candidates are the
    midpoints between consecutive distinct scores plus one below and one above
    all scores, so the result is exact, in O(n log n). Ties go to the lowest
    threshold."""
    scores = numpy.asarray(scores, dtype="float64")
    labels = numpy.asarray(labels, dtype=bool)
    if scores.shape != labels.shape or scores.ndim != 1 or scores.size == 0:
        raise SpacyMlmError(f"need equally many scores and labels (>0), got {scores.size} and {labels.size}")
    order = numpy.argsort(scores, kind="stable")
    s, y = scores[order], labels[order]
    n = s.size
    # Cutting before position k predicts False for s[:k] and True for s[k:].
    neg_below = numpy.concatenate([[0], numpy.cumsum(~y)])
    pos_from = numpy.concatenate([numpy.cumsum(y[::-1])[::-1], [0]])
    correct = neg_below + pos_from
    # Only cuts between distinct values (and both ends) are reachable.
    valid = numpy.ones(n + 1, dtype=bool)
    valid[1:n] = s[1:] != s[:-1]
    k = int(numpy.flatnonzero(valid)[numpy.argmax(correct[valid])])
    if k == 0:
        threshold = s[0] - 1.0
    elif k == n:
        threshold = s[-1] + 1.0
    else:
        threshold = (s[k - 1] + s[k]) / 2.0
    return float(threshold), float(correct[k] / n)
