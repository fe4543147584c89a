"""The same run in 2 processes (torchrun, the engine's gradient reducer over gloo
on CPU) and in 1 process with the same effective batch follows the same loss
trajectory, and the one the old loop (torch DDP) followed."""
import os
import subprocess
import sys

import numpy as np
import pytest

from spacy_mlm.pretraining.config import load_pretraining_config
from spacy_mlm.pretraining.loop import pretrain

from .conftest import cli_args, read_history, tiny_overrides
from .test_engine_regression import RECORDED_TWO_PROCESSES, assert_recorded


@pytest.mark.parametrize("head_only_steps", [0, 2])
def test_two_processes_match_one(tmp_path, corpus_file, still_model_dir, head_only_steps):
    """Also with head_only_steps, whose frozen encoder the reducer must not wait for."""
    settings = tiny_overrides(corpus_file, still_model_dir, **{
        "pretraining.max_steps": 5, "pretraining.eval_every": 5, "pretraining.checkpoint_every": 0,
        "pretraining.head_only_steps": head_only_steps})
    pretrain(load_pretraining_config(None, settings), tmp_path / "single")
    (tmp_path / "c.cfg").write_text("[pretraining]\n")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               "-m", "spacy_mlm", "pretrain", str(tmp_path / "c.cfg"), str(tmp_path / "ddp")] + cli_args(settings)
    done = subprocess.run(command, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    single, ddp = read_history(tmp_path / "single"), read_history(tmp_path / "ddp")
    assert [r["step"] for r in single] == [r["step"] for r in ddp]
    np.testing.assert_allclose([r.get("loss", 0) for r in ddp], [r.get("loss", 0) for r in single], rtol=1e-4)
    np.testing.assert_allclose(ddp[-1]["eval_loss"], single[-1]["eval_loss"], rtol=1e-4)
    assert single[-1]["loss"] != single[1]["loss"]  # it did train
    if head_only_steps == 2:
        losses, eval_loss, sums = RECORDED_TWO_PROCESSES
        assert_recorded(tmp_path / "ddp", [[x] for x in losses], eval_loss, sums)
