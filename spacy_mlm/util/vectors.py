"""Vector maths shared across layers (the encoder's int8 calibration, the
similarity hooks, Word-in-Context scoring): pure numpy, importing nothing of
the package but its errors, so the lowest layer can hold it."""
import numpy

from ..errors import SpacyMlmError


def cosine_rows(A, B) -> numpy.ndarray:
    """Cosine of each row of A with the same row of B; 0.0 where either is zero."""
    A = numpy.asarray(A, dtype="float64")
    B = numpy.asarray(B, dtype="float64")
    if A.shape != B.shape:
        raise SpacyMlmError(f"cosine_rows needs equal shapes, got {A.shape} and {B.shape}")
    norms = numpy.linalg.norm(A, axis=-1) * numpy.linalg.norm(B, axis=-1)
    dots = (A * B).sum(axis=-1)
    return numpy.divide(dots, norms, out=numpy.zeros_like(dots), where=norms > 0)
