"""Atomic writes: a crash or kill -9 mid-write leaves either the old file/dir or
the new one, never a half-written one."""
import contextlib
import glob
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Iterator, List, Union

import srsly

from ..errors import ModelLoadError

PathLike = Union[str, Path]
# What the writes below leave beside NAME when killed: a temporary file or
# directory `.NAME.<random>.tmp`, or the previous directory `.NAME.old-<pid>`.
LEFT_BY_A_KILL = re.compile(r"^\.(?P<name>.+)\.(?:[A-Za-z0-9_]+\.tmp|old-\d+)$")


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(str(path), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def naming_the_file(path: PathLike) -> Iterator[None]:
    """An OSError without a file name (a full disk: "[Errno 28] No space left
    on device", from a write or an fsync) gets `path`, the file or directory
    being written, so the message says where."""
    try:
        yield
    except OSError as err:
        if err.filename is not None or err.errno is None:
            raise
        raise type(err)(err.errno, err.strerror or str(err), str(path)) from err


def atomic_write_bytes(path: PathLike, data: bytes) -> None:
    path = Path(path)
    with naming_the_file(path):
        _atomic_write_bytes(path, data)


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=str(path.parent), prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp makes the file private (0600); give it the mode open() would
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def atomic_write_text(path: PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf8"))


def recover_directory(path: PathLike) -> Path:
    """Finish a replace by `atomic_directory` that a crash cut between its two
    renames: if `path` is missing but its previous version was moved aside, move
    that back. Readers call this before opening `path`."""
    path = Path(path)
    if not path.exists():
        aside = sorted(path.parent.glob(f".{glob.escape(path.name)}.old-*"), key=lambda p: p.stat().st_mtime)
        if aside:
            os.replace(aside[-1], path)
    return path


@contextlib.contextmanager
def atomic_directory(path: PathLike) -> Iterator[Path]:
    """Yield a fresh temporary directory beside `path`; on success it replaces
    `path` (an existing directory there is moved aside first, then removed; a
    crash between the two renames is undone by `recover_directory`)."""
    path = recover_directory(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=str(path.parent), prefix=f".{path.name}.", suffix=".tmp"))
    try:
        # mkdtemp makes the directory private (0700); give it the mode mkdir would
        os.chmod(tmp, 0o777 & ~_umask())
        with naming_the_file(path):
            yield tmp
            mask = _umask()
            for root, dirs, files in os.walk(tmp):
                for name in dirs:
                    os.chmod(os.path.join(root, name), 0o777 & ~mask)
                for name in files:
                    with open(os.path.join(root, name), "rb") as f:
                        # whatever wrote it (safetensors' save_file and mkstemp make 0600), it gets
                        # the mode open() gives, as spaCy's own files have
                        os.fchmod(f.fileno(), 0o666 & ~mask)
                        os.fsync(f.fileno())
        old = None
        if path.exists():
            old = path.parent / f".{path.name}.old-{os.getpid()}"
            if old.exists():
                shutil.rmtree(old)
            os.replace(path, old)
        os.replace(tmp, path)
        _fsync_dir(path.parent)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def directory_to_bytes(write: Callable[[Path], None]) -> bytes:
    """The files `write(directory)` writes, as one msgpack'd {relative path: bytes}
    mapping: `to_bytes` for components that save themselves as directories."""
    with tempfile.TemporaryDirectory() as tmp:
        write(Path(tmp))
        files = {str(p.relative_to(tmp)): p.read_bytes() for p in Path(tmp).rglob("*") if p.is_file()}
    return srsly.msgpack_dumps(files)


def directory_from_bytes(bytes_data: bytes, read: Callable[[Path], None], what: str) -> None:
    """Unpack `directory_to_bytes` output into a temporary directory and
    `read(directory)` it. The bytes may come from anywhere, so nothing is
    written outside that directory and anything but a mapping of relative
    paths to bytes is a ModelLoadError naming `what` they should be."""
    try:
        files = srsly.msgpack_loads(bytes_data)
    except ValueError as err:
        raise ModelLoadError("<bytes>", f"not a serialized {what} ({err})") from None
    if not isinstance(files, dict):
        raise ModelLoadError("<bytes>", f"not a serialized {what} (expected a mapping of files)")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp).resolve()
        for rel, data in files.items():
            target = (root / rel).resolve() if isinstance(rel, str) else root
            if root not in target.parents or not isinstance(data, bytes):
                raise ModelLoadError("<bytes>", f"not a serialized {what} (bad entry {rel!r})")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        read(root)


def remove_left_overs(directory: PathLike) -> List[Path]:
    """Remove what killed writes left in `directory` (not below it): temporary
    files and directories, and previous versions of directories that were
    replaced; a previous version whose directory is missing (a kill between the
    two renames) is moved back instead. Returns what was removed. Only for a
    directory no other process is writing into."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    removed = []
    for entry in sorted(directory.iterdir()):
        found = LEFT_BY_A_KILL.match(entry.name)
        if not found or not entry.exists():
            continue
        if ".old-" in entry.name and not (directory / found.group("name")).exists():
            recover_directory(directory / found.group("name"))
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
        removed.append(entry)
    return removed
