"""CoNLL-2003 NER with one MiniLM encoder, four systems, one budget.

  (a) ours: `mlm_encoder` + `mlm_ner` (softmax, and CRF), built from configs/ner.cfg
      (the CRF with the override `components.ner.model.crf = true`);
  (b) Hugging Face `AutoModelForTokenClassification`, the run_ner recipe: labels on
      each word's first subword (-100 elsewhere), AdamW, linear schedule;
  (c) spacy-transformers `transformer` + spaCy's transition-based `ner` listening to it
      (the layout of spaCy's trf configs).

Each system that has bf16 also trains (and predicts) in it with --precision
fp32,bf16 (bench/harness/precisions.py): ours as the encoder's precision = "bf16", Hugging
Face with autocast as Trainer(bf16=True); spacy-transformers is fp32 only on a CPU.
Without --precision each system runs at its own default: ours at what init-config
writes on this machine (bf16 on a CPU with AVX512-BF16 or AMX), the peers fp32.
Every run is named <system>_<precision> (ours_bf16, hf_fp32, ...) in the output.

Same budget for all: the same training sentences (a fixed, seeded subsample of
CoNLL train, one sentence per example), the same shuffled batch order, batch size,
epochs, peak learning rate, warmup fraction and linear decay, weight decay and
gradient clipping. Dev F1 is exact-match entity F1 (spacy_mlm.score_entities) on
the whole dev set, inference words/s is measured with batches of 64 sentences on the
whole dev set. The paired bootstrap resamples dev sentences.

    python bench/ner_conll.py            # ~35 min on a 2-core CPU
    python bench/ner_conll.py --quick    # a couple of minutes
    python bench/ner_conll.py --precision fp32,bf16   # every system at both, where it has bf16
    python bench/ner_conll.py --context --quick   # document context (issue 18): CRF on
                                                  # sentences alone vs sentences in context
    python bench/ner_conll.py --context --systems context --predictions DIR   # one system now,
                                                  # joined with the others saved in DIR

Last line: one JSON object with the figures.
"""
import json
import random
from pathlib import Path

import numpy
import torch

from harness import ner, peers
from harness.common import BenchParser, Stopwatch, print_result
from harness.precisions import add_precision_option, precision_runs, train_speedups
from spacy_mlm import (
    conll_documents_to_docs, doc_entities, make_tag_labels, paired_bootstrap, per_doc_counts, read_conll,
    score_entities, spans_to_tags, tags_to_spans,
)

OURS = ("ours", "ours_crf")


def build_spacy_trf(model_path):
    """spacy-transformers with spaCy's transition-based `ner` listening to it."""
    return peers.spacy_trf(model_path, head=("ner", {
        "@architectures": "spacy.TransitionBasedParser.v2", "state_type": "ner", "extra_state_tokens": False,
        "hidden_width": 64, "maxout_pieces": 2, "use_upper": False, "nO": None, "tok2vec": peers.trf_listener(),
    }))


# -- Hugging Face token classification ---------------------------------------------


def hf_encode(tokenizer, words_batch, tags_batch, label_index):
    enc = tokenizer(words_batch, is_split_into_words=True, truncation=True, max_length=512, padding=True, return_tensors="pt")
    if tags_batch is None:
        return enc, None
    labels = torch.full(enc["input_ids"].shape, -100, dtype=torch.long)
    for row, tags in enumerate(tags_batch):
        previous = None
        for col, word in enumerate(enc.word_ids(row)):
            if word is not None and word != previous:
                labels[row, col] = label_index[tags[word]]
            previous = word
    return enc, labels


