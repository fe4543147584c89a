"""The records a batch-inference job reads: one text per JSONL line (its
`text_key` field) or per non-blank line of a text file, each with its file and
line, so a bad one can be named. Reading is done before any work starts, so a
job that stops on a bad record has written nothing."""
from dataclasses import dataclass
from pathlib import Path
from typing import List, Tuple, Union

from ..errors import DataFormatError, SpacyMlmError
from ..readers.common import iter_lines
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


def read_records(path: Union[str, Path], text_key: str = "text", on_bad_record: str = "stop") -> Tuple[List[Record], List[BadRecord]]:
    """Every record of a JSONL or text file, or of every such file below a
    directory (sorted), in order. A bad record (invalid JSON, no `text_key`, a
    text that is not a string) raises `DataFormatError` with its file and line
    (`on_bad_record = "stop"`) or is left out and listed ("skip")."""
    if on_bad_record not in ON_BAD_RECORD:
        raise SpacyMlmError(f"on_bad_record must be one of {', '.join(ON_BAD_RECORD)}, got {on_bad_record!r}")
    records: List[Record] = []
    bad: List[BadRecord] = []
    for file in corpus_files(path):
        is_jsonl = file.suffix.lower() in JSONL_SUFFIXES
        for number, line in iter_lines(file):
            if not line.strip():
                continue
            try:
                records.append(Record(str(file), number, jsonl_text(file, number, line, text_key) if is_jsonl else line))
            except DataFormatError as err:
                if on_bad_record == "stop":
                    raise
                bad.append(BadRecord(str(file), number, str(err)))
    return records, bad
