"""The printed lines and metrics.json of an Evaluation built by hand."""
import json
from pathlib import Path

import numpy
import spacy
from spacy.tokens import Doc

from spacy_mlm.scoring.bootstrap import BootstrapResult
from spacy_mlm.scoring.entities import score_entities
from spacy_mlm.evaluation.evaluate import Evaluation, PipelineScores
from spacy_mlm.evaluation.report import (
    comparison_lines,
    entities_html,
    entity_table,
    metrics_report,
    summary_json,
    summary_line,
    write_report,
)

PNG = b"\x89PNG"
GOLD = [[(0, 2, "PER"), (4, 5, "LOC")]]
PRED = [[(0, 1, "PER"), (4, 5, "LOC")]]


def ner_evaluation(with_baseline: bool) -> Evaluation:
    doc = Doc(spacy.blank("en").vocab, words=["Anna", "Berg", "works", "in", "Oslo"])
    model = PipelineScores("ner", score_entities(GOLD, PRED), numpy.array([[1, 1, 1]]), entity_docs=[(doc, PRED[0])])
    if not with_baseline:
        return Evaluation("ner", Path("dev.spacy"), model)
    base = PipelineScores("ner", score_entities(GOLD, [[]]), numpy.array([[0, 0, 2]]))
    bootstrap = BootstrapResult(0.5, 0.0, 0.5, 0.25, 0.75, 0.0123, 200, 0.9)
    return Evaluation("ner", Path("dev.spacy"), model, base, bootstrap)


def test_entity_table():
    lines = entity_table(score_entities(GOLD, PRED))
    assert lines == [
        "type             P       R      F1  support",
        "LOC         100.00  100.00  100.00        1",
        "PER           0.00    0.00    0.00        1",
        "overall      50.00   50.00   50.00        2",
    ]


def test_summary_and_comparison_lines():
    evaluation = ner_evaluation(with_baseline=True)
    assert summary_line(evaluation) == "ner: ents_f = 50.00 on 1 examples of dev.spacy"
    assert comparison_lines(evaluation, names=("A", "B")) == [
        "F1 A = 50.00   F1 B = 0.00",
        "A - B = +50.00  (90% CI +25.00 .. +75.00)   p = 0.0123  (200 samples, 1 docs)",
    ]
    assert comparison_lines(evaluation)[0] == "F1 model = 50.00   F1 baseline = 0.00"
    assert comparison_lines(ner_evaluation(with_baseline=False)) == []
    assert summary_json(evaluation) == {"task": "ner", "metric": "ents_f", "value": 0.5, "baseline": 0.0, "p_value": 0.0123}


def test_classifier_report_has_the_confusion_matrix_and_says_accuracy():
    model = PipelineScores("textcat", {"cats_accuracy": 0.75}, numpy.array([[1, 0, 0]] * 3 + [[0, 1, 1]]),
                           labels=["NEG", "POS"], confusion_matrix=numpy.array([[1, 1], [0, 2]]))
    bootstrap = BootstrapResult(0.75, 0.5, 0.25, -0.25, 0.75, 0.6, 100, 0.95)
    evaluation = Evaluation("textcat", Path("dev.jsonl"), model, model, bootstrap)
    report = metrics_report(evaluation, "model", "base")
    assert report["confusion_matrix"] == {"labels": ["NEG", "POS"], "rows_gold_columns_predicted": [[1, 1], [0, 2]]}
    assert report["bootstrap"]["statistic"] == "accuracy" and report["n_examples"] == 4
    assert comparison_lines(evaluation)[1].endswith("(100 samples, 4 examples)")
    json.dumps(report)


def test_write_report_writes_metrics_charts_and_displacy(tmp_path):
    evaluation = ner_evaluation(with_baseline=True)
    report = metrics_report(evaluation, "model-best", "base-best")
    write_report(evaluation, report, tmp_path / "out", displacy_docs=5)
    written = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert written["baseline"] == {"model": "base-best", "value": 0.0, "scores": evaluation.baseline.scores}
    assert written["bootstrap"]["p_value"] == 0.0123 and written["value"] == 0.5 and "confusion_matrix" not in written
    assert (tmp_path / "out" / "f1_per_type.png").read_bytes().startswith(PNG)
    assert "Anna" in (tmp_path / "out" / "entities.html").read_text()


def test_entities_html_shows_the_predicted_entities_of_the_first_docs():
    vocab = spacy.blank("en").vocab
    docs = [(Doc(vocab, words=["Oslo", "is", "cold"]), [(0, 1, "LOC")]), (Doc(vocab, words=["Bergen"]), [(0, 1, "LOC")])]
    html = entities_html(docs, n_docs=1)
    assert "Oslo" in html and "LOC" in html and "Bergen" not in html
