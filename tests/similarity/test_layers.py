import numpy
import pytest

from spacy_mlm.errors import SpacyMlmError
from spacy_mlm.similarity.layers import contextual_token_vectors, layer_indices, transform_input


class OnePiecePerToken:
    """What `contextual_token_vectors` reads of a DocEncoding (`.layers`,
    `token_vectors(pooling, layer)`), with one piece per token, so pooling is the
    identity and the layer arithmetic is visible."""

    def __init__(self, layers, keep_layers=True):
        self.hidden = layers[-1]
        self.layers = layers if keep_layers else None
        self.requested = []

    def token_vectors(self, pooling="mean", layer=None):
        self.requested.append(layer)
        return self.hidden if layer is None else self.layers[layer]


@pytest.fixture()
def states():
    # (embeddings + 3 layers, 4 tokens, width 2)
    return numpy.random.default_rng(0).normal(size=(4, 4, 2)).astype("float32")


def test_layer_indices_count_from_the_top_and_check_the_range():
    assert layer_indices(3, -1, 2) == [1, 2] and layer_indices(3, 1, 1) == [1] and layer_indices(4, 2, 3) == [0, 1, 2]
    with pytest.raises(SpacyMlmError, match="does not exist"):
        layer_indices(3, 5, 1)
    with pytest.raises(SpacyMlmError, match="does not exist"):
        layer_indices(3, -4, 1)
    with pytest.raises(SpacyMlmError, match="cannot average"):
        layer_indices(3, 0, 2)


def test_contextual_vectors_average_the_chosen_layers(states):
    enc = OnePiecePerToken(states)
    numpy.testing.assert_array_equal(contextual_token_vectors(enc, "mean", -1, 1), states[3])
    assert enc.requested == [None]  # the top layer does not need the per-layer stack
    got = contextual_token_vectors(enc, "mean", -1, 2)
    numpy.testing.assert_allclose(got, (states[2] + states[3]) / 2, rtol=1e-6)
    assert got.dtype == numpy.float32
    numpy.testing.assert_array_equal(contextual_token_vectors(enc, "first", 0, 1), states[0])
    numpy.testing.assert_allclose(contextual_token_vectors(enc, "max", 2, 3), states[:3].mean(axis=0), rtol=1e-6)


def test_other_layers_need_the_per_layer_outputs(states):
    enc = OnePiecePerToken(states, keep_layers=False)
    numpy.testing.assert_array_equal(contextual_token_vectors(enc, "mean", -1, 1), states[3])
    with pytest.raises(SpacyMlmError, match="output_hidden_states"):
        contextual_token_vectors(enc, "mean", 0, 1)
    with pytest.raises(SpacyMlmError, match="remove_static transform needs the embedding layer"):
        transform_input(enc, "mean", -1, 1, with_static=True)


def test_transform_input_puts_the_embedding_layer_beside_the_raw_vectors(states):
    enc = OnePiecePerToken(states)
    numpy.testing.assert_array_equal(transform_input(enc, "mean", -1, 1, with_static=False), states[3])
    both = transform_input(enc, "mean", -1, 2, with_static=True)
    assert both.shape == (4, 4)
    numpy.testing.assert_allclose(both[:, :2], (states[2] + states[3]) / 2, rtol=1e-6)
    numpy.testing.assert_array_equal(both[:, 2:], states[0])
