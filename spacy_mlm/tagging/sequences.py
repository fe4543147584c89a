"""A batch of tag scores read as tag sequences: which sequences a batch of Docs
is (the Docs themselves, or with a document-context encoder each sentence on
its own, so that a document and its sentences given one by one get the same
tags), their (B, T, K) emissions, their decoding back into one tag path per
Doc, and their training loss. Torch on the scores' device; what the
`mlm_ner` component adds is only its settings, its labels and the gold.
"""
from dataclasses import dataclass
from typing import Callable, List, NamedTuple, Optional, Sequence, Tuple

import numpy
import torch
from spacy.tokens import Doc

from ..tokenization.context import sentence_starts
from .decoding import decode_tags
from .emissions import TagScores, pad_rows, token_emissions
from .losses import sequence_loss, subword_softmax_loss
from .schemes import tags_to_spans
from .span_marginals import SpanPatterns, span_probabilities

Transitions = Tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def sentence_lengths(doc: Doc) -> List[int]:
    """Tokens per sentence (one sentence for a Doc without sentence starts)."""
    starts = sentence_starts(doc) or [0]
    return [end - start for start, end in zip(starts, starts[1:] + [len(doc)])]


def split_sequences(per_doc: Sequence[torch.Tensor], docs: List[Doc], by_sentence: bool) -> List[torch.Tensor]:
    """Per-doc rows (token-major tensors) as the sequences the tagger reads:
    the docs themselves, or (`by_sentence`) their sentences."""
    if not by_sentence:
        return list(per_doc)
    return [part for rows, doc in zip(per_doc, docs) for part in torch.split(rows, sentence_lengths(doc))]


def join_sequences(parts: List, docs: List[Doc], concat: Callable) -> List:
    """Per-sequence results back into one per doc (sequences are the docs
    themselves, or each doc's sentences in order)."""
    if len(parts) == len(docs):
        return parts
    out, k = [], 0
    for doc in docs:
        n = len(sentence_lengths(doc))
        out.append(concat(parts[k : k + n]))
        k += n
    return out


def sequence_emissions(
    scores: TagScores, docs: List[Doc], how: str, *, crf: bool, by_sentence: bool
) -> Tuple[torch.Tensor, torch.Tensor, List[int]]:
    """(B, T, K) emissions and mask of the sequences, in order, and each
    sequence's length. Subword rows become token rows by `how` (first | mean),
    as log-probabilities for the softmax tagger and raw scores for the CRF."""
    rows = token_emissions(scores.per_doc(), scores.pieces_per_token, how, log_probs=not crf)
    rows = split_sequences(rows, docs, by_sentence)
    emissions, mask = pad_rows(rows, scores.scores.shape[-1], scores.scores.device)
    return emissions, mask, [len(r) for r in rows]


@dataclass
class DecodedSequences:
    """A batch decoded as its sequences: the raw emissions (CRF scores, or the
    softmax tagger's scores before its log-softmax), their mask and lengths,
    one tag path per sequence (cut to its length), and with `with_probs` the
    (n_tokens, K) probabilities per sequence on the host."""

    emissions: torch.Tensor
    mask: torch.Tensor
    lengths: List[int]
    paths: List[List[int]]
    probs: Optional[List[numpy.ndarray]]


@dataclass
class SpanRequest:
    """What `decode_docs` scores besides the paths: `patterns` of the scheme
    (`span_marginals.span_patterns`), `transitions` with the scheme's
    constraints applied (always: a span's probability is over well-formed
    paths) and divided by `temperature` before them; `min_prob`: also every
    other span at least this probable (None: the Viterbi entities only);
    `n_best`: at most that many of those per Doc, the most probable."""

    patterns: SpanPatterns
    transitions: Transitions
    temperature: float = 1.0
    min_prob: Optional[float] = None
    n_best: Optional[int] = None


ScoredSpan = Tuple[int, int, str, float]


@dataclass
class DocSpans:
    """One Doc's spans: the Viterbi entities with their probabilities, in
    order; the further spans asked for (most probable first); the expected
    number of entities under the model."""

    entities: List[ScoredSpan]
    alternatives: List[ScoredSpan]
    expected_entities: float


class DecodedDocs(NamedTuple):
    paths: List[List[int]]
    probs: Optional[List[numpy.ndarray]]
    spans: Optional[List[DocSpans]]


def decode_sequences(
    scores: TagScores, docs: List[Doc], transitions: Transitions, *, how: str, crf: bool, by_sentence: bool,
    constrained: bool, with_probs: bool,
) -> DecodedSequences:
    """The sequences' emissions and their Viterbi paths (and probabilities)."""
    emissions, mask, lengths = sequence_emissions(scores, docs, how, crf=crf, by_sentence=by_sentence)
    tagged = emissions if crf else torch.log_softmax(emissions, dim=-1)
    paths, probs = decode_tags(tagged, mask, transitions, crf=crf, constrained=constrained, with_probs=with_probs)
    # an empty sequence decoded one dummy position
    paths = [path[:n] for path, n in zip(paths, lengths)]
    if probs is not None:
        probs = [p[:n].float().cpu().numpy() for p, n in zip(probs, lengths)]
    return DecodedSequences(emissions, mask, lengths, paths, probs)


