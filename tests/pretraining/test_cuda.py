"""Pretraining on a CUDA GPU (skipped without one; `pytest -m cuda` selects them):
a few steps of the tiny model in fp32 and bf16 against the same run on the CPU,
and the CUDA random state a checkpoint saves, restored on resume so that dropout
draws the masks the uninterrupted run drew."""
import shutil

import pytest
import torch
from transformers import AutoModelForMaskedLM

from spacy_mlm.engine.checkpoint import latest_checkpoint, load_training_state
from spacy_mlm.pretraining.config import load_pretraining_config
from spacy_mlm.pretraining.loop import pretrain

from .conftest import read_history, tiny_overrides

# bf16 autocast rounds activations to 8 bits of mantissa: its losses stay near the fp32 ones, not equal
LOSS_TOLERANCE = {"fp32": 5e-3, "bf16": 5e-2}


def losses(output_dir):
    return [(row["step"], row["loss"]) for row in read_history(output_dir) if "loss" in row]


@pytest.mark.cuda
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_pretraining_on_cuda_follows_the_cpu_run(tmp_path, corpus_file, still_model_dir, torch_cuda, precision):
    """Dropout off: the same batches, so the GPU's losses are the CPU's (to rounding),
    and the run saves a model that loads on the CPU and a checkpoint with the GPU's random state."""
    settings = tiny_overrides(corpus_file, still_model_dir, **{"pretraining.max_steps": 3, "pretraining.eval_every": 3})
    pretrain(load_pretraining_config(None, {**settings, "pretraining.device": "cpu"}), tmp_path / "cpu")
    pretrain(load_pretraining_config(None, {**settings, "pretraining.device": str(torch_cuda),
                                            "pretraining.precision": precision}), tmp_path / "gpu")
    cpu, gpu = losses(tmp_path / "cpu"), losses(tmp_path / "gpu")
    assert [step for step, _ in gpu] == [step for step, _ in cpu] == [1, 2, 3]
    assert [loss for _, loss in gpu] == pytest.approx([loss for _, loss in cpu], rel=LOSS_TOLERANCE[precision])
    state = load_training_state(latest_checkpoint(tmp_path / "gpu" / "checkpoints"))
    assert isinstance(state["rng"][0]["cuda"], torch.Tensor)
    model = AutoModelForMaskedLM.from_pretrained(str(tmp_path / "gpu" / "model"))
    assert next(model.parameters()).device.type == "cpu" and all(torch.isfinite(p).all() for p in model.parameters())


@pytest.mark.cuda
def test_a_resumed_cuda_run_draws_the_dropout_of_the_uninterrupted_one(tmp_path, corpus_file, tiny_model_dir,
                                                                      torch_cuda, monkeypatch):
    """Dropout on (the tiny model's 0.1): stopped after its first step and resumed, the
    run logs the uninterrupted run's losses; resumed without restoring the CUDA
    random state, it does not (so the comparison can tell)."""
    settings = tiny_overrides(corpus_file, tiny_model_dir, **{"pretraining.max_steps": 5, "pretraining.eval_every": 5,
                                                              "pretraining.device": str(torch_cuda)})
    pretrain(load_pretraining_config(None, settings), tmp_path / "reference")
    stopped = tmp_path / "stopped"
    pretrain(load_pretraining_config(None, {**settings, "pretraining.max_time": 1e-9}), stopped)
    assert [step for step, _ in losses(stopped)] == [1]
    assert isinstance(load_training_state(latest_checkpoint(stopped / "checkpoints"))["rng"][0]["cuda"], torch.Tensor)
    shutil.copytree(stopped, tmp_path / "unrestored")
    pretrain(load_pretraining_config(None, settings), stopped, resume=True)
    reference = [loss for _, loss in losses(tmp_path / "reference")]
    assert [loss for _, loss in losses(stopped)] == pytest.approx(reference, rel=1e-4)
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda state, device=None: None)
    pretrain(load_pretraining_config(None, settings), tmp_path / "unrestored", resume=True)
    assert [loss for _, loss in losses(tmp_path / "unrestored")] != pytest.approx(reference, rel=1e-4)
