"""The pretraining run: data and model, then the engine's loop (`pretrain`).

Works the same in one process and under `torchrun` (the engine's process group
and gradient reducer: gloo on CPU, nccl on GPU). `batch_size` is the effective
batch of an optimizer step; each process takes its rows of it and splits them
into `grad_accumulation_steps` micro-batches (`PretrainingObjective`). Losses
are sums divided by the number of predictions in the whole effective batch, so
the gradient is the same however the batch is split. The model of the
objective (`objective = "mlm"`: `objectives.PretrainingModel`; `"rtd"`:
`rtd.ReplacedTokenDetection`) is the one thing that differs between the two.
"""
import logging
import os
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import numpy as np
import torch
from thinc.api import Config

from ..engine.checkpoint import check_same_run, restore_rng_state, resume_from, rng_state, save_checkpoint
from ..engine.process_group import ProcessGroup, join_launch
from ..engine.trainer import Objective, Trainer, train
from ..errors import SpacyMlmError
from ..models.hf import (
    MaskedLM, build_scratch_discriminator, build_scratch_mlm_model, load_discriminator, load_mlm_model, load_tokenizer,
    max_positions, save_mlm_model,
)
from ..readers.corpus import read_corpus
from ..util.io import atomic_directory, atomic_write_text
from ..util.machine import cpu_bf16_is_faster, slow_bf16_note
from ..util.progress import Progress
from .checkpoint import run_differences, run_record, write_history
from .data import Batch, ExampleStream, MaskingSettings, collate, token_counts, tokenize_documents
from .masking import MaskedBatch, unigram_distribution, uniform_distribution
from .objectives import SUMMED, ObjectiveSums, PretrainingModel, metrics, set_output_bias
from .rtd import ReplacedTokenDetection, build_generator
from .tokenizer import train_tokenizer

logger = logging.getLogger(__name__)
EVAL_SEED = 2**31 - 1  # the held-out masks never change during a run


@dataclass
class PendingSteps:
    """Steps trained but not yet read. Their sums stay where the model runs, one
    (len(SUMMED),) row each, until the loop needs numbers (to log, evaluate,
    checkpoint or stop); then one transfer, and under torchrun one all-reduce that
    also tells every process whether any ran out of time, turns them into history
    rows. Reading a GPU number every step would make the CPU wait for the GPU
    instead of preparing the next batch while the GPU computes this one."""

    sums: List[torch.Tensor] = field(default_factory=list)
    counts: List[Tuple[int, int, int, int, float]] = field(default_factory=list)  # step, predicted, pairs, scored, lr
    nsp: bool = False
    rtd: bool = False

    def add(self, step: int, sums: torch.Tensor, objective: ObjectiveSums, n_pred: int, n_pairs: int, n_scored: int,
            lr: float) -> None:
        self.sums.append(sums)
        self.counts.append((step, n_pred, n_pairs, n_scored, lr))
        self.nsp, self.rtd = objective.nsp_loss is not None, objective.rtd_loss is not None

    def read(self, dist: ProcessGroup, out_of_time: bool) -> Tuple[List[Dict[str, float]], bool]:
        """(the pending steps' history rows, whether any process is out of time)."""
        late = self.sums[-1].new_tensor([float(out_of_time)])
        totals = dist.sum(torch.cat([torch.stack(self.sums).flatten(), late])).tolist()
        width = len(SUMMED)
        rows = [{"step": step, **metrics(totals[i * width : (i + 1) * width], n_pred, n_pairs, n_scored, self.nsp,
                                         self.rtd), "lr": lr}
                for i, (step, n_pred, n_pairs, n_scored, lr) in enumerate(self.counts)]
        self.sums, self.counts = [], []
        return rows, totals[-1] > 0


def corpus_paths(spec) -> Dict[str, str]:
    """lang -> path from a single path (language "all") or a {lang: path} section."""
    if spec is None:
        return {}
    return {str(k): str(v) for k, v in spec.items()} if isinstance(spec, dict) else {"all": str(spec)}


