"""Broken, missing and foreign model files give a ModelLoadError that names the
path, never a silently random model, a stack trace from inside transformers,
code from the model directory run, or a question asked."""
import json
import os
import stat
import re
import shutil

import numpy as np
import pytest
import spacy
import srsly

import spacy_mlm  # noqa: F401
from spacy_mlm.errors import ModelLoadError
from spacy_mlm.models.hf import load_backbone, load_mlm_model, load_tokenizer
from spacy_mlm.engine.checkpoint import STATE_FILE, load_training_state

from .payloads import LeavesAMarker

LOADERS = {"bare": load_backbone, "mlm": load_mlm_model}


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


def _config(**changes):
    """Rewrite config.json with `changes`: it then disagrees with the weights."""

    def mutate(d):
        config = json.loads((d / "config.json").read_text())
        (d / "config.json").write_text(json.dumps({**config, **changes}))

    return mutate


MODEL_DIR_CASES = {
    "missing_dir": (lambda d: shutil.rmtree(d), "no such directory"),
    "file_not_dir": (lambda d: (shutil.rmtree(d), d.write_text("x")), "is a file"),
    "no_config": (lambda d: (d / "config.json").unlink(), "no config.json"),
    "config_not_json": (lambda d: (d / "config.json").write_text("{oops"), "not valid JSON"),
    "config_not_object": (lambda d: (d / "config.json").write_text("[1, 2]"), "should hold a JSON object"),
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
    "foreign_shapes": (_foreign_wider_bert, "config.json does not match the weights"),
    "config_fewer_layers": (_config(num_hidden_layers=1), "has no place for .*fewer layers"),
    "config_more_layers": (_config(num_hidden_layers=3), "do not fit the 'bert' architecture"),
    "config_wider": (_config(hidden_size=64), r"does not match the weights: \d+ tensors .*\(64,"),
    "config_other_intermediate_size": (_config(intermediate_size=128), "does not match the weights"),
    "config_other_vocab_size": (_config(vocab_size=500), "does not match the weights"),
    "config_heads_not_dividing_width": (_config(num_attention_heads=3), "not a multiple of the number of attention heads"),
    "vocab_bigger_than_embeddings": (_bigger_vocab, "embedding matrix only"),
    "no_tokenizer": (_no_tokenizer, "no tokenizer files"),
}


@pytest.fixture
def model_copy(tmp_path, tiny_model_dir):
    target = tmp_path / "model"
    shutil.copytree(tiny_model_dir, target)
    return target


@pytest.mark.parametrize("loader", list(LOADERS))
@pytest.mark.parametrize("case", list(MODEL_DIR_CASES))
def test_broken_model_dir(model_copy, case, loader):
    """The bare encoder and the MLM model are refused alike."""
    mutate, message = MODEL_DIR_CASES[case]
    mutate(model_copy)
    with pytest.raises(ModelLoadError, match=message) as info:
        LOADERS[loader](model_copy)
    assert str(model_copy) in str(info.value) and str(model_copy) in info.value.path


def _vocab_txt_cut_short(d, n_cut):
    """Only vocab.txt left (the fast tokenizer is converted from it), its last `n_cut` entries cut."""
    (d / "tokenizer.json").unlink()
    lines = (d / "vocab.txt").read_text(encoding="utf8").splitlines()
    (d / "vocab.txt").write_text("\n".join(lines[: len(lines) - n_cut]) + "\n", encoding="utf8")


def _padded_matrix(d, n_extra):
    from transformers import AutoModelForMaskedLM

    model = AutoModelForMaskedLM.from_pretrained(d)
    model.resize_token_embeddings(model.config.vocab_size + n_extra)
    model.save_pretrained(d)


@pytest.mark.parametrize("loader", list(LOADERS))
@pytest.mark.parametrize("smaller", [lambda d: _padded_matrix(d, 127), lambda d: _vocab_txt_cut_short(d, 128)],
                         ids=["matrix_padded_for_speed", "vocab_txt_cut_short"])
