"""The errors users see, each naming what was wrong and where, so a bad file or
model can be fixed without reading a stack trace from deep inside torch."""
import unicodedata
from pathlib import Path
from typing import Optional, Union

# Characters a terminal shows as a space or not at all (no-break and other
# spaces, line and paragraph separators, zero-width and format characters,
# controls): in a message about a data file they are the likely cause, so
# they are shown by code point, e.g. <U+00A0>.
HIDDEN_CATEGORIES = ("Zs", "Zl", "Zp", "Cf", "Cc")


def show_invisible(text: str) -> str:
    """`text` with every hidden character but space, tab and newline as <U+XXXX>."""
    return "".join(
        f"<U+{ord(c):04X}>" if c not in " \t\n" and unicodedata.category(c) in HIDDEN_CATEGORIES else c for c in text
    )


class SpacyMlmError(ValueError):
    """Base class: every error raised on purpose by spacy_mlm. A ValueError, so
    spaCy's and confection's config resolution, and callers that caught the
    ValueErrors these once were, still handle it."""


class SettingError(SpacyMlmError):
    """A setting (a config value, an argument of a registered function or of the
    API) is unknown, out of range or conflicts with another; the message names
    the setting and the value it got."""


class DataError(SpacyMlmError):
    """Data does not fit what it is used with: gold and predicted of different
    lengths, labels outside the label set, characters that cover no token.
    `DataFormatError` is the case of a data file, with its path and line."""


class InstallationError(SpacyMlmError):
    """spacy_mlm runs from a source folder that is not installed, so what it
    ships as package data (the project, the configs) cannot be found."""


class DataFormatError(DataError):
    """A data file does not have the expected format."""

    def __init__(self, path: Union[str, Path], line: Optional[int], message: str):
        self.path = str(path)
        self.line = line
        where = f"{self.path}, line {line}" if line is not None else self.path
        super().__init__(show_invisible(f"{where}: {message}"))


class ModelLoadError(SpacyMlmError):
    """A model directory or weight file is missing, broken or foreign."""

    def __init__(self, path: Union[str, Path], message: str):
        self.path = str(path)
        super().__init__(f"{self.path}: {message}")


class NotInitializedError(SpacyMlmError):
    """A component was used before `nlp.initialize()` or `from_disk` gave it weights."""
