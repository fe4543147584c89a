"""Self-supervised sense tuning of an encoder from raw text (MirrorWiC-style,
Liu et al. 2021): no labels, only sentences.

For each sentence one word is picked at random as its target. The sentence
is read twice by the encoder in training mode: once as it is, once with a
random span of its pieces (never the target's) replaced by the mask token;
dropout differs between the two passes. The target's vector (the mean of its
pieces at the chosen hidden state) in one view should be nearest to the same
target's vector in the other view among all targets of the batch: InfoNCE
with in-batch negatives, symmetric, at a temperature

    loss = (CE(cos(A, B) / t, diag) + CE(cos(B, A) / t, diag)) / 2

It teaches the encoder that a word's vector should survive changes to its
context that do not change what it means (a few masked words, dropout) while
staying apart from other words in other contexts: the property that the
target-word cosine of WiC relies on.

With random sentences in a batch the targets are almost always different
words, which a pretrained encoder tells apart at once (MiniLM starts near a
loss of 0.01). `same_word = k` builds each batch from batch_size / k words
with k sentences each, so the negatives include the same word in other
contexts: the vector must then carry its context, not only the word.

`sense_tune` trains and writes a plain Hugging Face encoder directory (config,
safetensors, tokenizer: what `AutoModel` / `mlm_encoder` / spacy-transformers
load) atomically, like `pretrain`'s output. `python -m spacy_mlm sense-tune`
is the command.
"""
import json
import logging
import math
import random
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Sequence, Tuple

import torch

from ..engine.trainer import Objective, Trainer, train
from ..errors import SpacyMlmError
from ..models.hf import load_backbone
from ..util.io import atomic_directory

logger = logging.getLogger(__name__)

WORD = re.compile(r"[A-Za-z][A-Za-z'-]*[A-Za-z]")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")


@dataclass
class SenseTuneSettings:
    steps: int = 150
    batch_size: int = 64
    learn_rate: float = 2e-5
    warmup_steps: int = 10
    weight_decay: float = 0.01
    temperature: float = 0.04
    # the masked view: one span of 1..max_span pieces (never the target's) becomes the mask token
    max_span: int = 5
    # the hidden state whose target vector the loss reads (-1: the top layer)
    layer: int = -1
    # pieces per sentence (longer ones are skipped), words per sentence at least
    max_pieces: int = 64
    min_words: int = 6
    # targets: words of at least this many letters
    min_target_chars: int = 3
    max_sentences: int = 0
    # 1: each batch is random sentences (MirrorWiC). k > 1: batch_size / k words, each with
    # k sentences that hold it, so the same word in other contexts is among the negatives
    same_word: int = 1
    seed: int = 0


# -- data --------------------------------------------------------------------------------------------------------

def raw_sentences(paths: Sequence[Path], min_words: int = 6, max_words: int = 60, limit: int = 0) -> List[str]:
    """Sentences of plain text files (one paragraph a line) and .jsonl files
    (each line an object with a "text"), split at sentence ends; headings and
    short lines (under min_words words) are skipped."""
    out: List[str] = []
    for path in paths:
        path = Path(path)
        if not path.exists():
            raise SpacyMlmError(f"raw text {path} does not exist")
        with path.open(encoding="utf8") as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                if path.suffix == ".jsonl":
                    try:
                        line = json.loads(line).get("text", "")
                    except (ValueError, AttributeError):
                        raise SpacyMlmError(f"{path}: a line that is not a JSON object with a text: {line[:60]!r}") from None
                for paragraph in line.split("\n"):
                    for sentence in SENTENCE_END.split(paragraph.strip()):
                        n = len(sentence.split())
                        if min_words <= n <= max_words and " = " not in sentence:
                            out.append(sentence)
                            if limit and len(out) >= limit:
                                return out
    return out


def pick_targets(sentences: Iterable[str], rng: random.Random, min_chars: int = 3) -> List[Tuple[str, int, int]]:
    """(sentence, start, end) with the character span of one word of the
    sentence chosen at random (letters, at least min_chars); sentences
    without such a word are dropped."""
    out = []
    for sentence in sentences:
        words = [m for m in WORD.finditer(sentence) if m.end() - m.start() >= min_chars]
        if words:
            m = rng.choice(words)
            out.append((sentence, m.start(), m.end()))
    return out


@dataclass
class TargetBatch:
    input_ids: torch.Tensor       # (n, length)
    attention_mask: torch.Tensor  # (n, length)
    target_mask: torch.Tensor     # (n, length) 1.0 on the target's pieces


