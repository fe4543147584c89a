"""kill -9 during pretraining, then --resume: same data order, optimizer state and
losses as a run that was never interrupted; nothing beyond one interval is lost."""
import os
import signal
import subprocess
import sys
import time

import numpy as np
from transformers import AutoModelForMaskedLM

from spacy_mlm.engine.checkpoint import checkpoints
from spacy_mlm.pretraining.config import load_pretraining_config
from spacy_mlm.pretraining.loop import pretrain

from .conftest import cli_args, read_history, tiny_overrides


def test_kill_9_then_resume_matches_an_uninterrupted_run(tmp_path, corpus_file, still_model_dir):
    settings = tiny_overrides(corpus_file, still_model_dir, **{
        "pretraining.max_steps": 12, "pretraining.checkpoint_every": 4, "pretraining.eval_every": 6})
    pretrain(load_pretraining_config(None, settings), tmp_path / "reference")
    reference = read_history(tmp_path / "reference")

    out = tmp_path / "killed"
    command = [sys.executable, "-m", "spacy_mlm", "pretrain", str(tmp_path / "c.cfg"), str(out)] + cli_args(settings)
    (tmp_path / "c.cfg").write_text("[pretraining]\n")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while not (out / "checkpoints" / "step-00000004" / "training_state.pt").exists():
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        assert time.time() < deadline, "no checkpoint within 120 s"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (out / "model").exists()  # it really died before the end
    kept = checkpoints(out / "checkpoints")
    assert kept and kept[-1].name < "step-00000012"
    AutoModelForMaskedLM.from_pretrained(kept[-1] / "model")  # the last checkpoint is intact

    done = subprocess.run(command + ["--resume"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Resumed from" in done.stderr
    resumed = read_history(out)
    assert [row["step"] for row in resumed] == [row["step"] for row in reference]
    np.testing.assert_allclose([r.get("loss", 0) for r in resumed], [r.get("loss", 0) for r in reference], rtol=1e-5)
    np.testing.assert_allclose(resumed[-1]["eval_loss"], reference[-1]["eval_loss"], rtol=1e-5)
