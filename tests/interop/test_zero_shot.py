"""`mlm_zero_shot` on NLI pair classifiers equals transformers'
pipeline("zero-shot-classification"), single and multi-label."""
import numpy
import pytest
import spacy
from transformers import pipeline

import spacy_mlm
from spacy_mlm.errors import SpacyMlmError

from .hf_models import FAMILIES, make_classifier
from .sentences import SENTENCES

LABELS = ["sports", "business", "a place", "music"]
TEXTS = SENTENCES[:8]


@pytest.mark.parametrize("family, nli_labels", [
    ("bert", ["contradiction", "neutral", "entailment"]),
    ("roberta", ["ENTAILMENT", "NEUTRAL", "CONTRADICTION"]),
    ("deberta-v2", ["entailment", "neutral", "contradiction"]),
])
def test_zero_shot_scores_equal_transformers(tmp_path, family, nli_labels):
    assert family in FAMILIES
    directory = make_classifier(tmp_path / "nli", family, "Sequence", nli_labels)
    nlp = spacy_mlm.import_hf(directory)
    zero_shot = spacy_mlm.add_zero_shot(nlp, LABELS, batch_size=5)  # batches cut across texts
    assert nlp.pipe_names == ["mlm_zero_shot"]
    hf = pipeline("zero-shot-classification", model=str(directory))
    for multi_label in (False, True):
        theirs = hf(TEXTS, candidate_labels=LABELS, multi_label=multi_label)
        ours = zero_shot.classify(TEXTS, multi_label=multi_label)
        for cats, row in zip(ours, theirs):
            numpy.testing.assert_allclose([cats[label] for label in row["labels"]], row["scores"], atol=1e-5)
    docs = list(nlp.pipe(TEXTS))  # the configured labels, single-label
    numpy.testing.assert_allclose([list(d.cats.values()) for d in docs],
                                  [list(c.values()) for c in zero_shot.classify(TEXTS)], atol=1e-6)
    assert all(abs(sum(d.cats.values()) - 1) < 1e-5 for d in docs)


def test_a_saved_zero_shot_pipeline_loads_with_its_parts_disabled(tmp_path):
    nlp = spacy_mlm.import_hf(make_classifier(tmp_path / "nli", "bert", "Sequence", ["contradiction", "entailment"]))
    spacy_mlm.add_zero_shot(nlp, ["sports", "music"], hypothesis_template="It is about {}.", multi_label=True)
    expected = nlp("Our team won the match.").cats
    nlp.to_disk(tmp_path / "zero_shot")
    loaded = spacy.load(tmp_path / "zero_shot")
    assert loaded.pipe_names == ["mlm_zero_shot"]
    assert loaded("Our team won the match.").cats == pytest.approx(expected, abs=1e-6)
    call_time = loaded.get_pipe("mlm_zero_shot").classify(["Our team won the match."], ["a place"])
    assert list(call_time[0]) == ["a place"]


def test_zero_shot_refuses_what_is_no_nli_pair_classifier(tmp_path):
    nlp = spacy_mlm.import_hf(make_classifier(tmp_path / "nli", "bert", "Sequence", ["contradiction", "entailment"]))
    component = nlp.add_pipe("mlm_zero_shot", config={"labels": ["sports"]})
    with pytest.raises(SpacyMlmError, match="'mlm_textcat' is enabled"):
        nlp("A text.")
    with pytest.raises(SpacyMlmError, match="one '{}'"):
        nlp.add_pipe("mlm_zero_shot", name="bad", config={"hypothesis_template": "no slot"})
    with pytest.raises(SpacyMlmError, match="with 0 replacement fields"):  # once accepted: every label scored 1/n
        nlp.add_pipe("mlm_zero_shot", name="bad", config={"hypothesis_template": "This example is {{}}."})
    with pytest.raises(SpacyMlmError, match="name 'sports' more than once"):  # once two keys summing to 0.667
        nlp.add_pipe("mlm_zero_shot", name="bad", config={"labels": ["sports", "music", "sports"]})
    with pytest.raises(SpacyMlmError, match="name 'music' more than once"):
        component.classify(["A text."], ["music", "music"])
    single = spacy_mlm.import_hf(make_classifier(tmp_path / "sst", "bert", "Sequence", ["NEG", "POS"]))
    single.add_pipe("mlm_zero_shot", config={"nli": "mlm_textcat"})
    with pytest.raises(SpacyMlmError, match="not trained on sentence pairs"):
        single.get_pipe("mlm_zero_shot").classify(["A text."], ["sports"])
    assert component.labels == ["sports"]


def test_zero_shot_on_a_pair_classifier_trained_here(tiny_model_dir):
    """configs/nli.cfg's pooling (pair_mean): a multi-label score is the pair's
    entailment share of entailment + contradiction in its own classify_pair."""
    from spacy.training import Example
    from thinc.api import Adam

    spacy.util.fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(tiny_model_dir)}})
    nlp.add_pipe("mlm_textcat", name="nli", config={"model": {"tok2vec": {"pooling": "pair_mean"}}})
    classes = ["contradiction", "entailment", "neutral"]
    rows = [(SENTENCES[i], SENTENCES[i + 1], classes[i % 3]) for i in range(6)]
    examples = [Example.from_dict(spacy_mlm.make_pair_doc(nlp, a, b), {"cats": {c: float(c == gold) for c in classes}})
                for a, b, gold in rows]
    nlp.initialize(lambda: examples)
    optimizer = Adam(1e-2)
    for _ in range(3):
        nlp.update(examples, sgd=optimizer)
    labels = ["sports", "music"]
    pairs = spacy_mlm.classify_pairs(nlp, [(text, f"This example is {label}.") for text in TEXTS for label in labels])
    zero_shot = spacy_mlm.add_zero_shot(nlp, labels, nli="nli", multi_label=True)
    assert nlp.pipe_names == ["mlm_zero_shot"]
    expected = [p["entailment"] / (p["entailment"] + p["contradiction"]) for p in pairs]
    ours = [cats[label] for cats in zero_shot.classify(TEXTS) for label in labels]
    numpy.testing.assert_allclose(ours, expected, atol=1e-5)
    assert numpy.std(ours) > 1e-3  # the scores vary: the test compares something
