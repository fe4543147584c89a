"""Contextual vectors on Docs ("mlm_vectors").

Placed after an `mlm_encoder` (built with `output_hidden_states = true` when a
layer other than the top one is used), it pools the encoder's piece vectors to
one vector per token, applies a fitted transformation (see
`spacy_mlm.similarity.transforms`) and installs user hooks, so that
`token.vector`, `span.vector`, `doc.vector`, `.has_vector`, `.vector_norm` and
`.similarity` use contextual embeddings instead of static word vectors. The
same word gets different vectors in different contexts: `bank` in "river bank"
and in "bank account" are not similarity 1.0 as with spaCy's defaults.

It also holds a sense inventory (centroids of labeled examples) and sets
`token._.sense` / `token._.sense_score` for tokens whose key (lemma by default)
it has senses for. The fitted transform and the inventory are saved with the
pipeline.
"""
import logging
from pathlib import Path
from typing import Iterable, List, Optional, Sequence, Tuple, Union

import numpy
import srsly
import torch
from spacy.language import Language
from spacy.pipeline import Pipe
from spacy.tokens import Doc, Span, Token
from spacy.util import ensure_path

from ..models.encoding import ENCODING_ATTR, POOLINGS, DocEncoding, pool_tokens
from ..errors import ModelLoadError, SpacyMlmError
from .encoder import MLMEncoder
from ..similarity.scoring import cosine_rows
from ..similarity.senses import SenseInventory
from ..similarity.transforms import TransformChain
from ..util.io import atomic_write_bytes, atomic_write_text

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
VECTORS_ATTR = "mlm_vectors"
SENSE_KEYS = ("lemma", "lower", "text")

if not Doc.has_extension(VECTORS_ATTR):
    Doc.set_extension(VECTORS_ATTR, default=None)
for _name, _default in (("sense", None), ("sense_score", None)):
    if not Token.has_extension(_name):
        Token.set_extension(_name, default=_default)


def layer_indices(n_available: int, layer: int, n_layers: int) -> List[int]:
    """Indices into the encoder's (embeddings + every layer) stack: `n_layers`
    consecutive layers ending at `layer` (negative counts from the top)."""
    top = layer if layer >= 0 else n_available + layer
    if not 0 <= top < n_available:
        raise SpacyMlmError(f"layer {layer} does not exist: the encoder has {n_available} hidden states")
    if not 1 <= n_layers <= top + 1:
        raise SpacyMlmError(f"cannot average {n_layers} layers ending at layer {top} (of {n_available})")
    return list(range(top - n_layers + 1, top + 1))


def contextual_token_vectors(encoding: DocEncoding, pooling: str, layer: int, n_layers: int) -> numpy.ndarray:
    """(n_tokens, width) raw vectors: the mean of the chosen layers, pooled per
    token over its pieces. Tokens without pieces get zeros."""
    if layer == -1 and n_layers == 1:
        return encoding.token_vectors(pooling)
    if encoding.layers is None:
        raise SpacyMlmError(
            f"layer={layer}, n_layers={n_layers} needs every layer's output: "
            "build the mlm_encoder model with output_hidden_states = true"
        )
    source = encoding.layers[layer_indices(encoding.layers.shape[0], layer, n_layers)].mean(axis=0)
    return pool_tokens(torch.from_numpy(numpy.ascontiguousarray(source)), encoding.alignment, pooling).numpy()


def _rows(doc: Doc, start: int, end: int) -> numpy.ndarray:
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


def token_vector(token: Token) -> numpy.ndarray:
    return _rows(token.doc, token.i, token.i + 1)[0]


def span_vector(span: Span) -> numpy.ndarray:
    return _mean_of_rows(_rows(span.doc, span.start, span.end))


def doc_vector(doc: Doc) -> numpy.ndarray:
    return _mean_of_rows(_rows(doc, 0, len(doc)))


def _has_vector(obj) -> bool:
    return bool(numpy.any(obj.vector))


def install_vector_hooks(doc: Doc) -> None:
    """Module-level functions (not closures), so docs stay picklable."""
    doc.user_token_hooks.update(
        vector=token_vector, has_vector=_has_vector, vector_norm=_norm, similarity=_cosine
    )
    # No span "vector_norm" hook: spaCy's Span.vector_norm calls the "vector" hook
    # under that name; its default computes the norm from our span vector.
    doc.user_span_hooks.update(vector=span_vector, has_vector=_has_vector, similarity=_cosine)
    doc.user_hooks.update(vector=doc_vector, has_vector=_has_vector, vector_norm=_norm, similarity=_cosine)


