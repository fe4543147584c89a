"""`spacy train --gpu-id 0` on the shipped NER template with the tiny encoder
(skipped without a CUDA device and CuPy; `pytest -m cuda` selects it): the
command spaCy users run, in its own process, as on a GPU machine."""
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import spacy

import spacy_mlm  # noqa: F401
from spacy_mlm.readers.conll import conll_to_docbin
from spacy_mlm.training.config_templates import render_pipeline_config

CONLL = Path(__file__).resolve().parents[2] / "project" / "assets_default" / "conll2003"
GPU_ID = "0"


@pytest.mark.cuda
def test_spacy_train_gpu_id_0_trains_the_ner_template(tiny_model_dir, tmp_path):
    conll_to_docbin(CONLL / "train.txt", tmp_path / "train.spacy")
    conll_to_docbin(CONLL / "valid.txt", tmp_path / "dev.spacy")
    config = tmp_path / "ner.cfg"
    config.write_text(render_pipeline_config("ner", str(tiny_model_dir)), encoding="utf8")
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "spacy", "train", str(config), "--output", str(out), "--gpu-id", GPU_ID,
         "--paths.train", str(tmp_path / "train.spacy"), "--paths.dev", str(tmp_path / "dev.spacy"),
         "--training.max_steps", "6", "--training.eval_frequency", "3", "--training.logger.progress_interval", "0",
         "--corpora.dev.limit", "20"],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"Using GPU: {GPU_ID}" in proc.stdout, proc.stdout[-3000:]
    performance = json.loads((out / "model-last" / "meta.json").read_text(encoding="utf8"))["performance"]
    # the tagger's loss and the gradient it sent the encoder through the listener, on the GPU
    assert math.isfinite(performance["ner_loss"]) and performance["ner_loss"] > 0 and performance["encoder_loss"] > 0
    nlp = spacy.load(out / "model-last")  # saved from the GPU, loaded on the CPU
    assert nlp.pipe_names == ["encoder", "ner"] and nlp.get_pipe("ner").labels == ("LOC", "MISC", "ORG", "PER")
    assert nlp("Anna Berg works for Acme Bank in Oslo .")._.mlm_encoding.hidden.shape[1] == 32
