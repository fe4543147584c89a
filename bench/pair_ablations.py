"""Ablations of our sentence-pair classifier on NLI data that is not the final
test (the MultiNLI matched sample of bench/classify.py stays unseen):

  train  a seeded subsample of SNLI dev, drawn from the pairs outside `snli` below
  snli   1000 SNLI dev pairs set aside once (a fixed shuffle), never trained on
  sick   SICK trial (500 pairs, another domain: captions rewritten by rules)
  rte    RTE dev (277 pairs, two-way: neutral and contradiction count as not_entailment)

One run trains ours once per seed, with bench/classify.py's budget and options
(--pooling, --no-segment-ids, --lr, --init-std, --dropout, --warmup, ...),
scores every set, appends one JSON line per seed to --log as it finishes, and
ends with per-set mean and standard deviation over the seeds (last line JSON).

    python bench/pair_ablations.py --name pooler --pooling pooler --seeds 0,1,2 \\
        --log ablations.jsonl
"""
import json
import sys
from pathlib import Path

from harness import textcat
from harness.common import BenchParser, Stopwatch, mean_and_sd, print_result, seed_everything
from spacy_mlm import select

HELD_OUT_SEED = 20240515  # fixes which SNLI dev pairs are set aside, whatever the run's seeds
SETS = {
    "snli": None,  # set aside from --nli-train
    "sick": "sick/SICK_trial.txt",  # under --data-root
    "rte": "rte/dev.tsv",
}


def split_snli(args):
    """(training pool, held-out pairs, labels): `--held-out` pairs of --nli-train set aside."""
    rows, labels = textcat.nli_rows(args.nli_train)
    shuffled = select(rows, 0, shuffle=True, seed=HELD_OUT_SEED)
    return shuffled[args.held_out :], shuffled[: args.held_out], labels


def two_way(label: str) -> str:
    return label if label == "entailment" else "not_entailment"


def evaluate(predict, sets):
    scores = {}
    for name, rows in sets.items():
        with Stopwatch() as clock:
            predicted = predict(rows)
        if name == "rte":
            predicted = [two_way(p) for p in predicted]
        scores[name] = textcat.accuracy(predicted, [r[2] for r in rows])
        scores[f"{name}_eval_s"] = round(clock.seconds, 1)
    return scores


def main(argv=None):
    parser = BenchParser(__doc__)
    textcat.add_budget_options(parser)
    parser.add_argument("--name", required=True, help="the variant's name in the log")
    parser.add_argument("--sets", default="snli,sick", help=f"evaluation sets among {', '.join(SETS)}")
    parser.add_argument("--held-out", type=int, default=1000, help="SNLI dev pairs set aside for scoring")
    parser.add_argument("--log", default=None, help="JSONL file that gets one line per seed as it finishes")
    args = textcat.fill_sizes(parser.parse_args(argv))
    seeds = args.seed_list
    pool, held_out, labels = split_snli(args)
    sets = {}
    for name in args.sets.split(","):
        sets[name] = held_out if name == "snli" else textcat.nli_rows(Path(args.data_root) / SETS[name])[0]
    print(f"{args.name}: train {args.train_size} of {len(pool)} SNLI pairs, {args.epochs} epoch(s), "
          f"lr {args.lr}, sets " + ", ".join(f"{k} {len(v)}" for k, v in sets.items()), flush=True)
    runs = []
    for seed in seeds:
        seed_everything(seed)
        train_rows = select(pool, args.train_size, shuffle=True, seed=seed)
        predict, train_s = textcat.run_ours(train_rows, labels, args, seed)
        record = {"name": args.name, "seed": seed, "train_s": round(train_s, 1), **evaluate(predict, sets),
                  "argv": sys.argv[1:] if argv is None else list(argv)}
        runs.append(record)
        print(json.dumps(record), flush=True)
        if args.log:
            with Path(args.log).open("a", encoding="utf8") as log:
                log.write(json.dumps(record) + "\n")
    summary = {"name": args.name, "seeds": seeds}
    for name in sets:
        mean, sd = mean_and_sd([r[name] for r in runs])
        summary[name], summary[f"{name}_sd"] = round(mean, 4), round(sd, 4)
    summary["train_s"] = round(sum(r["train_s"] for r in runs) / len(runs), 1)
    print_result(summary)


if __name__ == "__main__":
    sys.exit(main())
