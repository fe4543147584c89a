"""Scores of a text classifier on spaCy Examples: spaCy's cats scores plus the
accuracy people quote, registered as `spacy_mlm.textcat_scorer.v1` (the
scorer of `mlm_textcat`, so `spacy train` and `nlp.evaluate` report the same
numbers as `spacy_mlm evaluate`).

A gold label the classifier does not know is an error here, not a silent
miss: spaCy's scorer reads only the component's own labels, so such a row
would be scored as if it had no label at all.
"""
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from spacy.scorer import Scorer
from spacy.training import Example
from spacy.util import registry

from ..errors import SpacyMlmError


def unknown_gold_labels(gold_cats: Iterable[Mapping[str, float]], labels: Sequence[str]) -> List[str]:
    """Gold labels set (>= 0.5) in some `gold_cats` that are not among `labels`,
    sorted. spaCy's textcat code reads only the cats of the component's own
    labels, so such a row would be trained and scored as if it had no label:
    a label-set mismatch between config and data would go unnoticed."""
    known = set(labels)
    return sorted({label for cats in gold_cats for label, value in cats.items() if value >= 0.5 and label not in known})


def cats_accuracy(
    pairs: Iterable[Tuple[Mapping[str, float], Mapping[str, float]]],
    labels: Sequence[str],
    exclusive_classes: bool,
    threshold: float = 0.5,
) -> Optional[float]:
    """Share of (predicted cats, gold cats) pairs classified right. Exclusive: the
    top predicted label is the top gold label. Multi-label: every gold-annotated
    label is on the right side of `threshold` (exact match). Pairs without gold
    labels are left out; None if none are left."""
    labels = list(labels)
    right = total = 0
    for pred, gold in pairs:
        known = [label for label in labels if label in gold]
        if not known:
            continue
        if exclusive_classes:
            if max(gold[label] for label in known) <= 0:
                continue
            best_gold = max(known, key=lambda label: gold[label])
            best_pred = max(labels, key=lambda label: pred.get(label, 0.0))
            right += best_pred == best_gold
        else:
            right += all((pred.get(label, 0.0) >= threshold) == (gold[label] >= 0.5) for label in known)
        total += 1
    return right / total if total else None


def textcat_score(
    examples: Iterable[Example],
    *,
    labels: Sequence[str],
    exclusive_classes: bool = True,
    threshold: float = 0.5,
    positive_label: Optional[str] = None,
    **cfg,
) -> Dict[str, object]:
    """`Scorer.score_cats` (cats_score, macro F, per-label P/R/F, AUC) plus
    `cats_accuracy`. `**cfg` takes the other settings spaCy passes a scorer."""
    examples = list(examples)
    unknown = unknown_gold_labels((eg.reference.cats for eg in examples), labels)
    if unknown:
        raise SpacyMlmError(
            f"the gold cats have labels {unknown} that the classifier does not know (it has {list(labels)}); "
            "those examples would be scored as if they had no label. Evaluate on data labelled like the training data"
        )
    scores = Scorer.score_cats(
        examples,
        "cats",
        labels=labels,
        multi_label=not exclusive_classes,
        threshold=threshold,
        positive_label=positive_label,
    )
    scores["cats_accuracy"] = cats_accuracy(
        ((eg.predicted.cats, eg.reference.cats) for eg in examples), labels, exclusive_classes, threshold
    )
    return scores


@registry.scorers("spacy_mlm.textcat_scorer.v1")
def make_textcat_scorer() -> Callable:
    """spaCy's `Scorer.score_cats` (multi-label or not, as the component is) plus
    `cats_accuracy`; a gold label the component does not know is an error."""
    return textcat_score
