"""Text classification (SST-2) and NLI (train: SNLI dev sample; test: MultiNLI
dev-matched sample) with one encoder and one budget for three systems:

  ours       mlm_encoder + mlm_textcat with the component's own defaults; pairs as
             pair Docs ([CLS] A [SEP] B [SEP], segment ids)
  hf         AutoModelForSequenceClassification, torch AdamW + linear warmup/decay, pair encoding
  spacy_trf  spacy-transformers `transformer` + spaCy `textcat` (TextCatReduce, mean);
             pairs joined into one text, since it has no segment ids

Each system that has bf16 also trains (and predicts) in it with --precision
fp32,bf16 (bench/harness/precisions.py): ours as the encoder's precision = "bf16", Hugging
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
import json
import sys
from pathlib import Path

import numpy
import torch

from harness import peers, textcat
from harness.common import BenchParser, Stopwatch, mean_and_sd, print_result, seed_everything, write_json
from harness.precisions import add_precision_option, precision_runs, split_run, train_speedups
from harness.textcat import accuracy, label_example, top_labels
from spacy_mlm import correctness_counts, paired_bootstrap

OURS = ("ours",)


# -- (b) Hugging Face ---------------------------------------------------------------
def run_hf(train_rows, labels, args, seed, precision="fp32"):
    """AutoModelForSequenceClassification, harness.peers.hf_finetune on the shared budget."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForSequenceClassification.from_pretrained(args.model, num_labels=len(labels))
    index = {label: i for i, label in enumerate(labels)}

    def encode(rows):
        a = [r[0] for r in rows]
        b = None if rows[0][1] is None else [r[1] for r in rows]
        return tokenizer(a, b, truncation=True, max_length=args.max_length, padding=True, return_tensors="pt")

    total = textcat.n_steps(train_rows, args)
    train_batches = ((encode(batch), torch.tensor([index[r[2]] for r in batch]))
                     for batch in textcat.batches(train_rows, args.batch_size, args.epochs, seed))
    train_time = peers.hf_finetune(model, train_batches, total, args.lr, textcat.warmup_steps(total, args), precision)

    def predict(rows):
        logits = peers.hf_logits(model, (encode(chunk) for chunk in peers.chunks(rows)), precision)
        return [labels[j] for batch in logits for j in batch.argmax(-1).tolist()]

    return predict, train_time


# -- (c) spacy-transformers + textcat -------------------------------------------------
def run_spacy_trf(train_rows, labels, args, seed, precision="fp32"):
    """fp32 only (harness/precisions.py: FP32_ONLY)."""
    if precision != "fp32":
        raise ValueError(f"spacy_trf trains in fp32 only on a CPU, not {precision}")
    nlp = peers.spacy_trf(args.model, args.max_length, ("textcat", {
        "@architectures": "spacy.TextCatReduce.v1",
        "exclusive_classes": True,
        "use_reduce_first": False, "use_reduce_last": False, "use_reduce_max": False, "use_reduce_mean": True,
        "tok2vec": peers.trf_listener(),
    }))

    def joined_doc(a, b):
        return nlp.make_doc(a if b is None else f"{a} {b}")

    seconds = textcat.train_spacy(nlp, label_example(joined_doc, labels), train_rows, args, seed)
    return (lambda rows: top_labels(nlp, joined_doc, rows)), seconds


SYSTEMS = {"ours": textcat.run_ours, "hf": run_hf, "spacy_trf": run_spacy_trf}



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
        train_rows, test_rows, labels = textcat.load_task(task, args, seed)
        gold.append([r[2] for r in test_rows])
        print(f"\n{task} seed {seed}: train {len(train_rows)}, test {len(test_rows)}, labels {labels}", flush=True)
        print(f"{'run':<15} {'accuracy':>9} {'train s':>9} {'eval s':>8}", flush=True)
        seed_runs = {run: [] for run in names}
        # repeats run the systems in turn, so that machine load falls on all alike
        for repeat in range(args.repeats):
            for run, system, precision in runs:
                seed_everything(seed)
                predict, seconds = SYSTEMS[system](train_rows, labels, args, seed, precision)
                with Stopwatch() as clock:
                    predicted = predict(test_rows)
                eval_s = clock.seconds
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


def parse_args(argv=None):
    parser = BenchParser(__doc__)
    textcat.add_budget_options(parser)
    parser.threads(None)
    parser.add_argument("--tasks", default="sst2,nli")
    parser.add_argument("--systems", default="ours,hf,spacy_trf")
    add_precision_option(parser)
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
    return textcat.fill_sizes(parser.parse_args(argv))


def main(argv=None):
    args = parse_args(argv)
    print(f"model {args.model}; per task: {args.train_size} training examples (seeded subsample), "
          f"{args.epochs} epoch(s), batch {args.batch_size}, peak lr {args.lr}, warmup {args.warmup:.0%}, "
          f"max length {args.max_length}; same budget for every system; seeds {args.seed_list}; "
          f"torch threads {torch.get_num_threads()}", flush=True)
    results, predictions = {}, {}
    for task in args.tasks.split(","):
        predictions[task] = run_task(task, args, args.seed_list, results)
    if args.predictions:
        write_json(args.predictions, predictions)
    print_result(results)


if __name__ == "__main__":
    sys.exit(main())
