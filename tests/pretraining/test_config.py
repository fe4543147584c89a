from pathlib import Path

import pytest

from spacy_mlm.errors import SpacyMlmError
from spacy_mlm.pretraining.config import DEFAULT_CONFIG, load_pretraining_config

REPO = Path(__file__).resolve().parents[2]


SHIPPED = REPO / "configs" / "pretraining" / "pretrain.cfg"


def test_shipped_config_is_the_defaults():
    shipped = load_pretraining_config(SHIPPED)
    assert shipped == load_pretraining_config(None)
    assert load_pretraining_config(SHIPPED, {"paths.source": "m"})["pretraining"]["source"] == "m"
    assert shipped["pretraining"]["masking"]["rate"] == 0.15
    assert shipped["pretraining"]["corpus"]["sampling_alpha"] == 0.3


def test_file_then_overrides(tmp_path):
    path = tmp_path / "c.cfg"
    path.write_text("[paths]\nsource = \"m\"\n\n[pretraining]\nmax_steps = 7\n\n[pretraining.corpus]\n\n"
                    "[pretraining.corpus.train]\nen = \"a.txt\"\nde = \"b.txt\"\n")
    config = load_pretraining_config(path, {"pretraining.corpus.train.de": "c.txt", "pretraining.optimizer.learning_rate": 0.5})
    cfg = config["pretraining"]
    assert cfg["max_steps"] == 7 and cfg["source"] == "m"  # interpolated from [paths]
    assert cfg["corpus"]["train"] == {"en": "a.txt", "de": "c.txt"}
    assert cfg["optimizer"]["learning_rate"] == 0.5 and cfg["batch_size"] == 32  # the rest from defaults


@pytest.mark.parametrize("text, overrides", [
    ("[pretraining]\nmax_stepz = 3\n", {}),
    ("[pretraining]\n", {"pretraining.masking.ratee": 0.2}),
    ("[pretraining\n", {}),
])
def test_mistakes_are_reported(tmp_path, text, overrides):
    path = tmp_path / "c.cfg"
    path.write_text(text)
    with pytest.raises(SpacyMlmError):
        load_pretraining_config(path, overrides)


def test_missing_file():
    with pytest.raises(SpacyMlmError, match="not found"):
        load_pretraining_config("/nonexistent/pretrain.cfg")


def test_defaults_document_every_section():
    for section in ("[pretraining.corpus]", "[pretraining.masking]", "[pretraining.optimizer]", "[pretraining.scratch]"):
        assert section in DEFAULT_CONFIG


def test_a_byte_order_mark_is_not_part_of_the_first_section(tmp_path):
    path = tmp_path / "c.cfg"
    path.write_bytes(b"\xef\xbb\xbf[pretraining]\nseed = 3\n")
    assert load_pretraining_config(path)["pretraining"]["seed"] == 3


def test_a_config_that_is_not_utf8_is_reported(tmp_path):
    path = tmp_path / "c.cfg"
    path.write_bytes(b"[pretraining]\nseed = \xff\n")
    with pytest.raises(SpacyMlmError, match="cannot parse the config"):
        load_pretraining_config(path)
