"""Settings are checked where they are set (`spacy_mlm.util.settings`): a bad
value of a factory or architecture setting fails while the pipeline is built,
naming the setting and its value, not at the first Doc."""
import re

import pytest
import spacy

import spacy_mlm  # noqa: F401
from spacy_mlm.util.settings import SettingValueError

LISTENER = {"@architectures": "spacy_mlm.EncoderListener.v1", "pooling": "cls"}
CASES = {
    # before: built and initialised, then "need max_pieces >= 1 and pass_cost >= 0" at the first Doc
    "max_batch_pieces_0": ("mlm_encoder", {"model": {"max_batch_pieces": 0}}, "max_batch_pieces", 0),
    "window_negative": ("mlm_encoder", {"model": {"window": -5}}, "window", -5),
    "overlap_negative": ("mlm_encoder", {"model": {"overlap": -1}}, "overlap", -1),
    "trainable_layers_-2": ("mlm_encoder", {"model": {"trainable_layers": -2}}, "trainable_layers", -2),
    "scratch_dropout_1": ("mlm_encoder", {"model": {"@architectures": "spacy_mlm.ScratchEncoder.v2",
                                                    "tokenizer_path": "x", "dropout": 1.0}}, "dropout", 1.0),
    "scratch_depth_0": ("mlm_encoder", {"model": {"@architectures": "spacy_mlm.ScratchEncoder.v2",
                                                  "tokenizer_path": "x", "depth": 0}}, "depth", 0),
    "textcat_threshold_2": ("mlm_textcat", {"threshold": 2.0}, "threshold", 2.0),
    "head_hidden_width_negative": ("mlm_textcat", {"model": {"hidden_width": -1}}, "hidden_width", -1),
    "head_init_std_negative": ("mlm_textcat", {"model": {"init_std": -1.0}}, "init_std", -1.0),
    "listener_width_0": ("mlm_textcat", {"model": {"tok2vec": {**LISTENER, "width": 0}}}, "width", 0),
    "tagger_init_std_negative": ("mlm_ner", {"model": {"init_std": -0.1}}, "init_std", -0.1),
    "vectors_n_layers_0": ("mlm_vectors", {"n_layers": 0}, "n_layers", 0),
    "senses_threshold_pairs_0": ("mlm_senses", {"threshold_pairs": 0}, "threshold_pairs", 0),
    "sense_head_init_scale_0": ("mlm_senses", {"model": {"init_scale": 0}}, "init_scale", 0),
    "encoder_store_encoding_gpu": ("mlm_encoder", {"model": {}, "store_encoding": "gpu"}, "store_encoding", "gpu"),
    "head_v4_hidden_activation_swish": ("mlm_textcat", {"model": {"@architectures": "spacy_mlm.ClassifierHead.v4",
                                                                  "tok2vec": LISTENER, "hidden_activation": "swish"}},
                                        "hidden_activation", "swish"),
    "zero_shot_batch_size_0": ("mlm_zero_shot", {"batch_size": 0}, "batch_size", 0),
    "zero_shot_batch_size_negative": ("mlm_zero_shot", {"batch_size": -64}, "batch_size", -64),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_setting_fails_at_build_naming_it(case):
    factory, config, setting, value = CASES[case]
    if factory == "mlm_encoder" and "@architectures" not in config["model"]:
        config = {**config, "model": {"path": "/not/read/at/build", **config["model"]}}
    nlp = spacy.blank("en")
    with pytest.raises(SettingValueError, match=f"{setting} must be .*, got {re.escape(repr(value))}$") as info:
        nlp.add_pipe(factory, config=config)
    assert (info.value.setting, info.value.value) == (setting, value)
    assert f"{setting} must be" in str(info.value) and repr(value) in str(info.value)
    assert isinstance(info.value, spacy_mlm.errors.SettingError)  # the one class a user catches


def test_max_batch_pieces_0_fails_in_debug_data_while_the_pipeline_is_built():
    """Before: `debug-data` passed the config, and `spacy train` initialised it, then failed at the first Doc
    with "need max_pieces >= 1 and pass_cost >= 0", naming no setting."""
    from pathlib import Path

    from typer.testing import CliRunner

    from spacy_mlm.cli import app

    config = Path(__file__).parents[2] / "configs" / "textcat.cfg"
    result = CliRunner().invoke(app, ["debug-data", str(config), "--paths.encoder", "/not/read/at/build",
                                      "--components.encoder.model.max_batch_pieces", "0"])
    assert result.exit_code == 1
    assert result.output.startswith("error: the mlm_encoder model's max_batch_pieces must be at least 1, got 0")
