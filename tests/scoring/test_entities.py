import numpy
import pytest

from spacy_mlm.errors import DataError
from spacy_mlm.scoring.entities import count_matches, f1_from_counts, per_doc_counts, prf, score_entities


def test_partial_span_is_one_false_positive_and_one_false_negative():
    # "Jane Villanueva" (tokens 0-2) predicted as just "Jane"
    gold = [[(0, 2, "PER")]]
    pred = [[(0, 1, "PER")]]
    scores = score_entities(gold, pred)
    assert (scores["tp"], scores["fp"], scores["fn"]) == (0, 1, 1)
    assert scores["ents_p"] == 0.0 and scores["ents_r"] == 0.0 and scores["ents_f"] == 0.0


def test_hand_counted_corpus():
    gold = [
        [(0, 2, "PER"), (4, 5, "LOC")],  # Jane Villanueva ... Miami
        [(1, 3, "ORG")],
        [],
    ]
    pred = [
        [(0, 1, "PER"), (4, 5, "LOC")],  # partial PER, right LOC
        [(1, 3, "LOC")],  # right span, wrong type
        [(0, 1, "MISC")],  # spurious
    ]
    s = score_entities(gold, pred)
    # tp = 1 (Miami); fp = Jane, ORG-as-LOC, MISC = 3; fn = Jane Villanueva, ORG = 2
    assert (s["tp"], s["fp"], s["fn"]) == (1, 3, 2)
    assert s["ents_p"] == pytest.approx(1 / 4)
    assert s["ents_r"] == pytest.approx(1 / 3)
    assert s["ents_f"] == pytest.approx(2 * (1 / 4) * (1 / 3) / (1 / 4 + 1 / 3))
    assert s["ents_per_type"]["LOC"] == {"p": 0.5, "r": 1.0, "f": pytest.approx(2 / 3), "support": 1}
    assert s["ents_per_type"]["PER"] == {"p": 0.0, "r": 0.0, "f": 0.0, "support": 1}
    assert s["ents_per_type"]["ORG"]["support"] == 1 and s["ents_per_type"]["ORG"]["r"] == 0.0
    assert s["ents_per_type"]["MISC"]["support"] == 0
    numpy.testing.assert_array_equal(per_doc_counts(gold, pred), [[1, 1, 1], [0, 1, 1], [0, 1, 0]])
    assert f1_from_counts(per_doc_counts(gold, pred).sum(0)) == pytest.approx(s["ents_f"])


def test_matches_spacy_scorer():
    import spacy
    from spacy.scorer import get_ner_prf
    from spacy.tokens import Span
    from spacy.training import Example

    nlp = spacy.blank("en")
    gold = nlp.make_doc("Jane Villanueva flew to Miami with Rogelio")
    pred = nlp.make_doc(gold.text)
    gold.ents = [Span(gold, 0, 2, "PER"), Span(gold, 4, 5, "LOC"), Span(gold, 6, 7, "PER")]
    pred.ents = [Span(pred, 0, 1, "PER"), Span(pred, 4, 5, "LOC"), Span(pred, 6, 7, "ORG")]
    ours = score_entities([[(e.start, e.end, e.label_) for e in gold.ents]], [[(e.start, e.end, e.label_) for e in pred.ents]])
    theirs = get_ner_prf([Example(pred, gold)])
    for key in ("ents_p", "ents_r", "ents_f"):
        assert ours[key] == pytest.approx(theirs[key])


def test_edge_cases():
    assert prf(0, 0, 0) == (0.0, 0.0, 0.0)
    assert count_matches([(0, 1, "A"), (0, 1, "A")], [(0, 1, "A")]) == (1, 0, 0)  # sets
    assert f1_from_counts(numpy.zeros((2, 3))).tolist() == [0.0, 0.0]
    with pytest.raises(DataError, match="gold documents"):
        score_entities([[]], [])
