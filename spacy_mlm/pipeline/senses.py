"""A trainable sense space on Docs ("mlm_senses").

Where `mlm_vectors` fits unsupervised transforms, this component learns from
labelled pairs ("same sense" / "different sense", WiC-style) a head
(`spacy_mlm.SenseHead.v3`: learned mixes of the encoder's layers for the
word and for its sentence, a learned share of the context-free embedding
taken out, per-dimension rescalings, the word and the sentence normalized and
side by side with a learned weight) and writes the
projected vectors to `doc._.mlm_vectors` with the same hooks, so that
`token.similarity`, `span.similarity` and the sense inventory work in the
learned space. It replaces `mlm_vectors` in a pipeline (whichever of the two
runs last sets the vectors).

Its own component rather than a new `mlm_vectors` version: `mlm_vectors` is a
plain Pipe with fitted numpy transforms, this one a TrainablePipe with a torch
head, a loss and a tuned threshold; each stays thin, and they share the hooks
and the sense lookup (`SenseLookup`).

Each token's vector is computed in its own sentence. A pair Doc (`make_pair_doc`,
what `spacy_mlm.WiCCorpus.v1` yields) is read by the encoder as its two sides
apart (`pairs = "apart"`), not as `[CLS] A [SEP] B [SEP]`, so the vectors it
trains on are the ones `token.similarity` later compares across two separately
processed Docs. The head reads the encoder as every head does, through its
listener (`spacy_mlm.EncoderLayersListener.v1`, every hidden state); the
encoder is frozen (`trainable_layers = 0`) and, in `spacy train`, listed in
`frozen_components` and `annotating_components`: spaCy runs it on each batch
before this component's update, as at prediction time. spaCy does not
initialize a frozen component, so this one initializes its encoder when it
has no weights yet.

For a pair Doc with a `doc.spans["sense_pair"]` (the two targets) it sets
`doc._.sense_similarity` (the cosine of the targets' vectors) and
`doc._.same_sense` (that cosine >= the stored threshold), which the WiC scorer
reads. The threshold is `cfg["threshold"]`, saved with the component: during
training it is re-tuned after every update, exactly (`tune_threshold`), on the
head's scores of the last `threshold_pairs` training pairs (the head has no
dropout, so these are the scores of each update's forward pass); those scores
come from the head as it was at each update, a little stale for the early ones. `fit_threshold(examples)` re-tunes it on fresh scores.
"""
from collections import deque
from typing import Callable, Iterable, List, Optional, Tuple

import numpy
import srsly
import torch
from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc
from spacy.training import Example, validate_examples, validate_get_examples
from spacy.util import ensure_path
from thinc.api import Model

from ..errors import ModelLoadError, SettingError, SpacyMlmError
from ..models.senses import sense_head
from ..models.torch_head import loss_and_gradient
from ..readers.wic import SAME_SENSE, SENSE_PAIR_KEY
from ..scoring.similarity import tune_threshold
from ..scoring.wic import SAME_ATTR
from ..similarity.hooks import VECTORS_ATTR, install_vector_hooks
from ..similarity.losses import pair_cosines, sense_pair_loss
from ..similarity.senses import SenseInventory
from ..tokenization.pair import install_pair_extension
from ..util.io import atomic_write_bytes
from ..util.settings import INT, NUMBER, check_settings
from ..util.save import COMPONENT_CFG_VERSION, checked_from_disk
from .encoder import MLMEncoder
from .vectors import SENSE_KEYS, SenseLookup, install_extensions

SIMILARITY_ATTR = "sense_similarity"

DEFAULT_SENSE_MODEL = {
    "@architectures": "spacy_mlm.SenseHead.v3",
    "tok2vec": {"@architectures": "spacy_mlm.EncoderLayersListener.v1", "layers": None, "pooling": "mean",
                "upstream": "*"},
    "init_scale": 10.0,
}


