import pytest

from spacy_mlm.errors import SpacyMlmError
from spacy_mlm.similarity.layers import chosen_layers, layer_indices


def test_layer_indices_count_from_the_top_and_check_the_range():
    assert layer_indices(3, -1, 2) == [1, 2] and layer_indices(3, 1, 1) == [1] and layer_indices(4, 2, 3) == [0, 1, 2]
    with pytest.raises(SpacyMlmError, match="does not exist"):
        layer_indices(3, 5, 1)
    with pytest.raises(SpacyMlmError, match="does not exist"):
        layer_indices(3, -4, 1)
    with pytest.raises(SpacyMlmError, match="cannot average"):
        layer_indices(3, 0, 2)


def test_chosen_layers_end_at_the_layer_and_count_from_the_top():
    assert chosen_layers(-1, 1) == [-1] and chosen_layers(-1, 2) == [-2, -1] and chosen_layers(2, 3) == [0, 1, 2]
    with pytest.raises(SpacyMlmError, match="cannot average 2 layers ending at layer 0"):
        chosen_layers(0, 2)
