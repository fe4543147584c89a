"""The classification head: a torch module over one vector per Doc.

The listener gives one row per doc ([CLS] or the mean of the pieces) or one
per token (then averaged here); an optional hidden layer (ReLU in v3; v4
names its activation, so that the heads of Hugging Face's sequence
classifiers, RoBERTa's tanh and DeBERTa's GELU, are this module with their
weights: `spacy_mlm/interop/hf_heads.py`) and a linear output layer give the
logits. Dropout uses the training rate that spaCy sets
on the model (`[training] dropout`, `drop` in `nlp.update`). The thinc model
`spacy_mlm.ClassifierHead.v3` (`models/torch_head.py`, the seam every torch
head shares) returns the logits as a torch tensor on the encoder's device; in
training the component's loss (`classification/losses.py`) gives their
gradient, which goes back through the head, the listener and the encoder.

`spacy_mlm.RegressionHead.v1` is the same module read as real values, one per
target (no softmax or sigmoid), for `mlm_regressor`.
"""
from typing import List, Optional

import torch
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model
from thinc.types import Floats2d

from ..util.settings import FLAG, INT, NUMBER, check_settings, one_of, optional
from .dropout import dropout as apply_dropout
from .initialization import init_output_layer
from .listener import initialized_width
from .torch_head import build_torch_head, torch_module


# The hidden layer's activations (v4's `hidden_activation`): "gelu" is the exact
# (erf) GELU, Hugging Face's "gelu".
HIDDEN_ACTIVATIONS = {"relu": torch.relu, "tanh": torch.tanh, "gelu": torch.nn.functional.gelu}


class ClassifierHead(torch.nn.Module):
    def __init__(self, width: int, n_labels: int, hidden_width: int, init_std: float, activation: str = "relu"):
        super().__init__()
        self.hidden = torch.nn.Linear(width, hidden_width) if hidden_width else None
        self.output = torch.nn.Linear(hidden_width or width, n_labels)
        self.activation = HIDDEN_ACTIVATIONS[activation]
        init_output_layer(self.output, init_std)

    def forward(self, vectors: torch.Tensor, dropout: float = 0.0) -> torch.Tensor:
        if self.hidden is not None:
            vectors = self.activation(self.hidden(apply_dropout(vectors, dropout, self.training)))
        return self.output(apply_dropout(vectors, dropout, self.training))


@registry.architectures("spacy_mlm.ClassifierHead.v3")
def build_classifier_head_v3(
    tok2vec: Model[List[Doc], List[Floats2d]],
    exclusive_classes: bool = True,
    hidden_width: int = 0,
    nO: Optional[int] = None,
    init_std: float = 0.02,
) -> Model[List[Doc], torch.Tensor]:
    """Classifier logits (n_docs, nO) on a listener's output.

    tok2vec: usually `spacy_mlm.EncoderListener.v1` with pooling "cls" or
        "doc_mean" (one row per doc); with a per-token pooling the token rows
        are averaged.
    exclusive_classes: softmax over the labels (one per doc) if true, else an
        independent sigmoid per label (multi-label).
    hidden_width: width of an extra ReLU layer before the output; 0 = none.
    nO: number of labels; set by the component from its labels.
    init_std: the output weights start as Normal(0, init_std)."""
    check_settings("spacy_mlm.ClassifierHead.v3", exclusive_classes=(exclusive_classes, FLAG))
    return _head_model("mlm_classifier_head", tok2vec, hidden_width, nO, init_std,
                       exclusive_classes=bool(exclusive_classes))


@registry.architectures("spacy_mlm.ClassifierHead.v4")
def build_classifier_head_v4(
    tok2vec: Model[List[Doc], List[Floats2d]],
    exclusive_classes: bool = True,
    hidden_width: int = 0,
    hidden_activation: str = "relu",
    nO: Optional[int] = None,
    init_std: float = 0.02,
) -> Model[List[Doc], torch.Tensor]:
    """ClassifierHead.v3 with the hidden layer's activation as a setting.

    hidden_activation: "relu" (v3's), "tanh" (RoBERTa's and XLM-R's sequence
        classification head) or "gelu" (DeBERTa's pooler, ELECTRA's head); read
        only with hidden_width > 0.
    The other settings are v3's."""
    check_settings("spacy_mlm.ClassifierHead.v4", exclusive_classes=(exclusive_classes, FLAG),
                   hidden_activation=(hidden_activation, one_of(*HIDDEN_ACTIVATIONS)))
    return _head_model("mlm_classifier_head", tok2vec, hidden_width, nO, init_std,
                       exclusive_classes=bool(exclusive_classes), hidden_activation=hidden_activation)


@registry.architectures("spacy_mlm.RegressionHead.v1")
def build_regression_head_v1(
    tok2vec: Model[List[Doc], List[Floats2d]],
    hidden_width: int = 0,
    nO: Optional[int] = None,
    init_std: float = 0.02,
) -> Model[List[Doc], torch.Tensor]:
    """Real values (n_docs, nO), one per target, on a listener's output: the
    classifier head's layers without a softmax or sigmoid.

    tok2vec, hidden_width, init_std: as for `spacy_mlm.ClassifierHead.v3`.
    nO: number of targets; set by the component from its targets."""
    return _head_model("mlm_regression_head", tok2vec, hidden_width, nO, init_std)


def _head_model(name: str, tok2vec: Model, hidden_width: int, nO: Optional[int], init_std: float, **attrs) -> Model:
    check_settings(f"the {name}'s", hidden_width=(hidden_width, INT, ">= 0"), nO=(nO, optional(INT), ">= 1"),
                   init_std=(init_std, NUMBER, ">= 0"))
    return build_torch_head(name, ClassifierHead, tok2vec=tok2vec, read=_read_doc_vectors, init=_classifier_init,
                            dims={"nO": nO, "nI": None},
                            attrs={**attrs, "hidden_width": hidden_width, "init_std": init_std, "dropout_rate": 0.0})


def _classifier_init(model: Model, X=None, Y=None):
    if Y is not None and not model.has_dim("nO"):
        model.set_dim("nO", Y.shape[1])
    model.set_dim("nI", initialized_width(model.get_ref("tok2vec"), "classifier"), force=True)
    model.shims[0].build(width=model.get_dim("nI"), n_labels=model.get_dim("nO"),
                         hidden_width=model.attrs["hidden_width"], init_std=model.attrs["init_std"],
                         activation=model.attrs.get("hidden_activation", "relu"))
    return model


def _read_doc_vectors(model: Model, X: List[torch.Tensor], rows: List[torch.Tensor]):
    """(n_docs, width): each doc's rows averaged (a single row stays as it is),
    and the dropout rate (the module applies it in training only)."""
    width, device = model.get_dim("nI"), torch_module(model).output.weight.device
    if not rows:
        vectors = torch.zeros((0, width), device=device)
    elif all(len(x) == 1 for x in rows):
        vectors = torch.cat(rows)
    else:
        vectors = torch.stack([x.mean(dim=0) if len(x) else x.new_zeros(width) for x in rows])
    return (vectors,), {"dropout": model.attrs["dropout_rate"]}
