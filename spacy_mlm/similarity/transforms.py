"""Fitted post-processing of contextual vectors so that cosine similarity means
something.

Contextual embeddings are anisotropic: they share a large common mean and a few
dominant directions (often tied to word frequency or position), so almost any
two vectors have a high cosine. Removing that shared part, fitted once on a
corpus, makes cosine reflect the differences that matter (Mu & Viswanath 2018,
"All-but-the-top"; Ethayarajh 2019; Timkey & van Schijndel 2021).

Every transformation here is a pure function of its fitted state: `fit(X)`
learns from an `(n, width)` matrix, `apply(X)` maps `(n, width)` or `(width,)`
arrays, and the state round-trips through bytes. `TransformChain` composes
them; each step is fitted on the output of the steps before it. All of them
are affine maps, so the transform of a mean of vectors is the mean of the
transformed vectors (span and doc vectors stay consistent with token vectors).
"""
import logging
from pathlib import Path
from typing import Any, ClassVar, Dict, List, Sequence, Type, Union

import numpy
import srsly
from spacy.util import registry

from ..errors import ModelLoadError, NotInitializedError, SpacyMlmError
from ..util.io import atomic_write_bytes

FORMAT_VERSION = 1

logger = logging.getLogger(__name__)


def _as_matrix(X) -> numpy.ndarray:
    X = numpy.asarray(X, dtype="float64")
    if X.ndim != 2:
        raise SpacyMlmError(f"expected a 2D matrix (n_vectors, width) to fit on, got shape {X.shape}")
    if X.shape[0] < 2:
        raise SpacyMlmError(f"need at least 2 vectors to fit a transformation, got {X.shape[0]}")
    return X


class Transform:
    """One fitted step. Subclasses set `kind`, keep their fitted arrays in
    `self.arrays` and their hyper-parameters in `self.params`."""

    kind: ClassVar[str] = ""

    def __init__(self, **params: Any):
        self.params: Dict[str, Any] = dict(params)
        self.arrays: Dict[str, numpy.ndarray] = {}

    @property
    def is_fitted(self) -> bool:
        return bool(self.arrays)

    @property
    def width(self) -> int:
        self._require_fitted()
        return int(self.arrays["mean"].shape[0])

    def fit(self, X) -> "Transform":
        self.arrays = {k: v.astype("float32") for k, v in self._fit(_as_matrix(X)).items()}
        return self

    def apply(self, X) -> numpy.ndarray:
        self._require_fitted()
        X = numpy.asarray(X, dtype="float32")
        if X.shape[-1] != self.width:
            raise SpacyMlmError(
                f"{self.kind} transform was fitted on vectors of width {self.width}, "
                f"got width {X.shape[-1]}: fit it again for this encoder / layer setting"
            )
        return self._apply(X).astype("float32", copy=False)

    def _require_fitted(self) -> None:
        if not self.is_fitted:
            raise NotInitializedError(
                f"the {self.kind!r} transform is not fitted: call fit() on a matrix of vectors "
                "(or `python -m spacy_mlm fit-transform`) first"
            )

    def _fit(self, X: numpy.ndarray) -> Dict[str, numpy.ndarray]:
        raise NotImplementedError

    def _apply(self, X: numpy.ndarray) -> numpy.ndarray:
        raise NotImplementedError

    def describe(self) -> str:
        extra = ",".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return f"{self.kind}({extra})" if extra else self.kind


class MeanCenter(Transform):
    """Subtract the corpus mean: removes the common direction every vector shares."""

    kind = "center"

    def _fit(self, X):
        return {"mean": X.mean(axis=0)}

    def _apply(self, X):
        return X - self.arrays["mean"]


class Standardize(Transform):
    """Z-score each dimension: a few "rogue" dimensions with huge variance
    otherwise dominate the dot product. Dimensions whose standard deviation is
    below `eps` are only centered, not scaled."""

    kind = "standardize"

    def __init__(self, eps: float = 1e-6):
        super().__init__(eps=float(eps))

    def _fit(self, X):
        std = X.std(axis=0)
        return {"mean": X.mean(axis=0), "scale": numpy.where(std < self.params["eps"], 1.0, std)}

    def _apply(self, X):
        return (X - self.arrays["mean"]) / self.arrays["scale"]


