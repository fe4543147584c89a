"""mlm_senses: WiC pairs read for spacy train, the sense head trained through
`spacy train` (configs/senses.cfg's template on the tiny encoder), saved and
loaded, and token similarity and the sense inventory in the projected space."""
from pathlib import Path

import numpy
import pytest
import spacy
import torch
from spacy.tokens import DocBin
from spacy.util import registry

import spacy_mlm  # noqa: F401
from spacy_mlm.models.senses import sense_head
from spacy_mlm.readers.wic import SAME_SENSE, SENSE_PAIR_KEY
from spacy_mlm.training.config_templates import render_pipeline_config

WIC = Path(__file__).resolve().parents[2] / "project" / "assets_default" / "wic"
TRAIN, DEV = WIC / "train" / "train.data.txt", WIC / "dev" / "dev.data.txt"


def test_wic_corpus_gives_pair_docs_with_both_targets_and_survives_docbin():
    nlp = spacy.blank("en")
    examples = list(registry.readers.get("spacy_mlm.WiCCorpus.v1")(TRAIN, limit=3)(nlp))
    eg = examples[0]  # bank N 6-7: "She opened an account at the bank ." / "He works as a clerk in a bank downtown ."
    first, second = eg.predicted.spans[SENSE_PAIR_KEY]
    assert (first.text, second.text) == ("bank", "bank") and (first.start, second.start - second.doc._.mlm_pair_start) == (6, 7)
    assert first.end <= eg.predicted._.mlm_pair_start <= second.start
    assert eg.reference.cats == {SAME_SENSE: 1.0}
    docs = list(DocBin(docs=[eg.reference], store_user_data=True).get_docs(nlp.vocab))
    assert [s.text for s in docs[0].spans[SENSE_PAIR_KEY]] == ["bank", "bank"]
    assert docs[0]._.mlm_pair_start == eg.predicted._.mlm_pair_start and docs[0].cats == {SAME_SENSE: 1.0}


def test_wic_corpus_needs_the_gold_file(tmp_path):
    (tmp_path / "x.data.txt").write_text(TRAIN.read_text(encoding="utf8"), encoding="utf8")
    with pytest.raises(spacy_mlm.errors.DataFormatError, match="x.gold.txt"):
        list(registry.readers.get("spacy_mlm.WiCCorpus.v1")(tmp_path / "x.data.txt")(spacy.blank("en")))


@pytest.fixture(scope="module")
def trained(tiny_model_dir, tmp_path_factory):
    """configs/senses.cfg's template on the tiny encoder, trained by spacy train for a few steps."""
    from spacy.cli.train import train

    out = tmp_path_factory.mktemp("senses")
    config = out / "senses.cfg"
    config.write_text(render_pipeline_config("senses", str(tiny_model_dir)), encoding="utf8")
    overrides = {"paths.train": str(TRAIN), "paths.dev": str(DEV), "training.max_steps": 6,
                 "training.eval_frequency": 3, "training.logger.progress_interval": 0}
    train(config, out / "training", overrides=overrides)
    return out / "training" / "model-last"


def test_spacy_train_trains_the_head_and_stores_a_tuned_threshold(trained):
    nlp = spacy.load(trained)
    senses = nlp.get_pipe("senses")
    head = sense_head(senses.model)
    assert float(head.scale.detach().abs().sum()) > 0 and float(head.static.detach()) != 0  # moved from zero
    # the threshold was tuned during training (not the initial 0.5), and the dev accuracy
    # spacy train reported is that of the saved head with that threshold
    stored = senses.threshold
    assert stored != 0.5
    meta = spacy.util.load_meta(trained / "meta.json")
    dev = list(registry.readers.get("spacy_mlm.WiCCorpus.v1")(DEV)(nlp))
    assert nlp.evaluate(dev)["wic_acc"] == pytest.approx(meta["performance"]["wic_acc"])
    # fit_threshold re-tunes it on the head's scores now: at least as good as the stored one on those pairs
    examples = list(registry.readers.get("spacy_mlm.WiCCorpus.v1")(TRAIN)(nlp))
    before = nlp.evaluate(examples)["wic_acc"]
    threshold, accuracy = senses.fit_threshold(examples)
    assert senses.threshold == threshold and accuracy >= before
    assert nlp.evaluate(examples)["wic_acc"] == pytest.approx(accuracy)


