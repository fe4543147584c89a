"""The maths of zero-shot classification from NLI logits, alone."""
import re

import pytest
import torch

from spacy_mlm.classification.zero_shot import hypotheses, nli_classes, zero_shot_scores
from spacy_mlm.errors import SpacyMlmError


@pytest.mark.parametrize("labels, expected", [
    (["contradiction", "neutral", "entailment"], (2, 0)),
    (["ENTAILMENT", "NEUTRAL", "CONTRADICTION"], (0, 2)),
    (["entailment", "not_entailment"], (0, 1)),
    (["not_entailment", "entailment"], (1, 0)),
])
def test_nli_classes_are_found_by_name(labels, expected):
    assert nli_classes(labels) == expected


def test_an_nli_model_without_the_classes_is_a_clear_error():
    with pytest.raises(SpacyMlmError, match="none starting with 'entail': set entailment_label"):
        nli_classes(["LABEL_0", "LABEL_1", "LABEL_2"])
    assert nli_classes(["LABEL_0", "LABEL_1", "contradiction"], entailment_label="LABEL_1") == (1, 2)
    with pytest.raises(SpacyMlmError, match="none starting with 'contradict'"):
        nli_classes(["entailment", "neutral", "other"])


def test_single_label_scores_are_a_softmax_over_the_labels_entailment_logits():
    logits = torch.tensor([[[0.0, 5.0, 1.0], [0.0, -2.0, 3.0]]])  # 1 text, 2 labels, (contr., neutral, entail.)
    scores = zero_shot_scores(logits, entail=2, contradiction=0, multi_label=False)
    assert torch.allclose(scores, torch.softmax(torch.tensor([[1.0, 3.0]]), -1))
    assert torch.allclose(scores.sum(-1), torch.ones(1))


def test_multi_label_scores_weigh_each_label_entailment_against_contradiction():
    logits = torch.tensor([[[0.0, 5.0, 1.0], [2.0, -2.0, 2.0]]])
    scores = zero_shot_scores(logits, entail=2, contradiction=0, multi_label=True)
    assert torch.allclose(scores, torch.tensor([[torch.sigmoid(torch.tensor(1.0)), 0.5]]))
    # one label is scored as multi-label: a softmax over one label would always be 1
    assert torch.allclose(zero_shot_scores(logits[:, :1], 2, 0, multi_label=False), scores[:, :1])


def test_hypotheses_fill_the_template_once():
    assert hypotheses(["sports", "[SEP] x"], "This text is about {}.") == [
        "This text is about sports.", "This text is about [SEP] x."]
    with pytest.raises(SpacyMlmError, match="one '{}'"):
        hypotheses(["a"], "no slot")


@pytest.mark.parametrize("template, expected", [
    ("{} ({{}})", "sports ({})"),  # escaped braces are text
    ("{0} it is.", "sports it is."),
    ("{{{}}}", "{sports}"),
])
def test_templates_are_read_as_format_strings(template, expected):
    assert hypotheses(["sports"], template) == [expected]


@pytest.mark.parametrize("template, message", [
    ("This example is {{}}.", "with 0 replacement fields"),  # no field: every label the same hypothesis
    ("{} or {}", "with 2 replacement fields"),
    ("{label}", "must be a plain '{}'"),
    ("{0.upper}", "must be a plain '{}'"),
    ("{[0]}", "must be a plain '{}'"),
    ("{!r}", "must be a plain '{}'"),
    ("{:>9}", "must be a plain '{}'"),
    ("It is {.", "no format string: expected '}'"),
    ("It is }.", "no format string: Single '}'"),
])
def test_a_template_without_exactly_one_plain_field_is_refused(template, message):
    with pytest.raises(SpacyMlmError, match=re.escape(message)):
        hypotheses(["sports"], template)


def test_labels_named_twice_are_refused_naming_them():
    with pytest.raises(SpacyMlmError, match="name 'music', 'sports' more than once"):
        hypotheses(["sports", "music", "sports", "art", "music"], "{}")