@Language.factory(
    "mlm_senses",
    assigns=[f"doc._.{VECTORS_ATTR}", "token._.sense", "token._.sense_score", f"doc._.{SIMILARITY_ATTR}", f"doc._.{SAME_ATTR}"],
    default_config={
        "model": DEFAULT_SENSE_MODEL,
        "sense_key": "lemma",
        "threshold_pairs": 8192,
        "scorer": {"@scorers": "spacy_mlm.wic_scorer.v1"},
    },
    default_score_weights={"wic_acc": 1.0},
)
def make_mlm_senses(
    nlp: Language, name: str, model: Model, sense_key: str, threshold_pairs: int, scorer: Optional[Callable]
) -> "MLMSenses":
    """Trained sense vectors: `.vector` / `.similarity` in a space learned from same-sense pairs.

    model: `spacy_mlm.SenseHead.v3` over its listener (the encoder needs output_hidden_states = true
        and pairs = "apart"; its listener's upstream names it, "*": the last one before this component).
    sense_key: what indexes the sense inventory: lemma | lower | text.
    threshold_pairs: how many recent training pairs the threshold is tuned on.
    scorer: `spacy_mlm.wic_scorer.v1`: accuracy of `doc._.same_sense` on pair Docs."""
    install_extensions()
    install_pair_extension()
    for attr in (SIMILARITY_ATTR, SAME_ATTR):
        if not Doc.has_extension(attr):
            Doc.set_extension(attr, default=None)
    return MLMSenses(nlp, model, name, sense_key=sense_key, threshold_pairs=threshold_pairs, scorer=scorer)


def span_vector(vectors: torch.Tensor, start: int, end: int) -> torch.Tensor:
    """Mean of the rows start:end that are not zero (tokens without pieces have
    none), as the span hook takes it; zeros if all are."""
    rows = vectors[start:end]
    present = rows.abs().sum(dim=-1) > 0
    return rows[present].mean(dim=0) if bool(present.any()) else rows.new_zeros(rows.shape[-1])


