"""Entity-level precision / recall / F1 by exact span match (the CoNLL counting).

A predicted entity is a true positive only if a gold entity has the same start,
end and type. Anything else counts against both sides: predicting "Jane" where
the gold entity is "Jane Villanueva" is one false positive ("Jane") and one false
negative ("Jane Villanueva"), not half a hit.

Counts are kept per document (rows of tp, fp, fn) so that the paired bootstrap
can resample documents and recompute F1 from the resampled sums.
"""
from typing import Dict, Iterable, List, Sequence, Set, Tuple

import numpy

from ..errors import DataError

Entity = Tuple[int, int, str]


def count_matches(gold: Iterable[Entity], pred: Iterable[Entity]) -> Tuple[int, int, int]:
    """(tp, fp, fn) for one document."""
    gold_set, pred_set = set(gold), set(pred)
    tp = len(gold_set & pred_set)
    return tp, len(pred_set) - tp, len(gold_set) - tp


def prf(tp: float, fp: float, fn: float) -> Tuple[float, float, float]:
    """Precision, recall, F1; 0 where undefined (no predictions / no gold)."""
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return p, r, f


def f1_from_counts(counts: numpy.ndarray) -> numpy.ndarray:
    """F1 for count arrays of shape (..., 3) = (tp, fp, fn), vectorised (F1 =
    2tp / (2tp + fp + fn), 0 where that is 0/0)."""
    counts = numpy.asarray(counts, dtype=float)
    tp, fp, fn = counts[..., 0], counts[..., 1], counts[..., 2]
    denom = 2 * tp + fp + fn
    return numpy.divide(2 * tp, denom, out=numpy.zeros_like(denom), where=denom > 0)


def per_doc_counts(gold_docs: Sequence[Iterable[Entity]], pred_docs: Sequence[Iterable[Entity]]) -> numpy.ndarray:
    """(n_docs, 3) array of tp, fp, fn."""
    if len(gold_docs) != len(pred_docs):
        raise DataError(f"{len(gold_docs)} gold documents but {len(pred_docs)} predicted ones")
    return numpy.array(
        [count_matches(g, p) for g, p in zip(gold_docs, pred_docs)], dtype=numpy.int64
    ).reshape(-1, 3)


def score_entities(
    gold_docs: Sequence[Iterable[Entity]], pred_docs: Sequence[Iterable[Entity]]
) -> Dict[str, object]:
    """``ents_p``, ``ents_r``, ``ents_f`` overall and ``ents_per_type``
    ``{type: {"p", "r", "f", "support"}}`` (the keys spaCy's scorer uses, so the
    numbers can be compared side by side), plus the raw ``tp``/``fp``/``fn``."""
    if len(gold_docs) != len(pred_docs):
        raise DataError(f"{len(gold_docs)} gold documents but {len(pred_docs)} predicted ones")
    totals = numpy.zeros(3, dtype=numpy.int64)
    by_type: Dict[str, List[int]] = {}
    for gold, pred in zip(gold_docs, pred_docs):
        gold_set: Set[Entity] = set(gold)
        pred_set: Set[Entity] = set(pred)
        totals += count_matches(gold_set, pred_set)
        for label in {e[2] for e in gold_set | pred_set}:
            row = by_type.setdefault(label, [0, 0, 0, 0])
            tp, fp, fn = count_matches(
                (e for e in gold_set if e[2] == label), (e for e in pred_set if e[2] == label)
            )
            row[0] += tp
            row[1] += fp
            row[2] += fn
            row[3] += tp + fn
    p, r, f = prf(*totals)
    per_type = {}
    for label in sorted(by_type):
        tp, fp, fn, support = by_type[label]
        tp_p, tp_r, tp_f = prf(tp, fp, fn)
        per_type[label] = {"p": tp_p, "r": tp_r, "f": tp_f, "support": support}
    return {
        "ents_p": p,
        "ents_r": r,
        "ents_f": f,
        "ents_per_type": per_type,
        "tp": int(totals[0]),
        "fp": int(totals[1]),
        "fn": int(totals[2]),
    }


def doc_entities(doc) -> List[Entity]:
    """A spaCy Doc's entities as (start, end, label) token spans."""
    return [(ent.start, ent.end, ent.label_) for ent in doc.ents]
