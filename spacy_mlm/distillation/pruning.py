"""A narrower student: the feed-forward units and attention heads that matter least taken out.

Fewer layers cut the encoder's time in proportion; on short sentences most of a
layer's time is its matrix products, so keeping fewer feed-forward units
(intermediate_size) and fewer heads per layer cuts it again, and the student
still starts from the teacher's own weights instead of a random narrow model.
What to keep is measured on the distillation texts (no gradients, no labels):
a unit's importance is the mean norm of what it adds to its layer's output over
the texts' real tokens (|activation| x the norm of its column in the output
projection), a head's the mean norm of its slice of the attention output after
the output projection. The least important go, the same number in every layer
(a Hugging Face config holds one intermediate size), each layer its own.

Heads are removed by the family's own `prune_heads` (recorded in
config.pruned_heads, which transformers applies again when the model is
built); feed-forward units by `prune_linear_layer` on the pair of linear maps
found by their shapes (hidden -> intermediate, intermediate -> hidden). A
family without either (gated feed-forward layers, no `prune_heads`) is refused
by name.
"""
import copy
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers.pytorch_utils import prune_linear_layer

from ..errors import SpacyMlmError
from ..models.families import family_layout

# the texts (the first of the distillation texts) and pieces per text the importances are measured on
IMPORTANCE_TEXTS = 512
IMPORTANCE_MAX_PIECES = 128
IMPORTANCE_BATCH = 32
# the config attributes the families name their feed-forward width by
INTERMEDIATE_ATTRIBUTES = ("intermediate_size", "hidden_dim", "ffn_dim", "encoder_ffn_dim")


@dataclass
class FeedForward:
    """One layer's feed-forward pair: the maps into the intermediate width (more
    than one where a family splits it) and the one back out, as module paths."""

    ups: Tuple[str, ...]
    down: str


def _intermediate_attribute(model: PreTrainedModel) -> str:
    names = [name for name in INTERMEDIATE_ATTRIBUTES if isinstance(getattr(model.config, name, None), int)]
    if not names:
        raise SpacyMlmError(f"a {model.config.model_type} config names no feed-forward width "
                            f"({', '.join(INTERMEDIATE_ATTRIBUTES)}): [distillation.student] intermediate_size "
                            "cannot narrow it")
    return names[0]


def feed_forwards(model: PreTrainedModel) -> List[FeedForward]:
    """Each layer's feed-forward pair, found by shape."""
    hidden, inner = model.config.hidden_size, getattr(model.config, _intermediate_attribute(model))
    names = {id(module): name for name, module in model.named_modules()}
    pairs = []
    for index, layer in enumerate(family_layout(model).layers):
        linears = [(names[id(m)], m) for m in layer.modules() if isinstance(m, nn.Linear)]
        ups = tuple(n for n, m in linears if (m.in_features, m.out_features) == (hidden, inner))
        downs = [n for n, m in linears if (m.in_features, m.out_features) == (inner, hidden)]
        if not ups or len(downs) != 1:
            raise SpacyMlmError(
                f"layer {index} of the {model.config.model_type} student has no one plain feed-forward pair "
                f"(linear maps {hidden} -> {inner} and {inner} -> {hidden}: found {len(ups)} and {len(downs)}; "
                "a gated one is not supported): [distillation.student] intermediate_size cannot narrow it")
        pairs.append(FeedForward(ups, downs[0]))
    return pairs


def attention_outputs(model: PreTrainedModel, sample: Dict[str, torch.Tensor]) -> List[Tuple[str, int]]:
    """Each layer's attention output projection (module path) and its heads'
    width, found as the linear map whose input the family's `prune_heads`
    narrows (tried on a copy, one head out of every layer, which must then
    still run on `sample`, a batch of the model's inputs)."""
    n_layers = len(family_layout(model).layers)
    if getattr(model.config, "pruned_heads", None):
        raise SpacyMlmError("the student already has pruned heads; [distillation.student] attention_heads counts "
                            "from a model with all of its heads")
    trial = copy.deepcopy(model).eval()
    try:
        trial.prune_heads({layer: [0] for layer in range(n_layers)})
        with torch.no_grad():
            trial(**sample)
    except (NotImplementedError, AttributeError, RuntimeError) as err:
        # no prune_heads for the family, or one that leaves a model that cannot run (MPNet's relative position bias)
        raise SpacyMlmError(f"transformers cannot prune the heads of a {model.config.model_type} model "
                            f"({type(err).__name__}): [distillation.student] attention_heads must be null "
                            "for it") from None
    pruned = {name: m for name, m in trial.named_modules() if isinstance(m, nn.Linear)}
    outputs = [(name, m.in_features - pruned[name].in_features) for name, m in model.named_modules()
               if isinstance(m, nn.Linear) and pruned[name].in_features < m.in_features]
    if len(outputs) != n_layers:
        raise SpacyMlmError(f"could not find one attention output projection per layer in the "
                            f"{model.config.model_type} student (found {len(outputs)} for {n_layers} layers)")
    return outputs


def _batches(tokenizer, texts: Sequence[str], device: torch.device):
    if not texts:
        raise SpacyMlmError("[distillation.student] intermediate_size / attention_heads measure what to keep on the "
                            "distillation texts, and there are none")
    texts = list(texts[:IMPORTANCE_TEXTS])
    for start in range(0, len(texts), IMPORTANCE_BATCH):
        # split_special_tokens: a "[SEP]" in a text is text, as the encoder reads it
        batch = tokenizer(texts[start:start + IMPORTANCE_BATCH], truncation=True, max_length=IMPORTANCE_MAX_PIECES,
                          padding=True, split_special_tokens=True, return_tensors="pt")
        yield {key: value.to(device) for key, value in batch.items()}


