"""`spacy_mlm compare`: `evaluate MODEL_A --baseline MODEL_B` that prints the
paired bootstrap only (both statistics, A - B with its confidence interval,
the p-value) and the bootstrap result as its last line, in JSON."""
import json
from pathlib import Path

import typer

from . import app
from .evaluate import run_evaluation
from .options import gpu_id_option, quiet_option, use_gpu


@app.command("compare", short_help="Paired bootstrap test of two pipelines.")
def compare_cli(
    model_a: Path = typer.Argument(..., help="first saved spaCy pipeline"),
    model_b: Path = typer.Argument(..., help="second saved spaCy pipeline, same task"),
    data: Path = typer.Argument(..., help="gold data: .spacy / CoNLL (NER), TSV/CSV/JSONL (text classes), NLI JSONL/TSV"),
    n_samples: int = typer.Option(1000, "--n-samples", help="bootstrap samples"),
    seed: int = typer.Option(0, help="random seed of the resampling"),
    confidence: float = typer.Option(0.95, help="level of the confidence interval"),
    n_sents: int = typer.Option(1, "--n-sents", help="sentences per Doc when DATA is CoNLL (the resampled unit); 0 = whole documents"),
    batch_size: int = typer.Option(64, "--batch-size", help="docs per pipeline batch"),
    gpu_id: int = gpu_id_option(),
    quiet: bool = quiet_option(),
):
    """F1 (NER; accuracy for classifiers) of A and B, the difference A - B with
    its bootstrap confidence interval, and the two-sided p-value of the paired
    bootstrap (documents or examples resampled)."""
    from ..evaluation.report import comparison_lines

    use_gpu(gpu_id)
    evaluation = run_evaluation(model_a, data, "auto", model_b, n_sents=n_sents, batch_size=batch_size,
                                n_samples=n_samples, seed=seed, confidence=confidence, quiet=quiet)
    for line in comparison_lines(evaluation, names=("A", "B")):
        typer.echo(line)
    typer.echo(json.dumps(evaluation.bootstrap.to_dict()))
