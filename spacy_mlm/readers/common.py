"""Shared plumbing for the line-based data readers: numbered lines with a clear
error for undecodable files, JSON lines, and a reproducible subsample.

Every reader reports problems as `DataFormatError(path, line, message)` so a bad
row in a 60k-line file can be found without a debugger."""
import codecs
import json
import random
import re
from abc import ABC, abstractmethod
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, TypeVar, Union

from ..errors import DataError, DataFormatError

T = TypeVar("T")
PathLike = Union[str, Path]


# Byte-order marks of encodings whose lines cannot be split at b"\n" byte by byte.
WIDE_BOMS = {codecs.BOM_UTF32_LE: "UTF-32", codecs.BOM_UTF32_BE: "UTF-32",
             codecs.BOM_UTF16_LE: "UTF-16", codecs.BOM_UTF16_BE: "UTF-16"}


def iter_lines(path: PathLike, encoding: str = "utf-8") -> Iterator[Tuple[int, str]]:
    """(1-based line number, line without its line ending) for each line.
    CRLF files (SICK test, SST-2 test) read the same as LF files. A UTF-8
    byte-order mark (Windows editors write one) is not part of the first line:
    kept, it would glue itself to the first word (a `\ufeff-DOCSTART-` read as a
    token, a JSON line that does not parse). A UTF-16/32 file is named as such."""
    for number, line in decoded_lines(path, encoding):
        if isinstance(line, DataFormatError):
            raise line
        yield number, line


def decoded_lines(path: PathLike, encoding: str = "utf-8") -> Iterator[Tuple[int, Union[str, DataFormatError]]]:
    """`iter_lines`, but a line that does not decode comes as its
    DataFormatError instead of being raised, so that a reader that skips bad
    records goes on past it."""
    path = Path(path)
    if not path.is_file():
        raise DataFormatError(path, None, "file not found")
    with path.open("rb") as f:
        for number, raw in enumerate(f, start=1):
            if number == 1:
                wide = next((name for bom, name in WIDE_BOMS.items() if raw.startswith(bom)), None)
                if wide:
                    raise DataFormatError(path, 1, f"is {wide} (byte-order mark); convert it to UTF-8")
            try:
                text = raw.decode(encoding)
            except UnicodeDecodeError as err:
                yield number, DataFormatError(
                    path, number, f"cannot decode as {encoding} ({err.reason}); pass the file's encoding"
                )
                continue
            if number == 1:
                text = text.removeprefix("\ufeff")
            yield number, text.rstrip("\r\n")


def tsv_header(path: PathLike, encoding: str = "utf-8") -> Optional[Tuple[int, List[str], Iterator[Tuple[int, str]]]]:
    """A TSV file's first line (its number and its tab-separated fields) and
    the lines after it (`iter_lines`); None for a file without lines."""
    lines = iter_lines(path, encoding)
    first = next(lines, None)
    if first is None:
        return None
    number, line = first
    return number, line.split("\t"), lines


# The longest segment a corpus reader hands to a tokenizer, in characters. A
# tokenizer holds offsets, word ids and more per piece of its input: a 1.8 MB
# line took 262 MB to tokenize, the same text in lines 35 MB.
MAX_SEGMENT_CHARS = 10_000


def bounded_segments(text: str, limit: int = MAX_SEGMENT_CHARS) -> List[str]:
    """`text` (stripped) cut into pieces of at most `limit` characters, each at
    the last whitespace before the limit (mid-word only where a "word" is
    longer than the limit); a text that fits comes back whole, so the pieces a
    tokenizer makes of it do not change."""
    text = text.strip()
    pieces = []
    while len(text) > limit:
        cut = max(text.rfind(" ", 0, limit + 1), text.rfind("\t", 0, limit + 1))
        cut = cut if cut > 0 else limit
        pieces.append(text[:cut].rstrip())
        text = text[cut:].lstrip()
    return pieces + [text] if text else pieces


