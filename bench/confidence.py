"""Entity probabilities a user can act on (issue 50): how well each system's
score of an entity says whether the entity is right, on CoNLL-2003 dev with
one MiniLM encoder and one budget.

  ours, ours_crf     mlm_ner (softmax, CRF; configs/ner.cfg): the exact span
                     marginal of each entity, at temperature 1 and after
                     `calibrate` (the temperature, then Platt's score scaling;
                     ours_cal, ours_crf_cal: fitted on held-out training
                     sentences, never on dev; ours_devcal, ours_crf_devcal:
                     fitted on dev, as `spacy train` does, cross-fitted: the
                     entities of one half of dev (even or odd positions) scored
                     with the fit on the other half, so no score comes from a
                     fit on its own sentence; ours_devcal_t, ours_crf_devcal_t:
                     the same with the temperature alone);
  hf_first, hf_average, hf_max
                     Hugging Face's token-classification pipeline over a model
                     fine-tuned by the run_ner recipe (bench/ner_conll.py's),
                     with aggregation_strategy first / average / max: an
                     entity's score is the mean of its words' scores;
  spancat            spaCy's spancat listening to our mlm_encoder (n-grams of
                     1-6 tokens, threshold 0.5): each span's own score.

Same training sentences (a seeded subsample of train), batch order, epochs,
peak learning rate and schedule for every trained system. For every system's
predicted entities on dev: the expected calibration error (15 bins) of "the
entity is right" (exact span and type) against its score, the area under the
precision-coverage curve (the entities kept in order of their score), the
precision at the score threshold that keeps 80% of them, and entity F1.

The systems do not predict as many entities (spancat keeps only spans scored
0.5 or more), and the area of a smaller, surer set is higher by construction;
so also `area_matched`, each system's area over its N best-scored entities,
N the fewest any system of the seed predicted, and every figure again for the
entities scored 0.5 or more (`NAME_t50`: what mlm_ner's `threshold = 0.5`
keeps, spancat's own threshold).

    python bench/confidence.py --quick        # a smoke test: a few minutes on 2 cores
    python bench/confidence.py                # 2000 sentences x 2 epochs, 3 seeds, whole dev set
    python bench/confidence.py --redraw --out OUT   # the diagrams again from OUT's saved scores

Writes the reliability diagrams (all seeds pooled) side by side to
OUT/reliability.png. Last line: one JSON object, each figure's mean and
standard deviation over the seeds per system.
"""
from pathlib import Path

import numpy
import torch

from harness import ner, peers
from harness.common import BenchParser, Stopwatch, mean_and_sd, print_result, seed_everything
from ner_conll import hf_encode
from spacy_mlm import (
    calibrate_entities, doc_entities, expected_calibration_error, make_tag_labels, precision_at_coverage,
    precision_coverage_area, reliability_bins, reliability_chart, score_entities, spans_to_tags,
)

SYSTEMS = ("ours", "ours_crf", "hf", "spancat")
HF_AGGREGATIONS = ("first", "average", "max")
SPANCAT_SIZES = [1, 2, 3, 4, 5, 6]


def top_area(scores, correct, n):
    """The precision-coverage area over the n best-scored entities."""
    order = numpy.argsort(-scores, kind="stable")[:n]
    return precision_coverage_area(scores[order], correct[order])


def scored_figures(predicted, gold):
    """ECE, precision-coverage area, precision at 80% coverage and F1 of
    per-document lists of (start, end, label, score) against the gold entities."""
    scores, correct = [], []
    for entities, wanted in zip(predicted, gold):
        wanted = set(wanted)
        for s, e, label, score in entities:
            scores.append(score)
            correct.append((s, e, label) in wanted)
    f1 = score_entities(gold, [[tuple(x[:3]) for x in entities] for entities in predicted])["ents_f"]
    figures = {"ece": expected_calibration_error(scores, correct), "area": precision_coverage_area(scores, correct),
               "precision_at_80": precision_at_coverage(scores, correct, 0.8), "f1": f1, "n_entities": len(scores)}
    return figures, (numpy.array(scores, dtype=float), numpy.array(correct, dtype=bool))


# -- ours -----------------------------------------------------------------------------


