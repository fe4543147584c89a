"""Text and sentence-pair classification on the shared encoder ("mlm_textcat").

One component for exclusive classes (softmax + cross-entropy: sentiment, topic,
NLI) and multi-label tasks (a sigmoid + binary cross-entropy per label). Which
one is the head's `exclusive_classes` setting, so the loss, the decision rule and
the scores always agree with the model. It builds on spaCy's `TextCategorizer`
(labels, `doc.cats`, serialization, rehearsal) and replaces its loss: spaCy's
textcat uses a squared error on the probabilities, which for sigmoid outputs
learns slowly once they saturate.

Sentence pairs are ordinary Docs made by `make_pair_doc`; the encoder encodes
them as `[CLS] A [SEP] B [SEP]` with segment ids and the head reads the [CLS]
vector. `classify_pair(nlp, premise, hypothesis)` is the one-call API.

`temperature` divides the logits before the softmax (sigmoid): 1 as trained,
fitted on labelled data by `calibrate` (`spacy_mlm calibrate`) so that the
probabilities in `doc.cats` can be taken at their word; the most probable
class never changes with it.
"""
from itertools import islice
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Tuple, Union

import torch
from spacy.language import Language
from spacy.pipeline.textcat import TextCategorizer
from spacy.tokens import Doc
from spacy.training import Example, validate_examples, validate_get_examples
from spacy.util import minibatch
from thinc.api import Config, Model, xp2torch

from ..classification.losses import (
    balanced_class_weights,
    class_weight_vector,
    sigmoid_binary_cross_entropy,
    softmax_cross_entropy,
)
from ..models.torch_head import loss_and_gradient
from ..tokenization.pair import make_pair_doc
from ..errors import DataError, SpacyMlmError
from ..interop.hf_heads import read_hf_head
from .pair_input import PairInputGuard
from ..scoring.calibration import decision_confidence, expected_calibration_error, fit_temperature
from ..scoring.textcat import unknown_gold_labels
from ..util.save import COMPONENT_CFG_VERSION, check_outputs_fit, checked_from_disk
from ..util.settings import FLAG, NUMBER, TEXT, TEXTS, check_settings, optional

DEFAULT_CLASSIFIER_MODEL = Config().from_str(
    """
[model]
@architectures = "spacy_mlm.ClassifierHead.v3"
exclusive_classes = true
hidden_width = 0
nO = null
init_std = 0.02

[model.tok2vec]
@architectures = "spacy_mlm.EncoderListener.v1"
width = null
pooling = "cls"
upstream = "*"
"""
)["model"]

ClassWeights = Union[str, Dict[str, float], None]


@Language.factory(
    "mlm_textcat",
    assigns=["doc.cats"],
    default_config={
        "model": DEFAULT_CLASSIFIER_MODEL,
        "threshold": 0.5,
        "class_weights": None,
        "temperature": 1.0,
        "scorer": {"@scorers": "spacy_mlm.textcat_scorer.v1"},
    },
    default_score_weights={
        "cats_score": 1.0,
        "cats_accuracy": 0.0,
        "cats_score_desc": None,
        "cats_micro_p": None,
        "cats_micro_r": None,
        "cats_micro_f": None,
        "cats_macro_p": None,
        "cats_macro_r": None,
        "cats_macro_f": None,
        "cats_macro_auc": None,
        "cats_f_per_type": None,
        "cats_auc_per_type": None,
    },
)
def make_mlm_textcat(
    nlp: Language, name: str, model: Model, threshold: float, class_weights: ClassWeights, temperature: float,
    scorer: Optional[Callable]
) -> "MLMTextCategorizer":
    """Classifier writing `doc.cats`, for single texts or pair Docs.

    model: `spacy_mlm.ClassifierHead.v3` on an `EncoderListener` (default: the
        [CLS] vector, exclusive classes; the width is the encoder's). Multi-label:
        set `exclusive_classes = false` on the model. For pairs set the listener's
        `pooling = "pair_mean"` (configs/nli.cfg does): [u, v, |u - v|] from the
        mean of each side's pieces, Sentence-BERT's features, which beat [CLS]
        on held-out SNLI pairs, where the model's pretrained pooler (`"pooler"`,
        Hugging Face's input) and "doc_mean" were below it (the pair ablations:
        docs/classification.md, docs/benchmarks.md).
    threshold: multi-label decision cutoff for scoring (exclusive: the argmax wins).
    class_weights: null, "balanced" (from the training data's label counts), or
        {label: weight}; exclusive classes weight the cross-entropy of rows by
        their gold class, multi-label weights the positive cells of each label.
    temperature: the logits are divided by it before the softmax (sigmoid);
        `calibrate` fits it on labelled data.
    scorer: `spacy_mlm.textcat_scorer.v1`: spaCy's cats scores (macro F, per-label
        P/R/F, AUC) plus `cats_accuracy`."""
    return MLMTextCategorizer(nlp.vocab, model, name, threshold=threshold, class_weights=class_weights,
                              temperature=temperature, scorer=scorer)