def read_documents(corpus_cfg) -> Tuple[Dict[str, list], Dict[str, list]]:
    """(train, dev) documents per language; without a dev corpus, the last
    `dev_fraction` of each language's training documents is held out."""
    train_paths = corpus_paths(corpus_cfg["train"])
    if not train_paths:
        raise SpacyMlmError("no training corpus: set [pretraining.corpus] train (or --paths.train)")
    read = lambda p: read_corpus(p, corpus_cfg["text_field"], corpus_cfg["file_format"])  # noqa: E731
    train = {lang: read(path) for lang, path in train_paths.items()}
    dev_paths = corpus_paths(corpus_cfg["dev"])
    if dev_paths:
        return train, {lang: read(path) for lang, path in dev_paths.items()}
    dev = {}
    for lang, docs in train.items():
        if len(docs) < 4:
            raise SpacyMlmError(f"corpus {train_paths[lang]} has under 4 documents; give a dev corpus to evaluate on")
        n_dev = max(2, int(round(corpus_cfg["dev_fraction"] * len(docs))))
        train[lang], dev[lang] = docs[:-n_dev], docs[-n_dev:]
    return train, dev


def model_loader(cfg):
    """How the model being pretrained loads: with its MLM head, or (rtd) as the bare discriminator."""
    return load_discriminator if cfg["objective"] == "rtd" else load_mlm_model


def get_model(cfg, output_dir: Path, train_docs, dist: ProcessGroup) -> MaskedLM:
    """From `source`, else built from scratch with a tokenizer trained on the
    corpus (by the first process; the others load what it saved)."""
    torch.manual_seed(cfg["seed"])  # whatever is initialised here (a missing MLM head, a scratch model)
    if cfg["source"]:
        return model_loader(cfg)(cfg["source"])
    scratch = cfg["scratch"]
    tokenizer_dir = output_dir / "tokenizer"
    if dist.main and not (tokenizer_dir / "tokenizer.json").exists():
        texts = [seg for docs in train_docs.values() for doc in docs for seg in doc]
        trained = train_tokenizer(texts, scratch["tokenizer"], scratch["vocab_size"], scratch["lowercase"], cfg["max_length"])
        with atomic_directory(tokenizer_dir) as tmp:  # killed mid-save, no half tokenizer is reused
            trained.save_pretrained(str(tmp))
        logger.info("Trained a %s tokenizer (%d entries) on the corpus", scratch["tokenizer"], len(trained))
    dist.barrier()
    build = build_scratch_discriminator if cfg["objective"] == "rtd" else build_scratch_mlm_model
    return build(
        load_tokenizer(tokenizer_dir), scratch["architecture"], hidden_width=scratch["hidden_size"],
        depth=scratch["num_layers"], n_heads=scratch["num_heads"], intermediate_width=scratch["intermediate_size"],
        max_positions=cfg["max_length"], dropout=scratch["dropout"],
    )


def to_inputs(batch: Batch, masked: MaskedBatch, device: torch.device, noise: Optional[np.ndarray] = None
              ) -> Dict[str, torch.Tensor]:
    """The model's keyword arguments; `noise`: the objective's sampling noise (rtd), if any.
    To a GPU they go from pinned memory without waiting: a copy from pageable
    memory first waits for the GPU to finish the work queued before it."""
    def tensor(x):
        if x is None:
            return None
        t = torch.from_numpy(np.ascontiguousarray(x))
        return t.pin_memory().to(device, non_blocking=True) if device.type == "cuda" else t
    inputs = {
        "input_ids": tensor(masked.input_ids),
        "labels": tensor(masked.labels),
        "attention_mask": tensor(batch.attention_mask),
        "token_type_ids": tensor(batch.token_type_ids),
        "nsp_labels": tensor(batch.nsp_labels),
    }
    if noise is not None:
        inputs["sample_noise"] = tensor(noise)
    return inputs


def n_positions(batch: Batch) -> int:
    """Non-padding positions: what replaced-token detection scores."""
    return int(batch.input_ids.size if batch.attention_mask is None else batch.attention_mask.sum())


def evaluation_batches(examples, tokenizer, masking: MaskingSettings, size: int, limit: int, model):
    """Held-out batches with masks (and the objective's sampling noise) fixed
    once, so every evaluation (and the before/after comparison of a benchmark)
    scores the same predictions."""
    rng = np.random.default_rng(EVAL_SEED)
    examples = examples[:limit]
    batches = []
    for i in range(0, len(examples), size):
        batch = collate(examples[i : i + size], tokenizer)
        masked = masking.apply(batch, rng)
        batches.append((batch, masked, model.sampling_noise(batch.input_ids.shape, rng)))
    return batches


