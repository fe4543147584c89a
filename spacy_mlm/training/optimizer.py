"""The optimizer `spacy_mlm.LayerDecayAdam.v2`: layer-wise learning-rate decay (LLRD).

Lower transformer layers hold more general features and should move less than
the top ones, so layer i of L (0-based) learns at `lr * decay ** (L - i)`, the
embeddings at `lr * decay ** (L + 1)`, everything else (heads, pooler) at `lr`.
The optimizer only carries `layer_decay`: the torch step that applies it is
`models/torch_stepper.py` `TorchStepper`, which reads L and each parameter's
layer from the module when it first steps, so one config serves encoders of
any depth and family.
"""

from spacy.util import registry
from thinc.api import Optimizer
from thinc.optimizers import ADAM_DEFAULTS, FloatOrSeq

from ..errors import SettingError


class LayerDecayOptimizer(Optimizer):
    """thinc's Adam/AdamW whose torch steps (`torch_step`) scale each layer's
    learning rate; parameters thinc steps itself (spaCy's own layers) learn at `lr`."""

    def __init__(self, learn_rate: FloatOrSeq, *, layer_decay: float, **kwargs):
        if not 0.0 < layer_decay <= 1.0:
            raise SettingError(f"layer_decay must be in (0, 1], got {layer_decay}")
        super().__init__(learn_rate, **kwargs)
        self.layer_decay = float(layer_decay)


@registry.optimizers("spacy_mlm.LayerDecayAdam.v2")
def build_layer_decay_adam_v2(
    learn_rate: FloatOrSeq = ADAM_DEFAULTS["learn_rate"],
    *,
    layer_decay: float = 0.9,
    L2: FloatOrSeq = ADAM_DEFAULTS["L2"],
    beta1: FloatOrSeq = ADAM_DEFAULTS["beta1"],
    beta2: FloatOrSeq = ADAM_DEFAULTS["beta2"],
    eps: FloatOrSeq = ADAM_DEFAULTS["eps"],
    grad_clip: FloatOrSeq = ADAM_DEFAULTS["grad_clip"],
    L2_is_weight_decay: bool = True,
) -> Optimizer:
    """`Adam.v1` with layer-wise learning-rate decay (layer_decay = 1.0 is plain
    Adam). The number of transformer layers comes from the encoder itself.
    `learn_rate` may be a schedule, as for Adam.v1."""
    adam = dict(L2=L2, beta1=beta1, beta2=beta2, eps=eps, grad_clip=grad_clip, L2_is_weight_decay=L2_is_weight_decay)
    return LayerDecayOptimizer(learn_rate, layer_decay=layer_decay, use_averages=False, **adam)
