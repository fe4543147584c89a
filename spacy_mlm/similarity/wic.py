"""Word-in-Context with contextual vectors: the target word's vector in each
sentence (the `mlm_vectors` span hook, so the pipeline's layer choice and
fitted transform apply), their cosine, and one threshold tuned on train."""
from typing import Dict, Iterable, List, Sequence, Tuple

import numpy
from spacy.language import Language

from ..readers.wic import WicExample, target_span
from .scoring import accuracy_at, cosine_rows, tune_threshold


def wic_sentences(examples: Iterable[WicExample]) -> List[str]:
    """Both sentences of every example, without repeats (for fitting transforms)."""
    seen: Dict[str, None] = {}
    for e in examples:
        seen.setdefault(e.sentence1)
        seen.setdefault(e.sentence2)
    return list(seen)


def target_vectors(
    nlp: Language, examples: Sequence[WicExample], batch_size: int = 64
) -> Tuple[numpy.ndarray, numpy.ndarray]:
    """(n, width) vectors of the target in sentence1 and in sentence2."""
    texts = [e.sentence1 for e in examples] + [e.sentence2 for e in examples]
    spans = [e.char_span1 for e in examples] + [e.char_span2 for e in examples]
    vectors = [target_span(doc, span).vector for doc, span in zip(nlp.pipe(texts, batch_size=batch_size), spans)]
    n = len(examples)
    return numpy.asarray(vectors[:n]), numpy.asarray(vectors[n:])


def wic_scores(nlp: Language, examples: Sequence[WicExample], batch_size: int = 64) -> numpy.ndarray:
    return cosine_rows(*target_vectors(nlp, examples, batch_size))


def labels_of(examples: Sequence[WicExample]) -> numpy.ndarray:
    missing = [e.line for e in examples if e.label is None]
    if missing:
        raise ValueError(f"{len(missing)} examples have no gold label (first at line {missing[0]})")
    return numpy.asarray([e.label for e in examples], dtype=bool)


def threshold_evaluation(
    train_scores: Sequence[float], train_labels: Sequence[bool], dev_scores: Sequence[float], dev_labels: Sequence[bool]
) -> Dict[str, float]:
    threshold, train_acc = tune_threshold(train_scores, train_labels)
    return {"threshold": threshold, "train_acc": train_acc, "dev_acc": accuracy_at(dev_scores, dev_labels, threshold)}


def evaluate_wic(
    nlp: Language, train: Sequence[WicExample], dev: Sequence[WicExample], batch_size: int = 64
) -> Dict[str, float]:
    """Tune the cosine threshold on `train`, report accuracy on `dev`."""
    return threshold_evaluation(
        wic_scores(nlp, train, batch_size), labels_of(train), wic_scores(nlp, dev, batch_size), labels_of(dev)
    )
