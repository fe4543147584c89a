"""AdamW over the rows of a word-embedding matrix that training has touched,
with the update of dense AdamW.

A fine-tuning step looks up a few hundred of an encoder's word-embedding rows
(MiniLM: 30,522 x 384, half of its 22.7M weights), yet a dense gradient fills
and sums the whole matrix and a dense AdamW step reads and writes all of it,
a large share of a CPU step (docs/benchmarks.md). Here:

* `use_sparse_word_gradients` sets `nn.Embedding.sparse` on a fine-tuned
  encoder's input embeddings, so backward yields the looked-up rows' gradients
  (a sparse COO tensor) and nothing else. Only where that weight has no other
  use: not when it is tied to an output layer (pretraining's MLM head, which
  steps with its own dense AdamW), nor where the family may compile its
  embeddings (ModernBERT's `reference_compile`);
* `RowAdamW` steps such a matrix. A row with no gradient so far has Adam
  moments m = v = 0, so dense AdamW does nothing to it but multiply it by
  (1 - lr_t * weight_decay) each step. Those factors are kept as one running
  product (`pending`) and applied to a row when it becomes *active*: when a
  training forward looks it up (a forward pre-hook on the embedding), or when
  a gradient first reaches it; the padding row (`padding_idx`), looked up but
  never given a gradient, is active from the start. Active rows are stepped at
  every step from then on by torch's AdamW kernel (fused where the main step
  is) over their gathered rows, gradients and moments, with the matrix's step
  count for bias correction, so their m and v evolve as in dense AdamW (an
  active row with a zero gradient gets the decay alone, as in dense AdamW).
  Anything that reads the whole matrix first gets the pending decay applied
  to every inactive row (`flush`): a forward that is not a training one
  (prediction, evaluation, export's trace) and `state_dict`/`load_state_dict`
  (to_bytes, save_pretrained, ONNX export). Direct writes to `.weight` bypass
  this; nothing in the package makes them outside pretraining, which stays
  dense.

The result equals dense AdamW up to float rounding: the decay of a row that
waited k steps is one product of the k float32 factors instead of k rounded
products (relative difference around k * 6e-8). Data-parallel processes stay
equal bit for bit: before the first process evaluates, every process compares
its weights through `state_dict` (training/distributed.py), which flushes the
pending decay in all of them at the same step.
"""
from typing import Optional, Tuple

import torch
from torch import nn
from torch.optim.adam import adam


def use_sparse_word_gradients(model: nn.Module) -> bool:
    """Let `model`'s input word embeddings produce row (sparse) gradients
    where that is safe (see the module docstring); says whether it did."""
    get = getattr(model, "get_input_embeddings", None)
    embedding = get() if get is not None else None
    if not isinstance(embedding, nn.Embedding) or embedding.max_norm is not None:
        return False
    if getattr(getattr(model, "config", None), "reference_compile", False) is not False:
        return False
    uses = [name for name, param in model.named_parameters(remove_duplicate=False) if param is embedding.weight]
    if len(uses) != 1:
        return False
    embedding.sparse = True
    return True