def forward_precision(device: torch.device, precision: str):
    """The context of every forward pass: bfloat16 autocast for precision
    "bf16" (matmuls in bf16, weights and the losses, computed from
    `.float()` logits, in fp32), nothing for "fp32"."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16")


@torch.no_grad()
def evaluate(model, batches, device: torch.device, precision: str = "fp32") -> Dict[str, float]:
    """Held-out sums in the run's own precision."""
    was_training = model.training
    model.eval()
    totals, n_pred, n_pairs, n_scored, sums = 0.0, 0, 0, 0, None
    for batch, masked, noise in batches:
        with forward_precision(device, precision):
            sums = model(**to_inputs(batch, masked, device, noise))
        totals = totals + sums.stacked()
        n_pred, n_pairs, n_scored = n_pred + sums.n_predicted, n_pairs + sums.n_pairs, n_scored + n_positions(batch)
    model.train(was_training)
    if sums is None:
        return {}
    row = metrics(totals.tolist(), n_pred, n_pairs, n_scored, sums.nsp_loss is not None, sums.rtd_loss is not None,
                  "eval_")
    row["eval_perplexity"] = float(np.exp(min(row["eval_loss"], 50.0)))
    return row


def freeze_encoder(mlm_model: torch.nn.Module, frozen: bool) -> None:
    """Freeze (or unfreeze) everything but the output heads: the base model
    (`bert`, `roberta`, ...) holds the encoder and the input embeddings, which
    the MLM decoder shares, so only the head's transform, its bias and any NSP
    layer stay trainable. Frozen weights get no gradient, so AdamW leaves them
    and their moments as they are, and the backward pass stops at the head."""
    for parameter in mlm_model.base_model.parameters():
        parameter.requires_grad_(not frozen)


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def prepare(config: Config, output_dir: Path, resume: bool, force: bool = False):
    """Everything the loop needs, built identically in every process."""
    cfg = config["pretraining"]
    device = pick_device(cfg["device"])
    if device.type == "cuda" and "LOCAL_RANK" in os.environ:  # under torchrun: the process's own GPU
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    dist = join_launch(device)
    resumed = resume_from(output_dir, resume, model_loader(cfg), dist)
    train_docs, dev_docs = read_documents(cfg["corpus"])
    run = run_record(cfg, train_docs, dev_docs)
    changes = check_same_run(resumed, partial(run_differences, current=run), force) if resumed is not None else []
    mlm = resumed.model if resumed is not None else get_model(cfg, output_dir, train_docs, dist)
    tokenizer = mlm.tokenizer
    limit = max_positions(mlm.model, tokenizer)
    if cfg["max_length"] > limit:
        raise SpacyMlmError(f"max_length {cfg['max_length']} exceeds the model's {limit} positions")
    train_tok = {lang: tokenize_documents(tokenizer, docs) for lang, docs in train_docs.items()}
    dev_tok = {lang: tokenize_documents(tokenizer, docs) for lang, docs in dev_docs.items()}
    counts = token_counts(train_tok.values(), len(tokenizer))
    specials = tokenizer.all_special_ids
    mask_cfg = cfg["masking"]
    if mask_cfg["replacement"] not in ("unigram", "uniform"):
        raise SpacyMlmError(f"[pretraining.masking] replacement must be unigram or uniform, got {mask_cfg['replacement']!r}")
    unigram = unigram_distribution(counts, specials)
    replacement = unigram if mask_cfg["replacement"] == "unigram" else uniform_distribution(len(tokenizer), specials)
    masking = MaskingSettings(
        tokenizer.mask_token_id, replacement, mask_cfg["rate"], mask_cfg["mask_fraction"],
        mask_cfg["random_fraction"], mask_cfg["whole_word"],
    )
    nsp = cfg["next_sentence"]
    capacity = cfg["max_length"] - tokenizer.num_special_tokens_to_add(pair=nsp)
    stream = ExampleStream(train_tok, capacity, tokenizer.sep_token_id, cfg["seed"], nsp, cfg["corpus"]["sampling_alpha"])
    dev_stream = ExampleStream(dev_tok, capacity, tokenizer.sep_token_id, cfg["seed"], nsp)
    dev_examples = [dev_stream.example(i) for i in range(min(dev_stream.epoch_size, cfg["eval_sequences"]))]
    if dist.main:
        logger.info("Training examples per epoch: %d (%s)", stream.epoch_size, stream.describe_shares())
    model = objective_model(cfg, mlm, unigram).to(device)  # moves mlm.model in place
    if cfg["precision"] == "bf16" and device.type == "cpu" and not cpu_bf16_is_faster() and dist.main:
        logger.warning('precision = "bf16": %s; set precision = "fp32"', slow_bf16_note())
    return cfg, device, dist, model, mlm, stream, dev_examples, masking, resumed, run, changes


