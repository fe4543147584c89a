"""Scoring a trained pipeline on a gold data file, for every task; what
`spacy_mlm evaluate` (and its aliases `evaluate-ner` and `compare`) reports.

NER: the pipeline tags fresh Docs made from the gold words (it never sees the
gold annotation) and entities are scored by exact span and type
(`entities.score_entities`: a partial span is one false positive and one false
negative), counted per document. Classifiers (text classes, NLI pairs): spaCy's
cats scores plus accuracy (`textcat.textcat_score`), the confusion matrix, and
right/wrong counts per example (`classes.correctness_counts`).

With a baseline pipeline (e.g. the same task trained on the encoder before
pretraining) both are scored on the same file and `bootstrap.paired_bootstrap`
tests the difference, resampling the same documents (entity F1) or examples
(accuracy) for both.
"""
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy
from spacy.language import Language
from spacy.tokens import Doc, Span
from spacy.training import Example

from ..errors import DataFormatError, SpacyMlmError
from ..pipeline.textcat import classify_pairs
from ..readers.common import one_hot_cats, require_examples
from ..readers.conll import load_ner_docs
from ..readers.nli import THREE_WAY, TWO_WAY, read_nli
from ..pipeline.ner import SPAN_PROB_ATTR
from ..readers.textcat import read_textcat
from ..scoring.bootstrap import BootstrapResult, paired_bootstrap
from ..scoring.calibration import decision_confidence, expected_calibration_error
from ..scoring.classes import confusion_matrix, correctness_counts
from ..scoring.entities import Entity, doc_entities, per_doc_counts, score_entities
from ..scoring.textcat import textcat_score
from ..tasks import TASKS as TASK_TABLE, evaluated_tasks
from ..util.progress import track

# The tasks evaluate scores (spacy_mlm.tasks.TASKS: those with an `assigns`), and "auto".
TASKS = ("auto", *(task.name for task in evaluated_tasks()))
# The attribute a pipeline must set for a task, and the score that sums it up.
ASSIGNS = {task.name: task.assigns for task in evaluated_tasks()}
HEADLINE = {task.name: task.headline for task in evaluated_tasks()}
# What the bootstrap resamples the difference of (F1 from per-document counts;
# for classifiers micro-F1 of the right/wrong counts, which is accuracy).
STATISTIC = {task.name: task.statistic for task in evaluated_tasks()}


@dataclass
class PipelineScores:
    """One pipeline's scores on one file. `counts` is (n_examples, 3) tp/fp/fn
    per document (NER) or per example (classifiers): the unit the bootstrap
    resamples, and how many examples were scored."""

    task: str
    scores: Dict[str, object]
    counts: numpy.ndarray
    # NER: (gold doc, predicted entities) for each document, for displaCy.
    entity_docs: List[Tuple[Doc, List[Entity]]] = field(default_factory=list)
    # Classifiers: the label order of the confusion matrix (rows gold, columns predicted).
    labels: List[str] = field(default_factory=list)
    confusion_matrix: Optional[numpy.ndarray] = None
    # NER with scored entities (mlm_ner's span._.mlm_prob): each predicted entity's score and whether it is right
    entity_confidence: Optional[Tuple[numpy.ndarray, numpy.ndarray]] = None

    @property
    def metric(self) -> str:
        return HEADLINE[self.task]

    @property
    def value(self) -> float:
        return self.scores[self.metric]

    @property
    def n_examples(self) -> int:
        return len(self.counts)


@dataclass
class Evaluation:
    """The model's scores on `data` and, with a baseline, the baseline's and
    the paired bootstrap of model minus baseline."""

    task: str
    data: Path
    model: PipelineScores
    baseline: Optional[PipelineScores] = None
    bootstrap: Optional[BootstrapResult] = None

    @property
    def statistic(self) -> str:
        return STATISTIC[self.task]


# -- which task -----------------------------------------------------------------------


def component_assigning(nlp: Language, attribute: str) -> Optional[str]:
    """Name of the first pipe that sets `attribute` (e.g. "doc.ents")."""
    for name in nlp.pipe_names:
        if attribute in nlp.get_pipe_meta(name).assigns:
            return name
    return None


def trained_on_pairs(nlp: Language, name: str) -> Optional[bool]:
    """Whether the classifier `name` was trained on pair Docs (recorded when it
    was initialized, `pipeline.pair_input`); None for pipelines that predate it."""
    return getattr(nlp.get_pipe(name), "cfg", {}).get("pair_input")


def reads_pairs(nlp: Language, name: str) -> bool:
    """Whether the classifier `name` reads sentence pairs: as recorded when it was
    initialized, or, for pipelines that predate the record, whether its labels are NLI labels."""
    pairs = trained_on_pairs(nlp, name)
    if pairs is not None:
        return pairs
    labels = set(nlp.get_pipe(name).labels)
    return bool(labels) and labels <= set(THREE_WAY + TWO_WAY)