# a \uD800-\uDFFF escape: JSON allows one alone, Unicode text does not
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def parse_json_line(path: PathLike, number: int, line: str) -> Dict[str, Any]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as err:
        raise DataFormatError(path, number, f"invalid JSON: {err.msg} (column {err.colno})") from None
    if not isinstance(record, dict):
        raise DataFormatError(path, number, f"expected a JSON object, got {type(record).__name__}")
    if SURROGATE_ESCAPE.search(line):  # a pair (an emoji written as two escapes) is fine
        try:
            json.dumps(record, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as err:
            raise DataFormatError(
                path, number, f"holds a lone surrogate {err.object[err.start:err.end]!r} (a half of a \\u escape "
                "pair), which is not text: spaCy's tokenizer would fail on it; fix or drop the line"
            ) from None
    return record


def split_tsv(path: PathLike, number: int, line: str, n_columns: int) -> List[str]:
    """GLUE-style TSV: no quoting (MultiNLI text contains bare quote characters),
    so a plain split on tabs is the faithful parse."""
    fields = line.split("\t")
    if len(fields) != n_columns:
        raise DataFormatError(path, number, f"expected {n_columns} tab-separated columns, found {len(fields)}")
    return fields


def find_column(header: Sequence[str], candidates: Sequence[str]) -> Optional[int]:
    """Index of the first of `candidates` present in `header` (case-insensitive)."""
    lowered = [name.strip().lower() for name in header]
    for name in candidates:
        if name.lower() in lowered:
            return lowered.index(name.lower())
    return None


def select(items: Sequence[T], limit: int = 0, shuffle: bool = False, seed: int = 0) -> List[T]:
    """The first `limit` items (0 = all), after a seeded shuffle if asked. Used
    to subsample large training files the same way for every system compared."""
    chosen = list(items)
    if shuffle:
        random.Random(seed).shuffle(chosen)
    if limit and limit > 0:
        chosen = chosen[:limit]
    return chosen


def format_skipped(skipped: Mapping[str, int]) -> str:
    """'1 empty text, 2 unlabeled' (sorted by reason), or 'none'."""
    return ", ".join(f"{n} {reason}" for reason, n in sorted(skipped.items())) or "none"


def require_examples(path: PathLike, n_examples: int, what: str, skipped: Optional[Mapping[str, int]] = None) -> None:
    """Raise a DataFormatError naming `path` if it yielded no examples.

    A training or dev corpus without examples is almost always a wrong path,
    the wrong column or a file of unlabeled rows. Left alone, the first complaint
    comes much later from a component ("found no entity labels") or not at all
    (an empty dev set), and never says which file it was. `skipped` (reason ->
    count) says what the file held instead."""
    if n_examples:
        return
    if skipped:
        found = f"every row was skipped ({format_skipped(skipped)})"
    else:
        found = "the file is empty or has only blank and header lines"
    raise DataFormatError(path, None, f"no {what}: {found}")


@dataclass
class LabeledData:
    """A labeled file as read: its examples (in file order), its label set and
    what was skipped (reason -> count)."""

    path: Path
    examples: List[Any]
    labels: Tuple[str, ...]
    skipped: Counter = field(default_factory=Counter)


class LabeledFileCorpus(ABC):
    """A spaCy corpus over one labeled file (a reader's `read`), parsed once, on
    first use, and checked to hold examples (`require_examples`); `examples()`
    are the ones chosen by `limit` / `shuffle` / `seed` (`select`). Subclasses
    say what an example is (`what`), how the file is read (`_read`) and how an
    Example is made (`__call__`)."""

    what = "examples"

    def __init__(self, path: PathLike, *, limit: int = 0, shuffle: bool = False, seed: int = 0):
        self.path = Path(path)
        self.limit, self.shuffle, self.seed = limit, shuffle, seed
        self._data = None

    @abstractmethod
    def _read(self) -> LabeledData:
        """The file's parsed data."""

    @property
    def data(self):
        if self._data is None:
            data = self._read()
            require_examples(self.path, len(data.examples), self.what, data.skipped)
            self._data = data
        return self._data

    def examples(self) -> List[Any]:
        return select(self.data.examples, self.limit, self.shuffle, self.seed)


def one_hot_cats(gold: Sequence[str], labels: Sequence[str]) -> Dict[str, float]:
    """doc.cats for a gold label set: 1.0 for gold labels, 0.0 for every other
    label, so a multi-label learner sees explicit negatives rather than missing values."""
    unknown = set(gold) - set(labels)
    if unknown:
        raise DataError(f"labels {sorted(unknown)} are not in the label set {list(labels)}")
    return {label: 1.0 if label in gold else 0.0 for label in labels}
