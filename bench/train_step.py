"""What a fine-tuning step of ours costs with and without the CPU training
kernels of models/dropout.py and models/attention.py and the packed rows of
models/window_packing.py, in one process.

Ours as the fine-tuning benches train it, at --precision (MiniLM, batches of
16): --task nli, MNLI pairs as bench/classify.py trains them (configs/nli.cfg's
pooling); --task sst2, SST-2 texts likewise; --task ner, CoNLL-2003 sentences with configs/ner.cfg as
bench/ner_conll.py trains them (--crf: with the CRF). Three variants of the same pipeline,
each stepping the same batches in blocks of --steps, in turn over --rounds
(alternating the order, so that a machine slowing down or speeding up falls
on every variant alike; the median block is reported). Four variants:

  torch        torch's nn.Dropout (bernoulli_ masks) and the family's SDPA
               attention in training (the code before issue 38's last change)
  int16        dropout masks from 16-bit integers (models/dropout.py), SDPA
  int16_plain  that, and the plain attention in training (models/attention.py)
  packed       that, and the windows of a pass packed into rows of about
               --row-length pieces (models/window_packing.py): what the package does

Also the time of one dropout mask draw on a [16, 32, 384] tensor both ways.

    python bench/train_step.py                      # MNLI, about 6 minutes on one core
    python bench/train_step.py --task sst2          # SST-2
    python bench/train_step.py --task ner --crf     # NER with the CRF
    python bench/train_step.py --quick              # a smoke test

Last line: one JSON object, `step_ms_<variant>`, `mask_ms_bernoulli`,
`mask_ms_int16`, `speedup` (torch over packed), `packing_speedup`
(int16_plain over packed), the machine.
"""
import harness  # noqa: F401  (environment first)

import statistics
import time

import spacy
import torch
from harness.common import BenchParser, Stopwatch, print_result
from harness.textcat import add_budget_options, batches, fill_sizes, label_example, load_task, n_steps
from harness.textcat import nli_config_pooling, thinc_optimizer
from harness import ner

import spacy_mlm
from spacy_mlm import get_hf_model

VARIANTS = ("torch", "int16", "int16_plain", "packed")


def parse_args():
    parser = BenchParser(__doc__)
    add_budget_options(parser)
    parser.threads()
    parser.data_file("--conll-train", "conll2003/train.txt", help="--task ner's sentences")
    parser.add_argument("--task", default="nli", choices=["nli", "sst2", "ner"])
    parser.add_argument("--crf", action="store_true", help="--task ner: with the CRF")
    parser.add_argument("--precision", default="bf16", choices=["fp32", "bf16"])
    parser.add_argument("--steps", type=int, default=10, help="steps a block")
    parser.add_argument("--rounds", type=int, default=6, help="blocks of each variant")
    parser.add_argument("--row-length", type=int, default=None,
                        help="the packed variant's pieces a row (default: the encoder's own)")
    parser.set_defaults(lr=2e-4, layer_decay=0.9)
    args = fill_sizes(parser.parse_args())
    if args.quick:
        args.steps, args.rounds = 2, 2
    return args


def use_variant(encoder, dropout_classes: dict, variant: str, row_length: int) -> None:
    """The variant's dropout modules (torch's class, or the package's own, as
    loaded), attention in training (the encoder's `plain_attention` attr) and
    rows (its `pack_row_length`)."""
    for module, cls in dropout_classes.items():
        module.__class__ = torch.nn.Dropout if variant == "torch" else cls
    encoder.attrs["plain_attention"] = variant in ("int16_plain", "packed")
    encoder.attrs["pack_row_length"] = row_length if variant == "packed" else 0


def mask_ms(draw, repeats: int = 200) -> float:
    draw()
    with Stopwatch() as clock:
        for _ in range(repeats):
            draw()
    return clock.seconds / repeats * 1000


