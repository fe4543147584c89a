"""`spacy_mlm evaluate`: score a trained pipeline on gold data, for every task,
and leave what people would rather look at next to the numbers.

OUTPUT_DIR gets `metrics.json` and, for NER, `f1_per_type.png` and
`entities.html` (displaCy of the first predicted docs); for classifiers (text
classification, NLI pairs), `confusion_matrix.png`. With `--baseline` (e.g. the
same task trained on the encoder before pretraining) both are scored on the
same data and a paired bootstrap tests the difference: of entity F1 for NER
(documents resampled), of accuracy for classifiers (examples resampled).
NER scoring is `evaluate-ner`'s: exact span and type, a partial span is one
false positive and one false negative.
"""
import json
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import typer

from . import app

TASKS = ("auto", "ner", "textcat", "nli")


def component_assigning(nlp, attribute: str) -> Optional[str]:
    """Name of the first pipe that sets `attribute` (e.g. "doc.ents")."""
    for name in nlp.pipe_names:
        if attribute in nlp.get_pipe_meta(name).assigns:
            return name
    return None


def detect_task(nlp) -> str:
    """ner if the pipeline sets entities; else nli if its classifier's labels are
    NLI labels; else textcat."""
    from ..errors import SpacyMlmError
    from ..readers.nli import THREE_WAY, TWO_WAY

    if component_assigning(nlp, "doc.ents"):
        return "ner"
    name = component_assigning(nlp, "doc.cats")
    if name is None:
        raise SpacyMlmError(f"the pipeline ({', '.join(nlp.pipe_names)}) sets neither doc.ents nor doc.cats")
    labels = set(nlp.get_pipe(name).labels)
    return "nli" if labels and labels <= set(THREE_WAY + TWO_WAY) else "textcat"


# -- NER ---------------------------------------------------------------------------


def evaluate_ner(nlp, data: Path, n_sents: int, batch_size: int):
    """Scores, per-doc (tp, fp, fn) counts and (gold doc, predicted entities) pairs."""
    from ..scoring.entities import per_doc_counts, score_entities
    from .evaluate_ner import load_gold, predict_entities

    gold_docs, gold = load_gold(nlp, data, n_sents)
    predicted = predict_entities(nlp, gold_docs, batch_size)
    return score_entities(gold, predicted), per_doc_counts(gold, predicted), list(zip(gold_docs, predicted))


def entities_html(nlp, pairs, n_docs: int) -> str:
    """displaCy page of the predicted entities of the first `n_docs` docs."""
    from spacy import displacy
    from spacy.tokens import Doc, Span

    docs = []
    for gold_doc, entities in pairs[:n_docs]:
        doc = Doc(nlp.vocab, words=[t.text for t in gold_doc], spaces=[bool(t.whitespace_) for t in gold_doc])
        doc.ents = [Span(doc, start, end, label=label) for start, end, label in entities]
        docs.append(doc)
    return displacy.render(docs, style="ent", page=True, jupyter=False)


# -- classifiers ----------------------------------------------------------------------


def read_classification(task: str, data: Path) -> Tuple[List, List[str]]:
    """Inputs (texts or (premise, hypothesis) pairs) and gold labels."""
    from ..errors import DataFormatError

    if task == "nli":
        from ..readers.nli import read_nli

        examples = read_nli(data).examples
        return [(e.premise, e.hypothesis) for e in examples], [e.label for e in examples]
    from ..readers.textcat import read_textcat

    parsed = read_textcat(data)
    if parsed.multi_label:
        raise DataFormatError(data, None, "evaluate scores exclusive classes; this file has multi-label rows")
    return [e.text for e in parsed.examples], [e.labels[0] for e in parsed.examples]


def predict_cats(nlp, task: str, inputs, batch_size: int) -> List[Dict[str, float]]:
    from ..pipeline.classifier import classify_pairs

    if task == "nli":
        return classify_pairs(nlp, inputs, batch_size=batch_size)
    return [dict(doc.cats) for doc in nlp.pipe(inputs, batch_size=batch_size)]


def evaluate_classifier(nlp, task: str, data: Path, batch_size: int):
    """Scores (spaCy's cats scores + accuracy), per-example counts, the
    confusion matrix and its labels."""
    from spacy.training import Example

    from ..errors import SpacyMlmError
    from ..pipeline.classifier import textcat_score
    from ..readers.common import one_hot_cats
    from ..scoring.classes import confusion_matrix, correctness_counts

    labels = list(nlp.get_pipe(component_assigning(nlp, "doc.cats")).labels)
    inputs, gold = read_classification(task, data)
    unknown = sorted(set(gold) - set(labels))
    if unknown:
        raise SpacyMlmError(f"{data} has labels {unknown} that the pipeline does not know (it has {labels})")
    cats = predict_cats(nlp, task, inputs, batch_size)
    predicted = [max(labels, key=lambda label: c.get(label, 0.0)) for c in cats]
    examples = []
    for c, g in zip(cats, gold):
        doc = nlp.make_doc("")
        doc.cats = c
        reference = doc.copy()
        reference.cats = one_hot_cats([g], labels)
        examples.append(Example(doc, reference))
    scores = textcat_score(examples, labels=labels, exclusive_classes=True)
    return scores, correctness_counts(gold, predicted), confusion_matrix(gold, predicted, labels), labels


