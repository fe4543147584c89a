"""`spacy_mlm.calibrated_to_disk.v1`, the `[training.before_to_disk]` callback of
every shipped config: before each save of `spacy train`, the temperature of
mlm_ner (and mlm_textcat) is fitted on the dev corpus the config names, and the
pipeline is saved atomically with it."""
import logging

import pytest
import spacy
import srsly
from spacy.tokens import DocBin
from spacy.training import Example

from spacy_mlm.evaluation.calibration import calibrate_on_examples, make_calibrated_to_disk
from spacy_mlm.scoring.calibration import binary_nll

from ..pipeline.test_ner import make_nlp, train


def with_dev_corpus(nlp, egs, tmp_path):
    """`nlp` whose config names the examples' gold Docs as its dev corpus, as
    `spacy train`'s nlp does after `--paths.dev`."""
    path = tmp_path / "dev.spacy"
    DocBin(docs=[eg.reference for eg in egs]).to_disk(path)
    config = nlp.config
    config["corpora"] = {"dev": {"@readers": "spacy.Corpus.v1", "path": str(path), "gold_preproc": False}}
    nlp.config = config
    return nlp


def entity_nll(nlp, egs):
    probs, correct = [], []
    for eg in egs:
        gold = {(g.start, g.end, g.label_) for g in eg.reference.ents}
        for ent in nlp(eg.reference.text).ents:
            probs.append(ent._.mlm_prob)
            correct.append((ent.start, ent.end, ent.label_) in gold)
    return binary_nll(probs, correct)


@pytest.fixture(scope="module")
def trained(tiny_model_dir):
    nlp = make_nlp(tiny_model_dir, crf=True, scheme="BIOES")
    egs, _ = train(nlp, n_steps=8)
    return nlp, egs


def test_each_save_fits_the_temperature_on_the_dev_corpus_and_saves_it(trained, tmp_path):
    nlp, egs = trained
    nlp = with_dev_corpus(nlp, egs, tmp_path)
    ner = nlp.get_pipe("ner")
    ents = [[(e.start, e.end, e.label_) for e in doc.ents] for doc in nlp.pipe([eg.reference.text for eg in egs])]
    try:
        ner.cfg["temperature"] = 3.0  # a bad temperature, so that the save has something to fit
        nll_before = entity_nll(nlp, egs)
        make_calibrated_to_disk()(nlp).to_disk(tmp_path / "model-last")
        fitted = ner.cfg["temperature"]
        assert fitted != 3.0
        assert entity_nll(nlp, egs) < nll_before
        # the entities stay; the saved pipeline carries the fitted temperature and loads
        assert [[(e.start, e.end, e.label_) for e in doc.ents]
                for doc in nlp.pipe([eg.reference.text for eg in egs])] == ents
        saved = srsly.read_json(tmp_path / "model-last" / "ner" / "cfg")
        assert saved["temperature"] == pytest.approx(fitted)
        assert saved["score_scaling"] == pytest.approx(ner.cfg["score_scaling"]) != [1.0, 0.0]
        loaded = spacy.load(tmp_path / "model-last")
        assert loaded.get_pipe("ner").cfg["temperature"] == pytest.approx(fitted)
        assert loaded.get_pipe("ner").cfg["score_scaling"] == pytest.approx(ner.cfg["score_scaling"])
        # the same fit as calibrating on the corpus's examples by hand from the same start
        ner.cfg["temperature"] = 3.0
        corpus = [Example(nlp.make_doc(eg.reference.text), eg.reference) for eg in egs]
        report = calibrate_on_examples(nlp, corpus)["ner"]
        assert report["temperature"] == pytest.approx(fitted, rel=1e-6)
        assert report["score_scaling"] == pytest.approx(saved["score_scaling"], rel=1e-6)
    finally:
        ner.cfg["temperature"], ner.cfg["score_scaling"] = 1.0, [1.0, 0.0]


def test_max_examples_limits_the_dev_examples_it_fits_on(trained, tmp_path, monkeypatch):
    nlp, egs = trained
    nlp = with_dev_corpus(nlp, egs, tmp_path)
    seen = []
    ner = nlp.get_pipe("ner")
    monkeypatch.setattr(ner, "calibrate", lambda examples, batch_size: seen.append(len(list(examples))) or
                        {"temperature": 1.0})
    make_calibrated_to_disk(max_examples=2)(nlp).to_disk(tmp_path / "two")
    make_calibrated_to_disk(max_examples=0)(nlp).to_disk(tmp_path / "all")
    assert seen == [2, len(egs)]


def test_a_component_without_entities_keeps_its_temperature_and_the_pipeline_is_saved(tiny_model_dir, tmp_path,
                                                                                      caplog):
    nlp = make_nlp(tiny_model_dir)
    egs, _ = train(nlp, n_steps=1)
    empty = Example(nlp.make_doc(""), nlp.make_doc(""))  # a dev set with no entity to fit on
    nlp = with_dev_corpus(nlp, [empty], tmp_path)
    ner = nlp.get_pipe("ner")
    with caplog.at_level(logging.WARNING, logger="spacy_mlm.evaluation.calibration"):
        make_calibrated_to_disk()(nlp).to_disk(tmp_path / "model-last")
    assert ner.cfg["temperature"] == 1.0
    assert "keeps temperature 1.0" in caplog.text and "predicted no entity" in caplog.text
    assert spacy.load(tmp_path / "model-last").pipe_names == ["mlm_encoder", "ner"]


def test_the_first_process_of_a_data_parallel_run_fits_alone(tiny_model_dir, tmp_path):
    """Under `spacy_mlm train`'s torchrun only the first process saves: the
    classifier's calibration loss must not wait for the other processes (a
    collective there would hang until the timeout; here, with no process group
    at all, it would raise)."""
    from spacy_mlm.util.global_batch import summed_over_processes
    from tests.pipeline.test_classifier import examples, make_nlp, toy_rows, train as train_classifier

    nlp = make_nlp(tiny_model_dir)
    egs = examples(nlp, toy_rows(24, seed=0), ["POS", "NEG"])
    nlp.initialize(lambda: egs)
    train_classifier(nlp, egs, steps=5)
    nlp = with_dev_corpus(nlp, egs, tmp_path)
    textcat = next(name for name in nlp.pipe_names if name != "mlm_encoder")
    nlp.get_pipe(textcat).cfg["temperature"] = 3.0
    with summed_over_processes():
        make_calibrated_to_disk()(nlp).to_disk(tmp_path / "model-last")
    fitted = nlp.get_pipe(textcat).cfg["temperature"]
    assert fitted != 3.0
    assert spacy.load(tmp_path / "model-last").get_pipe(textcat).cfg["temperature"] == pytest.approx(fitted)
