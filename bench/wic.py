"""WiC dev accuracy from contextual vectors: raw cosine vs fitted transformations,
for every layer setting, target-only or mixed with the sentence vector, one
threshold or one per part of speech, against spacy-transformers' token vectors,
in one run.

Ours: `mlm_encoder` (all hidden states kept) -> per hidden state, the target's
vector (mean of its pieces, as `mlm_vectors` computes it) and the sentence's
vector (mean of its tokens, = `doc.vector`), cached once. Every setting is then
scored from the cache:

- layer setting: the mean of hidden states lo..hi, 1 <= lo <= hi <= top
  (`mlm_vectors` layer = hi, n_layers = hi - lo + 1);
- transformation, fitted on the token vectors of the fit corpus (default: the
  WiC train sentences) at that layer setting ("remove_static" also reads the
  embedding layer's vector of each token, hidden state 0);
- context weight w: the target's vector is (1 - w) * target + w * sentence
  (`spacy_mlm wic --context-weight`); w = 1 (the target ignored: plain
  sentence similarity) is reported as a diagnostic and is not selectable;
- threshold on the cosine tuned on WiC train: one, or one per PoS.

Selection rule: the "best" setting is the transformed one (steps not empty)
with the highest WiC *train* accuracy (first in grid order on ties); dev is
only reported. The same rule restricted to w = 0 gives "best_target_only".
The best setting is re-run end to end through the real `mlm_vectors`
component (span.vector / doc.vector hooks) on dev to check the cached path.

Peer: spaCy's `transformer` component (spacy-transformers) on the same model,
top layer; a token's vector is the mean of its pieces' rows in
`doc._.trf_data`, a target's vector the mean over its tokens, the sentence's
the mean over its tokens; raw cosine, threshold tuned on train. Reported with
w = 0 and global threshold ("spacy_trf"), and at the context weight and
threshold mode of our best setting ("spacy_trf_at_best_setting").

    python bench/wic.py [--quick] [--model DIR] [--data ../shared/data/wic] [--fit-corpus FILE]

Last line: one JSON object with the figures.
"""
import csv
import sys
import time
from pathlib import Path

import numpy

from harness import peers
from harness.common import BenchParser, print_result
from harness.wic_vectors import (
    CONTEXT_WEIGHTS, evaluate, layer_choices, our_vectors, per_layer_token_vectors, pool_layers,
)
from spacy_mlm import (
    cosine_rows, docs_before, labels_of, make_transform_chain, make_vectors_pipeline, mix_context, pos_of, read_corpus,
    read_wic_split, target_span, wic_scores,
)

# (name, steps, n_components for abtt)
TRANSFORMS = [
    ("raw", [], 2),
    ("center", ["center"], 2),
    ("standardize", ["standardize"], 2),
    ("abtt1", ["abtt"], 1),
    ("abtt2", ["abtt"], 2),
    ("abtt3", ["abtt"], 3),
    ("standardize+abtt2", ["standardize", "abtt"], 2),
    ("whiten", ["whiten"], 2),
    ("abtt1+whiten", ["abtt", "whiten"], 1),
    ("abtt3+whiten", ["abtt", "whiten"], 3),
    ("remove_static", ["remove_static"], 2),
    ("remove_static+standardize", ["remove_static", "standardize"], 2),
    ("remove_static+abtt2", ["remove_static", "abtt"], 2),
    ("remove_static+standardize+abtt2", ["remove_static", "standardize", "abtt"], 2),
    ("remove_static+whiten", ["remove_static", "whiten"], 2),
]
DIAGNOSTIC_WEIGHT = 1.0


def our_corpus_vectors(nlp, texts, batch_size, max_vectors):
    """(n_states, N, width) token vectors (tokens with pieces) of a fit corpus."""
    chunks, total = [], 0
    for doc in docs_before(nlp, "mlm_vectors", texts, batch_size):
        stack = per_layer_token_vectors(doc)
        chunks.append(stack[:, numpy.any(stack[-1] != 0, axis=1)])
        total += chunks[-1].shape[1]
        if total >= max_vectors:
            break
    return numpy.concatenate(chunks, axis=1)[:, :max_vectors]