def detect_task(nlp: Language) -> str:
    """The first task of the table (`spacy_mlm.tasks.TASKS`) whose attribute a
    component of the pipeline sets: ner if it sets entities; for doc.cats, which
    textcat and nli share, nli if its classifier reads sentence pairs (`reads_pairs`)."""
    attributes = list(dict.fromkeys(task.assigns for task in evaluated_tasks()))
    for attribute in attributes:
        name = component_assigning(nlp, attribute)
        if name is None:
            continue
        candidates = [task for task in evaluated_tasks() if task.assigns == attribute]
        if len(candidates) == 1:
            return candidates[0].name
        pairs = reads_pairs(nlp, name)
        return next(task.name for task in candidates if task.pairs == pairs)
    raise SpacyMlmError(f"the pipeline ({', '.join(nlp.pipe_names)}) sets neither {' nor '.join(attributes)}")


def resolve_task(nlp: Language, task: str) -> str:
    """`task`, or the detected one for "auto"; an error if the pipeline has no
    component for it (scoring a textcat pipeline as NER would report F1 0)."""
    if task not in TASKS:
        raise SpacyMlmError(f"task must be one of {', '.join(TASKS)}, got {task!r}")
    if task == "auto":
        return detect_task(nlp)
    name = component_assigning(nlp, ASSIGNS[task])
    if name is None:
        raise SpacyMlmError(
            f"task {task} needs a component that sets {ASSIGNS[task]}; the pipeline has {', '.join(nlp.pipe_names) or 'none'}"
        )
    wanted = TASK_TABLE[task].pairs
    pairs = trained_on_pairs(nlp, name) if wanted is not None else None
    if pairs is True and wanted is False:
        raise SpacyMlmError(
            f"'{name}' was trained on sentence pairs: scoring it on single texts (--task {task}) would read each "
            f"pair as one text. Use --task {pair_task(True)} (or auto) with a sentence-pair file"
        )
    if pairs is False and wanted is True:
        raise SpacyMlmError(
            f"'{name}' was trained on single texts, not sentence pairs: use --task {pair_task(False)} (or auto)"
        )
    return task


def pair_task(pairs: bool) -> str:
    """The evaluated task whose classifier reads sentence pairs (True) or single texts (False)."""
    return next(task.name for task in evaluated_tasks() if task.pairs is pairs)


# -- NER ------------------------------------------------------------------------------


def load_gold_entities(nlp: Language, data: Path, n_sents: int = 1) -> Tuple[List[Doc], List[List[Entity]]]:
    """Gold docs of a .spacy or CoNLL file and their entities; an error naming
    the file if it holds no documents (F1 on nothing would read as 0.00)."""
    docs = load_ner_docs(data, nlp.vocab, n_sents=n_sents)
    require_examples(data, len(docs), "documents to score")
    return docs, [doc_entities(d) for d in docs]


def predict_entities(
    nlp: Language, gold_docs: Sequence[Doc], batch_size: int = 64, progress: str = ""
) -> List[List[Entity]]:
    """The pipeline's entities on fresh docs with the gold docs' words and sentence
    starts (`predict_docs`)."""
    return [doc_entities(doc) for doc in predict_docs(nlp, gold_docs, batch_size, progress)]


def predict_docs(nlp: Language, gold_docs: Sequence[Doc], batch_size: int = 64, progress: str = "") -> List[Doc]:
    """The pipeline run on fresh docs with the gold docs' words and sentence
    starts (the pipeline never sees the gold entities; an encoder with context =
    "document" reads each sentence in its document, so a whole-document file is
    scored as such). `progress`: the name under which progress is shown ("": none)."""
    docs = nlp.pipe(fresh_docs(nlp, gold_docs), batch_size=batch_size)
    return list(track(docs, len(gold_docs), progress, "docs", quiet=not progress))


def fresh_docs(nlp: Language, gold_docs: Sequence[Doc]) -> Iterator[Doc]:
    """Docs with the gold docs' words, spaces and sentence starts, and no annotation."""
    return (
        Doc(nlp.vocab, words=[t.text for t in d], spaces=[bool(t.whitespace_) for t in d],
            sent_starts=[t.is_sent_start for t in d] if d.has_annotation("SENT_START") else None)
        for d in gold_docs
    )


def entity_confidence(gold: Sequence[List[Entity]], docs: Sequence[Doc]) -> Optional[Tuple[numpy.ndarray, numpy.ndarray]]:
    """Each predicted entity's score (`span._.mlm_prob`) and whether it is a
    gold entity (exact span and type); None if an entity has no score (a
    pipeline without `mlm_ner`)."""
    if not Span.has_extension(SPAN_PROB_ATTR):
        return None
    scores, correct = [], []
    for gold_entities, doc in zip(gold, docs):
        wanted = set(gold_entities)
        for ent in doc.ents:
            score = ent._.get(SPAN_PROB_ATTR)
            if score is None:
                return None
            scores.append(score)
            correct.append((ent.start, ent.end, ent.label_) in wanted)
    return numpy.array(scores, dtype=float), numpy.array(correct, dtype=bool)