def row_gradient(grad: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """The row ids with a gradient (each once) and those rows' gradients,
    from a sparse row gradient (duplicates summed) or from a dense one (its
    rows that are not all zero: a zero row is stepped as an untouched one)."""
    if grad.is_sparse:
        grad = grad.coalesce()
        return grad.indices()[0], grad.values()
    rows = torch.nonzero(grad.any(dim=1)).reshape(-1)
    return rows, grad[rows]


class RowAdamW:
    """The AdamW state of one embedding matrix, stepped by rows (see the
    module docstring). Made by `TorchStepper` when the matrix first has a
    sparse gradient; `close()` applies what is pending and removes the hooks."""

    def __init__(self, embedding: nn.Embedding, fused: bool):
        self.weight = embedding.weight
        rows, width = self.weight.shape
        device = self.weight.device
        self.fused = fused
        self.pending = 1.0  # the product of the decays the inactive rows have not had yet
        self.active = torch.zeros(rows, dtype=torch.bool, device=device)
        self.slot = torch.full((rows,), -1, dtype=torch.long, device=device)  # row -> index in the state below
        self.rows = torch.zeros(0, dtype=torch.long, device=device)  # the active rows, in order of activation
        self.exp_avg = self.weight.new_zeros((0, width))  # capacity grows by doubling; [: n] is in use
        self.exp_avg_sq = self.weight.new_zeros((0, width))
        self.step_count = torch.zeros((), dtype=torch.float32, device=device if fused else "cpu")
        self._hooks = [
            embedding.register_forward_pre_hook(self._before_lookup),
            embedding.register_state_dict_pre_hook(self._before_read),
            embedding.register_load_state_dict_pre_hook(self._before_read),
        ]
        if embedding.padding_idx is not None:
            # looked up but never given a gradient: it would become active at the first lookup, which
            # comes at another step in each data-parallel process, and their weights would differ
            self.activate(torch.tensor([embedding.padding_idx]))

    def _before_read(self, *_) -> None:
        self.flush()

    def _before_lookup(self, module: nn.Embedding, args) -> None:
        if torch.is_grad_enabled() and module.training:
            self.activate(torch.unique(args[0]).reshape(-1))
        else:
            self.flush()

    @torch.no_grad()
    def activate(self, rows: torch.Tensor) -> None:
        """Bring `rows` up to date and step them at every step from now on."""
        rows = rows.to(self.active.device)
        new = rows[~self.active[rows]]
        if not len(new):
            return
        if self.pending != 1.0:
            self.weight[new] *= torch.tensor(self.pending, dtype=self.weight.dtype, device=self.weight.device)
        n, needed = len(self.rows), len(self.rows) + len(new)
        if needed > len(self.exp_avg):
            capacity = max(needed, 2 * len(self.exp_avg))
            self.exp_avg = _grown(self.exp_avg, n, capacity)
            self.exp_avg_sq = _grown(self.exp_avg_sq, n, capacity)
        self.active[new] = True
        self.slot[new] = torch.arange(n, needed, device=self.slot.device)
        self.rows = torch.cat([self.rows, new])

    @torch.no_grad()
    def flush(self) -> None:
        """Apply the pending decay to every inactive row."""
        if self.pending == 1.0:
            return
        factors = torch.full(self.active.shape, self.pending, dtype=self.weight.dtype, device=self.weight.device)
        factors[self.active] = 1.0
        self.weight.mul_(factors[:, None])
        self.pending = 1.0

    @torch.no_grad()
    def step(self, rows: torch.Tensor, values: torch.Tensor, *, lr: float, betas: Tuple[float, float], eps: float,
             weight_decay: float, grad_scale: Optional[torch.Tensor]) -> None:
        """One decoupled-weight-decay AdamW step of the matrix whose rows
        `rows` (each once) have the gradients `values` (the others none)."""
        self.activate(rows)
        n = len(self.rows)
        grads = values.new_zeros((n, values.shape[1]))
        grads[self.slot[rows.to(self.slot.device)]] = values
        params = self.weight[self.rows]
        adam(
            [params], [grads], [self.exp_avg[:n]], [self.exp_avg_sq[:n]], [], [self.step_count],
            fused=self.fused, foreach=False, grad_scale=grad_scale, decoupled_weight_decay=True, amsgrad=False,
            beta1=betas[0], beta2=betas[1], lr=lr, weight_decay=weight_decay, eps=eps, maximize=False,
        )
        self.weight[self.rows] = params
        # the inactive rows' share of this step, as the kernel rounds it (1 - lr * wd in the weights' dtype)
        self.pending *= float(torch.tensor(1.0 - lr * weight_decay, dtype=self.weight.dtype))

    def close(self) -> None:
        self.flush()
        for hook in self._hooks:
            hook.remove()
        self._hooks = []


def _grown(state: torch.Tensor, used: int, capacity: int) -> torch.Tensor:
    grown = state.new_zeros((capacity, state.shape[1]))
    grown[:used] = state[:used]
    return grown
