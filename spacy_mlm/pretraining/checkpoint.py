"""Checkpoints that survive kill -9.

Each checkpoint is a new directory `checkpoints/step-NNNNNNNN/` written through
`atomic_directory`, so it either exists complete or not at all; resuming takes
the highest complete step. It holds an HF model directory (`model/`, usable on
its own) and `training_state.pt`: optimizer, scheduler, RNG states, NSP head,
the step (which fixes the data position, see `data.ExampleStream`) and history,
all tensors and plain values, so that resuming loads it with
`torch.load(weights_only=True)`, which builds no other objects and so runs no
code a tampered file could carry.
"""
import io
import json
import logging
import re
import shutil
from pathlib import Path
from typing import Any, Dict, List, Optional

import torch

from ..errors import ModelLoadError
from ..models.hf import MaskedLM, save_mlm_model
from ..util.io import atomic_directory, atomic_write_bytes, atomic_write_text

logger = logging.getLogger(__name__)
STATE_FILE = "training_state.pt"
STEP_DIR = re.compile(r"^step-(\d+)$")
# how torch's weights_only unpickler names a class it refused to build
UNSAFE_GLOBAL = re.compile(r"Unsupported global: GLOBAL ([\w.]+)")


def checkpoints(root: Path) -> List[Path]:
    """Complete checkpoints under `root`, oldest first."""
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := STEP_DIR.match(p.name)) and (p / STATE_FILE).exists()]
    return [p for _, p in sorted(found)]


def latest_checkpoint(root: Path) -> Optional[Path]:
    found = checkpoints(root)
    return found[-1] if found else None


def save_checkpoint(root: Path, step: int, mlm: MaskedLM, state: Dict[str, Any], keep: int) -> Path:
    path = root / f"step-{step:08d}"
    with atomic_directory(path) as tmp:
        save_mlm_model(mlm, tmp / "model")
        buffer = io.BytesIO()
        torch.save(state, buffer)
        (tmp / STATE_FILE).write_bytes(buffer.getvalue())
    atomic_write_text(root / "latest", path.name + "\n")
    for old in checkpoints(root)[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    for stale in root.glob(".step-*.tmp"):  # left by a process killed mid-write
        shutil.rmtree(stale, ignore_errors=True)
    return path


def load_training_state(path: Path) -> Dict[str, Any]:
    file = path / STATE_FILE
    try:
        return torch.load(str(file), map_location="cpu", weights_only=True)
    except Exception as err:  # pickle and torch raise many kinds here
        found = UNSAFE_GLOBAL.search(str(err))
        reason = f"it would have to call or construct {found.group(1)}" if found else f"{type(err).__name__}: {str(err)[:200]}"
        raise ModelLoadError(
            file,
            f"cannot be loaded as a training state of tensors and plain values ({reason}); "
            "it is damaged or was not written by spacy_mlm pretrain",
        ) from None


def write_history(output_dir: Path, history: List[Dict[str, Any]]) -> None:
    """metrics.jsonl and curves.png (loss and accuracy by step) beside the checkpoints."""
    atomic_write_text(output_dir / "metrics.jsonl", "".join(json.dumps(row) + "\n" for row in history))
    if not history:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 4))
    for key, label, ax in [
        ("loss", "train MLM loss", ax_loss),
        ("eval_loss", "held-out MLM loss", ax_loss),
        ("accuracy", "train masked accuracy", ax_acc),
        ("eval_accuracy", "held-out masked accuracy", ax_acc),
    ]:
        points = [(row["step"], row[key]) for row in history if key in row]
        if points:
            ax.plot(*zip(*points), label=label, marker="o" if key.startswith("eval") else None)
    for ax, title in [(ax_loss, "loss"), (ax_acc, "accuracy")]:
        ax.set_xlabel("step")
        ax.set_title(title)
        ax.legend()
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=80)
    plt.close(fig)
    atomic_write_bytes(output_dir / "curves.png", buffer.getvalue())
