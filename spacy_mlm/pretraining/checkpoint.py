"""Checkpoints that survive kill -9.

Each checkpoint is a new directory `checkpoints/step-NNNNNNNN/` written through
`atomic_directory`, so it either exists complete or not at all. It holds an HF
model directory (`model/`, usable on its own), `training_state.pt`: optimizer,
scheduler, RNG states (CPU, and CUDA where the run is on a GPU), the objective's own
parts (NSP head; replaced-token detection's generator and head), the
step (which fixes the data position, see `data.ExampleStream`) and history, all
tensors and plain values, so that resuming loads it with
`torch.load(weights_only=True)`, which builds no other objects and so runs no
code a tampered file could carry; and `run.json`, what makes the run the run
(its settings and a digest of its data), which a resumed run must match.

Resuming takes the newest checkpoint that loads: one damaged after it was
written (a full disk, a bad copy) is skipped with a warning for the one before.
"""
import hashlib
import io
import json
import logging
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional

import torch

from ..errors import ModelLoadError, SpacyMlmError
from ..models.hf import MaskedLM, load_mlm_model, save_mlm_model
from ..util.io import atomic_directory, atomic_write_bytes, atomic_write_text

logger = logging.getLogger(__name__)
STATE_FILE = "training_state.pt"
RUN_FILE = "run.json"
# Settings a resumed run may change: how long it runs, how often it reports and
# saves, where it runs, how a batch is split (the gradient is the same). Every
# other one (data, batch size, seed, masking, sequence length, model, optimizer,
# the held-out set) changes what the run learns or measures.
FREE_ON_RESUME = frozenset(
    f"pretraining.{name}" for name in
    ("max_steps", "max_time", "eval_every", "checkpoint_every", "keep_checkpoints", "log_every", "device",
     "grad_accumulation_steps")
)
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


