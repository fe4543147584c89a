"""Write docs/reference.md from the code: every pipeline factory (with its
default config) and every registered function (architectures, readers, scorers,
optimizers, schedules, loggers, callbacks, misc) of spacy_mlm, with arguments, defaults and docstrings, so the
reference cannot drift from what spaCy actually resolves.

    .venv/bin/python docs/make_reference.py
"""
import inspect
from pathlib import Path

import spacy
from spacy.language import Language
from spacy.util import registry
from thinc.api import Config

spacy.blank("en")  # a Language loads every spacy_factories entry point; the other registries load theirs in get_all()

REGISTRIES = [
    ("architectures", "Architectures", "@architectures"),
    ("readers", "Corpus readers", "@readers"),
    ("augmenters", "Corpus augmenters", "@augmenters"),
    ("scorers", "Scorers", "@scorers"),
    ("optimizers", "Optimizers", "@optimizers"),
    ("schedules", "Learning-rate schedules", "@schedules"),
    ("loggers", "Training loggers", "@loggers"),
    ("callbacks", "Training callbacks", "@callbacks"),
    ("misc", "Other registered functions", "@misc"),
]
HEADER = """# Reference: factories and registered functions

Generated from the code by `docs/make_reference.py` (rerun it after changing a
factory or a registered function). spaCy finds every name through the
package's entry points (`spacy.load`, `spacy train`, configs): no import needed.

"""


def ours(func) -> bool:
    return getattr(func, "__module__", "").startswith("spacy_mlm")


def doc_of(func) -> str:
    return inspect.cleandoc(func.__doc__ or "(no docstring)")


def argument_table(func, skip=(), config_defaults=None) -> str:
    """Arguments with their defaults: the signature's, or for a factory the
    values of its default config (nested blocks are shown in the config below)."""
    rows = ["| argument | type | default |", "|---|---|---|"]
    for name, param in inspect.signature(func).parameters.items():
        if name in skip:
            continue
        annotation = "" if param.annotation is inspect.Parameter.empty else inspect.formatannotation(param.annotation)
        if config_defaults is not None and name in config_defaults:
            value = config_defaults[name]
            default = "see the default config" if isinstance(value, dict) else f"`{value!r}`"
        else:
            default = "required" if param.default is inspect.Parameter.empty else f"`{param.default!r}`"
        rows.append(f"| `{name}` | `{annotation}` | {default} |".replace("`typing.", "`"))
    return "\n".join(rows)


def factories() -> str:
    parts = ["## Pipeline components (factories)\n"]
    for name in sorted(registry.factories.get_all()):
        if name.startswith("spacy.") or not ours(registry.factories.get(name)):
            continue
        meta = Language.get_factory_meta(name)
        func = registry.factories.get(name)
        config = Config({"components": {"NAME": {"factory": name, **meta.default_config}}}).to_str()
        parts.append(f"### `{name}`\n\n`nlp.add_pipe(\"{name}\")` — `{func.__module__}.{func.__name__}`\n")
        parts.append(doc_of(func) + "\n")
        parts.append(argument_table(func, skip=("nlp", "name"), config_defaults=meta.default_config) + "\n")
        parts.append(f"Default config:\n\n```ini\n{config.strip()}\n```\n")
        if meta.assigns:
            parts.append(f"Assigns: {', '.join(f'`{a}`' for a in meta.assigns)}.  ")
        if meta.requires:
            parts.append(f"Requires: {', '.join(f'`{a}`' for a in meta.requires)}.  ")
        if meta.default_score_weights:
            weights = ", ".join(f"`{k}` {v}" for k, v in meta.default_score_weights.items() if v is not None)
            parts.append(f"Score weights: {weights or 'none'}.")
        parts.append("\n")
    return "\n".join(parts)


def functions(reg_name: str, title: str, key: str) -> str:
    reg = getattr(registry, reg_name)
    names = sorted(n for n, f in reg.get_all().items() if n.startswith("spacy_mlm.") and ours(f))
    if not names:
        return ""
    parts = [f"## {title}\n"]
    for name in names:
        func = reg.get(name)
        parts.append(f"### `{name}`\n\n`{key} = \"{name}\"` — `{func.__module__}.{func.__name__}`\n")
        parts.append(doc_of(func) + "\n")
        parts.append(argument_table(func) + "\n")
    return "\n".join(parts)


def main() -> None:
    text = HEADER + factories() + "".join(functions(*entry) for entry in REGISTRIES)
    path = Path(__file__).resolve().parent / "reference.md"
    path.write_text(text.rstrip() + "\n", encoding="utf8")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
