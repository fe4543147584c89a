"""Same seed, same data: the same losses and predictions on CPU, in this process
and in a fresh one with another hash seed."""
import json
import os
import subprocess
import sys

import numpy as np

from .conftest import train_tagger_textcat

PROBES = ["What a wonderful film.", "Dull and far too long.", "A moving story near the town."]
STEPS = 4


def _run(path, seed):
    nlp, history = train_tagger_textcat(path, steps=STEPS, seed=seed)
    docs = list(nlp.pipe(PROBES))
    return {
        "losses": history,
        "tags": [[t.tag_ for t in d] for d in docs],
        "cats": [d.cats for d in docs],
        "hidden": [d._.mlm_encoding.hidden.tolist() for d in docs],
    }


def test_same_seed_same_losses_and_predictions(tiny_model_dir):
    first, second = _run(tiny_model_dir, 0), _run(tiny_model_dir, 0)
    assert first["losses"] == second["losses"]  # exactly, not approximately
    assert first["tags"] == second["tags"] and first["cats"] == second["cats"]
    assert first["hidden"] == second["hidden"]
    other = _run(tiny_model_dir, 1)  # the seed reaches dropout and initialisation
    assert other["losses"] != first["losses"]


def test_same_results_in_a_fresh_process(tiny_model_dir):
    ours = _run(tiny_model_dir, 0)
    script = (
        "import json, sys\n"
        "from tests.reliability.test_reproducibility import _run\n"
        f"print(json.dumps(_run({str(tiny_model_dir)!r}, 0)))\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", script], cwd=root, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    theirs = json.loads(out.stdout.strip().splitlines()[-1])
    assert theirs["losses"] == json.loads(json.dumps(ours["losses"]))
    assert theirs["tags"] == ours["tags"] and theirs["cats"] == json.loads(json.dumps(ours["cats"]))
    np.testing.assert_array_equal(np.array(theirs["hidden"][0]), np.array(ours["hidden"][0]))
