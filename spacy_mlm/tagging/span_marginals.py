"""Span marginals: the probability that tokens s..e-1 form exactly one entity of
type L, summed over every well-formed tag path (the scheme's constraints), by
constrained forward-backward. Pure torch.

With the CRF the paths are weighted by its scores; the softmax tagger is the
same computation with zero transitions (independent tags under the same
constraint mask), so both give the exact probability of the event "this span,
this type", not an average of token scores.

A span is an event on a few positions (its `SpanPatterns`, per scheme): the tag
before it (IO, IOB1 only), its own tags (fixed by its length: ``B I I``, ``S``,
``B I E``...) and the tag after it (must not continue it). Its probability is

    P = exp(entry(s) + path(s..e-1) + exit(e) - (c_e - c_{s-1}))

with entry the normalised forward state before s moved into the first tag,
exit the normalised backward state after the last one, and c the forward
scale (`crf.crf_scaled_forward_backward`); the path's middle is a running sum,
so an asked span (a Viterbi entity) costs the same however long it is. Further
spans are scored a length at a time for every start at once, and longer ones
only from starts where they could still reach the asked probability (a span's
probability is at most that of its first tags), so the cost follows the
entities' lengths, not the square of the sequence's.
"""
import math
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy
import torch

from .crf import crf_scaled_forward_backward, log_matmul
from .schemes import OUTSIDE, normalize_scheme, split_tag

# a span's probability is clipped to 1 against float64 rounding
_MAX_LOG_PROB = 0.0


@dataclass(frozen=True)
class SpanPatterns:
    """The tag events of an entity of each type, as tag ids over `tags`.

    Row p describes one way a span of type ``labels[p % n_labels]`` is tagged
    (IOB1 has two: opened by ``B-X`` or by ``I-X`` after a tag of another
    type; the others one): `single` its tag at length 1, `first` / `middle` /
    `last` its tags at length >= 2, `entry_allowed` ``(P, K)`` the tags that may
    stand before it, `exit_allowed` ``(P, K)`` the tags that may follow it."""

    tags: Tuple[str, ...]
    labels: Tuple[str, ...]
    single: numpy.ndarray
    first: numpy.ndarray
    middle: numpy.ndarray
    last: numpy.ndarray
    entry_allowed: numpy.ndarray
    exit_allowed: numpy.ndarray

    @property
    def n_variants(self) -> int:
        return len(self.single) // len(self.labels)


def span_patterns(tag_labels: Sequence[str], scheme: str) -> SpanPatterns:
    """The span events of `scheme` over `tag_labels` (``make_tag_labels``)."""
    scheme = normalize_scheme(scheme)
    index = {tag: i for i, tag in enumerate(tag_labels)}
    labels = tuple(sorted({split_tag(t)[1] for t in tag_labels if t != OUTSIDE}))
    K = len(tag_labels)

    def allowed_but(*excluded):
        row = numpy.ones(K, dtype=bool)
        row[[index[t] for t in excluded if t in index]] = False
        return row

    variants = []  # (single, first, middle, last, entry_allowed, exit_allowed) per label, per variant
    for variant in range(2 if scheme == "IOB1" else 1):
        for label in labels:
            B, I, E, S = (f"{p}-{label}" for p in "BIES")
            if scheme == "BIOES":
                variants.append((S, B, I, E, allowed_but(), allowed_but()))
            elif scheme == "IO" or (scheme == "IOB1" and variant == 1):
                variants.append((I, I, I, I, allowed_but(I, B), allowed_but(I)))
            else:  # BIO, and IOB1's entity opened by B-X (after one of its own type)
                variants.append((B, B, I, I, allowed_but(), allowed_but(I)))
    ids = [numpy.array([index[v[k]] for v in variants]) for k in range(4)]
    return SpanPatterns(tuple(tag_labels), labels, *ids, numpy.stack([v[4] for v in variants]),
                        numpy.stack([v[5] for v in variants]))


@dataclass
class SpanProbabilities:
    """`query_probs` ``(Q,)``: the probability of each asked span;
    `candidates` ``(N, 4)`` (sequence, start, end, label index) and
    `candidate_probs` ``(N,)``: every span at least `min_prob` probable;
    `expected_entities` ``(B,)``: the expected number of entities per sequence."""

    query_probs: torch.Tensor
    candidates: torch.Tensor
    candidate_probs: torch.Tensor
    expected_entities: torch.Tensor


