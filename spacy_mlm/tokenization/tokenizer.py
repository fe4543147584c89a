"""Subword tokenization of Docs into model windows.

One batched call to the fast (Rust) tokenizer per batch of texts, with character
offsets, so pieces align to spaCy tokens exactly (see `align.py`). Single texts
are tokenized without special tokens, cut into windows (see `window.py`) and each
window wrapped in the model's own special-token template; pairs use the
tokenizer's pair template with segment ids.

Text is data: a "[SEP]", "[MASK]" or "<s>" written in a text is split into
pieces like any other characters (`split_special_tokens=True`), so the only
special tokens the model sees are the ones the templates put there. Left to
its default, the tokenizer would turn the string into the real token: a
literal "[SEP]" inside one side of a pair would end that side.
"""
import logging
from dataclasses import dataclass
from typing import List, Sequence, Tuple

import numpy as np
from spacy.tokens import Doc

from ..errors import ModelLoadError, SpacyMlmError
from .pair import pair_char_split
from .window import merge_owner, window_spans

logger = logging.getLogger(__name__)


@dataclass
class DocPieces:
    """The subword view of one Doc."""

    ids: np.ndarray  # (n_pieces,) content piece ids, no specials
    starts: np.ndarray  # (n_pieces,) char offsets in doc.text
    ends: np.ndarray
    windows: List["Window"]
    owner: np.ndarray  # (n_pieces,) index into windows
    owner_position: np.ndarray  # (n_pieces,) row inside the owner window


@dataclass
class Window:
    input_ids: np.ndarray  # (length,) with specials
    token_type_ids: np.ndarray  # (length,)


class PieceTokenizer:
    def __init__(self, hf_tokenizer, max_length: int, overlap: int):
        if not getattr(hf_tokenizer, "is_fast", False):
            raise ModelLoadError(
                getattr(hf_tokenizer, "name_or_path", "?"),
                "a fast (Rust) tokenizer is needed for character offsets; save the model with a tokenizer.json",
            )
        self.hf = hf_tokenizer
        # The template around one sequence, found by wrapping a sentinel id.
        sentinel = -1
        single = list(hf_tokenizer.build_inputs_with_special_tokens([sentinel]))
        at = single.index(sentinel)
        self.prefix = np.asarray(single[:at], dtype=np.int64)
        self.suffix = np.asarray(single[at + 1 :], dtype=np.int64)
        if overlap < 0:
            raise SpacyMlmError(f"overlap must be 0 or more pieces, got {overlap}")
        self.max_length = int(max_length)
        self.content_length = self.max_length - len(self.prefix) - len(self.suffix)
        if self.content_length <= 0:
            raise ModelLoadError(self.hf.name_or_path, f"window of {max_length} leaves no room for text")
        # An overlap above half the window puts every piece in many windows (the work grows
        # by size / (size - overlap)): with a 64-position model and the default overlap of
        # 128 the step would be one piece, one window per piece.
        self.overlap = min(int(overlap), self.content_length // 2)

    def __call__(self, docs: Sequence[Doc]) -> List[DocPieces]:
        out: List[DocPieces] = [None] * len(docs)  # type: ignore
        is_pair = [pair_char_split(doc) is not None for doc in docs]
        singles = [i for i, pair in enumerate(is_pair) if not pair]
        pairs = [i for i, pair in enumerate(is_pair) if pair]
        if singles:
            enc = self.hf(
                [docs[i].text for i in singles],
                add_special_tokens=False,
                split_special_tokens=True,
                return_offsets_mapping=True,
                return_attention_mask=False,
                return_token_type_ids=False,
                verbose=False,
            )
            for j, i in enumerate(singles):
                ids = np.asarray(enc["input_ids"][j], dtype=np.int64)
                offsets = np.asarray(enc["offset_mapping"][j], dtype=np.int64).reshape(-1, 2)
                out[i] = self._windowed(ids, offsets)
        if pairs:
            out_pairs = self._pairs([docs[i] for i in pairs])
            for i, pieces in zip(pairs, out_pairs):
                out[i] = pieces
        return out

    def windows(self, ids: np.ndarray) -> Tuple[List[Window], np.ndarray, np.ndarray]:
        """The windows over a text's content piece ids, and for each piece the
        window that owns it and its row there (specials counted)."""
        spans = window_spans(len(ids), self.content_length, self.overlap)
        owner, position = merge_owner(len(ids), spans)
        windows = []
        for start, end in spans:
            input_ids = np.concatenate([self.prefix, ids[start:end], self.suffix])
            windows.append(Window(input_ids, np.zeros_like(input_ids)))
        return windows, owner, position + len(self.prefix)

    def _windowed(self, ids: np.ndarray, offsets: np.ndarray) -> DocPieces:
        return DocPieces(ids, offsets[:, 0], offsets[:, 1], *self.windows(ids))

    def _pairs(self, docs: Sequence[Doc]) -> List[DocPieces]:
        splits = [pair_char_split(doc) for doc in docs]
        texts_a = [doc.text[:a_end] for doc, (a_end, _, _) in zip(docs, splits)]
        texts_b = [doc.text[b_start:] for doc, (_, b_start, _) in zip(docs, splits)]
        enc = self._encode_pairs(texts_a, texts_b, truncate=False)
        if any(len(ids) > self.max_length for ids in enc["input_ids"]):
            logger.warning(
                "A sentence pair longer than %d pieces was truncated, longest side first.", self.max_length
            )
            enc = self._encode_pairs(texts_a, texts_b, truncate=True)
        result = []
        for j, (doc, (_, b_start, _)) in enumerate(zip(docs, splits)):
            input_ids = np.asarray(enc["input_ids"][j], dtype=np.int64)
            type_ids = np.asarray(enc["token_type_ids"][j], dtype=np.int64)
            offsets = np.asarray(enc["offset_mapping"][j], dtype=np.int64).reshape(-1, 2)
            seq = np.asarray([-1 if s is None else s for s in enc.sequence_ids(j)])
            content = np.flatnonzero(seq >= 0)
            offsets = offsets[content] + np.where(seq[content] == 1, b_start, 0)[:, None]
            result.append(
                DocPieces(
                    input_ids[content],
                    offsets[:, 0],
                    offsets[:, 1],
                    [Window(input_ids, type_ids)],
                    np.zeros(len(content), dtype=np.int64),
                    content.astype(np.int64),
                )
            )
        return result

    def _encode_pairs(self, texts_a: List[str], texts_b: List[str], truncate: bool):
        return self.hf(
            texts_a,
            texts_b,
            add_special_tokens=True,
            split_special_tokens=True,
            return_offsets_mapping=True,
            return_attention_mask=False,
            return_token_type_ids=True,
            truncation="longest_first" if truncate else False,
            max_length=self.max_length if truncate else None,
            verbose=False,
        )
