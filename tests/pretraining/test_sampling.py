import numpy as np
import pytest

from spacy_mlm.errors import DataError
from spacy_mlm.pretraining.sampling import epoch_order, quotas, sampling_probabilities


def test_exponent_flattens_the_language_mix():
    sizes = [900, 90, 10]
    np.testing.assert_allclose(sampling_probabilities(sizes, 1.0), [0.9, 0.09, 0.01])
    np.testing.assert_allclose(sampling_probabilities(sizes, 0.0), [1 / 3] * 3)
    q = sampling_probabilities(sizes, 0.3)
    p = np.array(sizes) / 1000
    np.testing.assert_allclose(q, p**0.3 / (p**0.3).sum())
    assert q[2] > 0.01 and q[0] < 0.9
    with pytest.raises(DataError):
        sampling_probabilities([0, 0])


def test_quotas_sum_to_total():
    assert quotas(np.array([0.5, 0.3, 0.2]), 7).sum() == 7
    assert quotas(np.array([0.5, 0.5]), 4).tolist() == [2, 2]


def test_epoch_order_draws_each_language_by_its_quota():
    sizes = [900, 90, 10]
    q = sampling_probabilities(sizes, 0.3)
    order = epoch_order(sizes, q, np.random.default_rng(0))
    assert len(order) == 1000
    lang = np.searchsorted([900, 990, 1000], order, side="right")
    np.testing.assert_array_equal(np.bincount(lang, minlength=3), quotas(q, 1000))
    small = order[lang == 2] - 990  # oversampled: every example of it appears about equally often
    counts = np.bincount(small, minlength=10)
    assert counts.max() - counts.min() <= 1
    again = epoch_order(sizes, q, np.random.default_rng(0))
    np.testing.assert_array_equal(order, again)
