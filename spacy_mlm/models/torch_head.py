"""The seam between a torch head and spaCy: one thinc model for every torch head
of the package (the tagger, the classifier, the regressor, the sense head),
built here once, as `TorchShim` is for the encoder's transformer.

A head is a `torch.nn.Module` and two small functions of its own:

* `read(model, X, rows)` turns what the head reads into the module's
  arguments: `X` is the listener's output for each Doc (torch tensors, or
  `PieceRows`: the listener hands torch heads torch tensors, never thinc
  arrays) and `rows` the same rows as autograd leaves, which the module's
  inputs are built from;
* `wrap(model, scores, X)` packs the module's output for the component (the
  tagger's `TagScores`; the others hand the tensor itself).

In training the component computes its loss and the gradient for the scores
with `loss_and_gradient`; the backprop callback runs the module's backward
pass from that gradient and hands the gradients of the leaves, still torch
tensors, to the listener, which pushes them into the encoder. At prediction
time the module runs in eval mode under `torch.inference_mode`.
"""
from functools import partial
from typing import Callable, Dict, List, Optional, Tuple

import torch
from thinc.api import Model

from .listener import LayerRows, PieceRows, read_as_torch
from .torch_shim import TorchShim

Read = Callable[[Model, List, List[torch.Tensor]], Tuple[tuple, dict]]
Wrap = Callable[[Model, torch.Tensor, List], object]


def build_torch_head(
    name: str,
    module: Callable[..., torch.nn.Module],
    *,
    read: Read,
    init: Callable,
    tok2vec: Model,
    wrap: Optional[Wrap] = None,
    dims: Optional[Dict] = None,
    attrs: Optional[Dict] = None,
) -> Model:
    """A thinc model running the torch module made by `module(**settings)` (its
    shim builds it in `init`, once the sizes are known) on `tok2vec`'s output
    (the listener). `read`, `wrap`: see the module
    docstring; they must be module-level functions (the model is pickled)."""
    read_as_torch(tok2vec)
    return Model(
        name,
        partial(torch_head_forward, read=read, wrap=wrap),
        init=init,
        dims=dims or {},
        layers=[tok2vec],
        refs={"tok2vec": tok2vec},
        shims=[TorchShim(build=module)],
        attrs=attrs or {},
    )


def torch_module(model: Model) -> torch.nn.Module:
    """The head's torch module (after `initialize` or loading)."""
    return model.shims[0].module


def torch_head_forward(model: Model, inputs: List, is_train: bool, *, read: Read, wrap: Optional[Wrap]):
    head = torch_module(model)
    X, backprop_X = model.get_ref("tok2vec")(inputs, is_train)
    leaves = [_rows(x).detach().requires_grad_(True) if is_train else _rows(x) for x in X]
    if not is_train:
        head.eval()
        with torch.inference_mode():
            args, kwargs = read(model, X, leaves)
            scores = head(*args, **kwargs)
        return _wrapped(model, wrap, scores, X), lambda d_scores: []
    head.train()
    args, kwargs = read(model, X, leaves)
    scores = head(*args, **kwargs)

    def backprop(d_scores: torch.Tensor) -> List:
        """d_scores: the gradient of the loss for the scores (`loss_and_gradient`)."""
        torch.autograd.backward(scores, d_scores)
        return backprop_X([leaf.grad if leaf.grad is not None else torch.zeros_like(leaf) for leaf in leaves])

    return _wrapped(model, wrap, scores.detach(), X), backprop


def loss_and_gradient(loss_of: Callable[[torch.Tensor], torch.Tensor], scores: torch.Tensor) -> Tuple[float, torch.Tensor]:
    """The loss of a head's scores and its gradient for them, which the head's
    backprop takes: `loss_of` gets a copy of the scores that is an autograd
    leaf (its backward also fills the gradients of any parameter the loss uses
    itself, such as the CRF's transitions); zeros where the loss does not use
    the scores, and everywhere for a loss over nothing (a constant: a
    data-parallel process's share without labelled Docs)."""
    leaf = scores.detach().clone().requires_grad_(True)
    loss = loss_of(leaf)
    if loss.requires_grad:
        loss.backward()
    return float(loss.detach()), leaf.grad if leaf.grad is not None else torch.zeros_like(leaf)


def _rows(x) -> torch.Tensor:
    return x.rows if isinstance(x, (PieceRows, LayerRows)) else x


def _wrapped(model: Model, wrap: Optional[Wrap], scores: torch.Tensor, X: List):
    return scores if wrap is None else wrap(model, scores, X)
