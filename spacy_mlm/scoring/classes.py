"""Counting for exclusive-class classifiers: confusion matrix, and per-example
counts that let the entity bootstrap (`bootstrap.paired_bootstrap`) test an
accuracy difference.

A right answer counts as (tp, fp, fn) = (1, 0, 0) and a wrong one as (0, 1, 1):
the label predicted is a false positive and the gold label a false negative.
Then F1 = 2tp / (2tp + fp + fn) = right / total, i.e. micro-F1 equals accuracy
for single-label classification, and resampling examples resamples accuracy.
"""
from typing import Sequence

import numpy

from ..errors import DataError


def confusion_matrix(gold: Sequence[str], predicted: Sequence[str], labels: Sequence[str]) -> numpy.ndarray:
    """(n_labels, n_labels) counts, rows = gold label, columns = predicted label."""
    if len(gold) != len(predicted):
        raise DataError(f"{len(gold)} gold labels but {len(predicted)} predictions")
    index = {label: i for i, label in enumerate(labels)}
    unknown = sorted((set(gold) | set(predicted)) - set(index))
    if unknown:
        raise DataError(f"labels {unknown} are not in the label set {list(labels)}")
    matrix = numpy.zeros((len(labels), len(labels)), dtype=numpy.int64)
    for g, p in zip(gold, predicted):
        matrix[index[g], index[p]] += 1
    return matrix


def correctness_counts(gold: Sequence[str], predicted: Sequence[str]) -> numpy.ndarray:
    """(n_examples, 3) tp/fp/fn rows, (1, 0, 0) if right and (0, 1, 1) if wrong."""
    if len(gold) != len(predicted):
        raise DataError(f"{len(gold)} gold labels but {len(predicted)} predictions")
    right = numpy.array([g == p for g, p in zip(gold, predicted)], dtype=numpy.int64)
    return numpy.stack([right, 1 - right, 1 - right], axis=1).reshape(-1, 3)