class MLMTextCategorizer(PairInputGuard, TextCategorizer):
    def __init__(
        self,
        vocab,
        model: Model,
        name: str = "mlm_textcat",
        *,
        threshold: float = 0.5,
        class_weights: ClassWeights = None,
        temperature: float = 1.0,
        scorer: Optional[Callable] = None,
    ):
        check_settings(f"'{name}'", threshold=(threshold, NUMBER, ">= 0", "<= 1"),
                       temperature=(temperature, NUMBER, "> 0"))
        exclusive = model.attrs.get("exclusive_classes")
        if exclusive is None:
            raise SpacyMlmError(
                f"the '{name}' component needs a model that declares attrs['exclusive_classes'] "
                "(use spacy_mlm.ClassifierHead.v3)"
            )
        if isinstance(class_weights, str) and class_weights != "balanced":
            raise SpacyMlmError(f"class_weights must be null, \"balanced\" or a dict, got {class_weights!r}")
        super().__init__(vocab, model, name, threshold=threshold, scorer=scorer)
        self.cfg["exclusive_classes"] = bool(exclusive)
        self.cfg["format_version"] = COMPONENT_CFG_VERSION
        self.cfg["class_weights"] = class_weights
        self.cfg["temperature"] = temperature

    @property
    def exclusive_classes(self) -> bool:
        return bool(self.cfg["exclusive_classes"])

    @property
    def support_missing_values(self) -> bool:
        # Multi-label cats may leave labels out (unknown); exclusive rows are complete.
        return not self.exclusive_classes

    def _validate_categories(self, examples: Iterable[Example]) -> None:
        if self.exclusive_classes:
            super()._validate_categories(examples)
            return
        for eg in examples:
            for label, value in eg.reference.cats.items():
                if value not in (0.0, 1.0):
                    raise DataError(f"cats values must be 0.0 or 1.0, got {label!r}: {value!r}")

    def initialize(
        self,
        get_examples: Callable[[], Iterable[Example]],
        *,
        nlp: Optional[Language] = None,
        labels: Optional[Iterable[str]] = None,
        positive_label: Optional[str] = None,
        from_hf: Optional[str] = None,
    ) -> None:
        """Labels come from `labels` or the examples' cats; "balanced" class
        weights are computed here from the examples and saved with the component.
        positive_label: for two exclusive classes, makes `cats_score` that label's F.
        from_hf: a fine-tuned *ForSequenceClassification directory whose labels
        (id2label, in its order) and head the classifier starts from
        (`interop.hf_heads.read_hf_head`: the head-reading code lives there,
        below this layer, with its export)."""
        validate_get_examples(get_examples, "MLMTextCategorizer.initialize")
        self._validate_categories(get_examples())
        hf_head = read_hf_head(from_hf, self, "textcat", labels) if from_hf is not None else None
        labels = hf_head.labels if hf_head is not None else labels
        for label in labels if labels is not None else (c for eg in get_examples() for c in eg.reference.cats):
            self.add_label(label)
        if len(self.labels) < (2 if self.exclusive_classes else 1):
            raise SpacyMlmError(
                f"'{self.name}' has labels {list(self.labels)}: exclusive classes need at least two "
                "(the examples' doc.cats, or `labels` in [initialize.components])"
            )
        if positive_label is not None and (
            not self.exclusive_classes or len(self.labels) != 2 or positive_label not in self.labels
        ):
            raise SpacyMlmError(
                f"positive_label {positive_label!r} needs two exclusive classes including it; labels are "
                f"{list(self.labels)}"
            )
        self.cfg["positive_label"] = positive_label
        weights = self.cfg.get("class_weights")
        if weights == "balanced":
            gold = ([k for k, v in eg.reference.cats.items() if v >= 0.5] for eg in get_examples())
            weights = balanced_class_weights(gold, self.labels, self.exclusive_classes)
        class_weight_vector(self.labels, weights)  # validates names and values
        self.cfg["class_weights"] = weights
        sample = list(islice(get_examples(), 10))
        self.record_pair_input(eg.predicted for eg in sample)
        truths, _ = self._examples_to_truth(sample)
        self.model.initialize(X=[eg.reference for eg in sample], Y=truths)
        if hf_head is not None:
            hf_head.copy_into(self)

    def from_disk(self, path, *, exclude=tuple()) -> "MLMTextCategorizer":
        """spaCy's loader, with errors that name a missing or truncated file, and
        a check that the saved labels fit the saved weights."""
        load = super().from_disk
        schema = {"labels": TEXTS, "threshold": NUMBER, "exclusive_classes": FLAG, "positive_label": optional(TEXT),
                  "pair_input": FLAG, "temperature": NUMBER}
        checked_from_disk(path, "mlm_textcat", lambda: load(path, exclude=exclude), exclude, schema)
        check_outputs_fit(path, self.model, len(self.labels), f"the labels {list(self.labels)}", "labels")
        return self

    def predict(self, docs: Iterable[Doc]):
        """(n_docs, n_labels) probabilities, as a numpy array on the host (a
        component trained on pairs warns once when given a single text)."""
        return self._probabilities(self.logits(docs), self.cfg.get("temperature", 1.0))

    def logits(self, docs: Iterable[Doc]) -> torch.Tensor:
        """(n_docs, n_labels) scores before the temperature and the softmax (or
        sigmoid), on the model's device: what `mlm_zero_shot` compares across
        the hypotheses of a text, as Hugging Face's zero-shot pipeline does."""
        docs = list(docs)
        self.check_pair_input(docs)
        return self.model.predict(docs)

    def _probabilities(self, logits: torch.Tensor, temperature: float):
        scaled = logits / temperature
        probs = torch.softmax(scaled, dim=-1) if self.exclusive_classes else torch.sigmoid(scaled)
        return probs.float().cpu().numpy()

    def calibrate(self, examples: Iterable[Example], *, batch_size: int = 64) -> Dict[str, float]:
        """Fit `temperature` on labelled examples (a dev set) whose predicted
        Docs went through the components before this one (the encoder): the
        one that minimises the cross-entropy (binary cross-entropy of the known
        cells, multi-label) of the gold labels, by golden-section search over
        log T. Sets cfg["temperature"] and returns it with the loss and the
        expected calibration error (15 bins) of the decisions before (at the
        temperature it had) and after."""
        examples = list(examples)
        validate_examples(examples, "MLMTextCategorizer.calibrate")
        if not examples:
            raise SpacyMlmError(f"'{self.name}' got no examples to calibrate on")
        self._validate_categories(examples)
        with torch.no_grad():
            logits = torch.cat([self.model.predict([eg.predicted for eg in batch])
                                for batch in minibatch(examples, batch_size)]).float()
        truths, known = (_tensor(a, logits.device) for a in self._examples_to_truth(examples))

        def loss_at(temperature: float) -> float:
            if self.exclusive_classes:
                return float(softmax_cross_entropy(logits / temperature, truths))
            return float(sigmoid_binary_cross_entropy(logits / temperature, truths, known))

        def ece_at(temperature: float) -> float:
            scores, correct = decision_confidence(self._probabilities(logits, temperature), truths.cpu().numpy(),
                                                  known.cpu().numpy(), self.exclusive_classes)
            return expected_calibration_error(scores, correct)

        before = self.cfg.get("temperature", 1.0)
        temperature = fit_temperature(loss_at, start=before)
        self.cfg["temperature"] = temperature
        return {"temperature": temperature, "temperature_before": before, "n_examples": len(examples),
                "nll_before": loss_at(before), "nll_after": loss_at(temperature), "ece_before": ece_at(before),
                "ece_after": ece_at(temperature)}

    def get_loss(self, examples: Iterable[Example], scores: torch.Tensor) -> Tuple[float, torch.Tensor]:
        """Cross-entropy (exclusive) or binary cross-entropy (multi-label) of the
        logits, and its gradient for them, on the logits' device."""
        examples = list(examples)
        validate_examples(examples, "MLMTextCategorizer.get_loss")
        self._validate_categories(examples)
        unknown = unknown_gold_labels((eg.reference.cats for eg in examples), self.labels)
        if unknown:
            raise SpacyMlmError(
                f"'{self.name}' has the labels {list(self.labels)}, but the training examples have gold labels "
                f"{unknown} it does not know (rows would be trained as if they had no label). Leave `labels` in "
                f"[initialize.components.{self.name}] unset to take them from the training data, or make them match"
            )
        truths, known = (_tensor(a, scores.device) for a in self._examples_to_truth(examples))
        weights = class_weight_vector(self.labels, self.cfg.get("class_weights"))
        weights = None if weights is None else _tensor(weights, scores.device)
        if self.exclusive_classes:
            return loss_and_gradient(lambda logits: softmax_cross_entropy(logits, truths, weights), scores)
        return loss_and_gradient(lambda logits: sigmoid_binary_cross_entropy(logits, truths, known, weights), scores)


