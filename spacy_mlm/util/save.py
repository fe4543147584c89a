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
from typing import Callable, Iterable, TypeVar, Union

import srsly
from spacy.language import Language
from spacy.util import ensure_path, registry

from ..errors import ModelLoadError, SpacyMlmError
from .io import atomic_directory

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


def checked_from_disk(
    path: Union[str, Path], factory: str, load: Callable[[], T], exclude: Iterable[str] = tuple()
) -> T:
    """Run `load()`, a TrainablePipe's `from_disk(path)` (files `cfg` and
    `model`), with a ModelLoadError naming the directory and the file when one
    is missing or unreadable: what an interrupted save or copy leaves."""
    path = ensure_path(path)
    missing = [name for name in ("cfg", "model") if name not in exclude and not (path / name).is_file()]
    if missing:
        raise ModelLoadError(
            path,
            f"not a complete saved {factory} component (missing {', '.join(missing)}: an interrupted save or copy?)",
        )
    try:
        if "cfg" not in exclude:
            srsly.read_json(path / "cfg")
    except ValueError as err:
        message = f"is not valid JSON ({err}): truncated by an interrupted save or copy?"
        raise ModelLoadError(path / "cfg", message) from None
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
