"""WiC's vectors as bench/wic.py reads them (and bench/wic_trained.py after it):
per hidden state, each pair's target and sentence vectors, the grid of layer
settings and context weights, and the threshold evaluation of a setting."""
import numpy

from spacy_mlm import (
    cosine_rows, docs_before, layer_indices, mix_context, target_span,
    threshold_evaluation,
)

CONTEXT_WEIGHTS = (0.0, 0.25, 0.5, 0.75, 0.9)


def layer_choices(n_states: int):
    """(name, layer, n_layers) for the mean of every range lo..hi of hidden
    states with 1 <= lo <= hi <= top; the top layer alone is ("top", -1, 1)."""
    top = n_states - 1
    choices = [("top", -1, 1)]
    for hi in range(1, top + 1):
        for lo in range(1, hi + 1):
            if (lo, hi) != (top, top):
                choices.append((f"layers{lo}-{hi}" if lo < hi else f"layer{hi}", hi, hi - lo + 1))
    return choices


def per_layer_token_vectors(doc) -> numpy.ndarray:
    """(n_states, n_tokens, width): every hidden state pooled per token (mean of pieces)."""
    enc = doc._.mlm_encoding
    return numpy.stack([enc.token_vectors("mean", k) for k in range(enc.layers.shape[0])])


def span_mean(rows: numpy.ndarray) -> numpy.ndarray:
    """(n_states, width): mean over the tokens (axis 1) that have pieces."""
    present = numpy.any(rows[-1] != 0, axis=1)
    return rows[:, present].mean(axis=1)


def our_vectors(nlp, examples, batch_size, fit_rows=None, max_fit=0):
    """Target and sentence vectors per hidden state, (n, n_states, width) each,
    for sentence1 and sentence2: (target1, target2, sentence1, sentence2). With
    `fit_rows` (a list), also collects up to `max_fit` token vectors of these
    sentences (tokens with pieces, each distinct sentence once)."""
    texts = [e.sentence1 for e in examples] + [e.sentence2 for e in examples]
    spans = [e.char_span1 for e in examples] + [e.char_span2 for e in examples]
    targets, sentences, seen, n_fit = [], [], set(), 0
    for doc, chars in zip(docs_before(nlp, "mlm_vectors", texts, batch_size), spans):
        stack = per_layer_token_vectors(doc)
        span = target_span(doc, chars)
        targets.append(span_mean(stack[:, span.start : span.end]))
        sentences.append(span_mean(stack))
        if fit_rows is not None and n_fit < max_fit and doc.text not in seen:
            seen.add(doc.text)
            rows = stack[:, numpy.any(stack[-1] != 0, axis=1)][:, : max_fit - n_fit]
            fit_rows.append(rows)
            n_fit += rows.shape[1]
    n = len(examples)
    targets, sentences = numpy.asarray(targets, "float32"), numpy.asarray(sentences, "float32")
    return targets[:n], targets[n:], sentences[:n], sentences[n:]


def pool_layers(X: numpy.ndarray, layer: int, n_layers: int, axis: int) -> numpy.ndarray:
    idx = layer_indices(X.shape[axis], layer, n_layers)
    return numpy.take(X, idx, axis=axis).mean(axis=axis)


def evaluate(train_vecs, dev_vecs, weight, per_pos, y_train, y_dev, pos_train, pos_dev):
    """Threshold(s) on train, accuracy on dev, for (t1, t2, s1, s2) vector tuples."""
    def scores(vecs):
        t1, t2, s1, s2 = vecs
        return cosine_rows(mix_context(t1, s1, weight), mix_context(t2, s2, weight))

    groups = (pos_train, pos_dev) if per_pos else (None, None)
    return threshold_evaluation(scores(train_vecs), y_train, scores(dev_vecs), y_dev, *groups)
