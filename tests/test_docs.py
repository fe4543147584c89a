"""docs/reference.md documents every factory and registered function of
spacy_mlm (regenerate it with `docs/make_reference.py` when this fails)."""
from pathlib import Path

import spacy
from spacy.util import registry

REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "reference.md"


def registered_names():
    spacy.blank("en")  # a Language loads every spacy_factories entry point; get_all() loads the other registries
    names = [n for n, f in registry.factories.get_all().items() if f.__module__.startswith("spacy_mlm")]
    for reg in ("architectures", "readers", "augmenters", "scorers", "optimizers", "schedules", "loggers", "callbacks", "misc"):
        names += [n for n in getattr(registry, reg).get_all() if n.startswith("spacy_mlm.")]
    return names


def test_reference_lists_every_factory_and_registered_function():
    headings = {line[5:-1] for line in REFERENCE.read_text(encoding="utf8").splitlines() if line.startswith("### `")}
    names = registered_names()
    assert {"mlm_encoder", "spacy_mlm.HFEncoder.v2", "spacy_mlm.EncoderListener.v1"} <= set(names)
    missing = sorted(set(names) - headings)
    assert not missing, f"not in docs/reference.md (run docs/make_reference.py): {missing}"


def test_architecture_module_tree_is_what_the_docstrings_say():
    """The module tree of docs/ARCHITECTURE.md is generated from the module
    docstrings; a module added, moved or redescribed without regenerating it fails."""
    import importlib.util

    script = REFERENCE.parent / "make_architecture.py"
    spec = importlib.util.spec_from_file_location("make_architecture", script)
    make_architecture = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_architecture)
    text = make_architecture.ARCHITECTURE.read_text(encoding="utf8")
    assert make_architecture.write_tree(text) == text, "docs/ARCHITECTURE.md's module tree is stale: run docs/make_architecture.py"
