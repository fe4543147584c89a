"""scoring/calibration.py: reliability bins, ECE, the likelihood, and the
temperature search."""
import math

import numpy
import pytest

from spacy_mlm.scoring.calibration import (NO_SCALING, binary_nll, expected_calibration_error, fit_score_scaling,
                                           fit_temperature, reliability_bins, scaled_scores, unscaled_threshold)


def test_ece_is_the_count_weighted_gap_between_score_and_accuracy_per_bin():
    probs = [0.95, 0.95, 0.95, 0.95, 0.25, 0.25]
    correct = [True, True, True, False, False, True]
    bins = reliability_bins(probs, correct)
    full = [b for b in bins if b.count]
    assert [(b.count, b.mean_score, b.accuracy) for b in full] == [(2, 0.25, 0.5), (4, 0.95, 0.75)]
    assert expected_calibration_error(probs, correct) == pytest.approx(2 / 6 * 0.25 + 4 / 6 * 0.2)
    assert reliability_bins([1.0], [True])[-1].count == 1  # a score of 1 falls in the last bin
    assert expected_calibration_error([], []) == 0.0


def test_the_likelihood_of_outcomes_and_its_guard_against_log_0():
    assert binary_nll([0.8, 0.3], [True, False]) == pytest.approx(-(math.log(0.8) + math.log(0.7)) / 2)
    assert math.isfinite(binary_nll([1.0, 0.0], [False, True]))
    with pytest.raises(ValueError):
        binary_nll([0.5], [True, False])


def test_the_temperature_search_finds_the_minimum_and_never_ends_above_the_start():
    assert fit_temperature(lambda t: (math.log(t) - math.log(2.5)) ** 2) == pytest.approx(2.5, rel=2e-3)
    assert fit_temperature(lambda t: 0.0 if t == 1.0 else 1.0) == 1.0


def test_a_fitted_temperature_calibrates_overconfident_scores():
    rng = numpy.random.default_rng(0)
    logits = rng.normal(0.0, 2.0, 4000)
    correct = rng.random(4000) < 1 / (1 + numpy.exp(-logits))  # calibrated at T = 1
    overconfident = logits * 3  # as a model at T = 1/3 would give

    def scores(t):
        return 1 / (1 + numpy.exp(-overconfident / t))

    t = fit_temperature(lambda t: binary_nll(scores(t), correct))
    assert t == pytest.approx(3.0, rel=0.1)
    assert expected_calibration_error(scores(t), correct) < expected_calibration_error(scores(1.0), correct) / 3


def test_precision_coverage_rewards_scores_that_rank_right_predictions_first():
    from spacy_mlm.scoring.calibration import precision_at_coverage, precision_coverage_area

    correct = [True, True, False, True, False]
    ranked = [0.9, 0.8, 0.2, 0.7, 0.1]  # every right one above every wrong one
    assert precision_coverage_area(ranked, correct) == pytest.approx((1 + 1 + 1 + 3 / 4 + 3 / 5) / 5)
    reversed_ = [0.1, 0.2, 0.9, 0.3, 0.8]
    assert precision_coverage_area(reversed_, correct) == pytest.approx((0 + 0 + 1 / 3 + 2 / 4 + 3 / 5) / 5)
    assert precision_at_coverage(ranked, correct, 0.8) == 0.75  # the 4 highest
    assert precision_at_coverage(ranked, correct, 0.6) == 1.0
    assert precision_at_coverage(reversed_, correct, 0.8) == pytest.approx(2 / 4)
    assert precision_coverage_area([], []) == 0.0


def test_the_score_scaling_recovers_a_known_miscalibration_and_keeps_the_order():
    """Outcomes drawn from sigmoid(1.5 logit p - 0.5): the fit finds that map,
    and the mapped scores are better calibrated, in the same order."""
    rng = numpy.random.default_rng(0)
    logits = rng.normal(2.0, 2.0, 20_000)
    probs = 1 / (1 + numpy.exp(-logits))
    correct = rng.random(len(probs)) < 1 / (1 + numpy.exp(-(1.5 * logits - 0.5)))
    scaling = fit_score_scaling(probs, correct)
    assert scaling == pytest.approx((1.5, -0.5), abs=0.1)
    mapped = scaled_scores(probs, scaling)
    assert binary_nll(mapped, correct) < binary_nll(probs, correct)
    assert expected_calibration_error(mapped, correct) < expected_calibration_error(probs, correct) / 2
    order = numpy.argsort(probs, kind="stable")
    assert numpy.all(numpy.diff(mapped[order]) >= 0)


def test_calibrated_scores_keep_no_scaling_and_the_threshold_maps_back():
    rng = numpy.random.default_rng(1)
    probs = rng.uniform(0.01, 0.99, 5000)
    correct = rng.random(5000) < probs
    slope, intercept = fit_score_scaling(probs, correct)
    assert (slope, intercept) == NO_SCALING or (abs(slope - 1) < 0.1 and abs(intercept) < 0.1)
    assert fit_score_scaling([], []) == NO_SCALING
    assert fit_score_scaling([0.9, 0.8], [True, True])[0] > 0  # all right: finite, increasing
    for scaling in ((2.0, -1.0), (0.5, 0.3)):
        for threshold in (0.1, 0.5, 0.93):
            assert scaled_scores([unscaled_threshold(threshold, scaling)], scaling)[0] == pytest.approx(threshold)
        assert unscaled_threshold(0.0, scaling) == 0.0 and unscaled_threshold(1.0, scaling) == 1.0
