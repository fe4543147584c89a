"""Fitting the temperature of a pipeline's `mlm_ner` components, or of its
classifier (`mlm_textcat`, on texts or sentence pairs), on labelled data
(`spacy_mlm calibrate`): the components before each one (the encoder) run on
fresh Docs of the data, then the component fits its temperature on them
against the gold (`MLMEntityRecognizer.calibrate`, `MLMTextCategorizer.calibrate`)."""
from typing import Dict, Iterable, List, Optional, Sequence

from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example

from ..errors import SpacyMlmError
from ..pipeline.ner import MLMEntityRecognizer
from ..pipeline.textcat import MLMTextCategorizer
from ..readers.common import one_hot_cats
from ..tokenization.pair import make_pair_doc
from .evaluate import ASSIGNS, component_assigning, fresh_docs


def entity_recognizers(nlp: Language) -> List[str]:
    """The names of the pipeline's mlm_ner components."""
    return [name for name, pipe in nlp.pipeline if isinstance(pipe, MLMEntityRecognizer)]


def calibrate_entities(nlp: Language, gold_docs: Sequence[Doc], *, batch_size: int = 64,
                       names: Optional[List[str]] = None) -> Dict[str, Dict[str, float]]:
    """Fit the temperature of each mlm_ner (`names`, default all) on the
    entities of `gold_docs` (`load_gold_entities` reads them from a .spacy or
    CoNLL file); each component's report (temperature, likelihood and ECE
    before and after) by name."""
    names = entity_recognizers(nlp) if names is None else names
    if not names:
        raise SpacyMlmError("the pipeline has no mlm_ner component to calibrate")
    reports = {}
    for name in names:
        docs = _upstream(nlp, name, fresh_docs(nlp, gold_docs), batch_size)
        examples = [Example(doc, gold) for doc, gold in zip(docs, gold_docs)]
        reports[name] = nlp.get_pipe(name).calibrate(examples, batch_size=batch_size)
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