def with_static(pooled: numpy.ndarray, states: numpy.ndarray, axis: int) -> numpy.ndarray:
    """[pooled | hidden state 0] side by side: the input of a chain starting with
    remove_static (what `mlm_vectors`' `transform_input` builds)."""
    return numpy.concatenate([pooled, numpy.take(states, 0, axis=axis)], axis=1)


def peer_vectors(model_path, examples, batch_size):
    """spacy-transformers top layer: (target1, target2, sentence1, sentence2), (n, width) each."""
    nlp = peers.spacy_trf(model_path, initialize=True)
    texts = [e.sentence1 for e in examples] + [e.sentence2 for e in examples]
    spans = [e.char_span1 for e in examples] + [e.char_span2 for e in examples]
    targets, sentences = [], []
    for doc, chars in zip(nlp.pipe(texts, batch_size=batch_size), spans):
        token_vecs = peers.trf_token_vectors(doc)
        span = target_span(doc, chars)
        targets.append(numpy.mean([token_vecs[i] for i in range(span.start, span.end) if i in token_vecs], axis=0))
        sentences.append(numpy.mean(list(token_vecs.values()), axis=0))
    n = len(examples)
    targets, sentences = numpy.asarray(targets), numpy.asarray(sentences)
    return targets[:n], targets[n:], sentences[:n], sentences[n:]


