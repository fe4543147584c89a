"""`TorchStepper` (models/torch_stepper.py) starts afresh for each new thinc
optimizer: one made after the previous one was freed (CPython may give it
the freed object's id) does not inherit the previous moments or step count."""
import copy
import gc

import torch
from thinc.api import Adam

from spacy_mlm.models.torch_stepper import TorchStepper


def _step(module, stepper, optimizer):
    module.weight.grad = torch.ones_like(module.weight)
    stepper.step(module, optimizer)
    return next(iter(stepper._torch.state.values()))


def test_an_optimizer_made_after_the_previous_one_is_freed_starts_afresh():
    module = torch.nn.Linear(3, 1, bias=False)
    stepper = TorchStepper()
    for _ in range(5):  # several tries: each new optimizer may or may not take the freed one's address
        state = _step(module, stepper, Adam(learn_rate=0.1, grad_clip=0.0, use_averages=False))
        gc.collect()
        assert float(state["step"]) == 1.0, "a new optimizer inherited the previous one's step count"
        # Adam's first moment after one step from zero: (1 - b1) * gradient
        torch.testing.assert_close(state["exp_avg"], torch.full_like(module.weight, 0.1))


def test_the_same_optimizer_keeps_its_moments_and_a_copy_of_the_stepper_starts_afresh():
    module = torch.nn.Linear(3, 1, bias=False)
    stepper = TorchStepper()
    optimizer = Adam(learn_rate=0.1, grad_clip=0.0, use_averages=False)
    _step(module, stepper, optimizer)
    assert float(_step(module, stepper, optimizer)["step"]) == 2.0
    copied_module, copied = copy.deepcopy((module, stepper))  # as thinc's Shim.copy does
    assert float(_step(copied_module, copied, optimizer)["step"]) == 1.0  # as thinc's moments of a copied model
    assert float(_step(module, stepper, optimizer)["step"]) == 3.0
