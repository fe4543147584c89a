"""The records a batch-inference job reads: one text per JSONL line (its
`text_key` field) or per non-blank line of a text file, each with its file and
line, so a bad one can be named. Reading is done before any work starts, so a
job that stops on a bad record has written nothing, and one that skips bad
records never hands the pipeline a text it would fail on."""
import codecs
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Tuple, Union

from ..errors import DataFormatError, SpacyMlmError
from ..readers.common import decoded_lines
from ..readers.corpus import JSONL_SUFFIXES, corpus_files, jsonl_text

ON_BAD_RECORD = ("stop", "skip")


@dataclass(frozen=True)
class Record:
    file: str
    line: int
    text: str


@dataclass(frozen=True)
class BadRecord:
    file: str
    line: int
    message: str  # the DataFormatError's: file, line and what is wrong

    def __str__(self) -> str:
        return self.message


def read_records(path: Union[str, Path], text_key: str = "text", on_bad_record: str = "stop",
                 max_length: Optional[int] = None, encoding: str = "utf-8") -> Tuple[List[Record], List[BadRecord]]:
    """Every record of a JSONL or text file, or of every such file below a
    directory (sorted), in order. A bad record (a line that does not decode as
    `encoding`, invalid JSON, no `text_key`, a text that is not a string or is
    longer than `max_length` characters, the pipeline's `nlp.max_length`)
    raises `DataFormatError` with its file and line (`on_bad_record = "stop"`)
    or is left out and listed ("skip")."""
    if on_bad_record not in ON_BAD_RECORD:
        raise SpacyMlmError(f"on_bad_record must be one of {', '.join(ON_BAD_RECORD)}, got {on_bad_record!r}")
    try:
        codecs.lookup(encoding)
    except LookupError:
        raise SpacyMlmError(f"unknown encoding {encoding!r} (Python's names: utf-8, latin-1, cp1252, ...)") from None
    records: List[Record] = []
    bad: List[BadRecord] = []
    for file in corpus_files(path):
        is_jsonl = file.suffix.lower() in JSONL_SUFFIXES
        for number, line in decoded_lines(file, encoding):
            try:
                record = _record(file, number, line, is_jsonl, text_key, max_length)
            except DataFormatError as err:
                if on_bad_record == "stop":
                    raise
                bad.append(BadRecord(str(file), number, str(err)))
            else:
                if record is not None:
                    records.append(record)
    return records, bad


def _record(file: Path, number: int, line: Union[str, DataFormatError], is_jsonl: bool, text_key: str,
            max_length: Optional[int]) -> Optional[Record]:
    """The record of one line (None for a blank line), or its DataFormatError raised."""
    if isinstance(line, DataFormatError):  # the line did not decode
        raise line
    if not line.strip():
        return None
    text = jsonl_text(file, number, line, text_key) if is_jsonl else line
    if max_length is not None and len(text) > max_length:
        raise DataFormatError(file, number, f"the text is {len(text):,} characters long, over the pipeline's "
                                            f"limit of {max_length:,} (nlp.max_length); cut it into shorter records")
    return Record(str(file), number, text)
