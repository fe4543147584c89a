"""`spacy_mlm apply`: a saved pipeline over JSONL/text files, on local processes
or a Ray cluster, written as DocBin or JSONL shards (see `spacy_mlm.inference`)."""
from pathlib import Path
from typing import Optional

import typer

from . import app
from .options import force_option, quiet_option

SHOWN_BAD_RECORDS = 10


@app.command("apply", short_help="Run a pipeline over files, on local processes or a Ray cluster.")
def apply_cli(
    pipeline: Path = typer.Argument(..., help="saved spaCy pipeline"),
    input_path: Path = typer.Argument(..., help="JSONL (one record a line) or text (one record a non-blank line) file, or a folder of them"),
    output_dir: Path = typer.Argument(..., help="folder of shards (shard-NNNNN.spacy or .jsonl) and the job's manifest"),
    engine: str = typer.Option("local", help="local (--workers processes on this machine) or ray"),
    address: Optional[str] = typer.Option(None, help="Ray cluster address (ray engine; default: a running or a new local Ray)"),
    workers: int = typer.Option(1, help="worker processes (local) or Ray actors, each loading the pipeline once"),
    gpus_per_worker: float = typer.Option(0.0, help="GPUs per Ray actor (ray engine)"),
    batch_size: int = typer.Option(64, help="docs per nlp.pipe batch"),
    shard_size: int = typer.Option(1000, help="records per output shard"),
    output_format: str = typer.Option("docbin", "--format", help="docbin (every annotation but the hidden states) or jsonl (file, line, text, ents, cats)"),
    on_bad_record: str = typer.Option("stop", help="stop (before writing anything) or skip (and count) a record that does not decode, is not valid JSON, has no string text or is longer than the pipeline's nlp.max_length"),
    text_key: str = typer.Option("text", help="JSONL field holding the text"),
    encoding: str = typer.Option("utf-8", help="encoding of the input files (a line that does not decode is a bad record)"),
    quiet: bool = quiet_option(),
    force: bool = force_option("write into OUTPUT_DIR even if it is not an earlier output of apply, or start over "
                               "there (removing its shards) if it holds another job"),
):
    """Annotate every record of INPUT_PATH with PIPELINE, in input order, into
    shards in OUTPUT_DIR; a rerun of the same job (same settings, same input and
    pipeline contents) annotates only the shards not yet written whole."""
    from ..inference import apply_pipeline

    summary = apply_pipeline(
        pipeline, input_path, output_dir, engine=engine, workers=workers, batch_size=batch_size,
        shard_size=shard_size, output_format=output_format, on_bad_record=on_bad_record, text_key=text_key,
        address=address, gpus_per_worker=gpus_per_worker, quiet=quiet, force=force, encoding=encoding,
    )
    for name in summary.damaged:
        typer.echo(f"{name} did not match the checksum written with it: annotated again", err=True)
    for bad in summary.bad_records[:SHOWN_BAD_RECORDS]:
        typer.echo(f"skipped {bad}", err=True)
    if len(summary.bad_records) > SHOWN_BAD_RECORDS:
        typer.echo(f"... and {len(summary.bad_records) - SHOWN_BAD_RECORDS} more bad records", err=True)
    typer.echo(
        f"{summary.records} records in {summary.written} shards written to {output_dir} "
        f"({summary.skipped} of {summary.shards} shards already there; {len(summary.bad_records)} bad records skipped)"
    )
