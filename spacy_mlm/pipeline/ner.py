"""Named entities by per-token tagging over the shared encoder ("mlm_ner").

Unlike spaCy's transition-based `ner`, every token gets a tag of a tag scheme
(IO, BIO or BIOES) from the torch head `spacy_mlm.TokenTagger.v3`: a softmax
per token or a linear-chain CRF over the sequence, both decoded with Viterbi
under the scheme's constraints, so the output is always well formed. Scores,
losses and decoding stay on the encoder's device (`spacy_mlm.tagging`: pure
maths, and `tagging/sequences.py`, which reads a batch's scores as its
sequences); only the tag ids (and, if asked, the probabilities) come to the
host. The component holds the settings, the labels and the gold masks.

Every entity carries its probability: the exact marginal that its tokens are
one entity of its type, over the well-formed tag paths (`tagging/span_marginals.py`:
constrained forward-backward over the CRF's scores, or the softmax tagger's
with zero transitions). It is written where spaCy users look for span scores:
`doc.spans[spans_key]` with `attrs["scores"]` aligned with the spans (spaCy's
spancat convention) and `span._.mlm_prob`; `doc.ents` stays the Viterbi path's
entities (less those under `threshold`). `temperature` (fitted on labelled
data by `calibrate`) divides the scores before the probabilities, never before
the Viterbi path, so calibration changes no entity; `score_scaling` (fitted
with it) then maps each span's probability through Platt's increasing
logistic map (`scoring/calibration.py`), which a temperature alone cannot
stand in for: after it, mid scores are still too sure and high ones not sure
enough (docs/ner.md).

Subword alignment happens in the listener: `EncoderListener` pools a token's
pieces (`first` / `mean`); `EncoderPieceListener` gives every subword a row,
and then `subword_loss` / `subword_decode` say how rows train and decide.
Missing annotation is handled as partial labels (any tag allowed there).

With `context = "document"` (set with the encoder's, which then reads each
sentence in its document) every sentence of a Doc is a sequence of its own: the
CRF trains and decodes sentence by sentence, as it does on one-sentence Docs, so
a document and its sentences given one by one with their context get the same
tags.
"""
from dataclasses import replace
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy
import torch
from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc, Span, SpanGroup
from spacy.training import Example, validate_examples, validate_get_examples
from spacy.util import minibatch
from spacy.vocab import Vocab
from thinc.api import Model, Optimizer

from ..errors import NotInitializedError, SpacyMlmError
from ..interop.hf_heads import read_hf_head
from ..models.tagger import tagger_head
from ..models.torch_head import loss_and_gradient
from ..scoring.calibration import (NO_SCALING, binary_nll, expected_calibration_error, fit_score_scaling,
                                   fit_temperature, scaled_scores, unscaled_threshold)
from ..tagging.crf import apply_constraints
from ..tagging.emissions import SUBWORD_POOLINGS, TagScores
from ..tagging.schemes import UnknownEntityLabels, allowed_tag_mask, make_tag_labels, normalize_scheme, transition_constraints
from ..tagging.sequences import (DocSpans, SpanRequest, decode_docs, decode_sequences, sequence_offsets, tagging_loss,
                                 tempered, viterbi_queries)
from ..tagging.span_marginals import expected_entity_errors, span_patterns, span_probabilities
from ..tokenization.context import CONTEXTS
from ..util.save import COMPONENT_CFG_VERSION, check_outputs_fit, checked_from_disk
from ..util.settings import FLAG, INT, NUMBER, NUMBERS, TEXT, TEXTS, SettingValueError, check_settings, optional

TAG_PROBS_ATTR = "tag_probs"
SPAN_PROB_ATTR = "mlm_prob"
SUBWORD_LOSSES = ("all", "first")

DEFAULT_NER_MODEL = {
    "@architectures": "spacy_mlm.TokenTagger.v3",
    "nO": None,
    "crf": False,
    "init_std": 0.02,
    "tok2vec": {"@architectures": "spacy_mlm.EncoderListener.v1", "width": None, "pooling": "first", "upstream": "*"},
}


