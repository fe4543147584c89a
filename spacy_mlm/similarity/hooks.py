"""Doc, Span and Token user hooks over `doc._.mlm_vectors`.

The `mlm_vectors` component stores one contextual vector per token in
`doc._.mlm_vectors` and installs these hooks, so that `token.vector`,
`span.vector`, `doc.vector`, `.has_vector`, `.vector_norm` and `.similarity`
use those vectors instead of static word vectors. A span's or doc's vector is
the mean over its tokens that have one (whitespace tokens have no pieces and
so no vector).
"""
import numpy
from spacy.tokens import Doc, Span, Token

from ..errors import SpacyMlmError
from ..util.vectors import cosine_rows

VECTORS_ATTR = "mlm_vectors"


def install_vectors_extension() -> None:
    """`doc._.mlm_vectors` (idempotent). The mlm_vectors factory installs it; so
    do the hooks when they run first, on a doc unpickled in a process that has
    built no mlm_vectors component (its vectors are in the doc's user data)."""
    if not Doc.has_extension(VECTORS_ATTR):
        Doc.set_extension(VECTORS_ATTR, default=None)


def _rows(doc: Doc, start: int, end: int) -> numpy.ndarray:
    install_vectors_extension()
    vectors = doc._.get(VECTORS_ATTR)
    if vectors is None:
        raise SpacyMlmError("the doc has no contextual vectors: it was not processed by an mlm_vectors component")
    return vectors[start:end]


def _mean_of_rows(rows: numpy.ndarray) -> numpy.ndarray:
    """Mean over the tokens that have a vector (whitespace tokens have none)."""
    present = numpy.any(rows != 0, axis=1)
    if not present.any():
        return numpy.zeros(rows.shape[1], dtype="float32")
    return rows[present].mean(axis=0)


def _cosine(obj, other) -> float:
    return float(cosine_rows(obj.vector[None], numpy.asarray(other.vector)[None])[0])


def _norm(obj) -> float:
    return float(numpy.linalg.norm(obj.vector))


def _has_vector(obj) -> bool:
    return bool(numpy.any(obj.vector))


def token_vector(token: Token) -> numpy.ndarray:
    return _rows(token.doc, token.i, token.i + 1)[0]


def span_vector(span: Span) -> numpy.ndarray:
    return _mean_of_rows(_rows(span.doc, span.start, span.end))


def doc_vector(doc: Doc) -> numpy.ndarray:
    return _mean_of_rows(_rows(doc, 0, len(doc)))


def install_vector_hooks(doc: Doc) -> None:
    """Module-level functions (not closures), so docs stay picklable."""
    doc.user_token_hooks.update(
        vector=token_vector, has_vector=_has_vector, vector_norm=_norm, similarity=_cosine
    )
    # No span "vector_norm" hook: spaCy's Span.vector_norm calls the "vector" hook
    # under that name; its default computes the norm from our span vector.
    doc.user_span_hooks.update(vector=span_vector, has_vector=_has_vector, similarity=_cosine)
    doc.user_hooks.update(vector=doc_vector, has_vector=_has_vector, vector_norm=_norm, similarity=_cosine)


def restore_vector_hooks(doc: Doc) -> Doc:
    """Install the hooks again on a Doc read back with `Doc.from_bytes`, from a
    `DocBin` or from `nlp.pipe(..., n_process=N)`: spaCy serializes
    `doc._.mlm_vectors` (user data) but not user hooks (its warning W109), so
    `token.vector` would otherwise fall back to static vectors. Pickle and
    `copy.deepcopy` keep the hooks. A Doc without contextual vectors is left as it is."""
    install_vectors_extension()
    if doc._.get(VECTORS_ATTR) is not None:
        install_vector_hooks(doc)
    return doc
