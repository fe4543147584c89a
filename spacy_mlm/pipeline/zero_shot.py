"""Zero-shot text classification from an NLI pair classifier ("mlm_zero_shot").

The component borrows the pipeline's NLI classifier (an `mlm_textcat` trained
on sentence pairs, or one imported with `import-hf`) and the encoder it listens
to: for each text it scores the (text, hypothesis) pair of every label, all
pairs of a batch going through the encoder's own batching at once, and sets
`doc.cats` from the entailment logits (`classification/zero_shot.py`). The
labels come from the config or, per call, `classify(texts, labels)`.

Run by `nlp(text)`, the NLI classifier and its encoder would first read the text
alone, which the classifier was not trained for: `add_zero_shot` adds the
component and disables them (they stay in the pipeline, saved with it). The
pair Docs this component makes go through them as `nlp.pipe` would take a Doc
through the pipeline: the encoder's `pipe` annotates them, and the classifier
reads that encoding through its listener, as every component reads the encoder;
only the classifier's `logits` (before its softmax) are asked for instead of
its probabilities.
"""
from typing import Dict, Iterable, Iterator, List, Optional, Sequence

import torch
from spacy.language import Language
from spacy.pipeline import Pipe
from spacy.tokens import Doc
from spacy.util import minibatch

from ..classification.zero_shot import (
    DEFAULT_TEMPLATE, check_labels, check_template, hypotheses, nli_classes, zero_shot_scores,
)
from ..errors import SpacyMlmError
from ..models.encoding import ENCODING_ATTR
from ..tokenization.pair import make_pair_doc
from ..util.settings import FLAG, INT, TEXT, TEXTS, check_settings, optional


@Language.factory(
    "mlm_zero_shot",
    assigns=["doc.cats"],
    default_config={"nli": "mlm_textcat", "labels": [], "hypothesis_template": DEFAULT_TEMPLATE,
                    "multi_label": False, "entailment_label": None, "batch_size": 64},
)
def make_mlm_zero_shot(nlp: Language, name: str, nli: str, labels: List[str], hypothesis_template: str,
                       multi_label: bool, entailment_label: Optional[str], batch_size: int) -> "MLMZeroShotClassifier":
    """Classify texts into `labels` with the pipeline's NLI pair classifier `nli`.

    labels: each named once (a repeated label is refused).
    hypothesis_template: the hypothesis of a label, its one "{}" (or "{0}")
        replaced by it; "{{" and "}}" are braces of the text.
    multi_label: false = one softmax over the labels' entailment logits; true =
        each label alone, entailment against contradiction.
    entailment_label: the NLI class meaning "entails"; null = the class whose
        name starts with "entail".
    batch_size: (text, hypothesis) pairs per pass through the encoder."""
    return MLMZeroShotClassifier(nlp, name, nli=nli, labels=labels, hypothesis_template=hypothesis_template,
                              multi_label=multi_label, entailment_label=entailment_label, batch_size=batch_size)


