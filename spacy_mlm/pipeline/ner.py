"""Named entities by per-token tagging over the shared encoder ("mlm_ner").

Unlike spaCy's transition-based `ner`, every token gets a tag of a tag scheme
(IO, BIO or BIOES) from a linear layer over its encoder vector; either a softmax
per token or a linear-chain CRF over the sequence. Both decode with Viterbi under
the scheme's transition constraints, so the output is always a well-formed tag
sequence (for the softmax, Viterbi over log-probabilities with forbidden moves
masked is the most probable *valid* sequence under the independence
assumption; greedy argmax could produce "O I-PER").

Subword alignment happens in the listener: `pooling = "first"` tags a token by
its first subword's vector, `"mean"` by the mean of its subwords' vectors. A
token without subwords (whitespace) gets a zero vector and still a tag.

Missing annotation (tokens whose entity status is unknown) is handled as partial
labels: those tokens may take any tag, and the loss is the negative log of the
probability mass of every tag sequence that agrees with the known tags.
"""
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy
import torch
from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc, Span
from spacy.training import Example, validate_examples, validate_get_examples
from spacy.util import registry
from spacy.vocab import Vocab
from thinc.api import Model, Optimizer
from thinc.types import Floats2d, Ragged

from ..errors import NotInitializedError, SpacyMlmError
from ..util.save import checked_from_disk
from ..models import tagger as _token_tagger  # noqa: F401  (registers spacy_mlm.TokenTagger.v1 and .v2)
from ..tagging.pieces import SUBWORD_POOLINGS, pool_piece_scores
from ..tagging.crf import FORBIDDEN, apply_constraints, crf_marginals, crf_nll, crf_viterbi
from ..tagging.schemes import make_tag_labels, normalize_scheme, spans_to_tags, tags_to_spans, transition_constraints

TAG_PROBS_ATTR = "tag_probs"
SUBWORD_LOSSES = ("all", "first")
if not Doc.has_extension(TAG_PROBS_ATTR):
    Doc.set_extension(TAG_PROBS_ATTR, default=None)

