"""Shared memory for the processes of a data-parallel run that all train on
this machine's CPU: where they sum their gradients and pass each other the
weights they stepped (`gradient_sync.GradientReducer`).

gloo sums CPU tensors over TCP, even between processes on one machine: each
process copies its half out through the kernel's loopback, receives the other
half, adds and sends again, on worker threads that take turns with training
on the same cores, and every process also runs the same AdamW step over all
of the dense weights (docs/benchmarks.md, docs/scaling.md). Here the
processes map one file in /dev/shm holding a gradient slot per process and
the weights themselves (every process's dense
parameters are views of that one copy), and each weight is stepped by one
process only (its *owner*: the weights are cut into one contiguous range per
process, ZeRO stage 1's partition of the optimizer):

* each process writes its flat gradients into its slot (the copy that
  flattens them, which the collectives need too);
* after a small collective (every slot is written, so every process is done
  reading the weights for this step) each process sums, in slot order, its
  own range of the slots into a buffer of its own: the gradients of the
  weights it owns, which its optimizer then steps in place, for everyone (the
  fused step may scale the gradients in place: they are read by no one else);
* another small collective after the step, before anything reads the weights
  again.

So the optimizer's work and its moments are divided among the processes, no
weight is copied from one process to another, and every process holds the
same weights bit for bit, where copying each process's stepped weights in
and the others' out would cost a copy of every weight a step. A
process that dies makes the other's next collective fail, as with gloo alone.

The file is reserved whole when opened (`posix_fallocate`: a full /dev/shm
then fails here, cleanly, instead of killing a process with SIGBUS on a later
write) and unlinked as soon as every process has mapped it, so nothing is left
behind whatever ends the run. Where it cannot be made (no /dev/shm, not
enough room, processes on several machines) `SharedMemory.open` returns None
and the caller sums with collectives.
"""
import errno
import logging
import os
import tempfile
from typing import List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist

logger = logging.getLogger(__name__)

SHARED_DIR = "/dev/shm"  # a tmpfs: what is written there stays in memory


def _reserve(size: int) -> Optional[str]:
    """A new file of `size` bytes in SHARED_DIR with its memory reserved, or
    None (no such directory, not writable, not enough room)."""
    if not os.path.isdir(SHARED_DIR):
        return None
    try:
        fd, path = tempfile.mkstemp(prefix="spacy-mlm-gradients-", dir=SHARED_DIR)
    except OSError as err:
        logger.info("Cannot make a file for shared gradients in %s (%s)", SHARED_DIR, err)
        return None
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as err:
        os.close(fd)
        os.unlink(path)
        if err.errno in (errno.ENOSPC, errno.EFBIG, errno.EOPNOTSUPP, errno.EINVAL):
            logger.info("No room for %d MB of shared gradients in %s (%s)", size // 2**20, SHARED_DIR, err)
            return None
        raise
    os.close(fd)
    return path


def owned_ranges(sizes: Sequence[int], world: int) -> List[Tuple[int, int]]:
    """Cut parameters of `sizes` elements (in order) into `world` runs of
    whole parameters, as even in elements as whole parameters allow: the
    (first, last + 1) parameter index of each process's run (empty runs
    where there are fewer parameters than processes)."""
    total, cuts, seen = sum(sizes), [], 0
    for index, size in enumerate(sizes):
        # a parameter goes to the process whose even part holds its middle element
        while len(cuts) < world - 1 and seen + size / 2 > total * (len(cuts) + 1) / world:
            cuts.append(index)
        seen += size
    cuts += [len(sizes)] * (world - 1 - len(cuts))
    starts = [0] + cuts
    return list(zip(starts, cuts + [len(sizes)]))


class SharedMemory:
    """A gradient slot per process and one copy of the weights, `numel`
    floats each; see the module's docstring. Make one with `open` (a
    collective: every process of `group` calls it)."""

    def __init__(self, memory: torch.Tensor, numel: int, group):
        self._group = group
        self._rank, self._world = dist.get_rank(group), dist.get_world_size(group)
        self._slots = [memory[i * numel : (i + 1) * numel] for i in range(self._world)]
        self.weights = memory[self._world * numel :]
        self._signal = torch.zeros(1)

    @classmethod
    def open(cls, numel: int, dtype: torch.dtype, group) -> Optional["SharedMemory"]:
        """Every process of `group` maps one file made by the first, or None
        for all of them where any cannot (see the module's docstring)."""
        world = dist.get_world_size(group)
        if world < 2 or numel == 0:
            return None
        size = (world + 1) * numel * torch.empty(0, dtype=dtype).element_size()
        first = dist.get_global_rank(group, 0)
        box = [_reserve(size) if dist.get_rank(group) == 0 else None]
        dist.broadcast_object_list(box, src=first, group=group)
        path, memory = box[0], None
        try:
            try:
                if path is not None and os.path.exists(path):  # absent on another machine
                    memory = torch.from_file(path, shared=True, size=(world + 1) * numel, dtype=dtype)
            finally:  # a process failing to map it still answers, then raises: no peer waits for the timeout
                mapped = torch.tensor([float(memory is not None)])
                dist.all_reduce(mapped, op=dist.ReduceOp.MIN, group=group)  # every process has mapped it, or not
        finally:
            if path is not None and dist.get_rank(group) == 0:
                os.unlink(path)  # the mappings stay; nothing is left in /dev/shm whatever failed
        if mapped.item() == 0:
            return None
        return cls(memory, numel, group)

    @property
    def slot(self) -> torch.Tensor:
        """This process's gradient slot."""
        return self._slots[self._rank]

    def sum_slots(self, start: int, end: int, out: torch.Tensor) -> torch.Tensor:
        """`out` = the sum of every process's slot over elements [start, end),
        added in slot order (the same sum whichever process asks). Call it
        only after a collective that follows every process's writing."""
        torch.add(self._slots[0][start:end], self._slots[1][start:end], out=out)
        for slot in self._slots[2:]:
            out += slot[start:end]
        return out

    def wait_for_everyone(self) -> None:
        """Return once every process has called it (an all-reduce of one
        float: a quarter of what gloo's barrier takes on one machine)."""
        dist.all_reduce(self._signal, group=self._group)
