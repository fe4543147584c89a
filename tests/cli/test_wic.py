import json

import numpy
import pytest
import spacy
from typer.testing import CliRunner

import spacy_mlm  # noqa: F401
from spacy_mlm.cli import app
from spacy_mlm.vectors_pipeline import make_vectors_pipeline
from spacy_mlm.readers.wic import read_wic_split, target_span
from spacy_mlm.errors import SpacyMlmError
from spacy_mlm.scoring.similarity import tune_threshold
from spacy_mlm.util.vectors import cosine_rows
from spacy_mlm.similarity.wic_cosine import evaluate_wic, wic_scores, wic_sentences

ROWS = [
    ("bank", "N", "2-6", "The river bank was muddy .", "She opened an account at the bank .", "F"),
    ("bank", "N", "1-2", "The bank was muddy .", "The river bank flooded .", "T"),
    ("play", "V", "1-0", "Children play football in the park .", "Play the guitar .", "F"),
    ("play", "V", "1-1", "Children play football .", "They play football every Saturday .", "T"),
    ("sleep", "V", "2-1", "The cat sleeps on the wall .", "Cats sleep on warm stone .", "T"),
    ("read", "V", "1-2", "He read an old book .", "She could read the mood of the room .", "F"),
]


@pytest.fixture()
def wic_dir(tmp_path):
    for split in ("train", "dev"):
        folder = tmp_path / "wic" / split
        folder.mkdir(parents=True)
        (folder / f"{split}.data.txt").write_text("".join("\t".join(r[:5]) + "\n" for r in ROWS), encoding="utf8")
        (folder / f"{split}.gold.txt").write_text("".join(r[5] + "\n" for r in ROWS), encoding="utf8")
    return tmp_path / "wic"


def test_scores_are_cosines_of_target_vectors(tiny_model_dir, wic_dir):
    nlp = make_vectors_pipeline(tiny_model_dir)
    examples = read_wic_split(wic_dir, "train")
    scores = wic_scores(nlp, examples, batch_size=4)
    e = examples[0]
    a = target_span(nlp(e.sentence1), e.char_span1)
    b = target_span(nlp(e.sentence2), e.char_span2)
    assert a.text == b.text == "bank"
    assert scores[0] == pytest.approx(a.similarity(b), abs=1e-6)
    result = evaluate_wic(nlp, examples, examples)
    assert result["dev_acc"] == pytest.approx(result["train_acc"])  # same data, same threshold
    # the tuned threshold is at least as good as calling every pair one class (3 T, 3 F), and
    # the reported accuracy is the accuracy at that threshold
    labels = numpy.array([e.label for e in examples])
    assert result["train_acc"] >= 0.5
    assert result["train_acc"] == pytest.approx(((scores >= result["threshold"]) == labels).mean())
    assert len(wic_sentences(examples)) == 12


def test_wic_cli_on_hf_dir_with_transform(tiny_model_dir, wic_dir):
    result = CliRunner().invoke(
        app, ["wic", str(tiny_model_dir), str(wic_dir), "--transform", "center", "--layer", "1", "--batch-size", "4"]
    )
    assert result.exit_code == 0, result.output
    figures = json.loads(result.output.strip().splitlines()[-1])
    assert figures["transform"] == "center" and figures["layer"] == 1 and figures["n_dev"] == 6
    # the same figures worked out from the raw layer-1 token vectors: centred on the mean of
    # every token of the train sentences, the targets' cosines, the threshold tuned on train
    raw = make_vectors_pipeline(tiny_model_dir, layer=1)
    examples = read_wic_split(wic_dir, "train")
    mean = numpy.concatenate([[t.vector for t in raw(s)] for s in wic_sentences(examples)]).mean(axis=0)
    targets = [[target_span(raw(s), span)[0].vector - mean for s, span in ((e.sentence1, e.char_span1),
                                                                          (e.sentence2, e.char_span2))] for e in examples]
    scores = cosine_rows(numpy.array([a for a, _ in targets]), numpy.array([b for _, b in targets]))
    threshold, accuracy = tune_threshold(scores, [e.label for e in examples])
    assert figures["fitted_on_vectors"] == sum(len(raw(s)) for s in wic_sentences(examples))
    assert figures["threshold"] == pytest.approx(threshold, abs=1e-5)
    assert figures["dev_acc"] == figures["train_acc"] == pytest.approx(accuracy)  # dev holds the train rows


