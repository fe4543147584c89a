"""Local worker processes for `apply`: each loads the pipeline once and
annotates whole shards handed to it over a pipe of its own.

Not `nlp.pipe(n_process=N)`: when one of its workers dies, it waits for the
worker's output forever. Here the driver waits on every worker's pipe and
process sentinel at once, so a worker killed mid-job ends the job at once with
an error naming it (every shard written until then is whole); and each worker
asks the kernel to kill it when the driver dies (Linux `PR_SET_PDEATHSIG`; a
thread watching the parent elsewhere), so no worker outlives a killed driver."""
import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from ..errors import SpacyMlmError
from .annotation import annotate_shard, load_pipeline
from .records import Record

Shard = Tuple[int, List[Record]]
PR_SET_PDEATHSIG = 1  # linux/prctl.h


class WorkerFailed(SpacyMlmError):
    """A worker process died or raised while the job had work left."""


def describe_shard(number: int, records: Sequence[Record]) -> str:
    first, last = records[0], records[-1]
    if last.file != first.file:
        return f"shard {number} ({first.file}, line {first.line} to {last.file}, line {last.line})"
    lines = f"lines {first.line} to {last.line}" if last.line != first.line else f"line {first.line}"
    return f"shard {number} ({first.file}, {lines})"


def _exit_with(driver_pid: int) -> None:
    """Make this worker end when the driver process ends, however it ends."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    else:
        def watch():
            while os.getppid() == driver_pid:
                time.sleep(1)
            os._exit(1)

        threading.Thread(target=watch, daemon=True).start()
    if os.getppid() != driver_pid:  # the driver died before the above took effect
        os._exit(1)


def _serve(conn: Connection, driver_pid: int, pipeline: str, output_format: str, batch_size: int) -> None:
    """A worker's life: load the pipeline, then answer each shard sent with
    ("done", number, contents), until None; or end on an error, answering
    ("failed", None, message) (the driver knows which shard it sent)."""
    _exit_with(driver_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle: it ends the workers
    try:
        nlp = load_pipeline(pipeline)
        while (task := conn.recv()) is not None:
            number, records = task
            conn.send(("done", number, annotate_shard(nlp, records, output_format, batch_size)))
    except Exception as err:  # the message travels: an exception object may not pickle
        conn.send(("failed", None, f"{type(err).__name__}: {err}"))


@dataclass
class Worker:
    name: str
    process: multiprocessing.process.BaseProcess
    conn: Connection
    shard: Optional[Shard] = None  # the one it is annotating

    def at_work(self) -> str:
        return f" while annotating {describe_shard(*self.shard)}" if self.shard else ""

    def how_it_ended(self) -> str:
        self.process.join(5)
        code = self.process.exitcode
        if code is not None and code < 0:
            return f"was killed by {signal.Signals(-code).name}"
        return f"exited with code {code}" if code is not None else "stopped answering"


class LocalWorkers:
    """`count` worker processes, forked where the platform can (no interpreter
    start: the output lock is not inherited, see util/outputs.py), started
    fresh otherwise. Use as a context manager: leaving it ends every worker."""

    def __init__(self, pipeline: str, output_format: str, batch_size: int, count: int):
        context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
        self.workers: List[Worker] = []
        for index in range(1, count + 1):
            mine, theirs = context.Pipe()
            process = context.Process(target=_serve, args=(theirs, os.getpid(), pipeline, output_format, batch_size),
                                      name=f"apply worker {index}", daemon=True)
            process.start()
            theirs.close()
            self.workers.append(Worker(f"apply worker {index} (pid {process.pid})", process, mine))

    def __enter__(self) -> "LocalWorkers":
        return self

    def __exit__(self, *exc) -> None:
        for worker in self.workers:
            if worker.process.is_alive():
                try:
                    worker.conn.send(None)
                except OSError:
                    pass
        for worker in self.workers:
            worker.process.join(5)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
            worker.conn.close()

    def annotate(self, shards: Sequence[Shard]) -> Iterator[Tuple[int, bytes]]:
        """(shard number, file contents) in the order of `shards`. At most two
        shards per worker are out or waiting to be yielded, so a slow shard does
        not make the finished ones after it pile up. A worker that dies or
        fails raises WorkerFailed naming it and its shard, once every shard
        before that one has been yielded."""
        todo, order = deque(shards), deque(number for number, _ in shards)
        finished: Dict[int, bytes] = {}
        idle = list(self.workers)
        while order:
            failure = self._hand_out(todo, idle, len(finished))
            if failure is None:
                failure = self._take_answers(idle, finished)
            while order and order[0] in finished:
                number = order.popleft()
                yield number, finished.pop(number)
            if failure is not None:
                raise WorkerFailed(f"{failure}. The shards written so far are whole: rerun the same command to "
                                   "annotate the rest")

    def _hand_out(self, todo: deque, idle: List[Worker], waiting: int) -> Optional[str]:
        """Send shards to idle workers while fewer than two per worker are out
        or `waiting` to be yielded; a worker found dead on the way, named."""
        while todo and idle and waiting + len(self.workers) - len(idle) < 2 * len(self.workers):
            worker = idle.pop()
            worker.shard = todo.popleft()
            try:
                worker.conn.send(worker.shard)
            except OSError:  # it died since the last wait (a broken pipe)
                return f"{worker.name} {worker.how_it_ended()}"
        return None

    def _take_answers(self, idle: List[Worker], finished: Dict[int, bytes]) -> Optional[str]:
        """Wait for answers or deaths; take every answer there (an idle worker
        back in `idle`); the first failure or death, named."""
        ready = wait([w.conn for w in self.workers] + [w.process.sentinel for w in self.workers])
        for worker in self.workers:
            if worker.conn in ready:
                failure = self._receive(worker, finished)
                if failure is not None:
                    return failure
                idle.append(worker)
        for worker in self.workers:
            if worker.process.sentinel in ready:
                return f"{worker.name} {worker.how_it_ended()}{worker.at_work()}"
        return None

    @staticmethod
    def _receive(worker: Worker, finished: Dict[int, bytes]) -> Optional[str]:
        """Take a worker's answer; the failure it reports, if any."""
        try:
            status, number, value = worker.conn.recv()
        except (EOFError, OSError):
            return f"{worker.name} {worker.how_it_ended()}{worker.at_work()}"
        if status == "failed":
            return f"{worker.name} failed{worker.at_work()}: {value}"
        finished[number] = value
        worker.shard = None
        return None
