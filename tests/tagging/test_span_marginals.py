"""tagging/span_marginals.py: the probability of each span, checked against
the enumeration of every tag path on short sequences."""
import itertools
from collections import defaultdict

import pytest
import torch

from spacy_mlm.tagging.crf import apply_constraints, crf_marginals, crf_viterbi
from spacy_mlm.tagging.schemes import make_tag_labels, split_tag, tags_to_spans, transition_constraints
from spacy_mlm.tagging.span_marginals import expected_entity_errors, span_patterns, span_probabilities

SCHEMES = ["BIO", "BIOES", "IO", "IOB1"]


def case(scheme, crf, seed, lengths=(4, 3, 1)):
    """Random scores of 2 entity types in `scheme`, constrained: the CRF's own
    moves, or the softmax tagger's log-probabilities with zero moves."""
    tags = make_tag_labels(["A", "B"], scheme)
    K, T = len(tags), max(lengths)
    g = torch.Generator().manual_seed(seed)
    em = 2 * torch.randn(len(lengths), T, K, generator=g, dtype=torch.float64)
    if crf:
        moves = [torch.randn(K, generator=g, dtype=torch.float64), torch.randn(K, K, generator=g, dtype=torch.float64),
                 torch.randn(K, generator=g, dtype=torch.float64)]
    else:
        em = torch.log_softmax(em, dim=-1)
        moves = [torch.zeros(K, dtype=torch.float64), torch.zeros(K, K, dtype=torch.float64),
                 torch.zeros(K, dtype=torch.float64)]
    tables = transition_constraints(tags, scheme)
    moves = apply_constraints(*moves, *(torch.from_numpy(tables[k]) for k in ("start", "transitions", "end")))
    mask = torch.tensor([[t < n for t in range(T)] for n in lengths])
    return tags, em, mask, moves


def brute_force(tags, em, n, moves):
    """{(start, end, label): probability} of one sequence, and its expected number of entities."""
    start, trans, end = moves
    paths = list(itertools.product(range(len(tags)), repeat=n))
    scores = torch.stack([start[p[0]] + end[p[-1]] + sum(em[t, k] for t, k in enumerate(p))
                          + sum(trans[a, b] for a, b in zip(p, p[1:])) for p in paths])
    probs = torch.softmax(scores, 0).tolist()
    spans, expected = defaultdict(float), 0.0
    for path, prob in zip(paths, probs):
        found = tags_to_spans([tags[k] for k in path])
        expected += prob * len(found)
        for span in found:
            spans[span] += prob
    return spans, expected


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("crf", [True, False])
def test_span_probabilities_equal_the_enumeration_of_every_path(scheme, crf):
    tags, em, mask, moves = case(scheme, crf, seed=SCHEMES.index(scheme))
    patterns = span_patterns(tags, scheme)
    result = span_probabilities(em, mask, *moves, patterns, min_prob=0.0)
    got = {}
    for (b, s, e, label), p in zip(result.candidates.tolist(), result.candidate_probs.tolist()):
        got[b, s, e, patterns.labels[label]] = p
    for b, n in enumerate(mask.sum(1).tolist()):
        expected, expected_count = brute_force(tags, em[b], n, moves)
        every_span = [(s, e, label) for s in range(n) for e in range(s + 1, n + 1) for label in patterns.labels]
        assert {(bb, s, e, label) for bb, s, e, label in got if bb == b} == {(b, *span) for span in every_span}
        for span in every_span:
            assert got[(b, *span)] == pytest.approx(expected.get(span, 0.0), abs=1e-9), span
        assert float(result.expected_entities[b]) == pytest.approx(expected_count, abs=1e-9)


