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

Self-supervised (`--tuned DIR`, the output of
`python -m spacy_mlm sense-tune MODEL RAW_TEXT DIR`, no labels): the tuned
encoder read without any fitted transform, over bench/wic.py's grid of layer
settings (the mean of hidden states lo..hi, and the top layer) x context
weights w in {0, 0.25, 0.5, 0.75, 0.9} x {one threshold, one per PoS}; the
setting with the highest WiC **train** accuracy is scored on dev
(`self_supervised`), and likewise among target-only settings (w = 0). The
same grid and rule on the base encoder give `base_same_grid` /
`base_same_grid_target_only`: the tuning's own gain is the difference. The
tuned encoder's top layer, target only, one threshold (as `raw`) is
`self_supervised_top`. With several tuned encoders (`--tuned A B`), the
encoder whose picked setting has the highest train accuracy is the one
reported; every candidate's train and dev figures are listed too
(`tuned_candidates`). Since the tuning acts on the target word's vector, the
target-only figures are also given for the encoder whose target-only pick has
the highest train accuracy (`tuned_target_only`, its `_train` and `_encoder`),
beside `base_same_grid_target_only` (and its `_train`).

The tuned encoders of docs/similarity.md:

    python -m spacy_mlm sense-tune MINILM ../shared/data/raw_text/wikipedia/en_wiki_sample.jsonl \
        OUT/minilm_sense_tuned --steps 150 --batch-size 64                 # random batches
    python -m spacy_mlm sense-tune MINILM ../shared/data/raw_text/wikipedia/en_wiki_sample.jsonl \
        OUT/minilm_sense_tuned_sw4 --steps 150 --batch-size 64 --same-word 4

    python bench/wic_trained.py [--model DIR] [--data ../shared/data/wic] [--output DIR]
        [--trained PIPELINE] [--tuned SENSE_TUNED_DIR...] [--wic-results LAST_LINE.json]
        [--cache-dir DIR] [--train-limit N] [--max-steps N] [--quick]