def tempered(emissions: torch.Tensor, crf: bool, temperature: float) -> torch.Tensor:
    """The emissions of the path distribution at `temperature`: the CRF's
    scores divided by it (its transitions too, by the caller), the softmax
    tagger's log-probabilities of its scores divided by it."""
    scaled = emissions / temperature
    return scaled if crf else torch.log_softmax(scaled, dim=-1)


def viterbi_queries(decoded: DecodedSequences, patterns: SpanPatterns) -> torch.Tensor:
    """(Q, 4) long: (sequence, start, end, label index) of every entity of the
    Viterbi paths, in order."""
    label_index = {label: i for i, label in enumerate(patterns.labels)}
    rows = [(b, s, e, label_index[label]) for b, path in enumerate(decoded.paths)
            for s, e, label in tags_to_spans([patterns.tags[k] for k in path])]
    return torch.tensor(rows, dtype=torch.long).view(-1, 4)


def sequence_offsets(docs: List[Doc], by_sentence: bool) -> List[Tuple[int, int]]:
    """(doc index, first token) of each sequence."""
    if not by_sentence:
        return [(i, 0) for i in range(len(docs))]
    return [(i, int(start)) for i, doc in enumerate(docs)
            for start in numpy.cumsum([0] + sentence_lengths(doc)[:-1])]


def score_spans(decoded: DecodedSequences, docs: List[Doc], request: SpanRequest, *, crf: bool,
                by_sentence: bool) -> List[DocSpans]:
    """Each Doc's Viterbi entities with their span marginals, and the further
    spans `request` asks for, at its temperature."""
    queries = viterbi_queries(decoded, request.patterns)
    result = span_probabilities(tempered(decoded.emissions, crf, request.temperature), decoded.mask,
                                *request.transitions, request.patterns, queries=queries, min_prob=request.min_prob)
    labels = request.patterns.labels
    out = [DocSpans([], [], 0.0) for _ in docs]
    offsets = sequence_offsets(docs, by_sentence)
    for (b, s, e, label), p in zip(queries.tolist(), result.query_probs.tolist()):
        doc, offset = offsets[b]
        out[doc].entities.append((s + offset, e + offset, labels[label], p))
    # an empty sequence was scored on one dummy position: nothing of it counts
    for b, expected in enumerate(result.expected_entities.tolist()):
        out[offsets[b][0]].expected_entities += expected if decoded.lengths[b] else 0.0
    viterbi = {(offsets[b][0], s + offsets[b][1], e + offsets[b][1], label) for b, s, e, label in queries.tolist()}
    for (b, s, e, label), p in zip(result.candidates.tolist(), result.candidate_probs.tolist()):
        doc, offset = offsets[b]
        if e <= decoded.lengths[b] and (doc, s + offset, e + offset, label) not in viterbi:
            out[doc].alternatives.append((s + offset, e + offset, labels[label], p))
    for spans in out:
        spans.alternatives.sort(key=lambda span: -span[3])
        if request.n_best is not None:
            del spans.alternatives[request.n_best:]
    return out


def decode_docs(
    scores: TagScores, docs: List[Doc], transitions: Transitions, *, how: str, crf: bool, by_sentence: bool,
    constrained: bool, with_probs: bool, spans: Optional[SpanRequest] = None,
) -> DecodedDocs:
    """One tag-id path per Doc and, with `with_probs`, its (n_tokens, K) tag
    probabilities (softmax) or marginals (CRF) on the host; with `spans`, its
    scored entities (`score_spans`)."""
    decoded = decode_sequences(scores, docs, transitions, how=how, crf=crf, by_sentence=by_sentence,
                               constrained=constrained, with_probs=with_probs)
    # sentences join again into their doc
    paths = join_sequences(decoded.paths, docs, lambda parts: sum(parts, []))
    probs = None if decoded.probs is None else join_sequences(decoded.probs, docs, numpy.concatenate)
    doc_spans = None if spans is None else score_spans(decoded, docs, spans, crf=crf, by_sentence=by_sentence)
    return DecodedDocs(paths, probs, doc_spans)


def tagging_loss(
    scores: TagScores, docs: List[Doc], allowed: List[torch.Tensor], transitions: Optional[Transitions], *,
    how: str, subword_loss: str, by_sentence: bool,
) -> torch.Tensor:
    """Mean negative log-likelihood per annotated token (or subword) of the
    scores, with `allowed` (n_tokens, K) tag masks per Doc (partial labels);
    `transitions` for the CRF, None for the softmax tagger. With subword rows
    the softmax trains every subword on its word's tag (`subword_loss` "all")
    or the token scores by `how`; the CRF trains on token scores by `how`."""
    pieces = scores.pieces_per_token
    crf = transitions is not None
    if pieces is not None:  # a token without pieces has no score of its own to train
        allowed = [a | (p == 0).unsqueeze(1) for a, p in zip(allowed, pieces)]
        if not crf and subword_loss == "all":
            return subword_softmax_loss(scores.scores, allowed, pieces)
    emissions, mask, _ = sequence_emissions(scores, docs, how if crf else "first", crf=crf, by_sentence=by_sentence)
    allowed = split_sequences(allowed, docs, by_sentence)
    tag_mask = ~pad_rows([~a for a in allowed], emissions.shape[-1], scores.scores.device)[0].bool()
    return sequence_loss(emissions, mask, tag_mask, transitions)
