"""Errors users see. Each names what was wrong and where, so a bad file or model
can be fixed without reading a stack trace from deep inside torch."""
from pathlib import Path
from typing import Optional, Union


class SpacyMlmError(ValueError):
    """Base class: every error raised on purpose by spacy_mlm."""


class DataFormatError(SpacyMlmError):
    """A data file does not have the expected format."""

    def __init__(self, path: Union[str, Path], line: Optional[int], message: str):
        self.path = str(path)
        self.line = line
        where = f"{self.path}, line {line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


class ModelLoadError(SpacyMlmError):
    """A model directory or weight file is missing, broken or foreign."""

    def __init__(self, path: Union[str, Path], message: str):
        self.path = str(path)
        super().__init__(f"{self.path}: {message}")


class NotInitializedError(SpacyMlmError):
    """A component was used before `nlp.initialize()` or `from_disk` gave it weights."""
