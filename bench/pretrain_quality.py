"""Continued masked-LM pretraining of MiniLM on WikiText-2: held-out masked-token
accuracy before and after, then fill-mask with the result.

Trains with `spacy_mlm pretrain` on WikiText-2 valid.txt for a fixed budget of
steps (the train split is not in shared/data), evaluates on the first
--eval-sequences packed blocks of test.txt with masks fixed once (the same masks
before and after). MiniLM ships without an MLM head, so "before" is MiniLM with
the freshly initialised head (transform random, decoder tied, bias = corpus log
unigram frequencies): it measures what the encoder plus the unigram prior give.
WikiText's `<unk>` placeholders are mapped to the tokenizer's [UNK] (a temporary
copy in the output directory), which is never masked or predicted.

    python bench/pretrain_quality.py [--quick] [--model DIR] [--data DIR] [--output DIR]

Last line: {"acc_before": ..., "acc_after": ..., "steps": ...}
"""
import json
from pathlib import Path

from harness.common import REPO, BenchParser, Stopwatch, print_result, temporary_folder

PROMPTS = [
    "The ___ of Walden Pond is so beautifully",
    "The game was released in ___ for the PlayStation.",
    "He was born in the city of ___ .",
    "The river flows into the ___ sea .",
    "She played the ___ in the orchestra and the ___ at home .",
]


def main():
    parser = BenchParser(__doc__)
    parser.model()
    parser.data_file("--data", "raw_text/wikitext2", "folder of WikiText-2's valid.txt and test.txt")
    parser.add_argument("--output", default=str(temporary_folder("spacy_mlm_pretrain_quality")))
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--length", type=int, default=128)
    parser.lr(2e-4)
    parser.add_argument("--eval-sequences", type=int, default=128)
    parser.add_argument("--max-time", type=int, default=1500, help="seconds; a safety stop for a loaded machine")
    parser.quick("4 steps, batch 4 x 64, 16 held-out blocks")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.batch_size, args.length, args.eval_sequences = 4, 4, 64, 16
    import shutil

    from spacy_mlm import FillMask, load_pretraining_config, pretrain
    out = Path(args.output)
    shutil.rmtree(out, ignore_errors=True)
    (out / "data").mkdir(parents=True)
    for split in ("valid", "test"):
        text = (Path(args.data) / f"{split}.txt").read_text(encoding="utf8")
        (out / "data" / f"{split}.txt").write_text(text.replace("<unk>", "[UNK]"), encoding="utf8")
    overrides = {
        "paths.source": args.model,
        "paths.train": str(out / "data" / "valid.txt"),
        "paths.dev": str(out / "data" / "test.txt"),
        "pretraining.max_steps": args.steps,
        "pretraining.max_time": args.max_time,
        "pretraining.batch_size": args.batch_size,
        "pretraining.max_length": args.length,
        "pretraining.eval_every": max(args.steps // 3, 1),
        "pretraining.checkpoint_every": max(args.steps // 3, 1),
        "pretraining.eval_sequences": args.eval_sequences,
        "pretraining.optimizer.learning_rate": args.lr,
        "pretraining.optimizer.warmup_steps": max(args.steps // 10, 1),
    }
    config = load_pretraining_config(REPO / "configs" / "pretraining" / "pretrain.cfg", overrides)
    with Stopwatch() as clock:
        final = pretrain(config, out / "run")
    history = [json.loads(line) for line in (out / "run" / "metrics.jsonl").read_text().splitlines()]
    evals = [row for row in history if "eval_accuracy" in row]
    before, after = evals[0], evals[-1]
    print(f"trained {after['step']} steps of {args.batch_size} x {args.length} in {clock.seconds:.0f}s")
    for row in evals:
        print(f"step {row['step']:>4}: held-out loss {row['eval_loss']:.3f}  ppl {row['eval_perplexity']:.1f}  acc {row['eval_accuracy']:.4f}")
    fill = FillMask(final)
    for prompt in PROMPTS:
        cands = fill(prompt, top_k=5)
        print(prompt)
        for n, blank in enumerate(cands, 1):
            print(f"  blank {n}: " + ", ".join(f"{piece} {p:.3f}" for piece, p in blank))
    print(f"model saved to {final}; curves in {out / 'run' / 'curves.png'}")
    print_result({"acc_before": round(before["eval_accuracy"], 4), "acc_after": round(after["eval_accuracy"], 4),
                  "steps": after["step"]})


if __name__ == "__main__":
    main()
