"""`spacy_mlm apply` killed with SIGKILL: its driver (the workers end with it,
the output lock is free, the rerun finishes the job) or one of its workers (the
driver ends at once naming it, the finished shards are whole, the rerun
finishes the job). Each job runs as a command in a subprocess with two worker
processes; the reruns run here, in one process."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import spacy_mlm.inference as inference
from spacy_mlm.inference.shards import shard_path, shard_state
from spacy_mlm.util.outputs import output_lock

from .conftest import TEXTS

RECORDS = 200
SHARD_SIZE = 5

pytestmark = pytest.mark.skipif(not Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").exists(),
                                reason="needs Linux /proc to find a process's children")


def children(pid: int):
    kids = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        kids += [int(kid) for kid in (task / "children").read_text().split()]
    return kids


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def end(pids):
    """SIGKILL to those of `pids` still running (a failing test leaves no process behind)."""
    for pid in filter(running, pids):
        os.kill(pid, signal.SIGKILL)


def write_input(path: Path) -> Path:
    """Records long enough (three texts each) that the job outlasts its first shard by seconds."""
    lines = [json.dumps({"text": f"{n} " + " ".join(TEXTS[(n + k) % len(TEXTS)] for k in range(3))})
             for n in range(RECORDS)]
    path.write_text("\n".join(lines) + "\n", encoding="utf8")
    return path


def start_job(pipeline, path, out):
    command = [sys.executable, "-m", "spacy_mlm", "apply", str(pipeline), str(path), str(out), "--workers", "2",
               "--shard-size", str(SHARD_SIZE), "--format", "jsonl", "--quiet"]
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    job = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not (out / "shard-00000.jsonl.sha256").exists():  # the workers are at work
        assert job.poll() is None and time.time() < deadline, job.communicate()
        time.sleep(0.02)
    return job


def assert_every_record_once_in_order(out):
    rows = [json.loads(line) for shard in sorted(out.glob("shard-*.jsonl"))
            for line in shard.read_text(encoding="utf8").splitlines()]
    assert [row["line"] for row in rows] == list(range(1, RECORDS + 1))
    assert [int(row["text"].split()[0]) for row in rows] == list(range(RECORDS))


def test_a_forked_child_does_not_keep_the_output_lock(tmp_path):
    """A forked child shared the lock's open file, so it held the lock on after
    its parent was killed: the next run was refused, naming the dead parent."""
    out = tmp_path / "out"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import os, time; from spacy_mlm.util.outputs import output_lock\n"
         f"with output_lock({str(out)!r}, 'apply'):\n"
         "    child = os.fork()\n"
         "    if child == 0:\n        import sys; sys.stderr.write('running\\n'); sys.stderr.flush()\n"
         "        time.sleep(60)\n        os._exit(0)\n"
         "    print(child, flush=True)\n    time.sleep(60)"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    child = int(holder.stdout.readline())
    # the child says it runs (it has closed its copy of the lock by then) on a channel of its own
    assert holder.stderr.readline().strip() == "running"
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    try:
        assert running(child)
        with output_lock(out, "apply"):  # the child lives on, without the lock
            pass
    finally:
        os.kill(child, signal.SIGKILL)


def test_a_killed_driver_takes_its_workers_with_it_and_the_rerun_finishes(saved_pipelines, tmp_path):
    """Before: the forked workers lived on (over 100 s) holding the output's
    lock, and the rerun was refused: "another run is writing here (pid N)"."""
    path, out = write_input(tmp_path / "in.jsonl"), tmp_path / "out"
    job = start_job(saved_pipelines["ner"], path, out)
    workers = children(job.pid)
    assert len(workers) == 2
    job.send_signal(signal.SIGKILL)
    job.wait()
    deadline = time.time() + 10
    while any(map(running, workers)) and time.time() < deadline:
        time.sleep(0.05)
    survivors = list(filter(running, workers))
    end(survivors)
    assert survivors == []
    assert len(list(out.glob("shard-*.sha256"))) < RECORDS // SHARD_SIZE  # killed mid-job
    summary = inference.apply_pipeline(saved_pipelines["ner"], path, out, shard_size=SHARD_SIZE,
                                       output_format="jsonl", quiet=True)
    assert summary.written + summary.skipped == RECORDS // SHARD_SIZE and summary.written > 0
    assert_every_record_once_in_order(out)


def test_a_killed_worker_ends_the_job_naming_it_and_the_rerun_finishes(saved_pipelines, tmp_path):
    """Before: the driver waited for the dead worker's output forever, saying nothing."""
    path, out = write_input(tmp_path / "in.jsonl"), tmp_path / "out"
    job = start_job(saved_pipelines["ner"], path, out)
    workers = children(job.pid)
    victim = workers[-1]
    os.kill(victim, signal.SIGKILL)
    try:
        _, err = job.communicate(timeout=30)
    finally:
        job.kill()
        end(workers)
    assert job.returncode == 1
    assert f"(pid {victim}) was killed by SIGKILL" in err and "rerun the same command" in err, err
    written = sorted(out.glob("shard-*.jsonl"))
    assert 0 < len(written) < RECORDS // SHARD_SIZE
    assert all(shard_state(shard_path(out, n, "jsonl")) == "done" for n in range(len(written)))
    inference.apply_pipeline(saved_pipelines["ner"], path, out, shard_size=SHARD_SIZE, output_format="jsonl",
                             quiet=True)
    assert_every_record_once_in_order(out)
