"""Layer-wise learning-rate decay (LLRD) for fine-tuning.

Lower transformer layers hold more general features and should move less than
the top ones: layer i of L (0-based) learns at `lr * decay ** (L - i)`, the
embeddings at `lr * decay ** (L + 1)`, and everything else (the task head, the
pooler, final norms) at `lr`.

spaCy trains a whole pipeline with one thinc `Optimizer`, which is called once
per parameter with a key `(node id, parameter name)`; for the encoder's PyTorch
weights the name is the module path (`encoder.layer.3.attention.self.query.weight`).
So LLRD is an Optimizer whose `__call__` passes a per-parameter `lr_scale`.
Scaling the gradients instead would do nothing under Adam, whose steps do not
depend on the gradient's scale.
"""
import re
from typing import Dict, Optional, Tuple

from spacy.util import registry
from thinc.api import Optimizer
from thinc.optimizers import ADAM_DEFAULTS, FloatOrSeq

_LAYER = re.compile(r"(?:^|\.)(?:layer|layers|block)\.(\d+)\.")
_EMBEDDINGS = re.compile(r"(?:^|\.)(?:embeddings|embed_tokens|embed_positions)\.")


def parameter_depth(name: str) -> Optional[int]:
    """0 for embedding weights, i + 1 for weights of transformer layer i, None
    for anything else (head, pooler, thinc layers' "W"/"b")."""
    match = _LAYER.search(name)
    if match:
        return int(match.group(1)) + 1
    if _EMBEDDINGS.search(name):
        return 0
    return None


def layer_lr_scale(depth: Optional[int], num_layers: int, decay: float) -> float:
    """The learning-rate multiplier for a parameter at `depth` (see `parameter_depth`)."""
    if depth is None:
        return 1.0
    if depth > num_layers:
        raise ValueError(
            f"a parameter of transformer layer {depth - 1} was seen but num_layers = {num_layers}: "
            "set num_layers to the encoder's number of layers"
        )
    return float(decay ** (num_layers + 1 - depth))


class LayerDecayOptimizer(Optimizer):
    """thinc's Adam/AdamW with a learning rate that decays from the top layer down."""

    def __init__(self, learn_rate: FloatOrSeq, *, layer_decay: float, num_layers: int, **kwargs):
        if not 0.0 < layer_decay <= 1.0:
            raise ValueError(f"layer_decay must be in (0, 1], got {layer_decay}")
        if num_layers < 1:
            raise ValueError(f"num_layers must be at least 1, got {num_layers}")
        super().__init__(learn_rate, **kwargs)
        self.layer_decay = float(layer_decay)
        self.num_layers = int(num_layers)
        self._scales: Dict[str, float] = {}

    def lr_scale_for(self, name: str) -> float:
        if name not in self._scales:
            self._scales[name] = layer_lr_scale(parameter_depth(name), self.num_layers, self.layer_decay)
        return self._scales[name]

    def __call__(self, key: Tuple[int, str], weights, gradient, *, lr_scale: float = 1.0):
        return super().__call__(key, weights, gradient, lr_scale=lr_scale * self.lr_scale_for(key[1]))


@registry.optimizers("spacy_mlm.LayerDecayAdam.v1")
def build_layer_decay_adam_v1(
    learn_rate: FloatOrSeq = ADAM_DEFAULTS["learn_rate"],
    *,
    layer_decay: float = 0.9,
    num_layers: int = 12,
    L2: FloatOrSeq = ADAM_DEFAULTS["L2"],
    beta1: FloatOrSeq = ADAM_DEFAULTS["beta1"],
    beta2: FloatOrSeq = ADAM_DEFAULTS["beta2"],
    eps: FloatOrSeq = ADAM_DEFAULTS["eps"],
    grad_clip: FloatOrSeq = ADAM_DEFAULTS["grad_clip"],
    L2_is_weight_decay: bool = True,
    use_averages: bool = False,
) -> Optimizer:
    """`Adam.v1` with layer-wise learning-rate decay. num_layers: the encoder's
    transformer layers (6 for MiniLM-L6, 12 for BERT-base); layer_decay = 1.0 is
    plain Adam. `learn_rate` may be a schedule, as for Adam.v1."""
    return LayerDecayOptimizer(
        learn_rate,
        layer_decay=layer_decay,
        num_layers=num_layers,
        L2=L2,
        beta1=beta1,
        beta2=beta2,
        eps=eps,
        grad_clip=grad_clip,
        L2_is_weight_decay=L2_is_weight_decay,
        use_averages=use_averages,
    )
