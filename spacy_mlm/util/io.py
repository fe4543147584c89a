"""Atomic writes: a crash or kill -9 mid-write leaves either the old file/dir or
the new one, never a half-written one."""
import contextlib
import glob
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator, Union

PathLike = Union[str, Path]


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


def atomic_write_bytes(path: PathLike, data: bytes) -> None:
    path = Path(path)
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
        yield tmp
        for root, _, files in os.walk(tmp):
            for name in files:
                with open(os.path.join(root, name), "rb") as f:
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
