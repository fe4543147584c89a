"""Summing a data-parallel step's gradients over the processes
(`training/distributed.py`, `engine/trainer.py`) with less communication than one all-reduce of
every gradient, the sum staying the one a dense all-reduce gives.

One blocking all-reduce of every gradient after `nlp.update` (MiniLM: 22.7M
floats, 91 MB, plus the copy that flattens them) can cost two CPU processes
about as much as the half of the step each saves (docs/scaling.md).
`GradientReducer` cuts it two ways, as torch's DistributedDataParallel does:

* **embedding rows**: an embedding matrix's gradient is zero outside the rows
  of the ids a batch looked up (MiniLM's word embeddings: 30522 x 384, half of
  all weights; a step of 16 sentences touches a few hundred rows). For every
  `nn.Embedding`'s weight (found by module type, any family) each process sends
  the ids of its non-zero rows (an all-gather of a few thousand integers), and
  only the union of those rows is summed. Rows outside it are zero everywhere,
  so the result equals the dense sum; it reads the gradient itself, so a weight
  that is also used elsewhere (tied to an output layer) is still summed right.
  A row gradient (`nn.Embedding.sparse`, the fine-tuned encoder's word
  embeddings: `models/row_adamw.py`) is summed the same way and stays one;
* **overlap**: the other weights are summed in buckets of about 25 MB, filled in
  reverse parameter order (the order backward finishes them, as torch's DDP
  Reducer does), each all-reduced asynchronously as soon as its parameters'
  gradients are final (`register_post_accumulate_grad_hook`), while backward
  goes on. Buckets start in index order in every process (collectives must be
  issued in the same order everywhere) on a process group of their own, so
  they never interleave with the loss denominators' all-reduces;
* **shared memory**: where every process trains on this machine's CPU, the
  other weights are summed through a mapped file instead, after backward, and
  each process sums and steps only its own range of them, then passes the
  stepped weights on (`engine/shared_memory.py`; `share_weights`): cheaper
  than gloo's TCP all-reduce even with its overlap, and the optimizer's work
  divided (docs/scaling.md). Collectives remain for
  several machines and for GPUs (NCCL).

A step may run backward more than once over the same weights (the heads'
backward, then the encoder's; two encoders; a listener that runs twice): a
parameter's gradient is final only after its last accumulation. A bucket is
started during backward only once each of its parameters has received as many
accumulations as in the previous step (none in the first step: it is summed
after `nlp.update`, as before). If a parameter then receives another after its
bucket started, that bucket's sum is stale: every process learns it in the
step's one small exchange of flags, and all of them then discard the buckets
and sum the complete gradients after `nlp.update`, as the first step does. So
the sum is always the one-process gradient; the overlap is an optimisation for
steps shaped like the previous one.

Why not torch's `DistributedDataParallel` itself: it wraps a module's
`forward` and expects one forward then one backward per iteration; our encoder
calls the transformer once per length chunk of the batch and runs one backward
over all chunks after the heads' own backward calls, the heads are separate
modules with separate backward calls, the wrapped module would replace the one
the shim saves, and DDP sums embedding gradients densely (sparse only for
`nn.Embedding(sparse=True)`, whose gradients it all-reduces whole, not over the
union of rows).
"""
from collections import defaultdict
from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist

from ..models.row_adamw import row_gradient
from ..models.torch_stepper import give_squared_norm
from .shared_memory import SharedMemory, owned_ranges

BUCKET_BYTES = 25 * 2**20  # torch DDP's default bucket_cap_mb


def trained_parameters(modules: Sequence[torch.nn.Module]) -> List[torch.nn.Parameter]:
    """The modules' trainable parameters, each once, in module then parameter order."""
    seen, params = set(), []
    for module in modules:
        for param in module.parameters():
            if param.requires_grad and id(param) not in seen:
                seen.add(id(param))
                params.append(param)
    return params


