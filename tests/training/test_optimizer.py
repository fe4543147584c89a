import numpy
import pytest
from thinc.api import registry

from spacy_mlm.training.optimizer import layer_lr_scale, parameter_depth


@pytest.mark.parametrize(
    "name,depth",
    [
        ("embeddings.word_embeddings.weight", 0),
        ("roberta.embeddings.position_embeddings.weight", 0),
        ("encoder.layer.0.attention.self.query.weight", 1),
        ("encoder.layer.11.output.dense.bias", 12),
        ("transformer.layer.3.ffn.lin1.weight", 4),
        ("pooler.dense.weight", None),
        ("W", None),
    ],
)
def test_parameter_depth(name, depth):
    assert parameter_depth(name) == depth


def test_layer_scales_decay_from_the_top():
    assert layer_lr_scale(None, 6, 0.8) == 1.0
    assert layer_lr_scale(6, 6, 0.8) == pytest.approx(0.8)
    assert layer_lr_scale(1, 6, 0.8) == pytest.approx(0.8**6)
    assert layer_lr_scale(0, 6, 0.8) == pytest.approx(0.8**7)
    with pytest.raises(ValueError, match="num_layers"):
        layer_lr_scale(7, 6, 0.8)


def test_optimizer_steps_scale_per_layer():
    """Adam's first step moves each weight by about lr * scale whatever the gradient's size."""
    optimizer = registry.resolve(
        {"o": {"@optimizers": "spacy_mlm.LayerDecayAdam.v1", "learn_rate": 0.01, "layer_decay": 0.5, "num_layers": 2,
               "grad_clip": 0.0}}
    )["o"]
    steps = {}
    for name in ("embeddings.word_embeddings.weight", "encoder.layer.0.x", "encoder.layer.1.x", "W"):
        weights = numpy.zeros((5,), dtype="f")
        gradient = numpy.full((5,), 123.0 if name == "W" else 0.001, dtype="f")
        new, _ = optimizer((1, name), weights, gradient)
        steps[name] = float(numpy.abs(new).max())
    assert steps["W"] == pytest.approx(0.01, rel=1e-3)
    assert steps["encoder.layer.1.x"] == pytest.approx(0.005, rel=1e-3)
    assert steps["encoder.layer.0.x"] == pytest.approx(0.0025, rel=1e-3)
    assert steps["embeddings.word_embeddings.weight"] == pytest.approx(0.00125, rel=1e-3)
    with pytest.raises(ValueError, match="layer_decay"):
        registry.resolve({"o": {"@optimizers": "spacy_mlm.LayerDecayAdam.v1", "layer_decay": 1.5, "num_layers": 2}})
