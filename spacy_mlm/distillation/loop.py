"""The distillation run: teachers, student, data, then the engine's loop (`distill`).

Distillation is an objective of the engine (`engine/trainer.py`): the student's
torch weights (its transformer and every head) step together with the
engine's optimizer and schedule (fused AdamW without decay on biases and
norms, linear warmup then decay) and its gradient clipping, whose state is
saved and restored as pretraining's is, so a resumed run goes on exactly:
same weights, optimizer moments, schedule, random state (dropout) and batches
(`data.ItemStream`). Checkpoints are the engine's (`engine/checkpoint.py`):
the student pipeline (`model/`), the training state and the run record, which
a resumed run must match unless `--force`.

Under `torchrun` each process distils its share of every step's batch (its
teachers run on that share only), the soft losses divide by the whole step's
counts, and the engine's reducer sums the gradients: N processes reach the
weights one process would (up to the order of float sums). The first process
writes the student, checkpoints and metrics; each process caches its own
teacher outputs.
"""
import contextlib
import json
import logging
import shutil
import time
from pathlib import Path
from typing import Any, Dict, List

import spacy
import torch
from thinc.api import Config

from ..errors import ModelLoadError, SettingError
from ..engine.checkpoint import (
    check_same_run, flat_settings, restore_rng_state, resume_from, rng_state, save_checkpoint,
)
from ..engine.process_group import ProcessGroup, launch_from_env, start_process_group
from ..engine.trainer import Objective, Trainer, train
from ..util.global_batch import summed_over_processes
from ..util.io import atomic_write_text
from ..util.progress import Progress
from ..util.save import save_atomically
from .config import paths_of
from .data import ItemStream, data_digest, read_gold, read_texts
from .heads import distilled_components
from .step import student_gradients
from .student import STUDENT_ENCODER, build_student, encoder_name
from .teachers import TeacherCache, Teachers, batch_outputs

logger = logging.getLogger(__name__)
# settings a resumed run may change: how long it runs, how often it reports and saves, the cache
FREE_ON_RESUME = frozenset(
    f"distillation.{name}" for name in ("max_steps", "checkpoint_every", "keep_checkpoints", "log_every", "cache_teacher")
)


def load_student(path: Path):
    """A checkpoint's student pipeline; one that does not load is a ModelLoadError
    (so `load_resumable` falls back to the checkpoint before)."""
    try:
        return spacy.load(path)
    except Exception as err:  # spaCy and the components raise many kinds here
        raise ModelLoadError(path, f"cannot be loaded as the student pipeline ({type(err).__name__}: {err})") from None


def run_differences(saved: Dict[str, Any], current: Dict[str, Any]) -> List[str]:
    """'setting: saved -> current' for each difference that changes the run, then the data that changed."""
    old, new = saved["settings"], current["settings"]
    lines = [f"{key}: {json.dumps(old.get(key))} -> {json.dumps(new.get(key))}"
             for key in sorted(set(old) | set(new)) if key not in FREE_ON_RESUME and old.get(key) != new.get(key)]
    lines += [f"the {part} data differ from the run's (same paths, other content?)"
              for part in current["data"] if saved.get("data", {}).get(part) != current["data"][part]]
    return lines


def trained_modules(student, encoder: str, components: List[str]) -> torch.nn.ModuleList:
    """The student's torch modules, the transformer first. Its word embeddings
    give dense gradients here: the optimizer steps every weight at once."""
    from ..models.encoder import get_hf_model

    transformer = get_hf_model(student.get_pipe(encoder).model)
    for module in transformer.modules():
        if isinstance(module, torch.nn.Embedding):
            module.sparse = False
    return torch.nn.ModuleList([transformer] + [torch_module_of(student, name) for name in components])


def torch_module_of(student, name: str) -> torch.nn.Module:
    from ..models.torch_head import torch_module

    return torch_module(student.get_pipe(name).model)


class DistillationObjective(Objective):
    """Distillation as the engine's objective: this process's share of a
    step's texts and labelled Docs (every `world`-th item from its `rank`) with
    the teachers' outputs for them; the gradients are filled through the
    student's listeners (`step.student_gradients`), not from one loss."""

    def __init__(self, student, encoder: str, components: List[str], teachers: Teachers, cache: TeacherCache,
                 stream: ItemStream, texts: List[str], gold: List, section, group: ProcessGroup = ProcessGroup()):
        self.student, self.encoder, self.components, self.teachers, self.cache = student, encoder, components, teachers, cache
        self.stream, self.texts, self.gold, self.section, self.group = stream, texts, gold, section, group

    def batches(self, step: int) -> List[tuple]:
        text_items, gold_items = self.stream.items(step, self.section["batch_size"])
        share = slice(self.group.rank, None, self.group.world)
        text_items, gold_items = text_items[share], gold_items[share]
        gold_batch = [self.gold[i - len(self.texts)] for i in gold_items]
        docs = [self.student.make_doc(self.texts[i]) for i in text_items] + [eg.predicted for eg in gold_batch]
        return [(docs, gold_batch, batch_outputs(self.teachers, self.cache, step, text_items + gold_items, docs))]

    def backward(self, batch) -> Dict[str, float]:
        docs, gold_batch, targets = batch
        return student_gradients(self.student, self.encoder, self.components, docs, gold_batch, targets, self.section,
                                 with_gold=bool(self.gold))


