"""What differs between encoder families, read from the model itself.

BERT, RoBERTa, XLM-R, DistilBERT, ELECTRA, DeBERTa-v2/v3, ModernBERT, ALBERT
and MPNet each lay out the same ideas differently: the transformer blocks sit
in `encoder.layer`, `transformer.layer`, `layers` or, for ALBERT, one shared
group run `num_hidden_layers` times; the MLM head is one child (`cls`,
`lm_head`, `predictions`) or several run in turn (DistilBERT's
`vocab_transform`, `activation`, `vocab_layer_norm`, `vocab_projector`;
ModernBERT's `head`, `decoder`; ELECTRA's `generator_predictions`,
`generator_lm_head`); positions are absolute, offset by the padding index,
relative or rotary; some have segment ids and a pooler, others not. This is the
one module that knows that, and it knows it by looking, not from a list of
family names:

* The layer stack and each parameter's depth come from running the model once
  on a four-piece probe with hooks on the blocks of its ModuleLists: the
  blocks in the order they run (ALBERT's shared group once per layer it
  computes), and every module that runs before the first block (embeddings,
  ELECTRA's and ALBERT's projection, DeBERTa's relative-position norm).
* The MLM head is the children of the `*ForMaskedLM` model other than the
  backbone, in the order the model calls them, composed, and accepted only if
  that composition reproduces the model's own logits on the probe.
* Segment ids: the forward takes `token_type_ids` and the config has more than
  one type (DeBERTa-v3's `type_vocab_size = 0`, RoBERTa's 1: none).
* Positions: the rows of the position table less the padding offset where the
  table has a padding index (RoBERTa, XLM-R, MPNet count positions from
  `pad_token_id + 1`), else `max_position_embeddings`.
"""
import inspect
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from torch import nn

from ..errors import ModelLoadError

# A long-context family (ModernBERT: 8,192 positions) read in windows this long
# by default: attention's time and memory grow with the square of the window,
# and 512 keeps a CPU batch near BERT's cost; set `window` to read further.
DEFAULT_WINDOW = 512
PROBE_LENGTH = 4


@dataclass(frozen=True)
class FamilyLayout:
    """family: config.model_type. layers: the transformer blocks in the order
    they run (a shared block appears once per layer it computes). embeddings:
    the modules that run before the first block. segments: token_type_ids are
    fed. max_positions: the longest input, special tokens included. pooler:
    the model has a pooler (dense + tanh over [CLS]). attention: how it sees
    positions, in words."""

    family: str
    layers: Tuple[nn.Module, ...]
    embeddings: Tuple[nn.Module, ...]
    segments: bool
    max_positions: int
    pooler: bool
    attention: str

    @property
    def n_layers(self) -> int:
        return len(self.layers)


def _name(model: nn.Module) -> str:
    return str(getattr(model, "name_or_path", "") or type(model).__name__)


def _probe_inputs(model: nn.Module) -> Dict[str, torch.Tensor]:
    device = next(model.parameters()).device
    ids = torch.arange(PROBE_LENGTH, device=device)[None, :] % int(model.config.vocab_size)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def _run_probe(model: nn.Module, watched: Sequence[nn.Module]):
    """Run `model` on the probe in eval mode without gradients, recording which
    of `watched` start and end (as ("start"|"end", index)) in order; returns
    the record and the model's output."""
    record: List[Tuple[str, int]] = []
    handles = []
    for i, module in enumerate(watched):
        handles.append(module.register_forward_pre_hook(lambda m, a, i=i: record.append(("start", i))))
        handles.append(module.register_forward_hook(lambda m, a, o, i=i: record.append(("end", i))))
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = model(**_probe_inputs(model), return_dict=True)
    except Exception as err:  # transformers raises many kinds here
        raise ModelLoadError(_name(model), f"'{model.config.model_type}': {type(model).__name__} fails on a "
                                           f"{PROBE_LENGTH}-piece input ({type(err).__name__}: {err})") from None
    finally:
        model.train(was_training)
        for handle in handles:
            handle.remove()
    return record, out


