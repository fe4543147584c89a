import numpy
import pytest

from spacy_mlm.errors import DataError
from spacy_mlm.scoring.bootstrap import paired_bootstrap
from spacy_mlm.scoring.classes import confusion_matrix, correctness_counts
from spacy_mlm.scoring.entities import f1_from_counts
from spacy_mlm.util.charts import confusion_matrix_chart, grouped_bar_chart

GOLD = ["pos", "neg", "neg", "pos", "neu", "pos"]
PRED = ["pos", "pos", "neg", "neg", "neu", "pos"]


def test_confusion_matrix_rows_are_gold_columns_predicted():
    m = confusion_matrix(GOLD, PRED, ["neg", "neu", "pos"])
    assert m.tolist() == [[1, 0, 1], [0, 1, 0], [1, 0, 2]]
    assert m.sum() == len(GOLD) and numpy.trace(m) == 4


def test_confusion_matrix_rejects_unknown_labels_and_lengths():
    with pytest.raises(DataError, match="not in the label set"):
        confusion_matrix(["a"], ["b"], ["a"])
    with pytest.raises(DataError, match="gold labels"):
        confusion_matrix(["a"], [], ["a"])


def test_f1_of_correctness_counts_is_accuracy():
    counts = correctness_counts(GOLD, PRED)
    assert counts.tolist()[:2] == [[1, 0, 0], [0, 1, 1]]
    assert f1_from_counts(counts.sum(axis=0)) == pytest.approx(4 / 6)


def test_bootstrap_on_correctness_counts_compares_accuracies():
    rng = numpy.random.default_rng(0)
    gold = list(rng.choice(["a", "b"], size=300))
    good = [g if rng.random() < 0.9 else ("b" if g == "a" else "a") for g in gold]
    poor = [g if rng.random() < 0.6 else ("b" if g == "a" else "a") for g in gold]
    result = paired_bootstrap(correctness_counts(gold, good), correctness_counts(gold, poor), n_samples=300, seed=1)
    acc_good = numpy.mean([g == p for g, p in zip(gold, good)])
    acc_poor = numpy.mean([g == p for g, p in zip(gold, poor)])
    assert result.f1_a == pytest.approx(acc_good) and result.f1_b == pytest.approx(acc_poor)
    assert result.ci_low > 0 and result.p_value < 0.01


def test_charts_are_png(tmp_path):
    grouped_bar_chart({"model": {"PER": 0.9, "LOC": 0.5}, "baseline": {"PER": 0.8}}, tmp_path / "f1.png", "F1")
    confusion_matrix_chart(confusion_matrix(GOLD, PRED, ["neg", "neu", "pos"]), ["neg", "neu", "pos"],
                           tmp_path / "cm.png", "cm")
    for name in ("f1.png", "cm.png"):
        data = (tmp_path / name).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 1000
