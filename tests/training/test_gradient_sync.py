"""`GradientReducer` (engine/gradient_sync.py) on 2 gloo processes: the
gradients it leaves equal a dense all-reduce of every gradient exactly, with
embedding rows that the processes touch apart and in common (dense gradients,
and row gradients that one process has), the other weights summed through
shared memory or in buckets of collectives during backward, and steps that run
backward more or fewer times than the one before."""
import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from spacy_mlm.engine import shared_memory

WORKER = '''
import json, sys
import torch, torch.distributed as dist
from spacy_mlm.models import torch_stepper
from spacy_mlm.engine.gradient_sync import GradientReducer

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
    held = {name: p.grad for name, p in net.named_parameters() if p.grad is not None}
    equal = {name: grad.is_sparse == (name == "rows.weight")  # rows stay rows, dense stays dense
             and expected[name] is not None and torch.equal(grad.to_dense(), expected[name])
             for name, grad in held.items()}
    # the gradients are each process's own: the fused optimizer may scale them in place
    kept = {name: grad.clone() for name, grad in held.items() if not grad.is_sparse}
    dist.barrier()
    if rank == 1:
        for name in kept:
            held[name].mul_(1000.0)
    dist.barrier()
    private = rank == 1 or all(torch.equal(held[name], grad) for name, grad in kept.items())
    dist.barrier()
    for name, grad in kept.items():
        held[name].copy_(grad)
    # the whole gradient's squared norm, for clipping where a process holds part of it
    given = torch_stepper._GIVEN_SQUARED_NORMS.pop(net, None)
    whole = sum(float((g.double() ** 2).sum()) for g in expected.values() if g is not None)
    norm_ok = given is None or abs(given.item() - whole) <= 1e-6 * whole
    # a step of plain SGD on what each process holds, then the weights passed on: everyone has every step
    with torch.no_grad():
        target = {n: (p - 0.5 * expected[n] if expected[n] is not None else p.clone()) for n, p in net.named_parameters()}
        dist.barrier()  # read before anyone steps: through shared memory the owner steps a weight for everyone
        for name, param in net.named_parameters():
            if param.grad is not None:
                param -= 0.5 * param.grad.to_dense()
    reducer.share_weights()
    weights_equal = all(torch.equal(p, target[n]) for n, p in net.named_parameters())
    report = {"held": sorted(held), "equal": equal, "private": private, "norm_given": given is not None,
              "norm_ok": norm_ok, "weights_equal": weights_equal,
              "none": sorted(n for n in expected if expected[n] is None),
              **{key: reducer.stats[key] - before[key] for key in before}}
    everyone = [None, None]
    dist.all_gather_object(everyone, report)
    steps.append(everyone)
# after close the weights are the process's own again: a step here is seen by no other process
reducer.close()
with torch.no_grad():
    net["hidden"].bias += rank + 1
biases = [None, None]
dist.all_gather_object(biases, net["hidden"].bias.tolist())
steps.append({"own_after_close": biases[0] != biases[1]})
if rank == 0:
    with open(sys.argv[1], "w") as out:
        json.dump(steps, out)
dist.destroy_process_group()
'''


def torchrun(tmp_path, script, *args):
    """Run `script` on 2 processes of a torchrun launch (its arguments `args`); the finished run."""
    (tmp_path / "worker.py").write_text(script)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               str(tmp_path / "worker.py"), *args]
    return subprocess.run(command, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True,
                          timeout=120)


def run_steps(tmp_path, backward_calls, mode):
    done = torchrun(tmp_path, WORKER, str(tmp_path / "steps.json"), json.dumps(backward_calls), mode)
    assert done.returncode == 0, done.stderr[-3000:]
    *steps, closed = json.loads((tmp_path / "steps.json").read_text())
    assert closed["own_after_close"], "after close() a weight is still shared between the processes"
    return steps


ALL = {"embed.weight", "rows.weight", "hidden.weight", "hidden.bias", "out.weight", "out.bias", "rank0_only.weight",
       "rank0_only.bias"}  # every parameter with a gradient somewhere ("unused" has none)