def objective_model(cfg, mlm: MaskedLM, unigram: np.ndarray) -> torch.nn.Module:
    """The objective around the model being pretrained. A fresh output layer
    (a new MLM head, every RTD generator) starts at the corpus unigram
    distribution; a resumed run then loads its own state over it."""
    if cfg["objective"] == "rtd":
        rtd = cfg["rtd"]
        generator = build_generator(mlm.model, rtd["generator_size"], cfg["seed"])
        set_output_bias(generator, unigram)
        logger.info("Replaced-token detection: generator %d x %d (discriminator %d x %d), embeddings %s",
                    generator.config.num_hidden_layers, generator.config.hidden_size,
                    mlm.model.config.num_hidden_layers, mlm.model.config.hidden_size, rtd["embedding_sharing"])
        return ReplacedTokenDetection(mlm.model, generator, rtd["discriminator_weight"], rtd["embedding_sharing"])
    if mlm.head_initialised:
        set_output_bias(mlm.model, unigram)
        logger.info("MLM output bias initialised to the corpus log unigram frequencies")
    return PretrainingModel(mlm.model, next_sentence=cfg["next_sentence"])


class PretrainingObjective(Objective):
    """Pretraining as the engine's objective: a step's global batch (the
    stream's examples at that step, masks and sampling noise seeded by (seed,
    step)), this process's micro-batches of it, and the loss of the model of
    the objective on one, over the whole step's counts."""

    def __init__(self, model: torch.nn.Module, stream, masking: MaskingSettings, tokenizer, cfg, dist: ProcessGroup,
                 device: torch.device, micro: int):
        self.model, self.stream, self.masking, self.tokenizer = model, stream, masking, tokenizer
        self.cfg, self.dist, self.device, self.micro = cfg, dist, device, micro
        self.counts = (0, 0, 0)  # the step's predictions, pairs and scored positions, over every process

    def batches(self, step: int) -> Iterator[Tuple[Batch, MaskedBatch, Optional[np.ndarray]]]:
        cfg, micro, accum = self.cfg, self.micro, self.cfg["grad_accumulation_steps"]
        global_batch = collate(self.stream.global_batch(step, cfg["batch_size"]), self.tokenizer)
        masked = self.masking.apply(global_batch, np.random.default_rng([cfg["seed"], step]))
        noise = self.model.sampling_noise(masked.input_ids.shape, np.random.default_rng([cfg["seed"], step, 1]))
        self.counts = (int(masked.chosen.sum()), cfg["batch_size"], n_positions(global_batch))
        for k in range(accum):
            lo = (self.dist.rank * accum + k) * micro
            part = MaskedBatch(masked.input_ids[lo : lo + micro], masked.labels[lo : lo + micro], None)
            yield global_batch.rows(lo, lo + micro), part, None if noise is None else noise[lo : lo + micro]

    def loss(self, batch) -> Tuple[torch.Tensor, ObjectiveSums]:
        n_pred, n_pairs, n_scored = self.counts
        rows, masked, noise = batch
        with forward_precision(self.device, self.cfg["precision"]):  # the forward only; backward follows its dtypes
            sums = self.model(**to_inputs(rows, masked, self.device, noise))
        loss = sums.mlm_loss / n_pred
        if sums.nsp_loss is not None:
            loss = loss + sums.nsp_loss / n_pairs
        if sums.rtd_loss is not None:
            loss = loss + self.model.discriminator_weight * sums.rtd_loss / n_scored
        return loss, sums

    def state(self) -> Dict[str, object]:
        return self.model.objective_state()

    def load_state(self, state: Dict[str, object]) -> None:
        self.model.load_objective_state(state)


