"""spacy_mlm.util.io: a write either happens completely or not at all."""
import os
import stat

import pytest

from spacy_mlm.util.io import atomic_directory, atomic_write_bytes, atomic_write_text, recover_directory


def _leftovers(directory):
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


def test_atomic_write_creates_and_replaces(tmp_path):
    target = tmp_path / "sub" / "file.bin"
    atomic_write_bytes(target, b"first")
    assert target.read_bytes() == b"first"
    atomic_write_text(target, "zweite Fassung ✓")
    assert target.read_text(encoding="utf8") == "zweite Fassung ✓"
    assert _leftovers(target.parent) == []


def test_atomic_write_failure_keeps_the_old_file(tmp_path):
    target = tmp_path / "file.txt"
    atomic_write_text(target, "old")
    with pytest.raises(TypeError):
        atomic_write_bytes(target, "not bytes")  # fails inside the write
    assert target.read_text() == "old"
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_atomic_write_mode_follows_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        atomic_write_bytes(tmp_path / "f", b"x")
        with atomic_directory(tmp_path / "d") as tmp:
            (tmp / "inner").write_bytes(b"y")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "f").stat().st_mode) == 0o666 & ~umask
    assert stat.S_IMODE((tmp_path / "d").stat().st_mode) == 0o777 & ~umask


def test_atomic_directory_creates_then_replaces_whole(tmp_path):
    target = tmp_path / "model"
    with atomic_directory(target) as tmp:
        assert tmp.parent == tmp_path and not target.exists()
        (tmp / "a").write_text("1")
        (tmp / "b").write_text("1")
    assert sorted(p.name for p in target.iterdir()) == ["a", "b"]
    with atomic_directory(target) as tmp:
        (tmp / "c").write_text("2")
        assert sorted(p.name for p in target.iterdir()) == ["a", "b"]  # untouched until the block ends
    assert sorted(p.name for p in target.iterdir()) == ["c"]  # nothing of the old version mixed in
    assert _leftovers(tmp_path) == []


def test_atomic_directory_rolls_back_on_error(tmp_path):
    target = tmp_path / "model"
    with atomic_directory(target) as tmp:
        (tmp / "weights").write_text("good")
    with pytest.raises(RuntimeError):
        with atomic_directory(target) as tmp:
            (tmp / "weights").write_text("half")
            raise RuntimeError("killed mid-save")
    assert (target / "weights").read_text() == "good"
    assert _leftovers(tmp_path) == []


def test_interrupted_replace_is_recovered(tmp_path):
    """A crash between moving the old version aside and moving the new one in
    leaves `.model.old-<pid>` and no `model`; readers and the next write recover."""
    target = tmp_path / "model"
    with atomic_directory(target) as tmp:
        (tmp / "weights").write_text("good")
    os.replace(target, tmp_path / ".model.old-12345")
    assert recover_directory(target) == target
    assert (target / "weights").read_text() == "good"

    os.replace(target, tmp_path / ".model.old-12345")
    with atomic_directory(target) as tmp:
        (tmp / "weights").write_text("new")
    assert (target / "weights").read_text() == "new"
    assert _leftovers(tmp_path) == []


def test_recover_leaves_an_intact_directory_alone(tmp_path):
    target = tmp_path / "model"
    target.mkdir()
    (target / "weights").write_text("current")
    assert recover_directory(target) == target
    assert (target / "weights").read_text() == "current"
    assert recover_directory(tmp_path / "never_written") == tmp_path / "never_written"
    assert not (tmp_path / "never_written").exists()