def _trace(backbone: nn.Module) -> Tuple[List[nn.Module], Dict[int, int]]:
    """The blocks as run, and for each module (by id) that runs its depth: 0
    before the first block, i + 1 inside the i-th block run (a module run by
    several: the last), -1 after the last block."""
    modules = [m for m in backbone.modules() if m is not backbone]
    parents = {id(child): id(module) for module in modules if isinstance(module, nn.ModuleList) for child in module}
    record, _ = _run_probe(backbone, modules)
    # the outermost blocks (elements of a ModuleList not run inside another one), in the order they run
    runs: List[int] = []
    open_blocks = 0
    for event, i in record:
        if id(modules[i]) not in parents:
            continue
        if event == "start":
            if not open_blocks:
                runs.append(i)
            open_blocks += 1
        else:
            open_blocks -= 1
    if not runs:
        raise ModelLoadError(_name(backbone), f"'{backbone.config.model_type}': no stack of transformer blocks "
                                              "(a ModuleList whose elements run in the forward pass) was found")
    # the stack is the list whose blocks run most often (a model may keep other ModuleLists)
    counts: Dict[int, int] = {}
    for i in runs:
        counts[parents[id(modules[i])]] = counts.get(parents[id(modules[i])], 0) + 1
    stack = max(counts, key=counts.get)
    runs = [i for i in runs if parents[id(modules[i])] == stack]
    layers = [modules[i] for i in runs]
    depths: Dict[int, int] = {}
    current, started = 0, 0
    for event, i in record:
        if parents.get(id(modules[i])) == stack:
            if event == "start":
                started += 1
                current = started
            elif started == len(layers):
                current = -1
        if event == "start":
            depths[id(modules[i])] = max(depths.get(id(modules[i]), current), current)
    return layers, depths


def position_limit(model: nn.Module) -> int:
    """The most positions the model's position table holds: its rows less the
    padding offset where it has a padding index, else `max_position_embeddings`
    (relative and rotary positions)."""
    backbone = model.base_model
    config = backbone.config
    embeddings = getattr(backbone, "embeddings", None)
    table = getattr(embeddings, "position_embeddings", None)
    if isinstance(table, nn.Embedding):
        offset = 0 if table.padding_idx is None else table.padding_idx + 1
        return int(table.num_embeddings - offset)
    return int(getattr(config, "max_position_embeddings", None) or 512)


def _attention(backbone: nn.Module) -> str:
    config = backbone.config
    if getattr(config, "local_attention", None):
        every = getattr(config, "global_attn_every_n_layers", None)
        return f"rotary, local ({config.local_attention} positions), global every {every} layers"
    if getattr(config, "relative_attention", False) or getattr(config, "relative_attention_num_buckets", None):
        return "relative positions"
    table = getattr(getattr(backbone, "embeddings", None), "position_embeddings", None)
    if isinstance(table, nn.Embedding) and table.padding_idx is not None:
        return "absolute positions from the padding index"
    return "absolute positions"


def has_segments(model: nn.Module) -> bool:
    """Whether the model takes segment (token type) ids: its forward has the
    argument and its config more than one type."""
    backbone = model.base_model
    return "token_type_ids" in inspect.signature(backbone.forward).parameters and (
        getattr(backbone.config, "type_vocab_size", 0) or 0
    ) > 1


def segment_inputs(model: nn.Module, token_type_ids: Optional[torch.Tensor]) -> Dict[str, torch.Tensor]:
    """{"token_type_ids": ...} for a model that takes them, else nothing
    (DistilBERT's and ModernBERT's forward have no such argument)."""
    return {"token_type_ids": token_type_ids} if token_type_ids is not None and has_segments(model) else {}


