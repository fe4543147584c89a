"""kill -9 during `spacy train` output writing, for real: `python -m spacy train`
on configs/textcat.cfg (tiny model, a few steps) in a subprocess that stops at one
point of a checkpoint save (train_with_pause.py), then gets SIGKILL from here.

Every evaluation saves a checkpoint (eval_frequency 1) and every checkpoint is
"best" (all score weights 0, so every score ties), so model-last and model-best
are rewritten over a previous version each time. Both runs go at once (~10 s)."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import spacy
from thinc.api import Config

import spacy_mlm  # noqa: F401
from spacy_mlm.errors import ModelLoadError
from spacy_mlm.pipeline.textcat import MLMTextCategorizer
from spacy_mlm.util.save import make_atomic_to_disk

from .train_with_pause import fingerprint

REPO = Path(__file__).resolve().parents[2]
PAUSE = Path(__file__).with_name("train_with_pause.py")
ROWS = [("a wonderful film", "POS"), ("a dull film", "NEG"), ("wonderful and moving", "POS"), ("dull and long", "NEG")]
SAVE = 3  # stop during the third checkpoint: two complete ones are on disk before it


def training_config(tmp_path: Path, tiny_model_dir) -> Path:
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps({"text": t, "label": label}) + "\n" for t, label in ROWS))
    config = Config().from_disk(REPO / "configs" / "textcat.cfg", interpolate=False)
    config["paths"].update(train=str(data), dev=str(data), encoder=str(tiny_model_dir))
    config["training"].update(max_steps=5, eval_frequency=1, score_weights={"cats_score": 0.0, "cats_accuracy": 0.0})
    config["training"]["optimizer"]["learn_rate"].update(warmup_steps=1, initial_rate=0.001)
    path = tmp_path / "textcat.cfg"
    config.to_disk(path)
    return path


def kill_when_paused(proc: subprocess.Popen, record: Path, log: Path, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not (record / "paused").exists():
        if proc.poll() is not None:
            pytest.fail(f"training ended ({proc.returncode}) without reaching the pause:\n{log.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"no pause within {timeout} s:\n{log.read_text()[-3000:]}")
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL


@pytest.fixture(scope="module")
def killed_runs(tmp_path_factory, tiny_model_dir):
    """{point: (output dir, record dir)} after both runs were killed."""
    tmp = tmp_path_factory.mktemp("train_kill")
    config = training_config(tmp, tiny_model_dir)
    runs, procs = {}, []
    try:
        for point in ("model-last", "model-best"):
            record, out, log = tmp / f"record-{point}", tmp / f"out-{point}", tmp / f"{point}.log"
            record.mkdir()
            with log.open("w") as f:
                cmd = [sys.executable, str(PAUSE), point, str(SAVE), str(record)]
                cmd += ["train", str(config), "--output", str(out)]
                procs.append(subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=str(tmp)))
            runs[point] = (out, record, log)
        for proc, (_, record, log) in zip(procs, runs.values()):
            kill_when_paused(proc, record, log)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return {point: (out, record) for point, (out, record, _) in runs.items()}


def saved(record: Path, n: int) -> dict:
    return json.loads((record / f"save-{n}.json").read_text())


def cats(path: Path):
    nlp = spacy.load(path)
    return np.array([[doc.cats[label] for label in ("NEG", "POS")] for doc in nlp.pipe([t for t, _ in ROWS])])


def test_killed_while_writing_model_last(killed_runs):
    """Killed in the middle of the third model-last save (its encoder written,
    its textcat not): model-last is the second checkpoint, bit for bit, and loads.
    Without spacy_mlm.atomic_to_disk.v1 it would mix the new encoder with the old
    textcat head, and load without complaint."""
    out, record = killed_runs["model-last"]
    assert not (record / f"save-{SAVE}.json").exists()
    assert fingerprint(out / "model-last") == saved(record, SAVE - 1)
    [partial] = [p for p in out.iterdir() if p.name.startswith(".model-last.") and p.name.endswith(".tmp")]
    new_weights = fingerprint(partial)["encoder/model/model.safetensors"]
    assert new_weights != saved(record, SAVE - 1)["encoder/model/model.safetensors"]  # a mix was possible
    assert not (partial / "textcat").exists()
    assert np.isfinite(cats(out / "model-last")).all()
    assert fingerprint(out / "model-best") == saved(record, SAVE - 1)


def test_killed_while_spacy_copies_model_best(killed_runs):
    """Killed half-way through spaCy's copy of the third checkpoint to
    model-best: model-last is that checkpoint, whole; model-best is partial and
    loading it fails naming the directory. The previous model-best is gone:
    spaCy removes it before copying (shutil.rmtree + copytree, not ours)."""
    out, record = killed_runs["model-best"]
    assert fingerprint(out / "model-last") == saved(record, SAVE)
    assert np.isfinite(cats(out / "model-last")).all()
    best = fingerprint(out / "model-best")
    assert 0 < len(best) < len(saved(record, SAVE))
    assert all(saved(record, SAVE)[name] == digest for name, digest in best.items())  # copied files are whole
    with pytest.raises(Exception) as info:
        spacy.load(out / "model-best")
    assert str(out / "model-best") in str(info.value)


def test_atomic_to_disk_leaves_the_previous_save_when_a_component_fails(tmp_path, tiny_model_dir, monkeypatch):
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(tiny_model_dir)}})
    nlp.add_pipe("mlm_textcat", config={"model": {"hidden_width": 0, "tok2vec": {"width": 32, "pooling": "cls"}}})
    nlp.initialize(lambda: [spacy.training.Example.from_dict(nlp.make_doc(t), {"cats": {"POS": float(label == "POS"),
                                                                                      "NEG": float(label == "NEG")}})
                            for t, label in ROWS])
    nlp = make_atomic_to_disk()(nlp)
    nlp.to_disk(tmp_path / "model-last")
    before = fingerprint(tmp_path / "model-last")

    def fail(self, path, *, exclude=tuple()):
        raise OSError("disk full")

    monkeypatch.setattr(MLMTextCategorizer, "to_disk", fail)
    with pytest.raises(OSError, match="disk full"):
        nlp.to_disk(tmp_path / "model-last")
    assert fingerprint(tmp_path / "model-last") == before
    assert [p.name for p in tmp_path.iterdir()] == ["model-last"]  # no temporary directory left


@pytest.mark.parametrize("factory", ["mlm_textcat", "mlm_ner"])
@pytest.mark.parametrize("damage", ["missing model", "truncated model", "truncated cfg"])
def test_incomplete_component_dir_names_the_file(tmp_path, tiny_model_dir, factory, damage):
    """What a kill leaves in a component directory of a copy spaCy did not
    finish: the error names the directory or the file, not just "Unpack failed"."""
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(tiny_model_dir)}})
    listener = {"@architectures": "spacy_mlm.EncoderListener.v1", "pooling": "first"}
    if factory == "mlm_ner":
        model = {"tok2vec": listener}
        gold = {"entities": [(0, 4, "PER")]}
    else:
        model = {"hidden_width": 0, "tok2vec": {**listener, "pooling": "cls"}}
        gold = {"cats": {"A": 1.0, "B": 0.0}}
    nlp.add_pipe(factory, name="component", config={"model": model})
    nlp.initialize(lambda: [spacy.training.Example.from_dict(nlp.make_doc("Anna works."), gold)])
    nlp.to_disk(tmp_path / "pipe")
    name = damage.split()[-1]
    target = tmp_path / "pipe" / "component" / name
    if damage.startswith("missing"):
        target.unlink()
        where, words = target.parent, f"missing {name}"
    else:
        target.write_bytes(target.read_bytes()[: len(target.read_bytes()) // 2])
        where, words = target, "truncated by an interrupted save or copy"
    with pytest.raises(ModelLoadError, match=words) as info:
        spacy.load(tmp_path / "pipe")
    assert info.value.path == str(where)