class MLMSenses(SenseLookup, TrainablePipe):
    def __init__(self, nlp: Language, model: Model, name: str = "mlm_senses", *,
                 sense_key: str = "lemma", threshold_pairs: int = 8192, scorer: Optional[Callable] = None):
        if sense_key not in SENSE_KEYS:
            raise SpacyMlmError(f"unknown sense_key {sense_key!r}: expected one of {', '.join(SENSE_KEYS)}")
        check_settings("mlm_senses", threshold_pairs=(threshold_pairs, INT, ">= 1"))
        self.vocab = nlp.vocab
        self.model = model
        self.name = name
        self.scorer = scorer
        self.sense_key = sense_key
        self.senses = SenseInventory()
        self.cfg = {"format_version": COMPONENT_CFG_VERSION, "threshold": 0.5}
        self._nlp = nlp
        self._recent: deque = deque(maxlen=threshold_pairs)

    @property
    def threshold(self) -> float:
        return float(self.cfg["threshold"])

    # -- encoding --------------------------------------------------------------------
    def _encoder(self) -> MLMEncoder:
        """The encoder its listener names (for `initialize` only: the head reads
        the encoder's output through the listener)."""
        upstream = self.model.get_ref("tok2vec").upstream_name
        names = self._nlp.component_names  # includes disabled (frozen while spacy train initializes)
        if upstream != "*":
            if upstream not in names or not isinstance(self._nlp.get_pipe(upstream), MLMEncoder):
                raise SpacyMlmError(f"'{self.name}': upstream {upstream!r} is not an mlm_encoder of this pipeline")
            return self._nlp.get_pipe(upstream)
        before = names[: names.index(self.name)] if self.name in names else names
        encoders = [n for n in before if isinstance(self._nlp.get_pipe(n), MLMEncoder)]
        if not encoders:
            raise SpacyMlmError(f"'{self.name}' needs an mlm_encoder before it in the pipeline")
        return self._nlp.get_pipe(encoders[-1])

    def _doc_vectors(self, docs: List[Doc], is_train: bool) -> Tuple[List[torch.Tensor], torch.Tensor, Callable]:
        """Each Doc's (n_tokens, width) sense vectors, the tensor of all of them
        (the head's output) and the head's backprop."""
        vectors, backprop = self.model(docs, is_train)
        return list(torch.split(vectors, [len(doc) for doc in docs])), vectors, backprop

    # -- prediction ------------------------------------------------------------------
    def predict(self, docs: Iterable[Doc]) -> List[Tuple[numpy.ndarray, Optional[float]]]:
        """Per Doc: its (n_tokens, width) sense vectors and, for a Doc with a
        sense pair, the cosine of the two targets."""
        docs = list(docs)
        if not docs:
            return []
        vectors, _, _ = self._doc_vectors(docs, is_train=False)
        cosines = self._pair_cosines(docs, vectors)
        return [(v.float().cpu().numpy(), cosines.get(i)) for i, v in enumerate(vectors)]

    def set_annotations(self, docs: Iterable[Doc], predictions) -> None:
        for doc, (vectors, cosine) in zip(docs, predictions):
            doc._.set(VECTORS_ATTR, vectors)
            install_vector_hooks(doc)
            if cosine is not None:
                doc._.set(SIMILARITY_ATTR, cosine)
                doc._.set(SAME_ATTR, cosine >= self.threshold)
            if len(self.senses):
                self._assign_senses(doc)

    @staticmethod
    def _pair_cosines(docs: List[Doc], vectors: List[torch.Tensor]) -> dict:
        """{doc index: cosine of its two targets} for the Docs with a sense pair."""
        pairs = [(i, doc.spans[SENSE_PAIR_KEY]) for i, doc in enumerate(docs) if SENSE_PAIR_KEY in doc.spans]
        if not pairs:
            return {}
        cosines = pair_cosines(*_target_vectors([vectors[i] for i, _ in pairs], [group for _, group in pairs]))
        return {i: float(c) for (i, _), c in zip(pairs, cosines)}

    # -- training --------------------------------------------------------------------
    def update(self, examples: Iterable[Example], *, drop: float = 0.0, sgd=None, losses=None):
        """One step on a batch of labelled pairs (`drop` is unused: the head has no dropout)."""
        losses = {} if losses is None else losses
        losses.setdefault(self.name, 0.0)
        examples = list(examples)
        validate_examples(examples, "MLMSenses.update")
        if not examples:
            return losses
        per_doc, vectors, backprop = self._doc_vectors([eg.predicted for eg in examples], is_train=True)
        loss, d_vectors = self.get_loss(examples, vectors)
        backprop(d_vectors)
        losses[self.name] += loss
        scores = pair_cosines(*_target_vectors(per_doc, [_sense_pair(eg, i) for i, eg in enumerate(examples)]))
        self._recent.extend(zip(scores.tolist(), [_label(eg, i) for i, eg in enumerate(examples)]))
        self.cfg["threshold"] = tune_threshold(*zip(*self._recent))[0]
        if sgd is not None:
            self.finish_update(sgd)
        return losses

    def get_loss(self, examples: Iterable[Example], scores: torch.Tensor) -> Tuple[float, torch.Tensor]:
        """The pair loss (`spacy_mlm.similarity.losses`) of the targets' vectors
        against `cats["SAME_SENSE"]`, and its gradient for `scores` (the
        examples' sense vectors, the head's output); its backward also fills
        the gradients of the loss's scale and bias."""
        examples = list(examples)
        groups = [_sense_pair(eg, i) for i, eg in enumerate(examples)]
        labels = numpy.asarray([_label(eg, i) for i, eg in enumerate(examples)], dtype="float32")
        head = sense_head(self.model)
        same = torch.from_numpy(labels).to(head.bias.device)
        sizes = [len(eg.predicted) for eg in examples]

        def pair_loss(vectors: torch.Tensor) -> torch.Tensor:
            targets = _target_vectors(list(torch.split(vectors, sizes)), groups)
            return sense_pair_loss(*targets, same, head.log_scale, head.bias)

        return loss_and_gradient(pair_loss, scores)

    def fit_threshold(self, examples: Iterable[Example], batch_size: int = 64) -> Tuple[float, float]:
        """Tune the stored threshold exactly on the current head's scores of
        labelled pairs (e.g. every training pair after training); returns the
        threshold and the accuracy on those pairs. The pipeline's components
        before this one process the pairs' Docs first, as `nlp.evaluate` does."""
        scores, labels = [], []
        examples = list(examples)
        names = self._nlp.pipe_names
        after = names[names.index(self.name):] if self.name in names else [self.name]
        for i in range(0, len(examples), batch_size):
            batch = examples[i: i + batch_size]
            docs = list(self._nlp.pipe([eg.predicted for eg in batch], batch_size=batch_size, disable=after))
            groups = [_sense_pair(eg, i + k) for k, eg in enumerate(batch)]
            vectors, _, _ = self._doc_vectors(docs, is_train=False)
            scores += pair_cosines(*_target_vectors(vectors, groups)).tolist()
            labels += [_label(eg, i + k) for k, eg in enumerate(batch)]
        threshold, accuracy = tune_threshold(scores, labels)
        self.cfg["threshold"] = threshold
        return threshold, accuracy

    def initialize(self, get_examples: Callable[[], Iterable[Example]], *, nlp: Optional[Language] = None) -> None:
        """Build the head to the encoder's width and number of hidden states,
        which its listener takes from the encoder. A frozen encoder is skipped
        by spaCy's initialize, so it is initialized here when it has no weights
        yet."""
        validate_get_examples(get_examples, "MLMSenses.initialize")
        encoder = self._encoder()
        if encoder.pairs != "apart":
            raise SettingError(
                f"'{self.name}' compares words of sentences read apart: set [components.{encoder.name}] "
                f"pairs = \"apart\" (it is {encoder.pairs!r}), so that a pair Doc's sides are read as two Docs are"
            )
        if not encoder.model.shims:
            encoder.initialize(get_examples, nlp=nlp)
        encoder.find_listeners(self)  # the listener takes the sizes (spaCy links a frozen encoder's listeners only later)
        self.model.initialize()
        self.senses = SenseInventory()
        self._recent.clear()

    # -- serialization ---------------------------------------------------------------
    def to_disk(self, path, *, exclude=tuple()) -> None:
        super().to_disk(path, exclude=exclude)
        atomic_write_bytes(ensure_path(path) / "senses.bin", self.senses.to_bytes())

    def from_disk(self, path, *, exclude=tuple()) -> "MLMSenses":
        load = super().from_disk
        checked_from_disk(path, "mlm_senses", lambda: load(path, exclude=exclude), exclude, {"threshold": NUMBER})
        senses = ensure_path(path) / "senses.bin"
        self.senses = SenseInventory.from_disk(senses)
        return self

    def to_bytes(self, *, exclude=tuple()) -> bytes:
        return srsly.msgpack_dumps({"pipe": super().to_bytes(exclude=exclude), "senses": self.senses.to_bytes()})

    def from_bytes(self, bytes_data: bytes, *, exclude=tuple()) -> "MLMSenses":
        try:
            msg = srsly.msgpack_loads(bytes_data)
            pipe, senses = msg["pipe"], msg["senses"]
        except (ValueError, KeyError, TypeError) as err:
            raise ModelLoadError(f"<{self.name} bytes>", f"not a serialized mlm_senses component: {err}") from None
        super().from_bytes(pipe, exclude=exclude)
        self.senses = SenseInventory.from_bytes(senses)
        return self


