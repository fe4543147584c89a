"""The listener: how downstream components read the shared encoder.

It follows spaCy's Tok2VecListener protocol. In training the encoder component
runs the transformer once per batch and `receive`s its output to every listener;
each listener pools what it needs and, on backprop, adds its gradient to the
shared leaves. The last listener's callback runs the transformer's backward
pass and the optimizer step. At prediction time the listener reads the
`doc._.mlm_encoding` the encoder component already set.

Pooling runs in torch on the encoder's device. What comes out depends on who
listens: a torch head of this package (`models/torch_head.py` marks its listener
with `read_as_torch`) gets the torch tensors themselves and hands torch
gradients back, so nothing is converted on the way; any other model, such as
spaCy's own `ner`, `tagger` or `textcat`, gets thinc arrays that share the
tensors' memory (numpy on CPU, cupy on GPU, no copy). The width is the
encoder's: the encoder component sets it on its listeners when it loads.

`EncoderLayersListener.v1` gives each token's vectors of chosen hidden states
(embeddings and every layer), pooled per layer: what `mlm_vectors` averages and
the sense head of `mlm_senses` mixes. Those states are kept by an encoder built
with `output_hidden_states = true` at prediction time, so a component reading
them listens to a frozen encoder that annotates (its Docs' `doc._.mlm_encoding`,
also in `spacy train`: `frozen_components` and `annotating_components`).
"""
import logging
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence

import numpy
import torch
from spacy.errors import Errors
from spacy.ml.models.tok2vec import Tok2VecListener
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model, get_current_ops, get_torch_default_device, torch2xp, xp2torch
from thinc.types import Floats2d, Floats3d, Ragged

from ..errors import SettingError, SpacyMlmError
from ..tokenization.align import Alignment
from ..tokenization.pair import PAIR_ATTR
from ..util.settings import INT, INTS, TEXT, check_settings, optional
from .encoding import ENCODING_ATTR, EncoderBatch
from .pooling import (DOC_POOLINGS, POOLING_WIDTH_FACTOR, TOKEN_POOLINGS, piece_rows, pool_doc, pool_docs_tokens,
                      pool_tokens)

logger = logging.getLogger(__name__)

PIECES = "pieces"
TORCH_OUTPUTS = "torch_outputs"


@dataclass
class PieceRows:
    """One doc's subword rows as a torch head reads them: the torch form of the
    thinc `Ragged` that other listeners of `EncoderPieceListener.v1` get."""

    rows: torch.Tensor  # (n_pieces, width)
    pieces_per_token: torch.Tensor  # (n_tokens,) long; 0 for a token without pieces


@dataclass
class LayerRows:
    """One doc's per-layer token vectors as a torch head reads them from
    `EncoderLayersListener.v1` (other readers get the `rows` array alone)."""

    rows: torch.Tensor  # (n_tokens, n_layers, width)
    parts: List[int]  # tokens of each text the encoder read apart: [n_tokens], or a pair Doc's two sides


def read_as_torch(listener: Model) -> None:
    """Make `listener` hand its reader torch tensors (and take torch gradients
    back) instead of thinc arrays: what every torch head of the package does."""
    if not isinstance(listener, EncoderListener):
        raise SpacyMlmError(
            f"a spacy_mlm head reads the encoder through spacy_mlm.EncoderListener.v1, EncoderPieceListener.v1 or "
            f"EncoderLayersListener.v1, "
            f"got the model {listener.name!r} as its tok2vec"
        )
    listener.attrs[TORCH_OUTPUTS] = True


