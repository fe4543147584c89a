"""What each distilled component contributes: its soft targets as the teacher
computes them from its scores, and the student's soft loss on its own scores.

`mlm_ner`: per-token tag distributions (softmax, or CRF marginals with the
component's constrained transition scores), read as the component reads its
scores (`tagging/sequences.py`: subword rows pooled as it decodes, each
sentence a sequence with context = "document"), one (n_tokens, K) tensor per
Doc. `mlm_textcat`: class probabilities, one (n_labels,) tensor per Doc.
The maths is `soft_targets.py`; this module only reads the components.
"""
from dataclasses import replace
from typing import List

import torch
from spacy.tokens import Doc

from ..errors import SpacyMlmError
from ..tagging.emissions import pad_rows
from ..tagging.sequences import join_sequences, sequence_emissions, split_sequences
from .soft_targets import class_distributions, class_kl, tag_distributions, tag_kl, tag_log_distributions


class TaggerTargets:
    """mlm_ner: scores are `TagScores`."""

    @staticmethod
    def describe(component) -> tuple:
        """What the student and every teacher must share: the tags, in order."""
        return tuple(component.tag_labels)

    @staticmethod
    def _emissions(component, scores, docs: List[Doc]):
        crf = bool(component.model.attrs["crf"])
        emissions, mask, lengths = sequence_emissions(scores, docs, component.cfg["subword_decode"], crf=crf,
                                                      by_sentence=component.cfg["context"] == "document")
        return emissions, mask, lengths, component._transitions() if crf else None

    def teacher(self, component, scores, docs: List[Doc], temperature: float) -> List[torch.Tensor]:
        emissions, mask, lengths, transitions = self._emissions(component, scores, docs)
        probs = tag_distributions(emissions, mask, transitions, temperature)
        return join_sequences([p[:n] for p, n in zip(probs, lengths)], docs, torch.cat)

    def soft_loss(self, component, scores, docs: List[Doc], targets: List[torch.Tensor],
                  temperature: float) -> torch.Tensor:
        wrong = next(((doc, len(t)) for doc, t in zip(docs, targets) if len(t) != len(doc)), None)
        if wrong is not None:
            raise SpacyMlmError(f"the teachers' tag distributions cover {wrong[1]} tokens, the student's Doc has "
                                f"{len(wrong[0])} ({wrong[0].text[:60]!r}): the teachers must read the student's tokens")
        emissions, mask, _, transitions = self._emissions(component, scores, docs)
        log_probs = tag_log_distributions(emissions, mask, transitions, temperature)
        by_sequence = split_sequences([t.to(emissions.device) for t in targets], docs,
                                      component.cfg["context"] == "document")
        padded, _ = pad_rows(by_sequence, emissions.shape[-1], emissions.device)
        return tag_kl(padded, log_probs, mask, temperature)

    @staticmethod
    def raw(scores) -> torch.Tensor:
        return scores.scores

    @staticmethod
    def with_raw(scores, raw: torch.Tensor):
        return replace(scores, scores=raw)

    @staticmethod
    def rows_before(scores, n_docs: int) -> int:
        return sum(scores.rows_per_doc[:n_docs])

    @staticmethod
    def tail(scores, n_docs: int):
        """The scores of the Docs after the first `n_docs`."""
        pieces = scores.pieces_per_token
        return replace(scores, scores=scores.scores[sum(scores.rows_per_doc[:n_docs]):],
                       rows_per_doc=scores.rows_per_doc[n_docs:], pieces_per_token=pieces and pieces[n_docs:])


class ClassifierTargets:
    """mlm_textcat: scores are (n_docs, n_labels) logits."""

    @staticmethod
    def describe(component) -> tuple:
        if component.cfg.get("pair_input"):
            raise SpacyMlmError(f"'{component.name}' classifies sentence pairs; distilling it on single texts "
                                "would teach it inputs it never reads (pair distillation is not supported yet)")
        return tuple(component.labels), component.exclusive_classes

    def teacher(self, component, scores, docs: List[Doc], temperature: float) -> List[torch.Tensor]:
        return list(class_distributions(scores.float(), temperature, component.exclusive_classes))

    def soft_loss(self, component, scores, docs: List[Doc], targets: List[torch.Tensor],
                  temperature: float) -> torch.Tensor:
        target = torch.stack(targets).to(scores.device) if targets else scores.new_zeros(scores.shape)
        return class_kl(target, scores, temperature, component.exclusive_classes)

    @staticmethod
    def raw(scores) -> torch.Tensor:
        return scores

    @staticmethod
    def with_raw(scores, raw: torch.Tensor):
        return raw

    @staticmethod
    def rows_before(scores, n_docs: int) -> int:
        return n_docs

    @staticmethod
    def tail(scores, n_docs: int):
        return scores[n_docs:]


# the factories distillation knows, and how each is distilled
DISTILLED = {"mlm_ner": TaggerTargets(), "mlm_textcat": ClassifierTargets()}


def distilled_components(nlp) -> List[str]:
    """The names of the pipeline's distilled components (every one but the
    encoder); another kind of component is refused."""
    names = []
    for name in nlp.pipe_names:
        factory = nlp.get_pipe_meta(name).factory
        if factory == "mlm_encoder":
            continue
        if factory not in DISTILLED:
            raise SpacyMlmError(f"the teacher's component '{name}' ({factory}) cannot be distilled: distillation "
                                f"trains {', '.join(DISTILLED)} components")
        names.append(name)
    if not names:
        raise SpacyMlmError("the teacher has no component to distil (an mlm_ner or mlm_textcat)")
    return names


def targets_of(nlp, name: str):
    return DISTILLED[nlp.get_pipe_meta(name).factory]
