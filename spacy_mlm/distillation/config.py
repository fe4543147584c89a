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
from ..pretraining.checkpoint import flat_settings
from ..util.settings import FLAG, INT, INTS, NUMBER, TEXT, TEXTS, check_setting, one_of, optional

DEFAULT_CONFIG = """
[paths]
teacher = null
texts = null
gold = null

[distillation]
# a trained pipeline directory, or a list of them (an ensemble: their soft outputs are averaged);
# every teacher has the same components and labels
teacher = ${paths.teacher}
# unlabelled text: a file or directory as `pretrain` reads it (plain text: one segment a line;
# JSONL: text_field), or a list of them; each segment is one Doc
texts = ${paths.texts}
text_field = "text"
file_format = "auto"
# optional labelled .spacy data: its Docs are distilled too, and add the components' gold loss
gold = ${paths.gold}
seed = 0
max_steps = 1000
# Docs per optimizer step (unlabelled and labelled together)
batch_size = 32
# soft targets at this temperature; the soft loss is KL(teacher || student) x temperature^2
temperature = 2.0
soft_weight = 1.0
# weight of the components' own loss on the gold Docs (with `gold` only)
gold_weight = 1.0
# weight of the mean squared difference of the top hidden states (student and teacher of one width)
hidden_weight = 0.0
# the teachers run as fp32 (torch), bf16 (torch autocast: CPUs with AVX512-BF16/AMX, GPUs) or
# int8 (ONNX Runtime dynamic int8, CPU)
teacher_precision = "fp32"
# keep the teachers' outputs on disk (output_dir/teacher_cache, safetensors) for later epochs
cache_teacher = false
checkpoint_every = 200
keep_checkpoints = 2
log_every = 10

[distillation.student]
# the teacher's transformer layers the student keeps (0 = the first), e.g. [1, 3, 5]
layers = null
# with layers = null: every k-th layer counted down from the top one (k = 2 of 6 keeps 1, 3, 5)
keep_every = 2
# instead: another local Hugging Face encoder with the teacher's tokenizer (its heads start
# afresh when its width differs from the teacher's)
encoder = null

[distillation.optimizer]
learning_rate = 0.0001
weight_decay = 0.01
beta1 = 0.9
beta2 = 0.999
eps = 0.000001
warmup_steps = 100
max_grad_norm = 1.0
"""

TEACHER_PRECISIONS = ("fp32", "bf16", "int8")
# setting -> its kind and the bounds its value must keep (teacher, texts: checked in `paths_of`)
LIMITS = {
    "text_field": (TEXT,), "file_format": (one_of("auto", "text", "jsonl"),), "gold": (optional(TEXT),),
    "seed": (INT,), "max_steps": (INT, ">= 1"), "batch_size": (INT, ">= 1"), "temperature": (NUMBER, "> 0"),
    "soft_weight": (NUMBER, ">= 0"), "gold_weight": (NUMBER, ">= 0"), "hidden_weight": (NUMBER, ">= 0"),
    "teacher_precision": (one_of(*TEACHER_PRECISIONS),), "cache_teacher": (FLAG,),
    "checkpoint_every": (INT, ">= 0"), "keep_checkpoints": (INT, ">= 0"), "log_every": (INT, ">= 1"),
    "student.layers": (optional(INTS),), "student.keep_every": (INT, ">= 1"), "student.encoder": (optional(TEXT),),
    "optimizer.learning_rate": (NUMBER, "> 0"), "optimizer.weight_decay": (NUMBER, ">= 0"),
    "optimizer.beta1": (NUMBER, ">= 0", "< 1"), "optimizer.beta2": (NUMBER, ">= 0", "< 1"),
    "optimizer.eps": (NUMBER, "> 0"), "optimizer.warmup_steps": (INT, ">= 0"),
    "optimizer.max_grad_norm": (NUMBER, "> 0"),
}


def load_distillation_config(path: Optional[Union[str, Path]] = None,
                             overrides: Optional[Dict[str, Any]] = None) -> Config:
    """The interpolated config: defaults <- the file at `path` <- `overrides`."""
    defaults = Config().from_str(DEFAULT_CONFIG, interpolate=False)
    user = Config()
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise SpacyMlmError(f"{path}: config file not found")
        try:
            user = Config().from_str(path.read_text(encoding="utf-8-sig"), interpolate=False)
        except Exception as err:
            raise SpacyMlmError(f"{path}: cannot parse the config ({err})") from None
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