@Language.factory(
    "mlm_ner",
    assigns=["doc.ents", "token.ent_iob", "token.ent_type", f"doc._.{TAG_PROBS_ATTR}"],
    default_config={
        "model": {
            "@architectures": "spacy_mlm.TokenTagger.v2",
            "nO": None,
            "crf": False,
            "init_std": 0.02,
            "tok2vec": {
                "@architectures": "spacy_mlm.EncoderListener.v1",
                "width": 384,
                "pooling": "first",
                "upstream": "*",
            },
        },
        "scheme": "BIO",
        "constrained": True,
        "store_probs": False,
        "subword_loss": "all",
        "subword_decode": "first",
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
    subword_loss: str,
    subword_decode: str,
    scorer: Optional[Callable],
) -> "EntityTagger":
    """Entity recognizer tagging tokens in `scheme` ("IO", "BIO"/"IOB2" or
    "BIOES"/"BILUO") over the encoder's token vectors.

    model: `spacy_mlm.TokenTagger.v2` (`crf = true` for the CRF variant) over
        `spacy_mlm.EncoderListener.v1` (one pooled vector per token: its
        `pooling` chooses first-subword or mean-of-subwords vectors) or over
        `spacy_mlm.EncoderPieceListener.v1` (every subword scored; then the two
        `subword_*` options apply). Set the listener's `width` to the encoder's.
    constrained: decode under the scheme's transition constraints (always
        well-formed output). Without it the softmax variant takes each token's
        argmax and the CRF its unconstrained Viterbi path.
    store_probs: also set `doc._.tag_probs`, a (len(doc), n_tags) array of tag
        probabilities (softmax) or marginals (CRF), columns in the order of
        the component's `tag_labels`.
    subword_loss: with the piece listener and the softmax, "all" = every
        subword is trained on its word's tag, "first" = only the first subword
        carries the loss. (The CRF trains on the token scores that
        `subword_decode` makes.)
    subword_decode: with the piece listener, a word's scores are its first
        subword's ("first") or the mean of its subwords' distributions ("mean").
    """
    return EntityTagger(
        nlp.vocab,
        model,
        name,
        scheme=scheme,
        constrained=constrained,
        store_probs=store_probs,
        subword_loss=subword_loss,
        subword_decode=subword_decode,
        scorer=scorer,
    )


class EntityTagger(TrainablePipe):
    def __init__(
        self,
        vocab: Vocab,
        model: Model,
        name: str = "mlm_ner",
        *,
        scheme: str = "BIO",
        constrained: bool = True,
        store_probs: bool = False,
        subword_loss: str = "all",
        subword_decode: str = "first",
        scorer: Optional[Callable] = None,
    ):
        if subword_loss not in SUBWORD_LOSSES:
            raise SpacyMlmError(f"subword_loss must be one of {', '.join(SUBWORD_LOSSES)}, got {subword_loss!r}")
        if subword_decode not in SUBWORD_POOLINGS:
            raise SpacyMlmError(f"subword_decode must be one of {', '.join(SUBWORD_POOLINGS)}, got {subword_decode!r}")
        self.vocab = vocab
        self.model = model
        self.name = name
        self.scorer = scorer
        self.cfg = {
            "labels": [],
            "scheme": normalize_scheme(scheme),
            "constrained": constrained,
            "store_probs": store_probs,
            "subword_loss": subword_loss,
            "subword_decode": subword_decode,
        }

    # -- labels -----------------------------------------------------------------
    @property
    def labels(self) -> Tuple[str, ...]:
        """The entity types."""
        return tuple(self.cfg["labels"])

    @property
    def tag_labels(self) -> List[str]:
        """The tags (columns of the model's output), derived from the types and the scheme."""
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
            raise SpacyMlmError(
                f"Cannot add label {label!r} to '{self.name}' after it was initialized: "
                "pass every label to initialize() instead"
            )
        self.cfg["labels"] = sorted(self.cfg["labels"] + [label])
        return 1

    def initialize(
        self,
        get_examples: Callable[[], Iterable[Example]],
        *,
        nlp: Optional[Language] = None,
        labels: Optional[Sequence[str]] = None,
    ) -> None:
        validate_get_examples(get_examples, "EntityTagger.initialize")
        if labels is None:
            labels = {ent.label_ for eg in get_examples() for ent in eg.reference.ents}
        self.cfg["labels"] = sorted(set(labels))
        if not self.labels:
            raise SpacyMlmError(f"'{self.name}' found no entity labels in the training data")
        docs = [eg.predicted for _, eg in zip(range(10), get_examples())]
        self.model.set_dim("nO", len(self.tag_labels), force=True)
        self.model.initialize(X=docs)

    def from_disk(self, path, *, exclude=tuple()) -> "EntityTagger":
        """spaCy's loader, with errors that name a missing or truncated file."""
        load = super().from_disk
        return checked_from_disk(path, "mlm_ner", lambda: load(path, exclude=exclude), exclude)

    # -- prediction -------------------------------------------------------------
    def predict(self, docs: Iterable[Doc]):
        docs = list(docs)
        if not self.model.has_dim("nO"):
            raise NotInitializedError(f"'{self.name}' has no labels yet: call nlp.initialize() first")
        if not docs:
            return [], []
        scores = self.model.predict(docs)
        return self._decode(scores)

    def set_annotations(self, docs: Iterable[Doc], predictions) -> None:
        tag_ids, probs = predictions
        tags = self.tag_labels
        for i, (doc, ids) in enumerate(zip(docs, tag_ids)):
            doc.ents = [
                Span(doc, start, end, label=label) for start, end, label in tags_to_spans([tags[j] for j in ids])
            ]
            if probs is not None:
                doc._.set(TAG_PROBS_ATTR, probs[i])

    def _decode(self, scores: List[Floats2d]):
        """Viterbi paths (tag ids per doc) and, if asked for, per-token probabilities."""
        crf = self.model.attrs["crf"]
        rows = [torch.from_numpy(numpy.ascontiguousarray(_data(s))) for s in scores]
        emissions, mask = _pad(self._token_scores(rows, scores, self.cfg["subword_decode"]), self.model.get_dim("nO"))
        lengths = [_n_tokens(s) for s in scores]
        if not crf:
            emissions = torch.log_softmax(emissions, dim=-1)
        start, transitions, end = self._constrain(*self._transition_scores())
        if not self.cfg["constrained"] and not crf:
            paths = emissions.argmax(dim=-1).tolist()
        else:
            paths = crf_viterbi(emissions, mask, start, transitions, end)
        paths = [p[:n] for p, n in zip(paths, lengths)]
        probs = None
        if self.cfg["store_probs"]:
            marginals = crf_marginals(emissions, mask, start, transitions, end) if crf else emissions.exp()
            probs = [marginals[i, :n].numpy().astype("float32") for i, n in enumerate(lengths)]
        return paths, probs

    def _transition_scores(self, trainable: bool = False):
        """start / transitions / end as torch tensors: the CRF's learned scores,
        zeros for the softmax."""
        n = self.model.get_dim("nO")
        if not self.model.attrs["crf"]:
            return torch.zeros(n), torch.zeros((n, n)), torch.zeros(n)
        params, _ = self.model.get_ref("crf")(None, is_train=False)
        return tuple(torch.tensor(numpy.asarray(p), requires_grad=trainable) for p in params)

    def _constrain(self, start, transitions, end):
        if not self.cfg["constrained"]:
            return start, transitions, end
        allowed = transition_constraints(self.tag_labels, self.cfg["scheme"])
        return apply_constraints(
            start,
            transitions,
            end,
            torch.from_numpy(allowed["start"]),
            torch.from_numpy(allowed["transitions"]),
            torch.from_numpy(allowed["end"]),
        )

    # -- training ---------------------------------------------------------------
    def update(
        self,
        examples: Iterable[Example],
        *,
        drop: float = 0.0,
        sgd: Optional[Optimizer] = None,
        losses: Optional[Dict[str, float]] = None,
    ) -> Dict[str, float]:
        if losses is None:
            losses = {}
        losses.setdefault(self.name, 0.0)
        examples = list(examples)
        validate_examples(examples, "EntityTagger.update")
        if not any(len(eg.predicted) for eg in examples):
            return losses
        scores, backprop = self.model.begin_update([eg.predicted for eg in examples])
        loss, d_scores, d_crf = self._loss(examples, scores)
        backprop(d_scores)
        if d_crf is not None:
            _, backprop_crf = self.model.get_ref("crf")(None, is_train=True)
            backprop_crf(d_crf)
        if sgd is not None:
            self.finish_update(sgd)
        losses[self.name] += loss
        return losses

    def get_loss(self, examples: Iterable[Example], scores: List[Floats2d]) -> Tuple[float, List[Floats2d]]:
        loss, d_scores, _ = self._loss(list(examples), scores)
        return loss, d_scores

    def _loss(self, examples: List[Example], scores):
        """Mean negative log-likelihood per annotated token (or subword), its
        gradient for the scores and (CRF) for the start / transition / end scores."""
        validate_examples(examples, "EntityTagger.get_loss")
        n_tags = self.model.get_dim("nO")
        crf = self.model.attrs["crf"]
        rows = [torch.tensor(numpy.asarray(_data(s)), requires_grad=True) for s in scores]
        gold = [torch.from_numpy(self._gold_tag_mask(eg)) for eg in examples]
        pieces = [torch.as_tensor(numpy.asarray(s.lengths), dtype=torch.long) if isinstance(s, Ragged) else None for s in scores]
        # a token without pieces has no score of its own to train
        gold = [g if p is None else g | (p == 0).unsqueeze(1) for g, p in zip(gold, pieces)]
        if not crf and self.cfg["subword_loss"] == "all" and any(p is not None for p in pieces):
            # every subword learns its word's tag
            flat = torch.cat(rows)
            allowed = torch.cat([g if p is None else g.repeat_interleave(p, dim=0) for g, p in zip(gold, pieces)])
            per_row = _softmax_nll(flat, allowed)
            nll, n_annotated = per_row.sum(), int((allowed.sum(dim=1) == 1).sum())
        else:
            how = self.cfg["subword_decode"] if crf else "first"
            emissions, mask = _pad(self._token_scores(rows, scores, how), n_tags)
            tag_mask = torch.ones(emissions.shape, dtype=torch.bool)
            for i, g in enumerate(gold):
                tag_mask[i, : len(g)] = g
            n_annotated = int(sum(int((g.sum(dim=1) == 1).sum()) for g in gold))
            if crf:
                leaves = self._transition_scores(trainable=True)
                nll = crf_nll(emissions, tag_mask, mask, *self._constrain(*leaves)).sum()
            else:
                nll = (_softmax_nll(emissions, tag_mask) * mask).sum()
        loss = nll / max(n_annotated, 1)
        loss.backward()
        d_scores = [
            self.model.ops.asarray2f(r.grad.numpy()) if p is None else Ragged(self.model.ops.asarray2f(r.grad.numpy()), s.lengths)
            for r, p, s in zip(rows, pieces, scores)
        ]
        d_crf = tuple(self.model.ops.asarray(leaf.grad.numpy()) for leaf in leaves) if crf else None
        return float(loss.detach()), d_scores, d_crf

    def _token_scores(self, rows: List[torch.Tensor], scores, how: str) -> List[torch.Tensor]:
        """One score row per token: the model's own for token input; pooled
        from the subword rows (`how` = first | mean) for piece input."""
        log_probs = not self.model.attrs["crf"]
        return [
            pool_piece_scores(r, s.lengths, how, log_probs) if isinstance(s, Ragged) else r for r, s in zip(rows, scores)
        ]

    def _gold_tag_mask(self, example: Example) -> numpy.ndarray:
        """(len(predicted), n_tags) bool: the tags each predicted token may have.
        An entity type the component does not know is an error, not dropped:
        its tokens would otherwise be trained as outside any entity. (At
        evaluation time unknown gold types are scored as misses.)"""
        tags = self.tag_labels
        index = {tag: i for i, tag in enumerate(tags)}
        aligned = example.get_aligned_ner()  # BILUO per predicted token; None / "-" = unknown
        n = len(aligned)
        known = numpy.array([t not in (None, "-") for t in aligned], dtype=bool)
        biluo = [t if k else "O" for t, k in zip(aligned, known)]
        spans = tags_to_spans(biluo)
        unknown = sorted({label for _, _, label in spans if label not in self.cfg["labels"]})
        if unknown:
            raise SpacyMlmError(
                f"'{self.name}' has the entity labels {list(self.labels)}, but a training example has entities "
                f"labelled {unknown} (in {example.reference.text[:60]!r}); training on it would teach those tokens "
                f"as outside any entity. Leave `labels` in [initialize.components.{self.name}] unset to take them "
                "from the training data, or add the missing ones"
            )
        gold = spans_to_tags(n, spans, self.cfg["scheme"])
        allowed = numpy.ones((n, len(tags)), dtype=bool)
        rows = numpy.flatnonzero(known)
        allowed[rows] = False
        allowed[rows, [index[gold[r]] for r in rows]] = True
        return allowed


def _data(scores):
    return scores.data if isinstance(scores, Ragged) else scores


def _n_tokens(scores) -> int:
    return len(scores.lengths) if isinstance(scores, Ragged) else len(scores)


def _softmax_nll(logits: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Per-row -log of the probability of the allowed tags (0 where all are allowed)."""
    return torch.logsumexp(logits, dim=-1) - torch.logsumexp(logits.masked_fill(~allowed, FORBIDDEN), dim=-1)


def _pad(rows: List[torch.Tensor], n_tags: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Per-doc (n_tokens, K) score tensors as one zero-padded (B, T, K) tensor
    and its (B, T) mask (differentiable). Every row gets at least one position
    (the CRF recursions start from one); an empty doc's dummy position is cut
    off again by its length."""
    longest = max([1] + [len(r) for r in rows])
    if not rows:
        return torch.zeros((0, longest, n_tags)), torch.zeros((0, longest), dtype=torch.bool)
    padded = torch.stack([torch.nn.functional.pad(r, (0, 0, 0, longest - len(r))) for r in rows])
    mask = torch.zeros((len(rows), longest), dtype=torch.bool)
    for i, r in enumerate(rows):
        mask[i, : max(len(r), 1)] = True
    return padded, mask
