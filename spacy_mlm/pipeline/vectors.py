"""Contextual vectors on Docs ("mlm_vectors").

Placed after an `mlm_encoder` (built with `output_hidden_states = true` when a
layer other than the top one is used), it reads the encoder as every component
does, through a listener (`spacy_mlm.EncoderLayersListener.v1`, built from its
`pooling`, `layer` and `n_layers`: its model is `similarity.layers.vectors_input`),
which pools the chosen layers' piece vectors to one vector per token; it averages
them over the layers, applies a fitted
transformation (`spacy_mlm.similarity.transforms`) and installs user hooks
(`spacy_mlm.similarity.hooks`), so that `token.vector`, `span.vector`,
`doc.vector`, `.has_vector`, `.vector_norm` and `.similarity` use contextual
embeddings instead of static word vectors. The same word gets different
vectors in different contexts: `bank` in "river bank" and in "bank account"
are not similarity 1.0 as with spaCy's defaults.

It also holds a sense inventory (centroids of labeled examples) and sets
`token._.sense` / `token._.sense_score` for tokens whose key (lemma by default)
it has senses for. The fitted transform and the inventory are saved with the
pipeline. Pipeline builders: `spacy_mlm.vectors_pipeline`.
"""
import logging
from pathlib import Path
from typing import Iterable, Optional, Tuple, Union

import numpy
import srsly
from spacy.language import Language
from spacy.pipeline import Pipe
from spacy.tokens import Doc, Span, Token
from spacy.util import ensure_path

from ..errors import ModelLoadError, SpacyMlmError
from ..models.encoding import ENCODING_ATTR
from ..models.pooling import TOKEN_POOLINGS
from ..similarity.hooks import VECTORS_ATTR, install_vector_hooks, install_vectors_extension
from ..similarity.layers import vectors_input
from ..similarity.senses import SenseInventory
from ..similarity.transforms import TransformChain
from ..util.io import atomic_write_bytes, atomic_write_text
from ..util.save import check_saved_cfg
from ..util.settings import INT, TEXT, check_settings, one_of

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
SENSE_KEYS = ("lemma", "lower", "text")


def install_extensions() -> None:
    """`doc._.mlm_vectors`, `token._.sense` and `token._.sense_score`
    (idempotent), installed by the factory, so also by `spacy.load`."""
    install_vectors_extension()
    for name in ("sense", "sense_score"):
        if not Token.has_extension(name):
            Token.set_extension(name, default=None)


DEFAULT_VECTORS_CONFIG = {
    "pooling": "mean",
    "layer": -1,
    "n_layers": 1,
    "transform": {"@misc": "spacy_mlm.VectorTransform.v1", "steps": [], "n_components": 2},
    "sense_key": "lemma",
    "upstream": "*",
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
    upstream: str,
) -> "MLMVectors":
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
    upstream: the mlm_encoder it listens to ("*": any).
    """
    install_extensions()
    return MLMVectors(nlp.vocab, name, pooling, layer, n_layers, transform, sense_key, upstream)


class SenseLookup:
    """The sense inventory of a component that sets `doc._.mlm_vectors`
    (`mlm_vectors`, `mlm_senses`): examples go in and senses are assigned in
    that component's vector space. Needs `self.senses` and `self.sense_key`."""

    senses: SenseInventory
    sense_key: str

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


class MLMVectors(SenseLookup, Pipe):
    def __init__(self, vocab, name: str, pooling: str, layer: int, n_layers: int, transform, sense_key: str,
                 upstream: str = "*"):
        check_settings("mlm_vectors", pooling=(pooling, one_of(*TOKEN_POOLINGS)), layer=(layer, INT),
                       n_layers=(n_layers, INT, ">= 1"), sense_key=(sense_key, one_of(*SENSE_KEYS)),
                       upstream=(upstream, TEXT))
        self.vocab = vocab
        self.name = name
        self.pooling = pooling
        self.layer = layer
        self.n_layers = n_layers
        self.transform: TransformChain = transform
        self.sense_key = sense_key
        self.senses = SenseInventory()
        # not trained: the listener(s) the encoder finds and the mean over the layers
        self.model = vectors_input(pooling, layer, n_layers, transform.needs_static, upstream)

    # -- vectors --------------------------------------------------------------------
    def transform_input(self, doc: Doc) -> numpy.ndarray:
        """The raw token vectors in the form the transform maps: (n_tokens,
        width), or [raw | embedding layer] (n_tokens, 2 * width) for a chain that
        starts with "remove_static" (`spacy_mlm.similarity.layers.vectors_input`)."""
        if not self.model.layers[0].has_dim("nO"):
            raise SpacyMlmError(
                f"'{self.name}' has read no encoder: put an initialized mlm_encoder before it in the pipeline"
            )
        return self.model([doc], is_train=False)[0][0]

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

    # -- serialization --------------------------------------------------------------
    def _cfg(self) -> dict:
        return {"format_version": FORMAT_VERSION, "transform": self.transform.describe()}

    def _load(self, cfg: dict, transform_bytes: bytes, senses_bytes: bytes, where: Union[str, Path]) -> None:
        check_saved_cfg(where, cfg, "mlm_vectors", FORMAT_VERSION, {"transform": TEXT})
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

    def from_disk(self, path, *, exclude=tuple()) -> "MLMVectors":
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

    def from_bytes(self, bytes_data: bytes, *, exclude=tuple()) -> "MLMVectors":
        msg = srsly.msgpack_loads(bytes_data)
        self._load(msg["cfg"], msg["transform"], msg["senses"], f"<{self.name} bytes>")
        return self
