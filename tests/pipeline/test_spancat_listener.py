"""spaCy's own spancat listening to mlm_encoder (for overlapping or nested
spans): the config `init-config --task spancat` writes, trained by `spacy train`."""
import spacy
from spacy.tokens import DocBin, Span
from typer.testing import CliRunner

from spacy_mlm.cli import app

SPANS = [("Anna Berg lives in New York City .", [(0, 2, "PER"), (4, 7, "LOC"), (4, 6, "LOC")]),
         ("Peter Grant flew to Oslo .", [(0, 2, "PER"), (4, 5, "LOC")])]


def test_spacy_train_trains_the_init_config_spancat_on_the_encoder(tiny_model_dir, tmp_path):
    from spacy.cli.train import train

    config = tmp_path / "spancat.cfg"
    result = CliRunner().invoke(app, ["init-config", str(config), "--task", "spancat", "--encoder",
                                      str(tiny_model_dir), "--precision", "fp32"])
    assert result.exit_code == 0, result.output
    vocab = spacy.blank("en")
    docs = DocBin()
    for text, spans in SPANS:  # overlapping gold spans: New York City and New York
        doc = vocab.make_doc(text)
        doc.spans["sc"] = [Span(doc, s, e, label) for s, e, label in spans]
        docs.add(doc)
    corpus = tmp_path / "train.spacy"
    docs.to_disk(corpus)
    train(config, tmp_path / "out", overrides={"paths.train": str(corpus), "paths.dev": str(corpus),
                                               "training.max_steps": 4, "training.eval_frequency": 2,
                                               "training.logger.progress_interval": 0})
    trained = spacy.load(tmp_path / "out" / "model-last")
    assert trained.pipe_names == ["encoder", "spancat"]
    assert trained.config["components"]["spancat"]["model"]["tok2vec"]["upstream"] == "encoder"
    assert "spans_sc_f" in trained.meta["performance"]
    doc = trained(SPANS[0][0])
    assert len(doc.spans["sc"].attrs["scores"]) == len(doc.spans["sc"])
