"""Broken, missing and foreign model files give a ModelLoadError that names the
path, never a silently random model or a stack trace from inside transformers."""
import json
import os
import shutil

import numpy as np
import pytest
import spacy
import srsly

import spacy_mlm  # noqa: F401
from spacy_mlm.models.hf import load_backbone
from spacy_mlm.errors import ModelLoadError


def _truncate(path, keep):
    data = path.read_bytes()
    path.write_bytes(data[:keep] if keep >= 0 else data[:keep])


def _foreign_gpt2(d):
    from transformers import GPT2Config, GPT2Model

    GPT2Model(GPT2Config(n_embd=32, n_layer=1, n_head=2, vocab_size=100, n_positions=64)).save_pretrained(
        str(d / "gpt2")
    )
    shutil.move(str(d / "gpt2" / "model.safetensors"), str(d / "model.safetensors"))


def _foreign_wider_bert(d):
    from transformers import BertConfig, BertModel

    config = BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
                        vocab_size=400, max_position_embeddings=64)
    BertModel(config).save_pretrained(str(d / "wide"))
    shutil.move(str(d / "wide" / "model.safetensors"), str(d / "model.safetensors"))


def _bigger_vocab(d):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(d))
    tokenizer.add_tokens([f"newword{i}" for i in range(80)])
    tokenizer.save_pretrained(str(d))


def _no_tokenizer(d):
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        (d / name).unlink(missing_ok=True)


def _weights_to_bin(d, data):
    (d / "model.safetensors").unlink()
    (d / "pytorch_model.bin").write_bytes(data)


MODEL_DIR_CASES = {
    "missing_dir": (lambda d: shutil.rmtree(d), "no such directory"),
    "file_not_dir": (lambda d: (shutil.rmtree(d), d.write_text("x")), "is a file"),
    "no_config": (lambda d: (d / "config.json").unlink(), "no config.json"),
    "config_not_json": (lambda d: (d / "config.json").write_text("{oops"), "not valid JSON"),
    "config_without_model_type": (
        lambda d: (d / "config.json").write_text(json.dumps({"hidden_size": 32})),
        "cannot load the weights",
    ),
    "no_weights": (lambda d: (d / "model.safetensors").unlink(), "has no weights"),
    "empty_weights": (lambda d: (d / "model.safetensors").write_bytes(b""), "cannot load the weights"),
    "truncated_head": (lambda d: _truncate(d / "model.safetensors", 5000), "cannot load the weights"),
    "truncated_tail": (lambda d: _truncate(d / "model.safetensors", -100), "cannot load the weights"),
    "random_bytes": (lambda d: (d / "model.safetensors").write_bytes(os.urandom(20000)), "cannot load the weights"),
    "random_bin": (lambda d: _weights_to_bin(d, os.urandom(5000)), "cannot load the weights"),
    "weights_is_dir": (
        lambda d: ((d / "model.safetensors").unlink(), (d / "model.safetensors").mkdir()),
        "cannot load the weights",
    ),
    "foreign_architecture": (_foreign_gpt2, "do not fit the 'bert' architecture"),
    "foreign_shapes": (_foreign_wider_bert, "size mismatch"),
    "vocab_bigger_than_embeddings": (_bigger_vocab, "embedding matrix only"),
    "no_tokenizer": (_no_tokenizer, "no tokenizer files"),
}


@pytest.fixture
def model_copy(tmp_path, tiny_model_dir):
    target = tmp_path / "model"
    shutil.copytree(tiny_model_dir, target)
    return target


@pytest.mark.parametrize("case", list(MODEL_DIR_CASES))
def test_broken_model_dir(model_copy, case):
    mutate, message = MODEL_DIR_CASES[case]
    mutate(model_copy)
    with pytest.raises(ModelLoadError, match=message) as info:
        load_backbone(model_copy)
    assert str(model_copy) in str(info.value) and str(model_copy) in info.value.path


def test_broken_model_dir_through_initialize(model_copy):
    """The same errors reach users of the component, at nlp.initialize()."""
    _truncate(model_copy / "model.safetensors", 5000)
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(model_copy)}})
    with pytest.raises(ModelLoadError, match="cannot load the weights") as info:
        nlp.initialize()
    assert info.value.path == str(model_copy)


@pytest.fixture(scope="module")
def saved_pipeline(tmp_path_factory, encoder_nlp):
    path = tmp_path_factory.mktemp("saved") / "pipe"
    encoder_nlp.to_disk(path)
    return path


