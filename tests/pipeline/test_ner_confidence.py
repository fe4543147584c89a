"""mlm_ner's entity probabilities in a pipeline: doc.spans[spans_key] with
spancat's attrs["scores"], span._.mlm_prob, `threshold`, `candidate_threshold`
/ `n_best`, the calibrating temperature and score scaling, and saved pipelines
without them."""
import numpy
import pytest
import srsly

from spacy_mlm.scoring.calibration import NO_SCALING, binary_nll, scaled_scores, unscaled_threshold

from .test_ner import DATA, make_nlp, train

TEXTS = [text for text, _ in DATA] + ["Nobody went to the quiet wood .", "Anna Berg and Peter Grant ."]


@pytest.fixture(scope="module", params=[False, True], ids=["softmax", "crf"])
def trained(request, tiny_model_dir):
    nlp = make_nlp(tiny_model_dir, crf=request.param, scheme="BIOES" if request.param else "BIO", store_probs=True)
    egs, _ = train(nlp, n_steps=8)
    return nlp, egs


def spans_of(doc, key="mlm_ner"):
    group = doc.spans[key]
    return [(s.start, s.end, s.label_, float(p)) for s, p in zip(group, group.attrs["scores"])]


def test_every_entity_has_its_probability_in_doc_spans_and_on_the_span(trained):
    nlp, _ = trained
    for doc in nlp.pipe(TEXTS):
        scored = spans_of(doc)
        assert [(s, e, label) for s, e, label, _ in scored] == [(e.start, e.end, e.label_) for e in doc.ents]
        assert all(0.0 < p <= 1.0 for *_, p in scored)
        assert [e._.mlm_prob for e in doc.ents] == pytest.approx([p for *_, p in scored])
        assert doc.spans["mlm_ner"].attrs["expected_errors"] >= 0.0


def test_the_spans_over_a_token_add_up_to_its_tag_marginals(trained):
    """With the CRF: the softmax tagger's tag_probs are each token's own
    distribution, not the marginals of the well-formed paths (tagging's tests
    check those)."""
    nlp, _ = trained
    ner = nlp.get_pipe("ner")
    if not ner.model.attrs["crf"]:
        pytest.skip("tag_probs of the softmax tagger are not path marginals")
    ner.cfg["n_best"] = 10_000  # every span
    try:
        for doc in nlp.pipe(TEXTS):
            covered = numpy.zeros(len(doc))
            for s, e, _, p in spans_of(doc):
                covered[s:e] += p
            outside = doc._.tag_probs[:, ner.tag_labels.index("O")]
            assert covered == pytest.approx(1.0 - outside, abs=1e-4)
    finally:
        ner.cfg["n_best"] = None


