"""`spacy_mlm calibrate`: fit the temperature of a pipeline's mlm_ner (and the
Platt scaling of its entity probabilities), or of its mlm_textcat (texts or
sentence pairs), on a labelled file (the dev set), so that its probabilities
can be taken at their word; the entities (the most probable classes) do not
change."""
from pathlib import Path
from typing import Optional

import typer

from . import app
from .options import force_option, gpu_id_option, use_gpu


@app.command("calibrate", short_help="Fit the temperature of mlm_ner / mlm_textcat on labelled data.")
def calibrate_cli(
    model: Path = typer.Argument(..., help="saved spaCy pipeline with an mlm_ner or mlm_textcat component"),
    data: Path = typer.Argument(..., help="labelled data, the dev set: .spacy / CoNLL (NER), TSV/CSV/JSONL (text "
                                          "classes), NLI JSONL/TSV (pairs)"),
    task: str = typer.Option("auto", help="auto | ner | textcat | nli (auto: from the pipeline's components)"),
    output: Optional[Path] = typer.Option(None, "--output", help="write the calibrated pipeline here (default: MODEL, replaced atomically)"),
    n_sents: int = typer.Option(1, "--n-sents", help="sentences per Doc when DATA is CoNLL; 0 = whole documents (for context = document)"),
    batch_size: int = typer.Option(64, "--batch-size", help="docs per pipeline batch"),
    temperature_only: bool = typer.Option(False, "--temperature-only",
                                          help="mlm_ner: fit the temperature alone (score_scaling reset to [1, 0])"),
    gpu_id: int = gpu_id_option(),
    force: bool = force_option("replace --output even if it is not an earlier output of calibrate"),
):
    """Fit each mlm_ner's temperature on DATA (the one that minimises the
    negative log-likelihood of "this entity is right" over the entities it
    predicts there) and then its score_scaling (Platt's map of the entity
    probabilities, same likelihood), or the classifier's temperature (the
    cross-entropy of the gold labels). Prints them, the likelihood and the
    expected calibration error (15 bins) before and after, and saves the
    pipeline."""
    import spacy

    from ..evaluation.calibration import calibrate_classifier, calibrate_entities
    from ..evaluation.evaluate import load_gold_entities, read_classification, resolve_task
    from ..util.outputs import claim_output
    from ..util.save import save_atomically

    use_gpu(gpu_id)
    if not (model / "config.cfg").is_file():
        raise typer.BadParameter(f"{model} is not a saved spaCy pipeline (no config.cfg)")
    nlp = spacy.load(model)
    task = resolve_task(nlp, task)
    if task == "ner":
        gold_docs, _ = load_gold_entities(nlp, data, n_sents)
        reports = calibrate_entities(nlp, gold_docs, batch_size=batch_size, with_scaling=not temperature_only)
    else:
        reports = calibrate_classifier(nlp, task, *read_classification(task, data), batch_size=batch_size)
    for name, r in reports.items():
        counted = (f"{r['n_entities']} entities ({100 * r['accuracy']:.1f}% right)" if task == "ner"
                   else f"{r['n_examples']} examples")
        scaling = (f", score_scaling {_pair(r['score_scaling_before'])} -> {_pair(r['score_scaling'])}"
                   if "score_scaling" in r else "")
        typer.echo(f"{name}: temperature {r['temperature_before']:.4g} -> {r['temperature']:.4g}{scaling} on {counted}; "
                   f"NLL {r['nll_before']:.4f} -> {r['nll_after']:.4f}, ECE {r['ece_before']:.4f} -> {r['ece_after']:.4f}")
    if output is None:
        save_atomically(nlp, model)
        typer.echo(f"saved {model}")
        return
    with claim_output(output, "calibrate", directory=True, inputs=[model, data], force=force):
        save_atomically(nlp, output)
    typer.echo(f"wrote {output}")


def _pair(values) -> str:
    return "[" + ", ".join(f"{v:.4g}" for v in values) + "]"