def run_hf(model_path, train_docs, dev_docs, order, args, labels, precision="fp32"):
    """The run_ner recipe (harness.peers.hf_finetune): labels on each word's first subword."""
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForTokenClassification.from_pretrained(model_path, num_labels=len(labels))
    index = {t: i for i, t in enumerate(labels)}
    words = [[t.text for t in d] for d in train_docs]
    tags = [spans_to_tags(len(d), doc_entities(d), "BIO") for d in train_docs]
    train_batches = (hf_encode(tokenizer, [words[i] for i in idx], [tags[i] for i in idx], index) for idx in order)
    train_s = peers.hf_finetune(model, train_batches, len(order), args.lr, int(args.warmup * len(order)), precision,
                                log_every=100)
    dev_words = [[t.text for t in d] for d in dev_docs]
    preds = []
    with Stopwatch() as clock:
        chunks = list(peers.chunks(dev_words))
        encoded = [hf_encode(tokenizer, chunk, None, index)[0] for chunk in chunks]
        for chunk, enc, logits in zip(chunks, encoded, peers.hf_logits(model, encoded, precision)):
            best = logits.argmax(-1).tolist()
            for row, ws in enumerate(chunk):
                word_tags = ["O"] * len(ws)
                previous = None
                for col, word in enumerate(enc.word_ids(row)):
                    if word is not None and word != previous:
                        word_tags[word] = labels[best[row][col]]
                    previous = word
                preds.append(tags_to_spans(word_tags))
    return preds, train_s, clock.seconds


# -- document context (issue 18): mlm_ner + CRF on sentences alone vs in their document ----


CONTEXT_SYSTEMS = ("sentence", "context", "document")


def load_documents(path, vocab, n_sents=0, seed=0):
    """Whole documents (seeded order) until at least `n_sents` sentences (0 = all),
    as (document Docs, their sentences as Docs in the same order)."""
    documents = read_conll(path)
    random.Random(seed).shuffle(documents)
    if n_sents:
        kept, total = [], 0
        while total < n_sents and len(kept) < len(documents):
            kept.append(documents[len(kept)])
            total += len(kept[-1].sentences)
        documents = kept
    return (list(conll_documents_to_docs(vocab, documents, n_sents=0)),
            list(conll_documents_to_docs(vocab, documents, n_sents=1)))


def word_batches(lengths, words_per_batch, epochs, seed):
    """Shuffled index batches of about `words_per_batch` words (a longer item goes alone),
    so that documents get about as many steps as sentences in batches of a fixed count."""
    rng = random.Random(seed)
    out = []
    for _ in range(epochs):
        order = list(range(len(lengths)))
        rng.shuffle(order)
        batch, words = [], 0
        for i in order:
            if batch and words + lengths[i] > words_per_batch:
                out.append(batch)
                batch, words = [], 0
            batch.append(i)
            words += lengths[i]
        if batch:
            out.append(batch)
    return out


def sentence_entities(doc_preds, sentence_docs_by_doc):
    """Per-sentence entities from whole-document predictions, in sentence offsets (an
    entity crossing a sentence start stays with the sentence it starts in, clipped to it)."""
    out = []
    for ents, sentences in zip(doc_preds, sentence_docs_by_doc):
        offset = 0
        for sentence in sentences:
            end = offset + len(sentence)
            out.append([(s - offset, min(e, end) - offset, label) for s, e, label in ents if offset <= s < end])
            offset = end
    return out


def context_examples(nlp, train_docs):
    """One example per training sentence, in the order of `load_documents`' sentences,
    whose predicted Doc carries its document's text around it (what the config's
    augmenter gives `spacy train`)."""
    from spacy.training import Example
    from spacy.util import registry

    augment = registry.augmenters.get("spacy_mlm.sentences_in_context.v1")()
    return [eg for d in train_docs for eg in augment(nlp, Example(ner.fresh(nlp, d), ner.fresh(nlp, d, True, True)))]


def run_context_system(name, args, model_path, data, orders):
    """Train one system of --context and return its per-dev-sentence predictions, training
    seconds and inference words/s (on whole dev documents for context and document)."""
    from spacy.util import fix_random_seed

    train_docs, train_sents, dev_docs, dev_sents, sents_by_doc = data
    fix_random_seed(args.seed)
    nlp = ner.build_ours(model_path, True, "document" if name == "context" else "none", args.context_pieces)
    if name == "sentence":
        train_s = ner.train_spacy(nlp, ner.gold_examples(nlp, train_sents), orders["sentence"], args.lr, args.warmup)
        preds, infer_s = ner.predict_spacy(nlp, dev_sents)
        return preds, train_s, infer_s
    if name == "context":
        train_s = ner.train_spacy(nlp, context_examples(nlp, train_docs), orders["sentence"], args.lr, args.warmup)
    else:
        train_s = ner.train_spacy(nlp, ner.gold_examples(nlp, train_docs), orders["document"], args.lr, args.warmup)
    doc_preds, infer_s = ner.predict_spacy(nlp, dev_docs, with_sents=True)
    return sentence_entities(doc_preds, sents_by_doc), train_s, infer_s


