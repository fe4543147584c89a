"""Text-classification data: TSV with a header (SST-2/GLUE style), header-less
CSV with the label first (AG News), TREC question files and JSON lines (single-
or multi-label).

Formats (`format = "auto"` picks by file suffix):
  tsv    `.tsv`/`.txt`: a header row; text column `sentence` or `text` (or
         `text_column`), label column `label` (or `label_column`).
  csv    `.csv`: no header; first field the label, the other fields the text,
         joined by a space (AG News: class, title, description).
  trec   `.label`: `COARSE:fine question ...`; the label is the coarse class or,
         with `trec_granularity = "fine"`, `COARSE:fine`. Read as ISO-8859-1
         by default, which `train_5500.label` needs.
  jsonl  `.jsonl`/`.json`: `text` (or `sentence`) and one of `label` (a name or
         a list), `labels` (a list) or `cats` (a dict; values >= 0.5 are gold).

Raw labels can be renamed with `label_names` (a dict, e.g. SST-2's
{"0": "negative", "1": "positive"}) or `label_names_file` (one name per line,
naming raw labels "1", "2", ... as AG News' classes.txt does).
"""
import csv
import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Tuple

from spacy.language import Language
from spacy.training import Example
from spacy.util import registry

from ..errors import DataFormatError, SettingError
from .common import (
    LabeledData, LabeledFileCorpus, PathLike, find_column, format_skipped, iter_lines, one_hot_cats, parse_json_line,
    split_tsv, tsv_header,
)

logger = logging.getLogger(__name__)

FORMATS = ("auto", "tsv", "csv", "trec", "jsonl")
_SUFFIX_FORMATS = {".tsv": "tsv", ".txt": "tsv", ".csv": "csv", ".label": "trec", ".jsonl": "jsonl", ".json": "jsonl"}
_DEFAULT_ENCODING = {"trec": "iso-8859-1"}
TEXT_COLUMNS = ("sentence", "text")
LABEL_COLUMNS = ("label",)


@dataclass(frozen=True)
class TextExample:
    text: str
    labels: Tuple[str, ...]
    line: int


class TextCatData(LabeledData):

    @property
    def multi_label(self) -> bool:
        return any(len(eg.labels) != 1 for eg in self.examples)

    def summary(self) -> str:
        counts = Counter(label for eg in self.examples for label in eg.labels)
        parts = ", ".join(f"{label} {counts[label]}" for label in self.labels)
        return f"{self.path}: {len(self.examples)} texts ({parts}); skipped: {format_skipped(self.skipped)}"


def resolve_format(path: Path, format: str) -> str:
    if format not in FORMATS:
        raise SettingError(f"unknown format {format!r}: expected one of {', '.join(FORMATS)}")
    if format != "auto":
        return format
    try:
        return _SUFFIX_FORMATS[path.suffix.lower()]
    except KeyError:
        raise DataFormatError(
            path, None, f"cannot tell the format from the suffix {path.suffix!r}; set format to one of "
            f"{', '.join(FORMATS[1:])}"
        ) from None


def _tsv_rows(path: Path, encoding: str, text_column: Optional[str], label_column: Optional[str]):
    start = tsv_header(path, encoding)
    if start is None:
        return
    number, header, lines = start
    text_at = find_column(header, [text_column] if text_column else TEXT_COLUMNS)
    label_at = find_column(header, [label_column] if label_column else LABEL_COLUMNS)
    if text_at is None or label_at is None:
        raise DataFormatError(
            path, number,
            f"header {header} needs a text column ({text_column or ' or '.join(TEXT_COLUMNS)}) and a label "
            f"column ({label_column or ' or '.join(LABEL_COLUMNS)})",
        )
    for number, line in lines:
        if not line.strip():
            continue
        fields = split_tsv(path, number, line, len(header))
        label = fields[label_at].strip()
        yield number, fields[text_at], [label] if label else []


def _csv_rows(path: Path, encoding: str):
    reader = csv.reader(line for _, line in iter_lines(path, encoding))
    for fields in reader:
        number = reader.line_num
        if not fields:
            continue
        if len(fields) < 2:
            raise DataFormatError(path, number, "expected a label field followed by at least one text field")
        label = fields[0].strip()
        yield number, " ".join(part.strip() for part in fields[1:] if part.strip()), [label] if label else []


def _trec_rows(path: Path, encoding: str, granularity: str):
    if granularity not in ("coarse", "fine"):
        raise SettingError(f"trec_granularity must be 'coarse' or 'fine', not {granularity!r}")
    for number, line in iter_lines(path, encoding):
        if not line.strip():
            continue
        label, _, text = line.partition(" ")
        coarse, colon, _fine = label.partition(":")
        if not colon or not coarse:
            raise DataFormatError(path, number, f"expected 'COARSE:fine question', found {line[:40]!r}")
        yield number, text, [coarse if granularity == "coarse" else label]


def _json_labels(path: Path, number: int, record: dict) -> List[str]:
    if "cats" in record:
        cats = record["cats"]
        if not isinstance(cats, dict):
            raise DataFormatError(path, number, "'cats' must be an object of label: score")
        return [str(k) for k, v in cats.items() if float(v) >= 0.5]
    value = record.get("labels", record.get("label"))
    if value is None:
        raise DataFormatError(path, number, f"needs a 'label', 'labels' or 'cats' key, found {', '.join(record)}")
    values = value if isinstance(value, list) else [value]
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (str, int)):
            raise DataFormatError(path, number, f"labels must be names or integers, got {v!r}")
    return [str(v).strip() for v in values if str(v).strip()]


