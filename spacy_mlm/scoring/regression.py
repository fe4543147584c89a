"""Scores of a regressor (semantic relatedness, STS): Pearson's r, Spearman's
rho and the root mean squared error, per target and averaged over targets,
registered as `spacy_mlm.regression_scorer.v1` (the scorer of `mlm_regressor`).

SICK and STS report Pearson (and Spearman): both ignore the scale and offset of
the predictions, so a model whose outputs only rank the pairs right still scores;
RMSE says how far off the values themselves are, in the data's units.
"""
from typing import Callable, Dict, Iterable, Optional, Sequence

import numpy
from spacy.training import Example
from spacy.util import registry

from ..errors import DataError


def pearson(predicted: Sequence[float], gold: Sequence[float]) -> Optional[float]:
    """Pearson's correlation; None for fewer than two values or a constant side."""
    x, y = numpy.asarray(predicted, dtype=float), numpy.asarray(gold, dtype=float)
    if len(x) != len(y):
        raise DataError(f"{len(x)} predictions but {len(y)} gold values")
    if len(x) < 2:
        return None
    x, y = x - x.mean(), y - y.mean()
    norm = float(numpy.sqrt((x * x).sum() * (y * y).sum()))
    return float((x * y).sum() / norm) if norm > 0 else None


def average_ranks(values: Sequence[float]) -> numpy.ndarray:
    """1-based ranks, ties sharing the mean of their ranks (as in scipy's rankdata)."""
    values = numpy.asarray(values, dtype=float)
    order = numpy.argsort(values, kind="mergesort")
    ranks = numpy.empty(len(values))
    ranks[order] = numpy.arange(1, len(values) + 1)
    _, groups, counts = numpy.unique(values, return_inverse=True, return_counts=True)
    sums = numpy.bincount(groups, weights=ranks)
    return sums[groups] / counts[groups]


def spearman(predicted: Sequence[float], gold: Sequence[float]) -> Optional[float]:
    """Spearman's rank correlation: Pearson's on the average ranks."""
    if len(predicted) != len(gold):
        raise DataError(f"{len(predicted)} predictions but {len(gold)} gold values")
    return pearson(average_ranks(predicted), average_ranks(gold))


def rmse(predicted: Sequence[float], gold: Sequence[float]) -> Optional[float]:
    x, y = numpy.asarray(predicted, dtype=float), numpy.asarray(gold, dtype=float)
    if len(x) != len(y):
        raise DataError(f"{len(x)} predictions but {len(y)} gold values")
    return float(numpy.sqrt(((x - y) ** 2).mean())) if len(x) else None


def _mean(values) -> Optional[float]:
    known = [v for v in values if v is not None]
    return float(numpy.mean(known)) if known else None


def regression_score(examples: Iterable[Example], *, labels: Sequence[str], **cfg) -> Dict[str, object]:
    """`regression_pearson`, `regression_spearman`, `regression_rmse` (means over
    the targets) and `regression_per_target` ({target: {pearson, spearman, rmse}}),
    from `doc.cats[target]` of the predicted and the reference docs. Examples
    whose reference leaves a target out are not scored for it. `**cfg` takes
    the other settings spaCy passes a scorer."""
    examples = list(examples)
    per_target = {}
    for label in labels:
        pairs = [(eg.predicted.cats[label], eg.reference.cats[label]) for eg in examples
                 if label in eg.reference.cats and label in eg.predicted.cats]
        predicted, gold = [p for p, _ in pairs], [g for _, g in pairs]
        per_target[label] = {"pearson": pearson(predicted, gold), "spearman": spearman(predicted, gold),
                             "rmse": rmse(predicted, gold)}
    return {
        "regression_pearson": _mean(s["pearson"] for s in per_target.values()),
        "regression_spearman": _mean(s["spearman"] for s in per_target.values()),
        "regression_rmse": _mean(s["rmse"] for s in per_target.values()),
        "regression_per_target": per_target,
    }


@registry.scorers("spacy_mlm.regression_scorer.v1")
def make_regression_scorer() -> Callable:
    """Pearson, Spearman and RMSE of `doc.cats[target]` for each of the component's targets."""
    return regression_score
