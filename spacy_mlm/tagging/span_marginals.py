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
scale (`crf.crf_scaled_forward_backward`). Spans are scored a length at a time
for every start at once; longer spans are scored only while some could still
reach the asked probability (a span's probability is at most that of its
prefix), so the cost follows the entities' lengths, not the square of the
sequence's.
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


def _ahead(x: torch.Tensor, k: int, fill: float) -> torch.Tensor:
    """x (B, L, ...) read k positions ahead: [:, t] = x[:, t + k], `fill` past the end."""
    out = torch.full_like(x, fill)
    if k < x.shape[1]:
        out[:, : x.shape[1] - k] = x[:, k:]
    return out


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
    spans whose probability is asked (e.g. the Viterbi entities); min_prob: also
    return every span at least this probable (None: none; 0: every span, which
    costs the square of the length). Computed in float64, returned on the
    emissions' device."""
    device = emissions.device
    em, start, transitions, end = (x.double() for x in (emissions, start, transitions, end))
    B, T, K = em.shape
    alpha_hat, beta_hat, scale, log_z = crf_scaled_forward_backward(em, mask, start, transitions, end)
    lengths = mask.sum(dim=1)
    positions = torch.arange(T + 1, device=device)
    real = positions[None, :T] < lengths[:, None]  # (B, T)
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
        inner = torch.cat([start[tag].expand(B, 1, -1), moved], dim=1)
        return inner + em[:, :, tag]

    def leave(tag):
        """(B, T + 1, P): log-mass of leaving `tag[p]` at e - 1 into position e (the end at e = length)."""
        ahead = em + beta_hat  # position e's tag and everything after it
        moved = log_matmul(ahead, transitions[tag].T + exit_mask.T)  # (B, T, P)
        moved = torch.cat([moved, moved.new_full((B, 1, moved.shape[-1]), float("-inf"))], dim=1)
        out = torch.where(at_end[:, :, None], end[tag].expand(B, T + 1, -1), moved)
        return out.masked_fill((positions[None, :] > lengths[:, None])[:, :, None], float("-inf"))

    # c_{k-1} at index k (c_{-1} = 0), and log Z where the index is the length + 1
    c_before = torch.cat([scale.new_zeros(B, 1), scale, scale.new_zeros(B, 1)], dim=1)
    c_before = torch.where(torch.cat([at_end.new_zeros(B, 1), at_end], dim=1), log_z[:, None], c_before)
    enter_single, enter_first = entry(single), entry(first)
    leave_single, leave_last = leave(single), leave(last)
    em_middle, em_last = em[:, :, middle], em[:, :, last]
    t_first_middle, t_first_last = transitions[first, middle], transitions[first, last]
    t_middle_middle, t_middle_last = transitions[middle, middle], transitions[middle, last]

    def normaliser(n):  # c_{s+n-1+1} - c_{s-1} for the span s..s+n-1, as (B, T, 1)
        return (_ahead(c_before, n + 1, float("inf"))[:, :T] - c_before[:, :T]).unsqueeze(-1)

    def per_label(log_p):  # (B, T, P) -> (B, T, L): the variants of a label are disjoint events
        return torch.logsumexp(log_p.view(B, T, patterns.n_variants, len(patterns.labels)), dim=2)

    queries = torch.zeros((0, 4), dtype=torch.long, device=device) if queries is None else queries.to(device)
    query_log = torch.full((len(queries),), float("-inf"), dtype=em.dtype, device=device)
    query_lengths = queries[:, 2] - queries[:, 1]
    longest_query = int(query_lengths.max()) if len(queries) else 0
    floor = None if min_prob is None else (math.log(min_prob) if min_prob > 0 else float("-inf"))
    found: List[Tuple[torch.Tensor, torch.Tensor]] = []

    opened = enter_first  # the span's first n tags, from each start s
    for n in range(1, T + 1):
        if n == 1:
            closed = enter_single
            leaving = leave_single
        else:
            step = t_first_last if n == 2 else t_middle_last
            closed = opened + step + _ahead(em_last, n - 1, float("-inf"))
            leaving = leave_last
            opened = opened + (t_first_middle if n == 2 else t_middle_middle) + _ahead(em_middle, n - 1, float("-inf"))
        log_p = closed + _ahead(leaving, n, float("-inf"))[:, :T] - normaliser(n)
        fits = _ahead(real, n - 1, False)[:, :, None] & real[:, :, None]
        log_p = per_label(log_p.masked_fill(~fits, float("-inf"))).clamp(max=_MAX_LOG_PROB)
        asked = query_lengths == n
        if asked.any():
            q = queries[asked]
            query_log[asked] = log_p[q[:, 0], q[:, 1], q[:, 3]]
        if floor is not None:
            hits = (log_p >= floor) & fits[:, :, :1]
            b, s, label = hits.nonzero(as_tuple=True)
            found.append((torch.stack([b, s, s + n, label], dim=1), log_p[b, s, label]))
        if n >= longest_query:
            if floor is None:
                break
            # every longer span from s is inside the event "its first n tags": stop when none can reach the floor
            last_open = first if n == 1 else middle
            bound = opened + _ahead(beta_hat[:, :, last_open], n - 1, float("-inf")) - _ahead(
                c_before, n, float("inf"))[:, :T, None] + c_before[:, :T, None]
            bound = bound.masked_fill(~fits, float("-inf"))
            if not bool((bound >= floor).any()):
                break
    candidates = torch.cat([f[0] for f in found]) if found else torch.zeros((0, 4), dtype=torch.long, device=device)
    candidate_log = torch.cat([f[1] for f in found]) if found else em.new_zeros(0)
    return SpanProbabilities(query_log.exp(), candidates, candidate_log.exp(),
                             _expected_entities(enter_single, enter_first, beta_hat, scale, single, first, real))


def _expected_entities(enter_single, enter_first, beta_hat, scale, single, first, real) -> torch.Tensor:
    """(B,): the expected number of entities, the sum over positions of the
    probability that one opens there (by its single tag, or its first tag where
    that differs: BIOES's S and B)."""
    step = scale - torch.cat([scale.new_zeros(scale.shape[0], 1), scale[:, :-1]], dim=1)  # c_s - c_{s-1}
    opens = torch.exp(enter_single + beta_hat[:, :, single] - step[:, :, None])
    differs = first != single
    opens = opens + torch.exp(enter_first + beta_hat[:, :, first] - step[:, :, None]) * differs
    return (opens * real[:, :, None]).sum(dim=(1, 2))


def expected_entity_errors(expected_entities: float, predicted_probs: Sequence[float]) -> float:
    """The expected number of wrong entities of a prediction: its expected
    false positives, sum(1 - p), and its expected misses, the expected number
    of entities less the expected number it gets right, E[N] - sum(p). Exact
    where every entity is scored by its span marginal."""
    kept = float(sum(predicted_probs))
    return max(0.0, float(expected_entities) + len(predicted_probs) - 2.0 * kept)
