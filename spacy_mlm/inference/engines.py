"""Who runs the pipeline over the shards: this process (one worker), local
worker processes (`workers.LocalWorkers`) or a Ray cluster (Ray Data
`map_batches` with a class, so each worker loads the pipeline once and
annotates whole shards). Each yields (shard number, file contents) in shard
order, and the caller writes each shard as it comes; a worker that dies ends
the job with an error naming it."""
from typing import Iterator, List, Optional, Tuple

import numpy

from ..errors import SpacyMlmError
from .annotation import annotate_shard, load_pipeline
from .records import Record
from .workers import LocalWorkers, WorkerFailed

Shard = Tuple[int, List[Record]]


def run_local(pipeline: str, shards: List[Shard], output_format: str, workers: int, batch_size: int) -> Iterator[Tuple[int, bytes]]:
    """The shards annotated in this process (`workers` = 1) or by `workers` processes."""
    if workers == 1:
        nlp = load_pipeline(pipeline)
        for number, records in shards:
            yield number, annotate_shard(nlp, records, output_format, batch_size)
        return
    with LocalWorkers(pipeline, output_format, batch_size, workers) as pool:
        yield from pool.annotate(shards)


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
            payloads.append(annotate_shard(self.nlp, records, self.output_format, self.batch_size))
        return {"shard": numpy.asarray(batch["shard"]), "payload": numpy.asarray(payloads, dtype=object)}


def run_ray(pipeline: str, shards: List[Shard], output_format: str, workers: int, batch_size: int,
            address: Optional[str], gpus_per_worker: float) -> Iterator[Tuple[int, bytes]]:
    """Each shard a row of a Ray dataset, annotated by `workers` ShardAnnotator
    actors (each with `gpus_per_worker` GPUs); connects to the cluster at
    `address` (None: the running or a new local Ray). An actor is not restarted
    (Ray Data's default restarts it and retries its shard without end): its
    death ends the job with Ray's account of it, as a local worker's does."""
    try:
        import ray
    except ImportError:
        raise SpacyMlmError("--engine ray needs Ray: pip install spacy-mlm[ray]") from None
    if not ray.is_initialized():
        ray.init(address=address, log_to_driver=False)
    rows = [{"shard": number, "texts": [r.text for r in records], "files": [r.file for r in records],
             "lines": [r.line for r in records]} for number, records in shards]
    # max_restarts=0 goes to Ray as an extra remote argument, which Ray 2.60 deprecates without a named
    # parameter for it yet (it warns so); setup.py keeps Ray below 2.64, where it is to go
    dataset = ray.data.from_items(rows, override_num_blocks=max(1, len(rows))).map_batches(
        ShardAnnotator,
        fn_constructor_kwargs={"pipeline": pipeline, "output_format": output_format, "batch_size": batch_size,
                               "use_gpu": gpus_per_worker > 0},
        batch_size=1, compute=ray.data.ActorPoolStrategy(size=workers), num_gpus=gpus_per_worker, num_cpus=1,
        batch_format="numpy", max_restarts=0,
    )
    try:
        for row in dataset.iter_rows():
            yield int(row["shard"]), bytes(row["payload"])
    except ray.exceptions.RayError as err:
        account = " ".join(str(err).split())  # Ray's: which actor, its pid and node, how it ended
        raise WorkerFailed(f"a Ray worker failed: {account}. The shards written so far are whole: rerun the same "
                           "command to annotate the rest") from err
