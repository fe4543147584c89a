"""kill -9 while a pipeline is saved over a previous save: a forked child arms a
real SIGKILL at one point of nlp.to_disk, the test process then loads what is left."""
import os
import signal

import numpy as np
import pytest
import spacy
import torch

import spacy_mlm  # noqa: F401
import spacy.util
import transformers.modeling_utils as modeling_utils
from spacy_mlm.models.hf import load_backbone
from spacy_mlm.models.encoder import get_hf_model
from spacy_mlm.util.io import atomic_directory

TEXT = "Anna Berg works for the Northwind Company in Oslo."


def _die():
    os.kill(os.getpid(), signal.SIGKILL)


def _arm(point, monkeypatch):
    if point == "weights":  # the new weights file is half written
        save_file = modeling_utils.safe_save_file

        def half_then_die(tensors, filename, *args, **kwargs):
            save_file(tensors, filename, *args, **kwargs)
            with open(filename, "r+b") as f:
                f.truncate(os.path.getsize(filename) // 2)
            _die()

        monkeypatch.setattr(modeling_utils, "safe_save_file", half_then_die)
    elif point == "rename":  # the old encoder dir is moved aside, the new one not yet in
        replace = os.replace

        def replace_then_die(src, dst):
            replace(src, dst)
            if ".old-" in str(dst):
                _die()

        monkeypatch.setattr(os, "replace", replace_then_die)
    elif point == "spacy_vocab":  # spaCy rewrites vocab/strings.json in place
        to_disk = spacy.util.to_disk

        def vocab_dies(path, writers, exclude):
            def truncate_then_die(p):
                p.mkdir(exist_ok=True)
                open(p / "strings.json", "w").close()
                _die()

            return to_disk(path, {**writers, "vocab": truncate_then_die}, exclude)

        monkeypatch.setattr(spacy.util, "to_disk", vocab_dies)


def save_and_die(nlp, path, point, monkeypatch):
    """Change every weight and save over `path` in a child process killed at `point`."""
    pid = os.fork()
    if pid == 0:
        try:
            with torch.no_grad():
                for param in get_hf_model(nlp.get_pipe("mlm_encoder").model).parameters():
                    param.add_(1.0)
            _arm(point, monkeypatch)
            nlp.to_disk(path)
        finally:
            os._exit(3)  # never reached when the kill fires
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status


@pytest.fixture
def saved(tmp_path, encoder_nlp):
    path = tmp_path / "pipe"
    encoder_nlp.to_disk(path)
    return path, encoder_nlp(TEXT)._.mlm_encoding.hidden


@pytest.mark.parametrize("point", ["weights", "rename"])
def test_killed_save_leaves_the_previous_pipeline(saved, encoder_nlp, monkeypatch, point):
    path, hidden = saved
    save_and_die(encoder_nlp, path, point, monkeypatch)
    loaded = spacy.load(path)
    np.testing.assert_array_equal(loaded(TEXT)._.mlm_encoding.hidden, hidden)  # the previous weights, bit for bit
    loaded.to_disk(path)  # the next save over it works and leaves no aside copy
    assert [p.name for p in (path / "mlm_encoder").iterdir() if ".old-" in p.name] == []


def test_killed_while_spacy_writes_its_own_files(saved, encoder_nlp, monkeypatch):
    """spaCy writes tokenizer, meta, config, components and vocab in place, one
    after the other (spacy.util.to_disk). Killed while it rewrites the vocab, the
    pipeline no longer loads, but the encoder, written before it, is complete."""
    path, _ = saved
    save_and_die(encoder_nlp, path, "spacy_vocab", monkeypatch)
    with pytest.raises(ValueError, match="Expected object or value"):  # the emptied vocab/strings.json
        spacy.load(path)
    model, tokenizer = load_backbone(path / "mlm_encoder" / "model")
    assert len(tokenizer) == model.get_input_embeddings().weight.shape[0]
    # the encoder on disk is the new one, complete: every weight is the child's (the old + 1)
    old = dict(get_hf_model(encoder_nlp.get_pipe("mlm_encoder").model).named_parameters())
    new = dict(model.named_parameters())
    assert new.keys() <= old.keys() and len(new) > 0
    for name, weight in new.items():
        torch.testing.assert_close(weight, old[name].detach().cpu() + 1.0, msg=name)


def test_whole_pipeline_saved_through_atomic_directory_survives(saved, encoder_nlp, monkeypatch):
    """The safe recipe for a whole pipeline: nlp.to_disk into atomic_directory."""
    path, hidden = saved
    pid = os.fork()
    if pid == 0:
        try:
            _arm("spacy_vocab", monkeypatch)
            with atomic_directory(path) as tmp:
                encoder_nlp.to_disk(tmp)
        finally:
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    assert os.WTERMSIG(status) == signal.SIGKILL
    np.testing.assert_array_equal(spacy.load(path)(TEXT)._.mlm_encoding.hidden, hidden)