def main(argv=None):
    parser = BenchParser(__doc__.split("\n\n")[0])
    parser.model()
    parser.data_file("--data", "wic")
    parser.add_argument("--fit-corpus", default=None, help="text/JSONL corpus to fit transforms on (default: WiC train sentences)")
    parser.add_argument("--fit-vectors", type=int, default=60000, help="token vectors to fit transforms on")
    parser.add_argument("--train-limit", type=int, default=0, help="use only the first N train examples (0 = all)")
    parser.add_argument("--dev-limit", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--cache", default=None,
                        help="npz file: load the encoded vectors from it when it exists, else save them there "
                             "(it must come from the same model, data, limits and fit corpus)")
    parser.add_argument("--results", default=None, help="write every setting's train/dev accuracy to this TSV file")
    parser.threads()
    parser.quick("300 train / 200 dev examples, 3000 fit vectors")
    args = parser.parse_args(argv)
    if args.quick:
        args.train_limit, args.dev_limit, args.fit_vectors = 300, 200, 3000
    start = time.time()
    train = read_wic_split(args.data, "train")
    dev = read_wic_split(args.data, "dev")
    train = train[: args.train_limit] if args.train_limit else train
    dev = dev[: args.dev_limit] if args.dev_limit else dev
    y_train, y_dev = labels_of(train), labels_of(dev)
    pos_train, pos_dev = pos_of(train), pos_of(dev)
    print(f"WiC train {len(train)}, dev {len(dev)}; model {args.model}", flush=True)

    fit_name = args.fit_corpus or "wic train sentences"
    keys = ("T1_tr", "T2_tr", "S1_tr", "S2_tr", "T1_dev", "T2_dev", "S1_dev", "S2_dev")
    if args.cache and Path(args.cache).is_file():
        cached = numpy.load(args.cache)
        arrays = {k: cached[k] for k in keys}
        corpus = cached["corpus"]
    else:
        nlp = make_vectors_pipeline(args.model, all_layers=True)
        fit_rows = []
        tr = our_vectors(nlp, train, args.batch_size, None if args.fit_corpus else fit_rows, args.fit_vectors)
        dv = our_vectors(nlp, dev, args.batch_size)
        arrays = dict(zip(keys, tr + dv))
        if args.fit_corpus:
            fit_texts = (seg for document in read_corpus(args.fit_corpus) for seg in document)
            corpus = our_corpus_vectors(nlp, fit_texts, args.batch_size, args.fit_vectors)
        else:
            corpus = numpy.concatenate(fit_rows, axis=1)
        if args.cache:
            numpy.savez(args.cache, corpus=corpus, **arrays)
    ours_seconds = time.time() - start
    print(f"fit corpus: {corpus.shape[1]} token vectors from {fit_name}; encoded all sentences ({ours_seconds:.0f}s)", flush=True)

    results = []
    weights = CONTEXT_WEIGHTS + (DIAGNOSTIC_WEIGHT,)
    for lname, layer, n_layers in layer_choices(corpus.shape[0]):
        fit_X = pool_layers(corpus, layer, n_layers, axis=0)
        pooled = {k: pool_layers(v, layer, n_layers, axis=1) for k, v in arrays.items()}
        # remove_static reads the embedding layer's vector (hidden state 0) beside the chosen one.
        fit_X_static = with_static(fit_X, corpus, axis=0)
        pooled_static = {k: with_static(v, arrays[k], axis=1) for k, v in pooled.items()}
        for tname, steps, n_components in TRANSFORMS:
            chain = make_transform_chain(steps, n_components=n_components)
            inputs = pooled_static if chain.needs_static else pooled
            chain.fit(fit_X_static if chain.needs_static else fit_X)
            out = {k: chain.apply(v) for k, v in inputs.items()}
            train_vecs, dev_vecs = [out[k] for k in keys[:4]], [out[k] for k in keys[4:]]
            for weight in weights:
                for per_pos in (False, True):
                    res = evaluate(train_vecs, dev_vecs, weight, per_pos, y_train, y_dev, pos_train, pos_dev)
                    res.update(layer_name=lname, layer=layer, n_layers=n_layers, transform=tname, steps=steps,
                               n_components=n_components, context_weight=weight, per_pos=per_pos, chain=chain)
                    results.append(res)
        print(f"  {lname:>10}: {len(TRANSFORMS)} transforms x {len(weights)} context weights x 2 threshold modes "
              f"({time.time() - start:.0f}s)", flush=True)

    def pick(rows):
        """Highest train accuracy; the first in grid order on ties."""
        return max(rows, key=lambda r: r["train_acc"])

    def setting(r):
        pos = "per-PoS thresholds" if r["per_pos"] else "one threshold"
        return f"{r['layer_name']}, {r['transform']}, context weight {r['context_weight']}, {pos}"

    selectable = [r for r in results if r["context_weight"] != DIAGNOSTIC_WEIGHT]
    transformed = [r for r in selectable if r["steps"]]
    default = next(r for r in results if r["layer_name"] == "top" and r["transform"] == "raw"
                   and r["context_weight"] == 0.0 and not r["per_pos"])
    best = pick(transformed)
    raw_at_best = next(r for r in results if r["transform"] == "raw"
                       and all(r[k] == best[k] for k in ("layer_name", "context_weight", "per_pos")))
    best_raw = pick([r for r in selectable if not r["steps"]])
    best_target_only = pick([r for r in transformed if r["context_weight"] == 0.0])
    raw_target_only = pick([r for r in selectable if not r["steps"] and r["context_weight"] == 0.0])
    sentence_only = pick([r for r in results if r["context_weight"] == DIAGNOSTIC_WEIGHT])

    print("\nBest setting by train accuracy, per transformation and context weight (one threshold | per-PoS):")
    print(f"  {'transform':<18}" + "".join(f"  w={w:<21}" for w in weights))
    for tname, _, _ in TRANSFORMS:
        cells = []
        for weight in weights:
            picks = [pick([r for r in results if r["transform"] == tname and r["context_weight"] == weight
                           and r["per_pos"] == pp]) for pp in (False, True)]
            cells.append(" | ".join(f"{p['train_acc']:.3f}/{p['dev_acc']:.3f}" for p in picks))
        print(f"  {tname:<18}" + "".join(f"  {c:<23}" for c in cells))
    print("  (cells: train/dev accuracy of the layer setting with the best train accuracy; "
          f"w={DIAGNOSTIC_WEIGHT} ignores the target and is not selectable)")
    print(f"\nselection rule: among {len(transformed)} transformed settings (w < 1), the highest WiC train accuracy")
    print(f"selected: {setting(best)}: train {best['train_acc']:.4f}, dev {best['dev_acc']:.4f}")
    print(f"raw cosine at that setting: train {raw_at_best['train_acc']:.4f}, dev {raw_at_best['dev_acc']:.4f}")
    print(f"raw cosine, default setting (top layer, target only): dev {default['dev_acc']:.4f}")
    print(f"best target-only (w = 0) transformed: {setting(best_target_only)}: dev {best_target_only['dev_acc']:.4f}")
    print(f"diagnostic, sentence only (w = 1): {setting(sentence_only)}: dev {sentence_only['dev_acc']:.4f}")
    if args.results:
        with open(args.results, "w", newline="", encoding="utf8") as f:
            writer = csv.writer(f, delimiter="\t")
            writer.writerow(["layers", "transform", "context_weight", "per_pos", "train_acc", "dev_acc"])
            for r in results:
                writer.writerow([r["layer_name"], r["transform"], r["context_weight"], int(r["per_pos"]),
                                 f"{r['train_acc']:.4f}", f"{r['dev_acc']:.4f}"])

    # End-to-end check of the chosen setting through the real component on dev.
    check = make_vectors_pipeline(args.model, layer=best["layer"], n_layers=best["n_layers"], steps=best["steps"],
                                  n_components=best["n_components"])
    check.get_pipe("mlm_vectors").transform = best["chain"]
    component_dev = wic_scores(check, dev, args.batch_size, best["context_weight"])
    def chain_input(k):
        pooled = pool_layers(arrays[k], best["layer"], best["n_layers"], 1)
        return with_static(pooled, arrays[k], axis=1) if best["chain"].needs_static else pooled

    pooled_dev = [best["chain"].apply(chain_input(k)) for k in keys[4:]]
    cached_dev = cosine_rows(mix_context(pooled_dev[0], pooled_dev[2], best["context_weight"]),
                             mix_context(pooled_dev[1], pooled_dev[3], best["context_weight"]))
    max_diff = float(numpy.abs(component_dev - cached_dev).max())
    print(f"component check on dev: max |cos diff| {max_diff:.2e}", flush=True)

    peer_start = time.time()
    peer_train, peer_dev = peer_vectors(args.model, train, args.batch_size), peer_vectors(args.model, dev, args.batch_size)
    peer = evaluate(peer_train, peer_dev, 0.0, False, y_train, y_dev, pos_train, pos_dev)
    peer_best = evaluate(peer_train, peer_dev, best["context_weight"], best["per_pos"], y_train, y_dev, pos_train, pos_dev)
    peer_seconds = time.time() - peer_start
    print(f"spacy-transformers raw cosine (top layer, target only): train {peer['train_acc']:.4f} dev {peer['dev_acc']:.4f}; "
          f"at context weight {best['context_weight']}{' per-PoS' if best['per_pos'] else ''}: "
          f"train {peer_best['train_acc']:.4f} dev {peer_best['dev_acc']:.4f} ({peer_seconds:.0f}s)")

    figures = {
        "raw": round(default["dev_acc"], 4),
        "best": round(best["dev_acc"], 4),
        "best_transform": best["transform"],
        "best_layers": best["layer_name"],
        "best_context_weight": best["context_weight"],
        "best_per_pos_threshold": best["per_pos"],
        "best_train": round(best["train_acc"], 4),
        "raw_at_best_setting": round(raw_at_best["dev_acc"], 4),
        "best_raw_setting": round(best_raw["dev_acc"], 4),
        "best_target_only": round(best_target_only["dev_acc"], 4),
        "best_target_only_setting": setting(best_target_only),
        "raw_target_only": round(raw_target_only["dev_acc"], 4),
        "sentence_only_diagnostic": round(sentence_only["dev_acc"], 4),
        "max_dev_any_setting": round(max(r["dev_acc"] for r in selectable), 4),
        "spacy_trf": round(peer["dev_acc"], 4),
        "spacy_trf_at_best_setting": round(peer_best["dev_acc"], 4),
        "component_check_max_diff": max_diff,
        "selection": "transformed setting (layers x transform x context weight < 1 x threshold mode) "
                     "with the highest WiC train accuracy; dev only evaluated",
        "n_settings": len(transformed),
        "fit_on": fit_name,
        "fit_vectors": int(corpus.shape[1]),
        "n_train": len(train),
        "n_dev": len(dev),
        "quick": bool(args.quick),
        "threads": args.threads,
        "seconds": round(time.time() - start),
    }
    print_result(figures)
    return 0 if max_diff < 1e-3 else 1


if __name__ == "__main__":
    sys.exit(main())
