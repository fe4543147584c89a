"""An `Evaluation` (see `evaluation.evaluate`) as people read it: the lines the
evaluate commands print, `metrics.json`, and the pictures next to it (entity
F1 per type and a displaCy page of predicted entities for NER, the confusion
matrix for classifiers). One formatting for all commands, so `evaluate`,
`evaluate-ner` and `compare` print the same numbers the same way."""
import json
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

from spacy import displacy
from spacy.tokens import Doc, Span

from ..scoring.entities import Entity
from ..scoring.calibration import reliability_bins
from ..util.charts import confusion_matrix_chart, grouped_bar_chart, reliability_chart
from ..util.io import atomic_write_text
from .evaluate import Evaluation

PathLike = Union[str, Path]


def entity_table(scores: Mapping) -> List[str]:
    """P/R/F1 (%) and support per entity type, then overall, as aligned lines."""
    lines = [f"{'type':<10} {'P':>7} {'R':>7} {'F1':>7} {'support':>8}"]
    for label, s in scores["ents_per_type"].items():
        lines.append(f"{label:<10} {100 * s['p']:7.2f} {100 * s['r']:7.2f} {100 * s['f']:7.2f} {s['support']:8d}")
    lines.append(
        f"{'overall':<10} {100 * scores['ents_p']:7.2f} {100 * scores['ents_r']:7.2f} {100 * scores['ents_f']:7.2f} "
        f"{scores['tp'] + scores['fn']:8d}"
    )
    return lines


def summary_line(evaluation: Evaluation) -> str:
    model = evaluation.model
    return f"{evaluation.task}: {model.metric} = {100 * model.value:.2f} on {model.n_examples} examples of {evaluation.data}"


def comparison_lines(evaluation: Evaluation, names: Tuple[str, str] = ("model", "baseline")) -> List[str]:
    """Both systems' bootstrap statistic, the difference with its confidence
    interval, and the p-value; empty without a baseline."""
    result = evaluation.bootstrap
    if result is None:
        return []
    a, b = names
    stat = evaluation.statistic
    unit = "docs" if evaluation.task == "ner" else "examples"
    return [
        f"{stat} {a} = {100 * result.f1_a:.2f}   {stat} {b} = {100 * result.f1_b:.2f}",
        f"{a} - {b} = {100 * result.delta:+.2f}  ({100 * result.confidence:.0f}% CI {100 * result.ci_low:+.2f} .. "
        f"{100 * result.ci_high:+.2f})   p = {result.p_value:.4f}  ({result.n_samples} samples, "
        f"{evaluation.model.n_examples} {unit})",
    ]


def summary_json(evaluation: Evaluation) -> Dict[str, object]:
    """The headline numbers: the JSON line `evaluate` prints last."""
    summary = {"task": evaluation.task, "metric": evaluation.model.metric, "value": evaluation.model.value}
    if evaluation.baseline is not None:
        summary.update(baseline=evaluation.baseline.value, p_value=evaluation.bootstrap.p_value)
    return summary


def metrics_report(evaluation: Evaluation, model: PathLike, baseline: Optional[PathLike] = None) -> Dict[str, object]:
    """Everything `metrics.json` holds; `model` and `baseline` name the pipelines."""
    scored = evaluation.model
    report = {"task": evaluation.task, "model": str(model), "data": str(evaluation.data), "metric": scored.metric,
              "value": scored.value, "n_examples": scored.n_examples, "scores": scored.scores}
    if evaluation.baseline is not None:
        report["baseline"] = {"model": str(baseline), "value": evaluation.baseline.value,
                              "scores": evaluation.baseline.scores}
        report["bootstrap"] = {"statistic": evaluation.statistic, **evaluation.bootstrap.to_dict()}
    if scored.confusion_matrix is not None:
        report["confusion_matrix"] = {"labels": scored.labels,
                                      "rows_gold_columns_predicted": scored.confusion_matrix.tolist()}
    return report


def entities_html(entity_docs: Sequence[Tuple[Doc, List[Entity]]], n_docs: int) -> str:
    """displaCy page of the predicted entities of the first `n_docs` docs."""
    docs = []
    for gold_doc, entities in entity_docs[:n_docs]:
        doc = Doc(gold_doc.vocab, words=[t.text for t in gold_doc], spaces=[bool(t.whitespace_) for t in gold_doc])
        doc.ents = [Span(doc, start, end, label=label) for start, end, label in entities]
        docs.append(doc)
    return displacy.render(docs, style="ent", page=True, jupyter=False)


def write_report(evaluation: Evaluation, report: Mapping, output_dir: Path, displacy_docs: int = 25) -> None:
    """OUTPUT_DIR/metrics.json (`report`, from `metrics_report`) and the
    pictures: NER f1_per_type.png (baseline bars too), entities.html and, for
    scored entities (mlm_ner), reliability.png; classifiers confusion_matrix.png."""
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    data_name = evaluation.data.name
    if evaluation.task == "ner":
        series = {"model": {k: v["f"] for k, v in evaluation.model.scores["ents_per_type"].items()}}
        if evaluation.baseline is not None:
            series["baseline"] = {k: v["f"] for k, v in evaluation.baseline.scores["ents_per_type"].items()}
        grouped_bar_chart(series, output_dir / "f1_per_type.png", f"Entity F1 per type on {data_name}")
        atomic_write_text(output_dir / "entities.html", entities_html(evaluation.model.entity_docs, displacy_docs))
        scored = {name: scores.entity_confidence for name, scores in (("model", evaluation.model),
                                                                      ("baseline", evaluation.baseline))
                  if scores is not None and scores.entity_confidence is not None}
        if scored:
            reliability_chart({name: reliability_bins(*pairs) for name, pairs in scored.items()},
                              output_dir / "reliability.png", f"entity scores on {data_name}")
    else:
        confusion_matrix_chart(evaluation.model.confusion_matrix, evaluation.model.labels,
                               output_dir / "confusion_matrix.png", f"{evaluation.task} on {data_name}")
    atomic_write_text(output_dir / "metrics.json", json.dumps(report, indent=2))
