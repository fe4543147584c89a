"""The padding row under `RowAdamW` (models/row_adamw.py) in data-parallel
training: it is looked up where a share has padding but never gets a
gradient, so it is active from the start in every process, and two processes
whose shares meet padding at different steps keep the same pad row bit for
bit (before, one stepped it with the AdamW kernel while the other applied the
pending decay: the bits differed and `check_same_weights` refused the run)."""
import torch

from spacy_mlm.models.row_adamw import RowAdamW

LR = [0.05, 0.03, 0.02, 0.04, 0.01, 0.02, 0.03, 0.05]
L2 = 0.01
PAD = 0
# each process's share of 8 steps: process 0 meets padding at step 1, process 1 at step 5
SHARES = [
    [[1, 2, 3], [4, 5, PAD], [1, 2, 6], [7, 3, 2], [8, 1, 4], [2, 3, PAD], [9, 5, 1], [4, PAD, PAD]],
    [[3, 4, 5], [6, 7, 8], [9, 4, 1], [5, 5, 2], [3, 2, 1], [6, 7, PAD], [8, 3, 2], [1, PAD, PAD]],
]


def _process():
    """One process's copy of a word-embedding matrix whose padding row is not
    zero (as in BERT checkpoints converted from TensorFlow)."""
    torch.manual_seed(0)
    embedding = torch.nn.Embedding(12, 16, padding_idx=PAD, sparse=True)
    with torch.no_grad():
        embedding.weight[PAD] = torch.randn(16)
    return embedding


def test_processes_meeting_padding_at_different_steps_keep_the_same_pad_row():
    processes = [_process() for _ in SHARES]
    readout = torch.linspace(-1.0, 1.0, 16)
    rows = None
    for step, lr in enumerate(LR):
        grads = []
        for embedding, share in zip(processes, SHARES):
            embedding.zero_grad(set_to_none=True)
            (embedding(torch.tensor(share[step])) * readout).sum().backward()
            grads.append(embedding.weight.grad)
        summed = (grads[0] + grads[1]).coalesce()  # the reducer's sum: every process steps the same gradient
        if rows is None:  # made at the first row gradient, as TorchStepper does
            rows = [RowAdamW(embedding, fused=True) for embedding in processes]
        for row_adamw in rows:
            row_adamw.step(summed.indices()[0], summed.values(), lr=lr, betas=(0.9, 0.999), eps=1e-8,
                           weight_decay=L2, grad_scale=None)
    weights = [embedding.state_dict()["weight"] for embedding in processes]  # as check_same_weights reads them
    start = _process().weight[PAD]
    assert not torch.equal(weights[0][PAD], start)  # decayed
    assert torch.equal(weights[0][PAD], weights[1][PAD]), (weights[0][PAD] - weights[1][PAD]).abs().max()
    # the other rows, stepped alike from the same gradients (in another order in each process's state)
    torch.testing.assert_close(weights[0], weights[1], rtol=1e-6, atol=0)


def test_the_padding_row_is_active_from_the_start():
    embedding = _process()
    row_adamw = RowAdamW(embedding, fused=False)
    assert row_adamw.active.nonzero().flatten().tolist() == [PAD]