def _tensor(array, device: torch.device) -> torch.Tensor:
    return xp2torch(array).to(device=device, dtype=torch.float32)


def _pair_docs(nlp: Language, pairs: Iterable[Tuple[str, str]], symmetric: bool) -> Iterator[Doc]:
    for a, b in pairs:
        yield make_pair_doc(nlp, a, b)
        if symmetric:
            yield make_pair_doc(nlp, b, a)


def _mean_cats(first: Dict[str, float], second: Dict[str, float]) -> Dict[str, float]:
    return {label: (value + second[label]) / 2 for label, value in first.items()}


def classify_pairs(
    nlp: Language, pairs: Iterable[Tuple[str, str]], batch_size: Optional[int] = None, symmetric: bool = False
) -> List[Dict[str, float]]:
    """doc.cats for each (premise, hypothesis) pair, in order. The pairs stream
    through `nlp.pipe` in batches of `batch_size` pair Docs (the pipeline's
    default if None), as single texts do, with the same results as one pair at a
    time.

    symmetric: for tasks where the order of the two texts means nothing
    (paraphrase, duplicate questions, semantic similarity or relatedness with
    `mlm_regressor`): each pair is also run as (b, a) and the two results are
    averaged, which removes the order bias a model trained on one order has, at
    twice the cost. Leave it off for NLI, where premise and hypothesis differ."""
    cats = (dict(doc.cats) for doc in nlp.pipe(_pair_docs(nlp, pairs, symmetric), batch_size=batch_size))
    if not symmetric:
        return list(cats)
    return [_mean_cats(ab, next(cats)) for ab in cats]


def classify_pair(nlp: Language, premise: str, hypothesis: str) -> Dict[str, float]:
    """Label probabilities for one sentence pair, e.g.
    `classify_pair(nlp, "A man sleeps.", "A person rests.")["entailment"]`."""
    return classify_pairs(nlp, [(premise, hypothesis)])[0]