def ours_entities(nlp, dev_docs):
    """Each dev Doc's entities with their probabilities (doc.spans["mlm_ner"])."""
    inputs = [ner.fresh(nlp, d) for d in dev_docs]
    out = []
    for doc in nlp.pipe(inputs, batch_size=64):
        group = doc.spans["mlm_ner"]
        out.append([(s.start, s.end, s.label_, float(p)) for s, p in zip(group, group.attrs["scores"])])
    return out


def run_ours(args, crf, train_docs, calibration_docs, dev_docs, order):
    from spacy.util import fix_random_seed

    fix_random_seed(args.seed)
    nlp = ner.build_ours(args.model, crf)
    train_s = ner.train_spacy(nlp, ner.gold_examples(nlp, train_docs), order, args.lr, args.warmup)
    before = ours_entities(nlp, dev_docs)
    dev_calibrated, dev_fits = cross_fitted(nlp, dev_docs, with_scaling=True)
    dev_temperature_only, _ = cross_fitted(nlp, dev_docs, with_scaling=False)
    gold_calibration = [ner.fresh(nlp, d, with_ents=True) for d in calibration_docs]
    report = calibrate_entities(nlp, gold_calibration)["ner"]
    print(f"    calibrated on {len(calibration_docs)} held-out train sentences: temperature "
          f"{report['temperature']:.3f}, score scaling {report['score_scaling']}, NLL {report['nll_before']:.4f} -> "
          f"{report['nll_after']:.4f}; on the dev halves: {dev_fits}", flush=True)
    fits = {"held_out_train": [report["temperature"], report["score_scaling"]], "dev_halves": dev_fits}
    return ({"": before, "_cal": ours_entities(nlp, dev_docs), "_devcal": dev_calibrated,
             "_devcal_t": dev_temperature_only}, train_s, fits)


def cross_fitted(nlp, dev_docs, with_scaling):
    """Each dev Doc's entities scored with the calibration fitted on the other
    half of dev (two folds: even and odd positions), and the two fits
    ([temperature, score scaling]); the component is left as it was."""
    cfg = nlp.get_pipe("ner").cfg
    start, fits, out = (cfg["temperature"], cfg["score_scaling"]), [], [None] * len(dev_docs)
    for fold in (0, 1):
        cfg["temperature"], cfg["score_scaling"] = start
        fit = [ner.fresh(nlp, d, with_ents=True) for i, d in enumerate(dev_docs) if i % 2 != fold]
        report = calibrate_entities(nlp, fit, with_scaling=with_scaling)["ner"]
        fits.append([round(report["temperature"], 4), [round(x, 4) for x in report["score_scaling"]]])
        held = list(range(fold, len(dev_docs), 2))
        for i, entities in zip(held, ours_entities(nlp, [dev_docs[i] for i in held])):
            out[i] = entities
    cfg["temperature"], cfg["score_scaling"] = start
    return out, fits


# -- Hugging Face's pipeline ----------------------------------------------------------


def hf_entities(pipe, dev_docs, aggregation):
    """Each dev Doc's entities from Hugging Face's token-classification pipeline
    (`aggregation_strategy`), mapped from characters back to words."""
    texts, word_at, word_after = [], [], []
    for doc in dev_docs:
        words = [t.text for t in doc]
        starts = numpy.cumsum([0] + [len(w) + 1 for w in words[:-1]]).tolist()
        texts.append(" ".join(words))
        word_at.append({start: i for i, start in enumerate(starts)})
        word_after.append({start + len(w): i + 1 for i, (start, w) in enumerate(zip(starts, words))})
    out = []
    found = pipe(texts, batch_size=64, aggregation_strategy=aggregation)
    for at, after, ents in zip(word_at, word_after, found):
        # an entity that cuts a word is no word span: left out (and so counted as missed)
        spans = [(at.get(ent["start"]), after.get(ent["end"]), ent["entity_group"], float(ent["score"])) for ent in ents]
        out.append([span for span in spans if span[0] is not None and span[1] is not None and span[1] > span[0]])
    return out


