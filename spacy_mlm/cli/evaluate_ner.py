"""`spacy_mlm evaluate-ner`: `evaluate --task ner` that prints the entity
P/R/F1 table and, for scored entities (mlm_ner), their expected calibration
error; the one picture it writes is the reliability diagram, when asked."""
import contextlib
import json
from pathlib import Path
from typing import Optional

import typer

from ..errors import SpacyMlmError
from . import app
from .evaluate import run_evaluation
from .options import force_option, gpu_id_option, quiet_option, use_gpu


@app.command("evaluate-ner", short_help="Entity P/R/F1 of an NER pipeline, per type.")
def evaluate_ner_cli(
    model: Path = typer.Argument(..., help="saved spaCy pipeline that sets doc.ents"),
    data: Path = typer.Argument(..., help="gold data: .spacy file or CoNLL file"),
    n_sents: int = typer.Option(1, "--n-sents", help="sentences per Doc when DATA is CoNLL; 0 = whole documents (for context = document)"),
    batch_size: int = typer.Option(64, "--batch-size", help="docs per pipeline batch"),
    gpu_id: int = gpu_id_option(),
    quiet: bool = quiet_option(),
    output: Optional[Path] = typer.Option(None, "--output", help="also write the scores as JSON here"),
    force: bool = force_option("replace --output even if it is not an earlier output of evaluate-ner"),
    reliability: Optional[Path] = typer.Option(
        None, "--reliability", help="write the reliability diagram of the entities' scores here (PNG)"),
):
    """Entity-level precision, recall and F1 (exact span and type match; a partial
    span is one false positive and one false negative), overall and per type.
    With mlm_ner's scored entities, also the expected calibration error (15
    bins) of "this entity is right" against its probability."""
    from ..evaluation.report import entity_table
    from ..scoring.calibration import ECE_BINS, reliability_bins
    from ..util.charts import reliability_chart
    from ..util.io import atomic_write_text
    from ..util.outputs import claim_output

    use_gpu(gpu_id)
    claimed = (claim_output(output, "evaluate-ner", directory=False, inputs=[model, data], force=force,
                            recognise=is_scores_file) if output is not None else contextlib.nullcontext())
    with claimed:
        result = run_evaluation(model, data, "ner", n_sents=n_sents, batch_size=batch_size, quiet=quiet).model
        scores = result.scores
        for line in entity_table(scores):
            typer.echo(line)
        if result.entity_confidence is None:
            if reliability is not None:
                raise SpacyMlmError(f"{model}: its entities carry no probability (no mlm_ner): no reliability diagram")
        else:
            typer.echo(f"ECE ({ECE_BINS} bins) {scores['ents_ece']:.4f} over {len(result.entity_confidence[0])} entities")
            if reliability is not None:
                reliability_chart({model.name: reliability_bins(*result.entity_confidence)}, reliability,
                                  f"entity scores on {data.name}")
        if output is not None:
            atomic_write_text(output, json.dumps(scores, indent=2))


def is_scores_file(path: Path) -> bool:
    """An earlier `--output` of evaluate-ner: a JSON object of entity scores."""
    try:
        return "ents_f" in json.loads(path.read_text(encoding="utf8"))
    except (OSError, ValueError, TypeError):
        return False
