"""Stepping torch parameters with a torch optimizer: the one optimizer path of
every torch weight we train, in spaCy's loop and in the training engine.

spaCy trains a pipeline with one thinc `Optimizer` (`[training.optimizer]`),
which thinc's `PyTorchShim` calls once per torch parameter: a numpy Adam over
host copies of every weight, one parameter at a time, a large share of each
fine-tuning step, and impossible on a GPU without a round trip. `torch_step` instead steps all the
parameters of one torch module at once with `torch.optim.AdamW` (fused where
torch has a fused kernel for the device), taking every hyperparameter from
the thinc optimizer at the moment of the step: the learning rate as its
schedule stands (`optimizer.learn_rate`, which spaCy's logger reports and
`step_schedules` advances), betas, eps, L2 (decoupled weight decay when
`L2_is_weight_decay`, else L2 added to the gradient as in Adam) and
`grad_clip`, applied as a clip of the global gradient norm of the module's
parameters (Hugging Face's `max_grad_norm`, BERT's recipe), where thinc clips
each parameter's gradient on its own. The torch optimizer's moments live with
the module (`TorchStepper`), one per thinc optimizer. Parameter averages
(`use_averages`) are not kept for torch parameters (nor were they by thinc's
shim, whose averages never reached `use_params`).

The training engine (`engine/trainer.py`: pretraining, sense tuning,
distillation) steps with the same class, its settings from its own schedule
(`StepSettings`: no decay on biases and norms, the clip as `clip_grad_norm_`
rounds it) instead of a thinc optimizer.

The layer-wise learning-rate decay of `spacy_mlm.LayerDecayAdam.v2`
(`training/optimizer.py`: the optimizer carries `layer_decay`) is applied here:
L and each parameter's layer are read from a Hugging Face model as it runs
(`families.parameter_depths`: ALBERT's one shared layer learns at the rate of
the last layer that runs it), from other modules' parameter names, when it
first steps. Pure torch, beside `torch_shim.py`, which owns one per module.

A word-embedding matrix whose gradient comes as rows (`nn.Embedding.sparse`,
set by `row_adamw.use_sparse_word_gradients` on a fine-tuned encoder) is
stepped by `row_adamw.RowAdamW`, at the cost of the rows training has touched,
with the same update as the dense step (decoupled weight decay; with L2 added
to the gradient every row changes at every step, so the gradient is made dense).

In a data-parallel run where each process steps only the weights it owns
(`engine/shared_memory.py`), a module's gradient norm is not the norm of
the gradients this process holds: the run gives the squared norm of each
module's whole gradient (`give_squared_norm`) before the step, and clipping
uses it.
"""
import re
import weakref
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from thinc.api import Optimizer

from ..errors import SettingError, SpacyMlmError
from .families import parameter_depths
from .row_adamw import RowAdamW, row_gradient

# module -> the squared norm of its whole gradient, for its next step
_GIVEN_SQUARED_NORMS: "weakref.WeakKeyDictionary[torch.nn.Module, torch.Tensor]" = weakref.WeakKeyDictionary()


def give_squared_norm(module: torch.nn.Module, squared_norm: torch.Tensor) -> None:
    """For `module`'s next step: the squared norm of its whole gradient,
    where this process holds only part of it."""
    _GIVEN_SQUARED_NORMS[module] = squared_norm


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
        raise SettingError(f"a parameter of transformer layer {depth - 1} was seen but num_layers = {num_layers}")
    return float(decay ** (num_layers + 1 - depth))


def layer_lr_scales(names: Sequence[str], decay: float, depths: Optional[Sequence[Optional[int]]] = None) -> List[float]:
    """The multiplier of each named parameter of one module, its depth counted
    from the deepest transformer layer among `names`; `depths` where the model
    says them (`families.parameter_depths`), else read from the names."""
    depths = [parameter_depth(name) for name in names] if depths is None else list(depths)
    num_layers = max([d for d in depths if d is not None] or [0])
    return [layer_lr_scale(d, num_layers, decay) for d in depths]


@dataclass
class StepSettings:
    """The hyperparameters of one step: what `thinc_settings` reads from spaCy's
    optimizer, or what the engine's schedule gives (`engine/trainer.py`).

    decoupled: AdamW's weight decay; False adds L2 to the gradient (thinc's Adam
        with `L2_is_weight_decay = False`).
    grad_clip: the bound of the global gradient norm; 0 clips nothing.
    decay_vectors: weight decay on biases and norms too (thinc decays every
        weight); False decays matrices only (BERT's recipe, the engine's).
    clip_in_step: with the fused step, the clip rides on its `grad_scale` (one
        pass less); False multiplies the gradients first, as `clip_grad_norm_`
        does, to its rounding (the engine's runs keep their bits so)."""

    learn_rate: float
    betas: Tuple[float, float]
    eps: float
    weight_decay: float
    decoupled: bool = True
    grad_clip: float = 0.0
    layer_decay: float = 1.0
    decay_vectors: bool = True
    clip_in_step: bool = True


