"""Raw-text corpora for masked-LM pretraining.

A corpus is a sequence of documents, each a list of segments (lines; a line
longer than `common.MAX_SEGMENT_CHARS` is cut at spaces into segments of at
most that many characters, so tokenizing it takes memory by the corpus's size,
not its longest line's). Two formats:

* plain text (BERT's convention): one segment (ideally a sentence) per line,
  blank lines between documents;
* JSONL: one document per line, a JSON object whose `text_field` holds the text;
  newlines inside the text separate its segments.

Packing uses documents to place separators; next-sentence prediction pairs
adjacent segments of one document.
"""
from pathlib import Path
from typing import Iterator, List, Union

from ..errors import DataFormatError, SettingError
from .common import bounded_segments, iter_lines, parse_json_line

PathLike = Union[str, Path]
Document = List[str]
JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")
TEXT_SUFFIXES = (".txt", ".text", ".raw", ".tokens")


def read_text_documents(path: PathLike) -> Iterator[Document]:
    segments: Document = []
    for _, line in iter_lines(path):
        if line.strip():
            segments.extend(bounded_segments(line))
        elif segments:
            yield segments
            segments = []
    if segments:
        yield segments


def jsonl_text(path: PathLike, number: int, line: str, text_field: str = "text") -> str:
    """The text of one JSONL line (its `text_field`, a string), or a DataFormatError naming the line."""
    record = parse_json_line(path, number, line)
    if text_field not in record:
        fields = ", ".join(sorted(record)) or "none"
        raise DataFormatError(path, number, f"missing field '{text_field}' (fields present: {fields})")
    text = record[text_field]
    if not isinstance(text, str):
        raise DataFormatError(path, number, f"field '{text_field}' must be a string, got {type(text).__name__}")
    return text


def read_jsonl_documents(path: PathLike, text_field: str = "text") -> Iterator[Document]:
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        text = jsonl_text(path, number, line, text_field)
        segments = [piece for part in text.split("\n") for piece in bounded_segments(part)]
        if segments:
            yield segments


def corpus_files(path: PathLike) -> List[Path]:
    """The file itself, or every text/JSONL file below a directory (sorted, so
    the order and hence the training data order is the same on every machine)."""
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise DataFormatError(path, None, "corpus not found (expected a text/JSONL file or a directory of them)")
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in JSONL_SUFFIXES + TEXT_SUFFIXES)
    if not files:
        raise DataFormatError(path, None, f"directory has no corpus files ({', '.join(JSONL_SUFFIXES + TEXT_SUFFIXES)})")
    return files


def read_corpus(path: PathLike, text_field: str = "text", file_format: str = "auto") -> List[Document]:
    """All documents of a file or directory. `file_format`: auto (by suffix), text or jsonl."""
    if file_format not in ("auto", "text", "jsonl"):
        raise SettingError(f"file_format must be auto, text or jsonl, got {file_format!r}")
    documents: List[Document] = []
    for file in corpus_files(path):
        is_jsonl = file_format == "jsonl" or (file_format == "auto" and file.suffix.lower() in JSONL_SUFFIXES)
        documents.extend(read_jsonl_documents(file, text_field) if is_jsonl else read_text_documents(file))
    if not documents:
        raise DataFormatError(path, None, "the corpus contains no text")
    return documents