def run_context(args, model_path):
    """Trains `sentence` (one sentence per Doc, alone), `context` (the same sentences in the
    same batches, each read with --context-pieces pieces of its document a side) and, if
    asked, `document` (whole documents through the encoder's windows, batches of about as
    many words) mlm_ner with the CRF, same epochs and optimizer; scores each per dev
    sentence (context and document predict whole dev documents); with --predictions, each
    system's predictions are saved there and every saved system of the same budget is
    joined; paired bootstrap context vs sentence."""
    import spacy

    vocab = spacy.blank("en").vocab
    train_docs, train_sents = load_documents(args.train, vocab, args.n_train, args.seed)
    dev_docs, dev_sents = load_documents(args.dev, vocab, args.n_dev, args.seed)
    sents_by_doc, i = [], 0
    for doc in dev_docs:
        n = len(list(doc.sents))
        sents_by_doc.append(dev_sents[i : i + n])
        i += n
    gold = [doc_entities(d) for d in dev_sents]
    n_dev_words = sum(len(d) for d in dev_sents)
    mean_words = sum(len(d) for d in train_sents) / len(train_sents)
    orders = {
        "sentence": ner.batches(len(train_sents), args.batch_size, args.epochs, args.seed),
        "document": word_batches([len(d) for d in train_docs], args.batch_size * mean_words, args.epochs, args.seed),
    }
    # what every system shares; --context-pieces is the context system's own (kept in its record)
    budget = {k: getattr(args, k) for k in ("n_train", "n_dev", "epochs", "batch_size", "lr", "warmup", "seed")}
    budget.update(train=Path(args.train).name, dev=Path(args.dev).name, model=Path(model_path).name)
    print(
        f"budget: {len(train_sents)} train sentences in {len(train_docs)} documents, {args.epochs} epoch(s); "
        f"sentence and context: {len(orders['sentence'])} steps of {args.batch_size} sentences (context: "
        f"{args.context_pieces} pieces a side); document: {len(orders['document'])} steps of about "
        f"{args.batch_size * mean_words:.0f} words; dev: {len(dev_sents)} sentences in {len(dev_docs)} documents / "
        f"{n_dev_words} words; peak lr {args.lr}; torch threads {torch.get_num_threads()}",
        flush=True,
    )
    runs = {}
    for name in args.systems.split(","):
        if name not in CONTEXT_SYSTEMS:
            raise SystemExit(f"unknown system {name!r} with --context: {', '.join(CONTEXT_SYSTEMS)}")
        print(f"== {name}", flush=True)
        data = (train_docs, train_sents, dev_docs, dev_sents, sents_by_doc)
        preds, train_s, infer_s = run_context_system(name, args, model_path, data, orders)
        runs[name] = {"system": name, "budget": budget, "train_s": train_s, "wps": n_dev_words / infer_s,
                      "context_pieces": args.context_pieces if name == "context" else None,
                      "preds": [[list(e) for e in p] for p in preds]}
        if args.predictions:
            Path(args.predictions).mkdir(parents=True, exist_ok=True)
            (Path(args.predictions) / f"{name}.json").write_text(json.dumps(runs[name]), encoding="utf8")
    if args.predictions:
        for path in sorted(Path(args.predictions).glob("*.json")):
            saved = json.loads(path.read_text(encoding="utf8"))
            if saved.get("system") in CONTEXT_SYSTEMS and saved["system"] not in runs:
                if saved["budget"] != budget:
                    raise SystemExit(f"{path} was run with {saved['budget']}, not this run's {budget}")
                runs[saved["system"]] = saved
                print(f"== {saved['system']}: joined from {path}", flush=True)
    results = {}
    for name, run in runs.items():
        preds = [[tuple(e) for e in p] for p in run["preds"]]
        if len(preds) != len(gold):
            raise SystemExit(f"{name}: {len(preds)} predicted dev sentences, {len(gold)} in the dev set")
        scores = score_entities(gold, preds)
        results[name] = {"f1": scores["ents_f"], "train_s": run["train_s"], "wps": run["wps"],
                         "counts": per_doc_counts(gold, preds)}
        print(f"   {name}: dev F1 {100 * scores['ents_f']:.2f}, train {run['train_s']:.0f}s, "
              f"inference {run['wps']:.0f} words/s", flush=True)
    summary = {}
    for name in CONTEXT_SYSTEMS:
        for key in ("f1", "train_s", "wps"):
            summary[f"{name}_{key}"] = results.get(name, {}).get(key)
    summary.update(delta=None, p_value=None, n_train=len(train_sents), n_dev=len(dev_sents), epochs=args.epochs,
                   context_pieces=runs.get("context", {}).get("context_pieces"))
    if "sentence" in results and "context" in results:
        test = paired_bootstrap(results["context"]["counts"], results["sentence"]["counts"],
                                n_samples=args.n_samples, seed=args.seed)
        print(f"paired bootstrap context vs sentence: delta F1 {100 * test.delta:+.2f} "
              f"(95% CI {100 * test.ci_low:+.2f} .. {100 * test.ci_high:+.2f}), p = {test.p_value:.4f}")
        summary.update(delta=test.delta, p_value=test.p_value,
                       train_time_ratio=results["context"]["train_s"] / results["sentence"]["train_s"])
    print_result(summary, digits=4)


