"""What the encoder hands on: a batch for the listeners in training
(`EncoderBatch`) and one `DocEncoding` per Doc at prediction time.

Both hold torch tensors on the model's device, so listeners and heads read
them where they were computed (no copy to the host and back on a GPU). Users
read `doc._.mlm_encoding.hidden` / `.cls` / `.layers` as numpy arrays on the
CPU, copied on first access (on a CPU, a view without copy); `.pooled` is the
model's own pooled output (dense + tanh over [CLS]) where it has a pretrained
pooler, else None.

What stays on the Doc after the pipeline ran is the encoder component's
`store_encoding` setting (`STORE_ENCODINGS`): the device tensors ("device"),
the same tensors moved to the host once every listener has read them ("host":
a GPU process that keeps its Docs keeps its GPU memory flat), or nothing
("none": `doc._.mlm_encoding` is None once the listeners have read it). The
readers are the listeners spaCy linked to the encoder when the pipeline was
built or loaded: one whose component is disabled later (`nlp.select_pipes`)
never reads, and its Docs keep their encodings as the encoder set them.

A `DocEncoding` travels: `srsly` msgpack (so `doc.to_bytes()`, `DocBin(
store_user_data=True)`, `nlp.pipe(n_process=N)`), pickle and `copy.deepcopy`
write its tensors as host arrays (`to_dict`) and read them back as CPU tensors.
The msgpack encoder and decoder (models/encoding_codec.py) are registered
through srsly's entry points, so a process that never imported spacy_mlm reads
them too. Bytes may come from anywhere (a DocBin made elsewhere), so what is
read back is checked: its own parts when decoded (`from_dict`), its fit to
the Doc where a listener reads it (`check_doc`).
"""
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

import numpy as np
import torch
from spacy.tokens import Doc

from ..errors import DataError, SettingError
from ..tokenization.align import Alignment
from ..tokenization.tokenizer import DocPieces
from .pooling import pool_tokens

ENCODING_ATTR = "mlm_encoding"
STORE_ENCODINGS = ("device", "host", "none")


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
    # set by the encoder component: the listeners yet to read it, and what then stays (STORE_ENCODINGS)
    readers_left: Optional[Set[int]] = field(default=None, repr=False, compare=False)
    store: str = field(default="device", repr=False, compare=False)

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
            raise SettingError(
                "this encoding has no per-layer outputs: build the encoder with output_hidden_states = true"
            )
        else:
            source = self.layers_tensor[layer]
        return _host(pool_tokens(source, self.alignment, pooling))

    # -- what stays on the Doc --------------------------------------------------------
    def await_readers(self, doc: Doc, readers: Iterable[Any], store: str) -> None:
        """Keep the device tensors until each of `readers` (listeners) has read
        them, then apply `store` (at once when there are none)."""
        self.store = store
        self.readers_left = {id(reader) for reader in readers}
        if not self.readers_left:
            self._settle(doc)

    def read_by(self, doc: Doc, reader: Any) -> None:
        """`reader` has read this encoding of `doc`; the last reader settles it."""
        if self.readers_left is None:
            return
        self.readers_left.discard(id(reader))
        if not self.readers_left:
            self._settle(doc)

    def _settle(self, doc: Doc) -> None:
        self.readers_left = None
        if self.store == "none":
            doc._.set(ENCODING_ATTR, None)
        elif self.store == "host":
            self.hidden_tensor, self.cls_tensor = _on_host(self.hidden_tensor), _on_host(self.cls_tensor)
            self.layers_tensor, self.pooled_tensor = _on_host(self.layers_tensor), _on_host(self.pooled_tensor)

    # -- serialization ----------------------------------------------------------------
    def to_dict(self) -> Dict[str, Any]:
        """Plain data (numpy arrays, lists, numbers): what msgpack and pickle write."""
        a = self.alignment
        return {
            "piece_ids": np.asarray(self.piece_ids), "piece_offsets": np.asarray(self.piece_offsets),
            "alignment": [a.n_tokens, a.n_pieces, np.asarray(a.token_index), np.asarray(a.piece_index)],
            "pieces": list(self.pieces),
            "tensors": {name: _host(getattr(self, name)) for name in _TENSORS},  # float32, as the encoder gives
        }

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "DocEncoding":
        """The inverse of `to_dict`, for data read from bytes (msgpack, pickle,
        which may come from anywhere): every part is checked before it is used
        (keys, types, shapes, dtypes, index ranges, one piece count and one width
        throughout), a `DataError` saying what is inconsistent otherwise. Only
        what the data holds is allocated: its counts are compared with its
        arrays, never used as sizes. What needs the Doc (its token count, its
        text) is `check_doc`'s, run where a component reads the encoding: srsly
        decodes a Doc's user_data before the Doc has its tokens."""
        if not isinstance(data, dict) or set(_KEYS) - set(data):
            found = sorted(map(str, data)) if isinstance(data, dict) else type(data).__name__
            raise DataError(f"{_WHERE}: a serialized encoding is a dict of {', '.join(_KEYS)}; got {found}")
        alignment = _read_alignment(data["alignment"])
        piece_ids = _int_array(data["piece_ids"], "piece_ids", (alignment.n_pieces,))
        piece_offsets = _int_array(data["piece_offsets"], "piece_offsets", (alignment.n_pieces, 2))
        if len(piece_offsets) and (piece_offsets.min() < 0 or np.any(piece_offsets[:, 0] > piece_offsets[:, 1])):
            raise DataError(f"{_WHERE}: piece_offsets holds a negative offset or a piece ending before it starts")
        pieces = data["pieces"]
        if not isinstance(pieces, (list, tuple)) or not all(isinstance(p, str) for p in pieces) or len(pieces) not in (
                0, alignment.n_pieces):
            raise DataError(f"{_WHERE}: pieces must be a list of the {alignment.n_pieces} pieces' strings (or empty)")
        return cls(piece_ids, piece_offsets, alignment, pieces=list(pieces),
                   **_read_tensors(data["tensors"], alignment.n_pieces))

    def check_doc(self, doc: Doc) -> None:
        """Refuse (`DataError`) an encoding that is not one of `doc`: its
        alignment must cover the Doc's tokens and its pieces lie in its text.
        What every component that reads `doc._.mlm_encoding` asks first (an
        encoding from bytes, or set by hand, may be another Doc's: one of 3
        tokens on a 5-token Doc would tag the wrong tokens, one claiming 10**9
        tokens would size the tagger's arrays)."""
        n_tokens = self.alignment.n_tokens
        if n_tokens != len(doc):
            raise DataError(f"{_WHERE}: its alignment covers {n_tokens} tokens but the Doc has {len(doc)} (an "
                            "encoding of another Doc, or of this one before its tokens changed)")
        end = int(self.piece_offsets[:, 1].max()) if len(self.piece_offsets) else 0
        # the text's length from its last token: Doc.text joins every token anew
        n_chars = doc[-1].idx + len(doc[-1].text_with_ws) if len(doc) else 0
        if end > n_chars:
            raise DataError(f"{_WHERE}: its pieces reach character {end} but the Doc's text has "
                            f"{n_chars} characters (an encoding of another Doc)")

    def __reduce__(self):
        """Pickle and deepcopy go through `to_dict`: device-independent, and the
        host arrays a process without the model's device can read."""
        return (DocEncoding.from_dict, (self.to_dict(),))