@Language.factory(
    "mlm_ner",
    assigns=["doc.ents", "token.ent_iob", "token.ent_type", f"doc._.{TAG_PROBS_ATTR}", "doc.spans"],
    default_config={
        "model": DEFAULT_NER_MODEL,
        "scheme": "BIO",
        "constrained": True,
        "store_probs": False,
        "spans_key": "mlm_ner",
        "threshold": 0.0,
        "candidate_threshold": None,
        "n_best": None,
        "temperature": 1.0,
        "score_scaling": [1.0, 0.0],
        "subword_loss": "all",
        "subword_decode": "first",
        "context": "none",
        "scorer": {"@scorers": "spacy.ner_scorer.v1"},
    },
    default_score_weights={"ents_f": 1.0, "ents_p": 0.0, "ents_r": 0.0, "ents_per_type": None},
)
def make_mlm_ner(
    nlp: Language,
    name: str,
    model: Model,
    scheme: str,
    constrained: bool,
    store_probs: bool,
    spans_key: str,
    threshold: float,
    candidate_threshold: Optional[float],
    n_best: Optional[int],
    temperature: float,
    score_scaling: List[float],
    subword_loss: str,
    subword_decode: str,
    context: str,
    scorer: Optional[Callable],
) -> "MLMEntityRecognizer":
    """Entity recognizer tagging tokens in `scheme` ("IO", "BIO"/"IOB2" or
    "BIOES"/"BILUO") over the encoder's token vectors.

    model: `spacy_mlm.TokenTagger.v3` (`crf = true` for the CRF variant) over
        `spacy_mlm.EncoderListener.v1` (one vector per token; its `pooling`
        chooses first-subword or mean-of-subwords vectors) or
        `spacy_mlm.EncoderPieceListener.v1` (every subword scored).
    constrained: decode under the scheme's transition constraints (always
        well-formed output); without, the softmax takes each token's argmax
        and the CRF its unconstrained Viterbi path.
    store_probs: also set `doc._.tag_probs`, a (len(doc), n_tags) numpy array of
        tag probabilities (softmax) or marginals (CRF), columns in `tag_labels`
        order (at temperature 1).
    spans_key: `doc.spans[spans_key]` holds the entities with their
        probabilities (`attrs["scores"]`, also `span._.mlm_prob`) and the
        further spans `candidate_threshold` / `n_best` ask for; its attrs also
        hold "expected_entities" (the expected number of entities under the
        model) and "expected_errors" (the expected number of wrong entities of
        `doc.ents`: expected false positives plus expected misses).
    threshold: entities of the Viterbi path less probable than this are left
        out of `doc.ents` (high precision); 0 keeps them all.
    candidate_threshold: every other span at least this probable joins
        `doc.spans[spans_key]` (they may overlap each other and the entities:
        high recall, for review); null: none.
    n_best: at most this many of those further spans per Doc, the most probable
        first; without `candidate_threshold` they are taken from every span
        (a cost that grows with the square of the sentence length); null: no cap.
    temperature: the scores are divided by it before any probability is
        computed (not before the Viterbi path); `calibrate` fits it.
    score_scaling: [slope, intercept]: each span's probability p (at the
        temperature) is reported as sigmoid(slope * logit(p) + intercept), and
        `threshold` / `candidate_threshold` apply to that; [1, 0] reports the
        marginal itself; `calibrate` fits it after the temperature.
    subword_loss: with the piece listener and the softmax, "all" = every subword
        is trained on its word's tag, "first" = only the first subword is.
    subword_decode: with the piece listener, a word's scores are its first
        subword's ("first") or the mean of its subwords' distributions ("mean");
        the CRF trains on these token scores too.
    context: "none" tags each Doc as one sequence; "document" tags each sentence
        (`token.is_sent_start`) as a sequence of its own, which is what an encoder
        with context = "document" was trained for (set both the same).
    """
    check_settings("mlm_ner", scheme=(scheme, TEXT), constrained=(constrained, FLAG), store_probs=(store_probs, FLAG),
                   spans_key=(spans_key, TEXT), threshold=(threshold, NUMBER, ">= 0", "<= 1"),
                   candidate_threshold=(candidate_threshold, optional(NUMBER), ">= 0", "<= 1"),
                   n_best=(n_best, optional(INT), ">= 1"), temperature=(temperature, NUMBER, "> 0"),
                   score_scaling=(score_scaling, NUMBERS))
    if len(score_scaling) != 2 or not score_scaling[0] > 0:
        raise SettingValueError("mlm_ner", "score_scaling", score_scaling, "[slope, intercept] with a slope above 0")
    if not Doc.has_extension(TAG_PROBS_ATTR):
        Doc.set_extension(TAG_PROBS_ATTR, default=None)
    if not Span.has_extension(SPAN_PROB_ATTR):
        Span.set_extension(SPAN_PROB_ATTR, getter=span_probability)
    settings = dict(scheme=scheme, constrained=constrained, store_probs=store_probs, spans_key=spans_key,
                    threshold=threshold, candidate_threshold=candidate_threshold, n_best=n_best, temperature=temperature,
                    score_scaling=[float(x) for x in score_scaling])
    subwords = dict(subword_loss=subword_loss, subword_decode=subword_decode)
    return MLMEntityRecognizer(nlp.vocab, model, name, scorer=scorer, context=context, **settings, **subwords)