def pretrain(config: Config, output_dir, resume: bool = False, quiet: bool = False, force: bool = False) -> Path:
    """Train; return the directory of the final HF model (`output_dir/model`).
    Progress (a bar on a terminal, with log records above it; periodic lines
    elsewhere) unless `quiet`. `resume` continues from the newest checkpoint
    that loads, refusing settings or data that change the run unless `force`."""
    output_dir = Path(output_dir)
    cfg, device, dist, model, mlm, stream, dev_examples, masking, resumed, run, changes = prepare(
        config, output_dir, resume, force
    )
    batch_size, accum = cfg["batch_size"], cfg["grad_accumulation_steps"]
    if batch_size % (dist.world * accum):
        raise SpacyMlmError(f"batch_size {batch_size} is not divisible by processes x accumulation ({dist.world} x {accum})")
    micro = batch_size // (dist.world * accum)
    # built before the encoder is frozen for head_only_steps: the reducer sums, and the optimizer
    # holds, what trains later too
    trainer = Trainer(model, cfg["optimizer"], cfg["max_steps"], cfg["optimizer"]["max_grad_norm"], dist)
    objective = PretrainingObjective(model, stream, masking, mlm.tokenizer, cfg, dist, device, micro)
    eval_batches = evaluation_batches(dev_examples, mlm.tokenizer, masking, micro, cfg["eval_sequences"], model)
    step, history = 0, []
    torch.manual_seed(cfg["seed"] + dist.rank)
    if resumed is not None:
        state = resumed.state
        trainer.load_state(state)
        objective.load_state(state)
        if len(state["rng"]) == dist.world:  # else dropout noise simply starts afresh
            restore_rng_state(state["rng"][dist.rank], device)
        step, history = state["step"], state["history"]
        logger.info("Resumed from %s at step %d", resumed.path, step)
    if dist.main:
        previous = output_dir / "config.cfg"
        if changes and previous.exists():  # --force: the run's own settings stay on record
            atomic_write_text(output_dir / f"config.before-step-{step:08d}.cfg", previous.read_text(encoding="utf8"))
        atomic_write_text(previous, config.to_str())
    heads_first = step < cfg["head_only_steps"]  # False once a resumed run is past them
    if heads_first:
        logger.info("Steps %d-%d train the output heads only", step + 1, cfg["head_only_steps"])
        freeze_encoder(mlm.model, True)

    def checkpoint(step: int) -> None:
        rng = dist.gather(rng_state(device))
        trained = trainer.state()  # a collective where the processes share the weights
        if dist.main:
            state = {**trained, "rng": rng, **objective.state(), "step": step,
                     "examples_seen": step * batch_size, "history": history}
            save_checkpoint(output_dir / "checkpoints", step, partial(save_mlm_model, mlm), state,
                            cfg["keep_checkpoints"], run)
            write_history(output_dir, history)
        dist.barrier()

    if step == 0 and cfg["eval_every"] and dist.main:
        history.append({"step": 0, **evaluate(model, eval_batches, device, cfg["precision"])})  # the starting point of the curves
    model.train()
    started, pending = time.time(), PendingSteps()
    bar = Progress(cfg["max_steps"], "pretrain", "steps", initial=step, quiet=quiet or not dist.main, logs_above=True)

    def after_step(step: int, reports: List[ObjectiveSums]) -> bool:
        """Log, evaluate and checkpoint when due; True to stop (out of time)."""
        bar.update(1)
        pending.add(step, sum_reports(reports), reports[-1], *objective.counts, trainer.rate)
        if heads_first and step == cfg["head_only_steps"]:
            freeze_encoder(mlm.model, False)
        out_of_time = bool(cfg["max_time"]) and time.time() - started > cfg["max_time"]
        evaluating = cfg["eval_every"] and (step % cfg["eval_every"] == 0 or step == cfg["max_steps"])
        saving = (cfg["checkpoint_every"] and step % cfg["checkpoint_every"] == 0) or step == cfg["max_steps"]
        # one process stops on its own clock at once; under torchrun the processes agree at the next read
        if not (step % cfg["log_every"] == 0 or evaluating or saving or (out_of_time and dist.world == 1)):
            return False
        rows, stop = pending.read(dist, out_of_time)
        row = rows[-1]
        if cfg["eval_every"] and (evaluating or stop) and dist.main:
            row.update(evaluate(model, eval_batches, device, cfg["precision"]))
        history.extend(rows)
        bar.set_postfix(f"loss {row['loss']:.3f}, accuracy {row['accuracy']:.3f}")
        if dist.main and (step % cfg["log_every"] == 0 or "eval_loss" in row):
            logger.info("step %d %s", step, " ".join(f"{k}={v:.4g}" for k, v in row.items() if k != "step"))
        if saving or stop:
            checkpoint(step)
        return stop

    train(trainer, objective, step, cfg["max_steps"], after_step)
    bar.close()
    final = output_dir / "model"
    if dist.main:
        model.prepare_output()
        save_mlm_model(mlm, final, model.output_files())
        write_history(output_dir, history)
        logger.info("Saved the model to %s", final)
    dist.barrier()
    return final


def sum_reports(reports: List[ObjectiveSums]) -> torch.Tensor:
    """A step's sums over its micro-batches, added in order where the model runs."""
    total = 0.0
    for sums in reports:
        total = total + sums.stacked()
    return total