def test_wic_cli_on_saved_pipeline_reuses_its_fitted_transform(tiny_model_dir, wic_dir, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(s for r in ROWS for s in r[3:5]) + "\n", encoding="utf8")
    out = tmp_path / "fitted"
    runner = CliRunner()
    result = runner.invoke(
        app, ["fit-transform", str(tiny_model_dir), str(corpus), str(out), "--steps", "standardize+abtt", "--n-components", "1"]
    )
    assert result.exit_code == 0, result.output
    assert "fitted standardize(eps=1e-06)+abtt(n_components=1)" in result.output
    nlp = spacy.load(out)
    component = nlp.get_pipe("mlm_vectors")
    assert component.transform.is_fitted
    vectors = numpy.concatenate([[t.vector for t in nlp(s)] for r in ROWS for s in r[3:5]])
    numpy.testing.assert_allclose(vectors.mean(axis=0), 0.0, atol=1e-4)
    result = runner.invoke(app, ["wic", str(out), str(wic_dir)])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.output.strip().splitlines()[-1])
    assert figures["fitted_on_vectors"] == 0  # used the saved fit
    assert figures["transform"] == component.transform.describe()


def test_wic_cli_reports_bad_input(tiny_model_dir, wic_dir, tmp_path):
    (tmp_path / "empty").mkdir()
    result = CliRunner().invoke(app, ["wic", str(tmp_path / "empty"), str(wic_dir)])
    assert result.exit_code == 1 and "neither a spaCy pipeline" in result.output
    (wic_dir / "dev" / "dev.gold.txt").write_text("T\n", encoding="utf8")
    result = CliRunner().invoke(app, ["wic", str(tiny_model_dir), str(wic_dir)])
    assert result.exit_code == 1
    assert "dev.gold.txt" in result.output and "1 gold labels for 6 examples" in result.output


def test_context_weight_mixes_the_sentence_vector(tiny_model_dir, wic_dir):
    nlp = make_vectors_pipeline(tiny_model_dir)
    examples = read_wic_split(wic_dir, "train")
    e = examples[2]
    doc1, doc2 = nlp(e.sentence1), nlp(e.sentence2)
    a, b = target_span(doc1, e.char_span1).vector, target_span(doc2, e.char_span2).vector
    mixed = wic_scores(nlp, examples, batch_size=4, context_weight=0.25)
    expected = cosine_rows((0.75 * a + 0.25 * doc1.vector)[None], (0.75 * b + 0.25 * doc2.vector)[None])[0]
    assert mixed[2] == pytest.approx(expected, abs=1e-5)
    assert mixed[2] != pytest.approx(wic_scores(nlp, examples, batch_size=4)[2], abs=1e-4)
    with pytest.raises(SpacyMlmError, match="context_weight"):
        wic_scores(nlp, examples, context_weight=1.5)


def test_wic_cli_whiten_context_weight_and_threshold_per_pos(tiny_model_dir, wic_dir):
    result = CliRunner().invoke(
        app,
        ["wic", str(tiny_model_dir), str(wic_dir), "--transform", "whiten", "--layer", "1", "--n-layers", "2",
         "--context-weight", "0.5", "--threshold-per-pos", "--batch-size", "4"],
    )
    assert result.exit_code == 0, result.output
    figures = json.loads(result.output.strip().splitlines()[-1])
    assert figures["transform"] == "whiten(rel_eps=1e-05)"
    assert figures["context_weight"] == 0.5 and figures["threshold_per_pos"] is True
    assert set(figures["thresholds"]) == {"N", "V"}
    assert figures["dev_acc"] == pytest.approx(figures["train_acc"])  # same data in both splits