def encode_targets(tokenizer, items: Sequence[Tuple[str, int, int]], max_pieces: int) -> List[Tuple[List[int], List[int]]]:
    """(piece ids, positions of the target's pieces) per item; items whose
    target has no piece or that are longer than max_pieces are dropped."""
    if not getattr(tokenizer, "is_fast", False):
        raise SpacyMlmError("sense tuning needs a fast tokenizer (character offsets of the pieces)")
    out = []
    for text, start, end in items:
        enc = tokenizer(text, return_offsets_mapping=True, add_special_tokens=True, truncation=False)
        ids, offsets = enc["input_ids"], enc["offset_mapping"]
        if len(ids) > max_pieces:
            continue
        special = set(tokenizer.all_special_ids)
        positions = [i for i, (a, b) in enumerate(offsets)
                     if ids[i] not in special and b > a and a < end and b > start]
        if positions:
            out.append((ids, positions))
    return out


def make_views(encoded: Sequence[Tuple[List[int], List[int]]], tokenizer, max_span: int,
               rng: random.Random) -> Tuple[TargetBatch, TargetBatch]:
    """The plain view and the span-masked view of a batch (padded alike)."""
    special = set(tokenizer.all_special_ids)
    plain, masked = [], []
    for ids, positions in encoded:
        plain.append(list(ids))
        candidates = [i for i in range(len(ids)) if ids[i] not in special and i not in positions]
        view = list(ids)
        if candidates and max_span > 0:
            length = rng.randint(1, max_span)
            start = rng.choice(candidates)
            for i in range(start, min(start + length, len(ids))):
                if ids[i] in special or i in positions:
                    break
                view[i] = tokenizer.mask_token_id
        masked.append(view)
    targets = [positions for _, positions in encoded]
    return _pad(plain, targets, tokenizer.pad_token_id), _pad(masked, targets, tokenizer.pad_token_id)


def _pad(rows: List[List[int]], targets: List[List[int]], pad_id: int) -> TargetBatch:
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    target = torch.zeros((len(rows), width))
    for k, (row, positions) in enumerate(zip(rows, targets)):
        ids[k, : len(row)] = torch.tensor(row)
        attention[k, : len(row)] = 1
        target[k, positions] = 1.0
    return TargetBatch(ids, attention, target)


# -- model and loss -----------------------------------------------------------------------------------------------

def target_vectors(model, batch: TargetBatch, layer: int = -1) -> torch.Tensor:
    """(n, width): the mean of each row's target pieces at hidden state `layer`."""
    device = next(model.parameters()).device
    out = model(input_ids=batch.input_ids.to(device), attention_mask=batch.attention_mask.to(device),
                output_hidden_states=True)
    states = out.hidden_states[layer]
    weights = batch.target_mask.to(states.device, states.dtype)
    return (weights.unsqueeze(-1) * states).sum(1) / weights.sum(1, keepdim=True).clamp(min=1.0)


def info_nce(first: torch.Tensor, second: torch.Tensor, temperature: float) -> torch.Tensor:
    """Symmetric InfoNCE with in-batch negatives: row i of `first` should be
    nearest (cosine) to row i of `second` among all rows, and back."""
    if first.shape != second.shape or first.dim() != 2:
        raise SpacyMlmError(f"info_nce needs two (n, width) tensors of one shape, got {tuple(first.shape)} and {tuple(second.shape)}")
    if not temperature > 0:
        raise SpacyMlmError(f"temperature must be > 0, got {temperature}")
    a = torch.nn.functional.normalize(first, dim=-1)
    b = torch.nn.functional.normalize(second, dim=-1)
    logits = a @ b.T / temperature
    labels = torch.arange(len(a), device=a.device)
    return (torch.nn.functional.cross_entropy(logits, labels) + torch.nn.functional.cross_entropy(logits.T, labels)) / 2


def sense_tuning_loss(model, tokenizer, encoded, settings: SenseTuneSettings, rng: random.Random) -> torch.Tensor:
    plain, masked = make_views(encoded, tokenizer, settings.max_span, rng)
    return info_nce(target_vectors(model, plain, settings.layer), target_vectors(model, masked, settings.layer),
                    settings.temperature)


class SenseTuningObjective(Objective):
    """Sense tuning as the engine's objective: one batch of targets a step
    (drawn from `batches`), its InfoNCE loss over the two views."""

    def __init__(self, model, tokenizer, batches: Iterator[List], settings: SenseTuneSettings, rng: random.Random):
        self.model, self.tokenizer, self.stream, self.settings, self.rng = model, tokenizer, batches, settings, rng

    def batches(self, step: int) -> List[List]:
        return [next(self.stream)]

    def loss(self, encoded: List) -> Tuple[torch.Tensor, float]:
        loss = sense_tuning_loss(self.model, self.tokenizer, encoded, self.settings, self.rng)
        return loss, float(loss.detach())


# -- the run ------------------------------------------------------------------------------------------------------

def word_occurrences(sentences: Iterable[str], min_chars: int = 3) -> Dict[str, List[Tuple[str, int, int]]]:
    """{lowercased word: [(sentence, start, end), ...]}: every occurrence of every word
    (letters, at least min_chars) of the sentences, at most once per sentence."""
    index: Dict[str, List[Tuple[str, int, int]]] = {}
    for sentence in sentences:
        seen = set()
        for m in WORD.finditer(sentence):
            word = m.group().lower()
            if m.end() - m.start() >= min_chars and word not in seen:
                seen.add(word)
                index.setdefault(word, []).append((sentence, m.start(), m.end()))
    return index


