import json
from pathlib import Path

import spacy
from spacy.tokens import DocBin
from typer.testing import CliRunner

from spacy_mlm.cli import app

# Two CoNLL documents: PER+LOC in each (Anna Berg / Oslo, Peter Grant / Paris).
TWO_DOCUMENTS = Path(__file__).parents[1] / "scoring" / "two_documents.conll"


def test_convert_train_evaluate_compare(tiny_model_dir, tmp_path):
    data = TWO_DOCUMENTS
    runner = CliRunner()
    result = runner.invoke(app, ["convert-conll", str(data), str(tmp_path / "train.spacy")])
    assert result.exit_code == 0, result.output
    assert "wrote 2 docs" in result.output
    docs = list(DocBin().from_disk(tmp_path / "train.spacy").get_docs(spacy.blank("en").vocab))
    assert [e.text for e in docs[1].ents] == ["Peter Grant", "Paris"]

    from spacy.training import Example

    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(tiny_model_dir)}})
    nlp.add_pipe("mlm_ner", config={"model": {"tok2vec": {"@architectures": "spacy_mlm.EncoderListener.v1", "width": 32}}})
    examples = [Example(nlp.make_doc(d.text), d) for d in DocBin().from_disk(tmp_path / "train.spacy").get_docs(nlp.vocab)]
    optimizer = nlp.initialize(lambda: examples)
    for _ in range(2):
        nlp.update(examples, sgd=optimizer)
    nlp.to_disk(tmp_path / "model")

    scores_path = tmp_path / "scores.json"
    result = runner.invoke(app, ["evaluate-ner", str(tmp_path / "model"), str(data), "--output", str(scores_path)])
    assert result.exit_code == 0, result.output
    assert "overall" in result.output
    scores = json.loads(scores_path.read_text())
    assert scores["tp"] + scores["fn"] == 4
    assert 0.0 <= scores["ents_f"] <= 1.0

    result = runner.invoke(
        app, ["compare", str(tmp_path / "model"), str(tmp_path / "model"), str(tmp_path / "train.spacy"), "--n-samples", "50"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output.strip().splitlines()[-1])
    assert summary["delta"] == 0.0 and summary["p_value"] == 1.0 and summary["n_samples"] == 50


def test_convert_reports_bad_line(tmp_path):
    data = tmp_path / "bad.txt"
    data.write_text("Anna B-PER\nBerg\n", encoding="utf8")
    result = CliRunner().invoke(app, ["convert-conll", str(data), str(tmp_path / "out.spacy")])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: ") and "bad.txt, line 2" in result.stderr


def test_convert_whole_documents(tmp_path):
    """`--n-sents 0`: one Doc per -DOCSTART- document, with its sentence starts."""
    data = tmp_path / "docs.conll"
    data.write_text("-DOCSTART- O\n\nAnna B-PER\nsings O\n\nOslo B-LOC\nsleeps O\n\n-DOCSTART- O\n\nPeter B-PER\n", encoding="utf8")
    result = CliRunner().invoke(app, ["convert-conll", str(data), str(tmp_path / "docs.spacy"), "--n-sents", "0"])
    assert result.exit_code == 0, result.output
    assert "wrote 2 docs" in result.output
    docs = list(DocBin().from_disk(tmp_path / "docs.spacy").get_docs(spacy.blank("en").vocab))
    assert [[s.text for s in d.sents] for d in docs] == [["Anna sings", "Oslo sleeps"], ["Peter"]]
    assert [[e.text for e in d.ents] for d in docs] == [["Anna", "Oslo"], ["Peter"]]
