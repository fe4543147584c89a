import numpy
import pytest

from spacy_mlm.errors import ModelLoadError, SpacyMlmError
from spacy_mlm.similarity.senses import SenseInventory


def inventory():
    inv = SenseInventory()
    inv.add("bank", "river", [1.0, 0.1, 0.0])
    inv.add("bank", "river", [0.8, -0.1, 0.0])
    inv.add("bank", "money", [0.0, 1.0, 0.2])
    inv.add("play", "music", [0.0, 0.0, 1.0])
    return inv


def test_centroids_are_means():
    inv = inventory()
    assert inv.senses("bank") == ["river", "money"]
    assert inv.count("bank", "river") == 2
    numpy.testing.assert_allclose(inv.centroid("bank", "river"), [0.9, 0.0, 0.0])
    assert len(inv) == 2 and "play" in inv and "shore" not in inv


def test_nearest_sense_with_cosine_score():
    inv = inventory()
    got = inv.assign("bank", [0.1, 2.0, 0.3])
    assert got.sense == "money"
    centroid = numpy.array([0.0, 1.0, 0.2])
    v = numpy.array([0.1, 2.0, 0.3])
    assert got.score == pytest.approx(v @ centroid / numpy.linalg.norm(v) / numpy.linalg.norm(centroid))
    assert inv.assign("bank", [5.0, 0.0, 0.1]).sense == "river"


def test_senses_compared_only_within_key():
    inv = inventory()
    # Closest centroid overall is play/music, but only bank's senses compete.
    assert inv.assign("bank", [0.0, 0.1, 1.0]).sense == "money"
    assert inv.assign("shore", [1.0, 0.0, 0.0]) is None
    assert inv.assign("bank", [0.0, 0.0, 0.0]) is None


def test_width_and_zero_vector_errors():
    inv = inventory()
    with pytest.raises(SpacyMlmError, match="width 3"):
        inv.add("bank", "river", [1.0, 2.0])
    with pytest.raises(SpacyMlmError, match="zero vector"):
        inv.add("bank", "river", [0.0, 0.0, 0.0])
    with pytest.raises(SpacyMlmError, match="width 3"):
        inv.assign("bank", [1.0, 2.0])


def test_save_load_and_keep_adding(tmp_path):
    inv = inventory()
    path = tmp_path / "senses.bin"
    inv.to_disk(path)
    again = SenseInventory.from_disk(path)
    assert again.keys == ["bank", "play"] and again.width == 3
    numpy.testing.assert_allclose(again.centroid("bank", "river"), inv.centroid("bank", "river"))
    assert again.assign("bank", [0.1, 2.0, 0.3]) == inv.assign("bank", [0.1, 2.0, 0.3])
    again.add("bank", "river", [1.1, 0.0, 0.0])
    assert again.count("bank", "river") == 3
    numpy.testing.assert_allclose(again.centroid("bank", "river"), [0.9667, 0.0, 0.0], atol=1e-3)
    assert SenseInventory.from_bytes(SenseInventory().to_bytes()).keys == []


def test_broken_file(tmp_path):
    bad = tmp_path / "senses.bin"
    bad.write_bytes(b"nope")
    with pytest.raises(ModelLoadError, match="senses.bin"):
        SenseInventory.from_disk(bad)
