"""What the encoder hands on: per-doc piece vectors and their pooling to tokens."""
from dataclasses import dataclass, field
from typing import List, Optional

import numpy as np
import torch
from spacy.tokens import Doc

from ..tokenization.align import Alignment

ENCODING_ATTR = "mlm_encoding"

if not Doc.has_extension(ENCODING_ATTR):
    Doc.set_extension(ENCODING_ATTR, default=None)

POOLINGS = ("first", "mean", "last", "max")


def pool_tokens(hidden: torch.Tensor, alignment: Alignment, pooling: str) -> torch.Tensor:
    """One row per spaCy token from the rows of its pieces; tokens without pieces
    get zeros. Differentiable, so listeners use it in training too."""
    n_tokens, width = alignment.n_tokens, hidden.shape[-1]
    out = hidden.new_zeros((n_tokens, width))
    if len(alignment.token_index) == 0:
        return out
    tok = torch.from_numpy(alignment.token_index).to(hidden.device)
    piece = torch.from_numpy(alignment.piece_index).to(hidden.device)
    if pooling == "mean":
        out = out.index_add(0, tok, hidden[piece])
        counts = torch.bincount(tok, minlength=n_tokens).clamp(min=1).to(hidden.dtype)
        return out / counts[:, None]
    if pooling == "max":
        index = tok[:, None].expand(-1, width)
        return out.scatter_reduce(0, index, hidden[piece], reduce="amax", include_self=False)
    if pooling in ("first", "last"):
        lengths = alignment.lengths()
        ends = np.cumsum(lengths)
        has = np.flatnonzero(lengths > 0)
        pick = (ends - lengths)[has] if pooling == "first" else ends[has] - 1
        rows = torch.from_numpy(alignment.piece_index[pick]).to(hidden.device)
        return out.index_copy(0, torch.from_numpy(has).to(hidden.device), hidden[rows])
    raise ValueError(f"unknown pooling {pooling!r}: expected one of {', '.join(POOLINGS)}")


@dataclass
class DocEncoding:
    """The encoder's output for one Doc (stored as `doc._.mlm_encoding`)."""

    piece_ids: np.ndarray  # (n_pieces,)
    piece_offsets: np.ndarray  # (n_pieces, 2) char start/end in doc.text
    alignment: Alignment
    hidden: np.ndarray  # (n_pieces, width) top layer
    cls: np.ndarray  # (width,)
    layers: Optional[np.ndarray] = None  # (n_layers + 1, n_pieces, width)
    pieces: List[str] = field(default_factory=list)

    @property
    def width(self) -> int:
        return int(self.hidden.shape[-1])

    def token_vectors(self, pooling: str = "mean", layer: Optional[int] = None) -> np.ndarray:
        """(len(doc), width) vectors from the top layer or from `layers[layer]`."""
        if layer is None:
            source = self.hidden
        elif self.layers is None:
            raise ValueError(
                "this encoding has no per-layer outputs: build the encoder with output_hidden_states = true"
            )
        else:
            source = self.layers[layer]
        return pool_tokens(torch.from_numpy(np.ascontiguousarray(source)), self.alignment, pooling).numpy()
