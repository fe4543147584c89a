"""The listener: how downstream components read the shared encoder.

It follows spaCy's Tok2VecListener protocol. In training the encoder component
runs the transformer once per batch and `receive`s its output to every listener;
each listener pools what it needs and, on backprop, adds its gradient to the
shared leaves. The last listener's callback runs the transformer's backward
pass and the optimizer step. At prediction time the listener reads the
`doc._.mlm_encoding` the encoder component already set.
"""
from typing import Callable, List, Optional, Sequence

import numpy as np
import torch
from spacy.errors import Errors
from spacy.ml.models.tok2vec import Tok2VecListener
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model, get_current_ops, torch2xp, xp2torch
from thinc.types import Floats2d

from ..errors import SpacyMlmError
from .encoder import EncoderBatch
from .encoding import ENCODING_ATTR, POOLINGS, pool_tokens

DOC_POOLINGS = ("cls", "doc_mean")


class EncoderListener(Model):
    name = "mlm_encoder_listener"

    def __init__(self, upstream_name: str, width: int, pooling: str):
        if pooling not in POOLINGS + DOC_POOLINGS:
            raise ValueError(f"unknown pooling {pooling!r}: expected one of {', '.join(POOLINGS + DOC_POOLINGS)}")
        Model.__init__(self, name=self.name, forward=listener_forward, dims={"nO": width}, attrs={"pooling": pooling})
        self.upstream_name = upstream_name
        self._batch_id: Optional[int] = None
        self._outputs: Optional[EncoderBatch] = None
        self._backprop: Optional[Callable] = None

    get_batch_id = staticmethod(Tok2VecListener.get_batch_id)

    def receive(self, batch_id: int, outputs: EncoderBatch, backprop: Callable) -> None:
        self._batch_id = batch_id
        self._outputs = outputs
        self._backprop = backprop

    def verify_inputs(self, inputs: Sequence[Doc]) -> bool:
        if self._batch_id is None and self._outputs is None:
            raise ValueError(Errors.E954)
        batch_id = self.get_batch_id(inputs)
        if batch_id != self._batch_id:
            raise ValueError(Errors.E953.format(id1=batch_id, id2=self._batch_id))
        return True


@registry.architectures("spacy_mlm.EncoderListener.v1")
def build_encoder_listener_v1(width: int, pooling: str = "mean", upstream: str = "*") -> Model[List[Doc], List[Floats2d]]:
    """One vector per token (pooling first/mean/last/max over its pieces) or one per
    doc ("cls": the [CLS] vector, "doc_mean": mean over the doc's pieces).
    width: the encoder's hidden size (384 for MiniLM)."""
    return EncoderListener(upstream, width, pooling)


def _pool_doc(hidden: torch.Tensor, cls: torch.Tensor, doc: Doc, alignment, pooling: str) -> torch.Tensor:
    if pooling == "cls":
        return cls[None, :]
    if pooling == "doc_mean":
        if len(hidden) == 0:
            return cls[None, :]
        return hidden.mean(dim=0, keepdim=True)
    return pool_tokens(hidden, alignment, pooling)


def listener_forward(model: EncoderListener, docs: List[Doc], is_train: bool):
    pooling = model.attrs["pooling"]
    ops = get_current_ops()
    if is_train and model._outputs is not None and model._batch_id == model.get_batch_id(docs):
        batch = model._outputs
        _check_width(model, int(batch.cls.shape[-1]))
        pooled = [
            _pool_doc(h, batch.cls[i], doc, a, pooling)
            for i, (h, doc, a) in enumerate(zip(batch.hidden, batch.docs, batch.alignments))
        ]
        outputs = [torch2xp(p.detach()) for p in pooled]

        def backprop(d_outputs: List[Floats2d]) -> List[Doc]:
            backprop_to_encoder(model, pooled, [xp2torch(d) for d in d_outputs])
            return []

        return outputs, backprop
    if is_train and model._outputs is not None:
        model.verify_inputs(docs)  # raises the spaCy error that explains the mismatch
    outputs = []
    for doc in docs:
        encoding = doc._.get(ENCODING_ATTR)
        if encoding is None:
            # spaCy initializes downstream models on docs the encoder has not seen
            rows = 1 if pooling in DOC_POOLINGS else len(doc)
            outputs.append(ops.alloc2f(rows, model.get_dim("nO")))
            continue
        _check_width(model, encoding.width)
        hidden = torch.from_numpy(np.ascontiguousarray(encoding.hidden))
        cls = torch.from_numpy(np.ascontiguousarray(encoding.cls))
        outputs.append(ops.asarray2f(_pool_doc(hidden, cls, doc, encoding.alignment, pooling).numpy()))
    return outputs, lambda d_outputs: []


def backprop_to_encoder(model: Model, outputs: Sequence[torch.Tensor], grads: Sequence[torch.Tensor]) -> None:
    """Push a listener's output gradients into the encoder's graph in one backward
    call (outputs of a frozen encoder have no graph), then tell the encoder that
    its listener is done so that it may step."""
    used = [(o, g) for o, g in zip(outputs, grads) if o.requires_grad]
    if used:
        torch.autograd.backward([o for o, _ in used], [g.to(o.dtype) for o, g in used])
    model._backprop(None)


def _check_width(model: EncoderListener, width: int) -> None:
    if model.get_dim("nO") != width:
        raise SpacyMlmError(
            f"the listener was configured with width = {model.get_dim('nO')} but the encoder produces vectors of "
            f"width {width}: set the listener's width to {width}"
        )
