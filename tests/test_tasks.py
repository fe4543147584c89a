"""The task table (spacy_mlm/tasks.py) is the one list of tasks: each row names
registered things spaCy finds, each row's template block renders the config its
row describes, the shared template decides nothing by task name, and init-config,
evaluate and import-hf take their task lists from the table."""
import ast
import re
from pathlib import Path

import pytest
from spacy.util import registry
from thinc.api import Config

from spacy_mlm import tasks
from spacy_mlm.evaluation import evaluate
from spacy_mlm.interop import hf_heads
from spacy_mlm.training.config_templates import SHIPPED, TEMPLATES, render_pipeline_config

ROWS = list(tasks.TASKS.values())
# `task == "ner"`, `task in ("textcat", "nli")`, `task != ...`: a choice by task name
TASK_CONDITION = re.compile(r"{%-?\s*(el)?if\b[^%]*\btask\s*(==|!=|in\b|not\s+in\b)")


def task_conditions(template: Path) -> list:
    return TASK_CONDITION.findall(template.read_text(encoding="utf8"))


@pytest.mark.parametrize("task", ROWS, ids=lambda task: task.name)
def test_every_name_a_row_gives_is_registered(task):
    import spacy
    from spacy.language import Language

    spacy.blank("en")  # spaCy registers its own factories and loads the entry points' ones
    assert Language.get_factory_meta(task.factory).factory == task.factory
    registered = {"readers": task.reader, "optimizers": task.optimizer, "scorers": task.scorer or "spacy.ner_scorer.v1"}
    assert {kind: name for kind, name in registered.items() if not registry.has(kind, name)} == {}


@pytest.mark.parametrize("task", ROWS, ids=lambda task: task.name)
def test_each_rows_block_renders_what_the_row_says(task):
    assert (TEMPLATES / task.template).is_file()
    config = Config().from_str(render_pipeline_config(task.name, None), interpolate=False)
    component = config["components"][task.name]
    assert config["nlp"]["pipeline"] == ["encoder", task.name]
    assert component["factory"] == task.factory
    assert component.get("scorer", {}).get("@scorers") == task.scorer
    assert {split: config["corpora"][split]["@readers"] for split in ("train", "dev")} == \
        {"train": task.reader, "dev": task.reader}
    assert config["training"]["optimizer"]["@optimizers"] == task.optimizer
    assert config["training"]["score_weights"] == task.score_weights
    assert (config["training"]["max_steps"], config["training"]["batcher"]["size"]) == \
        (task.budget.max_steps, task.budget.batch_size)


def test_the_shared_template_decides_nothing_by_task_name():
    """A task's settings are its row and its block: the shared template (33 choices by
    task name before the table) has none, so a new task edits no line of it."""
    assert task_conditions(TEMPLATES / "pipeline.cfg.jinja") == []
    assert task_conditions(TEMPLATES / "distill.cfg.jinja") == []


def test_the_table_imports_nothing_of_the_package():
    """Every layer reads it, so it may read none of them (.importlinter does not check
    a module outside the layers)."""
    tree = ast.parse(Path(tasks.__file__).read_text(encoding="utf8"))
    imported = [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    imported += [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    assert [name for name in imported if name.startswith("spacy_mlm") or name.startswith(".")] == []


def test_every_command_lists_the_tasks_of_the_table():
    from typer.testing import CliRunner

    from spacy_mlm.cli import app

    assert list(SHIPPED) == [f"{task.name}.cfg" for task in ROWS if task.shipped]
    assert evaluate.TASKS == ("auto", "ner", "textcat", "nli")
    assert hf_heads.TASKS == ("ner", "textcat", "pairs")
    assert hf_heads.TEMPLATE_TASKS == {"ner": "ner", "textcat": "textcat", "pairs": "nli"}
    assert [task.name for task in ROWS] == ["ner", "textcat", "nli", "vectors", "senses", "spancat"]
    result = CliRunner().invoke(app, ["init-config", "-", "--task", "nope"])
    assert result.exit_code != 0
    assert "--task must be one of ner, textcat, nli, vectors, senses, spancat, got 'nope'" in result.output
    result = CliRunner().invoke(app, ["init-config", "-", "--from-hf", "x", "--task", "vectors"])
    assert result.exit_code != 0 and "--task with --from-hf: ner, textcat or nli" in result.output


def test_detection_follows_the_rows():
    """evaluate finds a task by the attribute its row says the component sets."""
    import spacy

    from spacy_mlm.errors import SpacyMlmError

    with pytest.raises(SpacyMlmError, match=r"sets neither doc\.ents nor doc\.cats"):
        evaluate.detect_task(spacy.blank("en"))
    assert evaluate.pair_task(True) == "nli" and evaluate.pair_task(False) == "textcat"
    assert tasks.spoken_list(["ner"]) == "ner" and tasks.spoken_list("abc") == "a, b or c"
