"""From corpora to batches: tokenization, the example stream and collation.

The stream is a pure function of (seed, step): example `g` of the run belongs to
epoch `g // epoch_size` and is found through that epoch's seeded order. A run
resumed at step k, or split over several processes, therefore sees exactly the
data (and, with `masking`, the masks) of an uninterrupted single-process run.
"""
import logging
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..tokenization.template import special_template
from .masking import MaskedBatch, mask_tokens
from .packing import Segment, next_sentence_pairs, pack_documents
from .sampling import epoch_order, sampling_probabilities

logger = logging.getLogger(__name__)


@dataclass
class Example:
    a: Segment
    b: Optional[Segment] = None
    nsp_label: Optional[int] = None


@dataclass
class Batch:
    input_ids: np.ndarray
    attention_mask: Optional[np.ndarray]  # None when nothing is padded (faster attention)
    token_type_ids: np.ndarray
    special_mask: np.ndarray
    word_starts: np.ndarray
    nsp_labels: Optional[np.ndarray]

    def rows(self, start: int, stop: int) -> "Batch":
        pick = lambda x: None if x is None else x[start:stop]  # noqa: E731
        mask = pick(self.attention_mask)
        return Batch(
            pick(self.input_ids),
            None if mask is None or mask.all() else mask,
            pick(self.token_type_ids),
            pick(self.special_mask),
            pick(self.word_starts),
            pick(self.nsp_labels),
        )


def tokenize_documents(
    tokenizer, documents: Sequence[Sequence[str]], chunk: int = 4096, chunk_chars: int = 200_000
) -> List[List[Segment]]:
    """Piece ids (no special tokens) and word-start flags for every segment. A
    "[MASK]" or "</s>" in the corpus is text, split into pieces: read as the
    special token, it would put a mask or a separator into the input that the
    text never had and that the masking (which skips special tokens) never
    scores. The tokenizer gets at most `chunk` segments and (unless one segment
    is longer) `chunk_chars` characters a call: its working memory is per call."""
    flat = [segment for doc in documents for segment in doc]
    segments: List[Segment] = []
    for start, stop in _chunks([len(s) for s in flat], chunk, chunk_chars):
        enc = tokenizer(
            flat[start:stop], add_special_tokens=False, split_special_tokens=True, return_attention_mask=False,
            return_token_type_ids=False, verbose=False,
        )
        for j, ids in enumerate(enc["input_ids"]):
            words = np.array([-1 if w is None else w for w in enc.word_ids(j)], dtype=np.int64)
            starts = np.ones(len(words), dtype=bool)
            starts[1:] = words[1:] != words[:-1]
            segments.append((np.asarray(ids, dtype=np.int64), starts))
    tokenized, k = [], 0
    for doc in documents:
        tokenized.append([seg for seg in segments[k : k + len(doc)] if len(seg[0])])
        k += len(doc)
    return [doc for doc in tokenized if doc]


def _chunks(lengths: Sequence[int], most: int, most_chars: int) -> List[Tuple[int, int]]:
    """(start, stop) ranges of at most `most` items whose lengths sum to at most
    `most_chars` (a range holds at least one item)."""
    ranges, start, chars = [], 0, 0
    for i, length in enumerate(lengths):
        if i > start and (i - start >= most or chars + length > most_chars):
            ranges.append((start, i))
            start, chars = i, 0
        chars += length
    return ranges + [(start, len(lengths))] if len(lengths) > start else ranges


def token_counts(tokenized: Sequence[Sequence[Sequence[Segment]]], vocab_size: int) -> np.ndarray:
    counts = np.zeros(vocab_size, dtype=np.int64)
    for docs in tokenized:
        for doc in docs:
            for ids, _ in doc:
                counts += np.bincount(ids, minlength=vocab_size)[:vocab_size]
    return counts


