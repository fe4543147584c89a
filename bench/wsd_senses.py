"""Sense inventory demo: nearest-centroid word-sense assignment with contextual
vectors, trained on the SemCor subset, evaluated on the unified WSD test sets
(ALL = Senseval-2/3, SemEval-2007/13/15).

Ours: `mlm_encoder` -> `mlm_vectors` (top layer, mean of pieces) with a raw and
a fitted (all-but-the-top) transform; the component's sense inventory gets one
centroid per (lemma, sense key) from the SemCor instances, and
`token._.sense` is read on the test sentences. Peer: the same centroid method
on spacy-transformers' token vectors (mean of a token's pieces in
`doc._.trf_data`), same model. Baseline: the most frequent training sense.
Only test instances whose lemma has SemCor senses are scored (coverage is
printed); a prediction is right when it is one of the gold keys.

    python bench/wsd_senses.py [--quick] [--model DIR]

Last line: one JSON object with the figures.
"""
import sys
import time
from collections import Counter, defaultdict

import numpy

from harness import peers
from harness.common import BenchParser, print_result
from spacy_mlm import (
    SenseInventory, docs_before, make_transform_chain, make_vectors_pipeline, read_wsd_corpus, sentence_doc,
)


def covered(sentences, train_lemmas):
    return [(s_i, inst) for s_i, s in enumerate(sentences) for inst in s.instances if inst.lemma in train_lemmas]


def accuracy(predictions, gold, items):
    return float(numpy.mean([predictions[inst.id] in gold[inst.id] for _, inst in items]))


def ours(nlp, train, train_docs, train_keys, test, test_docs, steps, n_components):
    """Predictions through the component on encoded docs: fit its transform,
    build its sense inventory, tag the test docs."""
    component = nlp.get_pipe("mlm_vectors")
    component.transform = make_transform_chain(steps, n_components=n_components)
    component.senses = SenseInventory()
    component.fit_transform(train_docs, max_vectors=100_000)
    for doc in train_docs:
        component(doc)
    component.add_sense_examples(
        (doc[inst.index], train_keys[inst.id][0]) for doc, s in zip(train_docs, train) for inst in s.instances
    )
    predictions = {}
    for doc, s in zip(test_docs, test):
        component(doc)
        for inst in s.instances:
            predictions[inst.id] = doc[inst.index]._.sense
    return predictions, component.transform.describe()


def peer(model_path, train, train_keys, test, batch_size):
    nlp = peers.spacy_trf(model_path, initialize=True)

    def token_vectors(sentences):
        for doc, s in zip(nlp.pipe((sentence_doc(nlp.vocab, s) for s in sentences), batch_size=batch_size), sentences):
            yield s, peers.trf_token_vectors(doc)

    inventory = SenseInventory()
    for s, vecs in token_vectors(train):
        for inst in s.instances:
            if inst.index in vecs:
                inventory.add(inst.lemma, train_keys[inst.id][0], vecs[inst.index])
    predictions = {}
    for s, vecs in token_vectors(test):
        for inst in s.instances:
            got = inventory.assign(inst.lemma, vecs[inst.index]) if inst.index in vecs else None
            predictions[inst.id] = got.sense if got else None
    return predictions


def main(argv=None):
    parser = BenchParser(__doc__.split("\n\n")[0])
    parser.model()
    parser.data_file("--train", "wsd/semcor_subset/semcor_brown1_subset")
    parser.data_file("--test", "wsd/wsd_eval_framework/ALL/ALL")
    parser.add_argument("--train-limit", type=int, default=0, help="first N training sentences (0 = all)")
    parser.add_argument("--test-limit", type=int, default=0)
    parser.add_argument("--n-components", type=int, default=2, help="abtt components for the transformed run")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.threads()
    parser.quick("400 training / 150 test sentences")
    args = parser.parse_args(argv)
    if args.quick:
        args.train_limit, args.test_limit = 400, 150
    start = time.time()
    train, train_keys = read_wsd_corpus(args.train)
    test, test_keys = read_wsd_corpus(args.test)
    train = train[: args.train_limit] if args.train_limit else train
    test = test[: args.test_limit] if args.test_limit else test
    sense_counts = defaultdict(Counter)
    for s in train:
        for inst in s.instances:
            sense_counts[inst.lemma][train_keys[inst.id][0]] += 1
    items = covered(test, sense_counts)
    n_test = sum(len(s.instances) for s in test)
    print(f"train {len(train)} sentences / {len(train_keys)} keys; test {len(test)} sentences, "
          f"{len(items)} of {n_test} instances have a lemma seen in training", flush=True)

    mfs = {inst.id: sense_counts[inst.lemma].most_common(1)[0][0] for _, inst in items}
    results = {"mfs": accuracy(mfs, test_keys, items)}
    nlp = make_vectors_pipeline(args.model)
    train_docs, test_docs = (
        list(docs_before(nlp, "mlm_vectors", (sentence_doc(nlp.vocab, s) for s in part), args.batch_size))
        for part in (train, test)
    )
    print(f"ours: encoded ({time.time() - start:.0f}s)", flush=True)
    for steps in ([], ["abtt"]):
        predictions, name = ours(nlp, train, train_docs, train_keys, test, test_docs, steps, args.n_components)
        key = "ours_" + ("+".join(steps) or "raw")
        results[key] = accuracy(predictions, test_keys, items)
        print(f"ours {name}: {results[key]:.4f} ({time.time() - start:.0f}s)", flush=True)
    results["spacy_trf"] = accuracy(peer(args.model, train, train_keys, test, args.batch_size), test_keys, items)
    print(f"spacy-transformers raw: {results['spacy_trf']:.4f}; most frequent sense: {results['mfs']:.4f}")
    figures = {k: round(v, 4) for k, v in results.items()}
    figures.update(covered_instances=len(items), test_instances=n_test, train_sentences=len(train),
                   quick=bool(args.quick), threads=args.threads, seconds=round(time.time() - start))
    print_result(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