@torch.no_grad()
def unit_and_head_importance(model: PreTrainedModel, tokenizer, texts: Sequence[str], ffns: Sequence[FeedForward],
                             outputs: Sequence[Tuple[str, int]]) -> Tuple[List[torch.Tensor], List[torch.Tensor]]:
    """Per layer, the mean contribution norm of each unit of `ffns` and each
    head of `outputs` (`attention_outputs`) over the real tokens of (the first
    IMPORTANCE_TEXTS of) `texts`."""
    unit_sums = [torch.zeros(model.get_submodule(f.down).in_features, dtype=torch.float64) for f in ffns]
    head_sums = [torch.zeros(model.get_submodule(n).in_features // width, dtype=torch.float64) for n, width in outputs]
    state = {"mask": None, "tokens": 0}

    def on_units(index: int):
        weight_norms = model.get_submodule(ffns[index].down).weight.norm(dim=0)

        def hook(module, args):
            real = args[0][state["mask"]]  # (tokens, intermediate)
            unit_sums[index].add_((real.abs() * weight_norms).sum(0).double().cpu())
        return hook

    def on_heads(index: int):
        name, width = outputs[index]
        weight = model.get_submodule(name).weight  # (hidden, heads * width)
        per_head = weight.reshape(weight.shape[0], -1, width)

        def hook(module, args):
            real = args[0][state["mask"]]  # (tokens, heads * width)
            contribution = torch.einsum("thd,ohd->tho", real.reshape(real.shape[0], -1, width), per_head)
            head_sums[index].add_(contribution.norm(dim=-1).sum(0).double().cpu())
        return hook

    handles = [model.get_submodule(f.down).register_forward_pre_hook(on_units(i)) for i, f in enumerate(ffns)]
    handles += [model.get_submodule(n).register_forward_pre_hook(on_heads(i)) for i, (n, _) in enumerate(outputs)]
    was_training = model.training
    model.eval()
    try:
        device = next(model.parameters()).device
        for batch in _batches(tokenizer, texts, device):
            state["mask"] = batch["attention_mask"].bool()
            state["tokens"] += int(state["mask"].sum())
            model(**batch)
    finally:
        for handle in handles:
            handle.remove()
        model.train(was_training)
    tokens = max(state["tokens"], 1)
    return [s / tokens for s in unit_sums], [s / tokens for s in head_sums]


def _least(scores: torch.Tensor, keep: int) -> List[int]:
    """The indices of all but the `keep` largest scores (ties: the lower index stays)."""
    order = sorted(range(len(scores)), key=lambda i: (-float(scores[i]), i))
    return sorted(order[keep:])


def narrow(model: PreTrainedModel, tokenizer, texts: Sequence[str], intermediate_size: Optional[int],
           attention_heads: Optional[int]) -> Dict[str, List[List[int]]]:
    """Prune `model` in place to `intermediate_size` feed-forward units and
    `attention_heads` heads per layer (None: as it is); return what each layer
    lost ({"units": [[...] per layer], "heads": [...]}), for the log."""
    removed: Dict[str, List[List[int]]] = {}
    if intermediate_size is None and attention_heads is None:
        return removed
    layers = family_layout(model).layers
    if len({id(layer) for layer in layers}) != len(layers):
        raise SpacyMlmError(f"the {model.config.model_type} student shares its layers' weights: narrowing one "
                            "would narrow all; [distillation.student] intermediate_size and attention_heads must "
                            "be null")
    batches = _batches(tokenizer, texts, next(model.parameters()).device)
    ffns = feed_forwards(model) if intermediate_size is not None else []  # found before heads change shapes
    outputs = attention_outputs(model, next(iter(batches))) if attention_heads is not None else []
    attribute = _intermediate_attribute(model) if ffns else None
    if ffns and intermediate_size > getattr(model.config, attribute):
        raise SpacyMlmError(f"[distillation.student] intermediate_size = {intermediate_size}: the student's "
                            f"feed-forward width is {getattr(model.config, attribute)}")
    fewest = min((model.get_submodule(name).in_features // width for name, width in outputs), default=0)
    if outputs and attention_heads > fewest:
        raise SpacyMlmError(f"[distillation.student] attention_heads = {attention_heads}: the student's layers "
                            f"have {fewest} heads")
    units, heads = unit_and_head_importance(model, tokenizer, texts, ffns, outputs)
    if outputs:
        removed["heads"] = [_least(h, attention_heads) for h in heads]
        model.prune_heads({layer: lost for layer, lost in enumerate(removed["heads"]) if lost})
    if ffns:
        removed["units"] = []
        for ffn, scores in zip(ffns, units):
            lost = set(_least(scores, intermediate_size))
            kept = torch.tensor([i for i in range(len(scores)) if i not in lost])
            for name in ffn.ups:
                _replace(model, name, prune_linear_layer(model.get_submodule(name), kept, dim=0))
            _replace(model, ffn.down, prune_linear_layer(model.get_submodule(ffn.down), kept, dim=1))
            removed["units"].append(sorted(lost))
        setattr(model.config, attribute, intermediate_size)
    return removed


def _replace(model: nn.Module, name: str, module: nn.Module) -> None:
    parent, _, attribute = name.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, attribute, module)