def test_a_tokenizer_smaller_than_the_embedding_matrix_loads_with_a_warning_giving_both_sizes(
    model_copy, caplog, smaller, loader
):
    n_rows_before = json.loads((model_copy / "config.json").read_text())["vocab_size"]
    smaller(model_copy)
    with caplog.at_level("WARNING", logger="spacy_mlm.models.hf"):
        loaded = LOADERS[loader](model_copy)
    model, tokenizer = loaded if isinstance(loaded, tuple) else (loaded.model, loaded.tokenizer)
    n_rows = model.get_input_embeddings().weight.shape[0]
    assert len(tokenizer) < n_rows and n_rows in (n_rows_before, n_rows_before + 127)
    assert (f"the tokenizer has {len(tokenizer)} entries for an embedding matrix of {n_rows} rows, "
            f"so {n_rows - len(tokenizer)} rows are never used") in caplog.text
    assert str(model_copy) in caplog.text


def _write_own_code(d, config_file, marker, **changes):
    """A directory whose config names classes in a module beside it that, if it
    were ever imported, would leave `marker`. With a `model_type` transformers
    does not know, it has no class of its own to fall back on, and asks."""
    (d / "own_code.py").write_text(f"from pathlib import Path\nPath({str(marker)!r}).touch()\n")
    classes = {"AutoConfig": "own_code.Config", "AutoModel": "own_code.Model", "AutoTokenizer": ["own_code.Tok", None]}
    config = json.loads((d / config_file).read_text())
    (d / config_file).write_text(json.dumps({**config, "auto_map": classes, **changes}))


@pytest.mark.parametrize("config_file", ["config.json", "tokenizer_config.json"])
@pytest.mark.parametrize("loader", ["bare", "mlm", "tokenizer"])
def test_code_in_the_model_directory_is_never_run_nor_asked_about(model_copy, tmp_path, monkeypatch, config_file, loader):
    marker = tmp_path / "code_ran"
    _write_own_code(model_copy, config_file, marker)
    monkeypatch.setattr("builtins.input", lambda *a: pytest.fail("asked whether to trust the model's code"))
    load = {**LOADERS, "tokenizer": load_tokenizer}[loader]
    with pytest.raises(ModelLoadError, match="auto_map: AutoConfig, AutoModel, AutoTokenizer") as info:
        load(model_copy)
    assert info.value.path == str(model_copy / config_file) and "never runs a model's own code" in str(info.value)
    assert not marker.exists()


def test_every_from_pretrained_is_local_and_runs_no_code(tiny_model_dir, monkeypatch):
    import transformers

    calls = []
    for name in ("AutoConfig", "AutoModel", "AutoModelForMaskedLM", "AutoTokenizer"):
        cls = getattr(transformers, name)
        original = cls.from_pretrained.__func__

        def spy(klass, *args, _original=original, _name=name, **kwargs):
            calls.append((_name, kwargs.get("local_files_only"), kwargs.get("trust_remote_code")))
            return _original(klass, *args, **kwargs)

        monkeypatch.setattr(cls, "from_pretrained", classmethod(spy))
    load_backbone(tiny_model_dir)
    load_mlm_model(tiny_model_dir)
    assert {name for name, _, _ in calls} == {"AutoConfig", "AutoModel", "AutoModelForMaskedLM", "AutoTokenizer"}
    assert all(local is True and remote is False for _, local, remote in calls), calls


