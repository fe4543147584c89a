"""The attention a training pass runs on a CPU: the family's plain one, where
it gives what torch's fused one gives.

In transformers 4.x, BERT, RoBERTa, XLM-R, DistilBERT and ALBERT keep a table
of attention classes by implementation (`*ATTENTION_CLASSES`), the one for
torch's scaled_dot_product_attention ("sdpa", the default) a subclass of the
plain ("eager") one with the same weights. In inference on a CPU the fused
kernel is the faster one on long windows. In training with dropout it cannot
run fused on a CPU: it falls back to the plain maths, drawing its mask with
`bernoulli_` and guarding fully masked rows with extra passes, while the
plain attention does the same products and drops through the `nn.Dropout`
that `dropout.py` makes cheap, so a training step takes less time with it
(docs/benchmarks.md: `bench/train_step.py`).

So, while a training pass runs on a CPU, `plain_attention(model)` gives each
such attention module its plain class, and its own class back after. Only
where verified: once per model, a probe of two rows (one padded), and of the
same rows unpadded, in eval mode must give the same outputs at every real
position both ways (a family whose model prepares the attention mask for one
implementation only fails it, and keeps its attention; so does a decoder,
`config.is_decoder`, whose unpadded batch runs SDPA causally with no mask). Families without such a table (DeBERTa, MPNet,
ModernBERT; every family in transformers 5) are left as they are.
"""
import contextlib
import logging
import sys
import weakref
from typing import Dict, Iterator

import torch
from torch import nn

logger = logging.getLogger(__name__)

PROBE_LENGTH = 8
# model -> {fused class: plain class}, empty where the swap is not verified
_VERIFIED: "weakref.WeakKeyDictionary[nn.Module, Dict[type, type]]" = weakref.WeakKeyDictionary()


def plain_classes(model: nn.Module) -> Dict[type, type]:
    """{sdpa class: eager class} from the attention tables of `model`'s
    family (its transformers module), where one subclasses the other."""
    family_module = sys.modules.get(type(model).__module__)
    pairs: Dict[type, type] = {}
    for name, table in vars(family_module or object()).items():
        if not (name.endswith("ATTENTION_CLASSES") and isinstance(table, dict)):
            continue
        eager, sdpa = table.get("eager"), table.get("sdpa")
        if isinstance(eager, type) and isinstance(sdpa, type) and sdpa is not eager and issubclass(sdpa, eager):
            pairs[sdpa] = eager
    return pairs


@contextlib.contextmanager
def _swapped(model: nn.Module, pairs: Dict[type, type]) -> Iterator[None]:
    changed = [(module, type(module)) for module in model.modules() if type(module) in pairs]
    for module, cls in changed:
        module.__class__ = pairs[cls]
    try:
        yield
    finally:
        for module, cls in changed:
            module.__class__ = cls


def _verify(model: nn.Module, pairs: Dict[type, type]) -> bool:
    """Whether both classes give the same outputs at every real position, on
    a batch with a padded row and on one without padding: where nothing is
    padded a model may give the fused class no mask at all (a decoder's SDPA
    then runs causally), which the plain class reads as attending both ways."""
    device = next(model.parameters()).device
    ids = (torch.arange(2 * PROBE_LENGTH, device=device).reshape(2, PROBE_LENGTH) + 5) % int(model.config.vocab_size)
    padded = torch.ones_like(ids)
    padded[1, PROBE_LENGTH // 2:] = 0
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for mask in (padded, torch.ones_like(ids)):
                fused = model(input_ids=ids, attention_mask=mask)[0]
                with _swapped(model, pairs):
                    plain = model(input_ids=ids, attention_mask=mask)[0]
                real = mask.bool()
                if fused.shape != plain.shape or not torch.allclose(fused[real], plain[real], atol=1e-4, rtol=1e-3):
                    logger.info("%s: plain attention gives other outputs than SDPA; training keeps SDPA",
                                type(model).__name__)
                    return False
    except Exception as err:  # a plain class that cannot take what the model gives the fused one
        logger.info("%s: plain attention does not run (%s: %s); training keeps SDPA", type(model).__name__,
                    type(err).__name__, err)
        return False
    finally:
        model.train(was_training)
    return True


@contextlib.contextmanager
def plain_attention(model: nn.Module) -> Iterator[None]:
    """Within: `model`'s SDPA attention modules run their family's plain
    attention, where that is verified to give the same outputs."""
    pairs = _VERIFIED.get(model)
    if pairs is None:
        pairs = plain_classes(model)
        if pairs and not _verify(model, pairs):
            pairs = {}
        _VERIFIED[model] = pairs
    with _swapped(model, pairs):
        yield