class RemoveTopComponents(Transform):
    """All-but-the-top: center, then project out the `n_components` principal
    directions of largest variance, which carry little lexical meaning."""

    kind = "abtt"

    def __init__(self, n_components: int = 2):
        if int(n_components) < 1:
            raise SpacyMlmError(f"abtt needs n_components >= 1, got {n_components}")
        super().__init__(n_components=int(n_components))

    def _fit(self, X):
        n_components = self.params["n_components"]
        if n_components >= min(X.shape):
            raise SpacyMlmError(
                f"abtt with n_components={n_components} needs more than {n_components} vectors "
                f"and dimensions, got a {X.shape[0]}x{X.shape[1]} matrix"
            )
        mean = X.mean(axis=0)
        centered = X - mean
        eigvals, eigvecs = numpy.linalg.eigh(centered.T @ centered)
        top = eigvecs[:, numpy.argsort(eigvals)[::-1][:n_components]]
        return {"mean": mean, "components": top.T}

    def _apply(self, X):
        centered = X - self.arrays["mean"]
        U = self.arrays["components"]
        return centered - (centered @ U.T) @ U


class Whiten(Transform):
    """PCA whitening: center, rotate onto the principal axes and scale each axis
    to unit variance, so the fitted vectors have identity covariance. Where
    standardize equalizes single dimensions, this also removes correlations
    between them, so no direction dominates the dot product (Su et al. 2021,
    "Whitening sentence representations"; Huang et al. 2021, WhiteningBERT).

    Directions whose variance is below `rel_eps` times the largest are dropped
    rather than blown up: contextual vectors are often rank-deficient (a
    LayerNorm output lies in a hyperplane), and after `abtt` the removed
    directions have no variance left, so "abtt+whiten" is whitening with the top
    components removed. The output is therefore at most as wide as the input."""

    kind = "whiten"

    def __init__(self, rel_eps: float = 1e-5):
        if not 0.0 < float(rel_eps) < 1.0:
            raise SpacyMlmError(f"whiten needs 0 < rel_eps < 1, got {rel_eps}")
        super().__init__(rel_eps=float(rel_eps))

    def _fit(self, X):
        mean = X.mean(axis=0)
        centered = X - mean
        eigvals, eigvecs = numpy.linalg.eigh(centered.T @ centered / X.shape[0])
        order = numpy.argsort(eigvals)[::-1]
        eigvals, eigvecs = eigvals[order], eigvecs[:, order]
        keep = eigvals > self.params["rel_eps"] * max(float(eigvals[0]), 0.0)
        if not keep.any():
            raise SpacyMlmError("whiten: the vectors to fit on have no variance (all rows are equal)")
        return {"mean": mean, "projection": eigvecs[:, keep] / numpy.sqrt(eigvals[keep])}

    def _apply(self, X):
        return (X - self.arrays["mean"]) @ self.arrays["projection"]


class RemoveStatic(Transform):
    """Subtract the part of a contextual vector that the word's non-contextual
    embedding predicts. Two occurrences of one word share a large "type"
    component (what the word is, whatever its context), so their cosine is high
    whether or not the senses match; what the context added is what tells the
    senses apart. A ridge regression, fitted on corpus tokens, predicts the
    contextual vector from the embedding layer's output for the same token
    (hidden state 0: piece + position embeddings, before any attention); the
    residual keeps what the regression cannot explain from the word alone.

    Its input is the contextual vector and the static one side by side
    ((n, 2 * width), `mlm_vectors`' `transform_input` builds it
    when the chain starts with this step); its output is (n, width). It is affine, like every step here.
    `ridge` is relative to the mean variance of the static vectors."""

    kind = "remove_static"

    def __init__(self, ridge: float = 0.01):
        if not float(ridge) > 0.0:
            raise SpacyMlmError(f"remove_static needs ridge > 0, got {ridge}")
        super().__init__(ridge=float(ridge))

    def _fit(self, X):
        if X.shape[1] % 2:
            raise SpacyMlmError(
                f"remove_static fits on [contextual | static] rows of even width, got width {X.shape[1]}"
            )
        width = X.shape[1] // 2
        if X.shape[0] < 10 * width:
            # A regression with `width` inputs per output explains most of so few rows by chance.
            logger.warning(
                "remove_static fitted on %d vectors of width %d: with fewer than %d it also removes "
                "context that the word does not predict; fit it on a larger corpus",
                X.shape[0], width, 10 * width,
            )
        mean = X.mean(axis=0)
        contextual, static = X[:, :width] - mean[:width], X[:, width:] - mean[width:]
        gram = static.T @ static / X.shape[0]
        penalty = self.params["ridge"] * float(numpy.trace(gram)) / width
        weights = numpy.linalg.solve(gram + penalty * numpy.eye(width), static.T @ contextual / X.shape[0])
        return {"mean": mean, "weights": weights}

    def _apply(self, X):
        width = self.arrays["weights"].shape[0]
        centered = X - self.arrays["mean"]
        return centered[..., :width] - centered[..., width:] @ self.arrays["weights"]