@pytest.mark.parametrize("case", ["object", "truncated", "empty"])
def test_training_state_loads_only_tensors_and_plain_values(tmp_path, case):
    import torch

    checkpoint = tmp_path / "step-00000001"
    checkpoint.mkdir()
    marker = tmp_path / "unpickled"
    state = {"step": 1, "rng": [torch.get_rng_state()], "history": [{"step": 1, "loss": 2.5}]}
    torch.save(state, checkpoint / STATE_FILE)
    assert load_training_state(checkpoint)["history"] == state["history"]
    data = (checkpoint / STATE_FILE).read_bytes()
    if case == "object":
        torch.save({**state, "extra": LeavesAMarker(marker)}, checkpoint / STATE_FILE)
    else:
        (checkpoint / STATE_FILE).write_bytes(data[: len(data) // 2] if case == "truncated" else b"")
    with pytest.raises(ModelLoadError, match="cannot be loaded as a training state") as info:
        load_training_state(checkpoint)
    assert info.value.path == str(checkpoint / STATE_FILE)
    assert ("would have to call or construct" in str(info.value)) == (case == "object")
    assert not marker.exists()


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
    "other_format_version": (_write_cfg('{"format_version": 99}'), "mlm_encoder/cfg",
                             "saved with mlm_encoder format version 99, but this spacy-mlm reads version 1 "
                             r"\(a newer spacy-mlm wrote it\)"),
    "format_version_a_string": (_write_cfg('{"format_version": "1"}'), "mlm_encoder/cfg",
                                "format_version must be an integer, got '1'"),
    "no_format_version": (_write_cfg("{}"), "mlm_encoder/cfg", "has no format_version"),
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
    text = config.read_text()
    assert re.search(r"spacy_mlm\.HFEncoder\.v\d+", text)
    config.write_text(re.sub(r"spacy_mlm\.HFEncoder\.v\d+", "spacy_mlm.HFEncoder.v9", text))
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


def test_saved_files_are_readable_by_others(tmp_path, encoder_nlp, tiny_model_dir):
    """Atomic writes go through mkstemp/mkdtemp (private 0600/0700) and
    safetensors writes 0600 itself; every file and directory of a saved
    pipeline, a pretraining output and its checkpoints must get the umask modes
    so other users (a serving account, a colleague) can load them."""
    from spacy_mlm.pretraining.config import load_pretraining_config
    from spacy_mlm.pretraining.loop import pretrain
    from spacy_mlm.testing import SAMPLE_TEXT

    from ..pretraining.conftest import tiny_overrides

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join("\n".join(SAMPLE_TEXT[i:i + 4]) for i in range(0, 40, 2)), encoding="utf8")
    old = os.umask(0o022)
    try:
        encoder_nlp.to_disk(tmp_path / "pipe")
        pretrain(load_pretraining_config(None, tiny_overrides(corpus, tiny_model_dir, **{
            "pretraining.max_steps": 2, "pretraining.checkpoint_every": 1})), tmp_path / "pretrained")
    finally:
        os.umask(old)
    for root in (tmp_path / "pipe", tmp_path / "pretrained"):
        found = [root, *root.rglob("*")]
        assert {p.name for p in found} >= {"model.safetensors", "cfg", "training_state.pt", "run.json"} - (
            {"cfg"} if root.name == "pretrained" else {"training_state.pt", "run.json"})
        for path in found:
            assert stat.S_IMODE(path.stat().st_mode) == (0o755 if path.is_dir() else 0o644), path


LOADS_IN_A_CHILD = """
import sys, time
import spacy, spacy_mlm
from spacy_mlm.models.hf import load_mlm_model
for load, path in [(load_mlm_model, sys.argv[1]), (load_mlm_model, sys.argv[2]), (spacy.load, sys.argv[3])]:
    began = time.time()
    try:
        load(path)
    except Exception as err:
        print(type(err).__name__, err)
    print("seconds", round(time.time() - began, 1))
"""


def test_code_in_a_model_directory_is_refused_at_once_with_stdin_open(tmp_path, tiny_model_dir, pipeline_copy):
    """In a fresh interpreter whose stdin is an open pipe nobody writes to, as a terminal
    would be: a question would block it (transformers waits 15 s for an answer). Through
    both config files of an HF directory, and spacy.load of a pipeline whose encoder's
    config.json was edited; each load alone is timed, and no code of the directory runs."""
    import subprocess
    import sys

    marker = tmp_path / "code_ran"
    dirs = []
    for config_file in ("config.json", "tokenizer_config.json"):
        shutil.copytree(tiny_model_dir, tmp_path / config_file)
        _write_own_code(tmp_path / config_file, config_file, marker, model_type="own-model")
        dirs.append(tmp_path / config_file)
    _write_own_code(pipeline_copy / "mlm_encoder" / "model", "config.json", marker, model_type="own-model")
    log = tmp_path / "child.log"
    with log.open("w") as output:  # not communicate(): it would close stdin, and input() would get EOF at once
        proc = subprocess.Popen([sys.executable, "-c", LOADS_IN_A_CHILD, *map(str, dirs), str(pipeline_copy)],
                                stdin=subprocess.PIPE, stdout=output, stderr=subprocess.STDOUT, text=True)
        try:
            proc.wait(timeout=180)
        finally:
            proc.kill()
            proc.stdin.close()
    out = log.read_text()
    refused = [dirs[0] / "config.json", dirs[1] / "tokenizer_config.json",
               pipeline_copy / "mlm_encoder" / "model" / "config.json"]
    for path in refused:
        assert f"ModelLoadError {path}: names classes defined by Python code" in out, out
    assert "custom code" not in out  # transformers' "Do you wish to run the custom code?" never came
    assert all(float(line.split()[1]) < 10 for line in out.splitlines() if line.startswith("seconds")), out
    assert not marker.exists()


@pytest.mark.parametrize("loader", list(LOADERS))
def test_a_pickle_payload_in_pytorch_model_bin_never_runs(model_copy, tmp_path, loader):
    """transformers reads pytorch_model.bin with torch.load(weights_only=True), as our pooler reader does."""
    import torch
    from safetensors.torch import load_file

    marker = tmp_path / "payload_ran"
    state = load_file(str(model_copy / "model.safetensors"))
    (model_copy / "model.safetensors").unlink()
    torch.save({**state, "payload": LeavesAMarker(marker)}, model_copy / "pytorch_model.bin")
    with pytest.raises(ModelLoadError, match="cannot load the weights"):
        LOADERS[loader](model_copy)
    assert not marker.exists()
    torch.save(state, model_copy / "pytorch_model.bin")  # the same weights without the payload load
    LOADERS[loader](model_copy)


def saved_textcat(tiny_model_dir, path):
    """A saved encoder + mlm_textcat pipeline with three labels; returns its textcat cfg path."""
    from spacy.training import Example

    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(tiny_model_dir)}})
    nlp.add_pipe("mlm_textcat", config={"model": {"exclusive_classes": True, "hidden_width": 0,
                                                  "tok2vec": {"pooling": "cls"}}})
    cats = [{"POS": 1.0, "NEG": 0.0, "MEH": 0.0}, {"POS": 0.0, "NEG": 1.0, "MEH": 0.0}, {"POS": 0.0, "NEG": 0.0, "MEH": 1.0}]
    examples = [Example.from_dict(nlp.make_doc(text), {"cats": c}) for text, c in zip(["good", "bad", "so so"], cats)]
    nlp.initialize(lambda: examples)
    nlp.to_disk(path)
    return path / "mlm_textcat" / "cfg"


