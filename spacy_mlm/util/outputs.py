"""What every command that writes checks first, and holds while it writes.

A command names its output, what kind of thing it writes there (a file or a
directory) and its inputs; `claim_output` then refuses, before any work:

* an output that is one of the inputs, lies inside one, or (for commands that
  replace the output as a whole) holds one: `convert-conll same.txt same.txt`
  would replace the CoNLL file by a DocBin, `sense-tune MODEL a.txt b.txt`
  would turn the corpus b.txt into the output directory. `--force` does not
  lift this: a command never destroys what it reads;
* a file where the command writes a directory, or the reverse;
* an existing path that is not an earlier output of the same command, unless
  `force`. A directory is recognised by the marker file the command leaves in
  it (`OUTPUT_MARKER`, naming the command); an empty directory is free; a file
  by a `recognise` test the command gives (a .spacy DocBin, a scores file),
  or never (a config a person may have edited, as `spacy init config` does).

and takes a lock for the output (an `fcntl.flock` on `.NAME.lock` beside it),
so a second run writing the same output stops with a message naming the run
that holds it. The kernel drops the lock when the last descriptor of its open
file closes, so when its process ends, however it ends: a killed run never
blocks the next. No other process keeps a descriptor: it is not inherited
across exec (Python's default), and a forked child (a worker pool's process)
closes it as it starts (`_close_inherited_locks`), since a child that outlived
a killed parent would otherwise hold the lock on.
"""
import contextlib
import fcntl
import json
import os
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional, Set, Union

from ..errors import SpacyMlmError
from .io import atomic_write_text

PathLike = Union[str, Path]
OUTPUT_MARKER = ".spacy_mlm-output.json"
_held_locks: Set[int] = set()  # descriptors of the output locks this process holds


def _close_inherited_locks() -> None:
    """In a forked child: close the parent's lock descriptors. A fork shares
    the open file and so its flock; closing the child's copy (never unlocking:
    that would unlock the parent's) leaves the lock to the parent alone."""
    for fd in _held_locks:
        with contextlib.suppress(OSError):
            os.close(fd)
    _held_locks.clear()


os.register_at_fork(after_in_child=_close_inherited_locks)


class OutputRefused(SpacyMlmError):
    """A command's output would destroy an input, something else's file, or
    another run's output."""

    def __init__(self, path: PathLike, message: str):
        self.path = str(path)
        super().__init__(f"{self.path}: {message}")


def _overlaps(output: Path, given: Path, whole: bool) -> Optional[str]:
    """How writing `output` would touch the input `given`, or None."""
    out, inp = output.resolve(), given.resolve()
    if out == inp or (output.exists() and given.exists() and os.path.samefile(output, given)):
        return f"is also an input of this command ({given})"
    if out in inp.parents and whole:
        return f"holds an input of this command ({given}), which replacing it would delete"
    if inp in out.parents:
        return f"lies inside an input of this command ({given})"
    return None


def marked_by(path: Path) -> Optional[str]:
    """The command whose output directory `path` is (its marker), or None."""
    try:
        return json.loads((path / OUTPUT_MARKER).read_text(encoding="utf8")).get("command")
    except (OSError, ValueError, AttributeError):
        return None


def mark_output(path: PathLike, command: str) -> None:
    """Leave the marker that lets `command` replace the directory `path` next time."""
    atomic_write_text(Path(path) / OUTPUT_MARKER, json.dumps({"command": f"spacy_mlm {command}"}) + "\n")


def check_inputs(output: PathLike, inputs: Iterable[Optional[PathLike]], replaces_whole: bool = True) -> Path:
    """Refuse (OutputRefused) an output that is, holds or lies in one of `inputs`."""
    output = Path(output)
    for given in inputs:
        if given is not None and str(given) != "-":
            found = _overlaps(output, Path(given), replaces_whole)
            if found:
                raise OutputRefused(output, f"{found}; choose another output path")
    return output


def check_output(
    output: PathLike,
    command: str,
    *,
    directory: bool,
    inputs: Iterable[Optional[PathLike]] = (),
    replaces_whole: bool = True,
    force: bool = False,
    recognise: Optional[Callable[[Path], bool]] = None,
) -> Path:
    """Refuse (OutputRefused) an output that `command` must not write; see the
    module docstring. `replaces_whole`: the command replaces the output as a
    whole (an input inside it would go); `recognise(path)`: an existing file
    (or an unmarked directory, written before markers existed) is an earlier
    output of `command`."""
    output = check_inputs(output, inputs, replaces_whole)
    if not output.exists() and not output.is_symlink():
        return output
    what = "directory" if directory else "file"
    if directory != output.is_dir():
        raise OutputRefused(
            output,
            f"is an existing {'directory' if output.is_dir() else 'file'}, but {command} writes a {what} here; "
            "choose another path or move it away",
        )
    if force:
        return output
    if directory and (marked_by(output) == f"spacy_mlm {command}" or not any(output.iterdir())):
        return output
    if recognise is not None and recognise(output):
        return output
    if not directory and recognise is None:
        raise OutputRefused(output, f"exists: spacy_mlm {command} replaces a file only with --force "
                                    "(or choose another path)")
    mine = "an earlier output" if directory else "an output"
    raise OutputRefused(
        output, f"exists and is not {mine} of spacy_mlm {command}: pass --force to replace it, or choose another path"
    )


def _locked(lock_path: Path, output: Path) -> int:
    """An open descriptor of `lock_path` holding its exclusive flock."""
    while True:
        fd = os.open(str(lock_path), os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode("utf8", "replace").strip() or "another process"
            os.close(fd)
            raise OutputRefused(
                output, f"another run is writing here ({holder}); wait for it to finish or choose another path"
            ) from None
        try:
            if os.stat(lock_path).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)  # the holder removed this lock file as we took it: take the new one


@contextlib.contextmanager
def output_lock(output: PathLike, command: str) -> Iterator[None]:
    """Hold `.NAME.lock` beside `output` for the block, or raise OutputRefused
    if another process holds it. The file is removed when the block ends (a
    killed run leaves it, unlocked: the next run takes it over)."""
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    lock_path = output.parent / f".{output.name}.lock"
    fd = _locked(lock_path, output)
    _held_locks.add(fd)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"spacy_mlm {command}, pid {os.getpid()}\n".encode("utf8"), 0)
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock_path)  # while still holding it: a run waiting on this file retries on the new one
        _held_locks.discard(fd)
        os.close(fd)


@contextlib.contextmanager
def claim_output(output: PathLike, command: str, **checks) -> Iterator[Path]:
    """Check `output` (`check_output`, with `checks` its keyword arguments) and
    hold its lock (`output_lock`) while the command writes it. A directory is
    marked as `command`'s when the block ends without an error (a command whose
    killed run leaves a part to resume from, as pretrain, calls `mark_output`
    itself as it starts)."""
    checks["inputs"] = list(checks.get("inputs", ()))
    check_inputs(output, checks["inputs"], checks.get("replaces_whole", True))
    with output_lock(output, command):
        # what is there is looked at under the lock: another run may be creating it
        output = check_output(output, command, **checks)
        yield output
        if checks["directory"] and output.is_dir():
            mark_output(output, command)
