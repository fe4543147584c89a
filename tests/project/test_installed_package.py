"""The package as pip installs it carries the spaCy project and its configs:
an sdist of the repository, a wheel built from that sdist, and `spacy_mlm demo`'s
unpacking run from the unzipped wheel (not the checkout) give exactly the
project files and configs of the checkout, and none of what a project run
writes next to them."""
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from spacy_mlm.cli.demo import SHIPPED, packaged_trees, shipped_files

REPO = Path(__file__).resolve().parents[2]
# What a project run writes inside project/: planted in the copy that is built,
# they must stay out of the package.
RUN_OUTPUTS = ("assets/conll2003/train.txt", "corpus/ner_train.spacy", "training/ner/meta.json",
               "metrics/ner/metrics.json", "packages/dist.tar.gz", "project.lock")
UNPACK_FROM_WHEEL = """
import json, sys
from pathlib import Path
import spacy_mlm
from spacy_mlm.cli.demo import unpack_project
project = unpack_project(Path(sys.argv[1]))
files = sorted(str(p.relative_to(project.parent)) for p in project.parent.rglob("*") if p.is_file())
print(json.dumps({"package": spacy_mlm.__file__, "project": str(project), "files": files}))
"""


def run(command, cwd, **kwargs):
    done = subprocess.run(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kwargs)
    assert done.returncode == 0, done.stdout[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def checkout_files():
    """{'project/scripts/convert.py': bytes, ...}: the shipped files as the
    installed (here: editable) package finds them in the checkout."""
    return {f"{name}/{relative}": node.read_bytes()
            for name, tree in packaged_trees().items() for relative, node in shipped_files(tree, SHIPPED[name])}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    pytest.importorskip("setuptools", reason="building the sdist and wheel without network needs setuptools here")
    source = tmp_path_factory.mktemp("source")
    run_outputs = {Path(output).parts[0] for output in RUN_OUTPUTS}

    def skip(folder, names):
        return [name for name in names if name == "__pycache__" or name.endswith(".pyc")
                or (Path(folder) == REPO / "project" and name in run_outputs)]

    for name in ("setup.py", "README.md"):
        shutil.copy(REPO / name, source / name)
    for name in ("spacy_mlm", "project", "configs"):
        shutil.copytree(REPO / name, source / name, ignore=skip)
    for output in RUN_OUTPUTS:
        (source / "project" / output).parent.mkdir(parents=True, exist_ok=True)
        (source / "project" / output).write_text("a run output\n")
    dist = tmp_path_factory.mktemp("dist")
    run([sys.executable, "setup.py", "-q", "sdist", "-d", str(dist)], cwd=source)
    (sdist,) = dist.glob("spacy_mlm-*.tar.gz")
    with tarfile.open(sdist) as archive:
        archive.extractall(dist, filter="data")
    (unpacked_sdist,) = dist.glob("spacy_mlm-*/setup.py")
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
         "-w", str(dist), str(unpacked_sdist.parent)], cwd=dist)
    (built,) = dist.glob("spacy_mlm-*.whl")
    return built


def test_wheel_holds_the_project_and_configs_and_no_run_outputs(wheel, checkout_files):
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {name[len("spacy_mlm/"):] for name in names
               if name.startswith(("spacy_mlm/project/", "spacy_mlm/configs/")) and not name.endswith("/__init__.py")}
    assert {"project/project.yml", "project/scripts/convert.py", "project/assets_default/conll2003/train.txt",
            "configs/ner.cfg", "configs/pretraining/pretrain.cfg"} <= shipped
    assert not {name for name in shipped if name.startswith(tuple(f"project/{p}" for p in RUN_OUTPUTS))}
    assert shipped == set(checkout_files), "setup.py's package_data and demo.SHIPPED list different files"
    assert zipfile.ZipFile(wheel).read("spacy_mlm/project/project.yml") == checkout_files["project/project.yml"]


def test_demo_unpacks_the_project_from_the_installed_package(wheel, checkout_files, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}
    out = run([sys.executable, "-c", UNPACK_FROM_WHEEL, str(elsewhere / "demo")], cwd=elsewhere, env=env)
    result = json.loads(out.strip().splitlines()[-1])
    assert Path(result["package"]).parent == site / "spacy_mlm", "imported the checkout, not the wheel"
    assert Path(result["project"]) == elsewhere / "demo" / "project"
    assert set(result["files"]) == set(checkout_files)
    for relative, data in checkout_files.items():
        assert (elsewhere / "demo" / relative).read_bytes() == data, relative
