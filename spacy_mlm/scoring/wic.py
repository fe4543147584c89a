"""WiC accuracy on spaCy Examples, registered as `spacy_mlm.wic_scorer.v1`
(the scorer of `mlm_senses`, so `spacy train`'s dev score is the accuracy of
the component's decisions at its stored threshold).

A pair counts when its predicted Doc has `doc._.same_sense` (set by
`mlm_senses` for a Doc with a sense pair) and its reference has
`cats["SAME_SENSE"]`; a predicted pair without a gold label is an error.
"""
from typing import Callable, Dict, Iterable, Optional

from spacy.tokens import Doc
from spacy.training import Example
from spacy.util import registry

from ..errors import SpacyMlmError
from ..readers.wic import SAME_SENSE

SAME_ATTR = "same_sense"


def score_wic(examples: Iterable[Example], **kwargs) -> Dict[str, Optional[float]]:
    """{"wic_acc": accuracy of same_sense against the gold label} (None with no pairs)."""
    if not Doc.has_extension(SAME_ATTR):
        return {"wic_acc": None}
    correct = total = 0
    for i, eg in enumerate(examples):
        predicted = eg.predicted._.get(SAME_ATTR)
        if predicted is None:
            continue
        gold = eg.reference.cats.get(SAME_SENSE)
        if gold is None:
            raise SpacyMlmError(f"example {i} ({eg.reference.text[:60]!r}) has a predicted sense pair but no gold cats[{SAME_SENSE!r}]")
        correct += bool(predicted) == (gold >= 0.5)
        total += 1
    return {"wic_acc": correct / total if total else None}


@registry.scorers("spacy_mlm.wic_scorer.v1")
def make_wic_scorer() -> Callable[..., Dict[str, Optional[float]]]:
    return score_wic
