"""This process's place in a `torchrun` launch, and the one process-group setup.

gloo between CPUs, NCCL between GPUs (the process's own GPU made current
first: NCCL and its object collectives work on the current device). Alone
(no WORLD_SIZE, or 1) nothing is started and every collective below is a no-op,
so a run reads the same in one process and in many.
"""
import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, List, Optional

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class ProcessGroup:
    """This process's rank among `world` processes (one: rank 0 of 1)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier()

    def sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """`tensor` summed over the processes, in place: a tensor where the model
        runs, which is where NCCL (GPU) and gloo (CPU) both take it."""
        if self.world > 1:
            dist.all_reduce(tensor)
        return tensor

    def gather(self, value: Any) -> List[Any]:
        """Every process's `value` (picklable), in rank order, in every process."""
        if self.world == 1:
            return [value]
        out: List[Any] = [None] * self.world
        dist.all_gather_object(out, value)
        return out


def launch_from_env() -> Optional[ProcessGroup]:
    """The torchrun launch this process belongs to (WORLD_SIZE, RANK,
    LOCAL_RANK), or None when it runs alone."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return None
    return ProcessGroup(int(os.environ["RANK"]), world, int(os.environ.get("LOCAL_RANK", "0")))


def start_process_group(group: ProcessGroup, gpu: bool, timeout_s: Optional[float] = None) -> None:
    """Join the launch's process group: NCCL on GPUs, gloo on CPUs. A
    collective that waits longer than `timeout_s` for a peer fails (None:
    torch's default for the backend)."""
    if gpu:
        torch.cuda.set_device(group.local_rank)
    if not dist.is_initialized():
        timeout = None if timeout_s is None else timedelta(seconds=timeout_s)
        dist.init_process_group("nccl" if gpu else "gloo", timeout=timeout)


def join_launch(device: torch.device) -> ProcessGroup:
    """This process's group, started if it runs under torchrun (the device's
    type picks the backend); rank 0 of 1 when it runs alone."""
    group = launch_from_env()
    if group is None:
        return ProcessGroup()
    start_process_group(group, device.type == "cuda")
    return group


def broadcast_parameters(modules) -> None:
    """Every process takes the first process's weights and buffers of `modules`
    (the same already where they are built from one seed; this makes sure)."""
    for module in modules:
        for tensor in list(module.parameters()) + list(module.buffers()):
            dist.broadcast(tensor.data, src=0)
