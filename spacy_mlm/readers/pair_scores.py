"""Sentence pairs with a real-valued gold score: SICK relatedness (1 to 5),
STS-B (0 to 5) and JSON lines, for `mlm_regressor`.

Files: a TSV with a header (SICK: `sentence_A`, `sentence_B`,
`relatedness_score`; GLUE STS-B: `sentence1`, `sentence2`, `score`) or JSONL
with the same keys (or `premise`/`hypothesis`). Rows without a score, or with
an empty side, are skipped and counted; a score that is not a finite number is
an error naming the file and the line.
"""
import logging
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, List, Optional, Tuple

from spacy.language import Language
from spacy.training import Example
from spacy.util import registry

from ..errors import DataFormatError
from .common import PathLike, find_column, format_skipped, iter_lines, parse_json_line, require_examples, select, split_tsv
from .nli import HYPOTHESIS_COLUMNS, PREMISE_COLUMNS

logger = logging.getLogger(__name__)

SCORE_COLUMNS = ("relatedness_score", "score", "similarity")


@dataclass(frozen=True)
class ScoredPair:
    text_a: str
    text_b: str
    score: float
    line: int


@dataclass
class PairScoreData:
    path: Path
    examples: List[ScoredPair]
    skipped: Counter = field(default_factory=Counter)

    def summary(self) -> str:
        scores = [eg.score for eg in self.examples]
        spread = f", scores {min(scores):g} to {max(scores):g}" if scores else ""
        return f"{self.path}: {len(self.examples)} pairs{spread}; skipped: {format_skipped(self.skipped)}"


def _columns(path: Path, number: int, names: List[str]) -> Tuple[int, int, int]:
    found = [find_column(names, cols) for cols in (PREMISE_COLUMNS, HYPOTHESIS_COLUMNS, SCORE_COLUMNS)]
    if None in found:
        raise DataFormatError(
            path, number,
            f"needs columns (or keys) for the first text ({'/'.join(PREMISE_COLUMNS)}), the second text "
            f"({'/'.join(HYPOTHESIS_COLUMNS)}) and the score ({'/'.join(SCORE_COLUMNS)}); found {', '.join(names)}",
        )
    return found[0], found[1], found[2]


def _rows(path: Path, encoding: str) -> Iterator[Tuple[int, str, str, object]]:
    """(line, text a, text b, raw score) for each data row."""
    lines = iter_lines(path, encoding)
    if path.suffix.lower() in (".jsonl", ".json"):
        for number, line in lines:
            if not line.strip():
                continue
            record = parse_json_line(path, number, line)
            keys = list(record)
            a, b, score = _columns(path, number, keys)
            texts = [record[keys[a]], record[keys[b]]]
            if not all(isinstance(t, str) for t in texts):
                raise DataFormatError(path, number, "both texts must be strings")
            yield number, texts[0], texts[1], record[keys[score]]
        return
    header = next(lines, None)
    if header is None:
        return
    names = header[1].split("\t")
    a, b, score = _columns(path, header[0], names)
    for number, line in lines:
        if line.strip():
            fields = split_tsv(path, number, line, len(names))
            yield number, fields[a], fields[b], fields[score]


def _score(path: Path, number: int, raw: object) -> Optional[float]:
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise DataFormatError(path, number, f"the score {raw!r} is not a number") from None
    if not math.isfinite(value):
        raise DataFormatError(path, number, f"the score {raw!r} is not a finite number")
    return value


def read_pair_scores(path: PathLike, encoding: str = "utf-8") -> PairScoreData:
    """Every scored pair of a file; see the module docstring for formats."""
    path = Path(path)
    examples, skipped = [], Counter()
    for number, text_a, text_b, raw in _rows(path, encoding):
        score = _score(path, number, raw)
        if score is None:
            skipped["no score"] += 1
        elif not text_a.strip() or not text_b.strip():
            skipped["empty text"] += 1
        else:
            examples.append(ScoredPair(text_a.strip(), text_b.strip(), score, number))
    data = PairScoreData(path, examples, skipped)
    (logger.warning if skipped else logger.info)("%s", data.summary())
    return data


class PairScoreCorpus:
    """Yields one Example per scored pair: a pair Doc (see `make_pair_doc`) whose
    reference has `cats = {target: score}`. The file is parsed once, on first use."""

    def __init__(self, path: PathLike, *, target: str = "score", limit: int = 0, shuffle: bool = False,
                 seed: int = 0, encoding: str = "utf-8"):
        self.path, self.target = Path(path), target
        self.limit, self.shuffle, self.seed, self.encoding = limit, shuffle, seed, encoding
        self._data: Optional[PairScoreData] = None

    @property
    def data(self) -> PairScoreData:
        if self._data is None:
            data = read_pair_scores(self.path, self.encoding)
            require_examples(self.path, len(data.examples), "scored sentence pairs", data.skipped)
            self._data = data
        return self._data

    def __call__(self, nlp: Language) -> Iterator[Example]:
        from ..tokenization.pair import make_pair_doc

        for eg in select(self.data.examples, self.limit, self.shuffle, self.seed):
            doc = make_pair_doc(nlp, eg.text_a, eg.text_b)
            reference = doc.copy()
            reference.cats = {self.target: eg.score}
            yield Example(doc, reference)


@registry.readers("spacy_mlm.PairScoreCorpus.v1")
def create_pair_score_corpus_v1(
    path: Path, target: str = "score", limit: int = 0, shuffle: bool = False, seed: int = 0, encoding: str = "utf-8",
) -> Callable[[Language], Iterator[Example]]:
    """Scored sentence pairs (SICK relatedness, STS-B) for `spacy train` with an
    `mlm_regressor`; `target` names the score in doc.cats (e.g. "relatedness").
    `limit` > 0 keeps that many pairs (after a seeded shuffle if `shuffle`)."""
    return PairScoreCorpus(path, target=target, limit=limit, shuffle=shuffle, seed=seed, encoding=encoding)