DEFAULT_VECTORS_CONFIG = {
    "pooling": "mean",
    "layer": -1,
    "n_layers": 1,
    "transform": {"@misc": "spacy_mlm.VectorTransform.v1", "steps": [], "n_components": 2},
    "sense_key": "lemma",
}


@Language.factory(
    "mlm_vectors",
    assigns=[f"doc._.{VECTORS_ATTR}", "token._.sense", "token._.sense_score"],
    requires=[f"doc._.{ENCODING_ATTR}"],
    default_config=DEFAULT_VECTORS_CONFIG,
)
def make_mlm_vectors(
    nlp: Language,
    name: str,
    pooling: str,
    layer: int,
    n_layers: int,
    transform: TransformChain,
    sense_key: str,
) -> "ContextualVectors":
    """Contextual `.vector` / `.similarity` from the preceding mlm_encoder.

    pooling: how a token's pieces become one vector: mean | first | last | max.
    layer: which hidden state (-1 = top layer, 0 = the embedding layer).
    n_layers: average this many consecutive layers ending at `layer` (1 = just
        `layer`); anything but layer=-1, n_layers=1 needs the encoder built with
        output_hidden_states = true.
    transform: a spacy_mlm.VectorTransform.v1 (steps from "remove_static",
        "center", "standardize", "abtt", "whiten"; [] = raw vectors;
        "remove_static" needs output_hidden_states = true). Fit it with
        `python -m spacy_mlm fit-transform` or `component.fit_transform(docs)`.
    sense_key: which token attribute indexes the sense inventory: "lemma"
        (falls back to the lowercase form when the pipeline sets no lemmas),
        "lower" or "text".
    """
    return ContextualVectors(nlp.vocab, name, pooling, layer, n_layers, transform, sense_key)


