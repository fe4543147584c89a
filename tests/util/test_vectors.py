import numpy
import pytest

from spacy_mlm.errors import SpacyMlmError
from spacy_mlm.util.vectors import cosine_rows


def test_cosine_rows_matches_definition_and_handles_zeros():
    A = numpy.array([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0], [3.0, 4.0]])
    B = numpy.array([[0.0, 2.0], [2.0, 2.0], [1.0, 1.0], [-3.0, -4.0]])
    numpy.testing.assert_allclose(cosine_rows(A, B), [0.0, 1.0, 0.0, -1.0])
    with pytest.raises(SpacyMlmError):
        cosine_rows(A, B[:2])
