"""mlm_textcat's temperature: fitted by `calibrate` (texts, sentence pairs,
multi-label), applied in doc.cats without changing the decision, saved, and
the ECE of a classifier's decisions in its evaluation."""
import json
import random

import pytest
import srsly
from spacy.training import Example
from typer.testing import CliRunner

import spacy_mlm
from spacy_mlm.cli import app
from spacy_mlm.evaluation.calibration import calibrate_classifier
from spacy_mlm.evaluation.evaluate import evaluate_pipeline
from tests.evaluation.test_evaluate import classifier_pipeline, write_jsonl
from tests.pipeline.test_classifier import examples, make_nlp, toy_rows, train


def noisy_rows(n, seed):
    """The toy task with a fifth of the labels flipped: no model is sure of every row."""
    rng = random.Random(seed)
    return [(text, gold if rng.random() > 0.2 else {"POS", "NEG"} - gold) for text, gold in toy_rows(n, seed)]


@pytest.fixture(scope="module")
def trained(tiny_model_dir):
    nlp = make_nlp(tiny_model_dir)
    egs = examples(nlp, noisy_rows(48, seed=0), ["POS", "NEG"])
    nlp.initialize(lambda: egs)
    train(nlp, egs, steps=25)
    return nlp


def test_calibrate_fits_the_temperature_and_keeps_every_decision(trained, tmp_path):
    nlp = trained
    rows = noisy_rows(40, seed=1)
    texts = [text for text, _ in rows]
    textcat = nlp.get_pipe("mlm_textcat")
    decisions = [max(doc.cats, key=doc.cats.get) for doc in nlp.pipe(texts)]
    textcat.cfg["temperature"] = 0.2  # far too sure, so there is something to fit
    try:
        report = calibrate_classifier(nlp, "textcat", texts, [next(iter(gold)) for _, gold in rows])["mlm_textcat"]
        assert report["nll_after"] < report["nll_before"]
        assert report["temperature"] == textcat.cfg["temperature"] != 0.2
        cats = [doc.cats for doc in nlp.pipe(texts)]
        assert [max(c, key=c.get) for c in cats] == decisions
        sure = max(max(c.values()) for c in cats)
        textcat.cfg["temperature"] = 0.2
        assert max(max(doc.cats.values()) for doc in nlp.pipe(texts)) > sure
    finally:
        textcat.cfg["temperature"] = 1.0


def test_the_calibrate_command_on_a_text_file(trained, tmp_path):
    trained.to_disk(tmp_path / "model")
    data = write_jsonl(tmp_path / "dev.jsonl", [{"text": t, "label": next(iter(g))} for t, g in noisy_rows(30, 2)])
    result = CliRunner().invoke(app, ["calibrate", str(tmp_path / "model"), str(data),
                                      "--output", str(tmp_path / "calibrated")])
    assert result.exit_code == 0, result.output
    assert "mlm_textcat: temperature 1 -> " in result.output and "on 30 examples" in result.output
    fitted = srsly.read_json(tmp_path / "calibrated" / "mlm_textcat" / "cfg")["temperature"]
    nll = [float(x) for x in result.output.split("NLL ")[1].split(",")[0].split(" -> ")]
    assert (fitted != 1.0) == (nll[1] < nll[0])


def test_pairs_and_multi_label_calibrate_too(tiny_model_dir):
    nlp = make_nlp(tiny_model_dir)
    labels = ["entailment", "contradiction"]
    pairs = [(("A cat sleeps .", "A cat rests ."), "entailment"), (("It rains .", "It is dry ."), "contradiction"),
             (("A dog runs .", "A dog moves ."), "entailment"), (("It is hot .", "It is cold ."), "contradiction")]
    egs = [Example.from_dict(spacy_mlm.make_pair_doc(nlp, a, b), {"cats": {l: float(l == label) for l in labels}})
           for (a, b), label in pairs]
    nlp.initialize(lambda: egs)
    train(nlp, egs, steps=10)
    nlp.get_pipe("mlm_textcat").cfg["temperature"] = 5.0
    report = calibrate_classifier(nlp, "nli", [p for p, _ in pairs], [label for _, label in pairs])["mlm_textcat"]
    assert report["nll_after"] < report["nll_before"] and report["n_examples"] == 4

    multi = make_nlp(tiny_model_dir, exclusive=False)
    egs = examples(multi, toy_rows(24, seed=3, extra=True), ["POS", "NEG", "EXTRA"])
    multi.initialize(lambda: egs)
    train(multi, egs, steps=15)
    textcat = multi.get_pipe("mlm_textcat")
    textcat.cfg["temperature"] = 0.1
    for eg in egs:
        multi.get_pipe("mlm_encoder")(eg.predicted)
    report = textcat.calibrate(egs)
    assert report["nll_after"] < report["nll_before"]


def test_a_classifier_evaluation_reports_the_ece_of_its_decisions(tmp_path):
    rows = [{"text": "good", "label": "POS"}, {"text": "a good day gone", "label": "NEG"}, {"text": "bad", "label": "NEG"}]
    scores = evaluate_pipeline(classifier_pipeline(["POS", "NEG"], "good"), write_jsonl(tmp_path / "dev.jsonl", rows)).model.scores
    assert scores["cats_ece"] == pytest.approx(1 / 3)  # every decision scored 1, two of three right
    json.dumps(scores)


def test_decision_confidence_of_exclusive_and_multi_label_rows():
    import numpy

    from spacy_mlm.scoring.calibration import decision_confidence

    probs = numpy.array([[0.7, 0.3], [0.4, 0.6]])
    truths = numpy.array([[1.0, 0.0], [1.0, 0.0]])
    scores, right = decision_confidence(probs, truths, numpy.ones_like(truths), exclusive=True)
    assert scores.tolist() == [0.7, 0.6] and right.tolist() == [True, False]
    known = numpy.array([[1, 0], [1, 1]])
    scores, right = decision_confidence(probs, truths, known, exclusive=False)
    assert scores == pytest.approx([0.7, 0.6, 0.6]) and right.tolist() == [True, False, False]
