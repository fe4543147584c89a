"""Whole-pipeline atomic saves, for `spacy train`'s model-last.

spaCy's `Language.to_disk` writes the tokenizer, meta.json, config.cfg, each
component and the vocab in place, one after the other. `spacy train` saves
model-last that way at every evaluation, so a kill -9 during a save leaves a
model-last that either fails to load (a truncated file) or, worse, loads a mix
of two checkpoints (the components written so far from the new one, the rest
from the old one). Per-component atomic writes cannot fix that: they only turn
the truncated-file errors into more silent mixes. Only the whole directory
being replaced at once can.

spaCy's training loop calls `before_to_disk(nlp).to_disk(output / "model-last")`,
so the `[training.before_to_disk]` callback is the one hook into that save.

Loading, our trainable components name the broken file (`checked_from_disk`):
spaCy's readers report a truncated cfg or model as "Expected object or value"
or "Unpack failed: incomplete input", without a path.
"""
import functools
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, TypeVar, Union

import srsly
from spacy.language import Language
from spacy.util import ensure_path, registry

from ..errors import ModelLoadError, SpacyMlmError
from .io import atomic_directory
from .settings import INT as INT_KIND, is_kind

# The format of the `cfg` of mlm_ner, mlm_textcat, mlm_regressor and mlm_senses.
# Saves from before it was written have none and the same format: version 1.
COMPONENT_CFG_VERSION = 1

T = TypeVar("T")


def save_atomically(nlp: Language, path: Union[str, Path], *, exclude: Iterable[str] = tuple()) -> None:
    """`nlp.to_disk(path)` into a fresh directory beside `path` that then
    replaces it (`atomic_directory`): a kill leaves the previous save whole."""
    with atomic_directory(path) as tmp:
        type(nlp).to_disk(nlp, tmp, exclude=exclude)


@registry.callbacks("spacy_mlm.atomic_to_disk.v1")
def make_atomic_to_disk() -> Callable[[Language], Language]:
    """`[training.before_to_disk]` callback: the nlp's `to_disk` becomes
    `save_atomically`, so model-last is always one whole checkpoint. (spaCy
    then copies model-last to model-best with `shutil.rmtree` + `copytree`,
    which stays outside our reach; see docs/reliability.md.)"""

    def before_to_disk(nlp: Language) -> Language:
        if "to_disk" not in vars(nlp):
            nlp.to_disk = functools.partial(save_atomically, nlp)
        return nlp

    return before_to_disk


def check_saved_cfg(
    cfg_path: Union[str, Path], cfg: Any, factory: str, version: int, schema: Mapping[str, Any],
    unversioned: Optional[int] = None,
) -> None:
    """A saved component's `cfg` (read from `cfg_path`) holds a JSON object of
    the format `version` this spacy-mlm reads (`unversioned`: the version of a
    cfg saved before versions were written; None: one is required), and each
    key of `schema` it has is of the kind given there (`util.settings` kinds):
    labels edited into the string "LOC" would load, the same 3 tags long as 3
    labels, and tag everything O. A ModelLoadError names the file."""
    if not isinstance(cfg, dict):
        raise ModelLoadError(cfg_path, f"should hold a JSON object, not {type(cfg).__name__}")
    found = cfg.get("format_version", unversioned)
    if found is None:
        raise ModelLoadError(cfg_path, f"has no format_version: edited by hand, or not written by spacy-mlm's {factory}")
    if not is_kind(INT_KIND, found)[0]:
        raise ModelLoadError(
            cfg_path, f"format_version must be an integer, got {found!r}: edited by hand, or not written by spacy-mlm"
        )
    if found != version:
        newer = "a newer" if found > version else "an older"
        raise ModelLoadError(
            cfg_path, f"saved with {factory} format version {found}, but this spacy-mlm reads version {version} "
            f"({newer} spacy-mlm wrote it)"
        )
    for key, kind in schema.items():
        if key in cfg:
            ok, wanted = is_kind(kind, cfg[key])
            if not ok:
                raise ModelLoadError(
                    cfg_path, f"{key} must be {wanted}, got {cfg[key]!r}: edited by hand, or not written by {factory}"
                )


def checked_from_disk(
    path: Union[str, Path], factory: str, load: Callable[[], T], exclude: Iterable[str] = tuple(),
    schema: Mapping[str, Any] = {},
) -> T:
    """Run `load()`, a TrainablePipe's `from_disk(path)` (files `cfg` and
    `model`), with a ModelLoadError naming the directory and the file when one
    is missing or unreadable: what an interrupted save or copy leaves. The cfg
    must pass `check_saved_cfg` (version `COMPONENT_CFG_VERSION`, `schema`)."""
    path = ensure_path(path)
    missing = [name for name in ("cfg", "model") if name not in exclude and not (path / name).is_file()]
    if missing:
        raise ModelLoadError(
            path,
            f"not a complete saved {factory} component (missing {', '.join(missing)}: an interrupted save or copy?)",
        )
    if "cfg" not in exclude:
        try:
            cfg = srsly.read_json(path / "cfg")
        except ValueError as err:
            message = f"is not valid JSON ({err}): truncated by an interrupted save or copy?"
            raise ModelLoadError(path / "cfg", message) from None
        check_saved_cfg(path / "cfg", cfg, factory, COMPONENT_CFG_VERSION, schema, unversioned=1)
    try:
        return load()
    except SpacyMlmError:
        raise
    except (ValueError, EOFError) as err:
        raise ModelLoadError(
            path / "model",
            f"cannot be read ({type(err).__name__}: {err}): truncated by an interrupted save or copy, or written by "
            f"another {factory} architecture",
        ) from None


def check_outputs_fit(path: Union[str, Path], model, n_outputs: int, labels_described: str, unit: str) -> None:
    """A loaded component's `cfg` labels must be the ones its weights score:
    edited or mixed from two saves, they would load and then fail at the first
    `nlp(text)` with a tensor-size error, or give wrong scores under the wrong
    names. `labels_described` says what the cfg holds, `unit` what the weights score."""
    if model.has_dim("nO") and model.get_dim("nO") != n_outputs:
        raise ModelLoadError(
            ensure_path(path) / "cfg",
            f"has {labels_described} but the weights score {model.get_dim('nO')} {unit} "
            f"({ensure_path(path) / 'model'}): the two do not come from the same save",
        )
