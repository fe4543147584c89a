import math

import pytest
import torch

from spacy_mlm.errors import SpacyMlmError
from spacy_mlm.similarity.losses import pair_cosines, sense_pair_loss


def toy_pairs():
    """Four pairs: two alike (same sense), two far apart (different senses)."""
    first = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    second = torch.tensor([[0.9, 0.1], [0.1, 0.9], [0.0, 1.0], [1.0, 0.2]])
    return first, second


def test_cosines_of_rows_and_zero_rows():
    cos = pair_cosines(torch.tensor([[1.0, 0.0], [0.0, 0.0]]), torch.tensor([[2.0, 0.0], [1.0, 1.0]]))
    assert torch.allclose(cos, torch.tensor([1.0, 0.0]))


def test_loss_prefers_same_sense_pairs_to_be_close():
    first, second = toy_pairs()
    log_scale, bias = torch.tensor(math.log(10.0)), torch.tensor(-5.0)
    right = sense_pair_loss(first, second, torch.tensor([1.0, 1.0, 0.0, 0.0]), log_scale, bias)
    wrong = sense_pair_loss(first, second, torch.tensor([0.0, 0.0, 1.0, 1.0]), log_scale, bias)
    assert right < 0.1 < wrong


def test_gradient_pulls_same_sense_together_and_pushes_others_apart():
    first, second = toy_pairs()
    second = second.clone().requires_grad_(True)
    log_scale = torch.tensor(math.log(10.0), requires_grad=True)
    bias = torch.tensor(-5.0, requires_grad=True)
    same = torch.tensor([1.0, 1.0, 0.0, 0.0])
    before = pair_cosines(first, second).detach()
    for _ in range(50):
        loss = sense_pair_loss(first, second, same, log_scale, bias)
        grads = torch.autograd.grad(loss, [second, log_scale, bias])
        with torch.no_grad():
            for tensor, grad in zip([second, log_scale, bias], grads):
                tensor -= 0.5 * grad
    after = pair_cosines(first, second).detach()
    assert (after[:2] >= before[:2]).all() and (after[2:] < before[2:]).all()
    # the learned threshold -bias/scale separates the classes
    threshold = float(-bias.detach() / log_scale.detach().exp())
    assert after[:2].min() > threshold > after[2:].max()


def test_one_label_per_pair():
    first, second = toy_pairs()
    with pytest.raises(SpacyMlmError, match="one label per pair"):
        sense_pair_loss(first, second, torch.tensor([1.0]), torch.tensor(0.0), torch.tensor(0.0))
