"""Which of the encoder's hidden states a contextual token vector comes from.

`mlm_vectors` reads the encoder through `spacy_mlm.EncoderLayersListener.v1`
(`models/listener.py`), as every component reads it: `vectors_input` is its
thinc model, the listener(s) and the mean over the chosen layers, so that the
transform maps the same raw vectors whether a pipeline or `fit_transform`
asks. `layer_indices` resolves a (layer, n_layers) choice against a stack of
hidden states (the WiC benchmark reads its grid of choices with it).
"""
from typing import List

import numpy
from thinc.api import Model
from thinc.util import to_numpy

from ..errors import SpacyMlmError
from ..models.listener import build_encoder_layers_listener_v1


def layer_indices(n_available: int, layer: int, n_layers: int) -> List[int]:
    """Indices into the encoder's (embeddings + every layer) stack: `n_layers`
    consecutive layers ending at `layer` (negative counts from the top)."""
    top = layer if layer >= 0 else n_available + layer
    if not 0 <= top < n_available:
        raise SpacyMlmError(f"layer {layer} does not exist: the encoder has {n_available} hidden states")
    if not 1 <= n_layers <= top + 1:
        raise SpacyMlmError(f"cannot average {n_layers} layers ending at layer {top} (of {n_available})")
    return list(range(top - n_layers + 1, top + 1))


def chosen_layers(layer: int, n_layers: int) -> List[int]:
    """The listener's `layers` for `n_layers` consecutive hidden states ending at
    `layer` (negative counts from the top; the encoder's size checks the rest)."""
    if layer >= 0 and n_layers > layer + 1:
        raise SpacyMlmError(f"cannot average {n_layers} layers ending at layer {layer}")
    return list(range(layer - n_layers + 1, layer + 1))


def vectors_input(pooling: str, layer: int, n_layers: int, with_static: bool, upstream: str) -> Model:
    """Docs -> (n_tokens, width) raw token vectors each (numpy): each chosen
    layer pooled per token over its pieces (its listener), then averaged over
    the layers; `with_static` (a transform that starts with "remove_static")
    puts the embedding layer's vectors beside them, (n_tokens, 2 * width), from
    a second listener. Tokens without pieces get zeros.

    Pooling each layer and then averaging equals averaging and then pooling for
    the linear poolings (mean, first, last); for "max" it is the mean of the
    per-layer maxima."""
    listeners = [build_encoder_layers_listener_v1(chosen_layers(layer, n_layers), pooling, upstream=upstream)]
    if with_static:
        listeners.append(build_encoder_layers_listener_v1([0], pooling, upstream=upstream))
    return Model("mlm_vectors_input", _vectors_input_forward, layers=listeners)


def _vectors_input_forward(model: Model, docs, is_train: bool):
    stacks = [[to_numpy(rows) for rows in listener(docs, False)[0]] for listener in model.layers]
    raw = [numpy.mean(rows, axis=1, dtype="float32") for rows in stacks[0]]
    if len(stacks) > 1:
        raw = [numpy.concatenate([r, static[:, 0]], axis=1) for r, static in zip(raw, stacks[1])]
    return raw, lambda d_raw: []