def embedding_weights(modules: Sequence[torch.nn.Module]) -> set:
    """The ids of the modules' embedding matrices (every `nn.Embedding`'s weight)."""
    return {id(m.weight) for module in modules for m in module.modules() if isinstance(m, torch.nn.Embedding)}


def reverse_buckets(params: Sequence[torch.nn.Parameter], bucket_bytes: int) -> List[List[torch.nn.Parameter]]:
    """`params` in reverse order, cut into buckets of at most `bucket_bytes`
    (one larger parameter alone) of one dtype and device each."""
    buckets: List[List[torch.nn.Parameter]] = []
    open_: Dict[Tuple[torch.dtype, torch.device], Tuple[List, int]] = {}
    for param in reversed(list(params)):
        key, size = (param.dtype, param.device), param.numel() * param.element_size()
        bucket, used = open_.get(key, (None, 0))
        if bucket is None or used + size > bucket_bytes:
            bucket, used = [], 0
            buckets.append(bucket)
        bucket.append(param)
        open_[key] = (bucket, used + size)
    return buckets


def flat_gradients(params: Sequence[torch.nn.Parameter], out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The parameters' gradients in one tensor, new or `out` (zeros where a parameter has none)."""
    grads = [p.grad.reshape(-1) if p.grad is not None else p.new_zeros(p.numel()) for p in params]
    return torch.cat(grads) if out is None else torch.cat(grads, out=out)


def set_from_flat(params: Sequence[torch.nn.Parameter], flat: torch.Tensor, present: Sequence[bool]) -> None:
    """Each parameter's gradient becomes its view of `flat` (None where `present` is False)."""
    offset = 0
    for param, has in zip(params, present):
        size = param.numel()
        param.grad = flat[offset : offset + size].view_as(param) if has else None
        offset += size


def local_rows(grad: Optional[torch.Tensor]) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """The rows of an embedding matrix's gradient this process has (each
    once, ascending) and their gradients: a sparse row gradient's rows
    (`row_adamw`), or a dense one's rows that are not all zero; none for no
    gradient."""
    if grad is None:
        return torch.zeros(0, dtype=torch.long), None
    return row_gradient(grad)  # coalesced sparse indices and nonzero() are ascending


class GradientReducer:
    """Sums the gradients of `modules`' trainable parameters over the
    processes of `group` at every step: `begin()` before `nlp.update`,
    `finish()` after it (before any optimizer step), `close()` at the end.

    A parameter without a gradient counts as zero where others have one; it
    keeps none only if no process has one (a step skips such parameters, as it
    would in one process).

    `shared_memory`: sum the weights other than embedding rows through shared
    memory where every process can (`SharedMemory.open`; a collective, as is
    making the reducer), else with buckets of collectives. Through shared
    memory each process gets the summed gradients of the weights it owns
    only (the others' are None: its optimizer steps those alone), and
    `share_weights()` must run after the optimizer step, before anything
    reads the weights (`begin` and `training/distributed.py` call it)."""

    def __init__(self, modules: Sequence[torch.nn.Module], bucket_bytes: int = BUCKET_BYTES,
                 shared_memory: bool = True):
        # each once: a module listed twice (shared by two components) would be given a squared norm of 0 for clipping
        modules = list({id(module): module for module in modules}.values())
        params = trained_parameters(modules)
        embeddings = embedding_weights(modules)
        self._rows = [p for p in params if id(p) in embeddings and p.dim() == 2]
        # those whose gradient comes as rows (`nn.Embedding.sparse`): a process without one gets the sum as rows too
        self._sparse = {id(m.weight) for module in modules for m in module.modules()
                        if isinstance(m, torch.nn.Embedding) and m.sparse}
        row_ids = {id(p) for p in self._rows}
        self._dense = [p for p in params if id(p) not in row_ids]
        self._buckets = reverse_buckets(self._dense, bucket_bytes)
        self._dense = [p for bucket in self._buckets for p in bucket]  # in bucket order
        self._bucket_of = {id(p): b for b, bucket in enumerate(self._buckets) for p in bucket}
        self._group = dist.new_group()  # the buckets' collectives never interleave with the losses'
        self._shared: Optional[SharedMemory] = None
        if shared_memory and self._dense and all(p.device.type == "cpu" for p in self._dense) \
                and len({p.dtype for p in self._dense}) == 1:
            self._shared = SharedMemory.open(sum(p.numel() for p in self._dense), self._dense[0].dtype, self._group)
        if self._shared is not None:
            self._own_part(modules)
        self._expected: Optional[Dict[int, int]] = None  # accumulations per parameter in the previous step
        self._counting = False
        overlapped = self._dense if self._shared is None else []
        self._hooks = [p.register_post_accumulate_grad_hook(self._accumulated) for p in overlapped]
        # what was summed over the steps so far (the tests read it; so can a profile)
        self.stats = {"dense_bytes": 0, "shared_bytes": 0, "row_bytes": 0, "rows": 0, "early_buckets": 0,
                      "restarted": 0}

    def _own_part(self, modules: Sequence[torch.nn.Module]) -> None:
        """This process's run of the dense weights (`owned_ranges`), their
        offsets in the flat order, and each weight's module (for the norms);
        then every dense weight is moved into the shared copy (each owner's
        values: the same in every process from here on)."""
        ranges = owned_ranges([p.numel() for p in self._dense], dist.get_world_size(self._group))
        first, last = ranges[dist.get_rank(self._group)]
        offsets = [0]
        for param in self._dense:
            offsets.append(offsets[-1] + param.numel())
        self._owned_first, self._owned_last = first, last
        self._owner = {id(p): rank for rank, (lo, hi) in enumerate(ranges) for p in self._dense[lo:hi]}
        self._owned = self._dense[first:last]
        self._owned_span = (offsets[first], offsets[last])
        self._owned_grads = torch.empty(offsets[last] - offsets[first], dtype=self._dense[0].dtype)
        self._others = [p for i, p in enumerate(self._dense) if not first <= i < last]
        self._modules = list(modules)
        module_of = {}
        for index, module in reversed(list(enumerate(self._modules))):  # a weight in two modules: the first
            module_of.update({id(p): index for p in module.parameters()})
        self._module_of_owned = [module_of[id(p)] for p in self._owned]
        self._module_of_rows = [module_of[id(p)] for p in self._rows]
        self._stepped = False  # the owned weights have been stepped and not yet shared
        # The weights move into the shared copy: each owner writes its run, then every process's
        # parameters become views of it, so the owner's optimizer steps them for everyone in place.
        with torch.no_grad():
            if self._owned:
                torch.cat([p.reshape(-1) for p in self._owned], out=self._shared.weights[offsets[first] : offsets[last]])
            self._shared.wait_for_everyone()
            for param, offset in zip(self._dense, offsets):
                param.data = self._shared.weights[offset : offset + param.numel()].view_as(param)

    def owner(self, param: torch.nn.Parameter) -> Optional[int]:
        """The process that alone steps `param` (its weights in shared memory),
        or None where every process steps it (without shared memory, and the
        embedding matrices summed by rows)."""
        return None if self._shared is None else self._owner.get(id(param))

    @property
    def shared_memory(self) -> bool:
        """Whether the weights other than embedding rows are summed (and stepped) through shared memory."""
        return self._shared is not None

    def begin(self) -> None:
        """Start a step: buckets may be summed as soon as their gradients are
        final (the weights stepped in the previous step are shared first)."""
        self.share_weights()
        self._fired: Dict[int, int] = defaultdict(int)
        self._works: List[Tuple[torch.Tensor, object, Tuple[int, ...]]] = []
        self._pending = [0] * len(self._buckets)
        if self._expected is not None:
            for p in self._dense:
                if self._expected.get(id(p), 0) > 0:
                    self._pending[self._bucket_of[id(p)]] += 1
        self._counting = True
        self._overlapping = self._expected is not None  # the first step learns how often each is accumulated

    def _accumulated(self, param: torch.nn.Parameter) -> None:
        if not self._counting:
            return
        key = id(param)
        self._fired[key] += 1
        if not self._overlapping:
            return
        if self._fired[key] == self._expected.get(key, 0):
            self._pending[self._bucket_of[key]] -= 1
        while len(self._works) < len(self._buckets) and self._pending[len(self._works)] == 0:
            self._start(len(self._works))
            self.stats["early_buckets"] += 1

    def _start(self, index: int) -> None:
        bucket = self._buckets[index]
        flat = flat_gradients(bucket)
        work = dist.all_reduce(flat, group=self._group, async_op=True)
        self._works.append((flat, work, tuple(self._fired[id(p)] for p in bucket)))

    def finish(self) -> None:
        """Sum what is left, wait for every bucket, and leave the summed
        gradients on the parameters (through shared memory: on the weights
        this process owns, and the embedding matrices)."""
        self._counting = False
        if self._shared is not None:
            flat_gradients(self._dense, out=self._shared.slot)  # written before the gather below
            stale = False
        else:
            while len(self._works) < len(self._buckets):
                self._start(len(self._works))
            stale = any(tuple(self._fired[id(p)] for p in bucket) != fired
                        for bucket, (_, _, fired) in zip(self._buckets, self._works))
        rows = [local_rows(p.grad) for p in self._rows]
        params = self._dense + self._rows
        device = params[0].device if params else torch.device("cpu")
        local = torch.tensor([int(stale)] + [int(p.grad is not None) for p in params] + [len(r) for r, _ in rows],
                             dtype=torch.long, device=device)
        everyone = self._gather(local)  # processes x (1 + parameters + embedding matrices)
        present = (everyone[:, 1 : 1 + len(params)] > 0).any(dim=0).tolist()
        self._sum_rows(rows, everyone[:, 1 + len(params) :], present[len(self._dense) :])
        if self._shared is not None:
            self._sum_owned(present[: len(self._dense)])
        else:
            self._sum_buckets(present, restart=bool(everyone[:, 0].any()))
        self._expected = dict(self._fired)

    def _sum_owned(self, present: List[bool]) -> None:
        """The summed gradients of the weights this process owns (the others'
        None), and the squared norm of every module's whole summed gradient,
        for clipping (`give_squared_norm`): the owned weights' parts summed
        over the processes, then the embedding matrices' (which every process
        holds whole) added."""
        start, end = self._owned_span
        summed = self._shared.sum_slots(start, end, self._owned_grads)
        set_from_flat(self._owned, summed, present[self._owned_first : self._owned_last])
        for param in self._others:
            param.grad = None
        squared = torch.zeros(len(self._modules), dtype=summed.dtype)
        self._add_squared_norms(squared, zip(self._module_of_owned, self._owned))
        dist.all_reduce(squared, group=self._group)
        self._add_squared_norms(squared, zip(self._module_of_rows, self._rows))
        for module, value in zip(self._modules, squared):
            give_squared_norm(module, value)
        self.stats["shared_bytes"] += summed.numel() * summed.element_size()
        self._stepped = True

    @staticmethod
    def _add_squared_norms(squared: torch.Tensor, modules_and_params) -> None:
        """Add each (module index, parameter)'s squared gradient norm to `squared[module index]`."""
        grads = [(m, p.grad.coalesce().values() if p.grad.is_sparse else p.grad)
                 for m, p in modules_and_params if p.grad is not None]
        if grads:
            norms = torch._foreach_norm([g for _, g in grads])
            squared.index_add_(0, torch.tensor([m for m, _ in grads]), torch.stack(norms).to(squared) ** 2)

    def share_weights(self) -> None:
        """After the optimizer has stepped the weights this process owns (in
        the shared copy, which every process's dense weights are views of):
        wait until every process has stepped its own, so that no process
        reads a weight, in a forward pass or to save it, while its owner
        still writes it. Nothing to do without shared memory, or when nothing
        was stepped since the last call."""
        if self._shared is None or not self._stepped:
            return
        self._stepped = False
        self._shared.wait_for_everyone()

    def _sum_buckets(self, present: List[bool], restart: bool) -> None:
        """Wait for every bucket's all-reduce, or sum them all again if
        `restart` (a bucket was summed before its last accumulation somewhere)."""
        for flat, work, _ in self._works:
            work.wait()
        self.stats["dense_bytes"] += sum(flat.numel() * flat.element_size() for flat, _, _ in self._works)
        if restart:
            self.stats["restarted"] += 1
            self._works = [(flat_gradients(bucket), None, ()) for bucket in self._buckets]
            for flat, _, _ in self._works:
                dist.all_reduce(flat, group=self._group)
        offset = 0
        for bucket, (flat, _, _) in zip(self._buckets, self._works):
            set_from_flat(bucket, flat, present[offset : offset + len(bucket)])
            offset += len(bucket)

    def _gather(self, local: torch.Tensor) -> torch.Tensor:
        parts = [torch.empty_like(local) for _ in range(dist.get_world_size(self._group))]
        dist.all_gather(parts, local, group=self._group)
        return torch.stack(parts)

    def _sum_rows(self, rows: List[Tuple[torch.Tensor, Optional[torch.Tensor]]], counts: torch.Tensor,
                  present: List[bool]) -> None:
        """Sum the embedding matrices' gradients over the union of the rows any
        process has: the ids first, then those rows. A sparse gradient stays
        sparse (the union's rows, coalesced), a dense one dense."""
        if not self._rows:
            return
        longest = int(counts.sum(dim=1).max())
        ids = torch.full((longest,), -1, dtype=torch.long, device=counts.device)
        mine = torch.cat([r for r, _ in rows]).to(counts.device)
        ids[: len(mine)] = mine
        everyone = self._gather(ids)
        unions = []
        for i in range(len(self._rows)):
            starts = counts[:, :i].sum(dim=1).tolist()
            sizes = counts[:, i].tolist()
            unions.append(torch.unique(torch.cat([everyone[r, s : s + n] for r, (s, n) in enumerate(zip(starts, sizes))])))
        parts = []
        for param, union, (local, values) in zip(self._rows, unions, rows):
            part = param.new_zeros((len(union), param.shape[1]))
            if values is not None:  # the union is sorted and holds every local row
                part[torch.searchsorted(union, local.to(union.device)).to(param.device)] = values
            parts.append(part.reshape(-1))
        summed = torch.cat(parts)
        dist.all_reduce(summed, group=self._group)
        self.stats["row_bytes"] += summed.numel() * summed.element_size()
        self.stats["rows"] += sum(len(u) for u in unions)
        offset = 0
        for param, union, has in zip(self._rows, unions, present):
            size = len(union) * param.shape[1]
            values = summed[offset : offset + size].view(len(union), param.shape[1])
            union = union.to(param.device)
            sparse = param.grad.is_sparse if param.grad is not None else id(param) in self._sparse
            if not has:
                param.grad = None
            elif sparse:
                param.grad = torch.sparse_coo_tensor(union[None], values, param.shape, is_coalesced=True,
                                                     check_invariants=False)  # the union is sorted and unique
            else:
                grad = param.grad if param.grad is not None else torch.zeros_like(param)
                grad[union] = values
                param.grad = grad
            offset += size

    def close(self) -> None:
        """Remove the hooks from the parameters and give the weights back
        memory of their own (no longer stepped by the other processes)."""
        for hook in self._hooks:
            hook.remove()
        if self._shared is not None:
            with torch.no_grad():
                for param in self._dense:
                    param.data = param.data.clone()
        self._hooks = []
