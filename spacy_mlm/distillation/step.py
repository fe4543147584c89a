"""One distillation step's gradients in the student, as `spacy train`'s update
computes them, with the soft loss in place of (or beside) the gold one.

The student's encoder runs once with gradients and hands its `EncoderBatch` to
every listener (the encoder component's own protocol); each distilled component
runs its model, and `loss_and_gradient` gives the gradient of its soft loss
(plus, on the batch's labelled Docs, `gold_weight` times the component's own
loss) for its scores, which its backprop pushes through the head into the
shared leaves; the hidden-state loss adds its gradient to the same leaves; then
the transformer's backward pass runs once. Gradients are left in `.grad` for the
optimizer.
"""
from typing import Dict, List, Sequence

import torch
from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example

from ..errors import SpacyMlmError
from ..models.listener import EncoderListener
from ..models.torch_head import loss_and_gradient, torch_module
from .heads import targets_of
from .soft_targets import hidden_mse
from .teachers import HIDDEN, Outputs


def _weighted_gold_loss(component, examples: List[Example], scores, weight: float):
    """The component's own loss on `examples` and its gradient for `scores`,
    both times `weight`; the parameters its loss reaches itself (the CRF's
    transitions) get `weight` times their share of the gradient too."""
    params = list(torch_module(component.model).parameters())
    before = [None if p.grad is None else p.grad.clone() for p in params]
    loss, d_scores = component.get_loss(examples, scores)
    for param, old in zip(params, before):
        if param.grad is not None:
            param.grad = weight * param.grad if old is None else old + weight * (param.grad - old)
    return weight * loss, weight * d_scores


def student_gradients(student: Language, encoder: str, components: Sequence[str], docs: List[Doc],
                      gold: List[Example], targets: List[Outputs], settings: Dict,
                      with_gold: bool = False) -> Dict[str, float]:
    """Fill the student's gradients for one batch: `docs` (the texts' Docs, then
    the gold Examples' predicted Docs, in that order) with the teachers'
    `targets` for each. Returns the losses by name. `with_gold`: the run has
    labelled Docs, so the gold loss is taken even where this batch (a
    process's share) holds none of them: every process of a data-parallel run
    then sums the same counts over the others, in the same order."""
    temperature = float(settings["temperature"])
    n_texts = len(docs) - len(gold)
    encoder_pipe = student.get_pipe(encoder)
    batch, backprop_encoder = encoder_pipe.model.begin_update(docs)
    batch_id = EncoderListener.get_batch_id(docs)
    for listener in encoder_pipe.listeners:
        listener.receive(batch_id, batch, lambda _: None)  # the transformer's backward runs once, below
    losses: Dict[str, float] = {}
    for name in components:
        component, kind = student.get_pipe(name), targets_of(student, name)
        scores, backprop = component.model.begin_update(docs)
        wanted = [row[name] for row in targets]

        def soft(raw: torch.Tensor) -> torch.Tensor:
            return settings["soft_weight"] * kind.soft_loss(component, kind.with_raw(scores, raw), docs, wanted,
                                                            temperature)

        losses[f"{name}_soft"], d_scores = loss_and_gradient(soft, kind.raw(scores))
        if gold or with_gold:
            loss, d_gold = _weighted_gold_loss(component, gold, kind.tail(scores, n_texts), settings["gold_weight"])
            losses[f"{name}_gold"] = loss
            d_scores = d_scores.clone()
            d_scores[kind.rows_before(scores, n_texts):] += d_gold
        backprop(d_scores)
    if settings["hidden_weight"]:
        student_states = torch.cat(batch.hidden)
        teacher_states = torch.cat([row[HIDDEN] for row in targets]).to(student_states.device)
        if student_states.shape != teacher_states.shape:
            raise SpacyMlmError(f"hidden_weight: the student's top hidden states are {tuple(student_states.shape)}, "
                                f"the teachers' {tuple(teacher_states.shape)}; the loss needs one width and one "
                                "tokenizer")
        mse = settings["hidden_weight"] * hidden_mse(student_states, teacher_states)
        mse.backward()
        losses["hidden"] = float(mse.detach())
    backprop_encoder(batch)
    return losses
