"""Zero-shot classification from an NLI model, as pure functions: each candidate
label becomes a hypothesis ("This example is {label}.") that the text, as the
premise, entails or not (Yin et al. 2019, transformers' zero-shot pipeline).

* Single label: a softmax over the labels of the entailment logits of the
  (text, hypothesis) pairs, so the scores of a text sum to one.
* Multi-label (or one label): each label on its own, a softmax over its pair's
  contradiction and entailment logits (neutral left out).

The NLI classes are found by name: "entail..." and "contradict..."; a two-class
model without a contradiction class (entailment / not_entailment) uses its other
class. For the usual class orders this is the class transformers takes by
position (contradiction first, or last when entailment is first).
"""
import string
from collections import Counter
from typing import Optional, Sequence, Tuple

import torch

from ..errors import SpacyMlmError

DEFAULT_TEMPLATE = "This example is {}."


def _find(labels: Sequence[str], prefix: str) -> Optional[int]:
    found = [i for i, label in enumerate(labels) if label.lower().startswith(prefix)]
    return found[0] if found else None


def nli_classes(labels: Sequence[str], entailment_label: Optional[str] = None) -> Tuple[int, int]:
    """(entailment, contradiction) indices among an NLI classifier's `labels`."""
    labels = list(labels)
    if entailment_label is not None:
        if entailment_label not in labels:
            raise SpacyMlmError(f"entailment_label {entailment_label!r} is not one of the NLI labels {labels}")
        entail = labels.index(entailment_label)
    else:
        entail = _find(labels, "entail")
    if entail is None:
        raise SpacyMlmError(
            f"the NLI classifier's labels {labels} have none starting with 'entail': set entailment_label to the "
            "class that means the text entails the hypothesis"
        )
    contradiction = _find(labels, "contradict")
    if contradiction is None and len(labels) == 2:
        contradiction = 1 - entail
    if contradiction is None:
        raise SpacyMlmError(
            f"the NLI classifier's labels {labels} have none starting with 'contradict' (needed for multi-label "
            "scores: entailment against contradiction)"
        )
    return entail, contradiction


def check_template(template: str) -> None:
    """Refuse a hypothesis template that would not put the label in exactly
    once, as `str.format` reads it (`string.Formatter().parse`): one
    replacement field, positional ("{}" or "{0}"), with no attribute or index
    access, conversion or format spec. Escaped braces are text: "{} ({{}})" is
    valid (its hypothesis reads "sports ({})"), "This example is {{}}." is not
    (it has no field, so every label would get the same hypothesis)."""
    try:
        fields = [(name, spec, conversion) for _, name, spec, conversion in string.Formatter().parse(template)
                  if name is not None]
    except ValueError as err:  # a single '{' or '}'
        raise SpacyMlmError(f"hypothesis_template {template!r} is no format string: {err} (write '{{{{' or "
                            "'}}' for a brace of the text)") from None
    if len(fields) != 1:
        raise SpacyMlmError(
            f"hypothesis_template must hold one '{{}}' for the label, got {template!r} with {len(fields)} "
            "replacement fields (escaped braces '{{' and '}}' are text, not a field)"
        )
    ((name, spec, conversion),) = fields
    if name not in ("", "0") or spec or conversion:
        raise SpacyMlmError(
            f"hypothesis_template's field must be a plain '{{}}' (or '{{0}}'), got {template!r}: no name, "
            "attribute or index, conversion (!r) or format spec (:...)"
        )


def check_labels(labels: Sequence[str]) -> None:
    """Refuse labels named twice: the scores are a dict by label, so a repeated
    label would lose one of its scores (and, single-label, the softmax would
    still share the probability out over both). Refused rather than merged,
    as a repeat is most likely a mistake in the list the caller means to see."""
    repeated = sorted(label for label, count in Counter(labels).items() if count > 1)
    if repeated:
        raise SpacyMlmError(f"the zero-shot labels name {', '.join(map(repr, repeated))} more than once: "
                            "each label is scored once")


def hypotheses(labels: Sequence[str], template: str) -> list:
    """The hypothesis of each label (`check_template`, `check_labels`)."""
    check_template(template)
    check_labels(labels)
    return [template.format(label) for label in labels]


def zero_shot_scores(logits: torch.Tensor, entail: int, contradiction: int, multi_label: bool) -> torch.Tensor:
    """(n_texts, n_labels) scores from (n_texts, n_labels, n_classes) NLI logits."""
    if multi_label or logits.shape[1] == 1:
        return torch.softmax(logits[..., [contradiction, entail]], dim=-1)[..., 1]
    return torch.softmax(logits[..., entail], dim=-1)
