"""The token-tagging head: one row of tag scores per token over the encoder's
token vectors, plus (for the CRF variant) start / transition / end scores.

The model's output are emission scores (logits), never probabilities: the pipe
turns them into a softmax cross-entropy or a CRF likelihood, and decodes with
Viterbi under the scheme's constraints either way. The CRF parameters live in a
thinc layer of their own (`crf` ref) so that thinc's optimizer updates and
serializes them with everything else; calling that layer returns the three
arrays and a backprop that takes their gradients.
"""
from typing import List, Optional, Tuple

from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Linear, Model, with_array, zero_init
from thinc.types import Floats1d, Floats2d, Ragged

from ..util.init import fixed_normal_init

CRFParams = Tuple[Floats1d, Floats2d, Floats1d]


@registry.architectures("spacy_mlm.TokenTagger.v1")
def build_token_tagger_v1(
    tok2vec: Model[List[Doc], List[Floats2d]], nO: Optional[int] = None, crf: bool = False
) -> Model[List[Doc], List[Floats2d]]:
    """As `spacy_mlm.TokenTagger.v2` with a zero-initialised output layer (slow
    to start fine-tuning: kept for pipelines trained with it)."""
    return _build_token_tagger(tok2vec, nO, crf, zero_init)


@registry.architectures("spacy_mlm.TokenTagger.v2")
def build_token_tagger_v2(
    tok2vec: Model[List[Doc], List[Floats2d]], nO: Optional[int] = None, crf: bool = False, init_std: float = 0.02
) -> Model[List[Doc], List[Floats2d]]:
    """Tag scores per doc from `tok2vec`: `spacy_mlm.EncoderListener.v1` (token
    pooling; output ``(len(doc), nO)``) or `spacy_mlm.EncoderPieceListener.v1`
    (one score row per subword piece, a `Ragged` grouped by token). `nO` (the
    number of tags) is set by the component from its labels. `crf = true` adds a
    linear-chain CRF over the token scores (training by likelihood, Viterbi
    decoding). `init_std`: the output weights start as Normal(0, init_std), as in
    Hugging Face's token-classification head."""
    return _build_token_tagger(tok2vec, nO, crf, fixed_normal_init(init_std))


def _build_token_tagger(tok2vec, nO, crf, init_W) -> Model[List[Doc], List[Floats2d]]:
    output = with_array(Linear(nO=nO, init_W=init_W))
    crf_layer = build_crf_params(nO) if crf else None
    return Model(
        "token_tagger",
        _tagger_forward,
        init=_tagger_init,
        dims={"nO": nO},
        layers=[tok2vec, output] + ([crf_layer] if crf_layer is not None else []),
        refs={"tok2vec": tok2vec, "output": output, "crf": crf_layer},
        attrs={"crf": crf},
    )


def _tagger_forward(model: Model, docs: List[Doc], is_train: bool):
    tok2vec, output = model.get_ref("tok2vec"), model.get_ref("output")
    X, backprop_X = tok2vec(docs, is_train)
    if not (X and isinstance(X[0], Ragged)):
        Y, backprop_Y = output(X, is_train)
        return Y, lambda dY: backprop_X(backprop_Y(dY))
    # piece rows: score the rows, keep the grouping by token
    Y, backprop_Y = output([x.data for x in X], is_train)

    def backprop(dY: List[Ragged]):
        dX = backprop_Y([d.data for d in dY])
        return backprop_X([Ragged(d, x.lengths) for d, x in zip(dX, X)])

    return [Ragged(y, x.lengths) for y, x in zip(Y, X)], backprop


def _tagger_init(model: Model, X=None, Y=None):
    tok2vec, linear = model.get_ref("tok2vec"), model.get_ref("output").layers[0]
    if tok2vec.has_dim("nO"):
        linear.set_dim("nI", tok2vec.get_dim("nO"), force=True)
    if model.has_dim("nO"):
        linear.set_dim("nO", model.get_dim("nO"), force=True)
        if model.attrs["crf"]:
            model.get_ref("crf").set_dim("nO", model.get_dim("nO"), force=True)
    tok2vec.initialize(X=X)
    model.get_ref("output").initialize()
    if model.attrs["crf"]:
        model.get_ref("crf").initialize()
    return model


def build_crf_params(nO: Optional[int] = None) -> Model[None, CRFParams]:
    """A parameter-only layer: ``start`` (nO,), ``transitions`` (nO, nO) (row =
    previous tag), ``end`` (nO,), all starting at zero (a CRF that starts out as
    the softmax tagger and learns the moves that help)."""
    return Model(
        "crf_params",
        _crf_params_forward,
        init=_crf_params_init,
        dims={"nO": nO},
        params={"start": None, "transitions": None, "end": None},
    )


def _crf_params_init(model: Model, X=None, Y=None):
    n = model.get_dim("nO")
    model.set_param("start", model.ops.alloc1f(n))
    model.set_param("transitions", model.ops.alloc2f(n, n))
    model.set_param("end", model.ops.alloc1f(n))
    return model


def _crf_params_forward(model: Model, X, is_train: bool):
    params = (model.get_param("start"), model.get_param("transitions"), model.get_param("end"))

    def backprop(d_params: CRFParams) -> None:
        for name, grad in zip(("start", "transitions", "end"), d_params):
            model.inc_grad(name, grad)

    return params, backprop
