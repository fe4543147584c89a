"""Fitting the temperature of every `mlm_ner` in a pipeline on a labelled
file (`spacy_mlm calibrate`): the components before each one (the encoder) run
on fresh Docs of the file's words, then the component fits its temperature on
them against the gold entities (`MLMEntityRecognizer.calibrate`)."""
from typing import Dict, List, Optional, Sequence

from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example

from ..errors import SpacyMlmError
from ..pipeline.ner import MLMEntityRecognizer
from .evaluate import fresh_docs


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
        docs = fresh_docs(nlp, gold_docs)
        for _, upstream in nlp.pipeline[: nlp.pipe_names.index(name)]:
            docs = upstream.pipe(docs, batch_size=batch_size)
        examples = [Example(doc, gold) for doc, gold in zip(docs, gold_docs)]
        reports[name] = nlp.get_pipe(name).calibrate(examples, batch_size=batch_size)
    return reports
