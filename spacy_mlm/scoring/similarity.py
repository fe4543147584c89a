"""Pure scoring for binary same-meaning decisions: the threshold on a score
(one, or one per group) that best separates True from False pairs; the score
is usually a row-wise cosine (`util/vectors.py`)."""
from typing import Dict, Sequence, Tuple

import numpy

from ..errors import SpacyMlmError


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


def tune_group_thresholds(
    scores: Sequence[float], labels: Sequence[bool], groups: Sequence[str]
) -> Tuple[Dict[str, float], float, float]:
    """One threshold per group (e.g. per part of speech: cosines of verbs and of
    nouns sit at different levels, so one cut-off suits neither), each tuned
    exactly as in `tune_threshold`, plus a fallback threshold tuned on all
    scores for groups not seen here. Returns (thresholds by group, fallback,
    accuracy on these scores)."""
    scores = numpy.asarray(scores, dtype="float64")
    labels = numpy.asarray(labels, dtype=bool)
    groups = numpy.asarray(groups)
    if groups.shape != scores.shape:
        raise SpacyMlmError(f"need one group per score, got {groups.size} groups for {scores.size} scores")
    fallback, _ = tune_threshold(scores, labels)
    thresholds = {str(g): tune_threshold(scores[groups == g], labels[groups == g])[0] for g in numpy.unique(groups)}
    accuracy = float((predict_by_group(scores, groups, thresholds, fallback) == labels).mean())
    return thresholds, fallback, accuracy


def predict_by_group(
    scores: Sequence[float], groups: Sequence[str], thresholds: Dict[str, float], fallback: float
) -> numpy.ndarray:
    """True iff score >= its group's threshold (`fallback` for unknown groups)."""
    scores = numpy.asarray(scores, dtype="float64")
    cuts = numpy.asarray([thresholds.get(str(g), fallback) for g in groups], dtype="float64")
    if cuts.shape != scores.shape:
        raise SpacyMlmError(f"need one group per score, got {cuts.size} groups for {scores.size} scores")
    return scores >= cuts
