"""Sentence-pair (NLI) data: MultiNLI/SNLI JSONL, GLUE TSV (MNLI, RTE), SICK TSV
and the header-less `label<TAB>premise<TAB>hypothesis` samples.

Labels are normalised to `entailment` / `neutral` / `contradiction`, or to
`entailment` / `not_entailment` for two-way sets such as RTE. The two schemes are
not silently merged: RTE's `not_entailment` cannot be split into neutral vs
contradiction, so reading it as three-way is an error, while three-way data can
be read as two-way on request (`label_scheme="binary"`) to train for RTE-style
tasks. Rows without a gold label (`-`, as in SNLI/MultiNLI where annotators
disagreed) are skipped and counted, never guessed.
"""
import itertools
import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from spacy.language import Language
from spacy.training import Example
from spacy.util import registry

from ..errors import DataError, DataFormatError, SettingError
from .common import (
    LabeledData, LabeledFileCorpus, PathLike, find_column, format_skipped, iter_lines, one_hot_cats, parse_json_line,
    split_tsv, tsv_header,
)

logger = logging.getLogger(__name__)

ENTAILMENT, NEUTRAL, CONTRADICTION, NOT_ENTAILMENT = "entailment", "neutral", "contradiction", "not_entailment"
THREE_WAY: Tuple[str, ...] = (ENTAILMENT, NEUTRAL, CONTRADICTION)
TWO_WAY: Tuple[str, ...] = (ENTAILMENT, NOT_ENTAILMENT)
LABEL_SCHEMES = ("auto", "three_way", "binary")

_ALIASES = {
    "entailment": ENTAILMENT,
    "neutral": NEUTRAL,
    "contradiction": CONTRADICTION,
    "not_entailment": NOT_ENTAILMENT,
    "not-entailment": NOT_ENTAILMENT,
    "non-entailment": NOT_ENTAILMENT,
}
_UNLABELED = {"-", ""}

PREMISE_COLUMNS = ("premise", "sentence1", "sentence_A")
HYPOTHESIS_COLUMNS = ("hypothesis", "sentence2", "sentence_B")
# gold_label before label: MultiNLI/SNLI files carry both `gold_label` and the
# annotators' `label1..5`; GLUE MNLI has `gold_label` last.
LABEL_COLUMNS = ("gold_label", "entailment_judgment", "label")


@dataclass(frozen=True)
class PairExample:
    premise: str
    hypothesis: str
    label: str
    line: int


class NLIData(LabeledData):

    def summary(self) -> str:
        counts = Counter(eg.label for eg in self.examples)
        parts = ", ".join(f"{label} {counts[label]}" for label in self.labels)
        return f"{self.path}: {len(self.examples)} pairs ({parts}); skipped: {format_skipped(self.skipped)}"


def normalize_nli_label(raw: Optional[str]) -> Optional[str]:
    """The canonical label for a raw label string, None for an unlabeled row.
    Raises KeyError for a label that is not an NLI label."""
    if raw is None:
        return None
    key = str(raw).strip().lower()
    if key in _UNLABELED:
        return None
    return _ALIASES[key]


def apply_label_scheme(labels_seen: Sequence[str], scheme: str) -> Tuple[Tuple[str, ...], Dict[str, str]]:
    """The label set for a file and the mapping from its canonical labels to it.

    auto: two-way if the file uses `not_entailment`, else three-way; a file that
    mixes `not_entailment` with neutral/contradiction is rejected.
    """
    if scheme not in LABEL_SCHEMES:
        raise SettingError(f"unknown label_scheme {scheme!r}: expected one of {', '.join(LABEL_SCHEMES)}")
    seen = set(labels_seen)
    if scheme == "binary":
        return TWO_WAY, {ENTAILMENT: ENTAILMENT, NEUTRAL: NOT_ENTAILMENT, CONTRADICTION: NOT_ENTAILMENT,
                         NOT_ENTAILMENT: NOT_ENTAILMENT}
    two_way = NOT_ENTAILMENT in seen
    if two_way and (seen & {NEUTRAL, CONTRADICTION}):
        raise DataError("labels mix not_entailment with neutral/contradiction")
    if two_way and scheme == "three_way":
        raise DataError("not_entailment cannot be read as three-way (neutral vs contradiction is unknown); "
                         "use label_scheme = \"auto\" or \"binary\"")
    labels = TWO_WAY if two_way else THREE_WAY
    return labels, {label: label for label in labels}


def _rows(path: Path, encoding: str) -> Iterator[Tuple[int, str, str, Optional[str]]]:
    """(line, premise, hypothesis, raw label or None) for each data row."""
    if path.suffix.lower() in (".jsonl", ".json"):
        yield from _json_rows(path, encoding)
    else:
        yield from _tsv_rows(path, encoding)