class ContextualVectors(Pipe):
    def __init__(self, vocab, name: str, pooling: str, layer: int, n_layers: int, transform, sense_key: str):
        if pooling not in POOLINGS:
            raise SpacyMlmError(f"unknown pooling {pooling!r}: expected one of {', '.join(POOLINGS)}")
        if sense_key not in SENSE_KEYS:
            raise SpacyMlmError(f"unknown sense_key {sense_key!r}: expected one of {', '.join(SENSE_KEYS)}")
        if n_layers < 1:
            raise SpacyMlmError(f"n_layers must be >= 1, got {n_layers}")
        self.vocab = vocab
        self.name = name
        self.pooling = pooling
        self.layer = layer
        self.n_layers = n_layers
        self.transform: TransformChain = transform
        self.sense_key = sense_key
        self.senses = SenseInventory()

    # -- vectors --------------------------------------------------------------------
    def raw_vectors(self, doc: Doc) -> numpy.ndarray:
        encoding = doc._.get(ENCODING_ATTR)
        if encoding is None:
            raise SpacyMlmError(
                f"'{self.name}' found no doc._.{ENCODING_ATTR}: put an mlm_encoder before it in the pipeline"
            )
        return contextual_token_vectors(encoding, self.pooling, self.layer, self.n_layers)

    def transform_input(self, doc: Doc) -> numpy.ndarray:
        """What the transform maps: the raw vectors, or, for a chain that starts
        with "remove_static", [raw | embedding-layer vectors] side by side."""
        raw = self.raw_vectors(doc)
        if not self.transform.needs_static:
            return raw
        encoding = doc._.get(ENCODING_ATTR)
        if encoding.layers is None:
            raise SpacyMlmError(
                f"'{self.name}': the remove_static transform needs the embedding layer's output: "
                "build the mlm_encoder model with output_hidden_states = true"
            )
        return numpy.concatenate([raw, contextual_token_vectors(encoding, self.pooling, 0, 1)], axis=1)

    def vectors(self, doc: Doc) -> numpy.ndarray:
        """Transformed (n_tokens, width) vectors; tokens without pieces stay zero.
        The width is the transform's output width ("whiten" may drop directions)."""
        raw = self.transform_input(doc)
        present = numpy.any(raw != 0, axis=1)
        transformed = self.transform.apply(raw[present])
        out = numpy.zeros((raw.shape[0], transformed.shape[-1]), dtype="float32")
        out[present] = transformed
        return out

    def __call__(self, doc: Doc) -> Doc:
        doc._.set(VECTORS_ATTR, self.vectors(doc))
        install_vector_hooks(doc)
        if len(self.senses):
            self._assign_senses(doc)
        return doc

    def fit_transform(self, docs: Iterable[Doc], max_vectors: Optional[int] = None) -> int:
        """Fit the transformation on the raw token vectors of `docs` (already
        run through the encoder); returns how many vectors it was fitted on.
        A sense inventory built with the old transform is cleared."""
        rows, total = [], 0
        for doc in docs:
            raw = self.transform_input(doc)
            raw = raw[numpy.any(raw != 0, axis=1)]
            if max_vectors is not None:
                raw = raw[: max_vectors - total]
            rows.append(raw)
            total += len(raw)
            if max_vectors is not None and total >= max_vectors:
                break
        if not rows:
            raise SpacyMlmError("no docs to fit the transformation on")
        self.transform.fit(numpy.concatenate(rows))
        if len(self.senses):
            logger.warning("%s: cleared %d sense entries fitted under the previous transform", self.name, len(self.senses))
            self.senses = SenseInventory()
        return total

    # -- senses -----------------------------------------------------------------------
    def key_of(self, token: Token) -> str:
        if self.sense_key == "lemma":
            return token.lemma_ or token.lower_
        return token.lower_ if self.sense_key == "lower" else token.text

    def add_sense_examples(self, examples: Iterable[Tuple[Union[Token, Span], str]]) -> int:
        """Add (token or span, sense label) examples from docs processed by this
        pipeline; a span is keyed by its tokens' keys joined with spaces."""
        n = 0
        for target, sense in examples:
            tokens = [target] if isinstance(target, Token) else list(target)
            self.senses.add(" ".join(self.key_of(t) for t in tokens), sense, target.vector)
            n += 1
        return n

    def _assign_senses(self, doc: Doc) -> None:
        vectors = doc._.get(VECTORS_ATTR)
        for token in doc:
            got = self.senses.assign(self.key_of(token), vectors[token.i])
            if got is not None:
                token._.sense = got.sense
                token._.sense_score = got.score

    # -- serialization --------------------------------------------------------------
    def _cfg(self) -> dict:
        return {"format_version": FORMAT_VERSION, "transform": self.transform.describe()}

    def _load(self, cfg: dict, transform_bytes: bytes, senses_bytes: bytes, where: Union[str, Path]) -> None:
        if cfg.get("format_version") != FORMAT_VERSION:
            raise ModelLoadError(where, f"saved with mlm_vectors format {cfg.get('format_version')}, expected {FORMAT_VERSION}")
        try:
            transform = TransformChain.from_bytes(transform_bytes)
            senses = SenseInventory.from_bytes(senses_bytes)
        except SpacyMlmError as err:
            raise ModelLoadError(where, str(err)) from err
        if transform.describe() != self.transform.describe():
            raise ModelLoadError(
                where,
                f"saved transform is {transform.describe()!r} but the config asks for {self.transform.describe()!r}",
            )
        self.transform, self.senses = transform, senses

    def to_disk(self, path, *, exclude=tuple()) -> None:
        path = ensure_path(path)
        path.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path / "transform.bin", self.transform.to_bytes())
        atomic_write_bytes(path / "senses.bin", self.senses.to_bytes())
        atomic_write_text(path / "cfg", srsly.json_dumps(self._cfg(), indent=2))

    def from_disk(self, path, *, exclude=tuple()) -> "ContextualVectors":
        path = ensure_path(path)
        files = [path / "cfg", path / "transform.bin", path / "senses.bin"]
        missing = [p.name for p in files if not p.is_file()]
        if missing:
            raise ModelLoadError(path, f"not a saved mlm_vectors component (missing {', '.join(missing)})")
        self._load(srsly.read_json(files[0]), files[1].read_bytes(), files[2].read_bytes(), path)
        return self

    def to_bytes(self, *, exclude=tuple()) -> bytes:
        return srsly.msgpack_dumps(
            {"cfg": self._cfg(), "transform": self.transform.to_bytes(), "senses": self.senses.to_bytes()}
        )

    def from_bytes(self, bytes_data: bytes, *, exclude=tuple()) -> "ContextualVectors":
        msg = srsly.msgpack_loads(bytes_data)
        self._load(msg["cfg"], msg["transform"], msg["senses"], f"<{self.name} bytes>")
        return self