def same_word_batches(index: Dict[str, List[Tuple[str, int, int]]], tokenizer, settings: "SenseTuneSettings",
                      rng: random.Random) -> Iterator[List]:
    """Batches of batch_size / same_word word types (drawn uniformly among the
    words with at least same_word occurrences, so that content words dominate),
    each with same_word of its sentences; encoded as `encode_targets` does."""
    k = settings.same_word
    words = sorted(w for w, items in index.items() if len(items) >= k)
    per_batch = settings.batch_size // k
    if len(words) < per_batch:
        raise SpacyMlmError(f"{len(words)} words occur in at least {k} sentences: fewer than the {per_batch} a batch needs")
    while True:
        items = [item for word in rng.sample(words, per_batch) for item in rng.sample(index[word], k)]
        encoded = encode_targets(tokenizer, items, settings.max_pieces)
        if len(encoded) >= 2:
            yield encoded


def _batches(encoded: List, batch_size: int, rng: random.Random) -> Iterator[List]:
    while True:
        order = list(range(len(encoded)))
        rng.shuffle(order)
        for i in range(0, len(order) - batch_size + 1, batch_size):
            yield [encoded[k] for k in order[i: i + batch_size]]


def sense_tune(model_dir: Path, raw_text: Sequence[Path], output_dir: Path,
               settings: SenseTuneSettings = SenseTuneSettings(), quiet: bool = False) -> Dict[str, float]:
    """Tune the encoder of `model_dir` on the sentences of `raw_text` and write
    it to `output_dir` (a plain HF encoder directory, replaced atomically) with
    `sense_tuning.json` (the settings and the loss curve). Returns the first
    and last losses (means over the first and last tenth of the steps)."""
    if settings.steps < 1 or settings.batch_size < 2:
        raise SpacyMlmError("sense tuning needs steps >= 1 and batch_size >= 2 (the batch's other targets are the negatives)")
    if settings.same_word < 1 or settings.same_word > settings.batch_size // 2:
        raise SpacyMlmError(f"same_word must be in 1..batch_size / 2, got {settings.same_word}")
    sentences = raw_sentences(raw_text, settings.min_words, limit=settings.max_sentences)  # bad paths fail first
    rng = random.Random(settings.seed)
    torch.manual_seed(settings.seed)
    model, tokenizer = load_backbone(model_dir)  # checked directory, no remote code, weights that fit
    if tokenizer.mask_token_id is None:
        raise SpacyMlmError(f"{model_dir}: the tokenizer has no mask token, which the masked view needs")
    if settings.same_word > 1:
        index = word_occurrences(sentences, settings.min_target_chars)
        batches = same_word_batches(index, tokenizer, settings, rng)
        n_sentences = len(sentences)
    else:
        encoded = encode_targets(tokenizer, pick_targets(sentences, rng, settings.min_target_chars), settings.max_pieces)
        if len(encoded) < settings.batch_size:
            raise SpacyMlmError(f"{len(encoded)} usable sentences in {', '.join(map(str, raw_text))}: fewer than one batch of {settings.batch_size}")
        batches = _batches(encoded, settings.batch_size, rng)
        n_sentences = len(encoded)
    logger.info("sense tuning on %d sentences, %d steps of %d", n_sentences, settings.steps, settings.batch_size)
    model.train()
    optimizer = {"learning_rate": settings.learn_rate, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
                 "weight_decay": settings.weight_decay, "warmup_steps": settings.warmup_steps}
    trainer = Trainer(model, optimizer, settings.steps, 1.0)
    losses: List[float] = []
    start = time.time()

    def after_step(step: int, reports: List[float]) -> bool:
        losses.extend(reports)
        if not quiet and step % max(1, settings.steps // 20) == 0:
            logger.info("step %d/%d loss %.4f (%.0f s)", step, settings.steps, losses[-1], time.time() - start)
        return False

    train(trainer, SenseTuningObjective(model, tokenizer, batches, settings, rng), 0, settings.steps, after_step)
    model.eval()
    tenth = max(1, len(losses) // 10)
    summary = {"first_loss": sum(losses[:tenth]) / tenth, "last_loss": sum(losses[-tenth:]) / tenth,
               "sentences": n_sentences, "seconds": round(time.time() - start, 1)}
    record = {"settings": asdict(settings), "model": str(model_dir), "raw_text": [str(p) for p in raw_text],
              **summary, "losses": [round(x, 5) for x in losses]}
    if not all(math.isfinite(x) for x in losses):
        raise SpacyMlmError("the sense-tuning loss became NaN or infinite: try a lower learn rate; nothing was written")
    with atomic_directory(output_dir) as tmp:
        model.save_pretrained(str(tmp), safe_serialization=True)
        tokenizer.save_pretrained(str(tmp))
        (tmp / "sense_tuning.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf8")
    return summary
