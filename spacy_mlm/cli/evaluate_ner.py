"""`spacy_mlm evaluate-ner`: entity-level P/R/F1 of a pipeline on gold data."""
import json
from pathlib import Path
from typing import List, Optional

import typer

from . import app


def predict_entities(nlp, gold_docs, batch_size: int = 64) -> List[list]:
    """The pipeline's entities on fresh docs with the gold docs' words (the
    pipeline never sees the gold annotation)."""
    from spacy.tokens import Doc

    from ..scoring.entities import doc_entities

    inputs = (Doc(nlp.vocab, words=[t.text for t in d], spaces=[bool(t.whitespace_) for t in d]) for d in gold_docs)
    return [doc_entities(doc) for doc in nlp.pipe(inputs, batch_size=batch_size)]


def load_gold(nlp, data: Path, n_sents: int):
    from ..readers.conll import load_ner_docs
    from ..scoring.entities import doc_entities

    docs = load_ner_docs(data, nlp.vocab, n_sents=n_sents)
    return docs, [doc_entities(d) for d in docs]


@app.command("evaluate-ner")
def evaluate_ner_cli(
    model: Path = typer.Argument(..., help="saved spaCy pipeline that sets doc.ents"),
    data: Path = typer.Argument(..., help="gold data: .spacy file or CoNLL file"),
    n_sents: int = typer.Option(1, "--n-sents", help="sentences per Doc when DATA is CoNLL"),
    batch_size: int = typer.Option(64, "--batch-size"),
    output: Optional[Path] = typer.Option(None, "--output", help="also write the scores as JSON here"),
):
    """Entity-level precision, recall and F1 (exact span and type match; a partial
    span is one false positive and one false negative), overall and per type."""
    import spacy

    import spacy_mlm  # noqa: F401
    from ..scoring.entities import score_entities
    from ..util.io import atomic_write_text

    nlp = spacy.load(model)
    gold_docs, gold = load_gold(nlp, data, n_sents)
    scores = score_entities(gold, predict_entities(nlp, gold_docs, batch_size))
    typer.echo(f"{'type':<10} {'P':>7} {'R':>7} {'F1':>7} {'support':>8}")
    for label, s in scores["ents_per_type"].items():
        typer.echo(f"{label:<10} {100 * s['p']:7.2f} {100 * s['r']:7.2f} {100 * s['f']:7.2f} {s['support']:8d}")
    typer.echo(
        f"{'overall':<10} {100 * scores['ents_p']:7.2f} {100 * scores['ents_r']:7.2f} {100 * scores['ents_f']:7.2f} "
        f"{scores['tp'] + scores['fn']:8d}"
    )
    if output is not None:
        atomic_write_text(output, json.dumps(scores, indent=2))