_TENSORS = ("hidden_tensor", "cls_tensor", "layers_tensor", "pooled_tensor")
_KEYS = ("piece_ids", "piece_offsets", "alignment", "pieces", "tensors")
_WHERE = f"doc._.{ENCODING_ATTR}"


def _on_host(tensor: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    return None if tensor is None else tensor.cpu()  # the same tensor where it already is there


def _array(value: Any, name: str, shape: Tuple[Optional[int], ...], kinds: str) -> np.ndarray:
    """`value` as a numpy array (a copy: msgpack's arrays are read-only) of
    `shape` (None: any length) and a dtype of `kinds` (numpy kind letters;
    an empty array may have any, as an empty list reads as float)."""
    try:
        array = np.array(value)
    except (ValueError, TypeError) as err:  # ragged lists, objects numpy cannot read
        raise DataError(f"{_WHERE}: {name} is no array ({err})") from None
    expected = "(" + ", ".join("n" if n is None else str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"
    if array.ndim != len(shape) or any(n is not None and n != found for n, found in zip(shape, array.shape)):
        raise DataError(f"{_WHERE}: {name} has shape {tuple(array.shape)}, expected {expected}")
    if array.size and array.dtype.kind not in kinds:
        raise DataError(f"{_WHERE}: {name} holds {array.dtype}, expected {'integers' if kinds == 'iu' else 'floats'}")
    return array


def _int_array(value: Any, name: str, shape: Tuple[Optional[int], ...]) -> np.ndarray:
    return _array(value, name, shape, "iu").astype(np.int64)


def _count(value: Any, name: str) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 0:
        raise DataError(f"{_WHERE}: the alignment's {name} must be a count (an integer >= 0), got {value!r}")
    return int(value)


def _read_alignment(value: Any) -> Alignment:
    if not isinstance(value, (list, tuple)) or len(value) != 4:
        raise DataError(f"{_WHERE}: alignment must be [n_tokens, n_pieces, token_index, piece_index], got "
                        f"{type(value).__name__}{f' of {len(value)}' if isinstance(value, (list, tuple)) else ''}")
    n_tokens, n_pieces = _count(value[0], "n_tokens"), _count(value[1], "n_pieces")
    token_index = _int_array(value[2], "alignment's token_index", (None,))
    piece_index = _int_array(value[3], "alignment's piece_index", (None,))
    return Alignment.checked(n_tokens, n_pieces, token_index, piece_index, _WHERE)


def _read_tensors(value: Any, n_pieces: int) -> Dict[str, Optional[torch.Tensor]]:
    """The tensors of `to_dict` (float arrays): hidden (n_pieces, width), cls and
    pooled (width,), layers (n_layers + 1, n_pieces, width), one width."""
    if not isinstance(value, dict) or set(value) - set(_TENSORS) or any(value.get(n) is None for n in _TENSORS[:2]):
        found = sorted(map(str, value)) if isinstance(value, dict) else type(value).__name__
        raise DataError(f"{_WHERE}: tensors must be a dict of hidden_tensor, cls_tensor and optionally "
                        f"layers_tensor, pooled_tensor; got {found}")
    hidden = _array(value["hidden_tensor"], "hidden_tensor", (n_pieces, None), "f")
    width = hidden.shape[1]
    shapes = {"cls_tensor": (width,), "layers_tensor": (None, n_pieces, width), "pooled_tensor": (width,)}
    arrays = {name: None if value.get(name) is None else _array(value[name], name, shape, "f")
              for name, shape in shapes.items()}
    return {name: None if array is None else torch.from_numpy(array)
            for name, array in {"hidden_tensor": hidden, **arrays}.items()}
