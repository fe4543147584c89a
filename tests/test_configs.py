"""Every shipped pipeline config validates through `spacy debug config` (every
object in the tree built, [initialize] and [training] checked), both as shipped
and after `spacy init fill-config`'s auto-fill, and an `nlp` built from them.
The encoder path points at the tiny test model, so nothing large is loaded. The
pretraining config lives apart, in configs/pretraining/ (tests/pretraining/test_config.py)."""
from pathlib import Path

import pytest
import spacy
from spacy.cli.debug_config import debug_config
from thinc.api import Config

import spacy_mlm  # noqa: F401

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"
CONFIGS = sorted(CONFIG_DIR.glob("*.cfg"))


def present(config: Config, overrides: dict) -> dict:
    """The overrides whose section and key exist in `config` (spaCy refuses new ones)."""
    kept = {}
    for dotted, value in overrides.items():
        section, key = dotted.rsplit(".", 1)
        block = config
        for part in section.split("."):
            block = block.get(part, {}) if isinstance(block, dict) else {}
        if key in block:
            kept[dotted] = value
    return kept


@pytest.fixture(scope="module")
def overrides(tiny_model_dir, tmp_path_factory):
    data = tmp_path_factory.mktemp("config_data")
    for name in ("train", "dev"):
        (data / f"{name}.jsonl").write_text('{"text": "a", "label": "x"}\n', encoding="utf8")
    return {
        "paths.encoder": str(tiny_model_dir),
        "paths.train": str(data / "train.jsonl"),
        "paths.dev": str(data / "dev.jsonl"),
    }


def test_there_are_configs_and_all_are_pipelines():
    names = {p.name for p in CONFIGS}
    assert {"ner.cfg", "textcat.cfg", "nli.cfg"} <= names
    assert all("nlp" in Config().from_disk(path, interpolate=False) for path in CONFIGS)
    assert (CONFIG_DIR / "pretraining" / "pretrain.cfg").is_file()


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_config_validates(path, overrides, capsys, tmp_path):
    raw = Config().from_disk(path, interpolate=False)
    used = present(raw, overrides)
    debug_config(path, overrides=used)  # as shipped: complete, no fill-config needed
    assert "Config is valid" in capsys.readouterr().out
    config = spacy.util.load_config(path, overrides=used)
    nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
    filled = tmp_path / path.name
    nlp.config.to_disk(filled)  # what `spacy init fill-config` writes
    debug_config(filled)  # exits (SystemExit) on a validation error
    assert "Config is valid" in capsys.readouterr().out
    assert nlp.pipe_names == list(config["nlp"]["pipeline"])
    encoders = [name for name in nlp.pipe_names if nlp.get_pipe_meta(name).factory == "mlm_encoder"]
    assert encoders, f"{path.name} has no mlm_encoder component"
    for name in encoders:
        assert nlp.get_pipe(name).model.attrs["path"] == str(overrides["paths.encoder"])


def test_ner_crf_variant_is_an_override_and_no_size_is_written_down(overrides):
    """The CRF NER is `configs/ner.cfg` with `components.ner.model.crf = true`, and a
    config naming another encoder (the tiny one: width 32, 2 layers, where
    the configs were written for MiniLM's 384 and 6) initializes and trains
    without editing a number."""
    from spacy.tokens import Span
    from spacy.training import Example

    from spacy_mlm.models.tagger import tagger_head

    config = spacy.util.load_config(
        CONFIG_DIR / "ner.cfg", overrides={**overrides, "components.ner.model.crf": True}, interpolate=True
    )
    nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
    ref = nlp.make_doc("Anna lives in Oslo")
    ref.ents = [Span(ref, 0, 1, label="PER"), Span(ref, 3, 4, label="LOC")]
    egs = [Example(nlp.make_doc(ref.text), ref)]
    optimizer = nlp.initialize(lambda: egs)
    losses = nlp.update(egs, sgd=optimizer)
    assert losses["ner"] > 0
    ner = nlp.get_pipe("ner")
    assert ner.model.get_ref("tok2vec").get_dim("nO") == 32
    assert tagger_head(ner.model).transitions.shape == (5, 5)
