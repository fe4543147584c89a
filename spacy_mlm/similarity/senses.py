"""Sense inventory: one centroid per (word, sense) built from labeled examples,
and nearest-centroid sense assignment.

A word's senses are only compared with each other (the key is usually the
lemma), so "bank" in a river context is scored against the centroids of
"bank"'s senses, never against those of "shore". Sums and counts are kept rather
than means so an inventory can grow with more examples after loading.
"""
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple, Union

import numpy
import srsly

from ..errors import ModelLoadError, SpacyMlmError
from ..util.io import atomic_write_bytes

FORMAT_VERSION = 1


@dataclass(frozen=True)
class SenseAssignment:
    sense: str
    score: float  # cosine between the vector and the sense centroid


def _unit_rows(X: numpy.ndarray) -> numpy.ndarray:
    norms = numpy.linalg.norm(X, axis=-1, keepdims=True)
    return X / numpy.where(norms == 0, 1.0, norms)


class _Entry:
    def __init__(self, width: int):
        self.senses: List[str] = []
        self.sums = numpy.zeros((0, width), dtype="float64")
        self.counts = numpy.zeros((0,), dtype="int64")

    def add(self, sense: str, vector: numpy.ndarray) -> None:
        if sense not in self.senses:
            self.senses.append(sense)
            self.sums = numpy.vstack([self.sums, numpy.zeros((1, self.sums.shape[1]))])
            self.counts = numpy.append(self.counts, 0)
        i = self.senses.index(sense)
        self.sums[i] += vector
        self.counts[i] += 1

    @property
    def centroids(self) -> numpy.ndarray:
        return self.sums / self.counts[:, None]


class SenseInventory:
    def __init__(self) -> None:
        self._entries: Dict[str, _Entry] = {}
        self.width: Optional[int] = None

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    @property
    def keys(self) -> List[str]:
        return list(self._entries)

    def senses(self, key: str) -> List[str]:
        return list(self._entries[key].senses) if key in self._entries else []

    def count(self, key: str, sense: str) -> int:
        entry = self._entries[key]
        return int(entry.counts[entry.senses.index(sense)])

    def centroid(self, key: str, sense: str) -> numpy.ndarray:
        entry = self._entries[key]
        return entry.centroids[entry.senses.index(sense)].astype("float32")

    def add(self, key: str, sense: str, vector) -> None:
        vector = numpy.asarray(vector, dtype="float64")
        if vector.ndim != 1:
            raise SpacyMlmError(f"a sense example needs one vector, got shape {vector.shape}")
        if self.width is None:
            self.width = int(vector.shape[0])
        elif vector.shape[0] != self.width:
            raise SpacyMlmError(f"sense vectors have width {self.width}, got width {vector.shape[0]}")
        if not numpy.any(vector):
            raise SpacyMlmError(f"zero vector for sense {sense!r} of {key!r}: the word got no encoder pieces")
        self._entries.setdefault(key, _Entry(self.width)).add(sense, vector)

    def add_examples(self, examples: Iterable[Tuple[str, str, numpy.ndarray]]) -> None:
        for key, sense, vector in examples:
            self.add(key, sense, vector)

    def assign(self, key: str, vector) -> Optional[SenseAssignment]:
        """Nearest sense of `key` by cosine, or None when `key` has no senses
        or the vector is zero."""
        entry = self._entries.get(key)
        vector = numpy.asarray(vector, dtype="float64")
        if entry is None or not numpy.any(vector):
            return None
        if vector.shape[-1] != self.width:
            raise SpacyMlmError(f"sense vectors have width {self.width}, got width {vector.shape[-1]}")
        scores = _unit_rows(entry.centroids) @ _unit_rows(vector)
        best = int(numpy.argmax(scores))
        return SenseAssignment(entry.senses[best], float(scores[best]))

    def to_bytes(self) -> bytes:
        entries = {
            key: {"senses": e.senses, "sums": e.sums, "counts": e.counts} for key, e in self._entries.items()
        }
        return srsly.msgpack_dumps({"format": FORMAT_VERSION, "width": self.width, "entries": entries})

    @classmethod
    def from_bytes(cls, data: bytes) -> "SenseInventory":
        inventory = cls()
        try:
            msg = srsly.msgpack_loads(data)
            if msg.get("format") != FORMAT_VERSION:
                raise SpacyMlmError(f"unknown format version {msg.get('format')!r}")
            inventory.width = msg["width"]
            for key, raw in msg["entries"].items():
                entry = _Entry(inventory.width)
                entry.senses = list(raw["senses"])
                entry.sums = numpy.array(raw["sums"], dtype="float64").reshape(-1, inventory.width)
                entry.counts = numpy.array(raw["counts"], dtype="int64")
                if not (len(entry.senses) == entry.sums.shape[0] == entry.counts.shape[0]):
                    raise SpacyMlmError(f"entry {key!r} has mismatched senses/sums/counts")
                inventory._entries[key] = entry
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise SpacyMlmError(f"not a serialized SenseInventory: {err}") from err
        return inventory

    def to_disk(self, path: Union[str, Path]) -> None:
        atomic_write_bytes(path, self.to_bytes())

    @classmethod
    def from_disk(cls, path: Union[str, Path]) -> "SenseInventory":
        path = Path(path)
        if not path.is_file():
            raise ModelLoadError(path, "sense inventory file not found")
        try:
            return cls.from_bytes(path.read_bytes())
        except SpacyMlmError as err:
            raise ModelLoadError(path, str(err)) from err
