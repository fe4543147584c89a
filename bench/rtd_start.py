"""Replaced-token detection from a random start and from a start that already reads context.

Why: from scratch, at the budgets bench/transfer.py affords (2 x 128 on a 2-core
CPU, 4 x 256 for a few GPU minutes), RTD's discriminator sits at its prior for
tens of millions of tokens and fine-tunes below random initialisation. This
script isolates the cause. It runs the same RTD pretraining (our `pretrain`,
objective "rtd": same corpus, steps, batch, learning rate and seed; the
generator starts fresh in both) on two encoders of one architecture and one
tokenizer:

  pretrained  the model as given (default: the packaged MiniLM)
  fresh       the same config with weights drawn at random (--seed), saved once
              as a local HF directory, OUT/fresh_source

At every held-out evaluation (step 0 included) it reports the discriminator's
binary cross-entropy per position and the prior's: the entropy of the share of
replaced positions, which is what a discriminator that ignores its input
scores. Their difference ("gap", nats per position) is what the discriminator
has learned; accuracy is given beside the prior's (1 - replaced share). The
generator's masked-token accuracy shows how hard its replacements are.

Each system keeps its run in OUT/<system>/run and is not run again once its
stats.json exists (--systems splits the work); every invocation ends with the
table of what OUT holds.

    python bench/rtd_start.py [--quick] [--model DIR] [--out DIR] [--systems pretrained,fresh]

Last line: one JSON object with, per system, <system>_gap, <system>_rtd_loss,
<system>_prior_loss, <system>_rtd_accuracy, <system>_prior_accuracy,
<system>_generator_accuracy (the last evaluation), <system>_gaps (every
evaluation), <system>_s; and steps, tokens (null where a system has not run).
"""
import json
import math
import os
import shutil
from pathlib import Path

from harness.common import BenchParser, print_result
from harness.pretraining import raw_text_dir, run_pretraining

SYSTEMS = ("pretrained", "fresh")


def build_parser() -> BenchParser:
    parser = BenchParser(__doc__)
    parser.quick("8 steps of 4 x 32: a smoke test")
    parser.model(help="HF BERT/RoBERTa directory (default: packaged MiniLM)")
    parser.output("spacy_mlm_rtd_start", "spacy_mlm_rtd_start_quick")
    parser.systems(SYSTEMS, none="only prints what --out holds")
    parser.data_file("--wiki", "raw_text/wikipedia/en_wiki_sample.jsonl")
    parser.data_file("--wikitext", "raw_text/wikitext2/valid.txt")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=64)
    parser.lr(5e-4, help="peak learning rate (ELECTRA-Small's), 10%% warmup")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    parser.add_argument("--eval-sequences", type=int, default=256)
    parser.seed(help="the fresh weights, masks, replacements and generator")
    parser.threads(None)
    return parser


def parse_args(argv=None):
    args = build_parser().parse_args(argv)
    if args.quick:
        args.steps, args.batch, args.max_length, args.eval_sequences = 8, 4, 32, 16
    return args


def fresh_source(args) -> Path:
    """OUT/fresh_source: the model's config and tokenizer, weights drawn from --seed (written once, atomically)."""
    import torch
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    folder = args.out / "fresh_source"
    if not (folder / "config.json").exists():
        tmp = args.out / "fresh_source.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        torch.manual_seed(args.seed)
        AutoModel.from_config(AutoConfig.from_pretrained(args.model)).save_pretrained(str(tmp))
        AutoTokenizer.from_pretrained(args.model).save_pretrained(str(tmp))
        os.replace(tmp, folder)
    return folder


def settings(args, source: Path) -> dict:
    evals = max(args.steps // 4, 1)
    return {
        "paths.train": str(raw_text_dir(args)),
        "paths.source": str(source),
        "pretraining.objective": "rtd",
        "pretraining.max_steps": args.steps,
        "pretraining.batch_size": args.batch,
        "pretraining.max_length": args.max_length,
        "pretraining.eval_every": evals,
        "pretraining.eval_sequences": args.eval_sequences,
        "pretraining.checkpoint_every": evals,
        "pretraining.log_every": max(args.steps // 20, 1),
        "pretraining.optimizer.learning_rate": args.lr,
        "pretraining.optimizer.warmup_steps": max(args.steps // 10, 1),
        "pretraining.precision": args.precision,
        "pretraining.seed": args.seed,
    }


def binary_entropy(share: float) -> float:
    """Nats per position of the best constant guess when `share` of positions are replaced."""
    return 0.0 if share <= 0 or share >= 1 else -(share * math.log(share) + (1 - share) * math.log(1 - share))


def evaluations(run: Path) -> list:
    """Per held-out evaluation: (step, discriminator loss, prior loss, gap,
    accuracy, prior accuracy, generator accuracy)."""
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text(encoding="utf8").splitlines()]
    table = []
    for row in rows:
        if "eval_rtd_loss" in row:
            prior = binary_entropy(row["eval_replaced"])
            table.append((row["step"], row["eval_rtd_loss"], prior, prior - row["eval_rtd_loss"],
                          row["eval_rtd_accuracy"], 1 - row["eval_replaced"], row["eval_accuracy"]))
    return table


def report(args) -> dict:
    result = {"steps": args.steps, "tokens": args.steps * args.batch * args.max_length}
    print(f"\nRTD, {args.steps} steps of {args.batch} x {args.max_length} ({result['tokens']} positions), "
          f"peak lr {args.lr}, model {args.model}")
    print("system      step  disc loss  prior loss    gap   accuracy  prior acc  generator acc")
    for system in SYSTEMS:
        stats_path = args.out / system / "run" / "stats.json"
        keys = ("gap", "rtd_loss", "prior_loss", "rtd_accuracy", "prior_accuracy", "generator_accuracy")
        if not stats_path.exists():
            result.update({f"{system}_{key}": None for key in (*keys, "gaps", "s")})
            continue
        table = evaluations(args.out / system / "run")
        for step, loss, prior, gap, accuracy, prior_accuracy, generator in table:
            print(f"{system:10s} {step:5d}  {loss:9.4f}  {prior:10.4f}  {gap:+.4f}  {accuracy:9.4f}  "
                  f"{prior_accuracy:9.4f}  {generator:13.4f}")
        step, loss, prior, gap, accuracy, prior_accuracy, generator = table[-1]
        result.update({f"{system}_{key}": round(value, 4) for key, value in
                       zip(keys, (gap, loss, prior, accuracy, prior_accuracy, generator))})
        result[f"{system}_gaps"] = [round(row[3], 4) for row in table]
        result[f"{system}_s"] = json.loads(stats_path.read_text(encoding="utf8"))["seconds"]
    return result


def main(argv=None):
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for system in args.systems:
        source = Path(args.model) if system == "pretrained" else fresh_source(args)
        print(f"== {system}: RTD from {source}", flush=True)
        run_pretraining(args, settings(args, source), args.out / system / "run")
    print_result(report(args))


if __name__ == "__main__":
    main()
