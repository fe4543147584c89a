"""What every engine does with a shard: load the saved pipeline once, then turn
a shard's records into its file contents. Also the pipeline's text-length limit,
which the driver needs before reading records (a text over it is a bad record)."""
from pathlib import Path
from typing import Sequence

import spacy

from .records import Record
from .shards import shard_payload


def load_pipeline(pipeline: str, use_gpu: bool = False):
    if use_gpu:
        spacy.require_gpu()
    return spacy.load(pipeline)


def pipeline_max_length(pipeline: str) -> int:
    """`nlp.max_length` of the saved pipeline, which spaCy enforces on every
    text (E088). The pipeline is loaded without its components (cheap), so that
    a callback of its config that changes the limit is counted."""
    components = spacy.util.load_config(Path(pipeline) / "config.cfg").get("nlp", {}).get("pipeline", [])
    return spacy.load(pipeline, exclude=list(components)).max_length


def annotate_shard(nlp, records: Sequence[Record], output_format: str, batch_size: int) -> bytes:
    """One shard's file contents: its records' texts through `nlp.pipe`."""
    return shard_payload(nlp.pipe([r.text for r in records], batch_size=batch_size), records, output_format)
