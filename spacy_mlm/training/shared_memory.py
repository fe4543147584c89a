"""Summing the processes' flat gradients through shared memory, when every
process of a data-parallel run trains on this machine's CPU.

gloo sums CPU tensors over TCP, even between processes on one machine: each
process copies its half out through the kernel's loopback, receives the other
half, adds and sends again, on its worker threads, which take turns with the
training thread on the same cores. Measured on the 2-core benchmark machine
(notes of issue 36), one all-reduce of MiniLM's 44 MB of dense gradients took
26 ms, and in training, summed in buckets while backward ran, backward grew by
about as much. Here the processes share one mapped file in /dev/shm instead:

* each process writes its flat gradients into its own slot (the copy that
  flattens them, which the collectives need too);
* after a small collective (every slot is written), each process sums one
  chunk over all the slots, in slot order, into the shared result; after
  another (every chunk is summed), each copies the result out into its own
  buffer: the gradients it keeps must be its own, since the optimizer may
  scale them in place (the fused step unscales a clipped gradient so).

Every process reads the same sums, so the processes' weights stay equal bit
for bit; with two processes the sum is the one gloo gives (a + b). A process
that dies makes the other's next collective fail, as with gloo alone.

The file is reserved whole when opened (`posix_fallocate`: a full /dev/shm
then fails here, cleanly, instead of killing a process with SIGBUS on a later
write) and unlinked as soon as every process has mapped it, so nothing is left
behind whatever ends the run. Where it cannot be made (no /dev/shm, not
enough room, processes on several machines) `SharedMemorySum.open` returns
None and the caller sums with collectives.
"""
import errno
import logging
import os
import tempfile
from typing import Optional

import torch
import torch.distributed as dist

logger = logging.getLogger(__name__)

SHARED_DIR = "/dev/shm"  # a tmpfs: what is written there stays in memory


def _reserve(size: int) -> Optional[str]:
    """A new file of `size` bytes in SHARED_DIR with its memory reserved, or
    None (no such directory, not enough room)."""
    if not os.path.isdir(SHARED_DIR):
        return None
    fd, path = tempfile.mkstemp(prefix="spacy-mlm-gradients-", dir=SHARED_DIR)
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


class SharedMemorySum:
    """Slots for `numel` floats per process and a shared result; see the
    module's docstring. Make one with `open` (a collective: every process of
    `group` calls it)."""

    def __init__(self, memory: torch.Tensor, numel: int, group):
        self._group = group
        self._rank, self._world = dist.get_rank(group), dist.get_world_size(group)
        self._numel = numel
        self._slots = [memory[i * numel : (i + 1) * numel] for i in range(self._world)]
        self._result = memory[self._world * numel :]
        self._own = torch.empty(numel, dtype=memory.dtype)
        chunk = -(-numel // self._world)
        self._chunk = slice(min(numel, self._rank * chunk), min(numel, (self._rank + 1) * chunk))
        self._signal = torch.zeros(1)

    @classmethod
    def open(cls, numel: int, dtype: torch.dtype, group) -> Optional["SharedMemorySum"]:
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
        if path is not None and os.path.exists(path):  # absent on another machine
            memory = torch.from_file(path, shared=True, size=(world + 1) * numel, dtype=dtype)
        mapped = torch.tensor([float(memory is not None)])
        dist.all_reduce(mapped, op=dist.ReduceOp.MIN, group=group)  # every process has mapped it, or not
        if path is not None and dist.get_rank(group) == 0:
            os.unlink(path)  # the mappings stay
        if mapped.item() == 0:
            return None
        return cls(memory, numel, group)

    @property
    def slot(self) -> torch.Tensor:
        """This process's slot: write its flat gradients here, then call `sum`."""
        return self._slots[self._rank]

    def sum(self) -> torch.Tensor:
        """The sum of every process's slot, in a buffer of this process's own
        (the same buffer at every call: its previous contents are gone)."""
        self._wait_for_everyone()  # every slot written
        chunk = self._chunk
        torch.add(self._slots[0][chunk], self._slots[1][chunk], out=self._result[chunk])
        for slot in self._slots[2:]:
            self._result[chunk] += slot[chunk]
        self._wait_for_everyone()  # every chunk summed
        self._own.copy_(self._result)
        return self._own

    def _wait_for_everyone(self) -> None:
        # an all-reduce of one float: a quarter of what gloo's barrier takes on one machine
        dist.all_reduce(self._signal, group=self._group)

    @property
    def bytes(self) -> int:
        return self._numel * self._own.element_size()
