import numpy
import pytest

from spacy_mlm.errors import DataError
from spacy_mlm.scoring.bootstrap import paired_bootstrap


def counts(rng, n, hit_rate):
    tp = rng.binomial(4, hit_rate, size=n)
    return numpy.stack([tp, 4 - tp, 4 - tp], axis=1)


def test_reproducible_with_a_seed():
    rng = numpy.random.default_rng(0)
    a, b = counts(rng, 200, 0.8), counts(rng, 200, 0.75)
    r1 = paired_bootstrap(a, b, n_samples=500, seed=3)
    r2 = paired_bootstrap(a, b, n_samples=500, seed=3)
    r3 = paired_bootstrap(a, b, n_samples=500, seed=4)
    assert r1 == r2
    assert r1.ci_low != r3.ci_low


def test_identical_systems_are_not_different():
    rng = numpy.random.default_rng(1)
    a = counts(rng, 100, 0.7)
    r = paired_bootstrap(a, a.copy(), n_samples=300)
    assert r.delta == 0.0 and r.p_value == 1.0 and r.ci_low == r.ci_high == 0.0


def test_clear_difference_is_significant_and_ci_covers_delta():
    rng = numpy.random.default_rng(2)
    a, b = counts(rng, 400, 0.9), counts(rng, 400, 0.6)
    r = paired_bootstrap(a, b, n_samples=1000, seed=0)
    assert r.delta > 0.2
    assert r.p_value < 0.01
    assert r.ci_low < r.delta < r.ci_high and r.ci_low > 0
    reverse = paired_bootstrap(b, a, n_samples=1000, seed=0)
    assert reverse.delta == pytest.approx(-r.delta) and reverse.p_value == r.p_value


def test_small_noisy_difference_is_not_significant():
    rng = numpy.random.default_rng(5)
    a = counts(rng, 50, 0.7)
    b = a.copy()
    b[0] = [a[0, 0] - 1 if a[0, 0] else 0, a[0, 1] + 1, a[0, 2] + 1] if a[0, 0] else a[0]
    r = paired_bootstrap(a, b, n_samples=500)
    assert r.p_value > 0.2


def test_bad_shapes():
    with pytest.raises(DataError, match="count arrays"):
        paired_bootstrap(numpy.zeros((3, 3)), numpy.zeros((4, 3)))
