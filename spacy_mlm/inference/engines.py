"""Who runs the pipeline over the shards: local processes (`nlp.pipe` with
`n_process`) or a Ray cluster (Ray Data `map_batches` with a class, so each
worker loads the pipeline once and annotates whole shards). Both yield
(shard number, file contents), and the caller writes each shard as it comes."""
from itertools import groupby
from typing import Iterator, List, Optional, Tuple

import numpy

from ..errors import SpacyMlmError
from .records import Record
from .shards import shard_payload

Shard = Tuple[int, List[Record]]


def load_pipeline(pipeline: str, use_gpu: bool = False):
    import spacy

    if use_gpu:
        spacy.require_gpu()
    return spacy.load(pipeline)


def run_local(pipeline: str, shards: List[Shard], output_format: str, workers: int, batch_size: int) -> Iterator[Tuple[int, bytes]]:
    """One `nlp.pipe` over every pending record with `n_process = workers`
    (its order is the input's), cut back into shards."""
    nlp = load_pipeline(pipeline)
    tagged = ((record.text, (number, record)) for number, records in shards for record in records)
    annotated = nlp.pipe(tagged, as_tuples=True, n_process=workers, batch_size=batch_size)
    for number, group in groupby(annotated, key=lambda pair: pair[1][0]):
        docs, records = zip(*((doc, record) for doc, (_, record) in group))
        yield number, shard_payload(docs, records, output_format)


class ShardAnnotator:
    """A Ray Data worker: loads the pipeline once, then turns each row (one shard:
    its number, texts, files and lines) into the shard's file contents."""

    def __init__(self, pipeline: str, output_format: str, batch_size: int, use_gpu: bool):
        self.nlp = load_pipeline(pipeline, use_gpu)
        self.output_format, self.batch_size = output_format, batch_size

    def __call__(self, batch):
        payloads = []
        for texts, files, lines in zip(batch["texts"], batch["files"], batch["lines"]):
            records = [Record(str(f), int(n), str(t)) for t, f, n in zip(texts, files, lines)]
            docs = self.nlp.pipe([r.text for r in records], batch_size=self.batch_size)
            payloads.append(shard_payload(docs, records, self.output_format))
        return {"shard": numpy.asarray(batch["shard"]), "payload": numpy.asarray(payloads, dtype=object)}


def run_ray(pipeline: str, shards: List[Shard], output_format: str, workers: int, batch_size: int,
            address: Optional[str], gpus_per_worker: float) -> Iterator[Tuple[int, bytes]]:
    """Each shard a row of a Ray dataset, annotated by `workers` ShardAnnotator
    actors (each with `gpus_per_worker` GPUs); connects to the cluster at
    `address` (None: the running or a new local Ray)."""
    try:
        import ray
    except ImportError:
        raise SpacyMlmError("--engine ray needs Ray: pip install spacy-mlm[ray]") from None
    if not ray.is_initialized():
        ray.init(address=address, log_to_driver=False)
    rows = [{"shard": number, "texts": [r.text for r in records], "files": [r.file for r in records],
             "lines": [r.line for r in records]} for number, records in shards]
    dataset = ray.data.from_items(rows, override_num_blocks=max(1, len(rows))).map_batches(
        ShardAnnotator,
        fn_constructor_kwargs={"pipeline": pipeline, "output_format": output_format, "batch_size": batch_size,
                               "use_gpu": gpus_per_worker > 0},
        batch_size=1, compute=ray.data.ActorPoolStrategy(size=workers), num_gpus=gpus_per_worker, num_cpus=1,
        batch_format="numpy",
    )
    for row in dataset.iter_rows():
        yield int(row["shard"]), bytes(row["payload"])
