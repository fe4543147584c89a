"""Text and pair classification as bench/classify.py trains it (and
bench/inference_speed.py, bench/pair_ablations.py, bench/relatedness.py,
bench/transfer.py after it): the task data, the shared budget and its options,
the spaCy training loop, and our pipeline ("ours")."""
import argparse
import math
import random
from typing import Callable

import numpy
import spacy
from spacy.training import Example
from thinc.api import Adam, registry

import spacy_mlm
from spacy_mlm import read_nli, read_textcat, select

from .common import REPO, BenchParser, Stopwatch


def add_budget_options(parser: BenchParser) -> None:
    """The task data and the budget every system shares, and our pipeline's options."""
    parser.quick()
    parser.model()
    parser.seeds()
    parser.data_file("--sst2-train", "sst2/train.tsv")
    parser.data_file("--sst2-dev", "sst2/dev.tsv")
    parser.data_file("--nli-train", "snli/dev.jsonl")
    parser.data_file("--nli-test", "mnli_sample/dev_matched_sample1000.tsv")
    parser.add_argument("--train-size", type=int, default=None, help="training examples per task (default: 2000; "
                        "--quick: 160)")
    parser.add_argument("--test-size", type=int, default=None, help="0 = the whole test set (default; --quick: 100)")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.lr(1e-4)
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


def fill_sizes(args) -> argparse.Namespace:
    """The sizes left unset: --quick's small ones, or 2000 training examples and the whole test set."""
    if args.train_size is None:
        args.train_size = 160 if args.quick else 2000
    if args.test_size is None:
        args.test_size = 100 if args.quick else 0
    return args


def budget(**settings) -> argparse.Namespace:
    """The budget's defaults with `settings` (option dests) replacing some: for
    scripts that train as bench/classify.py does without its command line."""
    parser = BenchParser(__doc__)
    add_budget_options(parser)
    args = parser.parse_args(["--model", str(settings.pop("model"))] if "model" in settings else [])
    for key, value in settings.items():
        if not hasattr(args, key):
            raise TypeError(f"no budget setting {key!r}")
        setattr(args, key, value)
    return fill_sizes(args)


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
                "initial_rate": args.lr}
    if layer_decay != 1.0:
        optimizer = {"@optimizers": "spacy_mlm.LayerDecayAdam.v2", "learn_rate": schedule, "layer_decay": layer_decay,
                     "L2": 0.01, "L2_is_weight_decay": True, "grad_clip": 1.0}
        return registry.resolve({"o": optimizer})["o"]
    return Adam(registry.resolve({"s": schedule})["s"], L2=0.01, L2_is_weight_decay=True, grad_clip=1.0,
                use_averages=False)


def accuracy(predicted, gold) -> float:
    return float(numpy.mean([p == g for p, g in zip(predicted, gold)]))


def label_example(make_doc: Callable, labels) -> Callable:
    """row -> Example: `make_doc(a, b)`'s Doc with the row's label as the one true category."""
    return lambda row: Example.from_dict(make_doc(row[0], row[1]),
                                         {"cats": {label: float(label == row[2]) for label in labels}})


def train_spacy(nlp, example: Callable, train_rows, args, seed: int, after_initialize=None, layer_decay: float = 1.0,
                n_initialize: int = 20) -> float:
    """The one training loop of the spaCy systems: `example(row)` is how each turns
    a row into an Example; `nlp` is initialized on the first `n_initialize` rows
    (0: all). The training seconds."""
    nlp.initialize(lambda: [example(r) for r in (train_rows[:n_initialize] if n_initialize else train_rows)])
    if after_initialize is not None:
        after_initialize(nlp)
    optimizer = thinc_optimizer(n_steps(train_rows, args), args, layer_decay)
    with Stopwatch() as clock:
        for batch in batches(train_rows, args.batch_size, args.epochs, seed):
            nlp.update([example(r) for r in batch], sgd=optimizer, drop=args.dropout)
            optimizer.step_schedules()
    return clock.seconds


def top_labels(nlp, make_doc: Callable, rows):
    """The top category of each row's Doc."""
    docs = nlp.pipe((make_doc(a, b) for a, b, _ in rows), batch_size=64)
    return [max(doc.cats, key=doc.cats.get) for doc in docs]


def nli_config_pooling() -> str:
    """The pooling of the shipped pair config, configs/nli.cfg."""
    config = spacy.util.load_config(REPO / "configs" / "nli.cfg", interpolate=False)
    return config["components"]["nli"]["model"]["tok2vec"]["pooling"]


def run_ours(train_rows, labels, args, seed, precision="fp32"):
    """Our pipeline as a user gets it from the factories, with configs/nli.cfg's
    pooling for pairs and the encoder at `precision`; the options below are there
    for ablations and are left at those defaults unless given. (predict, train s),
    predict(rows) giving the top label of each row."""
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

    seconds = train_spacy(nlp, label_example(make_doc, labels), train_rows, args, seed,
                          None if args.segment_ids else without_segment_ids, args.layer_decay)
    return (lambda rows: top_labels(nlp, make_doc, rows)), seconds