TRANSFORM_KINDS: Dict[str, Type[Transform]] = {
    cls.kind: cls for cls in (MeanCenter, Standardize, RemoveTopComponents, Whiten, RemoveStatic)
}


class TransformChain:
    """Steps applied in order; an empty chain is the identity (raw cosine)."""

    def __init__(self, steps: Sequence[Transform] = ()):
        self.steps: List[Transform] = list(steps)
        misplaced = [i for i, step in enumerate(self.steps) if isinstance(step, RemoveStatic) and i > 0]
        if misplaced:
            raise SpacyMlmError(
                "remove_static must be the first step: it reads the static vectors beside the raw "
                f"contextual ones, which no other step passes on (got {self.describe()!r})"
            )

    @property
    def needs_static(self) -> bool:
        """Whether the input is [contextual | static] rows (see `RemoveStatic`)."""
        return bool(self.steps) and isinstance(self.steps[0], RemoveStatic)

    @property
    def is_fitted(self) -> bool:
        return all(step.is_fitted for step in self.steps)

    @property
    def kinds(self) -> List[str]:
        return [step.kind for step in self.steps]

    def describe(self) -> str:
        return "+".join(step.describe() for step in self.steps) or "raw"

    def fit(self, X) -> "TransformChain":
        X = numpy.asarray(X, dtype="float32")
        for step in self.steps:
            X = step.fit(X).apply(X)
        return self

    def apply(self, X) -> numpy.ndarray:
        X = numpy.asarray(X, dtype="float32")
        for step in self.steps:
            X = step.apply(X)
        return X

    def to_bytes(self) -> bytes:
        steps = [{"kind": s.kind, "params": s.params, "arrays": s.arrays} for s in self.steps]
        return srsly.msgpack_dumps({"format": FORMAT_VERSION, "steps": steps})

    @classmethod
    def from_bytes(cls, data: bytes) -> "TransformChain":
        try:
            msg = srsly.msgpack_loads(data)
            if msg.get("format") != FORMAT_VERSION:
                raise SpacyMlmError(f"unknown format version {msg.get('format')!r}")
            steps = []
            for entry in msg["steps"]:
                if entry["kind"] not in TRANSFORM_KINDS:
                    raise SpacyMlmError(f"unknown transform kind {entry['kind']!r}")
                step = TRANSFORM_KINDS[entry["kind"]](**entry["params"])
                step.arrays = {k: numpy.array(v, dtype="float32") for k, v in entry["arrays"].items()}
                steps.append(step)
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise SpacyMlmError(f"not a serialized TransformChain: {err}") from err
        return cls(steps)

    def to_disk(self, path: Union[str, Path]) -> None:
        atomic_write_bytes(path, self.to_bytes())

    @classmethod
    def from_disk(cls, path: Union[str, Path]) -> "TransformChain":
        path = Path(path)
        if not path.is_file():
            raise ModelLoadError(path, "transform file not found")
        try:
            return cls.from_bytes(path.read_bytes())
        except SpacyMlmError as err:
            raise ModelLoadError(path, str(err)) from err


def make_transform_chain(steps: Sequence[str], n_components: int = 2) -> TransformChain:
    """Unfitted chain from step names ("remove_static", "center", "standardize", "abtt", "whiten")."""
    built = []
    for name in steps:
        if name not in TRANSFORM_KINDS:
            raise SpacyMlmError(f"unknown transform step {name!r}; choose from {sorted(TRANSFORM_KINDS)}")
        cls = TRANSFORM_KINDS[name]
        built.append(cls(n_components=n_components) if cls is RemoveTopComponents else cls())
    return TransformChain(built)


def parse_steps(spec: str) -> List[str]:
    """Step names from a command-line spec: "standardize+abtt" or "center,abtt";
    "raw" or "" means no steps."""
    names = [part.strip() for part in spec.replace("+", ",").split(",") if part.strip()]
    if names == ["raw"]:
        return []
    unknown = [n for n in names if n not in TRANSFORM_KINDS]
    if unknown:
        raise SpacyMlmError(f"unknown transform step {unknown[0]!r}; choose from {sorted(TRANSFORM_KINDS)} or 'raw'")
    return names


@registry.misc("spacy_mlm.VectorTransform.v1")
def build_vector_transform_v1(steps: List[str], n_components: int = 2) -> TransformChain:
    """Config entry for the `mlm_vectors` component: which steps to apply, in
    order (an empty list = raw vectors), from "remove_static" (first, if used),
    "center", "standardize", "abtt" and "whiten". `n_components` is used by
    "abtt" ("abtt" then "whiten" = whitening with the top components removed).
    The chain is fitted later (`fit-transform` CLI) and saved with the pipeline."""
    return make_transform_chain(steps, n_components=n_components)
