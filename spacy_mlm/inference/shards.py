"""A job's output: numbered shards of consecutive records, in input order, each
written atomically (a killed job leaves a hidden temporary file, never a shard
that looks complete), beside a manifest of the job, so that a rerun skips the
shards already written and refuses a directory that holds another job."""
import json
from pathlib import Path
from typing import Dict, Iterable, List, Sequence

import srsly
from spacy.tokens import Doc, DocBin

from ..errors import SpacyMlmError
from ..models.encoding import ENCODING_ATTR
from ..util.io import atomic_write_text
from .records import Record

FORMATS = {"docbin": ".spacy", "jsonl": ".jsonl"}
MANIFEST = "manifest.json"


def check_format(output_format: str) -> None:
    if output_format not in FORMATS:
        raise SpacyMlmError(f"format must be one of {', '.join(FORMATS)}, got {output_format!r}")


def shard_path(output_dir: Path, index: int, output_format: str) -> Path:
    return Path(output_dir) / f"shard-{index:05d}{FORMATS[output_format]}"


def split_shards(records: Sequence[Record], shard_size: int) -> List[List[Record]]:
    if shard_size < 1:
        raise SpacyMlmError(f"shard_size must be >= 1, got {shard_size}")
    return [list(records[i: i + shard_size]) for i in range(0, len(records), shard_size)]


def claim_output_dir(output_dir: Path, job: Dict) -> None:
    """Write the job's manifest, or check that the one there describes the same
    job (a rerun); a different job's directory is refused, so no shard of one
    job is taken for another's."""
    output_dir.mkdir(parents=True, exist_ok=True)
    manifest = output_dir / MANIFEST
    if manifest.exists():
        found = srsly.read_json(manifest)
        if found != job:
            changed = sorted(k for k in set(found) | set(job) if found.get(k) != job.get(k))
            raise SpacyMlmError(
                f"{output_dir} holds the output of another job ({', '.join(changed)} differ): "
                "write to a new directory, or delete this one"
            )
        return
    atomic_write_text(manifest, json.dumps(job, indent=2))


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