def check_step(step):
    """Both processes' reports of one step, in either mode."""
    for report in step:
        assert report["held"] and all(report["equal"].values()), report
        assert report["private"], "a process's gradients are views of memory another process reads"
        assert report["weights_equal"], "after share_weights a process lacks a step"
        assert report["norm_ok"], report
        # rank0_only has a gradient on one process (summed with zeros), unused on none (stays None)
        assert report["none"] == ["unused.bias", "unused.weight"]
        # rows 1, 2, 3, 4, 7, 9 of the embedding: the union, not 50 rows; rows 3, 4, 7, 9 of the sparse one
        assert report["rows"] == 6 + 4 and report["row_bytes"] == (6 + 4) * 4 * 4
    assert set(step[0]["held"]) | set(step[1]["held"]) == ALL


def test_the_reducer_sums_as_a_dense_all_reduce_through_steps_of_one_and_two_backward_calls(tmp_path):
    steps = run_steps(tmp_path, [1, 1, 2, 2, 1], "buckets")
    for step in steps:
        check_step(step)
        assert step[0]["held"] == step[1]["held"] == sorted(ALL)  # every process holds the whole sum
        assert not step[0]["norm_given"] and step[0]["shared_bytes"] == 0
    first, overlapped, more, again, fewer = [step[0] for step in steps]
    assert first["early_buckets"] == 0 and first["restarted"] == 0  # nothing known yet: all after backward
    assert overlapped["early_buckets"] > 0 and overlapped["restarted"] == 0
    # a second backward after buckets were summed: every process sums the complete gradients again
    assert more["restarted"] == 1
    assert again["early_buckets"] > 0 and again["restarted"] == 0  # two calls expected now
    assert fewer["early_buckets"] == 0 and fewer["restarted"] == 0  # waiting for a second call that never came


@pytest.mark.skipif(not os.path.isdir(shared_memory.SHARED_DIR), reason="no /dev/shm on this machine")
def test_through_shared_memory_each_process_sums_and_steps_its_own_weights(tmp_path):
    steps = run_steps(tmp_path, [1, 2, 1], "shared")
    for step in steps:
        check_step(step)
        dense = [set(report["held"]) - {"embed.weight", "rows.weight"} for report in step]
        assert dense[0] and dense[1] and not dense[0] & dense[1]  # each dense weight summed by one process
        assert all(report["norm_given"] for report in step)
        # the weights each owns (hidden 4x4+4, out 4+1, rank0_only 4+1, unused 4+1: 35 floats over 2), no bucket
        assert sum(report["shared_bytes"] for report in step) == 35 * 4
        assert all(r["dense_bytes"] == r["early_buckets"] == r["restarted"] == 0 for r in step)
    assert not [p for p in os.listdir(shared_memory.SHARED_DIR) if p.startswith("spacy-mlm-gradients-")]


def test_owned_ranges_cut_whole_weights_evenly():
    assert shared_memory.owned_ranges([10, 10, 10, 10], 2) == [(0, 2), (2, 4)]
    assert shared_memory.owned_ranges([30, 5, 5, 5, 5], 2) == [(0, 1), (1, 5)]
    assert shared_memory.owned_ranges([1, 1, 1, 1, 1, 1], 3) == [(0, 2), (2, 4), (4, 6)]
    assert shared_memory.owned_ranges([4], 2) == [(0, 1), (1, 1)]  # fewer weights than processes


def test_shared_memory_that_cannot_be_reserved_is_declined(tmp_path, monkeypatch):
    monkeypatch.setattr(shared_memory, "SHARED_DIR", str(tmp_path / "absent"))
    assert shared_memory._reserve(1024) is None
    monkeypatch.setattr(shared_memory, "SHARED_DIR", str(tmp_path))

    def full(fd, offset, size):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(shared_memory.os, "posix_fallocate", full)
    assert shared_memory._reserve(1024) is None
    assert list(tmp_path.iterdir()) == []  # the file made before the failed reservation is removed

    def read_only(**settings):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(shared_memory.tempfile, "mkstemp", read_only)
    assert shared_memory._reserve(1024) is None


