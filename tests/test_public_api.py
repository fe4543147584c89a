"""The public API is `spacy_mlm.__all__` plus the registered names: every
exported name exists, `import spacy_mlm` alone registers everything setup.py's
entry points name, and the benchmarks use nothing else (no submodule imports,
no `sys.path` edits), so they run against an installed package."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

import spacy_mlm

REPO = Path(__file__).resolve().parents[1]


def entry_point_modules():
    """The modules setup.py's registry entry points load (spacy_factories, thinc_schedules, ...)."""
    tree = ast.parse((REPO / "setup.py").read_text(encoding="utf8"))
    (groups,) = [ast.literal_eval(node.value) for node in ast.walk(tree)
                 if isinstance(node, ast.keyword) and node.arg == "entry_points"]
    return sorted({spec.split("=", 1)[1].strip().split(":")[0]
                   for group, specs in groups.items() if group != "console_scripts" for spec in specs})


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


def test_importing_the_package_loads_every_entry_point_module():
    modules = entry_point_modules()
    assert {"spacy_mlm.pipeline.encoder", "spacy_mlm.models.listener", "spacy_mlm.util.save"} <= set(modules)
    code = "import sys, spacy_mlm; print(' '.join(m for m in sys.argv[1:] if m not in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code, *modules], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)
    assert done.returncode == 0, done.stdout[-3000:]
    assert done.stdout.split() == [], "import spacy_mlm does not import these entry-point modules"


@pytest.mark.parametrize("path", sorted((REPO / "bench").rglob("*.py")), ids=lambda path: path.name)
def test_bench_uses_only_the_public_api(path):
    assert list(private_uses(path)) == []
