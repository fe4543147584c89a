"""Which of the encoder's hidden states a contextual token vector comes from.

Pure functions over a `DocEncoding` (its `.layers` stack and
`token_vectors(pooling, layer)`), shared by the `mlm_vectors` component and the
WiC benchmark, so both read the same layers the same way.
"""
from typing import List

import numpy

from ..errors import SpacyMlmError
from ..models.encoding import DocEncoding


def layer_indices(n_available: int, layer: int, n_layers: int) -> List[int]:
    """Indices into the encoder's (embeddings + every layer) stack: `n_layers`
    consecutive layers ending at `layer` (negative counts from the top)."""
    top = layer if layer >= 0 else n_available + layer
    if not 0 <= top < n_available:
        raise SpacyMlmError(f"layer {layer} does not exist: the encoder has {n_available} hidden states")
    if not 1 <= n_layers <= top + 1:
        raise SpacyMlmError(f"cannot average {n_layers} layers ending at layer {top} (of {n_available})")
    return list(range(top - n_layers + 1, top + 1))


def contextual_token_vectors(encoding: DocEncoding, pooling: str, layer: int, n_layers: int) -> numpy.ndarray:
    """(n_tokens, width) raw vectors: each chosen layer pooled per token over its
    pieces, then averaged over the layers. Tokens without pieces get zeros.

    Pooling each layer and then averaging equals averaging and then pooling for
    the linear poolings (mean, first, last); for "max" it is the mean of the
    per-layer maxima."""
    if layer == -1 and n_layers == 1:
        return encoding.token_vectors(pooling)
    if encoding.layers is None:
        raise SpacyMlmError(
            f"layer={layer}, n_layers={n_layers} needs every layer's output: "
            "build the mlm_encoder model with output_hidden_states = true"
        )
    indices = layer_indices(encoding.layers.shape[0], layer, n_layers)
    return numpy.mean([encoding.token_vectors(pooling, k) for k in indices], axis=0, dtype="float32")


def transform_input(encoding: DocEncoding, pooling: str, layer: int, n_layers: int, with_static: bool) -> numpy.ndarray:
    """What a vector transform maps: the raw token vectors, or, `with_static`
    (a chain that starts with "remove_static"), [raw | embedding-layer vectors]
    side by side, (n_tokens, 2 * width)."""
    raw = contextual_token_vectors(encoding, pooling, layer, n_layers)
    if not with_static:
        return raw
    if encoding.layers is None:
        raise SpacyMlmError(
            "the remove_static transform needs the embedding layer's output: "
            "build the mlm_encoder model with output_hidden_states = true"
        )
    return numpy.concatenate([raw, contextual_token_vectors(encoding, pooling, 0, 1)], axis=1)
