"""The textcat scorer: spaCy's cats scores plus accuracy, and gold labels the
classifier does not know as an error rather than silent misses."""
import pytest
import spacy
from spacy.training import Example
from spacy.util import registry

from spacy_mlm.errors import SpacyMlmError
from spacy_mlm.scoring.textcat import cats_accuracy, textcat_score, unknown_gold_labels


def example(nlp, predicted, gold):
    doc = nlp.make_doc("text")
    doc.cats = predicted
    reference = doc.copy()
    reference.cats = gold
    return Example(doc, reference)


def test_unknown_gold_labels_are_the_set_ones_outside_the_label_set():
    gold = [{"POS": 1.0, "MEH": 0.0}, {"MEH": 0.4}, {"NEW": 1.0, "ODD": 0.5}]
    assert unknown_gold_labels(gold, ["POS", "NEG"]) == ["NEW", "ODD"]
    assert unknown_gold_labels([{"POS": 1.0}], ["POS"]) == []


def test_exclusive_accuracy_skips_rows_with_no_gold_label():
    pairs = [({"a": 0.9, "b": 0.1}, {"a": 1.0, "b": 0.0}), ({"a": 0.2, "b": 0.8}, {"a": 0.0, "b": 0.0})]
    assert cats_accuracy(pairs, ["a", "b"], exclusive_classes=True) == 1.0


def test_textcat_score_adds_accuracy_to_spacys_scores():
    nlp = spacy.blank("en")
    labels = ["POS", "NEG"]
    examples = [
        example(nlp, {"POS": 0.8, "NEG": 0.2}, {"POS": 1.0, "NEG": 0.0}),
        example(nlp, {"POS": 0.6, "NEG": 0.4}, {"POS": 0.0, "NEG": 1.0}),
        example(nlp, {"POS": 0.1, "NEG": 0.9}, {"POS": 0.0, "NEG": 1.0}),
    ]
    scores = textcat_score(examples, labels=labels, exclusive_classes=True)
    assert scores["cats_accuracy"] == pytest.approx(2 / 3)
    assert scores["cats_f_per_type"]["POS"]["p"] == pytest.approx(1 / 2)
    assert "cats_macro_auc" in scores


def test_textcat_score_rejects_gold_labels_it_does_not_know():
    nlp = spacy.blank("en")
    with pytest.raises(SpacyMlmError, match=r"labels \['MEH'\] that the classifier does not know"):
        textcat_score([example(nlp, {"POS": 1.0}, {"POS": 0.0, "MEH": 1.0})], labels=["POS"])


def test_registered_scorer_is_textcat_score():
    assert registry.scorers.get("spacy_mlm.textcat_scorer.v1")() is textcat_score