@pytest.mark.numerics
def test_threshold_leaves_improbable_entities_out_of_doc_ents(trained):
    nlp, _ = trained
    ner = nlp.get_pipe("ner")
    docs = list(nlp.pipe(TEXTS))
    probs = sorted(p for doc in docs for *_, p in spans_of(doc))
    # halfway between two entities' probabilities, so that none sits on the cut: with a threshold the
    # probabilities are computed in another order, equal only to fp32's last bits
    below, above = probs[len(probs) // 2 - 1], probs[len(probs) // 2]
    assert above - below > 1e-4, "no margin to cut between"
    cut = (below + above) / 2
    ner.cfg["threshold"] = cut
    try:
        n_kept = 0
        for before, after in zip(docs, nlp.pipe(TEXTS)):
            kept = [(s, e, label) for s, e, label, p in spans_of(before) if p >= cut]
            assert [(e.start, e.end, e.label_) for e in after.ents] == kept
            assert [(s, e, label) for s, e, label, _ in spans_of(after)] == kept
            n_kept += len(kept)
    finally:
        ner.cfg["threshold"] = 0.0
    assert 0 < n_kept < len(probs)


def test_candidates_above_a_threshold_and_the_n_best(trained):
    nlp, _ = trained
    ner = nlp.get_pipe("ner")
    ents = [[(e.start, e.end, e.label_) for e in doc.ents] for doc in nlp.pipe(TEXTS)]
    ner.cfg["candidate_threshold"] = 0.01
    try:
        wide = [spans_of(doc) for doc in nlp.pipe(TEXTS)]
        ner.cfg["n_best"] = 2
        capped = [spans_of(doc) for doc in nlp.pipe(TEXTS)]
    finally:
        ner.cfg["candidate_threshold"], ner.cfg["n_best"] = None, None
    for doc_ents, every, two in zip(ents, wide, capped):
        # the Viterbi entities first (doc.ents unchanged), then every other span above the threshold, most probable first
        assert [s[:3] for s in every[: len(doc_ents)]] == doc_ents
        others = every[len(doc_ents):]
        assert all(p >= 0.01 for *_, p in others)
        assert [p for *_, p in others] == sorted((p for *_, p in others), reverse=True)
        assert not {s[:3] for s in others} & set(doc_ents)
        assert two == every[: len(doc_ents) + 2]
    assert any(len(every) > len(doc_ents) for doc_ents, every in zip(ents, wide))


def test_calibration_lowers_the_likelihood_loss_and_leaves_the_entities(trained, tmp_path):
    nlp, egs = trained
    ner = nlp.get_pipe("ner")
    ents = [[(e.start, e.end, e.label_) for e in doc.ents] for doc in nlp.pipe(TEXTS)]
    # the encodings of the examples' Docs, which the component reads
    for eg in egs:
        nlp.get_pipe("mlm_encoder")(eg.predicted)
    try:
        ner.cfg["temperature"] = 3.0  # a bad start, so there is something to fit
        alone = ner.calibrate(egs, with_scaling=False)
        assert alone["score_scaling"] == list(NO_SCALING) == ner.cfg["score_scaling"]
        ner.cfg["temperature"] = 3.0
        report = ner.calibrate(egs)
        assert report["nll_after"] < report["nll_before"]
        assert report["temperature"] == ner.cfg["temperature"] != 3.0
        # the same temperature, then the scaling on top: never a worse fit than the temperature alone
        assert report["temperature"] == pytest.approx(alone["temperature"])
        assert report["score_scaling"] == ner.cfg["score_scaling"]
        assert report["nll_after"] < alone["nll_after"] and report["score_scaling"] != list(NO_SCALING)
        assert [[(e.start, e.end, e.label_) for e in doc.ents] for doc in nlp.pipe(TEXTS)] == ents
        # the fitted temperature gives the likelihood reported, and it is saved with the pipeline
        probs = [p for eg in egs for *_, p in spans_of(nlp(eg.reference.text))]
        correct = [(e.start, e.end, e.label_) in {(g.start, g.end, g.label_) for g in eg.reference.ents}
                   for eg in egs for e in nlp(eg.reference.text).ents]
        assert binary_nll(probs, correct) == pytest.approx(report["nll_after"], abs=1e-5)
        nlp.to_disk(tmp_path / "calibrated")
        saved = srsly.read_json(tmp_path / "calibrated" / "ner" / "cfg")
        assert saved["temperature"] == pytest.approx(report["temperature"], rel=1e-6)
        assert saved["score_scaling"] == pytest.approx(report["score_scaling"], rel=1e-6)
    finally:
        ner.cfg["temperature"], ner.cfg["score_scaling"] = 1.0, list(NO_SCALING)


def test_score_scaling_maps_every_score_and_the_thresholds_apply_to_the_mapped_ones(trained):
    nlp, _ = trained
    ner = nlp.get_pipe("ner")
    scaling = (2.0, -1.0)
    ner.cfg["candidate_threshold"] = 0.0
    try:
        raw = [spans_of(doc) for doc in nlp.pipe(TEXTS)]
        ner.cfg["score_scaling"] = list(scaling)
        mapped = [spans_of(doc) for doc in nlp.pipe(TEXTS)]
        for before, after in zip(raw, mapped):
            assert [s[:3] for s in after] == [s[:3] for s in before]  # the same spans, in the same order
            assert [p for *_, p in after] == pytest.approx(scaled_scores([p for *_, p in before], scaling), abs=1e-6)
        # thresholds are on the reported (mapped) scores: the same spans as the raw scores above the unmapped cut
        cut = 0.3
        ner.cfg["candidate_threshold"] = cut
        for doc, before in zip(nlp.pipe(TEXTS), raw):
            n_ents = len(doc.ents)
            others = spans_of(doc)[n_ents:]
            assert all(p >= cut - 1e-6 for *_, p in others)
            wanted = {s[:3] for s in before[n_ents:] if s[3] >= unscaled_threshold(cut, scaling) + 1e-6}
            assert wanted <= {s[:3] for s in others}
    finally:
        ner.cfg["score_scaling"], ner.cfg["candidate_threshold"] = list(NO_SCALING), None


def test_a_pipeline_saved_without_the_settings_loads_with_their_defaults(trained, tmp_path):
    import spacy

    nlp, _ = trained
    nlp.to_disk(tmp_path / "old")
    cfg = srsly.read_json(tmp_path / "old" / "ner" / "cfg")
    for key in ("spans_key", "threshold", "candidate_threshold", "n_best", "temperature", "score_scaling"):
        del cfg[key]
    srsly.write_json(tmp_path / "old" / "ner" / "cfg", cfg)
    loaded = spacy.load(tmp_path / "old")
    doc = loaded(TEXTS[0])
    assert [(e.start, e.end, e.label_) for e in doc.ents] == [(e.start, e.end, e.label_) for e in nlp(TEXTS[0]).ents]
    assert len(doc.spans["mlm_ner"]) == len(doc.ents)


def test_bad_settings_are_refused(tiny_model_dir):
    from spacy_mlm.util.settings import SettingValueError

    nlp = make_nlp(tiny_model_dir)
    with pytest.raises(SettingValueError, match="threshold"):
        nlp.add_pipe("mlm_ner", name="ner2", config={"threshold": 1.5})
    with pytest.raises(SettingValueError, match="temperature"):
        nlp.add_pipe("mlm_ner", name="ner3", config={"temperature": 0})
    for bad in ([0.0, 1.0], [1.0], [1.0, 0.0, 2.0]):
        with pytest.raises(SettingValueError, match="score_scaling"):
            nlp.add_pipe("mlm_ner", name="ner4", config={"score_scaling": bad})


def test_an_empty_doc_has_no_spans_and_expects_no_entity(trained):
    nlp, _ = trained
    ner = nlp.get_pipe("ner")
    ner.cfg["n_best"] = 5
    try:
        docs = list(nlp.pipe(["", TEXTS[0]]))
    finally:
        ner.cfg["n_best"] = None
    assert len(docs[0].spans["mlm_ner"]) == 0 and docs[0].spans["mlm_ner"].attrs["expected_entities"] == 0.0
    assert len(docs[1].spans["mlm_ner"]) > len(docs[1].ents)
