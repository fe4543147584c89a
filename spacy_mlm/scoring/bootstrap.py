"""Paired bootstrap test for the F1 difference of two systems on the same data.

Documents are resampled with replacement (the same draw for both systems, which
is what makes the test paired) and corpus F1 is recomputed from the summed
per-document counts. The p-value is two-sided against the null of no
difference, estimated the usual way for the bootstrap (Efron & Tibshirani;
Berg-Kirkpatrick et al. 2012): the bootstrap distribution of the difference is
centred on the observed one, so a sample counts as "at least as extreme" when it
lies at least |delta| away from delta.
"""
from dataclasses import asdict, dataclass

import numpy

from ..errors import DataError
from .entities import f1_from_counts


@dataclass
class BootstrapResult:
    f1_a: float
    f1_b: float
    delta: float  # f1_a - f1_b on the full data
    ci_low: float
    ci_high: float
    p_value: float
    n_samples: int
    confidence: float

    def to_dict(self):
        return asdict(self)


def paired_bootstrap(
    counts_a: numpy.ndarray,
    counts_b: numpy.ndarray,
    n_samples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    chunk: int = 200,
) -> BootstrapResult:
    """`counts_a`, `counts_b`: (n_docs, 3) tp/fp/fn of each system on the same
    documents in the same order. Seeded, so the same inputs give the same result."""
    counts_a = numpy.asarray(counts_a, dtype=numpy.int64)
    counts_b = numpy.asarray(counts_b, dtype=numpy.int64)
    if counts_a.shape != counts_b.shape or counts_a.ndim != 2 or counts_a.shape[1] != 3:
        raise DataError(f"expected two (n_docs, 3) count arrays, got {counts_a.shape} and {counts_b.shape}")
    n = counts_a.shape[0]
    if n == 0 or n_samples < 1:
        raise DataError(f"need at least one document and one bootstrap sample, got {n} documents "
                        f"and n_samples = {n_samples}")
    f1_a = float(f1_from_counts(counts_a.sum(axis=0)))
    f1_b = float(f1_from_counts(counts_b.sum(axis=0)))
    delta = f1_a - f1_b
    rng = numpy.random.default_rng(seed)
    deltas = numpy.empty(n_samples)
    # How often each document is drawn, sample by sample, in chunks to bound memory.
    for lo in range(0, n_samples, chunk):
        m = min(chunk, n_samples - lo)
        draws = rng.integers(0, n, size=(m, n))
        flat = (numpy.arange(m)[:, None] * n + draws).ravel()
        weights = numpy.bincount(flat, minlength=m * n).reshape(m, n)
        deltas[lo : lo + m] = f1_from_counts(weights @ counts_a) - f1_from_counts(weights @ counts_b)
    extreme = numpy.abs(deltas - delta) >= abs(delta)
    p_value = float((extreme.sum() + 1) / (n_samples + 1))
    alpha = (1.0 - confidence) / 2
    ci_low, ci_high = numpy.quantile(deltas, [alpha, 1 - alpha])
    return BootstrapResult(f1_a, f1_b, delta, float(ci_low), float(ci_high), p_value, n_samples, confidence)