def make_vectors_pipeline(
    model_path: Union[str, Path],
    *,
    lang: str = "en",
    pooling: str = "mean",
    layer: int = -1,
    n_layers: int = 1,
    steps: Sequence[str] = (),
    n_components: int = 2,
    all_layers: Optional[bool] = None,
) -> Language:
    """A blank pipeline `mlm_encoder` -> `mlm_vectors` over a plain Hugging Face
    directory, initialized (weights loaded). The encoder keeps every layer's
    output when the layer choice or the transform ("remove_static") needs it, or
    when `all_layers` says so."""
    if all_layers is None:
        all_layers = not (layer == -1 and n_layers == 1) or "remove_static" in steps
    import spacy

    nlp = spacy.blank(lang)
    nlp.add_pipe(
        "mlm_encoder",
        config={"model": {"@architectures": "spacy_mlm.HFEncoder.v1", "path": str(model_path), "output_hidden_states": all_layers}},
    )
    nlp.add_pipe("mlm_vectors", config=vectors_config(pooling, layer, n_layers, steps, n_components))
    nlp.initialize()
    return nlp


def vectors_config(
    pooling: str = "mean", layer: int = -1, n_layers: int = 1, steps: Sequence[str] = (), n_components: int = 2
) -> dict:
    return {
        "pooling": pooling,
        "layer": layer,
        "n_layers": n_layers,
        "transform": {"@misc": "spacy_mlm.VectorTransform.v1", "steps": list(steps), "n_components": n_components},
    }


def find_vectors_component(nlp: Language) -> Optional[str]:
    names = [name for name, pipe in nlp.pipeline if isinstance(pipe, ContextualVectors)]
    return names[0] if names else None


def docs_before(nlp: Language, component: str, texts: Iterable[Union[str, Doc]], batch_size: int = 64) -> Iterable[Doc]:
    """Docs run lazily through the pipeline up to (not including) `component`,
    e.g. to fit that component's transform on the encoder's raw output."""
    docs: Iterable[Doc] = (nlp.make_doc(t) if isinstance(t, str) else t for t in texts)
    for name, proc in nlp.pipeline[: nlp.pipe_names.index(component)]:
        docs = proc.pipe(docs, batch_size=batch_size) if hasattr(proc, "pipe") else map(proc, docs)
    return docs


def configure_vectors_component(nlp: Language, **overrides) -> str:
    """Name of the pipeline's mlm_vectors component. With no overrides an
    existing one is kept as it is (fitted state included); otherwise it is
    replaced by one whose config is the old one updated with `overrides`
    (pooling, layer, n_layers, steps, n_components), unfitted. A pipeline
    without one gets one after its last mlm_encoder."""
    name = find_vectors_component(nlp)
    if name is not None and not overrides:
        return name
    settings = {"pooling": "mean", "layer": -1, "n_layers": 1, "steps": [], "n_components": 2}
    if name is not None:
        old = nlp.config["components"][name]
        settings.update({k: old[k] for k in ("pooling", "layer", "n_layers")})
        settings.update(steps=list(old["transform"]["steps"]), n_components=old["transform"]["n_components"])
    settings.update(overrides)
    config = vectors_config(**settings)
    if name is not None:
        nlp.replace_pipe(name, "mlm_vectors", config=config)
        return name
    encoders = [n for n, pipe in nlp.pipeline if isinstance(pipe, MLMEncoder)]
    if not encoders:
        raise SpacyMlmError("the pipeline has no mlm_encoder component to take contextual vectors from")
    nlp.add_pipe("mlm_vectors", after=encoders[-1], config=config)
    return "mlm_vectors"


def load_vectors_pipeline(model: Union[str, Path], **overrides) -> Tuple[Language, str]:
    """A saved spaCy pipeline directory (config.cfg; an mlm_vectors component is
    added or reconfigured, see `configure_vectors_component`) or a plain Hugging
    Face directory (config.json; see `make_vectors_pipeline`). Returns the
    pipeline and its mlm_vectors component's name."""
    import spacy

    model = Path(model)
    if (model / "config.cfg").is_file():
        nlp = spacy.load(model)
        return nlp, configure_vectors_component(nlp, **overrides)
    if (model / "config.json").is_file():
        return make_vectors_pipeline(model, **overrides), "mlm_vectors"
    raise ModelLoadError(model, "neither a spaCy pipeline (config.cfg) nor a Hugging Face model directory (config.json)")
