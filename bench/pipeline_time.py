"""Where an ONNX pipeline's prediction time goes: inside ONNX Runtime's graph,
and everything else `nlp.pipe` does around it (subword tokenization, alignment,
unpacking the passes, the listener's pooling, the tagger head, CRF decoding and
the entities' probabilities, setting the annotations), per word of CoNLL-2003 dev.

Pipelines: each of --pipelines (written by `python -m spacy_mlm optimize`); by
default one made here: configs/ner.cfg with the CRF on MiniLM (--model), trained
on --n-train seeded CoNLL train sentences for one epoch, then through
`optimize --precision int8`.
Inputs: the dev sentences (--dev, --n-dev of them) as pre-split Docs, `nlp.pipe`
in batches of 64, --threads threads. Graph time: the wall time inside ONNX
Runtime's `InferenceSession.run`; the rest: the pass's wall time less that. The
best of --repeats passes counts (each figure its own best).

Run it once per code tree to compare code (the pipelines are data):

    PYTHONPATH=TREE .venv/bin/python bench/pipeline_time.py --pipelines DIR,DIR [--quick]

Last line: one JSON object: per pipeline its words/s, graph and rest in
microseconds per word, the rest's share, and the entities found.
"""
import subprocess
import sys
import time
from pathlib import Path

import onnxruntime
import spacy
import torch

from harness import ner
from harness.common import BenchParser, print_result, seed_everything


class GraphClock:
    """Seconds spent inside ONNX Runtime's `InferenceSession.run` while installed."""

    def __init__(self):
        self.seconds = 0.0
        self._run = onnxruntime.InferenceSession.run

    def __enter__(self):
        clock, run = self, self._run

        def timed(session, *args, **kwargs):
            started = time.perf_counter()
            try:
                return run(session, *args, **kwargs)
            finally:
                clock.seconds += time.perf_counter() - started

        onnxruntime.InferenceSession.run = timed
        return self

    def __exit__(self, *exc):
        onnxruntime.InferenceSession.run = self._run


def made_pipeline(args) -> Path:
    """configs/ner.cfg with the CRF on --model, trained briefly, then to int8."""
    seed_everything(args.seed)
    nlp = ner.build_ours(args.model, crf=True, precision="fp32")
    sentences = ner.load_sentences(args.train, nlp.vocab, args.n_train, args.seed)
    order = ner.batches(len(sentences), 16, 1, args.seed)
    ner.train_spacy(nlp, ner.gold_examples(nlp, sentences), order, 1e-4, 0.1)
    nlp.to_disk(args.out / "trained")
    target = args.out / "trained_int8"
    subprocess.run([sys.executable, "-m", "spacy_mlm", "optimize", str(args.out / "trained"), str(target),
                    "--precision", "int8", "--force"], check=True)
    return target


def measure(nlp, dev_docs, repeats: int):
    """(best seconds of a pass, best graph seconds, best rest seconds, entities found)."""
    best = {"total": float("inf"), "graph": float("inf"), "rest": float("inf")}
    n_ents = 0
    for _ in range(repeats):
        inputs = [ner.fresh(nlp, d) for d in dev_docs]
        with GraphClock() as clock:
            started = time.perf_counter()
            docs = list(nlp.pipe(inputs, batch_size=64))
            total = time.perf_counter() - started
        n_ents = sum(len(doc.ents) for doc in docs)
        for key, value in (("total", total), ("graph", clock.seconds), ("rest", total - clock.seconds)):
            best[key] = min(best[key], value)
    return best, n_ents


def main():
    parser = BenchParser(__doc__)
    ner.add_data_options(parser, n_dev=0)
    parser.add_argument("--pipelines", default=None, help="comma-separated pipelines made by `spacy_mlm optimize` "
                                                          "(default: a MiniLM CRF tagger made here, int8)")
    parser.add_argument("--repeats", type=int, default=3, help="passes per pipeline (the best counts)")
    parser.seed()
    parser.threads()
    parser.output("bench_pipeline_time", "bench_pipeline_time_quick")
    parser.quick("300 dev sentences, 2 passes; the made pipeline trains on 100 sentences")
    parser.set_defaults(n_train=400)
    args = parser.parse_args()
    if args.quick:
        args.n_dev, args.repeats, args.n_train = 300, 2, 100
    args.out.mkdir(parents=True, exist_ok=True)
    pipelines = [Path(p) for p in args.pipelines.split(",")] if args.pipelines else [made_pipeline(args)]
    dev_docs = ner.load_sentences(args.dev, spacy.blank("en").vocab, args.n_dev, 0)
    n_words = sum(len(doc) for doc in dev_docs)
    summary = {"n_dev": len(dev_docs), "words": n_words, "repeats": args.repeats, "threads": torch.get_num_threads()}
    for pipeline in pipelines:
        best, n_ents = measure(spacy.load(pipeline), dev_docs, args.repeats)
        key = pipeline.name
        graph_us, rest_us = (1e6 * best[part] / n_words for part in ("graph", "rest"))
        summary.update({f"{key}_wps": n_words / best["total"], f"{key}_graph_us_per_word": graph_us,
                        f"{key}_rest_us_per_word": rest_us, f"{key}_rest_share": best["rest"] / best["total"],
                        f"{key}_entities": n_ents})
        print(f"{key}: {n_words / best['total']:.0f} words/s; graph {graph_us:.1f} us/word, rest {rest_us:.1f} "
              f"us/word ({100 * best['rest'] / best['total']:.0f}%); {n_ents} entities", flush=True)
    print_result(summary, digits=4)


if __name__ == "__main__":
    main()
