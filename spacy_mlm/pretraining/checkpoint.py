"""What makes a pretraining run the run, for its checkpoints (the engine's
format, `engine/checkpoint.py`: the HF model, the training state, `run.json`):
its settings and digests of its data, which a resumed run must match, and its
history beside them (metrics.jsonl, curves.png).
"""
import hashlib
import io
import json
from pathlib import Path
from typing import Any, Dict, Iterable, List

from ..engine.checkpoint import flat_settings
from ..util.io import atomic_write_bytes, atomic_write_text

# Settings a resumed run may change: how long it runs, how often it reports and
# saves, where it runs, how a batch is split (the gradient is the same). Every
# other one (data, batch size, seed, masking, sequence length, model, optimizer,
# the held-out set) changes what the run learns or measures.
FREE_ON_RESUME = frozenset(
    f"pretraining.{name}" for name in
    ("max_steps", "max_time", "eval_every", "checkpoint_every", "keep_checkpoints", "log_every", "device",
     "grad_accumulation_steps")
)


def corpus_digest(documents: Dict[str, Iterable[Iterable[str]]]) -> str:
    """sha256 of the documents (language, then each document's segments), so a
    corpus edited in place is told from the one the run started on."""
    digest = hashlib.sha256()
    for lang in sorted(documents):
        digest.update(f"\x00lang {lang}\x00".encode("utf8"))
        for document in documents[lang]:
            digest.update(("\n".join(document) + "\x00").encode("utf8"))
    return digest.hexdigest()


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