def textcat_pipeline(args):
    """(nlp, the pipeline's examples, batches of them, a thinc optimizer) of --task nli (MNLI pairs,
    configs/nli.cfg's pooling) or sst2 (texts, the component's defaults) as bench/classify.py trains them."""
    train_rows, _, labels = load_task(args.task, args, args.seed_list[0])
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": args.model, "window": args.max_length,
                                                  "precision": args.precision}})
    pairs = args.task == "nli"
    nlp.add_pipe("mlm_textcat", config={"model": {"tok2vec": {"pooling": nli_config_pooling()}} if pairs else {}})
    example = label_example(lambda a, b: spacy_mlm.make_pair_doc(nlp, a, b) if pairs else nlp.make_doc(a), labels)
    examples = [example(row) for row in train_rows]
    nlp.initialize(lambda: examples[:20])
    optimizer = thinc_optimizer(n_steps(train_rows, args), args, args.layer_decay)
    index = {id(row): i for i, row in enumerate(train_rows)}
    order = [[index[id(row)] for row in rows] for rows in batches(train_rows, args.batch_size, args.epochs,
                                                                      args.seed_list[0])]
    return nlp, examples, order, optimizer


def ner_pipeline(args):
    """The same, of CoNLL-2003 NER as bench/ner_conll.py trains it (configs/ner.cfg)."""
    nlp = ner.build_ours(args.model, args.crf, precision=args.precision)
    docs = ner.load_sentences(args.conll_train, nlp.vocab, args.train_size, args.seed_list[0])
    examples = ner.gold_examples(nlp, docs)
    nlp.initialize(lambda: examples)
    order = ner.batches(len(examples), args.batch_size, args.epochs, args.seed_list[0])
    return nlp, examples, order, ner.spacy_optimizer(args.lr, args.warmup, len(order))


def main():
    args = parse_args()
    nlp, examples, order, optimizer = (ner_pipeline if args.task == "ner" else textcat_pipeline)(args)
    encoder = nlp.get_pipe("encoder" if "encoder" in nlp.pipe_names else "mlm_encoder").model
    dropout_classes = {m: type(m) for m in get_hf_model(encoder).modules() if isinstance(m, torch.nn.Dropout)}
    if args.row_length is None:
        args.row_length = encoder.attrs["pack_row_length"]
    warmup, block = order[:3], order[3:3 + args.steps]

    def step(idx):
        nlp.update([examples[i] for i in idx], sgd=optimizer, drop=args.dropout)
        optimizer.step_schedules()

    for idx in warmup:
        step(idx)
    times = {variant: [] for variant in VARIANTS}
    for round_ in range(args.rounds):
        for variant in VARIANTS if round_ % 2 == 0 else VARIANTS[::-1]:
            use_variant(encoder, dropout_classes, variant, args.row_length)
            start = time.perf_counter()
            for idx in block:
                step(idx)
            times[variant].append((time.perf_counter() - start) / len(block) * 1000)
            print(f"round {round_} {variant}: {times[variant][-1]:.1f} ms a step", flush=True)
    x = torch.randn(16, 32, 384, dtype=torch.bfloat16 if args.precision == "bf16" else torch.float32)
    figures = {f"step_ms_{variant}": statistics.median(times[variant]) for variant in VARIANTS}
    figures["mask_ms_bernoulli"] = mask_ms(lambda: torch.nn.functional.dropout(x, args.dropout, True))
    ours = next(iter(dropout_classes.values()))(args.dropout).train()  # the class the package loads it with
    figures["mask_ms_int16"] = mask_ms(lambda: ours(x))
    figures["speedup"] = figures["step_ms_torch"] / figures["step_ms_packed"]
    figures["packing_speedup"] = figures["step_ms_int16_plain"] / figures["step_ms_packed"]
    figures.update(task=args.task + ("_crf" if args.crf else ""), precision=args.precision, steps=args.steps,
                   rounds=args.rounds, threads=args.threads, row_length=args.row_length)
    print_result(figures, digits=3)


if __name__ == "__main__":
    main()
