"""Every shipped config validates: spaCy training configs through `spacy debug
config` (every object in the tree built, [initialize] and [training] checked),
both as shipped and after `spacy init fill-config`'s auto-fill, and
an `nlp` built from them; the pretraining config through its own loader. The
encoder path points at the tiny test model, so nothing large is loaded."""
from pathlib import Path

import pytest
import spacy
from spacy.cli.debug_config import debug_config
from thinc.api import Config

import spacy_mlm  # noqa: F401
from spacy_mlm.pretraining.config import load_pretraining_config

CONFIGS = sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.cfg"))


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
        "paths.source": str(tiny_model_dir),
        "paths.train": str(data / "train.jsonl"),
        "paths.dev": str(data / "dev.jsonl"),
        "variables.encoder_width": 32,
    }


def test_there_are_configs():
    names = {p.name for p in CONFIGS}
    assert {"ner.cfg", "ner_crf.cfg", "pretrain.cfg"} <= names


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_config_validates(path, overrides, capsys, tmp_path):
    raw = Config().from_disk(path, interpolate=False)
    used = present(raw, overrides)
    if "nlp" not in raw:
        config = load_pretraining_config(path, used)
        assert config["pretraining"]["source"] == str(overrides["paths.source"])
        return
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