# the saved cfg's settings and their kinds (checked on load)
SAVED_CFG = {"labels": TEXTS, "scheme": TEXT, "constrained": FLAG, "store_probs": FLAG, "subword_loss": TEXT,
             "subword_decode": TEXT, "context": TEXT, "spans_key": TEXT, "threshold": NUMBER,
             "candidate_threshold": optional(NUMBER), "n_best": optional(INT), "temperature": NUMBER,
             "score_scaling": NUMBERS}


def span_probability(span: Span) -> Optional[float]:
    """`span._.mlm_prob`: the span's probability in the span group of the
    `mlm_ner` component that scored it (None if none did)."""
    for group in span.doc.spans.values():
        if SPAN_PROB_ATTR in group.attrs:
            for other, score in zip(group, group.attrs["scores"]):
                if (other.start, other.end, other.label) == (span.start, span.end, span.label):
                    return float(score)
    return None


class MLMEntityRecognizer(TrainablePipe):
    def __init__(self, vocab: Vocab, model: Model, name: str = "mlm_ner", *, scheme: str = "BIO",
                 constrained: bool = True, store_probs: bool = False, spans_key: str = "mlm_ner",
                 threshold: float = 0.0, candidate_threshold: Optional[float] = None, n_best: Optional[int] = None,
                 temperature: float = 1.0, score_scaling: Sequence[float] = NO_SCALING, subword_loss: str = "all",
                 subword_decode: str = "first", context: str = "none", scorer: Optional[Callable] = None):
        if subword_loss not in SUBWORD_LOSSES:
            raise SpacyMlmError(f"subword_loss must be one of {', '.join(SUBWORD_LOSSES)}, got {subword_loss!r}")
        if subword_decode not in SUBWORD_POOLINGS:
            raise SpacyMlmError(f"subword_decode must be one of {', '.join(SUBWORD_POOLINGS)}, got {subword_decode!r}")
        if context not in CONTEXTS:
            raise SpacyMlmError(f"context must be one of {', '.join(CONTEXTS)}, got {context!r}")
        self.vocab, self.model, self.name, self.scorer = vocab, model, name, scorer
        self.cfg = {"format_version": COMPONENT_CFG_VERSION, "labels": [], "scheme": normalize_scheme(scheme),
                    "constrained": constrained,
                    "store_probs": store_probs, "subword_loss": subword_loss, "subword_decode": subword_decode,
                    "context": context, "spans_key": spans_key, "threshold": threshold,
                    "candidate_threshold": candidate_threshold, "n_best": n_best, "temperature": temperature,
                    "score_scaling": list(score_scaling)}
        self._constraints: Dict = {}

    @property
    def labels(self) -> Tuple[str, ...]:
        """The entity types."""
        return tuple(self.cfg["labels"])

    @property
    def tag_labels(self) -> List[str]:
        """The tags (columns of the scores), derived from the types and the scheme."""
        return make_tag_labels(self.labels, self.cfg["scheme"])

    @property
    def label_data(self) -> List[str]:
        return list(self.labels)

    def add_label(self, label: str) -> int:
        if not isinstance(label, str) or not label.strip():
            raise SpacyMlmError(f"Invalid entity label {label!r}")
        if label in self.cfg["labels"]:
            return 0
        if self.model.has_dim("nO"):
            raise SpacyMlmError(f"Cannot add label {label!r} to '{self.name}' after it was initialized: "
                                "pass every label to initialize() instead")
        self.cfg["labels"] = sorted(self.cfg["labels"] + [label])
        return 1

    def initialize(self, get_examples: Callable[[], Iterable[Example]], *, nlp: Optional[Language] = None,
                   labels: Optional[Sequence[str]] = None, from_hf: Optional[str] = None) -> None:
        """Labels come from `labels` or the examples' entities. from_hf: a
        fine-tuned *ForTokenClassification directory whose entity types and
        classifier the tagger starts from (`interop.hf_heads.read_hf_head`: the
        head-reading code lives there, below this layer, with its export)."""
        validate_get_examples(get_examples, "MLMEntityRecognizer.initialize")
        hf_head = read_hf_head(from_hf, self, "ner", labels) if from_hf is not None else None
        if hf_head is not None:
            labels = hf_head.labels
        elif labels is None:
            labels = {ent.label_ for eg in get_examples() for ent in eg.reference.ents}
        self.cfg["labels"] = sorted(set(labels))
        if not self.labels:
            raise SpacyMlmError(f"'{self.name}' found no entity labels in the training data")
        docs = [eg.predicted for _, eg in zip(range(10), get_examples())]
        self.model.set_dim("nO", len(self.tag_labels), force=True)
        self.model.initialize(X=docs)
        if hf_head is not None:
            hf_head.copy_into(self)

    def from_disk(self, path, *, exclude=tuple()) -> "MLMEntityRecognizer":
        """spaCy's loader, with errors that name a missing or truncated file, and
        a check that the saved labels fit the saved weights."""
        load = super().from_disk
        checked_from_disk(path, "mlm_ner", lambda: load(path, exclude=exclude), exclude, SAVED_CFG)
        check_outputs_fit(path, self.model, len(self.tag_labels),
                          f"the labels {list(self.labels)} ({len(self.tag_labels)} tags)", "tags")
        return self

    # -- prediction -------------------------------------------------------------
    def predict(self, docs: Iterable[Doc]):
        docs = list(docs)
        if not self.model.has_dim("nO"):
            raise NotInitializedError(f"'{self.name}' has no labels yet: call nlp.initialize() first")
        if not docs:
            return [], None, []
        cfg = self.cfg
        n_best = cfg.get("n_best")
        min_prob = cfg.get("candidate_threshold")
        if min_prob is not None:  # the candidates' threshold on the mapped scores, as one on the marginals
            min_prob = unscaled_threshold(min_prob, self._score_scaling())
        request = SpanRequest(span_patterns(self.tag_labels, cfg["scheme"]), self._span_transitions(),
                              cfg.get("temperature", 1.0), 0.0 if min_prob is None and n_best else min_prob, n_best)
        return decode_docs(self.model.predict(docs), docs, self._transitions(), **self._decoding(),
                           with_probs=cfg["store_probs"], spans=request)

    def set_annotations(self, docs: Iterable[Doc], predictions) -> None:
        paths, probs, spans = predictions
        for i, (doc, doc_spans) in enumerate(zip(docs, spans)):
            self._set_entities(doc, doc_spans)
            if probs is not None:
                doc._.set(TAG_PROBS_ATTR, probs[i])

    def _set_entities(self, doc: Doc, spans: DocSpans) -> None:
        """doc.ents: the Viterbi entities whose (scaled) score is at least
        `threshold`; doc.spans[spans_key]: those and the further spans, with
        their scores. The expected counts are the model's own, from the
        marginals at the temperature (before the scaling)."""
        scaling = self._score_scaling()
        entity_scores = scaled_scores([p for *_, p in spans.entities], scaling)
        kept = [(e, q) for e, q in zip(spans.entities, entity_scores) if q >= self.cfg.get("threshold", 0.0)]
        entities = [Span(doc, s, e, label=label) for (s, e, label, _), _ in kept]
        doc.ents = entities
        scores = numpy.concatenate([numpy.array([q for _, q in kept], dtype=float),
                                    scaled_scores([p for *_, p in spans.alternatives], scaling)])
        errors = expected_entity_errors(spans.expected_entities, [e[3] for e, _ in kept])
        attrs = {"scores": scores.astype("float32"), SPAN_PROB_ATTR: self.name,
                 "expected_entities": spans.expected_entities, "expected_errors": errors}
        key = self.cfg.get("spans_key", "mlm_ner")
        # the group holds the entities' own Span objects, then the further spans
        doc.spans[key] = SpanGroup(doc, name=key, attrs=attrs, spans=entities + [
            Span(doc, s, e, label=label) for s, e, label, _ in spans.alternatives])

    def _score_scaling(self) -> Tuple[float, float]:
        return tuple(self.cfg.get("score_scaling", NO_SCALING))

    def _decoding(self) -> Dict:
        return dict(how=self.cfg["subword_decode"], crf=self.model.attrs["crf"],
                    by_sentence=self.cfg["context"] == "document", constrained=self.cfg["constrained"])

    def _transitions(self):
        """The head's (start, transitions, end), forbidden moves masked when constrained."""
        start, transitions, end = tagger_head(self.model).transition_scores()
        return self._constrained(start, transitions, end) if self.cfg["constrained"] else (start, transitions, end)

    def _span_transitions(self, temperature: Optional[float] = None):
        """The head's (start, transitions, end) divided by the temperature, then
        the scheme's constraints: the paths a span's probability sums over."""
        temperature = self.cfg.get("temperature", 1.0) if temperature is None else temperature
        return self._constrained(*(x / temperature for x in tagger_head(self.model).transition_scores()))

    def _constrained(self, start, transitions, end):
        key = (tuple(self.tag_labels), start.device)
        if key not in self._constraints:
            tables = transition_constraints(self.tag_labels, self.cfg["scheme"])
            self._constraints = {key: [torch.from_numpy(tables[k]).to(start.device) for k in ("start", "transitions", "end")]}
        return apply_constraints(start, transitions, end, *self._constraints[key])

    # -- calibration ------------------------------------------------------------
    def calibrate(self, examples: Iterable[Example], *, batch_size: int = 64,
                  with_scaling: bool = True) -> Dict[str, float]:
        """Fit `temperature` and then `score_scaling` on labelled examples (a
        dev set) whose predicted Docs went through the components before this
        one (the encoder): the temperature that minimises the negative
        log-likelihood of "this entity is right" (exact span and type) over
        the Viterbi entities, found by golden-section search over log T; then
        Platt's map of those probabilities with the least likelihood
        (`with_scaling=False`: none, the temperature alone). Sets both in cfg
        and returns them with the likelihood and the expected calibration
        error (15 bins) before (at the settings it had) and after."""
        examples = list(examples)
        validate_examples(examples, "MLMEntityRecognizer.calibrate")
        if not self.model.has_dim("nO"):
            raise NotInitializedError(f"'{self.name}' has no labels yet: call nlp.initialize() first")
        patterns, crf = span_patterns(self.tag_labels, self.cfg["scheme"]), self.model.attrs["crf"]
        batches, correct = [], []
        with torch.no_grad():
            for batch in minibatch(examples, batch_size):
                docs = [eg.predicted for eg in batch]
                decoded = decode_sequences(self.model.predict(docs), docs, self._transitions(), **self._decoding(),
                                           with_probs=False)
                queries = viterbi_queries(decoded, patterns)
                offsets = sequence_offsets(docs, self.cfg["context"] == "document")
                correct.extend(_entity_is_gold(batch[offsets[b][0]], s + offsets[b][1], e + offsets[b][1],
                                               patterns.labels[label]) for b, s, e, label in queries.tolist())
                batches.append((decoded, queries))
        if not correct:
            raise SpacyMlmError(f"'{self.name}' predicted no entity on the calibration data: nothing to fit")
        correct = numpy.array(correct, dtype=bool)

        def probs_at(temperature: float) -> numpy.ndarray:
            return numpy.concatenate([span_probabilities(
                tempered(decoded.emissions, crf, temperature), decoded.mask, *self._span_transitions(temperature),
                patterns, queries=queries).query_probs.cpu().numpy() for decoded, queries in batches])

        before, scaling_before = self.cfg.get("temperature", 1.0), self._score_scaling()
        temperature = fit_temperature(lambda t: binary_nll(probs_at(t), correct), start=before)
        at_temperature = probs_at(temperature)
        scaling = fit_score_scaling(at_temperature, correct) if with_scaling else NO_SCALING
        self.cfg["temperature"], self.cfg["score_scaling"] = temperature, list(scaling)
        old, new = scaled_scores(probs_at(before), scaling_before), scaled_scores(at_temperature, scaling)
        return {"temperature": temperature, "temperature_before": before, "score_scaling": list(scaling),
                "score_scaling_before": list(scaling_before), "n_entities": len(correct),
                "accuracy": float(correct.mean()), "nll_before": binary_nll(old, correct),
                "nll_after": binary_nll(new, correct), "ece_before": expected_calibration_error(old, correct),
                "ece_after": expected_calibration_error(new, correct)}

    # -- training ---------------------------------------------------------------
    def update(self, examples: Iterable[Example], *, drop: float = 0.0, sgd: Optional[Optimizer] = None,
               losses: Optional[Dict[str, float]] = None) -> Dict[str, float]:
        losses = {} if losses is None else losses
        losses.setdefault(self.name, 0.0)
        examples = list(examples)
        validate_examples(examples, "MLMEntityRecognizer.update")
        if not any(len(eg.predicted) for eg in examples):
            return losses
        scores, backprop = self.model.begin_update([eg.predicted for eg in examples])
        loss, d_scores = self.get_loss(examples, scores)
        backprop(d_scores)
        if sgd is not None:
            self.finish_update(sgd)
        losses[self.name] += loss
        return losses

    def get_loss(self, examples: Iterable[Example], scores: TagScores) -> Tuple[float, torch.Tensor]:
        """Mean negative log-likelihood per annotated token (or subword) and its
        gradient for `scores.scores`; the CRF's own scores get theirs directly."""
        examples = list(examples)
        validate_examples(examples, "MLMEntityRecognizer.get_loss")
        return loss_and_gradient(lambda leaf: self._loss(examples, replace(scores, scores=leaf)), scores.scores)

    def _loss(self, examples: List[Example], scores: TagScores) -> torch.Tensor:
        allowed = [torch.from_numpy(self._allowed_tags(eg)).to(scores.scores.device) for eg in examples]
        return tagging_loss(scores, [eg.predicted for eg in examples], allowed,
                            self._transitions() if self.model.attrs["crf"] else None, how=self.cfg["subword_decode"],
                            subword_loss=self.cfg["subword_loss"], by_sentence=self.cfg["context"] == "document")

    def _allowed_tags(self, example: Example):
        try:
            return allowed_tag_mask(example.get_aligned_ner(), self.tag_labels, self.cfg["scheme"])
        except UnknownEntityLabels as err:
            raise SpacyMlmError(
                f"'{self.name}' has the entity labels {list(self.labels)}, but a training example has entities "
                f"labelled {err.unknown} (in {example.reference.text[:60]!r}); training on it would teach those "
                f"tokens as outside any entity. Leave `labels` in [initialize.components.{self.name}] unset to take "
                "them from the training data, or add the missing ones"
            ) from None


def _entity_is_gold(example: Example, start: int, end: int, label: str) -> bool:
    """Whether the predicted Doc's tokens start..end-1 labelled `label` are an
    entity of the reference (the same characters and type)."""
    span = example.predicted[start:end]
    return any((ent.start_char, ent.end_char, ent.label_) == (span.start_char, span.end_char, label)
               for ent in example.reference.ents)

