"""A job's output: numbered shards of consecutive records, in input order, each
written atomically (a killed job leaves a hidden temporary file, never a shard
that looks complete) and followed by its checksum (`shard-NNNNN.spacy.sha256`,
in `sha256sum` format), so that a rerun takes a shard as done only if it is
still what was written: one cut short, edited or left without its checksum by a
kill between the two writes is annotated again."""
import hashlib
import json
from pathlib import Path
from typing import Iterable, List, Sequence

from spacy.tokens import Doc, DocBin

from ..errors import SpacyMlmError
from ..models.encoding import ENCODING_ATTR
from ..util.io import atomic_write_bytes, atomic_write_text
from .records import Record

FORMATS = {"docbin": ".spacy", "jsonl": ".jsonl"}
CHECKSUM_SUFFIX = ".sha256"


def check_format(output_format: str) -> None:
    if output_format not in FORMATS:
        raise SpacyMlmError(f"format must be one of {', '.join(FORMATS)}, got {output_format!r}")


def shard_path(output_dir: Path, index: int, output_format: str) -> Path:
    return Path(output_dir) / f"shard-{index:05d}{FORMATS[output_format]}"


def checksum_path(shard: Path) -> Path:
    return shard.with_name(shard.name + CHECKSUM_SUFFIX)


def file_sha256(path: Path) -> str:
    """The hex sha256 of a file's contents, read in blocks (a shard or an input can be large)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def split_shards(records: Sequence[Record], shard_size: int) -> List[List[Record]]:
    if shard_size < 1:
        raise SpacyMlmError(f"shard_size must be >= 1, got {shard_size}")
    return [list(records[i: i + shard_size]) for i in range(0, len(records), shard_size)]


def write_shard(path: Path, payload: bytes) -> None:
    """The shard, then its checksum: a shard without one is not done."""
    atomic_write_bytes(path, payload)
    atomic_write_text(checksum_path(path), f"{hashlib.sha256(payload).hexdigest()}  {path.name}\n")


def shard_state(path: Path) -> str:
    """"done" (the shard matches the checksum written with it), "missing" (no
    shard, or no checksum: killed before it was finished) or "damaged" (the
    shard's contents are no longer the ones written)."""
    try:
        recorded = checksum_path(path).read_text(encoding="utf8").split()[0]
    except (OSError, IndexError, UnicodeDecodeError):
        return "missing"
    if not path.is_file():
        return "missing"
    return "done" if file_sha256(path) == recorded else "damaged"


def shard_files(output_dir: Path) -> List[Path]:
    """Every shard and checksum file in `output_dir`, of either format."""
    return sorted(p for p in Path(output_dir).glob("shard-*") if p.is_file())


def shard_payload(docs: Iterable[Doc], records: Sequence[Record], output_format: str) -> bytes:
    """One shard's file contents: a DocBin with every annotation in user data
    except the encoder's hidden states, or JSONL of each record's file, line,
    text, entities (character offsets) and cats."""
    docs = list(docs)
    if output_format == "docbin":
        for doc in docs:
            if Doc.has_extension(ENCODING_ATTR):
                doc._.set(ENCODING_ATTR, None)
        return DocBin(docs=docs, store_user_data=True).to_bytes()
    lines = [
        json.dumps({"file": r.file, "line": r.line, "text": doc.text,
                    "ents": [[e.start_char, e.end_char, e.label_] for e in doc.ents], "cats": doc.cats},
                   ensure_ascii=False)
        for doc, r in zip(docs, records)
    ]
    return ("\n".join(lines) + "\n").encode("utf8")