def family_layout(model: nn.Module) -> FamilyLayout:
    """The layout of a Hugging Face encoder (bare or with a head)."""
    backbone = model.base_model
    layers, depths = _trace(backbone)
    embeddings = tuple(m for m in backbone.children()
                       if depths.get(id(m)) == 0 and not any(layer is sub for sub in m.modules() for layer in layers))
    return FamilyLayout(
        family=str(backbone.config.model_type),
        layers=tuple(layers),
        embeddings=embeddings,
        segments=has_segments(model),
        max_positions=position_limit(model),
        pooler=getattr(backbone, "pooler", None) is not None,
        attention=_attention(backbone),
    )


def parameter_depths(model: nn.Module) -> Optional[List[Optional[int]]]:
    """For each of `model.named_parameters()` in order: 0 for the embeddings
    (whatever runs before the first block), i + 1 for block i (a shared block:
    the last layer that runs it), None for the rest (pooler, heads, a final
    norm); None for a module that is not a Hugging Face model."""
    if not hasattr(model, "base_model") or not hasattr(model, "config"):
        return None
    _, depths = _trace(model.base_model)
    by_param: Dict[int, int] = {}
    for module in model.modules():
        depth = depths.get(id(module))
        if depth is None or depth < 0:
            continue
        for param in module.parameters(recurse=False):
            by_param[id(param)] = max(by_param.get(id(param), depth), depth)
    return [by_param.get(id(param)) for _, param in model.named_parameters()]


def layer_scopes(model: nn.Module) -> List[str]:
    """For each layer as run, the scope the ONNX exporter names its nodes by:
    the block's module path with "/" between attributes and "." before a list
    index ("/encoder/layer.3/", ModernBERT's "/layers.3/", ALBERT's shared
    "/encoder/albert_layer_groups.0/", the same for every layer running it)."""
    paths = {id(module): name for name, module in model.named_modules()}
    return ["/" + re.sub(r"\.(?!\d)", "/", paths[id(layer)]) + "/" for layer in family_layout(model).layers]


def mlm_head_names(mlm_model: nn.Module) -> Tuple[str, ...]:
    """The names of the children of a `*ForMaskedLM` model that map the
    backbone's hidden states to vocabulary logits, in the order it calls them;
    checked by running them on the probe's hidden states against the model's
    own logits, so a head that is not a plain chain is refused by name."""
    prefix = mlm_model.base_model_prefix
    children = [(name, child) for name, child in mlm_model.named_children()
                if name != prefix and not isinstance(child, nn.modules.loss._Loss)]
    record, out = _run_probe(mlm_model, [child for _, child in children])
    order: List[str] = []
    for event, i in record:
        if event == "start" and children[i][0] not in order:
            order.append(children[i][0])
    family = mlm_model.config.model_type
    if not order:
        raise ModelLoadError(_name(mlm_model), f"'{family}': {type(mlm_model).__name__} calls no head module")
    backbone = mlm_model.base_model
    was_training = mlm_model.training
    mlm_model.eval()
    try:
        with torch.no_grad():
            hidden = backbone(**_probe_inputs(mlm_model)).last_hidden_state
            logits = run_head(mlm_model, order, hidden)
    except Exception as err:  # a head that takes more than the hidden states
        raise ModelLoadError(
            _name(mlm_model),
            f"'{family}': the MLM head of {type(mlm_model).__name__} ({', '.join(order)}) is not a chain of modules "
            f"over the hidden states ({type(err).__name__}: {err}); masked-LM pretraining cannot run it at chosen "
            "positions only",
        ) from None
    finally:
        mlm_model.train(was_training)
    if logits.shape != out.logits.shape or not torch.allclose(logits, out.logits, atol=1e-4, rtol=1e-4):
        raise ModelLoadError(
            _name(mlm_model),
            f"'{family}': running {', '.join(order)} in turn does not give {type(mlm_model).__name__}'s logits, so "
            "its MLM head cannot be run at chosen positions only",
        )
    return tuple(order)


def run_head(mlm_model: nn.Module, names: Sequence[str], hidden: torch.Tensor) -> torch.Tensor:
    """The named head children of `mlm_model` applied in turn to `hidden`."""
    for name in names:
        hidden = getattr(mlm_model, name)(hidden)
    return hidden