# -- the command ----------------------------------------------------------------------


def headline(task: str, scores: Dict) -> Tuple[str, float]:
    return ("ents_f", scores["ents_f"]) if task == "ner" else ("cats_accuracy", scores["cats_accuracy"])


def score_model(nlp, task: str, data: Path, n_sents: int, batch_size: int):
    if task == "ner":
        return evaluate_ner(nlp, data, n_sents, batch_size)
    return evaluate_classifier(nlp, task, data, batch_size)


@app.command("evaluate")
def evaluate_cli(
    model: Path = typer.Argument(..., help="saved spaCy pipeline (NER, text classifier or NLI classifier)"),
    data: Path = typer.Argument(..., help="gold data: .spacy / CoNLL (NER), TSV/CSV/JSONL (text classes), NLI JSONL/TSV"),
    output_dir: Path = typer.Argument(..., help="where metrics.json and the pictures go"),
    task: str = typer.Option("auto", help="auto | ner | textcat | nli (auto: from the pipeline's components and labels)"),
    baseline: Optional[Path] = typer.Option(None, help="a second pipeline for the same task to compare against"),
    n_samples: int = typer.Option(1000, "--n-samples", help="bootstrap samples"),
    seed: int = typer.Option(0, help="random seed of the bootstrap"),
    n_sents: int = typer.Option(1, "--n-sents", help="sentences per Doc when DATA is CoNLL"),
    displacy_docs: int = typer.Option(25, "--displacy-docs", help="docs rendered to entities.html (NER)"),
    batch_size: int = typer.Option(64, "--batch-size"),
):
    """Score MODEL on DATA; write OUTPUT_DIR/metrics.json and charts. Prints one JSON line last."""
    import spacy

    import spacy_mlm  # noqa: F401
    from ..errors import SpacyMlmError
    from ..scoring.bootstrap import paired_bootstrap
    from ..util.charts import confusion_matrix_chart, grouped_bar_chart
    from ..util.io import atomic_write_text

    if task not in TASKS:
        raise typer.BadParameter(f"--task must be one of {', '.join(TASKS)}, got {task!r}")
    try:
        nlp = spacy.load(model)
        task = detect_task(nlp) if task == "auto" else task
        result = score_model(nlp, task, data, n_sents, batch_size)
        metric, value = headline(task, result[0])
        report = {"task": task, "model": str(model), "data": str(data), "metric": metric, "value": value,
                  "n_examples": len(result[1]), "scores": result[0]}
        base = None
        if baseline is not None:
            base_nlp = spacy.load(baseline)
            base = score_model(base_nlp, task, data, n_sents, batch_size)
            report["baseline"] = {"model": str(baseline), "value": headline(task, base[0])[1], "scores": base[0]}
            comparison = paired_bootstrap(result[1], base[1], n_samples=n_samples, seed=seed)
            report["bootstrap"] = {"statistic": "F1" if task == "ner" else "accuracy", **comparison.to_dict()}
    except SpacyMlmError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(1)
    output_dir.mkdir(parents=True, exist_ok=True)
    if task == "ner":
        series = {"model": {k: v["f"] for k, v in result[0]["ents_per_type"].items()}}
        if base is not None:
            series["baseline"] = {k: v["f"] for k, v in base[0]["ents_per_type"].items()}
        grouped_bar_chart(series, output_dir / "f1_per_type.png", f"Entity F1 per type on {data.name}")
        atomic_write_text(output_dir / "entities.html", entities_html(nlp, result[2], displacy_docs))
        for label, s in result[0]["ents_per_type"].items():
            typer.echo(f"{label:<10} P {100 * s['p']:6.2f}  R {100 * s['r']:6.2f}  F1 {100 * s['f']:6.2f}  ({s['support']})")
    else:
        matrix, labels = result[2], result[3]
        report["confusion_matrix"] = {"labels": labels, "rows_gold_columns_predicted": matrix.tolist()}
        confusion_matrix_chart(matrix, labels, output_dir / "confusion_matrix.png", f"{task} on {data.name}")
    typer.echo(f"{task}: {metric} = {100 * value:.2f} on {report['n_examples']} examples of {data}")
    if base is not None:
        b = report["bootstrap"]
        typer.echo(
            f"baseline {report['baseline']['value'] * 100:.2f}; difference {100 * b['delta']:+.2f} "
            f"(95% CI {100 * b['ci_low']:+.2f} .. {100 * b['ci_high']:+.2f}), p = {b['p_value']:.4f}"
        )
    atomic_write_text(output_dir / "metrics.json", json.dumps(report, indent=2))
    typer.echo(json.dumps({"task": task, "metric": metric, "value": value,
                           **({"baseline": report["baseline"]["value"], "p_value": report["bootstrap"]["p_value"]}
                              if base is not None else {})}))