def distill(config: Config, output_dir: Path, resume: bool = False, quiet: bool = False, force: bool = False) -> Path:
    """Train the student; return the directory of the final pipeline (`output_dir/model`)."""
    section = config["distillation"]
    output_dir = Path(output_dir)
    ckpt_root = output_dir / "checkpoints"
    group = join_distillation(section)
    resumed = resume_from(output_dir, resume, load_student, group)
    teacher_paths = paths_of(section, "teacher")
    texts = read_texts(paths_of(section, "texts"), section["text_field"], section["file_format"])
    if resumed is not None:
        student = resumed.model
    elif group.main:
        student = build_student(teacher_paths[0], section["student"], output_dir, texts)
        group.barrier()
    else:
        # the first process's student encoder, taken as it wrote it rather than built again: a narrowed
        # one keeps the units its importances chose, which float rounding on another device could change;
        # staged apart (the first process's copy is the one the pipeline names)
        group.barrier()
        first = {**section["student"], "layers": None, "intermediate_size": None, "attention_heads": None,
                 "encoder": str(output_dir / STUDENT_ENCODER / "model")}
        staging = output_dir / f".student_encoder.rank{group.rank}"
        student = build_student(teacher_paths[0], first, output_dir, texts, staging=staging)
        shutil.rmtree(staging)
    encoder, components = encoder_name(student.config), distilled_components(student)
    teachers = Teachers(teacher_paths, section["teacher_precision"], section["temperature"],
                        hidden=bool(section["hidden_weight"]))
    teachers.check_student(student)
    gold = read_gold(section["gold"], student) if section["gold"] else []
    run = {"settings": flat_settings(dict(section), "distillation"),
           "data": data_digest(texts, [section["gold"]] if section["gold"] else [])}
    step, history = 0, []
    if resumed is not None:
        check_same_run(resumed, lambda saved: run_differences(saved, run), force)
    modules = trained_modules(student, encoder, components)
    device = next(modules.parameters()).device
    trainer = Trainer(modules, section["optimizer"], section["max_steps"], section["optimizer"]["max_grad_norm"], group)
    torch.manual_seed(section["seed"] + group.rank)
    if resumed is not None:
        trainer.load_state(resumed.state)
        saved_rng = resumed.state["rng"]
        if isinstance(saved_rng, list):  # one state per process
            if len(saved_rng) == group.world:  # else dropout noise simply starts afresh
                restore_rng_state(saved_rng[group.rank], device)
        elif group.world == 1:
            restore_rng_state(saved_rng, device)
        step, history = resumed.state["step"], resumed.state["history"]
        logger.info("Resumed from %s at step %d", resumed.path, step)
    if group.main:
        atomic_write_text(output_dir / "config.cfg", config.to_str())
    stream = ItemStream(len(texts), len(gold), section["seed"])
    cache = TeacherCache(output_dir / "teacher_cache" if section["cache_teacher"] else None,
                         {**teachers.identity(section["teacher_precision"]), "data": run["data"]}, group)
    logger.info("Distilling %s into a %d-layer student over %d texts and %d labelled Docs",
                ", ".join(teacher_paths), modules[0].config.num_hidden_layers, len(texts), len(gold))

    def after_step(step: int, reports: List[Dict[str, float]]) -> bool:
        losses = step_losses(reports[-1], group, device)
        history.append({"step": step, **losses, "lr": trainer.rate})
        bar.update(1)
        bar.set_postfix(", ".join(f"{k} {v:.4f}" for k, v in losses.items()))
        if step % section["log_every"] == 0 and group.main:
            logger.info("step %d %s", step, " ".join(f"{k}={v:.4g}" for k, v in history[-1].items() if k != "step"))
        if (section["checkpoint_every"] and step % section["checkpoint_every"] == 0) or step == section["max_steps"]:
            rng = group.gather(rng_state(device)) if group.world > 1 else rng_state(device)
            trained = trainer.state()  # a collective where the processes share the weights
            if group.main:
                state = {**trained, "rng": rng, "step": step, "history": history}
                save_checkpoint(ckpt_root, step, student.to_disk, state, section["keep_checkpoints"], run)
                atomic_write_text(output_dir / "metrics.jsonl", "".join(json.dumps(row) + "\n" for row in history))
            group.barrier()
        return False

    bar = Progress(section["max_steps"], "distill", "steps", initial=step, quiet=quiet or not group.main,
                   logs_above=True)
    started = time.time()
    objective = DistillationObjective(student, encoder, components, teachers, cache, stream, texts, gold, section,
                                      group)
    with summed_over_processes() if group.world > 1 else contextlib.nullcontext():
        train(trainer, objective, step, section["max_steps"], after_step)
    bar.close()
    final = output_dir / "model"
    if group.main:
        save_atomically(student, final)
        logger.info("Saved the student to %s (%.0f s)", final, time.time() - started)
    group.barrier()
    return final


def join_distillation(section) -> ProcessGroup:
    """This process's place in a torchrun launch (started: gloo on CPUs, NCCL
    on GPUs), or rank 0 of 1; a batch too small to share is refused before
    any process waits for the others."""
    group = launch_from_env()
    if group is None:
        return ProcessGroup()
    if section["batch_size"] < group.world:  # before the rendezvous: every process refuses alike, at once
        raise SettingError(f"distillation.batch_size {section['batch_size']} is smaller than the {group.world} "
                           "processes that share each batch")
    from thinc.api import get_current_ops

    start_process_group(group, type(get_current_ops()).__name__ == "CupyOps")
    return group


def step_losses(losses: Dict[str, float], group: ProcessGroup, device: torch.device) -> Dict[str, float]:
    """The step's losses: each process's share summed (each is its sum over the
    share divided by the whole step's count)."""
    if group.world == 1:
        return losses
    names = sorted(losses)
    summed = group.sum(torch.tensor([float(losses[name]) for name in names], dtype=torch.float64, device=device))
    return dict(zip(names, summed.tolist()))
