"""Fitting the temperature of a pipeline's `mlm_ner` components (and the
scaling of their entity probabilities), or of its classifier (`mlm_textcat`,
on texts or sentence pairs), on labelled data (`spacy_mlm calibrate`): the
components before each one (the encoder) run on fresh Docs of the data, then
the component fits them against the gold (`MLMEntityRecognizer.calibrate`, `MLMTextCategorizer.calibrate`).

`spacy train` fits them itself with the `[training.before_to_disk]` callback
`spacy_mlm.calibrated_to_disk.v1` (every shipped config has it): at each save,
on the dev corpus the training loop scores, so model-best and model-last carry
the temperature fitted at their own checkpoint."""
import itertools
import logging
from typing import Callable, Dict, Iterable, List, Optional, Sequence

from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example
from spacy.util import dot_to_object, registry

from ..errors import SpacyMlmError
from ..pipeline.ner import MLMEntityRecognizer
from ..pipeline.textcat import MLMTextCategorizer
from ..readers.common import one_hot_cats
from ..tokenization.pair import make_pair_doc
from ..util.global_batch import counted_here
from ..util.save import make_atomic_to_disk
from .evaluate import ASSIGNS, component_assigning, fresh_docs

logger = logging.getLogger(__name__)


def entity_recognizers(nlp: Language) -> List[str]:
    """The names of the pipeline's mlm_ner components."""
    return [name for name, pipe in nlp.pipeline if isinstance(pipe, MLMEntityRecognizer)]


def calibrate_entities(nlp: Language, gold_docs: Sequence[Doc], *, batch_size: int = 64,
                       names: Optional[List[str]] = None, with_scaling: bool = True) -> Dict[str, Dict[str, float]]:
    """Fit the temperature and score scaling (`with_scaling=False`: the
    temperature alone) of each mlm_ner (`names`, default all) on the entities
    of `gold_docs` (`load_gold_entities` reads them from a .spacy or CoNLL
    file); each component's report (temperature, scaling, likelihood and ECE
    before and after) by name."""
    names = entity_recognizers(nlp) if names is None else names
    if not names:
        raise SpacyMlmError("the pipeline has no mlm_ner component to calibrate")
    reports = {}
    for name in names:
        docs = _upstream(nlp, name, fresh_docs(nlp, gold_docs), batch_size)
        examples = [Example(doc, gold) for doc, gold in zip(docs, gold_docs)]
        reports[name] = nlp.get_pipe(name).calibrate(examples, batch_size=batch_size, with_scaling=with_scaling)
    return reports


def calibrate_classifier(nlp: Language, task: str, inputs: Sequence, gold: Sequence[str], *,
                         batch_size: int = 64) -> Dict[str, Dict[str, float]]:
    """Fit the temperature of the pipeline's mlm_textcat on `inputs` (texts,
    or (premise, hypothesis) pairs for task "nli", read as pair Docs in that
    order) and their gold labels; its report by name."""
    name = component_assigning(nlp, ASSIGNS[task])
    classifier = nlp.get_pipe(name) if name is not None else None
    if not isinstance(classifier, MLMTextCategorizer):
        raise SpacyMlmError(f"the pipeline has no mlm_textcat component to calibrate (it has {nlp.pipe_names})")
    made = (make_pair_doc(nlp, *x) if task == "nli" else nlp.make_doc(x) for x in inputs)
    examples = []
    for doc, label in zip(_upstream(nlp, name, made, batch_size), gold):
        reference = doc.copy()
        reference.cats = one_hot_cats([label], list(classifier.labels))
        examples.append(Example(doc, reference))
    return {name: classifier.calibrate(examples, batch_size=batch_size)}


def _upstream(nlp: Language, name: str, docs: Iterable[Doc], batch_size: int) -> Iterable[Doc]:
    """`docs` through the components before `name`."""
    for _, upstream in nlp.pipeline[: nlp.pipe_names.index(name)]:
        docs = upstream.pipe(docs, batch_size=batch_size)
    return docs


def calibrated_components(nlp: Language) -> List[str]:
    """The enabled components that fit a temperature (mlm_ner, mlm_textcat)."""
    return [name for name, pipe in nlp.pipeline if isinstance(pipe, (MLMEntityRecognizer, MLMTextCategorizer))]


def calibrate_on_examples(nlp: Language, examples: Sequence[Example], *, batch_size: int = 64) -> Dict[str, Dict]:
    """Fit the temperature of every calibrated component on `examples` (a
    corpus reader's, as `spacy train` scores them: their predicted Docs
    unannotated); each component's report by name. A component that predicts
    no entity yet (early in training) keeps its temperature: its report says why."""
    reports = {}
    for name in calibrated_components(nlp):
        predicted = _upstream(nlp, name, (eg.predicted.copy() for eg in examples), batch_size)
        ready = [Example(doc, eg.reference) for doc, eg in zip(predicted, examples)]
        try:
            reports[name] = nlp.get_pipe(name).calibrate(ready, batch_size=batch_size)
        except SpacyMlmError as err:
            reports[name] = {"skipped": str(err)}
    return reports


@registry.callbacks("spacy_mlm.calibrated_to_disk.v1")
def make_calibrated_to_disk(dev_corpus: str = "corpora.dev", max_examples: int = 1000,
                            batch_size: int = 64) -> Callable[[Language], Language]:
    """`[training.before_to_disk]` callback: before each save of `spacy train`
    (model-last at every evaluation, model-best a copy of it), fit the
    temperature of every mlm_ner and mlm_textcat (and mlm_ner's score
    scaling) on the first `max_examples` examples (0: all) of `dev_corpus`
    (the config's reader, as [training] dev_corpus names it), then save atomically as `spacy_mlm.atomic_to_disk.v1`
    does. The temperature changes probabilities only: no entity, label or
    score that training selects on moves (unless `threshold` is set). Costs one
    pass over those examples per save; a pipeline with neither component is
    saved without it."""

    def before_to_disk(nlp: Language) -> Language:
        if calibrated_components(nlp):
            # only the dev reader is built (the train reader may read its whole file when built)
            corpus = registry.resolve({"dev": dot_to_object(nlp.config.interpolate(), dev_corpus)})["dev"]
            examples = list(itertools.islice(corpus(nlp), max_examples or None))
            with counted_here():  # under spacy_mlm train's torchrun only the first process saves
                reports = calibrate_on_examples(nlp, examples, batch_size=batch_size)
            for name, report in reports.items():
                if "skipped" in report:
                    logger.warning("'%s' keeps temperature %s: %s", name, nlp.get_pipe(name).cfg.get("temperature", 1.0),
                                   report["skipped"])
                else:
                    scaling = report.get("score_scaling")
                    logger.info("'%s' temperature %.3f%s on %d dev examples", name, report["temperature"],
                                f", score scaling [{scaling[0]:.3f}, {scaling[1]:.3f}]" if scaling else "", len(examples))
        return save_atomically(nlp)

    save_atomically = make_atomic_to_disk()
    return before_to_disk