def test_a_pair_is_scored_as_its_sentences_apart(trained):
    """A pair Doc's target vectors are those of each sentence processed alone,
    so token.similarity across two Docs means what the head was trained on."""
    nlp = spacy.load(trained)
    eg = next(iter(registry.readers.get("spacy_mlm.WiCCorpus.v1")(DEV, limit=1)(nlp)))
    pair = nlp(eg.predicted)
    first, second = pair.spans[SENSE_PAIR_KEY]
    start = pair._.mlm_pair_start
    a, b = nlp(pair[:start].text), nlp(pair[start:].text)
    alone = a[first.start].similarity(b[second.start - start])
    assert pair._.sense_similarity == pytest.approx(alone, abs=1e-5)
    assert pair._.same_sense == (pair._.sense_similarity >= nlp.get_pipe("senses").threshold)


def test_save_and_load_keep_the_head_the_threshold_and_the_inventory(trained, tmp_path):
    nlp = spacy.load(trained)
    senses = nlp.get_pipe("senses")
    senses.cfg["threshold"] = 0.123
    doc = nlp("The river bank was muddy.")
    senses.add_sense_examples([(doc[2], "bank%shore")])
    nlp.to_disk(tmp_path / "saved")
    loaded = spacy.load(tmp_path / "saved")
    assert loaded.get_pipe("senses").threshold == 0.123
    again = loaded("The river bank was muddy.")
    numpy.testing.assert_allclose(again._.mlm_vectors, doc._.mlm_vectors, atol=1e-6)
    assert again[2]._.sense == "bank%shore"
    from_bytes = spacy.load(trained).get_pipe("senses").from_bytes(senses.to_bytes())
    assert from_bytes.threshold == 0.123 and from_bytes.senses.senses("bank") == ["bank%shore"]


def test_similarity_and_the_inventory_use_the_projected_space(trained):
    nlp = spacy.load(trained)
    head = sense_head(nlp.get_pipe("senses").model)
    with torch.no_grad():
        head.scale.copy_(torch.linspace(-0.9, 3.0, head.scale.numel()))
    river, money = nlp("The river bank was muddy."), nlp("She sat in the bank on Main Street.")
    layers = river._.mlm_encoding.layers  # every hidden state, pooled by hand: the mean of each token's pieces
    tokens = torch.from_numpy(numpy.stack([river._.mlm_encoding.token_vectors("mean", k) for k in range(len(layers))], axis=1))
    sentences = tokens[tokens[:, -1].abs().sum(dim=-1) > 0].mean(dim=0).expand_as(tokens)
    normalize = torch.nn.functional.normalize
    with torch.no_grad():  # SenseHead.v3 written out: [norm((1+s) v_a(x)), e^g norm((1+r) v_b(y))]
        word = torch.einsum("s,sw->w", torch.softmax(head.layer_logits, 0), tokens[2]) - head.static * tokens[2, 0]
        sent = (torch.einsum("s,sw->w", torch.softmax(head.sentence_logits, 0), sentences[2])
                - head.sentence_static * sentences[2, 0])
        expected = torch.cat([normalize(word * (1 + head.scale), dim=0),
                              head.context.exp() * normalize(sent * (1 + head.sentence_scale), dim=0)]).cpu().numpy()
        unscaled = torch.cat([normalize(word, dim=0), head.context.exp() * normalize(sent * (1 + head.sentence_scale), dim=0)]).cpu().numpy()
    assert river[2].vector.shape == (2 * tokens.shape[-1],)
    numpy.testing.assert_allclose(river[2].vector, expected, rtol=1e-4, atol=1e-5)
    assert not numpy.allclose(river[2].vector, unscaled, atol=1e-3)
    senses = nlp.get_pipe("senses")
    senses.add_sense_examples([(river[2], "shore"), (money[3], "money")])
    numpy.testing.assert_allclose(senses.senses.centroid("bank", "shore"), river[2].vector, rtol=1e-5, atol=1e-6)
    assert nlp("A muddy bank of the river.")[2]._.sense in ("shore", "money")
    cosine = float(numpy.dot(river[2].vector, money[3].vector)
                   / (numpy.linalg.norm(river[2].vector) * numpy.linalg.norm(money[3].vector)))
    assert river[2].similarity(money[3]) == pytest.approx(cosine, abs=1e-5)
