"""`GradientReducer` (training/gradient_sync.py) on 2 gloo processes: the
gradients it leaves equal a dense all-reduce of every gradient exactly, with
embedding rows that the processes touch apart and in common (dense gradients,
and row gradients that one process has), the other weights summed through
shared memory or in buckets of collectives during backward, and steps that run
backward more or fewer times than the one before."""
import errno
import json
import os
import subprocess
import sys

import pytest

from spacy_mlm.training import shared_memory

WORKER = '''
import json, sys
import torch, torch.distributed as dist
from spacy_mlm.training.gradient_sync import GradientReducer

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
net = torch.nn.ModuleDict({"embed": torch.nn.Embedding(50, 4), "rows": torch.nn.Embedding(50, 4, sparse=True),
                           "hidden": torch.nn.Linear(4, 4),
                           "out": torch.nn.Linear(4, 1), "rank0_only": torch.nn.Linear(4, 1),
                           "unused": torch.nn.Linear(4, 1)})
IDS = torch.tensor([[1, 2, 3, 7, 3], [3, 4, 7, 9, 9]][rank])  # rows 3 and 7 in common, 3 and 9 twice


def backward(times):
    for time in range(times):
        embedded = net["embed"](IDS) * (rank + 1 + time)
        if rank == 1:  # a row gradient on one process only
            embedded = embedded + net["rows"](IDS)
        hidden = net["hidden"](embedded)
        loss = net["out"](hidden).sum()
        if rank == 0:
            loss = loss + net["rank0_only"](hidden).sum()
        loss.backward()


def dense_sums():
    sums = {}
    for name, param in net.named_parameters():
        grad = param.grad.to_dense().clone() if param.grad is not None else torch.zeros_like(param)
        dist.all_reduce(grad)
        present = torch.tensor([float(param.grad is not None)])
        dist.all_reduce(present)
        sums[name] = grad if present.item() else None
    return sums


reducer = GradientReducer([net], bucket_bytes=64, shared_memory=sys.argv[3] == "shared")  # buckets: 1-2 parameters
assert reducer.shared_memory == (sys.argv[3] == "shared")
steps = []
for times in json.loads(sys.argv[2]):
    net.zero_grad(set_to_none=True)
    backward(times)
    expected = dense_sums()
    net.zero_grad(set_to_none=True)
    before = dict(reducer.stats)
    reducer.begin()
    backward(times)
    reducer.finish()
    # the gradients are this process's own: the fused optimizer may scale them in place
    kept = net["hidden"].weight.grad.clone()
    if rank == 1:
        net["hidden"].weight.grad.mul_(1000.0)
    dist.barrier()
    private = rank == 1 or torch.equal(net["hidden"].weight.grad, kept)  # the first process reports
    dist.barrier()
    net["hidden"].weight.grad.copy_(kept)
    equal = {name: (param.grad is None and expected[name] is None)
             or (param.grad is not None and expected[name] is not None
                 and param.grad.is_sparse == (name == "rows.weight")  # rows stay rows, dense stays dense
                 and torch.equal(param.grad.to_dense(), expected[name]))
             for name, param in net.named_parameters()}
    steps.append({"equal": equal, "private": private, "none": sorted(n for n, p in net.named_parameters() if p.grad is None),
                  **{key: reducer.stats[key] - before[key] for key in before}})
if rank == 0:
    with open(sys.argv[1], "w") as out:
        json.dump(steps, out)
'''


def run_steps(tmp_path, backward_calls, mode):
    (tmp_path / "worker.py").write_text(WORKER)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               str(tmp_path / "worker.py"), str(tmp_path / "steps.json"), json.dumps(backward_calls), mode]
    done = subprocess.run(command, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((tmp_path / "steps.json").read_text())


def test_the_reducer_sums_as_a_dense_all_reduce_through_steps_of_one_and_two_backward_calls(tmp_path):
    steps = run_steps(tmp_path, [1, 1, 2, 2, 1], "buckets")
    for step in steps:
        assert all(step["equal"].values()), step
        assert step["private"] and step["shared_bytes"] == 0
        # rank0_only has a gradient on one process (summed with zeros), unused on none (stays None)
        assert step["none"] == ["unused.bias", "unused.weight"]
        # rows 1, 2, 3, 4, 7, 9 of the embedding: the union, not 50 rows; rows 3, 4, 7, 9 of the sparse one
        assert step["rows"] == 6 + 4 and step["row_bytes"] == (6 + 4) * 4 * 4
    first, overlapped, more, again, fewer = steps
    assert first["early_buckets"] == 0 and first["restarted"] == 0  # nothing known yet: all after backward
    assert overlapped["early_buckets"] > 0 and overlapped["restarted"] == 0
    # a second backward after buckets were summed: every process sums the complete gradients again
    assert more["restarted"] == 1
    assert again["early_buckets"] > 0 and again["restarted"] == 0  # two calls expected now
    assert fewer["early_buckets"] == 0 and fewer["restarted"] == 0  # waiting for a second call that never came


def test_the_reducer_sums_through_shared_memory_as_a_dense_all_reduce(tmp_path):
    steps = run_steps(tmp_path, [1, 2, 1], "shared")
    for step in steps:
        assert all(step["equal"].values()), step
        assert step["private"], "a process's gradients are views of memory another process reads"
        assert step["none"] == ["unused.bias", "unused.weight"]
        assert step["rows"] == 6 + 4  # embedding rows are still summed as rows
        # every other weight (hidden 4x4+4, out 4+1, rank0_only 4+1, unused 4+1) in floats, no bucket
        assert step["shared_bytes"] == (20 + 5 + 5 + 5) * 4 and step["dense_bytes"] == 0
        assert step["early_buckets"] == 0 and step["restarted"] == 0
    assert not [p for p in os.listdir(shared_memory.SHARED_DIR) if p.startswith("spacy-mlm-gradients-")]


def test_shared_memory_that_cannot_be_reserved_is_declined(tmp_path, monkeypatch):
    monkeypatch.setattr(shared_memory, "SHARED_DIR", str(tmp_path / "absent"))
    assert shared_memory._reserve(1024) is None
    monkeypatch.setattr(shared_memory, "SHARED_DIR", str(tmp_path))

    def full(fd, offset, size):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(shared_memory.os, "posix_fallocate", full)
    assert shared_memory._reserve(1024) is None
    assert list(tmp_path.iterdir()) == []  # the file made before the failed reservation is removed
