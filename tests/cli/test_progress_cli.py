"""Long commands show progress on stderr when it is not a terminal (one line
per interval and one at the end, with counts and rates), and none with --quiet."""
from pathlib import Path

import spacy
from typer.testing import CliRunner

from spacy_mlm.cli import app

TWO_DOCUMENTS = Path(__file__).parents[1] / "scoring" / "two_documents.conll"


def run(*args):
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result


def test_convert_conll_and_evaluate_ner_report_progress_unless_quiet(tmp_path):
    result = run("convert-conll", TWO_DOCUMENTS, tmp_path / "gold.spacy")
    assert "convert two_documents.conll: 2/2 docs (100%)" in result.stderr and "docs/s" in result.stderr
    assert "wrote 2 docs" in result.stdout and "docs/s" not in result.stdout
    assert "convert" not in run("convert-conll", TWO_DOCUMENTS, tmp_path / "q.spacy", "--quiet").stderr

    nlp = spacy.blank("en")
    nlp.add_pipe("entity_ruler").add_patterns([{"label": "LOC", "pattern": "Oslo"}])
    nlp.to_disk(tmp_path / "ruler")
    result = run("evaluate-ner", tmp_path / "ruler", tmp_path / "gold.spacy")
    assert "evaluate: 2/2 docs (100%)" in result.stderr
    assert "evaluate:" not in run("evaluate-ner", tmp_path / "ruler", tmp_path / "gold.spacy", "-q").stderr
