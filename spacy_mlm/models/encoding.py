"""What the encoder hands on: a batch for the listeners in training
(`EncoderBatch`) and one `DocEncoding` per Doc at prediction time.

Both hold torch tensors on the model's device, so listeners and heads read
them where they were computed (no copy to the host and back on a GPU). Users
read `doc._.mlm_encoding.hidden` / `.cls` / `.layers` as numpy arrays on the
CPU, copied on first access (on a CPU, a view without copy); `.pooled` is the
model's own pooled output (dense + tanh over [CLS]) where it has a pretrained
pooler, else None.
"""
from dataclasses import dataclass, field
from functools import cached_property
from typing import List, Optional, Tuple

import numpy as np
import torch
from spacy.tokens import Doc

from ..tokenization.align import Alignment
from ..tokenization.tokenizer import DocPieces
from .pooling import pool_tokens

ENCODING_ATTR = "mlm_encoding"


def install_encoding_extension() -> None:
    """`doc._.mlm_encoding`, installed by the `mlm_encoder` factory."""
    if not Doc.has_extension(ENCODING_ATTR):
        Doc.set_extension(ENCODING_ATTR, default=None)


@dataclass
class EncoderBatch:
    """The encoder's output for one training batch, broadcast to the listeners."""

    docs: List[Doc]
    pieces: List[DocPieces]
    alignments: List[Alignment]
    hidden: List[torch.Tensor]  # per doc (n_pieces, width)
    cls: torch.Tensor  # (n_docs, width)
    layers: Optional[List[torch.Tensor]] = None  # per doc (n_layers + 1, n_pieces, width)
    pooled: Optional[torch.Tensor] = None  # (n_docs, width) the model's pooler over [CLS]; None without one
    leaves: Tuple[torch.Tensor, ...] = ()  # in training: the tensors listeners' gradients accumulate in


def _host(tensor: Optional[torch.Tensor]) -> Optional[np.ndarray]:
    return None if tensor is None else tensor.detach().cpu().numpy()


@dataclass
class DocEncoding:
    """The encoder's output for one Doc (stored as `doc._.mlm_encoding`)."""

    piece_ids: np.ndarray  # (n_pieces,)
    piece_offsets: np.ndarray  # (n_pieces, 2) char start/end in doc.text
    alignment: Alignment
    hidden_tensor: torch.Tensor  # (n_pieces, width) top layer, on the model's device
    cls_tensor: torch.Tensor  # (width,)
    layers_tensor: Optional[torch.Tensor] = None  # (n_layers + 1, n_pieces, width)
    pieces: List[str] = field(default_factory=list)
    pooled_tensor: Optional[torch.Tensor] = None  # (width,) the model's pooler over [CLS]; None without one

    @cached_property
    def hidden(self) -> np.ndarray:
        """(n_pieces, width) float32, top layer, content pieces only."""
        return _host(self.hidden_tensor)

    @cached_property
    def cls(self) -> np.ndarray:
        """(width,) the [CLS] (<s>) vector of the first window."""
        return _host(self.cls_tensor)

    @cached_property
    def pooled(self) -> Optional[np.ndarray]:
        """(width,) the model's pretrained pooler (dense + tanh) over the first
        window's [CLS] vector; None for a model without one (DistilBERT, or weights
        saved without it)."""
        return _host(self.pooled_tensor)

    @cached_property
    def layers(self) -> Optional[np.ndarray]:
        """(n_layers + 1, n_pieces, width): embeddings and every layer, when the
        encoder was built with `output_hidden_states = true`."""
        return _host(self.layers_tensor)

    @property
    def width(self) -> int:
        return int(self.hidden_tensor.shape[-1])

    def token_vectors(self, pooling: str = "mean", layer: Optional[int] = None) -> np.ndarray:
        """(len(doc), width) vectors from the top layer or from `layers[layer]`."""
        if layer is None:
            source = self.hidden_tensor
        elif self.layers_tensor is None:
            raise ValueError(
                "this encoding has no per-layer outputs: build the encoder with output_hidden_states = true"
            )
        else:
            source = self.layers_tensor[layer]
        return _host(pool_tokens(source, self.alignment, pooling))