SHARED_MODULE_WORKER = '''
import json, sys
import torch, torch.distributed as dist
from spacy_mlm.models import torch_stepper
from spacy_mlm.engine.gradient_sync import GradientReducer

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 1))
x = torch.full((2, 4), rank + 1.0)
net(x).sum().backward()
whole = 0.0
for param in net.parameters():
    dist.all_reduce(param.grad)
    whole += float((param.grad.double() ** 2).sum())
net.zero_grad(set_to_none=True)
reducer = GradientReducer([net, net], shared_memory=True)  # one module listed by two components
reducer.begin()
net(x).sum().backward()
reducer.finish()
given = torch_stepper._GIVEN_SQUARED_NORMS.pop(net, None)
reports = [None, None]
dist.all_gather_object(reports, {"shared": reducer.shared_memory, "whole": whole,
                                 "given": None if given is None else float(given)})
reducer.close()
if rank == 0:
    with open(sys.argv[1], "w") as out:
        json.dump(reports, out)
dist.destroy_process_group()
'''


@pytest.mark.skipif(not os.path.isdir(shared_memory.SHARED_DIR), reason="no /dev/shm on this machine")
def test_a_module_listed_twice_gets_its_whole_squared_norm_for_clipping(tmp_path):
    """A module shared by two components is listed twice: clipping is given
    its gradient's squared norm once (not a 0 that overwrote it, which
    skipped clipping)."""
    done = torchrun(tmp_path, SHARED_MODULE_WORKER, str(tmp_path / "norms.json"))
    assert done.returncode == 0, done.stderr[-3000:]
    for report in json.loads((tmp_path / "norms.json").read_text()):
        assert report["shared"] and report["whole"] > 0
        assert report["given"] == pytest.approx(report["whole"], rel=1e-5), report


FAILED_MAPPING_WORKER = '''
import json, os, sys, time
from datetime import timedelta
import torch, torch.distributed as dist
from spacy_mlm.engine import shared_memory

shared_memory.SHARED_DIR = sys.argv[1]
dist.init_process_group("gloo", timeout=timedelta(seconds=10))
rank = dist.get_rank()
report = os.path.join(sys.argv[2], "rank0.json")
if rank == 1:
    def failing_from_file(*args, **kwargs):
        raise RuntimeError("simulated: cannot map the file")
    torch.from_file = failing_from_file
    try:
        shared_memory.SharedMemory.open(64, torch.float32, dist.group.WORLD)
        outcome = "opened"
    except RuntimeError as err:
        outcome = str(err)
    with open(os.path.join(sys.argv[2], "rank1.json"), "w") as out:
        json.dump(outcome, out)
    deadline = time.monotonic() + 30  # alive (as a process still raising would be) until the first one is done
    while not os.path.exists(report) and time.monotonic() < deadline:
        time.sleep(0.1)
else:
    start = time.monotonic()
    opened = shared_memory.SharedMemory.open(64, torch.float32, dist.group.WORLD)
    with open(report + ".part", "w") as out:
        json.dump({"opened": opened is not None, "seconds": time.monotonic() - start}, out)
    os.replace(report + ".part", report)
'''


@pytest.mark.skipif(not os.path.isdir(shared_memory.SHARED_DIR), reason="no /dev/shm on this machine")
def test_a_process_that_fails_to_map_the_file_leaves_no_peer_waiting_and_no_file(tmp_path):
    """A process failing in torch.from_file still takes part in the
    collective that says whether every process mapped the file: the first
    process learns it at once (not after the timeout), unlinks the file, and
    the failure reaches the failing process's caller."""
    shm = tempfile.mkdtemp(prefix="spacy-mlm-test-", dir=shared_memory.SHARED_DIR)
    try:
        done = torchrun(tmp_path, FAILED_MAPPING_WORKER, shm, str(tmp_path))
        left = os.listdir(shm)
    finally:
        shutil.rmtree(shm)
    assert (tmp_path / "rank0.json").exists(), f"the first process never returned: {done.stderr[-3000:]}"
    first = json.loads((tmp_path / "rank0.json").read_text())
    assert not first["opened"] and first["seconds"] < 5, first
    assert json.loads((tmp_path / "rank1.json").read_text()) == "simulated: cannot map the file"
    assert left == [], "the file in /dev/shm was left behind"
