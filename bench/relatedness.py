"""Semantic relatedness (SICK, scores 1 to 5) as regression, ours against Hugging
Face's recipe, with one encoder and one budget (bench/classify.py's, harness/textcat.py):

  ours  mlm_encoder + mlm_regressor (pair Docs with segment ids, targets standardized)
  hf    AutoModelForSequenceClassification(num_labels=1): MSE on the raw scores

Trains on a seeded subsample of SICK train, scores Pearson and Spearman on SICK
trial (the SICK test set is not used). Per system the mean and standard
deviation over --seeds; the last line is one JSON object.

    python bench/relatedness.py --seeds 0,1,2 --train-size 2000
"""
import sys

import spacy
import torch
from spacy.training import Example

import spacy_mlm
from harness import peers, textcat
from harness.common import BenchParser, mean_and_sd, print_result, seed_everything
from spacy_mlm import make_pair_doc, pearson, read_pair_scores, select, spearman

TARGET = "relatedness"


def rows_of(path):
    return [(eg.text_a, eg.text_b, eg.score) for eg in read_pair_scores(path).examples]


def run_ours(train_rows, args, seed):
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": args.model, "window": args.max_length}})
    head = {} if args.pooling is None else {"tok2vec": {"pooling": args.pooling}}
    nlp.add_pipe("mlm_regressor", config={"model": head})

    def example(row):
        return Example.from_dict(make_pair_doc(nlp, row[0], row[1]), {"cats": {TARGET: row[2]}})

    # initialized on every training row: the regressor standardizes its targets over them
    train_s = textcat.train_spacy(nlp, example, train_rows, args, seed, layer_decay=args.layer_decay, n_initialize=0)

    def predict(rows):
        return [cats[TARGET] for cats in spacy_mlm.classify_pairs(nlp, [(a, b) for a, b, _ in rows], batch_size=64)]

    return predict, train_s


def run_hf(train_rows, args, seed):
    """AutoModelForSequenceClassification(num_labels=1), harness.peers.hf_finetune: MSE on the raw scores."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForSequenceClassification.from_pretrained(args.model, num_labels=1)

    def encode(rows):
        return tokenizer([r[0] for r in rows], [r[1] for r in rows], truncation=True, max_length=args.max_length,
                         padding=True, return_tensors="pt")

    total = textcat.n_steps(train_rows, args)
    train_batches = ((encode(batch), torch.tensor([r[2] for r in batch], dtype=torch.float32))
                     for batch in textcat.batches(train_rows, args.batch_size, args.epochs, seed))
    train_s = peers.hf_finetune(model, train_batches, total, args.lr, textcat.warmup_steps(total, args))

    def predict(rows):
        logits = peers.hf_logits(model, (encode(chunk) for chunk in peers.chunks(rows)))
        return [value for batch in logits for value in batch[:, 0].tolist()]

    return predict, train_s


SYSTEMS = {"ours": run_ours, "hf": run_hf}


def main(argv=None):
    parser = BenchParser(__doc__)
    textcat.add_budget_options(parser)
    parser.data_file("--sick-train", "sick/SICK_train.txt")
    parser.data_file("--sick-dev", "sick/SICK_trial.txt")
    parser.systems(("ours", "hf"))
    args = textcat.fill_sizes(parser.parse_args(argv))
    all_train, dev = rows_of(args.sick_train), rows_of(args.sick_dev)
    gold = [r[2] for r in dev]
    systems = args.systems
    scores = {system: {"pearson": [], "spearman": [], "train_s": []} for system in systems}
    print(f"SICK relatedness: train {args.train_size} of {len(all_train)}, dev {len(dev)}, {args.epochs} epoch(s), "
          f"lr {args.lr}, seeds {args.seed_list}", flush=True)
    for seed in args.seed_list:
        train_rows = select(all_train, args.train_size, shuffle=True, seed=seed)
        for system in systems:
            seed_everything(seed)
            predict, train_s = SYSTEMS[system](train_rows, args, seed)
            predicted = predict(dev)
            r, rho = pearson(predicted, gold), spearman(predicted, gold)
            for key, value in (("pearson", r), ("spearman", rho), ("train_s", train_s)):
                scores[system][key].append(value)
            print(f"seed {seed} {system:<6} pearson {r:.4f} spearman {rho:.4f} train s {train_s:.1f}", flush=True)
    results = {}
    for system in systems:
        for key, values in scores[system].items():
            mean, sd = mean_and_sd(values)
            results[f"sick_{system}_{key}"] = round(mean, 4 if key != "train_s" else 1)
            if key != "train_s":
                results[f"sick_{system}_{key}_sd"] = round(sd, 4)
                results[f"sick_{system}_{key}_runs"] = [round(v, 4) for v in values]
    print_result(results)


if __name__ == "__main__":
    sys.exit(main())