def collate(examples: Sequence[Example], tokenizer) -> Batch:
    """Add the model's special tokens, pad, and mark what may never be masked."""
    template = special_template(tokenizer)
    rows, types, starts = [], [], []
    for ex in examples:
        ids, segment_ids, special = template.wrap(ex.a[0], None if ex.b is None else ex.b[0])
        flags = np.ones(len(ids), dtype=bool)
        flags[~special] = ex.a[1] if ex.b is None else np.concatenate([ex.a[1], ex.b[1]])
        rows.append(ids)
        types.append(segment_ids)
        starts.append(flags)
    length = max(len(r) for r in rows)
    shape = (len(rows), length)
    input_ids = np.full(shape, tokenizer.pad_token_id, dtype=np.int64)
    attention = np.zeros(shape, dtype=np.int64)
    token_types = np.zeros(shape, dtype=np.int64)
    word_starts = np.ones(shape, dtype=bool)
    for i, (ids, tt, st) in enumerate(zip(rows, types, starts)):
        input_ids[i, : len(ids)] = ids
        attention[i, : len(ids)] = 1
        token_types[i, : len(ids)] = tt
        word_starts[i, : len(ids)] = st
    special_mask = np.isin(input_ids, tokenizer.all_special_ids) | (attention == 0)
    nsp = None if examples[0].nsp_label is None else np.array([ex.nsp_label for ex in examples], dtype=np.int64)
    return Batch(input_ids, None if attention.all() else attention, token_types, special_mask, word_starts, nsp)


@dataclass
class MaskingSettings:
    mask_token_id: int
    replacement_probs: np.ndarray
    rate: float = 0.15
    mask_fraction: float = 0.8
    random_fraction: float = 0.1
    whole_word: bool = False

    def apply(self, batch: Batch, rng: np.random.Generator) -> MaskedBatch:
        return mask_tokens(
            batch.input_ids, batch.special_mask, rng, self.mask_token_id, self.replacement_probs,
            rate=self.rate, mask_fraction=self.mask_fraction, random_fraction=self.random_fraction,
            word_starts=batch.word_starts if self.whole_word else None,
        )


class ExampleStream:
    """Training examples of one or more languages, in a seeded order per epoch.

    Packed mode: the blocks are fixed, the order changes by epoch. NSP mode: the
    random pairings are drawn anew each epoch, too."""

    def __init__(
        self,
        tokenized: Dict[str, List[List[Segment]]],
        capacity: int,
        separator_id: Optional[int],
        seed: int,
        next_sentence: bool = False,
        alpha: float = 0.3,
    ):
        self.languages = list(tokenized)
        self.tokenized = tokenized
        self.capacity, self.separator_id, self.seed = capacity, separator_id, seed
        self.next_sentence = next_sentence
        self._packed = None if next_sentence else {lang: self._pack(docs) for lang, docs in tokenized.items()}
        first = self.examples_for_epoch(0)
        self.sizes = np.array([len(first[lang]) for lang in self.languages])
        self.data_shares = self.sizes / self.sizes.sum()
        self.probs = sampling_probabilities(self.sizes, alpha)
        self.epoch_size = int(self.sizes.sum())
        self._cache = (0, first, self._order(0))

    def _pack(self, docs):
        return [Example(block) for block in pack_documents(docs, self.capacity, self.separator_id)]

    def examples_for_epoch(self, epoch: int) -> Dict[str, List[Example]]:
        if self._packed is not None:
            return self._packed
        out = {}
        for k, lang in enumerate(self.languages):
            rng = np.random.default_rng([self.seed, epoch, k, 7])
            pairs = next_sentence_pairs(self.tokenized[lang], self.capacity, rng)
            out[lang] = [Example(a, b, label) for a, b, label in pairs]
        return out

    def _order(self, epoch: int) -> np.ndarray:
        return epoch_order(self.sizes, self.probs, np.random.default_rng([self.seed, epoch]))

    def example(self, index: int) -> Example:
        epoch, offset = divmod(index, self.epoch_size)
        if self._cache[0] != epoch:
            self._cache = (epoch, self.examples_for_epoch(epoch), self._order(epoch))
        _, examples, order = self._cache
        g = int(order[offset])
        lang = int(np.searchsorted(np.cumsum(self.sizes), g, side="right"))
        return examples[self.languages[lang]][g - int(self.sizes[:lang].sum())]

    def global_batch(self, step: int, batch_size: int) -> List[Example]:
        """The examples of optimizer step `step` (0-based), for all processes together."""
        return [self.example(step * batch_size + i) for i in range(batch_size)]

    def describe_shares(self) -> str:
        return ", ".join(
            f"{lang}: {n} examples, data share {p:.3f} -> sampled {q:.3f}"
            for lang, n, p, q in zip(self.languages, self.sizes, self.data_shares, self.probs)
        )
