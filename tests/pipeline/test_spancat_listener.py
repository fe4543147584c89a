"""spaCy's own spancat listening to mlm_encoder (for overlapping or nested
spans), with the component block docs/ner.md gives, trained by `spacy train`."""
import re
from pathlib import Path

import spacy
from spacy.tokens import DocBin, Span
from thinc.api import Config

import spacy_mlm  # noqa: F401

NER_DOC = Path(__file__).parents[2] / "docs" / "ner.md"
SPANS = [("Anna Berg lives in New York City .", [(0, 2, "PER"), (4, 7, "LOC"), (4, 6, "LOC")]),
         ("Peter Grant flew to Oslo .", [(0, 2, "PER"), (4, 5, "LOC")])]


def documented_spancat() -> Config:
    """The [components.spancat] block of docs/ner.md."""
    block = re.search(r"```ini\n(\[components\.spancat\].*?)```", NER_DOC.read_text(encoding="utf8"), re.S).group(1)
    return Config().from_str("[components]\n" + block)["components"]["spancat"]


def test_spacy_train_trains_spancat_on_the_encoder(tiny_model_dir, tmp_path):
    from spacy.cli.train import train

    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(tiny_model_dir)}})
    settings = documented_spancat()
    settings.pop("factory")
    nlp.add_pipe("spancat", config=settings)
    docs = DocBin()
    for text, spans in SPANS:  # overlapping gold spans: New York City and New York
        doc = nlp.make_doc(text)
        doc.spans["sc"] = [Span(doc, s, e, label) for s, e, label in spans]
        docs.add(doc)
    corpus = tmp_path / "train.spacy"
    docs.to_disk(corpus)
    nlp.config.to_disk(tmp_path / "config.cfg")
    train(tmp_path / "config.cfg", tmp_path / "out", overrides={
        "paths.train": str(corpus), "paths.dev": str(corpus), "training.max_steps": 4, "training.eval_frequency": 2})
    trained = spacy.load(tmp_path / "out" / "model-last")
    assert trained.pipe_names == ["mlm_encoder", "spancat"]
    assert "spans_sc_f" in trained.meta["performance"]
    doc = trained(SPANS[0][0])
    assert len(doc.spans["sc"].attrs["scores"]) == len(doc.spans["sc"])
