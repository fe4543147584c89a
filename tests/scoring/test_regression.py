import numpy
import pytest
from spacy.tokens import Doc
from spacy.training import Example
from spacy.vocab import Vocab

from spacy_mlm.errors import DataError
from spacy_mlm.scoring.regression import average_ranks, pearson, regression_score, rmse, spearman


def test_pearson_ignores_scale_and_offset():
    gold = [1.0, 2.0, 4.0, 3.0]
    assert pearson([3 * g - 7 for g in gold], gold) == pytest.approx(1.0)
    assert pearson([-g for g in gold], gold) == pytest.approx(-1.0)
    x, y = [1.0, 2.0, 3.0, 4.0], [1.0, 3.0, 2.0, 4.0]
    assert pearson(x, y) == pytest.approx(0.8)  # cov 1.0 over var 1.25
    assert pearson([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]) is None and pearson([1.0], [2.0]) is None


def test_spearman_uses_average_ranks_for_ties():
    numpy.testing.assert_allclose(average_ranks([10.0, 20.0, 20.0, 5.0]), [2.0, 3.5, 3.5, 1.0])
    assert spearman([1.0, 10.0, 100.0, 1000.0], [1.0, 2.0, 3.0, 4.0]) == pytest.approx(1.0)  # monotone, not linear
    assert pearson([1.0, 10.0, 100.0, 1000.0], [1.0, 2.0, 3.0, 4.0]) < 0.9
    # with ties: Pearson of the ranks [1, 2.5, 2.5, 4] and [1, 2, 3, 4]
    assert spearman([1.0, 2.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0]) == pytest.approx(4.5 / numpy.sqrt(4.5 * 5.0))


def test_rmse_and_length_mismatch():
    assert rmse([1.0, 3.0], [2.0, 1.0]) == pytest.approx(numpy.sqrt(2.5))
    with pytest.raises(DataError, match="2 predictions but 3 gold"):
        pearson([1.0, 2.0], [1.0, 2.0, 3.0])


def test_scorer_reads_cats_and_skips_missing_targets():
    vocab = Vocab()
    rows = [({"a": 1.0, "b": 0.0}, {"a": 1.5, "b": 2.0}), ({"a": 2.0, "b": 1.0}, {"a": 2.5}),
            ({"a": 3.0, "b": 2.0}, {"a": 3.5, "b": 4.0}), ({"a": 4.0, "b": 0.5}, {"a": 4.5, "b": 1.0})]
    examples = []
    for predicted, gold in rows:
        doc, ref = Doc(vocab, words=["x"]), Doc(vocab, words=["x"])
        doc.cats, ref.cats = predicted, gold
        examples.append(Example(doc, ref))
    scores = regression_score(examples, labels=["a", "b"])
    assert scores["regression_per_target"]["a"] == pytest.approx({"pearson": 1.0, "spearman": 1.0, "rmse": 0.5})
    b = scores["regression_per_target"]["b"]
    assert b["pearson"] == pytest.approx(pearson([0.0, 2.0, 0.5], [2.0, 4.0, 1.0]))  # the example without b left out
    assert scores["regression_pearson"] == pytest.approx((1.0 + b["pearson"]) / 2)
    assert scores["regression_rmse"] == pytest.approx((0.5 + b["rmse"]) / 2)