@pytest.mark.parametrize("scheme", ["BIO", "BIOES"])
def test_asked_spans_and_a_floor_give_the_same_probabilities(scheme):
    tags, em, mask, moves = case(scheme, True, seed=7, lengths=(5, 4))
    patterns = span_patterns(tags, scheme)
    every = span_probabilities(em, mask, *moves, patterns, min_prob=0.0)
    above = span_probabilities(em, mask, *moves, patterns, min_prob=0.1)
    keep = every.candidate_probs >= 0.1
    assert sorted(map(tuple, above.candidates.tolist())) == sorted(map(tuple, every.candidates[keep].tolist()))
    asked = span_probabilities(em, mask, *moves, patterns, queries=every.candidates)
    assert torch.allclose(asked.query_probs, every.candidate_probs, atol=1e-12)
    assert len(asked.candidates) == 0


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("crf", [True, False])
def test_viterbi_entities_are_at_most_1_and_spans_over_a_token_add_up_to_its_tag_marginals(scheme, crf):
    tags, em, mask, moves = case(scheme, crf, seed=11, lengths=(6, 5))
    patterns = span_patterns(tags, scheme)
    paths = crf_viterbi(em, mask, *moves)
    queries = [(b, s, e, patterns.labels.index(label)) for b, path in enumerate(paths)
               for s, e, label in tags_to_spans([tags[k] for k in path])]
    result = span_probabilities(em, mask, *moves, patterns, queries=torch.tensor(queries).view(-1, 4), min_prob=0.0)
    assert bool(((result.query_probs > 0) & (result.query_probs <= 1)).all())
    marginals = crf_marginals(em, mask, *moves)
    covered = torch.zeros(marginals.shape[:2] + (len(patterns.labels),), dtype=torch.float64)
    for (b, s, e, label), p in zip(result.candidates.tolist(), result.candidate_probs.tolist()):
        covered[b, s:e, label] += p
    for label_index, label in enumerate(patterns.labels):
        columns = [k for k, tag in enumerate(tags) if tag != "O" and split_tag(tag)[1] == label]
        by_tags = marginals[:, :, columns].sum(-1) * mask
        assert torch.allclose(covered[:, :, label_index], by_tags, atol=1e-9)


def test_expected_errors_count_false_positives_and_misses():
    # one predicted entity at 0.9, two entities expected: 0.1 expected false positive, 1.1 expected misses
    assert expected_entity_errors(2.0, [0.9]) == pytest.approx(1.2)
    assert expected_entity_errors(0.0, []) == 0.0


def test_float32_scores_give_the_float64_probabilities():
    tags, em, mask, moves = case("BIO", True, seed=3, lengths=(30, 12))
    patterns = span_patterns(tags, "BIO")
    wide = span_probabilities(em, mask, *moves, patterns, min_prob=0.01)
    narrow = span_probabilities(em.float(), mask, *(m.float() for m in moves), patterns, min_prob=0.01)
    assert narrow.candidate_probs.dtype == torch.float64
    keep = narrow.candidate_probs >= 0.02  # off the floor, where float32 rounding cannot move a span across it
    index = {tuple(c): p for c, p in zip(wide.candidates.tolist(), wide.candidate_probs.tolist())}
    for c, p in zip(narrow.candidates[keep].tolist(), narrow.candidate_probs[keep].tolist()):
        assert p == pytest.approx(index[tuple(c)], abs=1e-4)


def test_a_long_float32_sequence_keeps_its_span_probabilities_consistent():
    """The scale grows with the length; the spans over each token still add
    up to its marginal of being inside an entity (spans under 1e-7 left out)."""
    tags, em, mask, moves = case("BIO", True, seed=5, lengths=(3000,))
    em, moves = em.float(), [m.float() for m in moves]
    patterns = span_patterns(tags, "BIO")
    result = span_probabilities(em, mask, *moves, patterns, min_prob=1e-7)
    inside = torch.zeros(3000, dtype=torch.float64)
    for (_, s, e, _), p in zip(result.candidates.tolist(), result.candidate_probs.tolist()):
        inside[s:e] += p
    marginals = crf_marginals(em.double(), mask, *(m.double() for m in moves))[0]
    assert torch.allclose(inside, 1 - marginals[:, tags.index("O")], atol=1e-4)
    assert float(result.expected_entities[0]) == pytest.approx(
        float(sum(p for (_, s, e, _), p in zip(result.candidates.tolist(), result.candidate_probs.tolist()))), abs=1e-2)
