"""Weight initialisation for the task heads."""
from typing import Callable, Tuple

import numpy
from thinc.api import Ops


def fixed_normal_init(std: float) -> Callable[[Ops, Tuple[int, ...]], numpy.ndarray]:
    """Normal(0, std) weights, independent of fan-in: BERT's `initializer_range`
    (0.02), which is what Hugging Face's task heads start from. A head that
    starts at zero passes no gradient to the encoder until its own weights have
    grown, which at fine-tuning learning rates (1e-5..1e-4) costs most of a short
    budget. Drawn from numpy's global generator, which `spacy.util.fix_random_seed`
    seeds, so training stays reproducible. std = 0 gives zeros."""

    def init(ops: Ops, shape: Tuple[int, ...]):
        if std <= 0:
            return ops.alloc(shape, dtype="float32")
        return ops.asarray(numpy.random.normal(0.0, std, shape).astype("float32"))

    return init
