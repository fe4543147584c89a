"""Every error spacy_mlm raises on purpose is a `SpacyMlmError` (spacy_mlm/errors.py:
a setting, data, a data file, a model file, ...), so a caller can tell what spacy_mlm
refused from a failure inside torch or spaCy, and catch it as a ValueError as before."""
import ast
from collections import Counter
from pathlib import Path

from spacy_mlm.errors import DataError, DataFormatError, InstallationError, SettingError, SpacyMlmError

PACKAGE = Path(__file__).resolve().parents[1] / "spacy_mlm"
BUILTIN = {"ValueError", "TypeError", "RuntimeError", "KeyError", "IndexError", "Exception"}
# Files allowed to raise a built-in error on purpose, and how many times (none).
NOT_YET = {}


def builtin_raises():
    """{file relative to the package: how many `raise <builtin error>(...)` it has}."""
    found = Counter()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf8"))):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                if isinstance(node.exc.func, ast.Name) and node.exc.func.id in BUILTIN:
                    found[path.relative_to(PACKAGE).as_posix()] += 1
    return found


def test_no_builtin_error_is_raised_on_purpose():
    found = builtin_raises()
    assert {file: n for file, n in found.items() if n > NOT_YET.get(file, 0)} == {}


def test_the_families_are_spacy_mlm_errors_and_value_errors():
    for family in (SettingError, DataError, DataFormatError, InstallationError):
        assert issubclass(family, SpacyMlmError) and issubclass(family, ValueError)
    assert issubclass(DataFormatError, DataError)