@dataclass
class _SpanTerms:
    """The pieces of every span's log-probability, per pattern p (last axis):
    entering its first (single) tag at s, leaving its last (single) tag into
    position e (the end of the sequence at e = length), the emissions of its
    last tag, the running sum of its middle tag's emissions, its moves, and
    the forward scale c_{k-1} at index k (log Z after the last token)."""

    enter_single: torch.Tensor  # (B, T, P)
    enter_first: torch.Tensor  # (B, T, P)
    leave_single: torch.Tensor  # (B, T + 1, P)
    leave_last: torch.Tensor  # (B, T + 1, P)
    em_last: torch.Tensor  # (B, T, P)
    middle_sums: torch.Tensor  # (B, T + 1, P): the sum of the middle tag's emissions before each position
    first_middle: torch.Tensor  # (P,) moves
    first_last: torch.Tensor
    middle_middle: torch.Tensor
    middle_last: torch.Tensor
    c_before: torch.Tensor  # (B, T + 2)
    beta_hat: torch.Tensor  # (B, T, K)

    def log_probs(self, b: torch.Tensor, s: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        """(M, P): log P(tokens s..e-1 of sequence b are one entity, tagged as
        pattern p) for spans that fit their sequence (1 <= e - s)."""
        n = (e - s)[:, None]
        inner = torch.where(
            n == 2, self.first_last,
            self.first_middle + self.middle_sums[b, (e - 1).clamp(min=0)] - self.middle_sums[b, s + 1]
            + (n - 3).clamp(min=0) * self.middle_middle + self.middle_last)
        longer = self.enter_first[b, s] + inner + self.em_last[b, e - 1] + self.leave_last[b, e]
        log_p = torch.where(n == 1, self.enter_single[b, s] + self.leave_single[b, e], longer)
        return log_p - (self.c_before[b, e + 1] - self.c_before[b, s])[:, None]

    def prefix_log_probs(self, b, s, n: int, last_open: torch.Tensor) -> torch.Tensor:
        """(M, P): log P(the first n tags of a span from s): every longer span
        from s lies inside this event, so it bounds their probabilities."""
        e = s + n
        log_p = self.enter_first[b, s] + self.beta_hat[b, e - 1][:, last_open]
        if n >= 2:
            log_p = log_p + self.first_middle + self.middle_sums[b, e] - self.middle_sums[b, s + 1] + (
                n - 2) * self.middle_middle
        return log_p - (self.c_before[b, e] - self.c_before[b, s])[:, None]


@torch.no_grad()
def span_probabilities(
    emissions: torch.Tensor,
    mask: torch.Tensor,
    start: torch.Tensor,
    transitions: torch.Tensor,
    end: torch.Tensor,
    patterns: SpanPatterns,
    *,
    queries: Optional[torch.Tensor] = None,
    min_prob: Optional[float] = None,
) -> SpanProbabilities:
    """Exact span marginals over the paths the (constrained) scores allow.

    emissions ``(B, T, K)`` (raw CRF scores, or the softmax tagger's
    log-probabilities), mask ``(B, T)``, start / transitions / end with the
    scheme's forbidden moves already at `crf.FORBIDDEN` (zeros for the softmax
    tagger). queries ``(Q, 4)`` long: (sequence, start, end, label index) of the
    spans whose probability is asked (e.g. the Viterbi entities; each costs the
    same, however long); min_prob: also return every span at least this
    probable (None: none; 0: every span, which costs the square of the
    length). The forward-backward recursions run in the scores' dtype, the
    rest in float64; returned on the emissions' device."""
    device = emissions.device
    alpha_hat, beta_hat, scale, log_z = crf_scaled_forward_backward(emissions, mask, start, transitions, end)
    em, start, transitions, end = (x.double() for x in (emissions, start, transitions, end))
    B, T, K = em.shape
    lengths = mask.sum(dim=1)
    positions = torch.arange(T + 1, device=device)
    at_end = positions[None, :] == lengths[:, None]  # (B, T + 1): the position after the last token

    def ids(a):
        return torch.as_tensor(a, device=device, dtype=torch.long)

    single, first, middle, last = (ids(a) for a in (patterns.single, patterns.first, patterns.middle, patterns.last))
    no = torch.tensor(float("-inf"), dtype=em.dtype, device=device)
    entry_mask = torch.where(torch.as_tensor(patterns.entry_allowed, device=device), 0.0, no)  # (P, K)
    exit_mask = torch.where(torch.as_tensor(patterns.exit_allowed, device=device), 0.0, no)

    def entry(tag):
        """(B, T, P): log-mass of entering `tag[p]` at s (the forward state at s - 1 normalised)."""
        moved = log_matmul(alpha_hat[:, :-1], transitions[:, tag] + entry_mask.T)  # from s - 1 into s = 1..T-1
        return torch.cat([start[tag].expand(B, 1, -1), moved], dim=1) + em[:, :, tag]

    def leave(tag):
        """(B, T + 1, P): log-mass of leaving `tag[p]` at e - 1 into position e (the end at e = length)."""
        moved = log_matmul(em + beta_hat, transitions[tag].T + exit_mask.T)  # position e's tag and all after it
        moved = torch.cat([moved, moved.new_full((B, 1, moved.shape[-1]), float("-inf"))], dim=1)
        return torch.where(at_end[:, :, None], end[tag].expand(B, T + 1, -1), moved)

    # c_{k-1} at index k (c_{-1} = 0), and log Z where the index is the length + 1
    c_before = torch.cat([scale.new_zeros(B, 1), scale, scale.new_zeros(B, 1)], dim=1)
    c_before = torch.where(torch.cat([at_end.new_zeros(B, 1), at_end], dim=1), log_z[:, None], c_before)
    em_middle = em[:, :, middle].masked_fill(~mask[:, :, None], 0.0)
    terms = _SpanTerms(entry(single), entry(first), leave(single), leave(last), em[:, :, last],
                       torch.cat([em.new_zeros(B, 1, len(middle)), em_middle.cumsum(dim=1)], dim=1),
                       transitions[first, middle], transitions[first, last], transitions[middle, middle],
                       transitions[middle, last], c_before, beta_hat)
    n_labels = len(patterns.labels)

    def per_label(log_p):  # (M, P) -> (M, L): the variants of a label are disjoint events
        return torch.logsumexp(log_p.view(-1, patterns.n_variants, n_labels), dim=1).clamp(max=_MAX_LOG_PROB)

    queries = torch.zeros((0, 4), dtype=torch.long, device=device) if queries is None else queries.to(device)
    q_b, q_s, q_e, q_label = queries.unbind(1)
    query_log = per_label(terms.log_probs(q_b, q_s, q_e))[torch.arange(len(queries), device=device), q_label]

    found: List[Tuple[torch.Tensor, torch.Tensor]] = []
    if min_prob is not None:
        floor = math.log(min_prob) if min_prob > 0 else float("-inf")
        b, s = (x.reshape(-1) for x in torch.meshgrid(torch.arange(B, device=device), positions[:T], indexing="ij"))
        for n in range(1, T + 1):
            fits = s + n <= lengths[b]
            b, s = b[fits], s[fits]
            if not len(b):
                break
            log_p = per_label(terms.log_probs(b, s, s + n))
            hit, label = (log_p >= floor).nonzero(as_tuple=True)
            found.append((torch.stack([b[hit], s[hit], s[hit] + n, label], dim=1), log_p[hit, label]))
            # a longer span from s lies inside "its first n tags": go on from the starts where that can reach the floor
            open_ = terms.prefix_log_probs(b, s, n, first if n == 1 else middle)
            going = (open_ >= floor).any(dim=1) if floor > float("-inf") else torch.ones_like(b, dtype=torch.bool)
            b, s = b[going], s[going]
    candidates = torch.cat([f[0] for f in found]) if found else torch.zeros((0, 4), dtype=torch.long, device=device)
    candidate_log = torch.cat([f[1] for f in found]) if found else em.new_zeros(0)
    return SpanProbabilities(query_log.exp(), candidates, candidate_log.exp(),
                             _expected_entities(terms, scale, single, first, mask))


def _expected_entities(terms: _SpanTerms, scale, single, first, mask) -> torch.Tensor:
    """(B,): the expected number of entities, the sum over positions of the
    probability that one opens there (by its single tag, or its first tag where
    that differs: BIOES's S and B)."""
    step = (scale - torch.cat([scale.new_zeros(scale.shape[0], 1), scale[:, :-1]], dim=1))[:, :, None]  # c_s - c_{s-1}
    opens = torch.exp(terms.enter_single + terms.beta_hat[:, :, single] - step)
    opens = opens + torch.exp(terms.enter_first + terms.beta_hat[:, :, first] - step) * (first != single)
    return (opens * mask[:, :, None]).sum(dim=(1, 2))


def expected_entity_errors(expected_entities: float, predicted_probs: Sequence[float]) -> float:
    """The expected number of wrong entities of a prediction: its expected
    false positives, sum(1 - p), and its expected misses, the expected number
    of entities less the expected number it gets right, E[N] - sum(p). Exact
    where every entity is scored by its span marginal."""
    kept = float(sum(predicted_probs))
    return max(0.0, float(expected_entities) + len(predicted_probs) - 2.0 * kept)
