"""A real pickle payload for the tests that plant one: unpickled by anything
but a weights-only loader, it creates a file, so a test can tell that it ran."""
from pathlib import Path


class LeavesAMarker:
    """Pickled as a call of Path.touch(marker)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return Path.touch, (self.marker,)