def score_ner(nlp: Language, data: Path, n_sents: int = 1, batch_size: int = 64, progress: str = "") -> PipelineScores:
    """Entity P/R/F1 overall and per type, per-document counts, and what was predicted where."""
    gold_docs, gold = load_gold_entities(nlp, data, n_sents)
    docs = predict_docs(nlp, gold_docs, batch_size, progress)
    predicted = [doc_entities(doc) for doc in docs]
    scores = score_entities(gold, predicted)
    confidence = entity_confidence(gold, docs)
    if confidence is not None:
        scores["ents_ece"] = expected_calibration_error(*confidence)
    return PipelineScores("ner", scores, per_doc_counts(gold, predicted), entity_docs=list(zip(gold_docs, predicted)),
                          entity_confidence=confidence)


# -- classifiers ----------------------------------------------------------------------


def read_classification(task: str, data: Path) -> Tuple[List, List[str]]:
    """Inputs (texts, or (premise, hypothesis) pairs for nli) and their gold
    labels; an error naming the file if it has no labelled rows."""
    if task == "nli":
        parsed = read_nli(data)
        require_examples(data, len(parsed.examples), "labelled sentence pairs to score", parsed.skipped)
        return [(e.premise, e.hypothesis) for e in parsed.examples], [e.label for e in parsed.examples]
    parsed = read_textcat(data)
    require_examples(data, len(parsed.examples), "labelled texts to score", parsed.skipped)
    if parsed.multi_label:
        raise DataFormatError(data, None, "evaluate scores exclusive classes; this file has multi-label rows")
    return [e.text for e in parsed.examples], [e.labels[0] for e in parsed.examples]


def predict_cats(
    nlp: Language, task: str, inputs: Sequence, batch_size: int = 64, progress: str = ""
) -> List[Dict[str, float]]:
    """doc.cats for each input: a text, or a (premise, hypothesis) pair for nli.
    `progress`: as for `predict_entities` (counted as the pipeline reads the inputs)."""
    counted = track(inputs, len(inputs), progress, "docs", quiet=not progress)
    if task == "nli":
        return classify_pairs(nlp, counted, batch_size=batch_size)
    return [dict(doc.cats) for doc in nlp.pipe(counted, batch_size=batch_size)]


def score_classifier(nlp: Language, task: str, data: Path, batch_size: int = 64, progress: str = "") -> PipelineScores:
    """Exclusive classes: the predicted label is the most probable one."""
    labels = list(nlp.get_pipe(component_assigning(nlp, ASSIGNS[task])).labels)
    inputs, gold = read_classification(task, data)
    unknown = sorted(set(gold) - set(labels))
    if unknown:
        raise SpacyMlmError(f"{data} has labels {unknown} that the pipeline does not know (it has {labels})")
    cats = predict_cats(nlp, task, inputs, batch_size, progress)
    predicted = [max(labels, key=lambda label: c.get(label, 0.0)) for c in cats]
    examples = []
    for c, g in zip(cats, gold):
        doc = nlp.make_doc("")
        doc.cats = c
        reference = doc.copy()
        reference.cats = one_hot_cats([g], labels)
        examples.append(Example(doc, reference))
    scores = textcat_score(examples, labels=labels, exclusive_classes=True)
    probs = numpy.array([[c.get(label, 0.0) for label in labels] for c in cats])
    truths = numpy.array([[float(label == g) for label in labels] for g in gold])
    scores["cats_ece"] = expected_calibration_error(*decision_confidence(probs, truths, numpy.ones_like(truths), True))
    return PipelineScores(
        task,
        scores,
        correctness_counts(gold, predicted),
        labels=labels,
        confusion_matrix=confusion_matrix(gold, predicted, labels),
    )


# -- both -----------------------------------------------------------------------------


def score_pipeline(nlp: Language, task: str, data: Path, n_sents: int = 1, batch_size: int = 64,
                   progress: str = "") -> PipelineScores:
    """`nlp` scored on `data` for `task` (ner, textcat or nli)."""
    if task == "ner":
        return score_ner(nlp, data, n_sents, batch_size, progress)
    return score_classifier(nlp, task, data, batch_size, progress)


def evaluate_pipeline(
    nlp: Language,
    data: Path,
    task: str = "auto",
    baseline: Optional[Language] = None,
    *,
    n_sents: int = 1,
    batch_size: int = 64,
    n_samples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    quiet: bool = True,
) -> Evaluation:
    """Score `nlp` on `data` (task "auto": detected from the pipeline); with a
    `baseline` pipeline for the same task, score it too and run the paired
    bootstrap (`n_samples`, `seed`, `confidence`) of nlp minus baseline.
    `n_sents`: sentences per Doc when `data` is CoNLL. Progress on stderr
    unless `quiet`."""
    data = Path(data)
    task = resolve_task(nlp, task)
    model = score_pipeline(nlp, task, data, n_sents, batch_size, "" if quiet else "evaluate")
    if baseline is None:
        return Evaluation(task, data, model)
    base_task = resolve_task(baseline, task)
    base = score_pipeline(baseline, base_task, data, n_sents, batch_size, "" if quiet else "baseline")
    comparison = paired_bootstrap(model.counts, base.counts, n_samples=n_samples, seed=seed, confidence=confidence)
    return Evaluation(task, data, model, base, comparison)