def _sense_pair(eg: Example, i: int):
    if SENSE_PAIR_KEY not in eg.predicted.spans or len(eg.predicted.spans[SENSE_PAIR_KEY]) != 2:
        raise SpacyMlmError(
            f"example {i} ({eg.predicted.text[:60]!r}) has no doc.spans[{SENSE_PAIR_KEY!r}] with its two targets: "
            "read the pairs with spacy_mlm.WiCCorpus.v1"
        )
    return eg.predicted.spans[SENSE_PAIR_KEY]


def _label(eg: Example, i: int) -> float:
    value = eg.reference.cats.get(SAME_SENSE)
    if value not in (0.0, 1.0):
        raise SpacyMlmError(f"example {i} ({eg.reference.text[:60]!r}) needs cats[{SAME_SENSE!r}] = 1.0 or 0.0, got {value!r}")
    return float(value)


def _target_vectors(vectors: List[torch.Tensor], groups: List) -> Tuple[torch.Tensor, torch.Tensor]:
    """(n, width) vectors of the first and of the second target of each pair."""
    firsts, seconds = [], []
    for v, group in zip(vectors, groups):
        first, second = group[0], group[1]
        firsts.append(span_vector(v, first.start, first.end))
        seconds.append(span_vector(v, second.start, second.end))
    return torch.stack(firsts), torch.stack(seconds)
