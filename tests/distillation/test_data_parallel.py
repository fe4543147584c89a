"""`torchrun --nproc_per_node 2 -m spacy_mlm distill ...`: each process distils
its share of every batch, the soft and gold losses divide by the whole step's
counts and the engine's reducer sums the gradients, so two processes reach the
student one process reaches on the same batches (the teacher without dropout,
so that nothing random differs between the runs), a narrowed student included
(every process starts from the encoder the first one narrowed)."""
import json
import os
import subprocess
import sys

import pytest
import torch
from spacy.tokens import DocBin
from spacy.training import Example

import spacy
from spacy_mlm.distillation.config import load_distillation_config
from spacy_mlm.distillation.loop import distill
from spacy_mlm.errors import SettingError
from spacy_mlm.testing import make_tiny_bert

from .conftest import NER, distill_config, train_teacher
from .test_distill import state


# Adam's steps (learning rate 1e-3 in distill_config) normalise each gradient: a weight whose
# gradient is near zero (a rare word's embedding) moves by rounding noise brought to full step size,
# and the two runs sum in other orders (and on AVX2 with other kernels). So weights are compared on
# the scale of the update: 1e-4 is a fortieth of 4 steps' full movement (4e-3).
WEIGHT_ATOL = 1e-4


def assert_same_student(a, b):
    assert list(a) == list(b)
    for key in a:
        torch.testing.assert_close(b[key], a[key], atol=WEIGHT_ATOL, rtol=1e-4, msg=lambda m, key=key: f"{key}: {m}")


@pytest.fixture(scope="module")
def still_teacher(tmp_path_factory):
    """A CRF teacher on a 4-layer tiny BERT with dropout off."""
    path = make_tiny_bert(tmp_path_factory.mktemp("still_deep"), num_layers=4)
    config = json.loads((path / "config.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (path / "config.json").write_text(json.dumps(config))
    return train_teacher(path, tmp_path_factory.mktemp("still_teacher") / "ner", "ner", crf=True)


@pytest.mark.numerics  # two runs summing in other orders: run again on AVX2 kernels by `make test`
def test_two_processes_distil_the_student_one_process_does(still_teacher, texts_file, tmp_path):
    nlp = spacy.load(still_teacher)
    gold = [Example.from_dict(nlp.make_doc(text), {"entities": ents}).reference for text, ents in NER]
    DocBin(docs=gold).to_disk(tmp_path / "gold.spacy")
    settings = dict(max_steps=4, batch_size=5, checkpoint_every=2, hidden_weight=0.5, cache_teacher=True,
                    gold=str(tmp_path / "gold.spacy"),
                    **{"student.layers": [1, 3], "student.intermediate_size": 48, "student.attention_heads": 1})
    config = distill_config(tmp_path / "c.cfg", still_teacher, texts_file, **settings)
    single = distill(load_distillation_config(config), tmp_path / "single", quiet=True)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               "-m", "spacy_mlm", "distill", str(config), str(tmp_path / "two"), "--quiet"]
    done = subprocess.run(command, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    a, b = state(single), state(tmp_path / "two" / "model")
    assert_same_student(a, b)
    assert not torch.equal(a["ner.output.weight"], state(still_teacher)["ner.output.weight"])  # it trained
    # the losses reported are the whole batch's, summed over the processes' shares (the soft loss is a
    # KL between near-equal distributions, ~0.003: a difference of float32 logs, each rounded at ~1e-7
    # of values up to ~10, over other paddings in the two runs; so an absolute tolerance of 1e-5)
    rows = [[json.loads(line) for line in (tmp_path / run / "metrics.jsonl").read_text().splitlines()]
            for run in ("single", "two")]
    for one, two in zip(*rows):
        assert one.keys() == two.keys()
        for key in one:
            assert two[key] == pytest.approx(one[key], rel=1e-4, abs=1e-5), key
    # each process cached its own share of the teachers' outputs; only the first wrote the student
    cached = sorted(p.name for p in (tmp_path / "two" / "teacher_cache").rglob("*.safetensors"))
    assert any(name.endswith("-rank0.safetensors") for name in cached)
    assert any(name.endswith("-rank1.safetensors") for name in cached)
    assert not list((tmp_path / "two").glob(".student_encoder.rank*"))
    # resumed from its checkpoint of step 2 in two processes, it goes on to the same student
    resumed = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               "-m", "spacy_mlm", "distill", str(config), str(tmp_path / "two"), "--quiet", "--resume",
               "--distillation.max_steps", "6"]
    done = subprocess.run(resumed, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    further = distill(load_distillation_config(config, {"distillation.max_steps": 6}), tmp_path / "single",
                      resume=True, quiet=True)
    a, b = state(further), state(tmp_path / "two" / "model")
    assert_same_student(a, b)


def test_a_batch_smaller_than_the_processes_is_refused_before_any_process_waits(texts_file, tmp_path, monkeypatch):
    """Each process of a 2-process launch refuses a batch of 1 on its own, before the rendezvous
    (no process group is started: a refusal that waited for its peers could hang)."""
    for name, value in {"WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1",
                        "MASTER_PORT": "1"}.items():  # a port no one listens on: a rendezvous would fail
        monkeypatch.setenv(name, value)
    config = distill_config(tmp_path / "c.cfg", tmp_path / "teacher", texts_file, batch_size=1, max_steps=1)
    with pytest.raises(SettingError, match="distillation.batch_size 1 is smaller than the 2 processes"):
        distill(load_distillation_config(config), tmp_path / "two", quiet=True)
    assert not torch.distributed.is_initialized() and not (tmp_path / "two").exists()
