"""Subword tokenization of Docs into model windows.

One batched call to the fast (Rust) tokenizer per batch of texts, with character
offsets, so pieces align to spaCy tokens exactly (see `align.py`). Single texts
are tokenized without special tokens, cut into windows (see `window.py`) and each
window wrapped in the model's own special-token template; pairs use the
tokenizer's pair template with segment ids, or, with `pairs = "apart"`, each
side is read as a text of its own (its own windows, after those of side A).

With `context = "document"` each sentence of a Doc gets a window of its own
with up to `context_pieces` pieces of the document around it (`context.py`:
the Doc's other sentences and `doc._.mlm_context`), built by `context_windows`;
the Doc's own pieces, offsets and alignment are the same as without context.

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
from .context import check_context, doc_context, head, sentence_starts, tail
from .pair import pair_char_split
from .template import special_template
from .window import context_windows, merge_owner, window_spans

logger = logging.getLogger(__name__)
# whether Python's str.isspace() is true of each code point up to U+3000 (the last space); every
# code point above reads the False entry at the end (a table look-up: np.isin sorts, per text)
IS_SPACE = np.asarray([chr(c).isspace() for c in range(0x3001)] + [False])


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
    def __init__(self, hf_tokenizer, max_length: int, overlap: int, context: str = "none", context_pieces: int = 64):
        if not getattr(hf_tokenizer, "is_fast", False):
            raise ModelLoadError(
                getattr(hf_tokenizer, "name_or_path", "?"),
                "a fast (Rust) tokenizer is needed for character offsets; save the model with a tokenizer.json",
            )
        self.hf = hf_tokenizer
        # The template around one sequence, as the tokenizer's own post-processor writes it.
        template = special_template(hf_tokenizer)
        self.prefix, self.suffix = template.prefix, template.suffix
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
        self.set_context(context, context_pieces)
        self.pairs = "joint"  # PAIR_READINGS; the encoder component sets it
        self._strings = np.empty(0, dtype=object)  # every id's piece string (`piece_strings`), once asked for

    def set_context(self, context: str, context_pieces: int) -> None:
        """"none": each Doc is read on its own; "document": each sentence in a window
        of its own with up to `context_pieces` pieces of its document a side."""
        check_context(context, context_pieces)
        self.context = context
        self.context_pieces = int(context_pieces)

    def __call__(self, docs: Sequence[Doc]) -> List[DocPieces]:
        out: List[DocPieces] = [None] * len(docs)  # type: ignore
        is_pair = [pair_char_split(doc) is not None for doc in docs]
        singles = [i for i, pair in enumerate(is_pair) if not pair]
        pairs = [i for i, pair in enumerate(is_pair) if pair]
        if singles and self.context == "document":
            for i, pieces in zip(singles, self._in_context([docs[i] for i in singles])):
                out[i] = pieces
        elif singles:
            texts = [docs[i].text for i in singles]  # Doc.text joins its tokens anew at every call
            enc = self._encode(texts)
            offsets = trim_spaces(texts, [np.asarray(offs, dtype=np.int64).reshape(-1, 2) for offs in enc["offset_mapping"]])
            for j, i in enumerate(singles):
                out[i] = self._windowed(np.asarray(enc["input_ids"][j], dtype=np.int64), offsets[j])
        if pairs:
            read = self._pairs if self.pairs == "joint" else self._pairs_apart
            out_pairs = read([docs[i] for i in pairs])
            for i, pieces in zip(pairs, out_pairs):
                out[i] = pieces
        return out

    def piece_strings(self, ids: np.ndarray) -> List[str]:
        """The pieces' strings, as `convert_ids_to_tokens` gives them, read from
        a table of the whole vocabulary made at the first call (per id, the
        fast tokenizer's own call is a Python call into Rust, a few times the
        cost of a Doc's other per-piece work)."""
        try:
            return self._strings[ids].tolist()
        except IndexError:  # not made yet, or tokens were added since (at the end: new ids)
            # (the table's length is not checked at each call: `len` of a fast tokenizer lists its vocabulary)
            self._strings = np.asarray(self.hf.convert_ids_to_tokens(list(range(len(self.hf)))), dtype=object)
            return self._strings[ids].tolist()

    def __getstate__(self):
        """Pickled (a pipeline sent to other processes) without the table of
        piece strings: the process that reads strings makes its own."""
        return {**self.__dict__, "_strings": np.empty(0, dtype=object)}

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

    def _encode(self, texts: List[str]):
        return self.hf(
            texts,
            add_special_tokens=False,
            split_special_tokens=True,
            return_offsets_mapping=True,
            return_attention_mask=False,
            return_token_type_ids=False,
            verbose=False,
        )

    def _in_context(self, docs: Sequence[Doc]) -> List[DocPieces]:
        """Each Doc's pieces, and one window per sentence (`context_windows`) with up
        to `context_pieces` pieces of the text around it: the Doc's other sentences
        and its `mlm_context`. Of the context texts only an edge is tokenized, cut at
        whitespace so that its pieces are those of the whole text, and widened (x4)
        until it holds `context_pieces` pieces or all of the text."""
        out: List[DocPieces] = [None] * len(docs)  # type: ignore
        contexts = [doc_context(doc) for doc in docs]
        todo = list(range(len(docs)))
        chars = 8 * self.context_pieces + 16
        doc_texts = [doc.text for doc in docs]
        while todo:
            edges = [_edges(doc_texts[i], *contexts[i], chars) for i in todo]
            texts = [before + doc_texts[i] + after for i, (before, after, _, _) in zip(todo, edges)]
            enc = self._encode(texts)
            trimmed = trim_spaces(texts, [np.asarray(offs, dtype=np.int64).reshape(-1, 2) for offs in enc["offset_mapping"]])
            retry = []
            for j, (i, (before, after, whole_before, whole_after)) in enumerate(zip(todo, edges)):
                ids = np.asarray(enc["input_ids"][j], dtype=np.int64)
                offsets = trimmed[j]
                lo, hi = np.searchsorted(offsets[:, 0], [len(before), len(before) + len(doc_texts[i])])
                short = (lo < self.context_pieces and not whole_before) or (
                    len(ids) - hi < self.context_pieces and not whole_after
                )
                if short:
                    retry.append(i)
                    continue
                out[i] = self._sentence_windows(docs[i], ids, offsets - len(before), lo, hi)
            todo, chars = retry, chars * 4
        return out

    def _sentence_windows(self, doc: Doc, ids: np.ndarray, offsets: np.ndarray, lo: int, hi: int) -> DocPieces:
        """DocPieces of the Doc's pieces ids[lo:hi] (offsets already in doc.text),
        read sentence by sentence with the pieces around them."""
        starts = offsets[lo:hi, 0]
        sentence_chars = np.asarray([doc[t].idx for t in sentence_starts(doc)], dtype=np.int64)
        bounds = np.searchsorted(starts, sentence_chars[1:]) if len(sentence_chars) else np.zeros(0, np.int64)
        edges = [lo, *(lo + bounds).tolist(), hi]
        segments = list(zip(edges[:-1], edges[1:]))
        spans, owner, position = context_windows(
            segments, len(ids), self.content_length, self.context_pieces, self.overlap
        )
        spans = spans or [(lo, lo)]  # a Doc without pieces still gets its [CLS]
        windows = []
        for start, end in spans:
            input_ids = np.concatenate([self.prefix, ids[start:end], self.suffix])
            windows.append(Window(input_ids, np.zeros_like(input_ids)))
        return DocPieces(ids[lo:hi], starts, offsets[lo:hi, 1], windows, owner, position + len(self.prefix))

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
        contents, piece_offsets = [], []
        for j, (_, b_start, _) in enumerate(splits):
            offsets = np.asarray(enc["offset_mapping"][j], dtype=np.int64).reshape(-1, 2)
            seq = np.asarray([-1 if s is None else s for s in enc.sequence_ids(j)])
            content = np.flatnonzero(seq >= 0)
            contents.append(content)
            piece_offsets.append(offsets[content] + np.where(seq[content] == 1, b_start, 0)[:, None])
        result = []
        for j, (content, offsets) in enumerate(zip(contents, trim_spaces([doc.text for doc in docs], piece_offsets))):
            input_ids = np.asarray(enc["input_ids"][j], dtype=np.int64)
            type_ids = np.asarray(enc["token_type_ids"][j], dtype=np.int64)
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

    def _pairs_apart(self, docs: Sequence[Doc]) -> List[DocPieces]:
        """Each side of each pair Doc read as a text of its own, exactly as the
        Docs `doc[:start].as_doc()` and `doc[start:].as_doc()` would be: side A's
        windows, then side B's, the offsets of B's pieces moved to doc.text."""
        starts = [pair_char_split(doc)[1] for doc in docs]
        texts = [text for doc, b in zip(docs, starts) for text in (doc.text[:b], doc.text[b:])]
        enc = self._encode(texts)
        offsets = trim_spaces(texts, [np.asarray(offs, dtype=np.int64).reshape(-1, 2) for offs in enc["offset_mapping"]])
        result = []
        for j, b_start in enumerate(starts):
            a, b = (self._windowed(np.asarray(enc["input_ids"][k], dtype=np.int64), offsets[k]) for k in (2 * j, 2 * j + 1))
            result.append(DocPieces(
                np.concatenate([a.ids, b.ids]), np.concatenate([a.starts, b.starts + b_start]),
                np.concatenate([a.ends, b.ends + b_start]), a.windows + b.windows,
                np.concatenate([a.owner, b.owner + len(a.windows)]), np.concatenate([a.owner_position, b.owner_position]),
            ))
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


def _edges(text: str, before: str, after: str, chars: int) -> Tuple[str, str, bool, bool]:
    """The last ~`chars` characters of `before` and the first of `after`, cut at
    whitespace (so no word is cut), with a space added where a context text would
    otherwise run into the Doc's text; and whether each side is whole."""
    whole_before, whole_after = len(before) <= chars, len(after) <= chars
    before, after = tail(before, chars), head(after, chars)
    if before and text and not before[-1].isspace() and not text[0].isspace():
        before += " "
    if after and text and not after[0].isspace() and not text[-1].isspace():
        after = " " + after
    return before, after, whole_before, whole_after


def trim_spaces(texts: Sequence[str], offsets: Sequence[np.ndarray]) -> List[np.ndarray]:
    """Each text's (n, 2) piece offsets without the whitespace at their edges.
    SentencePiece and byte-level BPE pieces carry the space before a word
    (`▁word`, `Ġword`), and some tokenizers report it in the offsets, so a
    piece would also overlap a whitespace token before it; a piece that is
    only whitespace (a lone `▁`) becomes empty and aligns to no token. The
    texts are read as one (each one's offsets shifted by the texts before it:
    a piece is trimmed within its own bounds, so it never reaches another
    text), as a handful of numpy calls per text cost more than their work."""
    if not texts:
        return []
    lengths = [len(offs) for offs in offsets]
    shifts = np.cumsum([0] + [len(text) for text in texts[:-1]])
    flat = np.concatenate([np.asarray(offs, dtype=np.int64).reshape(-1, 2) + shift for offs, shift in zip(offsets, shifts)])
    text = "".join(texts)
    if len(flat) and text:
        codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        space = IS_SPACE[np.minimum(codes, len(IS_SPACE) - 1)]
        positions = np.arange(len(text) + 1)
        # the first non-space at or after each position, the last non-space before each
        next_text = np.minimum.accumulate(np.where(np.append(~space, True), positions, len(text))[::-1])[::-1]
        last_text = np.maximum.accumulate(np.where(np.insert(~space, 0, True), positions, 0))
        starts = np.minimum(next_text[flat[:, 0]], flat[:, 1])
        ends = np.maximum(last_text[flat[:, 1]], starts)
        flat = np.stack([starts, ends], axis=1)
    bounds = np.cumsum(lengths)[:-1]
    return [part - shift for part, shift in zip(np.split(flat, bounds), shifts)]
