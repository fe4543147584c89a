"""Zero-shot classification from an NLI pipeline: MiniLM trained here on the
shared NLI samples (SNLI dev + MultiNLI dev-matched sample, as pairs, the way
bench/classify.py trains NLI) then asked, through `mlm_zero_shot`, whether each
text entails "This example is {label}." for every label of AG News (test split)
and of SST-2 (dev). Against:

  hf        the same NLI model exported (`export_hf`) and run by transformers'
            pipeline("zero-shot-classification") on AG News: same scores expected
  majority  the most frequent AG News class of the evaluated rows

The NLI head reads the model's pooler with no hidden layer (BERT's own
sequence-classification head), so that the export can hold it. Prints the
figures; the last line is one JSON object (agnews_acc, sst2_acc, hf_agnews_acc,
majority_agnews, pairs_per_s: our (text, hypothesis) pairs per second on AG News,
inference only).

    python bench/zero_shot.py                 # all NLI pairs; 2000 AG News test rows, all SST-2 dev rows
    python bench/zero_shot.py --agnews-size 0 # all 7600 AG News test rows (about 4x the time of that part)
    python bench/zero_shot.py --quick         # 200 NLI pairs, 40 rows of each (smoke test)
"""
import csv
import tempfile
from collections import Counter
from pathlib import Path

import spacy

from harness.common import BenchParser, Stopwatch, print_result
from harness.textcat import accuracy, label_example, nli_rows, train_spacy

import spacy_mlm
from spacy_mlm import read_textcat, select

NLI_TRAIN = ("snli/dev.jsonl", "mnli_sample/dev_matched_sample1000.tsv")  # under --data-root
AG_NEWS_CLASSES = {"1": "World", "2": "Sports", "3": "Business", "4": "Sci/Tech"}


def read_ag_news(path):
    """(text, label) rows of AG News' CSV ("class","title","description"): title and description joined."""
    with open(path, encoding="utf8", newline="") as f:
        return [(f"{title}. {description}".replace("\\", " "), AG_NEWS_CLASSES[cls]) for cls, title, description in csv.reader(f)]


def read_sst2(path):
    data = read_textcat(path, label_names={"0": "negative", "1": "positive"})
    return [(eg.text, eg.labels[0]) for eg in data.examples]


def train_nli(args):
    """The NLI pipeline (mlm_encoder + mlm_textcat on pairs, pooler head) and its training time."""
    rows, labels = [], None
    for path in args.nli_train:
        part, part_labels = nli_rows(path)
        rows += part
        labels = labels or part_labels
    rows = select(rows, args.train_size, shuffle=True, seed=args.seed)
    spacy.util.fix_random_seed(args.seed)
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": args.model, "window": args.max_length}})
    nlp.add_pipe("mlm_textcat", config={"model": {"tok2vec": {"pooling": "pooler"}}})

    def make_doc(premise, hypothesis):
        return spacy_mlm.make_pair_doc(nlp, premise, hypothesis)

    seconds = train_spacy(nlp, label_example(make_doc, labels), rows, args, args.seed, layer_decay=args.layer_decay)
    return nlp, len(rows), seconds


def top_label_accuracy(scores, rows):
    """Accuracy of the top-scoring label of each row's scores."""
    return accuracy([max(cats, key=cats.get) for cats in scores], [label for _, label in rows])


def main(argv=None):
    parser = BenchParser(__doc__)
    parser.quick()
    parser.model()
    parser.add_argument("--nli-train", nargs="+", default=None,
                        help=f"NLI files to train on; default: {' '.join('DATA_ROOT/' + p for p in NLI_TRAIN)}")
    parser.data_file("--ag-news", "ag_news/test.csv")
    parser.data_file("--sst2-dev", "sst2/dev.tsv")
    parser.add_argument("--train-size", type=int, default=None, help="NLI pairs to train on (default: all)")
    parser.add_argument("--agnews-size", type=int, default=2000, help="AG News test rows, a seeded sample (0: all)")
    parser.add_argument("--sst2-size", type=int, default=0, help="SST-2 dev rows, a seeded sample (0: all)")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.lr(1e-4)
    parser.add_argument("--warmup", type=float, default=0.1, help="share of the steps with a rising learning rate")
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--layer-decay", type=float, default=1.0)
    parser.add_argument("--max-length", type=int, default=0,
                        help="encoder window in pieces; 0 = the model's limit, where transformers' pipeline truncates")
    parser.add_argument("--zero-shot-batch", type=int, default=64, help="(text, hypothesis) pairs per encoder pass")
    parser.seed()
    args = parser.parse_args(argv)
    args.nli_train = args.nli_train or [str(Path(args.data_root) / path) for path in NLI_TRAIN]
    if args.quick:
        args.train_size, args.agnews_size, args.sst2_size = args.train_size or 200, 40, 40
    ag_news = select(read_ag_news(args.ag_news), args.agnews_size, shuffle=bool(args.agnews_size), seed=args.seed)
    sst2 = select(read_sst2(args.sst2_dev), args.sst2_size, shuffle=bool(args.sst2_size), seed=args.seed)
    ag_labels, sst2_labels = list(AG_NEWS_CLASSES.values()), ["negative", "positive"]

    nlp, n_train, train_seconds = train_nli(args)
    print(f"NLI: trained on {n_train} pairs in {train_seconds:.0f} s")
    with tempfile.TemporaryDirectory() as tmp:
        spacy_mlm.export_hf(nlp, Path(tmp) / "nli")
        zero_shot = spacy_mlm.add_zero_shot(nlp, ag_labels, batch_size=args.zero_shot_batch)
        with Stopwatch() as clock:
            ours_ag = zero_shot.classify([text for text, _ in ag_news])
        pairs_per_s = len(ag_news) * len(ag_labels) / clock.seconds
        ours_sst2 = zero_shot.classify([text for text, _ in sst2], sst2_labels)

        from transformers import pipeline

        hf = pipeline("zero-shot-classification", model=str(Path(tmp) / "nli"))
        hf_ag = [dict(zip(row["labels"], row["scores"]))
                 for row in hf([text for text, _ in ag_news], candidate_labels=ag_labels, batch_size=16)]
    majority = Counter(label for _, label in ag_news).most_common(1)[0][1] / len(ag_news)
    agreement = accuracy([max(c, key=c.get) for c in ours_ag], [max(c, key=c.get) for c in hf_ag])
    result = {
        "agnews_acc": top_label_accuracy(ours_ag, ag_news), "sst2_acc": top_label_accuracy(ours_sst2, sst2),
        "hf_agnews_acc": top_label_accuracy(hf_ag, ag_news), "majority_agnews": majority, "pairs_per_s": pairs_per_s,
        "hf_same_top_label": agreement, "n_nli_train": n_train, "n_agnews": len(ag_news), "n_sst2": len(sst2),
        "nli_train_s": train_seconds,
    }
    print(f"AG News ({len(ag_news)} rows): ours {result['agnews_acc']:.4f}, transformers' zero-shot pipeline "
          f"{result['hf_agnews_acc']:.4f} (same top label on {agreement:.4f}), majority {majority:.4f}")
    print(f"SST-2 dev ({len(sst2)} rows): ours {result['sst2_acc']:.4f}")
    print(f"ours: {pairs_per_s:.1f} (text, hypothesis) pairs/s")
    print_result(result)


if __name__ == "__main__":
    main()