def _json_rows(path: Path, encoding: str):
    for number, line in iter_lines(path, encoding):
        if not line.strip():
            continue
        record = parse_json_line(path, number, line)
        keys = list(record)
        p, h, lab = (find_column(keys, cols) for cols in (PREMISE_COLUMNS, HYPOTHESIS_COLUMNS, LABEL_COLUMNS))
        if p is None or h is None or lab is None:
            raise DataFormatError(
                path, number,
                f"needs premise ({'/'.join(PREMISE_COLUMNS)}), hypothesis ({'/'.join(HYPOTHESIS_COLUMNS)}) "
                f"and label ({'/'.join(LABEL_COLUMNS)}) keys, found {', '.join(keys)}",
            )
        values = [record[keys[i]] for i in (p, h)]
        if not all(isinstance(v, str) for v in values):
            raise DataFormatError(path, number, "premise and hypothesis must be strings")
        label = record[keys[lab]]
        if label is not None and not isinstance(label, str):
            raise DataFormatError(path, number, f"label must be a label name, got {label!r}")
        yield number, values[0], values[1], label


def _tsv_rows(path: Path, encoding: str):
    start = tsv_header(path, encoding)
    if start is None:
        return
    number, fields, lines = start
    try:
        headerless = len(fields) == 3 and (fields[0].strip() in _UNLABELED or normalize_nli_label(fields[0]))
    except KeyError:
        headerless = False
    if headerless:
        columns, n_columns = (1, 2, 0), 3
        lines = itertools.chain([(number, "\t".join(fields))], lines)
    else:
        p, h, lab = (find_column(fields, cols) for cols in (PREMISE_COLUMNS, HYPOTHESIS_COLUMNS, LABEL_COLUMNS))
        if p is None or h is None or lab is None:
            raise DataFormatError(
                path, number,
                "not a known NLI TSV: expected a header with premise/sentence1/sentence_A, "
                "hypothesis/sentence2/sentence_B and gold_label/entailment_judgment/label columns, "
                "or header-less rows 'label<TAB>premise<TAB>hypothesis'",
            )
        columns, n_columns = (p, h, lab), len(fields)
    for number, line in lines:
        if not line.strip():
            continue
        fields = split_tsv(path, number, line, n_columns)
        yield number, fields[columns[0]], fields[columns[1]], fields[columns[2]]


def read_nli(path: PathLike, label_scheme: str = "auto", encoding: str = "utf-8") -> NLIData:
    """All labeled pairs of an NLI file; see the module docstring for formats.
    Skipped rows are counted by reason in `NLIData.skipped` and logged."""
    path = Path(path)
    rows: List[Tuple[int, str, str, str]] = []
    skipped: Counter = Counter()
    for number, premise, hypothesis, raw in _rows(path, encoding):
        try:
            label = normalize_nli_label(raw)
        except KeyError:
            raise DataFormatError(
                path, number, f"unknown NLI label {raw!r}: expected one of {', '.join(_ALIASES)} or '-'"
            ) from None
        if label is None:
            skipped["unlabeled"] += 1
        elif not premise.strip() or not hypothesis.strip():
            skipped["empty text"] += 1
        else:
            rows.append((number, premise.strip(), hypothesis.strip(), label))
    try:
        labels, mapping = apply_label_scheme([row[3] for row in rows], label_scheme)
    except ValueError as err:
        raise DataFormatError(path, None, str(err)) from None
    examples = [PairExample(p, h, mapping[lab], number) for number, p, h, lab in rows]
    data = NLIData(path, examples, labels, skipped)
    if skipped:
        logger.warning("%s", data.summary())
    else:
        logger.info("%s", data.summary())
    return data


class NLICorpus(LabeledFileCorpus):
    """Yields one Example per labeled pair: a pair Doc (see `make_pair_doc`) with
    one-hot `cats` over the file's label set. The file is parsed once, on first
    use; Docs are made for the `nlp` passed in. A file without labeled pairs is
    a DataFormatError naming it."""

    what = "labeled sentence pairs"

    def __init__(self, path: PathLike, *, label_scheme: str = "auto", limit: int = 0, shuffle: bool = False,
                 seed: int = 0, encoding: str = "utf-8"):
        super().__init__(path, limit=limit, shuffle=shuffle, seed=seed)
        self.label_scheme, self.encoding = label_scheme, encoding

    def _read(self) -> NLIData:
        return read_nli(self.path, self.label_scheme, self.encoding)

    def __call__(self, nlp: Language) -> Iterator[Example]:
        from ..tokenization.pair import make_pair_doc

        labels = self.data.labels
        for eg in self.examples():
            doc = make_pair_doc(nlp, eg.premise, eg.hypothesis)
            reference = doc.copy()
            reference.cats = one_hot_cats([eg.label], labels)
            yield Example(doc, reference)


@registry.readers("spacy_mlm.NLICorpus.v1")
def create_nli_corpus_v1(
    path: Path, label_scheme: str = "auto", limit: int = 0, shuffle: bool = False, seed: int = 0,
    encoding: str = "utf-8",
) -> Callable[[Language], Iterator[Example]]:
    """Sentence-pair corpus for `spacy train` ([corpora.train] / [corpora.dev]).
    `limit` > 0 keeps that many pairs (after a seeded shuffle if `shuffle`)."""
    if label_scheme not in LABEL_SCHEMES:
        raise SettingError(f"unknown label_scheme {label_scheme!r}: expected one of {', '.join(LABEL_SCHEMES)}")
    return NLICorpus(path, label_scheme=label_scheme, limit=limit, shuffle=shuffle, seed=seed, encoding=encoding)
