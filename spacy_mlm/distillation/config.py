"""The distillation config: a spaCy-style config file with a [distillation] section.

A user config names only what it changes: it is merged over DEFAULT_CONFIG, an
unknown setting is an error naming it (a typo would otherwise be ignored), then
`--section.key value` overrides apply as in `spacy train`; each value is checked
for its kind and range.
"""
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

from thinc.api import Config

from ..errors import SpacyMlmError
from ..engine.checkpoint import flat_settings
from ..training.config_templates import distillation_defaults
from ..util.settings import FLAG, INT, INTS, NUMBER, TEXT, TEXTS, check_setting, one_of, optional, read_config_file

DEFAULT_CONFIG = distillation_defaults()

TEACHER_PRECISIONS = ("fp32", "bf16", "int8")
# setting -> its kind and the bounds its value must keep (teacher, texts: checked in `paths_of`)
LIMITS = {
    "text_field": (TEXT,), "file_format": (one_of("auto", "text", "jsonl"),), "gold": (optional(TEXT),),
    "seed": (INT,), "max_steps": (INT, ">= 1"), "batch_size": (INT, ">= 1"), "temperature": (NUMBER, "> 0"),
    "soft_weight": (NUMBER, ">= 0"), "gold_weight": (NUMBER, ">= 0"), "hidden_weight": (NUMBER, ">= 0"),
    "teacher_precision": (one_of(*TEACHER_PRECISIONS),), "cache_teacher": (FLAG,),
    "checkpoint_every": (INT, ">= 0"), "keep_checkpoints": (INT, ">= 0"), "log_every": (INT, ">= 1"),
    "student.layers": (optional(INTS),), "student.keep_every": (INT, ">= 1"), "student.encoder": (optional(TEXT),),
    "student.intermediate_size": (optional(INT), ">= 1"), "student.attention_heads": (optional(INT), ">= 1"),
    "optimizer.learning_rate": (NUMBER, "> 0"), "optimizer.weight_decay": (NUMBER, ">= 0"),
    "optimizer.beta1": (NUMBER, ">= 0", "< 1"), "optimizer.beta2": (NUMBER, ">= 0", "< 1"),
    "optimizer.eps": (NUMBER, "> 0"), "optimizer.warmup_steps": (INT, ">= 0"),
    "optimizer.max_grad_norm": (NUMBER, "> 0"),
}


def load_distillation_config(path: Optional[Union[str, Path]] = None,
                             overrides: Optional[Dict[str, Any]] = None) -> Config:
    """The interpolated config: defaults <- the file at `path` <- `overrides`."""
    defaults = Config().from_str(DEFAULT_CONFIG, interpolate=False)
    user = Config() if path is None else read_config_file(path)
    _refuse_unknown(user, defaults)
    try:
        config = Config().from_str(defaults.merge(user).to_str(), overrides=overrides or {}, interpolate=True)
    except Exception as err:
        raise SpacyMlmError(f"invalid config or override: {err}") from None
    _refuse_unknown(config, defaults)  # an override may have added one
    check_values(config["distillation"])
    return config


def _refuse_unknown(config: Config, defaults: Config) -> None:
    known = {key for part in defaults for key in flat_settings(dict(defaults[part]), part)}
    for part in config:
        for key in flat_settings(dict(config[part]), part):
            if key not in known:
                raise SpacyMlmError(f"unknown setting {key} (the [distillation] settings: docs/distillation.md)")


def paths_of(section: Dict[str, Any], name: str) -> List[str]:
    """A setting that names one path or a list of them, as a list; an error names it when unset."""
    value = section[name]
    if value is None or value == []:
        raise SpacyMlmError(f"[distillation] {name} is not set: give it in the config or as --paths.{name} PATH")
    check_setting("[distillation]", name, value, TEXT if isinstance(value, str) else TEXTS)
    return [value] if isinstance(value, str) else list(value)


def check_values(section: Dict[str, Any]) -> None:
    """Each [distillation] setting of its kind and in its range."""
    for name, (kind, *bounds) in LIMITS.items():
        *parents, key = name.split(".")
        value = section
        for parent in parents:
            value = value[parent]
        check_setting(f"[distillation{''.join('.' + p for p in parents)}]", key, value[key], kind, *bounds)
    student = section["student"]
    if student["layers"] is not None and student["encoder"] is not None:
        raise SpacyMlmError("[distillation.student] give layers (kept from the teacher) or encoder, not both")
    if student["layers"] is not None and len(set(student["layers"])) != len(student["layers"]):
        raise SpacyMlmError(f"[distillation.student] layers lists a layer twice: {student['layers']}")