def run_hf(args, train_docs, dev_docs, order, labels):
    from transformers import AutoModelForTokenClassification, AutoTokenizer, pipeline

    seed_everything(args.seed)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForTokenClassification.from_pretrained(
        args.model, num_labels=len(labels), id2label=dict(enumerate(labels)), label2id={t: i for i, t in enumerate(labels)})
    index = {t: i for i, t in enumerate(labels)}
    words = [[t.text for t in d] for d in train_docs]
    tags = [spans_to_tags(len(d), doc_entities(d), "BIO") for d in train_docs]
    batches = (hf_encode(tokenizer, [words[i] for i in idx], [tags[i] for i in idx], index) for idx in order)
    train_s = peers.hf_finetune(model, batches, len(order), args.lr, int(args.warmup * len(order)), log_every=100)
    model.eval()
    pipe = pipeline("token-classification", model=model, tokenizer=tokenizer, device=-1)
    return {f"_{a}": hf_entities(pipe, dev_docs, a) for a in HF_AGGREGATIONS}, train_s


# -- spaCy's spancat on our encoder ---------------------------------------------------


def run_spancat(args, train_docs, dev_docs, order):
    from spacy.tokens import Span
    from spacy.training import Example
    from spacy.util import fix_random_seed

    fix_random_seed(args.seed)
    nlp = ner.build_ours(args.model, False)
    nlp.remove_pipe("ner")
    nlp.add_pipe("spancat", config={
        "spans_key": "sc", "threshold": 0.5, "max_positive": 1,
        "suggester": {"@misc": "spacy.ngram_suggester.v1", "sizes": SPANCAT_SIZES},
        "model": {"@architectures": "spacy.SpanCategorizer.v1",
                  "reducer": {"@layers": "spacy.mean_max_reducer.v1", "hidden_size": 128},
                  "scorer": {"@layers": "spacy.LinearLogistic.v1", "nO": None, "nI": None},
                  "tok2vec": {"@architectures": "spacy_mlm.EncoderListener.v1", "pooling": "first"}},
    })
    examples = []
    for d in train_docs:
        reference = ner.fresh(nlp, d, with_ents=True)
        reference.spans["sc"] = [Span(reference, e.start, e.end, e.label_) for e in reference.ents]
        examples.append(Example(ner.fresh(nlp, d), reference))
    train_s = ner.train_spacy(nlp, examples, order, args.lr, args.warmup)
    out = []
    for doc in nlp.pipe([ner.fresh(nlp, d) for d in dev_docs], batch_size=64):
        group = doc.spans["sc"]
        scores = numpy.asarray(group.attrs["scores"]).reshape(len(group), -1).max(axis=1) if len(group) else []
        out.append([(s.start, s.end, s.label_, float(p)) for s, p in zip(group, scores)])
    return {"": out}, train_s


def draw(pooled, out: Path, n_seeds: int) -> None:
    reliability_chart({name: reliability_bins(*data) for name, data in pooled.items()}, out / "reliability.png",
                      f"entity scores on CoNLL-2003 dev ({n_seeds} seed(s) pooled)")
    print(f"wrote {out / 'reliability.png'}", flush=True)


def redraw(out: Path) -> None:
    files = sorted(out.glob("entity_scores_seed*.npz"))
    if not files:
        raise SystemExit(f"{out} holds no entity_scores_seed*.npz: run the bench first")
    pooled = {}
    for file in files:
        with numpy.load(file) as saved:
            for key in saved.files:
                name, part = key.rsplit("/", 1)
                if not name.endswith("_t50"):
                    pooled.setdefault(name, {}).setdefault(part, []).append(saved[key])
    draw({name: (numpy.concatenate(parts["scores"]), numpy.concatenate(parts["correct"]))
          for name, parts in pooled.items()}, out, len(files))


