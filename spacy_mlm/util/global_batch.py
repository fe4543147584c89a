"""A loss's denominator made the whole step's. In a data-parallel run
(`training/distributed.py`) each process trains on its share of one global
batch, and a mean over its share alone would weight the processes' gradients
wrongly; the loss modules (tagging, classification, similarity: pure torch)
pass their counts through `step_sum`, and the training layer switches the
summing on while such a run is active. It lives here, below every layer, so
that those modules need not import the training layer."""
import contextlib

import torch

_summing = False  # True while `summed_over_processes` is active


def step_sum(count: torch.Tensor) -> torch.Tensor:
    """`count` (the denominator of a loss that is a mean over the batch) summed
    over the processes of an active data-parallel run, so that the loss is a
    mean over the whole step's batch; `count` itself otherwise."""
    if not _summing:
        return count
    total = count.detach().clone()
    torch.distributed.all_reduce(total)
    return total


@contextlib.contextmanager
def summed_over_processes():
    """While active, `step_sum` sums over the processes of the default process group."""
    global _summing
    _summing = True
    try:
        yield
    finally:
        _summing = False


@contextlib.contextmanager
def counted_here():
    """While active, `step_sum` counts this process alone: for what one
    process computes by itself inside a data-parallel run (the first process
    fitting a temperature before it saves)."""
    global _summing
    before, _summing = _summing, False
    try:
        yield
    finally:
        _summing = before