class MLMZeroShotClassifier(Pipe):
    def __init__(self, nlp: Language, name: str = "mlm_zero_shot", *, nli: str = "mlm_textcat",
                 labels: Sequence[str] = (), hypothesis_template: str = DEFAULT_TEMPLATE, multi_label: bool = False,
                 entailment_label: Optional[str] = None, batch_size: int = 64):
        check_settings("mlm_zero_shot", nli=(nli, TEXT), labels=(labels, TEXTS),
                       hypothesis_template=(hypothesis_template, TEXT), multi_label=(multi_label, FLAG),
                       entailment_label=(entailment_label, optional(TEXT)), batch_size=(batch_size, INT, ">= 1"))
        check_template(hypothesis_template)  # a bad template or repeated labels fail here, not at the first text
        check_labels(labels)
        self.nlp, self.name, self.nli = nlp, name, nli
        self.cfg = {"labels": list(labels), "hypothesis_template": hypothesis_template, "multi_label": multi_label,
                    "entailment_label": entailment_label, "batch_size": batch_size}

    @property
    def labels(self) -> List[str]:
        """The configured labels (`classify` takes others per call)."""
        return list(self.cfg["labels"])

    def _classifier_and_encoder(self):
        from ..interop.hf_heads import listened_encoder

        if self.nli not in self.nlp.component_names:
            raise SpacyMlmError(
                f"'{self.name}' reads the NLI classifier '{self.nli}', which the pipeline does not have (its "
                f"components: {self.nlp.component_names}): set nli to the pair classifier's name"
            )
        classifier = self.nlp.get_pipe(self.nli)
        if not classifier.cfg.get("pair_input"):
            raise SpacyMlmError(f"'{self.nli}' was not trained on sentence pairs: it is no NLI classifier")
        if self.nli in self.nlp.pipe_names:
            raise SpacyMlmError(
                f"'{self.nli}' is enabled, so nlp(text) would first run it on the text alone: disable it "
                f"(nlp.disable_pipe({self.nli!r}); spacy_mlm.add_zero_shot does)"
            )
        return classifier, listened_encoder(self.nlp, self.nli)

    def classify(self, texts: Iterable[str], labels: Optional[Sequence[str]] = None,
                 multi_label: Optional[bool] = None, hypothesis_template: Optional[str] = None) -> List[Dict[str, float]]:
        """{label: score} for each text; labels, multi_label and the template
        default to the component's settings."""
        texts = list(texts)
        labels = list(self.labels if labels is None else labels)
        if not labels:
            raise SpacyMlmError(f"'{self.name}' has no labels: set labels in its config or pass them to classify()")
        hyps = hypotheses(labels, hypothesis_template or self.cfg["hypothesis_template"])
        classifier, encoder = self._classifier_and_encoder()
        entail, contradiction = nli_classes(classifier.labels, self.cfg["entailment_label"])
        if not texts:
            return []
        pairs = (make_pair_doc(self.nlp, text, hyp) for text in texts for hyp in hyps)
        logits = []
        for docs in minibatch(pairs, self.cfg["batch_size"]):
            docs = list(encoder.pipe(docs, batch_size=len(docs)))
            logits.append(classifier.logits(docs).float())
            for doc in docs:  # the piece vectors are not kept on throwaway docs
                doc._.set(ENCODING_ATTR, None)
        logits = torch.cat(logits).reshape(len(texts), len(labels), -1)
        multi = self.cfg["multi_label"] if multi_label is None else multi_label
        scores = zero_shot_scores(logits, entail, contradiction, multi).cpu().tolist()
        return [dict(zip(labels, row)) for row in scores]

    def __call__(self, doc: Doc) -> Doc:
        (doc.cats,) = self.classify([doc.text])
        return doc

    def pipe(self, stream: Iterable[Doc], *, batch_size: int = 128) -> Iterator[Doc]:
        for docs in minibatch(stream, batch_size):
            for doc, cats in zip(docs, self.classify([doc.text for doc in docs])):
                doc.cats = cats
                yield doc


def add_zero_shot(nlp: Language, labels: Sequence[str] = (), *, nli: str = "mlm_textcat",
                  name: str = "mlm_zero_shot", **settings) -> MLMZeroShotClassifier:
    """Add an `mlm_zero_shot` component reading the NLI pair classifier `nli`, and
    disable that classifier and, where nothing else listens to it, its encoder,
    so that `nlp(text)` runs the zero-shot classifier alone. `settings`: the
    factory's other settings (hypothesis_template, multi_label, ...)."""
    from ..interop.hf_heads import listened_encoder

    component = nlp.add_pipe("mlm_zero_shot", name=name, config={"nli": nli, "labels": list(labels), **settings})
    encoder = listened_encoder(nlp, nli)
    nlp.disable_pipe(nli)
    if all(listener not in nlp.pipe_names for listener in encoder.listening_components):
        nlp.disable_pipe(encoder.name)
    return component
