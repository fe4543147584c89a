"""The spaCy project end to end on the embedded default data with the tiny test
model and tiny budgets: every command of the `all` workflow runs (convert,
pretrain, three trainings and the baseline, evaluate, WiC, package + install
check) and leaves the files later steps and users rely on."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import srsly

REPO = Path(__file__).resolve().parents[2]
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def project_run(tiny_model_dir, tmp_path_factory):
    missing = [name for name in ("ner.cfg", "textcat.cfg", "nli.cfg", "pretraining/pretrain.cfg") if not (REPO / "configs" / name).is_file()]
    assert not missing, f"the project trains with configs/{', configs/'.join(missing)}, missing from the repository"
    project = tmp_path_factory.mktemp("project")
    shutil.copy(REPO / "project" / "project.yml", project / "project.yml")
    shutil.copytree(REPO / "project" / "scripts", project / "scripts")
    tiny = {
        "data_dir": REPO / "project" / "assets_default",
        "configs": REPO / "configs",
        "base_model": tiny_model_dir,
        "pretrain_steps": 2,
        "pretrain_batch": 4,
        "pretrain_length": 32,
        "pretrain_warmup": 1,
        "train_steps": 3,
        "eval_frequency": 3,
        "warmup_steps": 1,
        "train_limit": 24,
        "dev_limit": 12,
        "n_samples": 50,
    }
    overrides = [f"--vars.{key}={value}" for key, value in tiny.items()]
    # `spacy project run all` with each python command forked from one interpreter that imported
    # torch, spaCy and transformers once (run_forked.py says why and what stays the same)
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("run_forked.py")), "all", str(project), *overrides],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    assert proc.returncode == 0, proc.stdout[-6000:]
    return project, proc.stdout


def test_every_command_of_the_workflow_ran(project_run):
    project, _ = project_run
    config = srsly.read_yaml(project / "project.yml")
    lock = srsly.read_yaml(project / "project.lock")
    assert set(config["workflows"]["all"]) <= set(lock)
    assert set(config["workflows"]["demo"]) <= set(config["workflows"]["all"])
    for name in config["workflows"]["all"]:
        for out in lock[name]["outs"]:
            assert (project / out["path"]).exists(), f"{name} did not write {out['path']}"


def test_converted_corpora(project_run):
    project, _ = project_run
    textcat = [json.loads(line) for line in (project / "corpus" / "textcat_train.jsonl").read_text().splitlines()]
    assert len(textcat) == 24 and {r["label"][0] for r in textcat} == {"negative", "positive"}
    nli = [json.loads(line) for line in (project / "corpus" / "nli_dev.jsonl").read_text().splitlines()]
    assert len(nli) == 12 and {r["label"] for r in nli} <= {"entailment", "neutral", "contradiction"}
    assert len((project / "corpus" / "wic" / "train" / "train.gold.txt").read_text().split()) == 24


def test_pretraining_outputs(project_run):
    project, _ = project_run
    pretrained = project / "training" / "pretrained"
    assert (pretrained / "model" / "config.json").is_file()
    assert (pretrained / "curves.png").read_bytes().startswith(PNG)
    rows = [json.loads(line) for line in (pretrained / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["step"] == 2


def test_evaluation_outputs(project_run):
    project, _ = project_run
    ner = json.loads((project / "metrics" / "ner" / "metrics.json").read_text())
    assert ner["task"] == "ner" and ner["metric"] == "ents_f" and 0.0 <= ner["value"] <= 1.0
    assert ner["bootstrap"]["n_samples"] == 50 and 0.0 < ner["bootstrap"]["p_value"] <= 1.0
    assert (project / "metrics" / "ner" / "f1_per_type.png").read_bytes().startswith(PNG)
    assert "<html" in (project / "metrics" / "ner" / "entities.html").read_text().lower()
    for task in ("textcat", "nli"):
        metrics = json.loads((project / "metrics" / task / "metrics.json").read_text())
        assert metrics["task"] == task and metrics["metric"] == "cats_accuracy"
        matrix = metrics["confusion_matrix"]["rows_gold_columns_predicted"]
        assert sum(map(sum, matrix)) == metrics["n_examples"] == 12
        assert (project / "metrics" / task / "confusion_matrix.png").read_bytes().startswith(PNG)
    for name in ("wic.json", "wic_base.json"):
        wic = json.loads((project / "metrics" / name).read_text())
        assert 0.0 <= wic["dev_acc"] <= 1.0 and wic["n_dev"] == 48


def test_package_installs_and_predicts_identically(project_run):
    project, output = project_run
    assert (project / "packages" / "en_mlm_ner_demo-0.0.1" / "dist" / "en_mlm_ner_demo-0.0.1.tar.gz").is_file()
    assert "en_mlm_ner_demo: installed with pip and loaded with spacy.load; identical predictions" in output
