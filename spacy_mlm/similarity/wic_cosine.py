"""Word-in-Context with contextual vectors: the target word's vector in each
sentence (the `mlm_vectors` span hook, so the pipeline's layer choice and
fitted transform apply), optionally mixed with its sentence's vector, their
cosine, and a threshold (one, or one per part of speech) tuned on train."""
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy
from spacy.language import Language

from ..errors import SpacyMlmError
from ..readers.wic import WicExample, target_span
from ..scoring.similarity import accuracy_at, predict_by_group, tune_group_thresholds, tune_threshold
from ..util.vectors import cosine_rows
from ..util.progress import track


def wic_sentences(examples: Iterable[WicExample]) -> List[str]:
    """Both sentences of every example, without repeats (for fitting transforms)."""
    seen: Dict[str, None] = {}
    for e in examples:
        seen.setdefault(e.sentence1)
        seen.setdefault(e.sentence2)
    return list(seen)


def mix_context(target, sentence, context_weight: float) -> numpy.ndarray:
    """(1 - w) * target + w * sentence vector. A small encoder's token vector
    carries little of its context by itself; the sentence mean adds the
    context words that decide the sense ("carry gear" vs "sound carries").
    w = 0 is the target alone; w = 1 would ignore the target entirely."""
    if not 0.0 <= context_weight <= 1.0:
        raise SpacyMlmError(f"context_weight must be in [0, 1], got {context_weight}")
    target = numpy.asarray(target, dtype="float32")
    if context_weight == 0.0:
        return target
    return (1.0 - context_weight) * target + context_weight * numpy.asarray(sentence, dtype="float32")


def target_vectors(
    nlp: Language, examples: Sequence[WicExample], batch_size: int = 64, context_weight: float = 0.0,
    progress: str = "",
) -> Tuple[numpy.ndarray, numpy.ndarray]:
    """(n, width) vectors of the target in sentence1 and in sentence2: the
    target span's vector mixed with `doc.vector` by `context_weight`.
    `progress`: the name under which progress is shown ("": none)."""
    texts = [e.sentence1 for e in examples] + [e.sentence2 for e in examples]
    spans = [e.char_span1 for e in examples] + [e.char_span2 for e in examples]
    docs = track(nlp.pipe(texts, batch_size=batch_size), len(texts), progress, "sentences", quiet=not progress)
    vectors = [mix_context(target_span(doc, span).vector, doc.vector, context_weight) for doc, span in zip(docs, spans)]
    n = len(examples)
    return numpy.asarray(vectors[:n]), numpy.asarray(vectors[n:])


def wic_scores(
    nlp: Language, examples: Sequence[WicExample], batch_size: int = 64, context_weight: float = 0.0,
    progress: str = "",
) -> numpy.ndarray:
    return cosine_rows(*target_vectors(nlp, examples, batch_size, context_weight, progress))


def labels_of(examples: Sequence[WicExample]) -> numpy.ndarray:
    missing = [e.line for e in examples if e.label is None]
    if missing:
        raise SpacyMlmError(f"{len(missing)} examples have no gold label (first at line {missing[0]})")
    return numpy.asarray([e.label for e in examples], dtype=bool)


def pos_of(examples: Sequence[WicExample]) -> List[str]:
    return [e.pos for e in examples]


def threshold_evaluation(
    train_scores: Sequence[float],
    train_labels: Sequence[bool],
    dev_scores: Sequence[float],
    dev_labels: Sequence[bool],
    train_groups: Optional[Sequence[str]] = None,
    dev_groups: Optional[Sequence[str]] = None,
) -> Dict[str, object]:
    """Threshold(s) tuned on train, accuracy on dev. With groups (both or
    neither), one threshold per group; dev groups unseen in train use the
    threshold tuned on all of train."""
    if (train_groups is None) != (dev_groups is None):
        raise SpacyMlmError("give groups for both train and dev, or for neither")
    if train_groups is None:
        threshold, train_acc = tune_threshold(train_scores, train_labels)
        return {"threshold": threshold, "train_acc": train_acc, "dev_acc": accuracy_at(dev_scores, dev_labels, threshold)}
    thresholds, fallback, train_acc = tune_group_thresholds(train_scores, train_labels, train_groups)
    predicted = predict_by_group(dev_scores, dev_groups, thresholds, fallback)
    dev_acc = float((predicted == numpy.asarray(dev_labels, dtype=bool)).mean())
    return {"threshold": fallback, "thresholds": thresholds, "train_acc": train_acc, "dev_acc": dev_acc}


def evaluate_wic(
    nlp: Language,
    train: Sequence[WicExample],
    dev: Sequence[WicExample],
    batch_size: int = 64,
    context_weight: float = 0.0,
    threshold_per_pos: bool = False,
    quiet: bool = True,
) -> Dict[str, object]:
    """Tune the cosine threshold on `train` (per part of speech if asked),
    report accuracy on `dev`. Progress on stderr unless `quiet`."""
    groups = (pos_of(train), pos_of(dev)) if threshold_per_pos else (None, None)
    names = ("", "") if quiet else ("wic train", "wic dev")
    return threshold_evaluation(
        wic_scores(nlp, train, batch_size, context_weight, names[0]), labels_of(train),
        wic_scores(nlp, dev, batch_size, context_weight, names[1]), labels_of(dev),
        *groups,
    )