class EncoderListener(Model):
    name = "mlm_encoder_listener"

    def __init__(self, upstream_name: str, width: Optional[int], pooling: str, layers=None):
        """layers: None (the top layer, as every listener but `EncoderLayersListener.v1`
        reads), ALL_STATES or a list of hidden-state indices (see that builder)."""
        poolings = TOKEN_POOLINGS if layers is not None else TOKEN_POOLINGS + DOC_POOLINGS + (PIECES,)
        if pooling not in poolings:
            raise SettingError(
                f"unknown pooling {pooling!r}: expected one of {', '.join(p for p in poolings if p != PIECES)}"
            )
        self.width_factor = POOLING_WIDTH_FACTOR.get(pooling, 1)
        nO = None if width is None else width * self.width_factor
        Model.__init__(self, name=self.name, forward=listener_forward, dims={"nO": nO},
                       attrs={"pooling": pooling, "layers": layers, TORCH_OUTPUTS: False})
        self.n_states: Optional[int] = None  # the encoder's hidden states (embeddings + layers), set when it loads
        self.upstream_name = upstream_name
        self._batch_id: Optional[int] = None
        self._outputs: Optional[EncoderBatch] = None
        self._backprop: Optional[Callable] = None
        self.pooler_fallback_told = False

    get_batch_id = staticmethod(Tok2VecListener.get_batch_id)

    def receive(self, batch_id: int, outputs: EncoderBatch, backprop: Callable) -> None:
        self._batch_id = batch_id
        self._outputs = outputs
        self._backprop = backprop

    def __getstate__(self):
        """Pickled without the last training batch and its backprop callback (a
        closure of the encoder's update): a pipeline pickles after training."""
        attributes, slots = super().__getstate__()  # thinc's Model has __slots__ too
        return {**attributes, "_batch_id": None, "_outputs": None, "_backprop": None}, slots

    def verify_inputs(self, inputs: Sequence[Doc]) -> bool:
        if self._batch_id is None and self._outputs is None:
            raise SpacyMlmError(Errors.E954)
        batch_id = self.get_batch_id(inputs)
        if batch_id != self._batch_id:
            raise SpacyMlmError(Errors.E953.format(id1=batch_id, id2=self._batch_id))
        return True

    def set_width(self, width: int, n_states: Optional[int] = None) -> None:
        """Take the encoder's width and number of hidden states (the encoder
        calls this when it loads); a width given in the config must agree with
        it. The output is that wide, or a multiple of it for "pair_mean"."""
        if n_states is not None:
            self.n_states = n_states
        if self.has_dim("nO") and self.get_dim("nO") != width * self.width_factor:
            raise SpacyMlmError(
                f"the listener was configured with width = {self.get_dim('nO') // self.width_factor} but the encoder "
                f"produces vectors of width {width}: leave the listener's width unset (null) to take the encoder's"
            )
        self.set_dim("nO", width * self.width_factor)

    def needs_width(self, width: int) -> bool:
        """Whether the output width still has to be set from an encoder of `width`."""
        return not self.has_dim("nO") or self.get_dim("nO") != width * self.width_factor


@registry.architectures("spacy_mlm.EncoderListener.v1")
def build_encoder_listener_v1(
    width: Optional[int] = None, pooling: str = "mean", upstream: str = "*"
) -> Model[List[Doc], List[Floats2d]]:
    """One vector per token (pooling first/mean/last/max over its pieces) or one per
    doc ("cls": the [CLS] vector, "doc_mean": mean over the doc's pieces, "pooler":
    the model's own pretrained pooler, dense + tanh over [CLS], which Hugging Face's
    sequence classifiers read; a model without one, such as DistilBERT or weights
    saved without it, gives the [CLS] vector instead, with a warning; "pair_mean":
    for pair Docs, [u, v, |u - v|] with u and v the means of each side's pieces,
    three times the encoder's width).
    width: the encoder's hidden size; null = taken from the encoder when it loads."""
    check_listener_settings(width, upstream)
    return EncoderListener(upstream, width, pooling)


@registry.architectures("spacy_mlm.EncoderPieceListener.v1")
def build_encoder_piece_listener_v1(width: Optional[int] = None, upstream: str = "*") -> Model[List[Doc], List[Ragged]]:
    """One row per (token, piece) pair, grouped by token: a `Ragged` per doc whose
    `lengths` are the pieces of each token (0 for a token without pieces), for
    taggers that score every subword. width: as for the EncoderListener."""
    check_listener_settings(width, upstream)
    return EncoderListener(upstream, width, PIECES)


ALL_STATES = "all"
TOP_LAYER = [-1]


@registry.architectures("spacy_mlm.EncoderLayersListener.v1")
def build_encoder_layers_listener_v1(
    layers: Optional[List[int]] = TOP_LAYER, pooling: str = "mean", width: Optional[int] = None, upstream: str = "*"
) -> Model[List[Doc], List[Floats3d]]:
    """Each token's vectors of chosen hidden states, pooled per state
    (first/mean/last/max over its pieces): (n_tokens, len(layers), width) per doc.

    layers: indices into the encoder's hidden states, 0 = the embeddings, -1 =
        the top layer (negative count from the top); null = every state in order.
        [-1] alone reads the encoder's output as the other listeners do; any
        other choice needs the encoder built with output_hidden_states = true.
        The encoder keeps those states at prediction time only: the listening
        component reads a frozen encoder that annotates.
    A torch head gets `LayerRows` (the rows and the token counts of a pair Doc's
    sides, which the encoder reads apart with `pairs = "apart"`), any other
    model the rows as a thinc array. width: as for the EncoderListener."""
    check_listener_settings(width, upstream)
    check_settings("spacy_mlm.EncoderLayersListener", layers=(layers, optional(INTS)))
    return EncoderListener(upstream, width, pooling, ALL_STATES if layers is None else list(layers))