def save_checkpoint(
    root: Path, step: int, mlm: MaskedLM, state: Dict[str, Any], keep: int, run: Optional[Dict[str, Any]] = None
) -> Path:
    path = root / f"step-{step:08d}"
    with atomic_directory(path) as tmp:
        save_mlm_model(mlm, tmp / "model")
        buffer = io.BytesIO()
        torch.save(state, buffer)
        (tmp / STATE_FILE).write_bytes(buffer.getvalue())
        if run is not None:
            (tmp / RUN_FILE).write_text(json.dumps(run, indent=1, sort_keys=True), encoding="utf8")
    atomic_write_text(root / "latest", path.name + "\n")
    for old in checkpoints(root)[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return path


@dataclass
class Resumed:
    """A checkpoint to continue from, loaded."""

    path: Path
    state: Dict[str, Any]
    mlm: MaskedLM
    run: Optional[Dict[str, Any]]  # None for checkpoints written before run.json existed


def load_resumable(root: Path, load_model: Callable[[Path], MaskedLM] = load_mlm_model) -> Optional[Resumed]:
    """The newest checkpoint under `root` whose training state, model (read by
    `load_model`: the discriminator's loader for replaced-token detection) and
    run record all load (None if there is no checkpoint); a damaged newer one is
    skipped with a warning. If none loads, a SpacyMlmError lists why."""
    failures = []
    for path in reversed(checkpoints(root)):
        try:
            resumed = Resumed(path, load_training_state(path), load_model(path / "model"), _read_run(path))
        except ModelLoadError as err:
            logger.warning("Checkpoint %s cannot be resumed from, skipping it: %s", path.name, err)
            failures.append(str(err))
            continue
        if failures:
            logger.warning("Resuming from %s, the newest checkpoint that loads", path)
        return resumed
    if failures:
        raise SpacyMlmError(f"no checkpoint in {root} can be resumed from: " + "; ".join(failures))
    return None


def _read_run(path: Path) -> Optional[Dict[str, Any]]:
    file = path / RUN_FILE
    if not file.exists():
        return None
    try:
        run = json.loads(file.read_text(encoding="utf8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise ModelLoadError(file, f"is not valid JSON ({err})") from None
    if not isinstance(run, dict) or not isinstance(run.get("settings"), dict):
        raise ModelLoadError(file, "should hold a JSON object with the run's 'settings'")
    return run


def corpus_digest(documents: Dict[str, Iterable[Iterable[str]]]) -> str:
    """sha256 of the documents (language, then each document's segments), so a
    corpus edited in place is told from the one the run started on."""
    digest = hashlib.sha256()
    for lang in sorted(documents):
        digest.update(f"\x00lang {lang}\x00".encode("utf8"))
        for document in documents[lang]:
            digest.update(("\n".join(document) + "\x00").encode("utf8"))
    return digest.hexdigest()


def flat_settings(section: Dict[str, Any], prefix: str) -> Dict[str, Any]:
    """Nested settings as {"pretraining.masking.rate": 0.15, ...}."""
    flat: Dict[str, Any] = {}
    for key, value in section.items():
        if isinstance(value, dict):
            flat.update(flat_settings(value, f"{prefix}.{key}"))
        else:
            flat[f"{prefix}.{key}"] = value
    return flat


def run_record(settings: Dict[str, Any], train_docs, dev_docs) -> Dict[str, Any]:
    """What makes a run the run: its [pretraining] settings (interpolated; the
    [pretraining.rtd] ones only when the objective is rtd, since they change
    nothing else) and digests of the documents it trains and evaluates on."""
    flat = flat_settings(dict(settings), "pretraining")
    if settings["objective"] != "rtd":
        flat = {key: value for key, value in flat.items() if not key.startswith("pretraining.rtd.")}
    return {"settings": flat, "data": {"train": corpus_digest(train_docs), "dev": corpus_digest(dev_docs)}}


def run_differences(saved: Dict[str, Any], current: Dict[str, Any]) -> List[str]:
    """'setting: saved -> current' for each difference that changes the run
    (FREE_ON_RESUME ones do not), then the data that changed. A setting that a
    record written before it existed lacks (`objective`) counts as its default:
    the run had the default's behaviour."""
    from .config import load_pretraining_config

    defaults = flat_settings(dict(load_pretraining_config(None)["pretraining"]), "pretraining")
    old = {**{key: defaults[key] for key in set(current["settings"]) & set(defaults)}, **saved["settings"]}
    new = current["settings"]

    def show(value) -> str:  # 0.3, not 0.30000000000000004 as a config can hold it
        return f"{value:.6g}" if isinstance(value, float) else json.dumps(value)

    lines = [
        f"{key}: {show(old.get(key))} -> {show(new.get(key))}"
        for key in sorted(set(old) | set(new))
        if key not in FREE_ON_RESUME and old.get(key) != new.get(key)
    ]
    for part in ("train", "dev"):
        if saved.get("data", {}).get(part) not in (None, current["data"][part]):
            lines.append(f"the {part} documents differ from the run's (same paths, other content?)")
    return lines


def rng_state(device: torch.device) -> Dict[str, Optional[torch.Tensor]]:
    """This process's random state: the CPU generator's and, on a GPU, its device's
    (dropout on a GPU draws from the device generator)."""
    return {"cpu": torch.get_rng_state(), "cuda": torch.cuda.get_rng_state(device) if device.type == "cuda" else None}


def restore_rng_state(saved, device: torch.device) -> None:
    """Set what `rng_state` saved (a bare tensor: a checkpoint from before CUDA
    states were kept, CPU only); a CUDA state is restored only onto a GPU."""
    saved = {"cpu": saved, "cuda": None} if isinstance(saved, torch.Tensor) else saved
    torch.set_rng_state(saved["cpu"])
    if device.type == "cuda":
        if saved.get("cuda") is None:
            logger.warning("The checkpoint holds no CUDA random state (it ran on the CPU): GPU dropout starts afresh")
        else:
            torch.cuda.set_rng_state(saved["cuda"], device)


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
        ("rtd_loss", "train replaced-token loss", ax_loss),
        ("eval_rtd_loss", "held-out replaced-token loss", ax_loss),
        ("rtd_accuracy", "train replaced-token accuracy", ax_acc),
        ("eval_rtd_accuracy", "held-out replaced-token accuracy", ax_acc),
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
