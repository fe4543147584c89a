import itertools

import numpy
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from spacy_mlm.tagging.crf import (
    _probability_chains, apply_constraints, crf_log_partition, crf_marginals, crf_nll, crf_viterbi,
)
from spacy_mlm.tagging.schemes import is_valid_sequence, make_tag_labels, transition_constraints


def path_score(em, path, start, trans, end):
    s = start[path[0]] + end[path[-1]] + sum(em[t, k] for t, k in enumerate(path))
    return s + sum(trans[a, b] for a, b in zip(path, path[1:]))


def random_case(seed, B=3, T=4, K=3):
    g = torch.Generator().manual_seed(seed)
    em = torch.randn(B, T, K, generator=g, dtype=torch.float64)
    start, end = torch.randn(K, generator=g, dtype=torch.float64), torch.randn(K, generator=g, dtype=torch.float64)
    trans = torch.randn(K, K, generator=g, dtype=torch.float64)
    lengths = [T, T - 1, 1][:B]
    mask = torch.tensor([[t < n for t in range(T)] for n in lengths])
    return em, mask, start, trans, end, lengths


def all_paths(K, n):
    return itertools.product(range(K), repeat=n)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_log_partition_and_nll_equal_brute_force(seed):
    em, mask, start, trans, end, lengths = random_case(seed)
    K = em.shape[2]
    log_z = crf_log_partition(em, mask, start, trans, end)
    gold = [[1, 0, 2, 1], [2, 2, 0, 0], [1, 0, 0, 0]]
    tag_mask = torch.zeros(em.shape, dtype=torch.bool)
    for b, g in enumerate(gold):
        for t in range(em.shape[1]):
            tag_mask[b, t, g[t]] = True
    nll = crf_nll(em, tag_mask, mask, start, trans, end)
    for b, n in enumerate(lengths):
        scores = torch.stack([path_score(em[b], p, start, trans, end) for p in all_paths(K, n)])
        assert float(log_z[b]) == pytest.approx(float(torch.logsumexp(scores, 0)), abs=1e-9)
        expected = float(torch.logsumexp(scores, 0) - path_score(em[b], gold[b][:n], start, trans, end))
        assert float(nll[b]) == pytest.approx(expected, abs=1e-9)


