"""spaCy's own ways of scaling: `nlp.pipe(..., n_process=2)` and `spacy apply
--n-process 2` give the annotations of one process (the same entities and labels;
numbers within fp32's spread: a worker runs one thread, so other kernels), for every pipeline
(NER softmax and CRF with textcat and vectors, int8 ONNX, pair classifier,
pair regressor, senses). Worker processes are slow to start: the cases are grouped."""
import pytest
import spacy
import srsly
from spacy.cli import app as spacy_cli
from spacy.tokens import DocBin
from typer.testing import CliRunner

import spacy_mlm

from .conftest import TEXTS, assert_close_docs, inputs_for

pytestmark = pytest.mark.numerics


def test_two_processes_give_what_one_gives(saved_pipelines):
    for name, path in saved_pipelines.items():
        nlp = spacy.load(path)
        one = list(nlp.pipe(inputs_for(name, nlp), batch_size=2))
        two = list(nlp.pipe(inputs_for(name, nlp), batch_size=2, n_process=2))
        assert_close_docs([spacy_mlm.restore_vector_hooks(doc) for doc in two], one)


def test_spacy_apply_with_two_processes(saved_pipelines, tmp_path):
    srsly.write_jsonl(tmp_path / "in.jsonl", [{"text": text} for text in TEXTS])
    args = ["apply", str(saved_pipelines["crf"]), str(tmp_path / "in.jsonl"), str(tmp_path / "out.spacy"),
            "--n-process", "2", "--batch-size", "2"]
    result = CliRunner().invoke(spacy_cli, args)  # spaCy's command line, in this process (no interpreter start)
    assert result.exit_code == 0, result.output[-3000:]
    nlp = spacy.load(saved_pipelines["crf"])
    got = [spacy_mlm.restore_vector_hooks(doc) for doc in DocBin().from_disk(tmp_path / "out.spacy").get_docs(nlp.vocab)]
    assert_close_docs(got, nlp.pipe(TEXTS, batch_size=2))