def main():
    parser = BenchParser(__doc__)
    ner.add_data_options(parser, n_dev=0)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.lr(5e-5)
    parser.add_argument("--warmup", type=float, default=0.1, help="warmup fraction of the steps")
    parser.add_argument("--n-samples", type=int, default=1000, help="bootstrap samples")
    parser.seed()
    parser.add_argument("--systems", default="ours,ours_crf,hf,spacy_trf")
    add_precision_option(parser)
    parser.add_argument(
        "--repeats", type=int, default=1, help="train every system this many times, in turn; train_s is the median"
    )
    parser.threads()
    parser.quick("tiny budget: 300 train / 300 dev sentences")
    parser.add_argument("--context-pieces", type=int, default=64, help="with --context: pieces of context a side")
    parser.add_argument(
        "--predictions", default=None,
        help="with --context: a folder; each system's dev predictions are saved there as SYSTEM.json, and every "
             "system saved there with the same budget is joined into the comparison (runs split over sessions)",
    )
    parser.add_argument(
        "--context", action="store_true",
        help="document context instead: systems sentence,context[,document] (mlm_ner + CRF on sentences alone, on "
             "the same sentences each read in its document, on whole documents; whole documents sampled for "
             "--n-train / --n-dev sentences)",
    )
    args = parser.parse_args()
    if args.quick:
        args.n_train, args.n_dev, args.n_samples = 300, 300, 200
    model_path = args.model
    if args.context:
        if args.precision != parser.get_default("precision"):
            parser.error("--precision is for the four systems; --context trains at configs/ner.cfg's precision")
        if args.systems == parser.get_default("systems"):
            args.systems = "sentence,context"
        return run_context(args, model_path)
    systems = args.systems.split(",")

    import spacy
    from spacy.util import fix_random_seed

    vocab = spacy.blank("en").vocab
    train_docs = ner.load_sentences(args.train, vocab, args.n_train, args.seed)
    dev_docs = ner.load_sentences(args.dev, vocab, args.n_dev, args.seed)
    gold = [doc_entities(d) for d in dev_docs]
    n_dev_words = sum(len(d) for d in dev_docs)
    order = ner.batches(len(train_docs), args.batch_size, args.epochs, args.seed)
    types = sorted({e[2] for d in train_docs for e in doc_entities(d)})
    print(
        f"budget: {len(train_docs)} train sentences (seeded subsample of {args.train}), {args.epochs} epoch(s), "
        f"batch {args.batch_size}, {len(order)} steps, peak lr {args.lr}, warmup {args.warmup:.0%}, linear decay; "
        f"dev: {len(dev_docs)} sentences / {n_dev_words} words; torch threads {torch.get_num_threads()}",
        flush=True,
    )
    runs = precision_runs(systems, args.precision, OURS)
    results = {}
    train_runs = {run: [] for run, _, _ in runs}
    # repeats run the systems in turn (ours, peers, ours, peers, ...), so that a
    # change in machine load between runs falls on every system alike
    for repeat in range(args.repeats):
        for run, name, precision in runs:
            print(f"== {run}" + (f" (repeat {repeat + 1}/{args.repeats})" if args.repeats > 1 else ""), flush=True)
            fix_random_seed(args.seed)
            if name in ("ours", "ours_crf", "spacy_trf"):
                if name == "spacy_trf":
                    nlp = build_spacy_trf(model_path)
                else:
                    nlp = ner.build_ours(model_path, name == "ours_crf", precision=precision)
                train_s = ner.train_spacy(nlp, ner.gold_examples(nlp, train_docs), order, args.lr, args.warmup)
                preds, infer_s = ner.predict_spacy(nlp, dev_docs)
            elif name == "hf":
                preds, train_s, infer_s = run_hf(model_path, train_docs, dev_docs, order, args,
                                                 make_tag_labels(types, "BIO"), precision)
            else:
                raise SystemExit(f"unknown system {name!r}")
            train_runs[run].append(train_s)
            print(f"   {run}: train {train_s:.0f}s", flush=True)
            if repeat:
                continue
            scores = score_entities(gold, preds)
            results[run] = {
                "f1": scores["ents_f"],
                "p": scores["ents_p"],
                "r": scores["ents_r"],
                "wps": n_dev_words / infer_s,
                "counts": per_doc_counts(gold, preds),
                "per_type": {k: round(v["f"], 4) for k, v in scores["ents_per_type"].items()},
            }
            r = results[run]
            print(
                f"   {run}: dev P {100 * r['p']:.2f} R {100 * r['r']:.2f} F1 {100 * r['f1']:.2f} | "
                f"inference {r['wps']:.0f} words/s | per type {r['per_type']}",
                flush=True,
            )
    for run, r in results.items():
        r["train_s"] = float(numpy.median(train_runs[run]))
        r["train_s_runs"] = [round(t, 1) for t in train_runs[run]]

    print(f"\n{'run':<15} {'dev F1':>7} {'train s':>8} {'words/s':>8}")
    for run, r in results.items():
        print(f"{run:<15} {100 * r['f1']:7.2f} {r['train_s']:8.0f} {r['wps']:8.0f}")
    summary = {}
    for key in ("f1", "wps", "train_s"):
        summary.update({f"{run}_{key}": r[key] for run, r in results.items()})
    summary.update(train_speedups({run: r["train_s"] for run, r in results.items()}, OURS))
    summary.update(
        train_s_runs={run: r["train_s_runs"] for run, r in results.items()},
        n_train=len(train_docs),
        n_dev=len(dev_docs),
        p_value=None,
    )
    ours = [run for run, name, _ in runs if name in OURS]
    peers = [run for run, name, _ in runs if name not in OURS]
    if ours and peers:
        best_ours = max(ours, key=lambda n: results[n]["f1"])
        best_peer = max(peers, key=lambda n: results[n]["f1"])
        test = paired_bootstrap(
            results[best_ours]["counts"], results[best_peer]["counts"], n_samples=args.n_samples, seed=args.seed
        )
        print(
            f"paired bootstrap {best_ours} vs {best_peer}: delta F1 {100 * test.delta:+.2f} "
            f"(95% CI {100 * test.ci_low:+.2f} .. {100 * test.ci_high:+.2f}), p = {test.p_value:.4f}"
        )
        summary.update(p_value=test.p_value, compared=f"{best_ours} vs {best_peer}", delta_f1=test.delta)
    print_result(summary, digits=4)


if __name__ == "__main__":
    main()
