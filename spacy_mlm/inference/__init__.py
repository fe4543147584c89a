"""Batch inference: a saved pipeline over JSONL/text files, on local processes
or a Ray cluster, written as DocBin or JSONL shards in input order
(`apply_pipeline`, `python -m spacy_mlm apply`)."""
import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Union

from ..errors import SpacyMlmError
from ..readers.corpus import corpus_files
from ..util.outputs import check_output, claim_output, mark_output
from ..util.progress import Progress
from .annotation import pipeline_max_length
from .engines import run_local, run_ray
from .manifest import MANIFEST, claim_output_dir, describe_job
from .records import BadRecord, read_records
from .shards import check_format, shard_path, shard_state, split_shards, write_shard

ENGINES = ("local", "ray")


@dataclass
class ApplySummary:
    shards: int  # in the job
    written: int  # shards written by this run
    skipped: int  # shards a previous run had written
    records: int  # records annotated by this run
    bad_records: List[BadRecord] = field(default_factory=list)
    damaged: List[str] = field(default_factory=list)  # shards that no longer matched their checksum, redone


def apply_pipeline(
    pipeline: Union[str, Path],
    input_path: Union[str, Path],
    output_dir: Union[str, Path],
    *,
    engine: str = "local",
    workers: int = 1,
    batch_size: int = 64,
    shard_size: int = 1000,
    output_format: str = "docbin",
    on_bad_record: str = "stop",
    text_key: str = "text",
    address: Optional[str] = None,
    gpus_per_worker: float = 0.0,
    quiet: bool = False,
    force: bool = False,
    encoding: str = "utf-8",
) -> ApplySummary:
    """Annotate every record of `input_path` (a JSONL or text file, or a directory
    of them) with the saved `pipeline` and write `output_dir/shard-NNNNN.spacy`
    (DocBin with user data) or `.jsonl` (file, line, text, ents, cats): `shard_size`
    consecutive records each, in input order, each written atomically with its
    checksum. A rerun of the same job (same settings, same contents of every
    input file and pipeline file: `manifest.json`) annotates only the shards
    not yet written or no longer matching their checksum.

    engine: "local" (this process, or `workers` worker processes) or "ray" (Ray
        Data, `workers` actors with `gpus_per_worker` GPUs each, on the cluster
        at `address`, or the running / a new local Ray). A worker that dies
        ends the job with an error naming it (`WorkerFailed`).
    on_bad_record: "stop" raises on the first bad record (file and line: a line
        not in `encoding`, invalid JSON, no string text, a text over the
        pipeline's `nlp.max_length`) before anything is written; "skip" leaves
        bad records out and lists them.
    force: write into an existing `output_dir` that is not an earlier output
        of apply (`claim_output`), or that holds another job's shards, which are
        removed (the job starts over); an output that is or lies in an input is
        refused all the same."""
    if engine not in ENGINES:
        raise SpacyMlmError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    check_format(output_format)
    for name, value in (("workers", workers), ("batch_size", batch_size)):
        if value < 1:
            raise SpacyMlmError(f"{name} must be >= 1, got {value}")
    if gpus_per_worker < 0 or (gpus_per_worker and engine != "ray"):
        raise SpacyMlmError(f"gpus_per_worker must be >= 0 and needs engine ray, got {gpus_per_worker} with {engine!r}")
    pipeline, input_path, output_dir = Path(pipeline).resolve(), Path(input_path).resolve(), Path(output_dir)
    # apply adds shards to its output, never replaces it: an input inside it stays
    checks = dict(directory=True, inputs=[pipeline, input_path], replaces_whole=False, force=force,
                  recognise=lambda path: (path / MANIFEST).is_file())
    check_output(output_dir, "apply", **checks)  # before any work; again under the lock
    records, bad = read_records(input_path, text_key, on_bad_record, pipeline_max_length(str(pipeline)), encoding)
    shards = split_shards(records, shard_size)
    job = describe_job(pipeline, input_path, corpus_files(input_path), records=len(records), shard_size=shard_size,
                       format=output_format, text_key=text_key, encoding=encoding)
    with claim_output(output_dir, "apply", **checks):
        claim_output_dir(output_dir, job, force)
        mark_output(output_dir, "apply")  # now: a killed run's shards are apply's to resume
        states = {n: shard_state(shard_path(output_dir, n, output_format)) for n in range(len(shards))}
        pending = [(n, shard) for n, shard in enumerate(shards) if states[n] != "done"]
        damaged = [shard_path(output_dir, n, output_format).name for n in states if states[n] == "damaged"]
        summary = ApplySummary(len(shards), 0, len(shards) - len(pending), 0, bad, damaged)
        if not pending:
            return summary
        sizes = {n: len(shard) for n, shard in pending}
        if engine == "ray":
            results = run_ray(str(pipeline), pending, output_format, workers, batch_size, address, gpus_per_worker)
        else:
            results = run_local(str(pipeline), pending, output_format, workers, batch_size)
        done_before = len(records) - sum(sizes.values())
        with Progress(len(records), "apply", "records", initial=done_before, quiet=quiet) as progress, \
                contextlib.closing(results):  # ends the workers when writing fails too
            for number, payload in results:
                write_shard(shard_path(output_dir, number, output_format), payload)
                summary.written += 1
                summary.records += sizes[number]
                progress.update(sizes[number])
        return summary
