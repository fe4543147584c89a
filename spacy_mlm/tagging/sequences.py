"""A batch of tag scores read as tag sequences: which sequences a batch of Docs
is (the Docs themselves, or with a document-context encoder each sentence on
its own, so that a document and its sentences given one by one get the same
tags), their (B, T, K) emissions, their decoding back into one tag path per
Doc, and their training loss. Torch on the scores' device; what the
`mlm_ner` component adds is only its settings, its labels and the gold.
"""
from typing import Callable, List, Optional, Sequence, Tuple

import numpy
import torch
from spacy.tokens import Doc

from ..models.tagger import TagScores
from ..tokenization.context import sentence_starts
from .decoding import decode_tags
from .emissions import pad_rows, token_emissions
from .losses import sequence_loss, subword_softmax_loss

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


def decode_docs(
    scores: TagScores, docs: List[Doc], transitions: Transitions, *, how: str, crf: bool, by_sentence: bool,
    constrained: bool, with_probs: bool,
) -> Tuple[List[List[int]], Optional[List[numpy.ndarray]]]:
    """One tag-id path per Doc and, with `with_probs`, its (n_tokens, K) tag
    probabilities (softmax) or marginals (CRF) on the host."""
    emissions, mask, lengths = sequence_emissions(scores, docs, how, crf=crf, by_sentence=by_sentence)
    if not crf:
        emissions = torch.log_softmax(emissions, dim=-1)
    paths, probs = decode_tags(emissions, mask, transitions, crf=crf, constrained=constrained, with_probs=with_probs)
    # an empty sequence decoded one dummy position; sentences join again into their doc
    paths = join_sequences([path[:n] for path, n in zip(paths, lengths)], docs, lambda parts: sum(parts, []))
    if probs is not None:
        probs = join_sequences([p[:n].float().cpu().numpy() for p, n in zip(probs, lengths)], docs, numpy.concatenate)
    return paths, probs


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
