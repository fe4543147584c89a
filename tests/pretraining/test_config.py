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


@pytest.mark.parametrize("text, overrides, message", [
    ("[pretraining]\nmax_stepz = 3\n", {}, r"unknown setting \[pretraining\] max_stepz \(known: .*max_steps"),
    ("[pretraining]\n", {"pretraining.masking.ratee": 0.2},
     r"unknown setting \[pretraining.masking\] ratee \(known: .*\brate\b"),
    ("[pretraining\n", {}, r"c\.cfg: cannot parse the config"),
])
def test_mistakes_are_reported(tmp_path, text, overrides, message):
    path = tmp_path / "c.cfg"
    path.write_text(text)
    with pytest.raises(SpacyMlmError, match=message):
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


@pytest.mark.parametrize("setting, value, message", [
    ("pretraining.batch_size", 0, r"\[pretraining\] batch_size must be at least 1, got 0"),
    ("pretraining.batch_size", "x", r"\[pretraining\] batch_size must be an integer, got 'x'"),
    ("pretraining.max_steps", -1, "max_steps must be at least 1"),
    ("pretraining.grad_accumulation_steps", 0, "grad_accumulation_steps must be at least 1"),
    ("pretraining.masking.rate", 1.5, r"\[pretraining.masking\] rate must be above 0 and below 1, got 1.5"),
    ("pretraining.masking.rate", 0, "rate must be above 0"),
    ("pretraining.masking.mask_fraction", 0.95, "mask_fraction \\+ random_fraction must be at most 1"),
    ("pretraining.corpus.dev_fraction", 1.0, "dev_fraction must be above 0 and below 1"),
    ("pretraining.next_sentence", 1, "next_sentence must be true or false, got 1"),
    ("pretraining.optimizer.learning_rate", 0, "learning_rate must be above 0"),
    ("pretraining.scratch.num_heads", 3, "hidden_size 256 is not a multiple of num_heads 3"),
    ("pretraining.head_only_steps", 1000, r"head_only_steps \(1000\) must be below max_steps \(1000\)"),
    ("pretraining.head_only_steps", -1, "head_only_steps must be at least 0"),
    ("pretraining.precision", "fp16", r"\[pretraining\] precision must be one of fp32, bf16, got 'fp16'"),
])
def test_values_out_of_range_name_the_setting(setting, value, message):
    with pytest.raises(SpacyMlmError, match=message):
        load_pretraining_config(None, {setting: value})


def test_the_scratch_head_count_is_not_checked_when_a_source_is_given():
    config = load_pretraining_config(None, {"paths.source": "model", "pretraining.scratch.num_heads": 3})
    assert config["pretraining"]["scratch"]["num_heads"] == 3


def test_head_only_steps_need_an_mlm_head():
    with pytest.raises(SpacyMlmError, match="head_only_steps works with objective = \"mlm\" only"):
        load_pretraining_config(None, {"pretraining.objective": "rtd", "pretraining.head_only_steps": 5})
