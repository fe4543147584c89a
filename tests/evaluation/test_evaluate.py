"""evaluate_pipeline and its parts on pipelines whose predictions are known in
advance (an entity ruler, a keyword classifier), so every number is hand-counted."""
import json
from pathlib import Path

import numpy
import pytest
import spacy
from spacy.language import Language

from spacy_mlm.errors import DataFormatError, SpacyMlmError
from spacy_mlm.evaluation.evaluate import (
    component_assigning,
    detect_task,
    evaluate_pipeline,
    load_gold_entities,
    predict_entities,
    resolve_task,
)

# Two CoNLL documents: PER+LOC in each (Anna Berg / Oslo, Peter Grant / Paris).
TWO_DOCUMENTS = Path(__file__).parents[1] / "scoring" / "two_documents.conll"


def ruler_pipeline(patterns):
    nlp = spacy.blank("en")
    nlp.add_pipe("entity_ruler").add_patterns([{"label": label, "pattern": text} for text, label in patterns])
    return nlp


@Language.factory("test_keyword_classifier", assigns=["doc.cats"], default_config={"labels": [], "keyword": ""})
def make_keyword_classifier(nlp, name, labels, keyword):
    return KeywordClassifier(labels, keyword)


class KeywordClassifier:
    """First label if the doc contains `keyword`, else the second."""

    def __init__(self, labels, keyword):
        self.labels = tuple(labels)
        self.keyword = keyword

    def __call__(self, doc):
        hit = self.keyword in doc.text
        doc.cats = {self.labels[0]: float(hit), self.labels[1]: float(not hit)}
        return doc


def classifier_pipeline(labels, keyword):
    nlp = spacy.blank("en")
    nlp.add_pipe("test_keyword_classifier", config={"labels": list(labels), "keyword": keyword})
    return nlp


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf8")
    return path


def test_ner_scores_are_hand_counted():
    # "Anna" for "Anna Berg": 1 FP + 1 FN; Oslo, Paris: TP; "Peter Grant" missed: FN.
    nlp = ruler_pipeline([("Anna", "PER"), ("Oslo", "LOC"), ("Paris", "LOC")])
    evaluation = evaluate_pipeline(nlp, TWO_DOCUMENTS)
    assert evaluation.task == "ner" and evaluation.baseline is None and evaluation.bootstrap is None
    model = evaluation.model
    assert (model.scores["tp"], model.scores["fp"], model.scores["fn"]) == (2, 1, 2)
    assert model.metric == "ents_f" and model.value == pytest.approx(4 / 7)
    assert model.scores["ents_per_type"]["LOC"]["f"] == 1.0
    assert model.counts.tolist() == [[1, 1, 1], [1, 0, 1]]
    assert model.n_examples == 2
    assert [entities for _, entities in model.entity_docs] == [[(0, 1, "PER"), (4, 5, "LOC")], [(4, 5, "LOC")]]


def test_predict_entities_never_sees_the_gold_annotation():
    nlp = spacy.blank("en")  # no component: whatever comes back came from the gold docs
    gold_docs, gold = load_gold_entities(nlp, TWO_DOCUMENTS)
    assert gold == [[(0, 2, "PER"), (4, 5, "LOC")], [(0, 2, "PER"), (4, 5, "LOC")]]
    assert predict_entities(nlp, gold_docs) == [[], []]


def test_baseline_gets_the_paired_bootstrap():
    nlp = ruler_pipeline([("Anna Berg", "PER"), ("Oslo", "LOC"), ("Peter Grant", "PER"), ("Paris", "LOC")])
    same = evaluate_pipeline(nlp, TWO_DOCUMENTS, baseline=nlp, n_samples=20)
    assert same.bootstrap.delta == 0.0 and same.bootstrap.p_value == 1.0 and same.statistic == "F1"
    weaker = ruler_pipeline([("Oslo", "LOC")])
    evaluation = evaluate_pipeline(nlp, TWO_DOCUMENTS, "ner", weaker, n_samples=50, seed=3, confidence=0.9)
    result = evaluation.bootstrap
    assert result.f1_a == 1.0 and result.f1_b == pytest.approx(2 / 5)  # 1 TP, 0 FP, 3 FN
    assert result.delta == pytest.approx(3 / 5) and result.n_samples == 50 and result.confidence == 0.9
    assert evaluation.baseline.value == pytest.approx(2 / 5)


