"""mlm_regressor: learns real values (a toy linear relation), in the data's
units, saved with its target scaling; scored by Pearson/Spearman/RMSE."""
import random

import pytest
import spacy
from spacy.training import Example
from thinc.api import Adam

import spacy_mlm
from spacy_mlm.errors import SpacyMlmError
from spacy_mlm.scoring.regression import pearson


def linear_rows(n, seed):
    """Six words, k of them "good": y = 2k + 1 (1 to 13)."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        k = rng.randint(0, 6)
        words = ["good"] * k + ["bad"] * (6 - k)
        rng.shuffle(words)
        rows.append((" ".join(words), 2.0 * k + 1.0))
    return rows


def regressor_nlp(model_dir, pooling="doc_mean"):
    spacy.util.fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(model_dir)}})
    nlp.add_pipe("mlm_regressor", config={"model": {"tok2vec": {"pooling": pooling}}})
    return nlp


def examples(nlp, rows):
    return [Example.from_dict(nlp.make_doc(text), {"cats": {"y": y}}) for text, y in rows]


@pytest.fixture(scope="module")
def trained(tiny_model_dir):
    nlp = regressor_nlp(tiny_model_dir)
    egs = examples(nlp, linear_rows(64, seed=0))
    nlp.initialize(lambda: egs)
    optimizer, rng = Adam(1e-3), random.Random(0)
    for _ in range(60):
        nlp.update(rng.sample(egs, 16), sgd=optimizer, drop=0.0)
    return nlp


def test_regressor_learns_a_linear_relation(trained):
    regressor = trained.get_pipe("mlm_regressor")
    assert regressor.labels == ("y",)
    assert regressor.cfg["target_mean"][0] == pytest.approx(7.0, abs=1.0)  # standardized by the training data
    test = linear_rows(40, seed=1)
    predicted = [trained(text).cats["y"] for text, _ in test]
    gold = [y for _, y in test]
    assert pearson(predicted, gold) > 0.95
    assert max(abs(p - g) for p, g in zip(predicted, gold)) < 2.0  # in the data's units, not standardized
    scores = trained.evaluate(examples(trained, test))
    assert scores["regression_pearson"] > 0.95 and scores["regression_spearman"] > 0.9
    assert scores["regression_rmse"] < 1.0


def test_an_untrained_regressor_predicts_the_mean(tiny_model_dir):
    nlp = regressor_nlp(tiny_model_dir)
    egs = examples(nlp, [("good", 2.0), ("bad", 4.0), ("good bad", 9.0)])
    nlp.initialize(lambda: egs)
    assert nlp.get_pipe("mlm_regressor").cfg["target_mean"] == pytest.approx([5.0])
    assert nlp("good good").cats["y"] == pytest.approx(5.0, abs=0.5)  # small initial weights: near the mean


def test_saved_regressor_predicts_the_same(trained, tmp_path):
    trained.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")
    saved, kept = loaded.get_pipe("mlm_regressor").cfg, trained.get_pipe("mlm_regressor").cfg
    assert saved["labels"] == kept["labels"] and saved["target_mean"] == pytest.approx(kept["target_mean"])
    assert saved["target_scale"] == pytest.approx(kept["target_scale"])
    assert loaded("good good bad bad bad bad").cats["y"] == pytest.approx(
        trained("good good bad bad bad bad").cats["y"], abs=1e-5)


def test_pairs_scored_in_both_orders(trained):
    pairs = [("good good", "bad bad bad bad"), ("bad", "good good good good good")]
    forward = spacy_mlm.classify_pairs(trained, pairs)
    backward = spacy_mlm.classify_pairs(trained, [(b, a) for a, b in pairs])
    both = spacy_mlm.classify_pairs(trained, pairs, symmetric=True)
    assert any(f["y"] != pytest.approx(b["y"], abs=1e-4) for f, b in zip(forward, backward, strict=True))  # order matters
    for got, f, b in zip(both, forward, backward, strict=True):
        assert got["y"] == pytest.approx((f["y"] + b["y"]) / 2, abs=1e-5)


def test_bad_targets_are_named(tiny_model_dir):
    nlp = regressor_nlp(tiny_model_dir)
    with pytest.raises(SpacyMlmError, match="has no targets"):
        nlp.initialize(lambda: [Example.from_dict(nlp.make_doc("good"), {})])
    nlp = regressor_nlp(tiny_model_dir)
    egs = [Example.from_dict(nlp.make_doc("good"), {"cats": {"y": 1.0}}),
           Example.from_dict(nlp.make_doc("bad"), {"cats": {"y": float("nan")}})]
    with pytest.raises(SpacyMlmError, match=r"example 1 \('bad'\) has cats\['y'\] = nan"):
        nlp.initialize(lambda: egs)


def test_a_pair_regressor_warns_once_on_single_texts(tiny_model_dir, caplog):
    """Trained on pairs, given a single text: one warning naming the command that scores pairs."""
    nlp = regressor_nlp(tiny_model_dir)
    egs = [Example.from_dict(spacy_mlm.make_pair_doc(nlp, a, b), {"cats": {"y": y}})
           for a, b, y in [("good", "good good", 1.0), ("bad", "good", 3.0), ("good bad", "bad", 2.0)]]
    nlp.initialize(lambda: egs)
    assert nlp.get_pipe("mlm_regressor").cfg["pair_input"] is True
    with caplog.at_level("WARNING"):
        nlp("good good bad")
        nlp("bad good")
    assert sum("trained on sentence pairs" in r.getMessage() for r in caplog.records) == 1
    assert "spacy_mlm evaluate" in caplog.text


@pytest.mark.parametrize("edit", ["target_added", "scale_dropped"])
def test_a_saved_regressor_whose_targets_disagree_with_its_weights_fails_in_spacy_load(trained, tmp_path, edit):
    """An edited or mixed cfg would load and then fail at the first nlp(text)
    with a tensor-size error (a target added), or scale with a missing value."""
    import srsly

    from spacy_mlm.errors import ModelLoadError

    trained.to_disk(tmp_path / "pipeline")
    cfg_path = tmp_path / "pipeline" / "mlm_regressor" / "cfg"
    cfg = srsly.read_json(cfg_path)
    if edit == "target_added":
        cfg["labels"] = cfg["labels"] + ["z"]
        expected = r"has the targets \['y', 'z'\] but the weights score 1 targets"
    else:
        cfg["target_scale"] = []
        expected = r"has the targets \['y'\] but 0 values in target_scale"
    srsly.write_json(cfg_path, cfg)
    with pytest.raises(ModelLoadError, match=expected) as info:
        spacy.load(tmp_path / "pipeline")
    assert info.value.path == str(cfg_path)
