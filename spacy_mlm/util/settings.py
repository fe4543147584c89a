"""Settings checked where they are set: each factory and registered
architecture checks its settings when it is built, so `max_batch_pieces = 0`
fails while the pipeline is built, naming the setting and its value, not at
the first Doc with a message about internals.

    check_settings("spacy_mlm.HFEncoder.v2", max_batch_pieces=(max_batch_pieces, INT, ">= 1"),
                   backend=(backend, one_of("torch", "onnx")))

Each setting is (value, kind, *bounds): kind is INT, NUMBER, FLAG, TEXT, INTS, NUMBERS, TEXTS,
`optional(kind)` (None allowed) or `one_of(...)`; a bound is "OP LIMIT" with
OP one of >=, >, <=, <. The same checks read the [pretraining] section."""
import operator
from pathlib import Path
from typing import Any, Tuple, Union

from ..errors import SettingError, SpacyMlmError

INT, NUMBER, FLAG, TEXT = "an integer", "a number", "true or false", "a string"
INTS, NUMBERS, TEXTS = "a list of integers", "a list of numbers", "a list of strings"
KINDS = {
    INTS: lambda v: isinstance(v, (list, tuple)) and all(KINDS[INT](x) for x in v),
    NUMBERS: lambda v: isinstance(v, (list, tuple)) and all(KINDS[NUMBER](x) for x in v),
    TEXTS: lambda v: isinstance(v, (list, tuple)) and all(KINDS[TEXT](x) for x in v),
    INT: lambda v: isinstance(v, int) and not isinstance(v, bool),
    NUMBER: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    FLAG: lambda v: isinstance(v, bool),
    TEXT: lambda v: isinstance(v, str),
}
BOUNDS = {">=": (operator.ge, "at least"), ">": (operator.gt, "above"), "<=": (operator.le, "at most"),
          "<": (operator.lt, "below")}


class SettingValueError(SettingError):
    """A setting of a component, architecture or config section has a value of
    the wrong kind or out of its range: a `spacy_mlm.errors.SettingError` that
    names the setting and keeps it and its value."""

    def __init__(self, where: str, setting: str, value: Any, wanted: str):
        self.setting, self.value = setting, value
        super().__init__(f"{where} {setting} must be {wanted}, got {value!r}")


class one_of(tuple):
    """A kind: one of these values (strings, usually)."""

    def __new__(cls, *choices):
        return super().__new__(cls, choices)


class optional(str):
    """A kind: None or a value of the kind given."""


def is_kind(kind, value) -> Tuple[bool, str]:
    if isinstance(kind, one_of):
        return value in kind and type(value) in {type(c) for c in kind}, "one of " + ", ".join(map(str, kind))
    if isinstance(kind, optional):
        ok, wanted = is_kind(str(kind), value)
        return value is None or ok, f"null or {wanted}"
    return KINDS[kind](value), kind


def check_setting(where: str, name: str, value: Any, kind, *bounds: str) -> None:
    """Raise SettingValueError unless `value` is of `kind` and within `bounds`."""
    ok, wanted = is_kind(kind, value)
    if not ok:
        raise SettingValueError(where, name, value, wanted)
    if value is None:
        return
    parsed = [(BOUNDS[op], float(limit)) for op, limit in (bound.split() for bound in bounds)]
    if not all(compare(value, limit) for (compare, _), limit in parsed):
        raise SettingValueError(where, name, value, " and ".join(f"{words} {limit:g}" for (_, words), limit in parsed))


def check_settings(where: str, **settings: tuple) -> None:
    """`check_setting` for each name=(value, kind, *bounds); `where` names what
    is being built (a factory or an architecture)."""
    for name, (value, kind, *bounds) in settings.items():
        check_setting(where, name, value, kind, *bounds)


def read_config_file(path: Union[str, Path]):
    """The uninterpolated thinc Config of a config file (one that is not a
    pipeline's: [pretraining], [distillation]), or a SpacyMlmError naming the file."""
    from thinc.api import Config

    path = Path(path)
    if not path.is_file():
        raise SpacyMlmError(f"{path}: config file not found")
    try:
        # a byte-order mark (Windows editors write one) is not part of the first section header
        return Config().from_str(path.read_text(encoding="utf-8-sig"), interpolate=False)
    except Exception as err:
        raise SpacyMlmError(f"{path}: cannot parse the config ({err})") from None
