"""Checkpoints that survive kill -9: the one format every engine run writes and resumes.

Each checkpoint is a new directory `checkpoints/step-NNNNNNNN/` written through
`atomic_directory`, so it either exists complete or not at all. It holds the
model as the run saves it (`model/`: an HF directory for pretraining, a spaCy
pipeline for distillation, each usable on its own), `training_state.pt`:
optimizer, scheduler, RNG states (CPU, and CUDA where the run is on a GPU), the
objective's own parts, the step (which fixes the data position) and history,
all tensors and plain values, so that resuming loads it with
`torch.load(weights_only=True)`, which builds no other objects and so runs no
code a tampered file could carry; and `run.json`, what makes the run the run
(its settings and a digest of its data), which a resumed run must match.

Resuming takes the newest checkpoint that loads: one damaged after it was
written (a full disk, a bad copy) is skipped with a warning for the one before.
"""
import io
import json
import logging
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import torch

from ..errors import ModelLoadError, SpacyMlmError
from ..util.io import atomic_directory, atomic_write_text, remove_left_overs
from .process_group import ProcessGroup

logger = logging.getLogger(__name__)
STATE_FILE = "training_state.pt"
RUN_FILE = "run.json"
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


def save_checkpoint(root: Path, step: int, save_model: Callable[[Path], None], state: Dict[str, Any], keep: int,
                    run: Optional[Dict[str, Any]] = None) -> Path:
    """Write checkpoint `step` (the model through `save_model(directory)`), keeping the newest `keep` (0: all)."""
    path = root / f"step-{step:08d}"
    with atomic_directory(path) as tmp:
        save_model(tmp / "model")
        buffer = io.BytesIO()
        torch.save(state, buffer)
        (tmp / STATE_FILE).write_bytes(buffer.getvalue())
        if run is not None:
            (tmp / RUN_FILE).write_text(json.dumps(run, indent=1, sort_keys=True), encoding="utf8")
    atomic_write_text(root / "latest", path.name + "\n")
    for old in checkpoints(root)[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return path


def resume_from(output_dir: Path, resume: bool, load_model: Callable[[Path], Any],
                group: ProcessGroup = ProcessGroup()) -> Optional["Resumed"]:
    """Where a run writing to `output_dir` starts: what killed runs left there
    is removed (by the first process), checkpoints without `resume` are
    refused, and with it the newest that loads is returned (None: none yet,
    the run starts from the beginning)."""
    root = output_dir / "checkpoints"
    if group.main:  # temporary files and directories, replaced checkpoints
        for left in remove_left_overs(output_dir) + remove_left_overs(root):
            logger.info("Removed %s, left by an interrupted run", left)
    group.barrier()
    if not resume and latest_checkpoint(root) is not None:
        raise SpacyMlmError(f"{output_dir} already has checkpoints: pass --resume to continue, or use a new directory")
    resumed = load_resumable(root, load_model) if resume else None
    if resume and resumed is None:
        logger.warning("--resume: no checkpoint in %s yet, starting from the beginning", root)
    return resumed


@dataclass
class Resumed:
    """A checkpoint to continue from, loaded."""

    path: Path
    state: Dict[str, Any]
    model: Any  # what the run's `load_model` read from `model/`
    run: Optional[Dict[str, Any]]  # None for checkpoints written before run.json existed


def load_resumable(root: Path, load_model: Callable[[Path], Any]) -> Optional[Resumed]:
    """The newest checkpoint under `root` whose training state, model (read by
    `load_model`, which raises ModelLoadError for one that does not load) and
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


def check_same_run(resumed: Resumed, differences: Callable[[Dict[str, Any]], List[str]], force: bool) -> List[str]:
    """`differences(the resumed run's record)`: what changes the run; any is an
    error naming them, unless `force` (then each is logged and returned)."""
    if resumed.run is None:
        logger.warning("%s has no run record (an older checkpoint): its settings cannot be compared", resumed.path)
        return []
    lines = differences(resumed.run)
    if lines and not force:
        raise SpacyMlmError(
            f"--resume from {resumed.path} with settings or data that change the run: " + "; ".join(lines)
            + ". Resume with the run's own settings (its config.cfg), start a new output directory, "
            "or pass --force to continue with these"
        )
    for line in lines:
        logger.warning("--force: resuming with %s", line)
    return lines


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


def flat_settings(section: Dict[str, Any], prefix: str) -> Dict[str, Any]:
    """Nested settings as {"pretraining.masking.rate": 0.15, ...}."""
    flat: Dict[str, Any] = {}
    for key, value in section.items():
        if isinstance(value, dict):
            flat.update(flat_settings(value, f"{prefix}.{key}"))
        else:
            flat[f"{prefix}.{key}"] = value
    return flat


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