def check_listener_settings(width: Optional[int], upstream: str) -> None:
    check_settings("spacy_mlm.EncoderListener", width=(width, optional(INT), ">= 1"), upstream=(upstream, TEXT))


def state_indices(layers, n_states: int) -> List[int]:
    """The hidden-state indices a layers listener reads, counted from 0 (the embeddings)."""
    if layers == ALL_STATES:
        return list(range(n_states))
    bad = [k for k in layers if not -n_states <= k < n_states]
    if bad or not layers:
        raise SettingError(
            f"EncoderLayersListener layers = {layers}: the encoder has {n_states} hidden states "
            f"(0 = the embeddings ... {n_states - 1} = the top layer, or -1 ... -{n_states})"
        )
    return [k % n_states for k in layers]


def _layer_rows(model: "EncoderListener", hidden: torch.Tensor, layers: Optional[torch.Tensor], alignment) -> torch.Tensor:
    """(n_tokens, n_chosen, width): each chosen state pooled per token."""
    chosen, pooling = model.attrs["layers"], model.attrs["pooling"]
    if chosen == TOP_LAYER:
        return pool_tokens(hidden, alignment, pooling)[:, None]
    if layers is None:
        raise SpacyMlmError(
            f"a listener reading the encoder's hidden states {'every one' if chosen == ALL_STATES else chosen} needs "
            "them kept: build the mlm_encoder model with output_hidden_states = true, and freeze that encoder "
            "(it keeps them at prediction time only: in spacy train, list it in frozen_components and "
            "annotating_components)"
        )
    return torch.stack([pool_tokens(layers[k], alignment, pooling) for k in state_indices(chosen, len(layers))], dim=1)


def _pool_docs(model: "EncoderListener", hidden: Sequence[torch.Tensor], cls: Sequence[torch.Tensor],
               pooled: Sequence[Optional[torch.Tensor]], layers: Sequence[Optional[torch.Tensor]],
               alignments: Sequence, docs: Sequence[Doc]) -> List[torch.Tensor]:
    """Each doc's rows. Token poolings of the top layer run as one call over
    the batch (`pool_docs_tokens`); the others doc by doc."""
    pooling = model.attrs["pooling"]
    if model.attrs["layers"] is None and pooling in TOKEN_POOLINGS:
        return pool_docs_tokens(hidden, alignments, pooling)
    return [_pool(model, *parts) for parts in zip(hidden, cls, pooled, layers, alignments, docs)]


def _pool(model: "EncoderListener", hidden: torch.Tensor, cls: torch.Tensor, pooled: Optional[torch.Tensor],
          layers: Optional[torch.Tensor], alignment, doc: Doc) -> torch.Tensor:
    pooling = model.attrs["pooling"]
    if model.attrs["layers"] is not None:
        return _layer_rows(model, hidden, layers, alignment)
    if pooling == PIECES:
        return piece_rows(hidden, alignment)
    pair_start = doc._.get(PAIR_ATTR) if pooling == "pair_mean" and Doc.has_extension(PAIR_ATTR) else None
    return pool_doc(hidden, cls, alignment, pooling, pooled, pair_start)


def _check_pooler(model: EncoderListener, has_pooled: bool) -> None:
    """Say once per listener that "pooler" falls back to [CLS]: without it the
    head would quietly read another vector than the one configured."""
    if model.attrs["pooling"] == "pooler" and not has_pooled and not model.pooler_fallback_told:
        model.pooler_fallback_told = True
        logger.warning(
            "pooling = \"pooler\": the encoder has no pretrained pooler (a model family without one, such as "
            "DistilBERT, or weights saved without it, such as a *ForMaskedLM checkpoint), so the [CLS] vector "
            "is used instead; set pooling = \"cls\" to say so"
        )


def _parts(doc: Doc) -> List[int]:
    start = doc._.get(PAIR_ATTR) if Doc.has_extension(PAIR_ATTR) else None
    return [len(doc)] if start is None else [start, len(doc) - start]


def _output(model: EncoderListener, rows: torch.Tensor, alignment: Optional[Alignment], doc: Doc):
    """What the reader gets for one doc: the rows as they are for a torch head,
    as thinc arrays sharing their memory for any other model. `alignment`:
    the doc's (None: no pieces)."""
    pieces = model.attrs["pooling"] == PIECES
    if pieces:
        pieces_per_token = alignment.lengths() if alignment is not None else numpy.zeros(len(doc), dtype="int64")
    if model.attrs[TORCH_OUTPUTS]:
        if model.attrs["layers"] is not None:
            return LayerRows(rows, _parts(doc))
        if not pieces:
            return rows
        return PieceRows(rows, torch.as_tensor(pieces_per_token, dtype=torch.long, device=rows.device))
    array = torch2xp(rows.detach())
    return Ragged(array, get_current_ops().asarray1i(pieces_per_token)) if pieces else array