@pytest.mark.parametrize("edit", ["label_dropped", "label_added"])
def test_a_saved_classifier_whose_labels_disagree_with_its_weights_fails_in_spacy_load(tiny_model_dir, tmp_path, edit):
    """It loaded and scored two of the three classes under their names, silently."""
    cfg_path = saved_textcat(tiny_model_dir, tmp_path / "pipe")
    cfg = srsly.read_json(cfg_path)
    cfg["labels"] = cfg["labels"][:-1] if edit == "label_dropped" else cfg["labels"] + ["EXTRA"]
    srsly.write_json(cfg_path, cfg)
    with pytest.raises(ModelLoadError, match=r"has the labels \[.*\] but the weights score 3 labels \(.*model\)") as info:
        spacy.load(tmp_path / "pipe")
    assert info.value.path == str(cfg_path)


SAVED_CFG_EDITS = {
    # 3 characters give as many "labels" as 3 labels: it loaded and predicted under the labels 'A', 'B', 'C'
    "labels_a_string": ({"labels": "ABC"}, "labels must be a list of strings, got 'ABC'"),
    "labels_numbers": ({"labels": [1, 2, 3]}, r"labels must be a list of strings, got \[1, 2, 3\]"),
    "threshold_a_string": ({"threshold": "0.5"}, "threshold must be a number, got '0.5'"),
    "format_version_a_string": ({"format_version": "1"}, "format_version must be an integer, got '1'"),
    "format_version_later": ({"format_version": 2}, "saved with mlm_textcat format version 2, but this spacy-mlm "
                                                    "reads version 1"),
}


@pytest.mark.parametrize("case", list(SAVED_CFG_EDITS))
def test_a_saved_cfg_of_the_wrong_kind_fails_in_spacy_load_naming_the_file(tiny_model_dir, tmp_path, case):
    edit, message = SAVED_CFG_EDITS[case]
    cfg_path = saved_textcat(tiny_model_dir, tmp_path / "pipe")
    cfg = srsly.read_json(cfg_path)
    assert cfg["format_version"] == 1
    srsly.write_json(cfg_path, {**cfg, **edit})
    with pytest.raises(ModelLoadError, match=message) as info:
        spacy.load(tmp_path / "pipe")
    assert info.value.path == str(cfg_path)
    del cfg["format_version"]  # a save from before cfgs had a version still loads
    srsly.write_json(cfg_path, cfg)
    spacy.load(tmp_path / "pipe")