def _jsonl_rows(path: Path, encoding: str, text_column: Optional[str]):
    keys = [text_column] if text_column else TEXT_COLUMNS
    for number, line in iter_lines(path, encoding):
        if not line.strip():
            continue
        record = parse_json_line(path, number, line)
        text_key = next((k for k in keys if k in record), None)
        if text_key is None or not isinstance(record[text_key], str):
            raise DataFormatError(path, number, f"needs a string {' or '.join(keys)!r} field")
        yield number, record[text_key], _json_labels(path, number, record)


def _label_mapping(path: Path, label_names: Optional[Dict[str, str]],
                   label_names_file: Optional[PathLike]) -> Optional[Dict[str, str]]:
    if label_names and label_names_file:
        raise SettingError("give label_names or label_names_file, not both")
    if label_names_file:
        names = [line.strip() for _, line in iter_lines(label_names_file) if line.strip()]
        return {str(i): name for i, name in enumerate(names, start=1)}
    if label_names:
        return {str(k): str(v) for k, v in label_names.items()}
    return None


def read_textcat(
    path: PathLike,
    format: str = "auto",
    *,
    text_column: Optional[str] = None,
    label_column: Optional[str] = None,
    label_names: Optional[Dict[str, str]] = None,
    label_names_file: Optional[PathLike] = None,
    trec_granularity: str = "coarse",
    encoding: Optional[str] = None,
) -> TextCatData:
    """All labeled texts of a file. Rows with no label or no text are skipped and
    counted in `TextCatData.skipped`; everything else malformed is an error."""
    path = Path(path)
    fmt = resolve_format(path, format)
    encoding = encoding or _DEFAULT_ENCODING.get(fmt, "utf-8")
    if fmt == "tsv":
        rows = _tsv_rows(path, encoding, text_column, label_column)
    elif fmt == "csv":
        rows = _csv_rows(path, encoding)
    elif fmt == "trec":
        rows = _trec_rows(path, encoding, trec_granularity)
    else:
        rows = _jsonl_rows(path, encoding, text_column)
    mapping = _label_mapping(path, label_names, label_names_file)
    examples: List[TextExample] = []
    skipped: Counter = Counter()
    for number, text, raw_labels in rows:
        if not raw_labels:
            skipped["unlabeled"] += 1
            continue
        if not text.strip():
            skipped["empty text"] += 1
            continue
        if mapping is not None:
            unknown = [label for label in raw_labels if label not in mapping]
            if unknown:
                raise DataFormatError(path, number, f"label {unknown[0]!r} has no name in {sorted(mapping)}")
            raw_labels = [mapping[label] for label in raw_labels]
        examples.append(TextExample(text.strip(), tuple(dict.fromkeys(raw_labels)), number))
    seen = {label for eg in examples for label in eg.labels}
    if mapping is not None:
        labels = tuple(dict.fromkeys(mapping.values()))
    else:
        labels = tuple(sorted(seen))
    data = TextCatData(path, examples, labels, skipped)
    (logger.warning if skipped else logger.info)("%s", data.summary())
    return data


class TextCatCorpus(LabeledFileCorpus):
    """Yields one Example per labeled text, with one-hot (or multi-hot) `cats`
    over the file's label set. The file is parsed once, on first use; a file
    without labeled texts is a DataFormatError naming it."""

    what = "labeled texts"

    def __init__(self, path: PathLike, *, limit: int = 0, shuffle: bool = False, seed: int = 0, **read_options):
        super().__init__(path, limit=limit, shuffle=shuffle, seed=seed)
        self.read_options = read_options

    def _read(self) -> TextCatData:
        return read_textcat(self.path, **self.read_options)

    def __call__(self, nlp: Language) -> Iterator[Example]:
        labels = self.data.labels
        for eg in self.examples():
            doc = nlp.make_doc(eg.text)
            reference = doc.copy()
            reference.cats = one_hot_cats(eg.labels, labels)
            yield Example(doc, reference)


@registry.readers("spacy_mlm.TextCatCorpus.v1")
def create_textcat_corpus_v1(
    path: Path,
    format: str = "auto",
    text_column: Optional[str] = None,
    label_column: Optional[str] = None,
    label_names: Optional[Dict[str, str]] = None,
    label_names_file: Optional[Path] = None,
    trec_granularity: str = "coarse",
    encoding: Optional[str] = None,
    limit: int = 0,
    shuffle: bool = False,
    seed: int = 0,
) -> Callable[[Language], Iterator[Example]]:
    """Text-classification corpus for `spacy train`; see the module docstring for
    formats. `limit` > 0 keeps that many texts (after a seeded shuffle if `shuffle`)."""
    if format not in FORMATS:
        raise SettingError(f"unknown format {format!r}: expected one of {', '.join(FORMATS)}")
    return TextCatCorpus(
        path, limit=limit, shuffle=shuffle, seed=seed, format=format, text_column=text_column,
        label_column=label_column, label_names=label_names, label_names_file=label_names_file,
        trec_granularity=trec_granularity, encoding=encoding,
    )