@pytest.fixture
def pipeline_copy(tmp_path, saved_pipeline):
    target = tmp_path / "pipe"
    shutil.copytree(saved_pipeline, target)
    return target


def _write_cfg(text):
    return lambda d: (d / "mlm_encoder" / "cfg").write_text(text)


PIPELINE_CASES = {
    "other_format_version": (_write_cfg('{"format_version": 99}'), "mlm_encoder", "format version 99"),
    "no_format_version": (_write_cfg("{}"), "mlm_encoder", "format version None"),
    "cfg_truncated": (_write_cfg('{"format'), "mlm_encoder/cfg", "not valid JSON"),
    "cfg_empty": (_write_cfg(""), "mlm_encoder/cfg", "not valid JSON"),
    "cfg_not_object": (_write_cfg("[1, 2]"), "mlm_encoder/cfg", "JSON object"),
    "cfg_missing": (lambda d: (d / "mlm_encoder" / "cfg").unlink(), "mlm_encoder", "no cfg file"),
    "component_dir_missing": (lambda d: shutil.rmtree(d / "mlm_encoder"), "mlm_encoder", "no cfg file"),
    "encoder_dir_missing": (lambda d: shutil.rmtree(d / "mlm_encoder" / "model"), "mlm_encoder/model", "no such directory"),
    "weights_truncated": (
        lambda d: _truncate(d / "mlm_encoder" / "model" / "model.safetensors", 300),
        "mlm_encoder/model",
        "cannot load the weights",
    ),
}


@pytest.mark.parametrize("case", list(PIPELINE_CASES))
def test_broken_saved_pipeline(pipeline_copy, case):
    mutate, where, message = PIPELINE_CASES[case]
    mutate(pipeline_copy)
    with pytest.raises(ModelLoadError, match=message) as info:
        spacy.load(pipeline_copy)
    assert info.value.path == str(pipeline_copy / where)


def test_pipeline_config_naming_an_unknown_architecture_version(pipeline_copy):
    """A pipeline saved by a later spacy-mlm (say HFEncoder.v9) fails in spaCy's own
    registry lookup, which names the missing function."""
    config = pipeline_copy / "config.cfg"
    config.write_text(config.read_text().replace("spacy_mlm.HFEncoder.v1", "spacy_mlm.HFEncoder.v9"))
    with pytest.raises(Exception, match=r"spacy_mlm\.HFEncoder\.v9"):
        spacy.load(pipeline_copy)


BYTES_CASES = {
    "garbage": b"\x93garbage",
    "not_a_mapping": srsly.msgpack_dumps([1, 2]),
    "escapes_the_tmp_dir": srsly.msgpack_dumps({"../../escaped_file": b"1"}),
    "absolute_path": srsly.msgpack_dumps({"/tmp/spacy_mlm_absolute_file": b"1"}),
    "value_not_bytes": srsly.msgpack_dumps({"cfg": 5}),
}


@pytest.mark.parametrize("case", list(BYTES_CASES))
def test_broken_component_bytes(encoder_nlp, tmp_path, case):
    nlp = spacy.blank("en")
    encoder = nlp.add_pipe("mlm_encoder", config={"model": {"path": "/nonexistent"}})
    with pytest.raises(ModelLoadError, match="not a serialized mlm_encoder component"):
        encoder.from_bytes(BYTES_CASES[case])
    assert not os.path.exists("/tmp/spacy_mlm_absolute_file")


def test_truncated_component_bytes(encoder_nlp):
    data = encoder_nlp.get_pipe("mlm_encoder").to_bytes()
    nlp = spacy.blank("en")
    encoder = nlp.add_pipe("mlm_encoder", config={"model": {"path": "/nonexistent"}})
    with pytest.raises(ModelLoadError):
        encoder.from_bytes(data[: len(data) // 2])
    encoder.from_bytes(data)  # the intact bytes still load into the same component
    text = "The cat sleeps."
    np.testing.assert_array_equal(nlp(text)._.mlm_encoding.hidden, encoder_nlp(text)._.mlm_encoding.hidden)


def test_saved_files_are_readable_by_others(tmp_path, encoder_nlp):
    """Atomic writes go through mkstemp/mkdtemp (private 0600/0700); the saved
    files must get the usual umask modes so other users can load the model."""
    old = os.umask(0o022)
    try:
        encoder_nlp.to_disk(tmp_path / "pipe")
    finally:
        os.umask(old)
    model_dir = tmp_path / "pipe" / "mlm_encoder" / "model"
    assert model_dir.stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "pipe" / "mlm_encoder" / "cfg").stat().st_mode & 0o777 == 0o644
