"""What the student reads: unlabelled segments (the corpora `pretrain` reads)
and, optionally, labelled Examples from .spacy files, as one list of items.

The items of optimizer step `s` are a pure function of (seed, s): item `g` of
the run is position `g % n` of epoch `g // n`'s seeded permutation. A resumed
run therefore reads exactly the batches an uninterrupted one reads.
"""
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import numpy as np
from spacy.training import Corpus, Example

from ..errors import DataFormatError
from ..pretraining.checkpoint import corpus_digest
from ..readers.corpus import read_corpus


def read_texts(paths: Sequence[str], text_field: str, file_format: str) -> List[str]:
    """Every segment of every document of the corpora, in order."""
    return [segment for path in paths for document in read_corpus(path, text_field, file_format)
            for segment in document]


def read_gold(path: str, nlp) -> List[Example]:
    """The Examples of a .spacy file, each predicted Doc made by `nlp`'s tokenizer."""
    if not Path(path).is_file():
        raise DataFormatError(path, None, "labelled data not found (a .spacy file, `spacy_mlm convert-conll` writes one)")
    examples = list(Corpus(path)(nlp))
    if not examples:
        raise DataFormatError(path, None, "holds no Docs")
    return examples


def data_digest(texts: Sequence[str], gold_paths: Sequence[str]) -> Dict[str, str]:
    """Digests of the texts and of the labelled files: a corpus edited in place
    is told from the one the run started on."""
    gold = hashlib.sha256()
    for path in gold_paths:
        gold.update(Path(path).read_bytes())
    return {"texts": corpus_digest({"all": [texts]}), "gold": gold.hexdigest()}


@dataclass
class ItemStream:
    """Items 0..n_texts-1 are the texts, the rest the gold Examples."""

    n_texts: int
    n_gold: int
    seed: int

    @property
    def size(self) -> int:
        return self.n_texts + self.n_gold

    def _order(self, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.seed, epoch]).permutation(self.size)

    def items(self, step: int, batch_size: int) -> Tuple[List[int], List[int]]:
        """The (text items, gold items) of step `step` (0-based)."""
        chosen, order_epoch, order = [], None, None
        for g in range(step * batch_size, (step + 1) * batch_size):
            epoch, offset = divmod(g, self.size)
            if epoch != order_epoch:
                order_epoch, order = epoch, self._order(epoch)
            chosen.append(int(order[offset]))
        return [i for i in chosen if i < self.n_texts], [i for i in chosen if i >= self.n_texts]
