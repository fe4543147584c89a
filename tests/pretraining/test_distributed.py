"""The same run in 2 processes (torchrun, the engine's gradient reducer through
shared memory on CPU) and in 1 process with the same effective batch follows the same loss
trajectory, and the one the old loop (torch DDP) followed."""
import os
import subprocess
import sys

import numpy as np
import torch

from spacy_mlm.engine.checkpoint import latest_checkpoint, load_training_state
from spacy_mlm.pretraining.config import load_pretraining_config
from spacy_mlm.pretraining.loop import pretrain

from .conftest import cli_args, read_history, tiny_overrides
from .test_engine_regression import RECORDED_TWO_PROCESSES, assert_recorded


def test_two_processes_match_one(tmp_path, corpus_file, still_model_dir):
    """With head_only_steps: the reducer must not wait for the frozen encoder in the first 2 steps,
    and sums every weight's gradient in the last 3."""
    head_only_steps = 2
    settings = tiny_overrides(corpus_file, still_model_dir, **{
        "pretraining.max_steps": 5, "pretraining.eval_every": 5, "pretraining.checkpoint_every": 0,
        "pretraining.head_only_steps": head_only_steps})  # a checkpoint at the last step all the same
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
    # each process stepped its own part of the weights (shared memory) and held its part of the
    # moments: the checkpoint gathered them all, the one-process run's to rounding
    assert "Summing the gradients of 2 processes through shared memory" in done.stderr
    one, two = (load_training_state(latest_checkpoint(tmp_path / run / "checkpoints"))["optimizer"]["state"]
                for run in ("single", "ddp"))
    assert one.keys() == two.keys() and len(one) > 10
    for key in ("exp_avg", "exp_avg_sq"):
        # at the scale of all the moments: a key bias's gradient is rounding noise (zero in exact
        # arithmetic), its moments too
        scale = max(float(moments[key].abs().max()) for moments in one.values())
        for index, moments in one.items():
            assert torch.allclose(two[index][key], moments[key], rtol=1e-3, atol=1e-5 * scale), (index, key)
    losses, eval_loss, sums = RECORDED_TWO_PROCESSES
    assert_recorded(tmp_path / "ddp", [[x] for x in losses], eval_loss, sums)
