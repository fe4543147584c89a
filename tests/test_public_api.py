"""The public API is `spacy_mlm.__all__` plus the registered names: every
exported name exists and loads on first use, `import spacy_mlm` itself imports
none of the package's modules (nor torch, transformers, spaCy), every name the
code registers has its entry point in setup.py (and nothing else does), spaCy
finds them all through those entry points in a process that never imports
spacy_mlm, and the benchmarks use nothing but the public API (no submodule
imports, no `sys.path` edits), so they run against an installed package."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

import spacy_mlm

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "spacy_mlm"
# registered through `@Language.factory`; spaCy reads this group for factories
FACTORY_GROUP = "spacy_factories"


def setup_entry_points():
    """setup.py's registry entry points as {(group, name): "module:function"} (console_scripts left out)."""
    tree = ast.parse((REPO / "setup.py").read_text(encoding="utf8"))
    (groups,) = [ast.literal_eval(node.value) for node in ast.walk(tree)
                 if isinstance(node, ast.keyword) and node.arg == "entry_points"]
    points = {}
    for group, specs in groups.items():
        if group != "console_scripts":
            for spec in specs:
                name, target = (part.strip() for part in spec.split("=", 1))
                points[group, name] = target
    return points


def registry_group(decorator: ast.expr):
    """The entry-point group of `@registry.X("...")` (the registry's own namespace: spacy_architectures,
    thinc_optimizers, ...), of `@srsly.msgpack_encoders("...")` / `msgpack_decoders` or of
    `@Language.factory("...")`; None for any other decorator."""
    from spacy.util import registry

    if not (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute)
            and isinstance(decorator.func.value, ast.Name)):
        return None
    owner, attribute = decorator.func.value.id, decorator.func.attr
    if owner == "Language" and attribute == "factory":
        return FACTORY_GROUP
    if owner == "registry":
        return getattr(registry, attribute).entry_point_namespace
    if owner == "srsly":  # srsly's msgpack codecs
        import srsly

        return getattr(srsly, attribute).entry_point_namespace
    return None


def declared_registrations():
    """What the package's decorators register, as setup_entry_points() writes it."""
    declared = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(REPO).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf8"))):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                for decorator in node.decorator_list:
                    group = registry_group(decorator)
                    if group is not None:
                        declared[group, ast.literal_eval(decorator.args[0])] = f"{module}:{node.name}"
    return declared


def private_uses(path: Path):
    """What `path` uses of spacy_mlm beyond `__all__`, and any `sys.path` use."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "spacy_mlm":
            if node.module != "spacy_mlm":
                yield f"line {node.lineno}: from {node.module} import ..."
            yield from (f"line {node.lineno}: from spacy_mlm import {alias.name}"
                        for alias in node.names if alias.name not in spacy_mlm.__all__)
        elif isinstance(node, ast.Import):
            yield from (f"line {node.lineno}: import {alias.name}"
                        for alias in node.names if alias.name.startswith("spacy_mlm."))
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "spacy_mlm" and node.attr not in spacy_mlm.__all__:
                yield f"line {node.lineno}: spacy_mlm.{node.attr}"
            if node.value.id == "sys" and node.attr == "path":
                yield f"line {node.lineno}: sys.path"


def test_every_exported_name_exists():
    assert [name for name in spacy_mlm.__all__ if not hasattr(spacy_mlm, name)] == []
    assert len(set(spacy_mlm.__all__)) == len(spacy_mlm.__all__)
    assert spacy_mlm.PretrainingExample.__name__ == "Example"
    assert set(spacy_mlm.__all__) <= set(dir(spacy_mlm))
    with pytest.raises(AttributeError, match="no_such_name"):
        spacy_mlm.no_such_name


def run_python(code: str, *args: str) -> str:
    """Run `code` in a fresh interpreter outside the checkout (so only the installed package is found)."""
    done = subprocess.run([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, cwd="/")
    assert done.returncode == 0, done.stdout[-3000:]
    return done.stdout


def test_importing_the_package_imports_none_of_its_modules():
    code = "import sys, spacy_mlm; print(' '.join(m for m in sys.modules if m.split('.')[0] in " \
           "('spacy_mlm', 'torch', 'transformers', 'spacy', 'thinc', 'numpy')))"
    assert run_python(code).split() == ["spacy_mlm"]


def test_every_registered_name_has_its_entry_point():
    declared, points = declared_registrations(), setup_entry_points()
    assert (FACTORY_GROUP, "mlm_encoder") in declared and ("thinc_optimizers", "spacy_mlm.LayerDecayAdam.v2") in declared
    assert {key: target for key, target in declared.items() if points.get(key) != target} == {}, \
        "registered in the code, without this entry point in setup.py"
    assert {key: target for key, target in points.items() if declared.get(key) != target} == {}, \
        "an entry point in setup.py that no decorator registers"


FRESH_PROCESS = """
import sys, spacy, srsly
from spacy.util import registry
nlp = spacy.blank("en")  # a Language imports every spacy_factories entry point
nlp.add_pipe("mlm_ner")
for spec in sys.argv[2:]:
    group, name, target = spec.split(" ")
    if group == "spacy_factories":
        found = registry.factories.get(name)  # what the decorator registered
    elif group.startswith("srsly_"):  # srsly's msgpack codecs
        found = getattr(srsly, group[len("srsly_"):]).get(name)
    else:
        (found,) = [getattr(registry, attribute).get(name) for attribute in registry.get_registry_names()
                    if getattr(registry, attribute).entry_point_namespace == group]
    assert f"{found.__module__}:{found.__qualname__}" == target, (spec, found)
nlp = spacy.load(sys.argv[1])
nlp("Ada Lovelace met Charles Babbage in London.")
print(",".join(nlp.pipe_names))
"""


def test_spacy_finds_every_name_through_the_entry_points_alone(tiny_model_dir, tmp_path):
    """A process that never imports spacy_mlm adds mlm_ner (with its default listener), resolves every
    factory and registered function to the function setup.py names, and loads and runs a saved pipeline."""
    import spacy
    from spacy.training import Example

    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(tiny_model_dir)}})
    nlp.add_pipe("mlm_ner")
    nlp.initialize(lambda: [Example.from_dict(nlp.make_doc("Ada met Bob"), {"entities": [(0, 3, "PER")]})])
    nlp.to_disk(tmp_path / "pipeline")
    specs = [f"{group} {name} {target}" for (group, name), target in setup_entry_points().items()]
    assert run_python(FRESH_PROCESS, str(tmp_path / "pipeline"), *specs).split()[-1] == "mlm_encoder,mlm_ner"


@pytest.mark.parametrize("path", sorted((REPO / "bench").rglob("*.py")), ids=lambda path: path.name)
def test_bench_uses_only_the_public_api(path):
    assert list(private_uses(path)) == []