def thinc_settings(optimizer: Optimizer) -> StepSettings:
    """The settings of a step that follows spaCy's thinc optimizer as it stands."""
    if getattr(optimizer, "use_radam", False) or not (optimizer.b1 > 0 and optimizer.b2 > 0):
        raise SpacyMlmError(
            "torch parameters are stepped with Adam/AdamW: set [training.optimizer] to Adam.v1 or "
            "spacy_mlm.LayerDecayAdam.v2 (with beta1 and beta2 above 0)"
        )
    return StepSettings(
        learn_rate=float(optimizer.learn_rate), betas=(float(optimizer.b1), float(optimizer.b2)),
        eps=float(optimizer.eps), weight_decay=float(optimizer.L2), decoupled=bool(optimizer.L2_is_weight_decay),
        grad_clip=float(optimizer.grad_clip or 0.0), layer_decay=getattr(optimizer, "layer_decay", 1.0),
    )


class TorchStepper:
    """The torch optimizer state of one module and its steps: of a torch
    component in spaCy's loop (`step`, following the thinc optimizer of the
    config), and of every run of the training engine (`step_with`).

    The state is kept for what it follows (a new thinc optimizer, e.g. a
    second `spacy train`, starts afresh). That object is held, not its `id()`:
    CPython gives a new object the id of one just freed, so a new optimizer
    could pass for the old one and inherit its moments and step count; a weak
    reference cannot be had (thinc's `Optimizer` has `__slots__` without
    `__weakref__`). A copy (thinc's `Shim.copy` deep-copies) follows none and
    starts afresh at its next step, as thinc's own moments do for a copied model."""

    def __init__(self) -> None:
        self._follows: Optional[object] = None
        self._torch: Optional[torch.optim.Optimizer] = None
        self._scales: List[float] = []
        self._decays: List[bool] = []
        self._group_of: Dict[int, int] = {}  # parameter id -> index of its param group
        self._rows: Dict[int, RowAdamW] = {}  # parameter id -> its row-wise state

    def __getstate__(self) -> Dict:
        return {**self.__dict__, "_follows": None}  # a copy or pickle carries no thinc optimizer

    def step(self, module: torch.nn.Module, optimizer: Optimizer) -> None:
        """One step of `module` as spaCy's thinc `optimizer` stands."""
        self.step_with(module, thinc_settings(optimizer), follows=optimizer)

    def step_with(self, module: torch.nn.Module, settings: StepSettings, follows: object = None) -> None:
        """One step of every trainable parameter of `module` with a gradient,
        then the gradients are cleared; the state starts afresh when it
        followed another object than `follows`."""
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        given = _GIVEN_SQUARED_NORMS.pop(module, None)
        if not any(p.grad is not None for _, p in named):
            return
        if self._torch is None or self._follows is not follows:
            self.start(module, settings, follows)
        by_rows = self._row_gradients(module, [p for _, p in named if p.grad is not None], settings.decoupled)
        params = [p for _, p in named if p.grad is not None]
        grad_scale = None
        if settings.grad_clip:
            grad_scale = self._clip(params, [values for _, _, values in by_rows], settings.grad_clip, given,
                                    in_step=settings.clip_in_step)
        for group, scale, decays in zip(self._torch.param_groups, self._scales, self._decays):
            group["lr"] = settings.learn_rate * scale
            group["betas"] = settings.betas
            group["eps"] = settings.eps
            group["weight_decay"] = settings.weight_decay if decays else 0.0
            group["decoupled_weight_decay"] = settings.decoupled
        self._torch.step()
        self._torch.__dict__.pop("grad_scale", None)
        for param, rows, values in by_rows:
            group = self._torch.param_groups[self._group_of[id(param)]]
            self._rows[id(param)].step(rows, values, lr=group["lr"], betas=group["betas"], eps=group["eps"],
                                       weight_decay=group["weight_decay"], grad_scale=grad_scale)
        self._torch.zero_grad(set_to_none=True)

    def state_dict(self) -> Dict:
        """The torch optimizer's state (a checkpoint's; rows stepped by `RowAdamW` are not in it)."""
        return self._torch.state_dict()

    def load_state_dict(self, state: Dict) -> None:
        """Restore `state_dict()` into the state `start` made."""
        self._torch.load_state_dict(state)

    def parameters(self) -> List[torch.nn.Parameter]:
        """The parameters stepped, in the order `state_dict()` numbers them."""
        return [p for group in self._torch.param_groups for p in group["params"]]

    def forget(self, params: Sequence[torch.nn.Parameter]) -> None:
        """Drop the moments of `params` (stepped by another process from here on)."""
        for param in params:
            self._torch.state.pop(param, None)

    def _row_gradients(self, module: torch.nn.Module, params: List[torch.nn.Parameter], decoupled: bool):
        """(parameter, rows, their gradients) of each embedding matrix stepped
        by rows, whose gradient is taken off it (the torch optimizer skips it);
        a row gradient that cannot be stepped so is made dense."""
        by_rows = []
        for param in params:
            if id(param) not in self._rows and param.grad.is_sparse:
                embedding = next((m for m in module.modules()
                                  if isinstance(m, torch.nn.Embedding) and m.weight is param), None)
                if embedding is None or not decoupled:
                    param.grad = param.grad.to_dense()
                    continue
                self._rows[id(param)] = RowAdamW(embedding, fused=bool(self._torch.defaults.get("fused")))
            if id(param) in self._rows:
                rows, values = row_gradient(param.grad)
                param.grad = None
                by_rows.append((param, rows, values))
        return by_rows

    def _clip(self, params: List[torch.nn.Parameter], row_grads: List[torch.Tensor], max_norm: float,
              given_squared: Optional[torch.Tensor] = None, in_step: bool = True) -> Optional[torch.Tensor]:
        """Clip the global gradient norm (embedding rows' gradients included:
        their sum of squares is the dense matrix's) to `max_norm`, as
        `clip_grad_norm_` does. With the fused optimizer and `in_step` the
        scaling rides on the step itself: its `grad_scale` (the hook
        `torch.amp.GradScaler` unscales through) divides each gradient as the
        kernel reads it, which saves a pass over every gradient.
        The update is the same up to rounding (a division by 1 / coefficient
        instead of a product). Returns that scale (None when the gradients
        were multiplied). `given_squared`: the squared norm of the whole
        gradient, where these are only part of it (`give_squared_norm`)."""
        grads = [p.grad for p in params if p.grad is not None] + row_grads
        norm = torch.nn.utils.get_total_norm(grads) if given_squared is None else given_squared.sqrt()
        if not (in_step and self._torch.defaults.get("fused")):
            # clip_grad_norm_'s coefficient, min(1, max_norm / (norm + 1e-6))
            torch._foreach_mul_(grads, torch.clamp(max_norm / (norm + 1e-6), max=1.0))
            return None
        self._torch.grad_scale = torch.clamp((norm + 1e-6) / max_norm, min=1.0)
        return self._torch.grad_scale

    def start(self, module: torch.nn.Module, settings: StepSettings, follows: object = None) -> None:
        """A fresh state over the parameters of `module` that train now: one
        param group per learning-rate scale (layer decay) and, without
        `decay_vectors`, matrices apart from biases and norms, in the order
        the module lists them."""
        for rows in self._rows.values():  # the new optimizer's moments start at zero for every row
            rows.close()
        self._rows = {}
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        scales = [1.0] * len(named)
        if settings.layer_decay != 1.0:
            # a Hugging Face model's depths as it runs (ALBERT's shared layers), else by name
            depths = parameter_depths(module)
            if depths is not None:
                trainable = {name for name, _ in named}
                depths = [d for (name, _), d in zip(module.named_parameters(), depths) if name in trainable]
            scales = layer_lr_scales([n for n, _ in named], settings.layer_decay, depths)
        groups: Dict[Tuple[float, bool], list] = {}
        for (_, param), scale in zip(named, scales):
            groups.setdefault((scale, settings.decay_vectors or param.ndim >= 2), []).append(param)
        self._scales = [scale for scale, _ in groups]
        self._decays = [decays for _, decays in groups]
        self._group_of = {id(p): g for g, params in enumerate(groups.values()) for p in params}
        device = named[0][1].device
        # torch.optim.Adam with decoupled_weight_decay is AdamW; fused kernels exist on CUDA and CPU
        self._torch = torch.optim.Adam([{"params": params} for params in groups.values()],
                                       lr=settings.learn_rate, fused=_fused_ok(device))
        self._follows = follows


def _fused_ok(device: torch.device) -> bool:
    return device.type in ("cuda", "cpu")
