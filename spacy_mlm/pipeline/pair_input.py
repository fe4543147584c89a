"""A component trained on sentence pairs, given a single text.

A classifier trained on pair Docs reads `[CLS] A [SEP] B [SEP]` with segment
ids. Given a Doc with the same words but no pair boundary
(`doc._.mlm_pair_start`), it reads one running text and predicts something
else, with no error: that is what `spacy evaluate` does to a pair pipeline,
since it rebuilds every Doc from its text. `PairInputGuard` records at
initialization whether the component is trained on pairs (`cfg["pair_input"]`,
saved with it, read by `spacy_mlm evaluate`) and warns once per component when
it is then given a single text.
"""
import logging
from typing import Iterable

from spacy.tokens import Doc

from ..tokenization.pair import pair_char_split

logger = logging.getLogger(__name__)


def is_pair_doc(doc: Doc) -> bool:
    return pair_char_split(doc) is not None


def single_text_message(name: str) -> str:
    return (
        f"'{name}' was trained on sentence pairs but is given a Doc without a pair boundary "
        "(doc._.mlm_pair_start), so it reads the two texts as one. Make pair Docs with "
        "spacy_mlm.make_pair_doc(nlp, a, b) or use spacy_mlm.classify_pair; score a pair data file with "
        "`python -m spacy_mlm evaluate MODEL DATA OUTPUT_DIR` (`spacy evaluate` rebuilds each Doc from its "
        "text, which loses the boundary). Shown once."
    )


class PairInputGuard:
    """Mixin for a pipe with `name` and `cfg`: `record_pair_input` when it
    initializes, `check_pair_input` on what it predicts."""

    name: str
    cfg: dict
    _warned_single_text = False

    def record_pair_input(self, docs: Iterable[Doc]) -> None:
        """Trained on pairs when every one of these (training) docs is a pair."""
        flags = [is_pair_doc(doc) for doc in docs]
        self.cfg["pair_input"] = bool(flags) and all(flags)

    def check_pair_input(self, docs: Iterable[Doc]) -> None:
        if self.cfg.get("pair_input") and not self._warned_single_text and not all(map(is_pair_doc, docs)):
            logger.warning(single_text_message(self.name))
            self._warned_single_text = True
