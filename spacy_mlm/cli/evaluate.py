"""`spacy_mlm evaluate`: score a trained pipeline on gold data, for every task
(NER, text classes, NLI pairs), and leave what people would rather look at
next to the numbers: OUTPUT_DIR gets `metrics.json` and, for NER,
`f1_per_type.png` and `entities.html`; for classifiers `confusion_matrix.png`.
`--baseline` adds the paired bootstrap test of the difference. The scoring is
`spacy_mlm.evaluation.evaluate`, the output `spacy_mlm.evaluation.report`; the
`evaluate-ner` and `compare` commands are aliases over the same routine.
"""
import json
from pathlib import Path
from typing import Optional

import typer

from ..tasks import evaluated_tasks
from . import app
from .options import force_option, gpu_id_option, quiet_option, use_gpu


def run_evaluation(model: Path, data: Path, task: str = "auto", baseline: Optional[Path] = None, **options):
    """Load MODEL (and BASELINE) and score them on DATA (see
    `evaluate_pipeline` for `options`)."""
    import spacy

    from ..evaluation.evaluate import evaluate_pipeline

    nlp = spacy.load(model)
    base = spacy.load(baseline) if baseline is not None else None
    return evaluate_pipeline(nlp, data, task, base, **options)


@app.command("evaluate", short_help="Score a trained pipeline on gold data (any task).")
def evaluate_cli(
    model: Path = typer.Argument(..., help="saved spaCy pipeline (NER, text classifier or NLI classifier)"),
    data: Path = typer.Argument(..., help="gold data: .spacy / CoNLL (NER), TSV/CSV/JSONL (text classes), NLI JSONL/TSV"),
    output_dir: Path = typer.Argument(..., help="where metrics.json and the pictures go"),
    task: str = typer.Option("auto", help=f"auto | {' | '.join(task.name for task in evaluated_tasks())} "
                             "(auto: from the pipeline's components and labels)"),
    baseline: Optional[Path] = typer.Option(None, help="a second pipeline for the same task to compare against"),
    n_samples: int = typer.Option(1000, "--n-samples", help="bootstrap samples"),
    seed: int = typer.Option(0, help="random seed of the bootstrap"),
    confidence: float = typer.Option(0.95, help="level of the bootstrap confidence interval"),
    n_sents: int = typer.Option(1, "--n-sents", help="sentences per Doc when DATA is CoNLL; 0 = whole documents (for context = document)"),
    displacy_docs: int = typer.Option(25, "--displacy-docs", help="docs rendered to entities.html (NER)"),
    batch_size: int = typer.Option(64, "--batch-size", help="docs per pipeline batch"),
    gpu_id: int = gpu_id_option(),
    quiet: bool = quiet_option(),
    force: bool = force_option("write into OUTPUT_DIR even if it is not an earlier output of evaluate"),
):
    """Score MODEL on DATA; write OUTPUT_DIR/metrics.json and charts. Prints one JSON line last."""
    from ..evaluation.report import comparison_lines, entity_table, metrics_report, summary_json, summary_line, write_report

    from ..util.outputs import claim_output

    use_gpu(gpu_id)
    with claim_output(output_dir, "evaluate", directory=True, inputs=[model, data, baseline], replaces_whole=False,
                      force=force):
        evaluation = run_evaluation(model, data, task, baseline, n_sents=n_sents, batch_size=batch_size,
                                    n_samples=n_samples, seed=seed, confidence=confidence, quiet=quiet)
        write_report(evaluation, metrics_report(evaluation, model, baseline), output_dir, displacy_docs)
    lines = entity_table(evaluation.model.scores) if evaluation.task == "ner" else []
    for line in [*lines, summary_line(evaluation), *comparison_lines(evaluation)]:
        typer.echo(line)
    typer.echo(json.dumps(summary_json(evaluation)))