def _empty(model: EncoderListener, doc: Doc):
    """Zeros for a doc the encoder has not seen (spaCy initializes downstream
    models on such docs)."""
    pooling = model.attrs["pooling"]
    if model.attrs["layers"] is not None:  # its readers (mlm_vectors, mlm_senses) read annotated Docs only
        raise SpacyMlmError(
            f"the Doc {doc.text[:40]!r} has no doc._.{ENCODING_ATTR} to read: run it through the pipeline's "
            "mlm_encoder first (with store_encoding = \"host\" or \"device\" when it is read more than once)"
        )
    n_rows = 0 if pooling == PIECES else 1 if pooling in DOC_POOLINGS else len(doc)
    rows = torch.zeros((n_rows, model.get_dim("nO")), device=get_torch_default_device())
    return _output(model, rows, None, doc)


def _gradient(model: EncoderListener, d_output) -> torch.Tensor:
    """One doc's gradient as a torch tensor (a torch head gives it so already)."""
    if model.attrs[TORCH_OUTPUTS]:
        return d_output
    return xp2torch(d_output.data if isinstance(d_output, Ragged) else d_output)



def listener_forward(model: EncoderListener, docs: List[Doc], is_train: bool):
    if is_train and model._outputs is not None and model._batch_id == model.get_batch_id(docs):
        batch = model._outputs
        if model.needs_width(int(batch.cls.shape[-1])):
            model.set_width(int(batch.cls.shape[-1]))
        _check_pooler(model, batch.pooled is not None)
        n_docs = len(batch.hidden)
        pooled = _pool_docs(model, batch.hidden, batch.cls, [None] * n_docs if batch.pooled is None else batch.pooled,
                            [None] * n_docs if batch.layers is None else batch.layers, batch.alignments, docs)
        outputs = [_output(model, p, a, doc) for p, a, doc in zip(pooled, batch.alignments, docs)]

        def backprop(d_outputs) -> List[Doc]:
            """d_outputs: torch tensors (rows only, for pieces) for a torch head, thinc arrays otherwise."""
            backprop_to_encoder(model, pooled, [_gradient(model, d) for d in d_outputs])
            return []

        return outputs, backprop
    if is_train and model._outputs is not None:
        model.verify_inputs(docs)  # raises the spaCy error that explains the mismatch
    outputs = [None] * len(docs)
    read = []  # (position, doc, encoding) of the docs with an encoding
    for i, doc in enumerate(docs):
        encoding = doc._.get(ENCODING_ATTR) if Doc.has_extension(ENCODING_ATTR) else None
        if encoding is None:
            outputs[i] = _empty(model, doc)
            continue
        encoding.check_doc(doc)  # one read from bytes or set by hand may be another Doc's
        if model.needs_width(encoding.width):
            model.set_width(encoding.width)
        _check_pooler(model, encoding.pooled_tensor is not None)
        read.append((i, doc, encoding))
    encodings = [e for _, _, e in read]
    rows = _pool_docs(model, [e.hidden_tensor for e in encodings], [e.cls_tensor for e in encodings],
                      [e.pooled_tensor for e in encodings], [e.layers_tensor for e in encodings],
                      [e.alignment for e in encodings], [doc for _, doc, _ in read])
    # an encoding kept on the host (store_encoding = "host", or read from bytes) goes to the model's device
    device = get_torch_default_device()
    for (i, doc, encoding), doc_rows in zip(read, rows):
        outputs[i] = _output(model, doc_rows.to(device), encoding.alignment, doc)
        encoding.read_by(doc, model)
    return outputs, lambda d_outputs: []


def initialized_width(listener: Model, head: str) -> int:
    """Initialize a head's listener and return its width, which the encoder sets
    when it loads: the encoder must come first in the pipeline (or the config
    must give the width)."""
    listener.initialize()
    if not listener.has_dim("nO"):
        raise SpacyMlmError(
            f"the {head}'s listener has no width yet: the encoder it listens to must be initialized first "
            f"(put it before the {head} in the pipeline), or set the listener's width"
        )
    return listener.get_dim("nO")


def backprop_to_encoder(model: Model, outputs: Sequence[torch.Tensor], grads: Sequence[torch.Tensor]) -> None:
    """Push a listener's output gradients into the encoder's graph in one backward
    call (outputs of a frozen encoder have no graph), then tell the encoder that
    its listener is done so that it may step."""
    used = [(o, g) for o, g in zip(outputs, grads) if o.requires_grad]
    if used:
        torch.autograd.backward([o for o, _ in used], [g.to(device=o.device, dtype=o.dtype) for o, g in used])
    model._backprop(None)
