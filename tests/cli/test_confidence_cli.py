"""`calibrate`, `evaluate-ner`'s ECE and reliability diagram, and `uncertain`
on a small trained mlm_ner pipeline."""
import json

import pytest
import spacy
import srsly
from typer.testing import CliRunner

from spacy_mlm.cli import app

from tests.pipeline.test_ner import DATA, make_nlp, train


@pytest.fixture(scope="module")
def saved(tiny_model_dir, tmp_path_factory):
    """A trained CRF pipeline and its training data as CoNLL."""
    root = tmp_path_factory.mktemp("confidence")
    nlp = make_nlp(tiny_model_dir, crf=True)
    egs, _ = train(nlp, n_steps=8)
    nlp.to_disk(root / "model")
    lines = []
    for eg in egs:
        tags = [t.ent_iob_ + ("-" + t.ent_type_ if t.ent_type_ else "") for t in eg.reference]
        lines += [f"{t.text} X X {tag}" for t, tag in zip(eg.reference, tags)] + [""]
    (root / "data.conll").write_text("\n".join(lines) + "\n", encoding="utf8")
    return root


def test_calibrate_writes_a_pipeline_with_the_fitted_temperature(saved, tmp_path):
    result = CliRunner().invoke(app, ["calibrate", str(saved / "model"), str(saved / "data.conll"),
                                      "--output", str(tmp_path / "calibrated")])
    assert result.exit_code == 0, result.output
    assert "ner: temperature 1 -> " in result.output
    fitted = srsly.read_json(tmp_path / "calibrated" / "ner" / "cfg")["temperature"]
    assert fitted != 1.0 and srsly.read_json(saved / "model" / "ner" / "cfg")["temperature"] == 1.0
    nll = [float(x) for x in result.output.split("NLL ")[1].split(",")[0].split(" -> ")]
    assert nll[1] < nll[0]
    text = DATA[0][0]
    assert ([(e.start, e.end, e.label_) for e in spacy.load(tmp_path / "calibrated")(text).ents]
            == [(e.start, e.end, e.label_) for e in spacy.load(saved / "model")(text).ents])


def test_evaluate_ner_reports_the_ece_and_draws_the_reliability_diagram(saved, tmp_path):
    png = tmp_path / "reliability.png"
    result = CliRunner().invoke(app, ["evaluate-ner", str(saved / "model"), str(saved / "data.conll"),
                                      "--output", str(tmp_path / "scores.json"), "--reliability", str(png)])
    assert result.exit_code == 0, result.output
    ece = json.loads((tmp_path / "scores.json").read_text())["ents_ece"]
    assert 0.0 <= ece <= 1.0
    assert f"ECE (15 bins) {ece:.4f} over " in result.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_uncertain_writes_the_least_sure_texts_in_a_shape_that_reads_back(saved, tmp_path):
    texts = [text for text, _ in DATA] + ["Nobody went there .", "Anna Berg met Peter Grant in Oslo ."]
    (tmp_path / "texts.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf8")
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(app, ["uncertain", str(saved / "model"), str(tmp_path / "texts.jsonl"), str(out),
                                      "--top", "3"])
    assert result.exit_code == 0, result.output
    rows = list(srsly.read_jsonl(out))
    assert len(rows) == 3
    errors = [row["meta"]["expected_errors"] for row in rows]
    assert errors == sorted(errors, reverse=True)
    nlp = spacy.load(saved / "model")
    every = sorted((nlp(t).spans["mlm_ner"].attrs["expected_errors"] for t in texts), reverse=True)
    assert errors == pytest.approx(every[:3], abs=1e-5)
    for row in rows:
        doc = nlp(row["text"])
        assert [(s["start"], s["end"], s["label"]) for s in row["spans"]] == [
            (e.start_char, e.end_char, e.label_) for e in doc.ents]
        assert [s["score"] for s in row["spans"]] == pytest.approx([e._.mlm_prob for e in doc.ents], abs=1e-5)
        assert all(row["text"][s["start"]:s["end"]] for s in row["spans"])


def test_evaluate_draws_the_reliability_diagram_beside_its_other_pictures(saved, tmp_path):
    result = CliRunner().invoke(app, ["evaluate", str(saved / "model"), str(saved / "data.conll"), str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "out" / "metrics.json").read_text())["scores"]["ents_ece"] >= 0.0
    assert (tmp_path / "out" / "reliability.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_uncertain_replaces_its_own_output_but_no_other_file(saved, tmp_path):
    (tmp_path / "texts.jsonl").write_text(json.dumps({"text": DATA[0][0]}) + "\n", encoding="utf8")
    other = tmp_path / "notes.jsonl"
    other.write_text('{"text": "my own annotations"}\n', encoding="utf8")
    args = ["uncertain", str(saved / "model"), str(tmp_path / "texts.jsonl")]
    result = CliRunner().invoke(app, args + [str(other)])
    assert result.exit_code != 0 and other.read_text(encoding="utf8") == '{"text": "my own annotations"}\n'
    for _ in range(2):
        result = CliRunner().invoke(app, args + [str(tmp_path / "out.jsonl")])
        assert result.exit_code == 0, result.output


def test_calibrate_without_output_replaces_the_pipeline_in_place(saved, tmp_path):
    import shutil

    shutil.copytree(saved / "model", tmp_path / "model")
    result = CliRunner().invoke(app, ["calibrate", str(tmp_path / "model"), str(saved / "data.conll")])
    assert result.exit_code == 0, result.output
    assert f"saved {tmp_path / 'model'}" in result.output
    nlp = spacy.load(tmp_path / "model")
    assert nlp.get_pipe("ner").cfg["temperature"] != 1.0
    assert [(e.start, e.end, e.label_) for e in nlp(DATA[1][0]).ents] == [
        (e.start, e.end, e.label_) for e in spacy.load(saved / "model")(DATA[1][0]).ents]