def main():
    parser = BenchParser(__doc__)
    ner.add_data_options(parser, n_dev=0)
    parser.set_defaults(n_train=2000)
    parser.add_argument("--n-calibration", type=int, default=1000,
                        help="held-out training sentences (not in --n-train) the temperature is fitted on")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.lr(1e-4)
    parser.add_argument("--warmup", type=float, default=0.1, help="warmup fraction of the steps")
    parser.seeds(default=[0, 1, 2])
    parser.systems(SYSTEMS)
    parser.threads()
    parser.quick("300 train / 200 calibration / 300 dev sentences, one seed")
    parser.output("confidence", "confidence_quick", help="where reliability.png goes")
    parser.add_argument("--redraw", action="store_true", help="only draw OUT/reliability.png again from the "
                        "entity scores an earlier run saved in OUT (entity_scores_seed*.npz)")
    args = parser.parse_args()
    if args.redraw:
        redraw(args.out)
        return
    if args.quick:
        args.n_train, args.n_calibration, args.n_dev, args.seed_list = 300, 200, 300, args.seed_list[:1]

    import spacy

    args.out.mkdir(parents=True, exist_ok=True)
    vocab = spacy.blank("en").vocab
    runs, pooled, fits = {}, {}, {}
    for seed in args.seed_list:
        args.seed = seed
        sample = ner.load_sentences(args.train, vocab, args.n_train + args.n_calibration, seed)
        train_docs, calibration_docs = sample[: args.n_train], sample[args.n_train :]
        dev_docs = ner.load_sentences(args.dev, vocab, args.n_dev, seed)
        gold = [doc_entities(d) for d in dev_docs]
        order = ner.batches(len(train_docs), args.batch_size, args.epochs, seed)
        labels = make_tag_labels(sorted({e[2] for d in train_docs for e in doc_entities(d)}), "BIO")
        print(f"== seed {seed}: {len(train_docs)} train sentences, {args.epochs} epoch(s), {len(order)} steps of "
              f"{args.batch_size}, peak lr {args.lr}; {len(calibration_docs)} calibration sentences; "
              f"{len(dev_docs)} dev sentences; torch threads {torch.get_num_threads()}", flush=True)
        seed_scores = {}
        for system in args.systems:
            print(f"-- {system}", flush=True)
            with Stopwatch() as clock:
                if system in ("ours", "ours_crf"):
                    predicted, train_s, fits[f"{system}_{seed}"] = run_ours(
                        args, system == "ours_crf", train_docs, calibration_docs, dev_docs, order)
                elif system == "hf":
                    predicted, train_s = run_hf(args, train_docs, dev_docs, order, labels)
                else:
                    predicted, train_s = run_spancat(args, train_docs, dev_docs, order)
            for suffix, entities in predicted.items():
                sure = [[x for x in doc_entities_ if x[3] >= 0.5] for doc_entities_ in entities]
                for name, kept in ((system + suffix, entities), (f"{system}{suffix}_t50", sure)):
                    figures, (scores, correct) = scored_figures(kept, gold)
                    runs.setdefault(name, []).append({**figures, "train_s": train_s})
                    seed_scores[name] = (scores, correct)
                    if not name.endswith("_t50"):
                        previous = pooled.get(name, (numpy.zeros(0), numpy.zeros(0, dtype=bool)))
                        pooled[name] = (numpy.concatenate([previous[0], scores]),
                                        numpy.concatenate([previous[1], correct]))
                    print(f"   {name}: ECE {figures['ece']:.4f}, area {figures['area']:.4f}, precision at 80% "
                          f"{figures['precision_at_80']:.4f}, F1 {100 * figures['f1']:.2f} ({figures['n_entities']} "
                          f"entities; {clock.seconds:.0f}s)", flush=True)
        fewest = min(len(scores) for name, (scores, _) in seed_scores.items() if not name.endswith("_t50"))
        for name, (scores, correct) in seed_scores.items():
            runs[name][-1]["area_matched"] = top_area(scores, correct, fewest)
        print(f"   area over the {fewest} best-scored entities of each: " + ", ".join(
            f"{name} {runs[name][-1]['area_matched']:.4f}" for name in seed_scores if not name.endswith("_t50")),
            flush=True)
        numpy.savez(args.out / f"entity_scores_seed{seed}.npz",
                    **{f"{name}/{part}": value for name, pair in seed_scores.items()
                       for part, value in zip(("scores", "correct"), pair)})
    draw(pooled, args.out, len(args.seed_list))
    summary = {"budget": {"n_train": args.n_train, "n_calibration": args.n_calibration, "n_dev": args.n_dev,
                          "epochs": args.epochs, "batch_size": args.batch_size, "lr": args.lr,
                          "seeds": args.seed_list, "model": Path(args.model).name},
               "calibration_fits": fits}
    for name, per_seed in runs.items():
        summary[name] = {key: dict(zip(("mean", "sd"), mean_and_sd([r[key] for r in per_seed])))
                         for key in ("ece", "area", "area_matched", "precision_at_80", "f1", "n_entities", "train_s")}
    print_result(summary)


if __name__ == "__main__":
    main()