def test_partial_labels_sum_over_consistent_paths():
    em, mask, start, trans, end, _ = random_case(3, B=1, T=3)
    K = em.shape[2]
    tag_mask = torch.ones(em.shape, dtype=torch.bool)
    tag_mask[0, 1] = False
    tag_mask[0, 1, 2] = True  # only the middle tag is known
    nll = crf_nll(em, tag_mask, mask, start, trans, end)
    scores = [path_score(em[0], p, start, trans, end) for p in all_paths(K, 3)]
    consistent = [path_score(em[0], p, start, trans, end) for p in all_paths(K, 3) if p[1] == 2]
    expected = torch.logsumexp(torch.stack(scores), 0) - torch.logsumexp(torch.stack(consistent), 0)
    assert float(nll[0]) == pytest.approx(float(expected), abs=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_viterbi_equals_brute_force(seed):
    em, mask, start, trans, end, lengths = random_case(seed)
    K = em.shape[2]
    paths = crf_viterbi(em, mask, start, trans, end)
    for b, n in enumerate(lengths):
        best = max(all_paths(K, n), key=lambda p: float(path_score(em[b], p, start, trans, end)))
        assert paths[b] == list(best)


def test_marginals_equal_brute_force():
    em, mask, start, trans, end, lengths = random_case(4, B=2)
    K = em.shape[2]
    marg = crf_marginals(em, mask, start, trans, end)
    for b, n in enumerate(lengths):
        paths = list(all_paths(K, n))
        probs = torch.softmax(torch.stack([path_score(em[b], p, start, trans, end) for p in paths]), 0)
        expected = numpy.zeros((n, K))
        for p, pr in zip(paths, probs):
            for t, k in enumerate(p):
                expected[t, k] += float(pr)
        numpy.testing.assert_allclose(marg[b, :n].numpy(), expected, atol=1e-9)
        assert float(marg[b, n:].abs().sum()) == 0.0


def test_gradient_of_nll_is_marginals_minus_gold():
    em, mask, start, trans, end, _ = random_case(5, B=1, T=3)
    em.requires_grad_(True)
    gold = [0, 2, 1]
    tag_mask = torch.zeros(em.shape, dtype=torch.bool)
    for t, k in enumerate(gold):
        tag_mask[0, t, k] = True
    crf_nll(em, tag_mask, mask, start, trans, end).sum().backward()
    expected = crf_marginals(em.detach(), mask, start, trans, end)
    for t, k in enumerate(gold):
        expected[0, t, k] -= 1
    numpy.testing.assert_allclose(em.grad.numpy(), expected.numpy(), atol=1e-9)


@pytest.mark.parametrize("scheme", ["BIO", "BIOES"])
@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), length=st.integers(1, 9), scale=st.floats(0.1, 50.0))
def test_constrained_decoding_is_always_valid(scheme, seed, length, scale):
    """Even for emissions that favour ill-formed sequences, the decoded path is well formed."""
    labels = make_tag_labels(["A", "B"], scheme)
    allowed = transition_constraints(labels, scheme)
    K = len(labels)
    g = torch.Generator().manual_seed(seed)
    em = torch.randn(2, length, K, generator=g) * scale
    em[:, :, [i for i, t in enumerate(labels) if t[0] in "IE"]] += scale  # push towards I-/E- tags
    mask = torch.ones(2, length, dtype=torch.bool)
    mask[1, max(1, length // 2) :] = False
    params = apply_constraints(
        torch.randn(K, generator=g), torch.randn(K, K, generator=g), torch.randn(K, generator=g),
        *(torch.from_numpy(allowed[k]) for k in ("start", "transitions", "end")),
    )
    for path in crf_viterbi(em, mask, *params):
        assert is_valid_sequence([labels[i] for i in path], scheme)


def sequential_reference(em, start, trans, end):
    """Marginals and Viterbi of one float64 sequence, one step after another (the textbook recursions)."""
    T, K = em.shape
    alpha = [start + em[0]]
    delta, back = [start + em[0]], []
    for t in range(1, T):
        alpha.append(torch.logsumexp(alpha[-1][:, None] + trans, 0) + em[t])
        best, idx = (delta[-1][:, None] + trans).max(0)
        delta.append(best + em[t])
        back.append(idx)
    beta = [end]
    for t in range(T - 2, -1, -1):
        beta.append(torch.logsumexp(trans + (em[t + 1] + beta[-1])[None, :], 1))
    beta.reverse()
    marginals = torch.softmax(torch.stack(alpha) + torch.stack(beta), -1)
    path = [int((delta[-1] + end).argmax())]
    for idx in reversed(back):
        path.append(int(idx[path[-1]]))
    return marginals, path[::-1]


@pytest.mark.parametrize("sequential_max", [0, 512], ids=["chunked", "sequential"])
@pytest.mark.parametrize("K,step_budget", [(4, 2**24), (4, 4 * 4 * 4 * 7), (30, 2**24), (30, 4 * 30 * 30 * 5)])
@pytest.mark.parametrize("lengths", [[1, 2, 3], [5, 9, 10, 11], [16, 17, 1, 26], [100, 37]])
def test_chunked_recursions_equal_the_step_by_step_ones(lengths, K, step_budget, sequential_max, monkeypatch):
    """Lengths around the chunk sizes (ceil(sqrt(n)) steps per chunk, the last chunk padded), padded
    rows, documents held in several blocks of steps, and a tag set above CHUNKED_MAX_TAGS (one step a chunk);
    both the chunked recursions (long documents) and the step-by-step ones (sentences, short documents)."""
    monkeypatch.setattr("spacy_mlm.tagging.crf.STEP_BUDGET", step_budget)
    monkeypatch.setattr("spacy_mlm.tagging.crf.SEQUENTIAL_MAX_STEPS", sequential_max)
    g = torch.Generator().manual_seed(sum(lengths))
    B, T = len(lengths), max(lengths)
    em = torch.randn(B, T, K, generator=g, dtype=torch.float64) * 3
    start, end = torch.randn(K, generator=g, dtype=torch.float64), torch.randn(K, generator=g, dtype=torch.float64)
    trans = torch.randn(K, K, generator=g, dtype=torch.float64)
    mask = torch.tensor([[t < n for t in range(T)] for n in lengths])
    marginals = crf_marginals(em, mask, start, trans, end)
    paths = crf_viterbi(em, mask, start, trans, end)
    for b, n in enumerate(lengths):
        expected_marginals, expected_path = sequential_reference(em[b, :n], start, trans, end)
        numpy.testing.assert_allclose(marginals[b, :n].numpy(), expected_marginals.numpy(), atol=1e-9)
        assert float(marginals[b, n:].abs().sum()) == 0.0
        assert paths[b] == expected_path


@pytest.mark.parametrize("scale,in_range", [(3.0, True), (150.0, True), (2000.0, False)])
def test_sentence_recursions_as_probabilities_and_their_log_domain_fallback(scale, in_range):
    """Sentences run the forward-backward as products of probabilities in float64: float32 scores
    spanning e^150 (past float32's exp) keep the float64 log-domain marginals; scores spanning
    more than float64 can scale are refused by it and the log-domain recursion answers the same.
    Padded rows and the scheme's forbidden moves included."""
    labels = make_tag_labels(["PER", "ORG"], "BIO")
    allowed = transition_constraints(labels, "BIO")
    K, lengths = len(labels), [7, 3, 1, 6]
    g = torch.Generator().manual_seed(int(scale))
    B, T = len(lengths), max(lengths)
    em = torch.randn(B, T, K, generator=g, dtype=torch.float64) * scale
    start, trans, end = apply_constraints(
        torch.randn(K, generator=g, dtype=torch.float64), torch.randn(K, K, generator=g, dtype=torch.float64),
        torch.randn(K, generator=g, dtype=torch.float64),
        *(torch.from_numpy(allowed[k]) for k in ("start", "transitions", "end")))
    mask = torch.tensor([[t < n for t in range(T)] for n in lengths])
    assert (_probability_chains(em, mask, start, trans, end) is not None) == in_range
    marginals = crf_marginals(em.float(), mask, start.float(), trans.float(), end.float())
    paths = crf_viterbi(em, mask, start, trans, end)
    for b, n in enumerate(lengths):
        expected_marginals, expected_path = sequential_reference(em[b, :n], start, trans, end)
        numpy.testing.assert_allclose(marginals[b, :n].double().numpy(), expected_marginals.numpy(), atol=1e-5)
        assert float(marginals[b, n:].abs().sum()) == 0.0
        assert paths[b] == expected_path


def test_long_document_marginals_sum_to_one_and_decoding_is_stable():
    """100,000 float32 positions with large scores: every marginal row sums to 1 (the autograd
    version gave 0.12..1.05 here), the constrained path stays valid, and it equals the float64 one."""
    labels = make_tag_labels(["PER", "ORG", "LOC", "MISC"], "BIO")
    allowed = transition_constraints(labels, "BIO")
    K, T = len(labels), 100_000
    g = torch.Generator().manual_seed(0)
    em = torch.randn(1, T, K, generator=g) * 5
    params = apply_constraints(
        torch.randn(K, generator=g), torch.randn(K, K, generator=g), torch.randn(K, generator=g),
        *(torch.from_numpy(allowed[k]) for k in ("start", "transitions", "end")),
    )
    mask = torch.ones(1, T, dtype=torch.bool)
    marginals = crf_marginals(em, mask, *params)
    assert torch.isfinite(marginals).all()
    assert float((marginals.sum(-1) - 1).abs().max()) < 1e-4
    path = crf_viterbi(em, mask, *params)[0]
    assert len(path) == T and is_valid_sequence([labels[i] for i in path], "BIO")
    exact = [p.double() for p in params]
    best = crf_viterbi(em.double(), mask, *exact)[0]
    # float32 may break a near-tie the other way, but never loses a path worth more than rounding
    assert sum(a != b for a, b in zip(path, best)) < 10
    start, trans, end = exact

    def score(p):
        p = torch.tensor(p)
        return float(start[p[0]] + end[p[-1]] + em[0].double()[torch.arange(T), p].sum() + trans[p[:-1], p[1:]].sum())

    assert score(best) - score(path) < 1e-6 * abs(score(best))


def test_decoding_time_grows_linearly():
    import time

    def seconds(T):
        em, mask = torch.randn(1, T, 9), torch.ones(1, T, dtype=torch.bool)
        params = torch.randn(9), torch.randn(9, 9), torch.randn(9)
        began = time.perf_counter()
        crf_marginals(em, mask, *params)
        crf_viterbi(em, mask, *params)
        return time.perf_counter() - began

    seconds(1_000)  # warm up
    short, long = min(seconds(3_000) for _ in range(2)), min(seconds(30_000) for _ in range(2))
    assert long < 25 * short, (short, long)  # 10x the length; quadratic would be 100x
