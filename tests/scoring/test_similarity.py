import itertools

import numpy
import pytest

from spacy_mlm.errors import SpacyMlmError
from spacy_mlm.scoring.similarity import (
    accuracy_at,
    predict_by_group,
    tune_group_thresholds,
    tune_threshold,
)


def test_tune_threshold_separable():
    scores = [0.9, 0.1, 0.3, 0.8, 0.2]
    labels = [True, False, False, True, False]
    threshold, acc = tune_threshold(scores, labels)
    assert acc == 1.0
    assert threshold == pytest.approx(0.55)
    assert accuracy_at(scores, labels, threshold) == 1.0


def test_tune_threshold_noisy_hand_made():
    # Sorted: 0.1F 0.2T 0.3F 0.4F 0.5T 0.6T 0.7F 0.8T -> best cut between 0.4 and 0.5 (6/8).
    scores = [0.5, 0.1, 0.7, 0.3, 0.8, 0.2, 0.6, 0.4]
    labels = [True, False, False, False, True, True, True, False]
    threshold, acc = tune_threshold(scores, labels)
    assert threshold == pytest.approx(0.45)
    assert acc == pytest.approx(6 / 8)


def test_tune_threshold_all_one_class_and_ties():
    assert tune_threshold([0.2, 0.5, 0.5], [True, True, True]) == (pytest.approx(-0.8), 1.0)
    assert tune_threshold([0.2, 0.5], [False, False]) == (pytest.approx(1.5), 1.0)
    # Tied scores with different labels cannot be split: best is 2/3.
    threshold, acc = tune_threshold([0.5, 0.5, 0.9], [True, False, True])
    assert acc == pytest.approx(2 / 3)
    assert accuracy_at([0.5, 0.5, 0.9], [True, False, True], threshold) == pytest.approx(acc)


def test_tune_threshold_is_optimal_against_brute_force():
    rng = numpy.random.default_rng(0)
    for _ in range(30):
        n = int(rng.integers(1, 12))
        scores = rng.integers(0, 5, size=n) / 4.0  # many ties
        labels = rng.random(n) < 0.5
        threshold, acc = tune_threshold(scores, labels)
        candidates = list(scores) + [scores.min() - 1, scores.max() + 1]
        best = max(accuracy_at(scores, labels, t) for t in candidates)
        assert acc == pytest.approx(best)
        assert accuracy_at(scores, labels, threshold) == pytest.approx(acc)


def test_bad_input():
    with pytest.raises(SpacyMlmError):
        tune_threshold([], [])
    with pytest.raises(SpacyMlmError):
        tune_threshold([0.1, 0.2], [True])


def test_group_thresholds_separate_groups_one_cut_cannot():
    # Verbs are all True above 0.3, nouns only above 0.7: no single cut gets all 8,
    # one cut per group does.
    scores = [0.2, 0.4, 0.5, 0.9, 0.5, 0.6, 0.8, 0.9]
    labels = [False, True, True, True, False, False, True, True]
    groups = ["V", "V", "V", "V", "N", "N", "N", "N"]
    assert tune_threshold(scores, labels)[1] < 1.0
    thresholds, fallback, acc = tune_group_thresholds(scores, labels, groups)
    assert acc == 1.0
    assert thresholds == {"N": pytest.approx(0.7), "V": pytest.approx(0.3)}
    assert fallback == pytest.approx(tune_threshold(scores, labels)[0])
    # Unknown groups use the fallback threshold.
    predicted = predict_by_group([0.35, 0.35, 0.35], ["V", "N", "A"], thresholds, fallback)
    assert list(predicted) == [True, False, 0.35 >= fallback]


def test_group_thresholds_bad_input():
    with pytest.raises(SpacyMlmError, match="one group per score"):
        tune_group_thresholds([0.1, 0.2], [True, False], ["N"])
    with pytest.raises(SpacyMlmError, match="one group per score"):
        predict_by_group([0.1, 0.2], ["N"], {"N": 0.5}, 0.5)
