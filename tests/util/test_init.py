import numpy
from spacy.util import fix_random_seed
from thinc.api import NumpyOps

from spacy_mlm.util.init import fixed_normal_init


def test_fixed_normal_init_has_the_asked_std_whatever_the_fan_in():
    fix_random_seed(0)
    for shape in ((9, 384), (3, 32)):
        W = fixed_normal_init(0.02)(NumpyOps(), shape)
        assert W.shape == shape and W.dtype == numpy.float32
        assert abs(float(W.std()) - 0.02) < 0.004 and abs(float(W.mean())) < 0.004


def test_fixed_normal_init_is_seeded_and_zero_std_gives_zeros():
    fix_random_seed(1)
    a = fixed_normal_init(0.02)(NumpyOps(), (4, 8))
    fix_random_seed(1)
    b = fixed_normal_init(0.02)(NumpyOps(), (4, 8))
    assert numpy.array_equal(a, b)
    assert not fixed_normal_init(0.0)(NumpyOps(), (4, 8)).any()