Last line: one JSON object: raw, best, best_transform, trained_head,
self_supervised (null without --tuned), spacy_trf (from --wic-results), and
the details.
"""
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy
import spacy

from harness.common import REPO, BenchParser, print_result
from harness.wic_vectors import CONTEXT_WEIGHTS, evaluate, layer_choices, our_vectors, pool_layers
from spacy_mlm import (
    labels_of, make_vectors_pipeline, pos_of, read_wic_split, select, threshold_evaluation, wic_scores,
    wic_training_example,
)

MERGED = ("best", "best_transform", "spacy_trf")


def encoder_identity(model: str) -> str:
    """What a cache of `model`'s vectors must match: the directory and its
    weights' size and modification time, so that a re-tuned encoder written
    to the same directory is encoded again."""
    root = Path(model).resolve()
    weights = sorted(f for f in root.iterdir() if f.suffix in (".safetensors", ".bin")) if root.is_dir() else []
    stamps = [f"{f.name}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in weights]
    return "|".join([str(root), *stamps])


def encoder_vectors(model: str, train, dev, cache_dir: Path = None):
    """bench/wic.py's per-hidden-state target and sentence vectors of train
    and dev, (t1, t2, s1, s2) each, cached in `cache_dir` (one .npz per
    encoder, named by a hash of `encoder_identity`, which it also stores and
    checks) when given."""
    keys = ("t1", "t2", "s1", "s2")
    identity = encoder_identity(model)
    cache = None
    if cache_dir is not None:
        cache = cache_dir / f"vectors_{hashlib.sha1(identity.encode()).hexdigest()[:16]}.npz"
        if cache.is_file():
            data = numpy.load(cache)
            if str(data["encoder"]) == identity:
                return [data[f"train_{k}"] for k in keys], [data[f"dev_{k}"] for k in keys]
    nlp = make_vectors_pipeline(model, all_layers=True)
    tr, dv = our_vectors(nlp, train, 64), our_vectors(nlp, dev, 64)
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        numpy.savez(cache, encoder=numpy.array(identity),
                    **{f"train_{k}": v for k, v in zip(keys, tr)}, **{f"dev_{k}": v for k, v in zip(keys, dv)})
    return list(tr), list(dv)


def raw_grid(train_vecs, dev_vecs, train, dev):
    """Every (layer setting, w, threshold mode) of raw cosine: train and dev
    accuracy; the picks by train accuracy (all, and w = 0) and the top-layer
    target-only default."""
    y_train, y_dev, pos_train, pos_dev = labels_of(train), labels_of(dev), pos_of(train), pos_of(dev)
    rows = []
    for name, layer, n_layers in layer_choices(train_vecs[0].shape[1]):
        tr = [pool_layers(v, layer, n_layers, axis=1) for v in train_vecs]
        dv = [pool_layers(v, layer, n_layers, axis=1) for v in dev_vecs]
        for weight in CONTEXT_WEIGHTS:
            for per_pos in (False, True):
                res = evaluate(tr, dv, weight, per_pos, y_train, y_dev, pos_train, pos_dev)
                rows.append({"layers": name, "context_weight": weight, "per_pos": per_pos,
                             "train_acc": res["train_acc"], "dev_acc": res["dev_acc"]})

    def pick(candidates):
        return max(candidates, key=lambda r: r["train_acc"])  # the first in grid order on ties

    default = next(r for r in rows if r["layers"] == "top" and r["context_weight"] == 0.0 and not r["per_pos"])
    return {"best": pick(rows), "target_only": pick([r for r in rows if r["context_weight"] == 0.0]),
            "top": default, "n_settings": len(rows)}


def describe(row) -> str:
    return f"{row['layers']}, w = {row['context_weight']}, {'per-PoS thresholds' if row['per_pos'] else 'one threshold'}"


def train_head(model: str, data: Path, output: Path, train_limit: int, max_steps: int) -> Path:
    """spacy train configs/senses.cfg on WiC train (dev only for spaCy's own evaluations); model-last."""
    command = [
        sys.executable, "-m", "spacy", "train", str(REPO / "configs" / "senses.cfg"), "--output", str(output),
        "--paths.encoder", model, "--paths.train", str(data / "train" / "train.data.txt"),
        "--paths.dev", str(data / "dev" / "dev.data.txt"), "--corpora.train.limit", str(train_limit),
    ]
    if max_steps:
        command += ["--training.max_steps", str(max_steps)]
    print(" ".join(command), file=sys.stderr, flush=True)
    subprocess.run(command, check=True)
    return output / "model-last"


def main(argv=None) -> None:
    parser = BenchParser(__doc__.split("\n\n")[0])
    parser.model()
    parser.data_file("--data", "wic")
    parser.add_argument("--output", default="training/senses", help="where spacy train writes (without --trained)")
    parser.add_argument("--trained", default=None, help="a pipeline configs/senses.cfg already trained on WiC train")
    parser.add_argument("--tuned", nargs="+", default=None,
                        help="encoder directories written by python -m spacy_mlm sense-tune; with several, the one "
                             "whose best setting has the highest WiC train accuracy is self_supervised")
    parser.add_argument("--cache-dir", default=None, help="keep the base and tuned encoders' WiC vectors here (.npz)")
    parser.add_argument("--skip-head", action="store_true", help="only the self-supervised figures (no trained head)")
    parser.add_argument("--wic-results", default=None, help="a file whose last line is bench/wic.py's JSON")
    parser.add_argument("--train-limit", type=int, default=0, help="train on the first N train pairs (0 = all)")
    parser.add_argument("--max-steps", type=int, default=0, help="override the config's max_steps (0 = keep)")
    parser.threads()
    parser.quick("the head trained for 20 steps on the first 300 train pairs (unless given)")
    args = parser.parse_args(argv)
    if args.quick:
        args.train_limit, args.max_steps = args.train_limit or 300, args.max_steps or 20
    data = Path(args.data)
    start = time.time()
    train, dev = select(read_wic_split(data, "train"), args.train_limit), read_wic_split(data, "dev")
    cache = Path(args.cache_dir) if args.cache_dir else None
    figures = {}
    if args.tuned:
        base_grid = raw_grid(*encoder_vectors(args.model, train, dev, cache), train, dev)
        candidates = []
        for tuned in args.tuned:
            candidates.append((tuned, raw_grid(*encoder_vectors(tuned, train, dev, cache), train, dev)))
        # the encoder (and its setting) with the highest train accuracy; the first on ties
        chosen, tuned_grid = max(candidates, key=lambda c: c[1]["best"]["train_acc"])
        figures.update({
            "self_supervised": round(tuned_grid["best"]["dev_acc"], 4),
            "self_supervised_train": round(tuned_grid["best"]["train_acc"], 4),
            "self_supervised_setting": describe(tuned_grid["best"]),
            "self_supervised_target_only": round(tuned_grid["target_only"]["dev_acc"], 4),
            "self_supervised_target_only_setting": describe(tuned_grid["target_only"]),
            "self_supervised_top": round(tuned_grid["top"]["dev_acc"], 4),
            "base_same_grid": round(base_grid["best"]["dev_acc"], 4),
            "base_same_grid_train": round(base_grid["best"]["train_acc"], 4),
            "base_same_grid_setting": describe(base_grid["best"]),
            "base_same_grid_target_only": round(base_grid["target_only"]["dev_acc"], 4),
            "base_same_grid_target_only_setting": describe(base_grid["target_only"]),
            "base_same_grid_target_only_train": round(base_grid["target_only"]["train_acc"], 4),
            "base_top": round(base_grid["top"]["dev_acc"], 4),
            "grid_settings": tuned_grid["n_settings"], "tuned_encoder": chosen,
        })
        # the same rule restricted to the target word alone (w = 0), where the tuning acts
        word_chosen, word_grid = max(candidates, key=lambda c: c[1]["target_only"]["train_acc"])
        figures.update({
            "tuned_target_only": round(word_grid["target_only"]["dev_acc"], 4),
            "tuned_target_only_train": round(word_grid["target_only"]["train_acc"], 4),
            "tuned_target_only_setting": describe(word_grid["target_only"]),
            "tuned_target_only_encoder": word_chosen,
        })
        if len(candidates) > 1:
            figures["tuned_candidates"] = [
                {"encoder": tuned, "train": round(g["best"]["train_acc"], 4), "dev": round(g["best"]["dev_acc"], 4),
                 "setting": describe(g["best"]), "target_only_train": round(g["target_only"]["train_acc"], 4),
                 "target_only_dev": round(g["target_only"]["dev_acc"], 4),
                 "target_only_setting": describe(g["target_only"]), "top_dev": round(g["top"]["dev_acc"], 4)}
                for tuned, g in candidates]
        tuning_record = Path(chosen) / "sense_tuning.json"
        if tuning_record.is_file():
            record = json.loads(tuning_record.read_text(encoding="utf8"))
            figures["tuning"] = {k: record.get(k) for k in ("settings", "first_loss", "last_loss", "sentences", "seconds")}
        print(json.dumps({k: v for k, v in figures.items() if k != "tuning"}), file=sys.stderr, flush=True)

    raw_nlp = make_vectors_pipeline(args.model)
    raw = threshold_evaluation(wic_scores(raw_nlp, train), labels_of(train), wic_scores(raw_nlp, dev), labels_of(dev))
    figures.update({"raw": round(raw["dev_acc"], 4), "raw_train": round(raw["train_acc"], 4)})
    merged = {}
    if args.wic_results:
        merged = json.loads(Path(args.wic_results).read_text(encoding="utf8").strip().splitlines()[-1])
    figures.update({key: merged.get(key) for key in MERGED})
    figures.setdefault("self_supervised", None)
    if args.skip_head:
        figures.update({"trained_head": None, "seconds": round(time.time() - start, 1)})
        print_result(figures)
        return

    head_start = time.time()
    trained = Path(args.trained) if args.trained else train_head(
        args.model, data, Path(args.output), args.train_limit, args.max_steps)
    train_time = time.time() - head_start

    nlp = spacy.load(trained)
    senses = nlp.get_pipe("senses")
    train_examples = [wic_training_example(nlp, e) for e in train]
    dev_examples = [wic_training_example(nlp, e) for e in dev]
    running_threshold = senses.threshold
    running = nlp.evaluate(dev_examples)["wic_acc"]
    threshold, train_acc = senses.fit_threshold(train_examples)
    dev_acc = nlp.evaluate(dev_examples)["wic_acc"]

    figures.update({
        "trained_head": round(dev_acc, 4), "trained_head_train": round(train_acc, 4),
        "trained_head_threshold": round(threshold, 4),
        "trained_head_running_threshold": round(running, 4), "running_threshold": round(running_threshold, 4),
        "train_pairs": len(train), "dev_pairs": len(dev),
        "trained_pipeline": str(trained), "seconds": round(time.time() - start, 1),
        "train_seconds": round(train_time, 1) if not args.trained else None,
    })
    print_result(figures)


if __name__ == "__main__":
    main()