def test_no_documents_is_an_error_naming_the_file(tmp_path):
    empty = tmp_path / "empty.conll"
    empty.write_text("-DOCSTART- -X- -X- O\n\n", encoding="utf8")
    with pytest.raises(DataFormatError, match="empty.conll: no documents to score"):
        evaluate_pipeline(ruler_pipeline([("Oslo", "LOC")]), empty)


def test_classifier_accuracy_confusion_matrix_and_counts(tmp_path):
    data = write_jsonl(tmp_path / "dev.jsonl", [
        {"text": "a good film", "label": "POS"},
        {"text": "a bad film", "label": "NEG"},
        {"text": "not good at all", "label": "NEG"},
        {"text": "lovely", "label": "POS"},
        {"text": "good", "label": "POS"},
    ])
    nlp = classifier_pipeline(["POS", "NEG"], "good")
    evaluation = evaluate_pipeline(nlp, data)
    assert evaluation.task == "textcat" and evaluation.statistic == "accuracy"
    model = evaluation.model
    assert model.metric == "cats_accuracy" and model.value == pytest.approx(3 / 5)
    assert model.labels == ["POS", "NEG"]
    assert model.confusion_matrix.tolist() == [[2, 1], [1, 1]]  # rows gold POS, NEG
    assert model.counts[:, 0].tolist() == [1, 1, 0, 0, 1]
    assert "cats_macro_f" in model.scores


def test_nli_pairs_are_classified_as_pairs(tmp_path):
    data = write_jsonl(tmp_path / "nli.jsonl", [
        {"premise": "A man sleeps.", "hypothesis": "A person rests.", "label": "entailment"},
        {"premise": "A man sleeps.", "hypothesis": "A man runs.", "label": "not_entailment"},
    ])
    nlp = classifier_pipeline(["entailment", "not_entailment"], "rests")
    evaluation = evaluate_pipeline(nlp, data)
    assert evaluation.task == "nli" and evaluation.model.value == 1.0


def test_nli_file_without_labelled_rows_is_an_error_naming_the_file(tmp_path):
    data = write_jsonl(tmp_path / "unlabelled.jsonl", [{"premise": "A man sleeps.", "hypothesis": "A man runs.", "label": "-"}])
    nlp = classifier_pipeline(["entailment", "not_entailment"], "rests")
    with pytest.raises(DataFormatError, match=r"unlabelled.jsonl: no labelled sentence pairs to score: .*1 unlabeled"):
        evaluate_pipeline(nlp, data, "nli")


def test_gold_label_the_classifier_does_not_know(tmp_path):
    data = write_jsonl(tmp_path / "dev.jsonl", [{"text": "fine", "label": "MEH"}])
    with pytest.raises(SpacyMlmError, match=r"labels \['MEH'\] that the pipeline does not know"):
        evaluate_pipeline(classifier_pipeline(["POS", "NEG"], "good"), data)


def test_task_detection_and_checks():
    ner = ruler_pipeline([("Oslo", "LOC")])
    textcat = classifier_pipeline(["POS", "NEG"], "good")
    nli = classifier_pipeline(["entailment", "neutral", "contradiction"], "x")
    assert component_assigning(ner, "doc.ents") == "entity_ruler" and component_assigning(ner, "doc.cats") is None
    assert [detect_task(nlp) for nlp in (ner, textcat, nli)] == ["ner", "textcat", "nli"]
    assert resolve_task(textcat, "auto") == "textcat" and resolve_task(nli, "textcat") == "textcat"
    with pytest.raises(SpacyMlmError, match="task ner needs a component that sets doc.ents"):
        resolve_task(textcat, "ner")
    with pytest.raises(SpacyMlmError, match="task must be one of"):
        resolve_task(ner, "pos")
    with pytest.raises(SpacyMlmError, match="sets neither doc.ents nor doc.cats"):
        detect_task(spacy.blank("en"))


def test_baseline_must_do_the_same_task():
    with pytest.raises(SpacyMlmError, match="task ner needs"):
        evaluate_pipeline(ruler_pipeline([("Oslo", "LOC")]), TWO_DOCUMENTS, baseline=classifier_pipeline(["A", "B"], "x"))


def test_counts_are_what_the_bootstrap_resamples():
    nlp = ruler_pipeline([("Oslo", "LOC")])
    model = evaluate_pipeline(nlp, TWO_DOCUMENTS).model
    total = model.counts.sum(axis=0)
    assert numpy.array_equal(total, [model.scores["tp"], model.scores["fp"], model.scores["fn"]])
