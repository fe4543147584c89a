"""Sentence pairs as one Doc.

A pair (premise/hypothesis, question/passage) is a single Doc holding both texts,
so every spaCy component, `displacy` and `DocBin` keep working on it. The token
index where side B starts is stored in `doc._.mlm_pair_start`; the encoder reads
it and encodes `[CLS] A [SEP] B [SEP]` (the model's own pair template) with
segment ids instead of one running text; an encoder with `pairs = "apart"`
reads each side as a text of its own instead (`mlm_senses` compares the words
of two sentences each read alone).
"""
from typing import Optional, Tuple

from spacy.language import Language
from spacy.tokens import Doc

from ..errors import SpacyMlmError

PAIR_ATTR = "mlm_pair_start"
# how the encoder reads a pair Doc: as one input with the pair template, or each side on its own
PAIR_READINGS = ("joint", "apart")


def install_pair_extension() -> None:
    """`doc._.mlm_pair_start`, installed by what makes pair Docs (`make_pair_doc`,
    the NLI reader) and by the `mlm_encoder` factory, which reads it."""
    if not Doc.has_extension(PAIR_ATTR):
        Doc.set_extension(PAIR_ATTR, default=None)


def make_pair_doc(nlp: Language, text_a: str, text_b: str) -> Doc:
    """Tokenize two texts with `nlp`'s tokenizer and join them into one pair Doc.
    Run the pipeline on it with `nlp(doc)`."""
    if not isinstance(text_a, str) or not isinstance(text_b, str):
        raise SpacyMlmError(f"make_pair_doc needs two strings, got {type(text_a).__name__} and {type(text_b).__name__}")
    install_pair_extension()
    doc_a, doc_b = nlp.make_doc(text_a), nlp.make_doc(text_b)
    doc = Doc.from_docs([doc_a, doc_b], ensure_whitespace=True)
    doc._.set(PAIR_ATTR, len(doc_a))
    return doc


def pair_char_split(doc: Doc) -> Optional[Tuple[int, int, int]]:
    """(end of A, start of B, end of B) in characters, or None for a single text."""
    start = doc._.get(PAIR_ATTR) if Doc.has_extension(PAIR_ATTR) else None
    if start is None:
        return None
    if not 0 <= start <= len(doc):
        raise SpacyMlmError(f"doc._.{PAIR_ATTR} = {start} is outside the doc's {len(doc)} tokens")
    a_end = doc[start - 1].idx + len(doc[start - 1]) if start > 0 else 0
    b_start = doc[start].idx if start < len(doc) else len(doc.text)
    return a_end, b_start, len(doc.text)
