"""Word-in-Context (Pilehvar & Camacho-Collados 2019) reader.

`<split>.data.txt`: `target<TAB>PoS<TAB>i-j<TAB>sentence1<TAB>sentence2`, where the
sentences are whitespace-tokenized and i / j are 0-based indices of the target
word in sentence1 / sentence2. The target is a lemma ("break"), the word at the
index may be inflected ("broke"), so the index, not the lemma, locates it.
`<split>.gold.txt`: one T or F per line, aligned with the data file.

Words are located by character offsets in the sentence, so the spaCy tokenizer
may split or merge them differently (`target_span` expands to whole tokens).

For `spacy train` (`spacy_mlm.WiCCorpus.v1`) a pair is one Example: a pair Doc
(`make_pair_doc`: both sentences, `doc._.mlm_pair_start` where the second
starts) with the two targets as the span group `doc.spans["sense_pair"]` on
both sides (they are input, not gold), and the label as
`reference.cats["SAME_SENSE"]` (1.0 / 0.0). Span groups, cats and the pair
start (user data) survive `Example` copies and `DocBin(store_user_data=True)`.
"""
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, List, Optional, Tuple, Union

from spacy.language import Language
from spacy.tokens import Doc, Span
from spacy.training import Example
from spacy.util import registry

from ..errors import DataError, DataFormatError
from ..tokenization.pair import PAIR_ATTR, make_pair_doc
from .common import iter_lines, require_examples, select, split_tsv

SENSE_PAIR_KEY = "sense_pair"
SAME_SENSE = "SAME_SENSE"

_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class WicExample:
    target: str
    pos: str
    index1: int
    index2: int
    sentence1: str
    sentence2: str
    label: Optional[bool]
    line: int

    @property
    def char_span1(self) -> Tuple[int, int]:
        return word_char_span(self.sentence1, self.index1)

    @property
    def char_span2(self) -> Tuple[int, int]:
        return word_char_span(self.sentence2, self.index2)


def word_char_span(sentence: str, index: int) -> Tuple[int, int]:
    """Character (start, end) of the index-th whitespace-separated word."""
    words = list(_WORD.finditer(sentence))
    if not 0 <= index < len(words):
        raise DataError(f"word index {index} out of range for a sentence of {len(words)} words")
    return words[index].start(), words[index].end()


def target_span(doc: Doc, char_span: Tuple[int, int]) -> Span:
    """The spaCy tokens covering a character span (expanded to token bounds)."""
    span = doc.char_span(char_span[0], char_span[1], alignment_mode="expand")
    if span is None or len(span) == 0:
        raise DataError(f"characters {char_span} of {doc.text!r} cover no token")
    return span


def _parse_index(value: str, path: Path, line: int) -> Tuple[int, int]:
    parts = value.split("-")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise DataFormatError(path, line, f"index column must look like '3-5', got {value!r}")
    return int(parts[0]), int(parts[1])


def _read_gold(path: Path) -> List[bool]:
    labels = []
    for line_no, line in iter_lines(path):
        value = line.strip()
        if value not in ("T", "F"):
            raise DataFormatError(path, line_no, f"gold label must be T or F, got {value!r}")
        labels.append(value == "T")
    return labels


def read_wic(data_path: Union[str, Path], gold_path: Union[str, Path, None] = None) -> List[WicExample]:
    """Read a WiC data file (and its gold file if given; labels are None otherwise)."""
    rows = []
    for line_no, line in iter_lines(data_path):
        target, pos, index, s1, s2 = split_tsv(data_path, line_no, line, 5)
        i, j = _parse_index(index, data_path, line_no)
        for which, sentence, k in (("sentence1", s1, i), ("sentence2", s2, j)):
            try:
                word_char_span(sentence, k)
            except DataError as err:
                raise DataFormatError(data_path, line_no, f"{which}: {err}") from None
        rows.append((target, pos, i, j, s1, s2, line_no))
    labels: List[Optional[bool]] = [None] * len(rows)
    if gold_path is not None:
        labels = _read_gold(Path(gold_path))
        if len(labels) != len(rows):
            raise DataFormatError(
                gold_path, min(len(labels), len(rows)) + 1,
                f"{len(labels)} gold labels for {len(rows)} examples in {data_path}",
            )
    return [
        WicExample(target, pos, i, j, s1, s2, label, line_no)
        for (target, pos, i, j, s1, s2, line_no), label in zip(rows, labels)
    ]


def read_wic_split(data_dir: Union[str, Path], split: str) -> List[WicExample]:
    """Read `<data_dir>/<split>/<split>.data.txt` with its gold file when present."""
    folder = Path(data_dir) / split
    gold = folder / f"{split}.gold.txt"
    return read_wic(folder / f"{split}.data.txt", gold if gold.is_file() else None)


def wic_pair_doc(nlp: Language, example: WicExample) -> Doc:
    """The pair Doc of a WiC example with its two targets in `doc.spans["sense_pair"]`."""
    doc = make_pair_doc(nlp, example.sentence1, example.sentence2)
    b_start = doc[doc._.get(PAIR_ATTR)].idx
    (s1, e1), (s2, e2) = example.char_span1, example.char_span2
    doc.spans[SENSE_PAIR_KEY] = [target_span(doc, (s1, e1)), target_span(doc, (b_start + s2, b_start + e2))]
    return doc


def wic_training_example(nlp: Language, example: WicExample) -> Example:
    """The Example of a labelled WiC pair (see the module docstring)."""
    predicted = wic_pair_doc(nlp, example)
    reference = predicted.copy()
    reference.cats = {SAME_SENSE: float(example.label)}
    return Example(predicted, reference)


def gold_path_of(data_path: Path) -> Path:
    """`x.data.txt` -> `x.gold.txt` (WiC's layout)."""
    name = data_path.name
    if not name.endswith(".data.txt"):
        raise DataFormatError(data_path, None, "a WiC data file is named <split>.data.txt (its labels in <split>.gold.txt)")
    return data_path.with_name(name[: -len(".data.txt")] + ".gold.txt")


@registry.readers("spacy_mlm.WiCCorpus.v1")
def create_wic_corpus_v1(
    path: Path, limit: int = 0, shuffle: bool = False, seed: int = 0
) -> Callable[[Language], Iterator[Example]]:
    """Labelled WiC pairs for `spacy train` (the `mlm_senses` component):
    `path` is a `<split>.data.txt` file, read with the `<split>.gold.txt` beside
    it. `limit` > 0 keeps that many pairs (after a seeded shuffle if `shuffle`)."""
    path = Path(path)

    def read(nlp: Language) -> Iterator[Example]:
        examples = select(read_wic(path, gold_path_of(path)), limit, shuffle, seed)
        require_examples(path, len(examples), "WiC pairs")
        for example in examples:
            yield wic_training_example(nlp, example)

    return read
