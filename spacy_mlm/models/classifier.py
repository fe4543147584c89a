"""The classification head: one vector per Doc from the encoder listener
([CLS] or mean over pieces), optional hidden layer, dropout, and a linear output
layer with softmax (exclusive classes) or sigmoid (multi-label).

The head outputs probabilities, but its output layer's backward pass takes the
gradient with respect to the *logits* (see `losses.py`), the same convention as
thinc's `Softmax`; the `mlm_textcat` component's `get_loss` produces exactly that.
"""
from typing import List, Optional

from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Dropout, Model, Relu, chain, list2ragged, reduce_mean
from thinc.types import Floats2d

from ..util.init import fixed_normal_init

HEAD_NAME = "mlm_classifier_head"


@registry.architectures("spacy_mlm.ClassifierHead.v1")
def build_classifier_head_v1(
    tok2vec: Model[List[Doc], List[Floats2d]],
    exclusive_classes: bool = True,
    hidden_width: int = 0,
    nO: Optional[int] = None,
) -> Model[List[Doc], Floats2d]:
    """As `spacy_mlm.ClassifierHead.v2` with a zero-initialised output layer
    (slow to start fine-tuning: kept for pipelines trained with it)."""
    return build_classifier_head_v2(tok2vec, exclusive_classes, hidden_width, nO, init_std=0.0)


@registry.architectures("spacy_mlm.ClassifierHead.v2")
def build_classifier_head_v2(
    tok2vec: Model[List[Doc], List[Floats2d]],
    exclusive_classes: bool = True,
    hidden_width: int = 0,
    nO: Optional[int] = None,
    init_std: float = 0.02,
) -> Model[List[Doc], Floats2d]:
    """Classifier on a listener's output.

    tok2vec: usually `spacy_mlm.EncoderListener.v1` with pooling "cls" or
        "doc_mean" (one row per doc); with a per-token pooling the token rows are
        averaged.
    exclusive_classes: softmax over the labels (one per doc) if true, else an
        independent sigmoid per label (multi-label).
    hidden_width: width of an extra ReLU layer before the output; 0 = none.
    nO: number of labels; inferred from the data in `initialize` when null.
    init_std: the output weights start as Normal(0, init_std), as in Hugging
        Face's classification heads (0 = zeros).
    Dropout before each dense layer uses the training dropout rate
    (`[training] dropout`, or `drop` in `nlp.update`)."""
    layers: List[Model] = [list2ragged(), reduce_mean()]
    if hidden_width:
        layers += [Dropout(0.0), Relu(nO=hidden_width)]
    output = build_class_output(nO, exclusive_classes, init_std)
    layers += [Dropout(0.0), output]
    model = chain(tok2vec, *layers)
    model.name = HEAD_NAME
    model.set_ref("tok2vec", tok2vec)
    model.set_ref("output_layer", output)
    model.attrs["exclusive_classes"] = bool(exclusive_classes)
    return model


def build_class_output(nO: Optional[int], exclusive_classes: bool, init_std: float = 0.0) -> Model[Floats2d, Floats2d]:
    """Linear layer + softmax/sigmoid whose backward expects d(loss)/d(logits)."""
    return Model(
        "class_output",
        _output_forward,
        init=_output_init,
        dims={"nO": nO, "nI": None},
        params={"W": None, "b": None},
        attrs={"exclusive_classes": bool(exclusive_classes), "init_std": float(init_std)},
    )


def _output_init(model: Model, X: Optional[Floats2d] = None, Y: Optional[Floats2d] = None) -> None:
    if X is not None and not model.has_dim("nI"):
        model.set_dim("nI", X.shape[1])
    if Y is not None and not model.has_dim("nO"):
        model.set_dim("nO", Y.shape[1])
    n_out, n_in = model.get_dim("nO"), model.get_dim("nI")
    model.set_param("W", fixed_normal_init(model.attrs["init_std"])(model.ops, (n_out, n_in)))
    model.set_param("b", model.ops.alloc1f(n_out))


def _output_forward(model: Model, X: Floats2d, is_train: bool):
    W, b = model.get_param("W"), model.get_param("b")
    logits = model.ops.gemm(X, W, trans2=True) + b
    if model.attrs["exclusive_classes"]:
        probs = model.ops.softmax(logits)
    else:
        probs = model.ops.sigmoid(logits)

    def backprop(d_logits: Floats2d) -> Floats2d:
        model.inc_grad("W", model.ops.gemm(d_logits, X, trans1=True))
        model.inc_grad("b", d_logits.sum(axis=0))
        return model.ops.gemm(d_logits, W)

    return probs, backprop
