"""`evaluate` and its aliases `evaluate-ner` and `compare` on saved pipelines
with known predictions (entity rulers): the aliases report evaluate's numbers."""
import json
from pathlib import Path

import spacy
from typer.testing import CliRunner

from spacy_mlm.cli import app

# Two CoNLL documents: PER+LOC in each (Anna Berg / Oslo, Peter Grant / Paris).
TWO_DOCUMENTS = Path(__file__).parents[1] / "scoring" / "two_documents.conll"


def saved_ruler(path, patterns):
    nlp = spacy.blank("en")
    nlp.add_pipe("entity_ruler").add_patterns([{"label": label, "pattern": text} for text, label in patterns])
    nlp.to_disk(path)
    return str(path)


def last_json(output):
    return json.loads(output.strip().splitlines()[-1])


def test_aliases_report_the_numbers_of_evaluate(tmp_path):
    data = TWO_DOCUMENTS
    model = saved_ruler(tmp_path / "model", [("Anna", "PER"), ("Oslo", "LOC"), ("Paris", "LOC")])
    base = saved_ruler(tmp_path / "base", [("Oslo", "LOC")])
    runner = CliRunner()
    options = ["--n-samples", "40", "--seed", "2", "--confidence", "0.9"]

    result = runner.invoke(app, ["evaluate", model, str(data), str(tmp_path / "out"), "--baseline", base, *options])
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["task"] == "ner" and metrics["value"] == metrics["scores"]["ents_f"]
    assert (metrics["scores"]["tp"], metrics["scores"]["fp"], metrics["scores"]["fn"]) == (2, 1, 2)
    assert last_json(result.output) == {"task": "ner", "metric": "ents_f", "value": metrics["value"],
                                        "baseline": metrics["baseline"]["value"],
                                        "p_value": metrics["bootstrap"]["p_value"]}
    assert "overall      66.67   50.00   57.14        4" in result.output

    scores_path = tmp_path / "scores.json"
    result = runner.invoke(app, ["evaluate-ner", model, str(data), "--output", str(scores_path)])
    assert result.exit_code == 0, result.output
    assert json.loads(scores_path.read_text()) == metrics["scores"]
    assert result.output.splitlines()[-1] == "overall      66.67   50.00   57.14        4"

    result = runner.invoke(app, ["compare", model, base, str(data), *options])
    assert result.exit_code == 0, result.output
    bootstrap = {k: v for k, v in metrics["bootstrap"].items() if k != "statistic"}
    assert last_json(result.output) == bootstrap
    assert result.stdout.splitlines()[0] == f"F1 A = {100 * bootstrap['f1_a']:.2f}   F1 B = {100 * bootstrap['f1_b']:.2f}"
    assert "(90% CI " in result.output and "(40 samples, 2 docs)" in result.output


def test_evaluate_ner_on_no_documents_is_an_error_naming_the_file(tmp_path):
    empty = tmp_path / "empty.conll"
    empty.write_text("-DOCSTART- -X- -X- O\n", encoding="utf8")
    model = saved_ruler(tmp_path / "model", [("Oslo", "LOC")])
    result = CliRunner().invoke(app, ["evaluate-ner", model, str(empty)])
    assert result.exit_code == 1
    assert "empty.conll: no documents to score" in result.output and "F1" not in result.output


def test_evaluate_nli_without_labelled_rows_is_an_error_naming_the_file(tmp_path):
    nlp = spacy.blank("en")
    textcat = nlp.add_pipe("textcat")
    for label in ("entailment", "neutral", "contradiction"):
        textcat.add_label(label)
    nlp.initialize()
    nlp.to_disk(tmp_path / "nli")
    data = tmp_path / "unlabelled.jsonl"
    data.write_text(json.dumps({"premise": "A man sleeps.", "hypothesis": "A man runs.", "label": "-"}) + "\n")
    result = CliRunner().invoke(app, ["evaluate", str(tmp_path / "nli"), str(data), str(tmp_path / "out"), "--task", "nli"])
    assert result.exit_code == 1
    assert "unlabelled.jsonl: no labelled sentence pairs to score: every row was skipped (1 unlabeled)" in result.output
    assert not (tmp_path / "out").exists()


def test_evaluate_rejects_a_task_the_pipeline_cannot_do(tmp_path):
    data = tmp_path / "dev.jsonl"
    data.write_text(json.dumps({"text": "fine", "label": "POS"}) + "\n")
    model = saved_ruler(tmp_path / "model", [("Oslo", "LOC")])
    result = CliRunner().invoke(app, ["evaluate", model, str(data), str(tmp_path / "out"), "--task", "textcat"])
    assert result.exit_code == 1 and "task textcat needs a component that sets doc.cats" in result.output
    result = CliRunner().invoke(app, ["evaluate", model, str(data), str(tmp_path / "out"), "--task", "pos"])
    assert result.exit_code == 1 and "task must be one of auto, ner, textcat, nli" in result.output
