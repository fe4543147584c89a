"""`spacy_mlm compare`: paired bootstrap test of two NER pipelines on the same data."""
import json
from pathlib import Path

import typer

from . import app


@app.command("compare")
def compare_cli(
    model_a: Path = typer.Argument(..., help="first saved spaCy pipeline"),
    model_b: Path = typer.Argument(..., help="second saved spaCy pipeline"),
    data: Path = typer.Argument(..., help="gold data: .spacy file or CoNLL file"),
    n_samples: int = typer.Option(1000, "--n-samples", help="bootstrap samples"),
    seed: int = typer.Option(0, help="random seed of the resampling"),
    confidence: float = typer.Option(0.95, help="level of the confidence interval"),
    n_sents: int = typer.Option(1, "--n-sents", help="sentences per Doc when DATA is CoNLL (the resampled unit)"),
    batch_size: int = typer.Option(64, "--batch-size"),
):
    """F1 of A and B, the difference A - B with its bootstrap confidence interval,
    and the two-sided p-value of the paired bootstrap (documents resampled)."""
    import spacy

    import spacy_mlm  # noqa: F401
    from ..scoring.bootstrap import paired_bootstrap
    from ..scoring.entities import per_doc_counts
    from .evaluate_ner import load_gold, predict_entities

    counts = []
    gold_docs = gold = None
    for model in (model_a, model_b):
        nlp = spacy.load(model)
        if gold_docs is None:
            gold_docs, gold = load_gold(nlp, data, n_sents)
        counts.append(per_doc_counts(gold, predict_entities(nlp, gold_docs, batch_size)))
    result = paired_bootstrap(counts[0], counts[1], n_samples=n_samples, seed=seed, confidence=confidence)
    typer.echo(f"F1 A = {100 * result.f1_a:.2f}   F1 B = {100 * result.f1_b:.2f}")
    typer.echo(
        f"A - B = {100 * result.delta:+.2f}  ({100 * confidence:.0f}% CI {100 * result.ci_low:+.2f} .. "
        f"{100 * result.ci_high:+.2f})   p = {result.p_value:.4f}  ({n_samples} samples, {len(gold_docs)} docs)"
    )
    typer.echo(json.dumps(result.to_dict()))
