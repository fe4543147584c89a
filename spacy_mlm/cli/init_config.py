"""`spacy_mlm init-config` and `spacy_mlm init-pretrain-config`: write a
complete, commented config, as `spacy init config` does, from the templates
the shipped configs/ are made of (`spacy_mlm.training.config_templates`)."""
from pathlib import Path
from typing import Optional

import typer

from ..tasks import TASKS, hf_tasks, spoken_list
from . import app


def write_config(output: str, text: str, command: str, inputs, force: bool) -> None:
    """`text` to the file `output` (atomically), or to stdout for "-". An
    existing file is a config someone may have edited: replaced only with
    --force, as `spacy init config` does."""
    from ..util.io import atomic_write_text
    from ..util.outputs import claim_output

    if output == "-":
        typer.echo(text, nl=False)
        return
    with claim_output(output, command, directory=False, inputs=inputs, force=force):
        atomic_write_text(output, text)
    typer.echo(f"wrote {output}", err=True)


def force_config_option():
    return typer.Option(False, "--force", "-F", help="replace an existing OUTPUT file")


def check_encoder_dir(encoder: str) -> None:
    """A config naming a directory that is not an HF model would fail only when training starts."""
    from ..errors import ModelLoadError

    if not (Path(encoder) / "config.json").is_file():
        raise ModelLoadError(encoder, "has no config.json: --encoder must be a local Hugging Face model directory")


@app.command("init-config", short_help="Write a complete pipeline config for a task.")
def init_config_cli(
    output: str = typer.Argument(..., help="the config file to write ('-': stdout)"),
    task: Optional[str] = typer.Option(
        None, "--task", help=f"{' | '.join(TASKS)} (with --from-hf: read from the directory) | "
        "distill (the config of `spacy_mlm distill`)"),
    encoder: Optional[str] = typer.Option(
        None, "--encoder", help="local Hugging Face encoder directory (written as given: a relative path is read "
        "from where spacy train runs); without it, paths.encoder is null and each run passes --paths.encoder"),
    from_hf: Optional[str] = typer.Option(
        None, "--from-hf", help="fine-tuned HF *ForTokenClassification / *ForSequenceClassification directory to "
        "train further: paths.encoder, and the component's head and labels start from its classifier"),
    crf: bool = typer.Option(False, "--crf", help="NER: score tag sequences with a linear-chain CRF"),
    gpu: bool = typer.Option(False, "--gpu", help="to train on a GPU: memory from PyTorch's allocator"),
    precision: str = typer.Option(
        "auto", "--precision", help="fp32 | bf16 | auto: bf16 where this machine's CPU (or GPU, with --gpu) "
        "multiplies bfloat16 natively, else fp32; the reason is written into the config"),
    force: bool = force_config_option(),
):
    """Write a complete, commented spaCy config for TASK on ENCODER: an
    mlm_encoder and the task's component, corpora that read the task's usual
    files, optimizer, schedule and budgets (as configs/ has them). Train it
    with `python -m spacy train OUTPUT --paths.train ... --paths.dev ...`.
    With --from-hf, the task's component starts from the directory's
    fine-tuned classifier ([initialize.components.NAME] from_hf)."""
    from ..training.config_templates import init_config_command, render_pipeline_config
    from ..training.precision import precision_setting

    if task == "distill":
        from ..training.config_templates import render_distillation_config

        if encoder is not None or from_hf is not None:
            raise typer.BadParameter("--task distill takes no encoder: the student's comes from the teacher "
                                     "([distillation.student])")
        write_config(output, render_distillation_config(output=output), "init-config", [], force)
        return
    if from_hf is not None:
        from ..interop.hf_heads import hf_training_config

        if encoder is not None:
            raise typer.BadParameter("--from-hf names the encoder too: give --encoder or --from-hf, not both")
        held = {row.name: name for name, row in hf_tasks().items()}  # init-config's task: import-hf's
        hf_task = held.get(task, task)
        if hf_task not in (None, *hf_tasks()):
            raise typer.BadParameter(
                f"--task with --from-hf: {spoken_list(held)} (a fine-tuned classifier's), not {task!r}")
        command = init_config_command(output, task, from_hf, crf, gpu, precision, from_hf=True)
        text = hf_training_config(from_hf, command, task=hf_task, crf=crf, gpu=gpu, precision=precision, output=output)
        encoder = from_hf
    elif task is None:
        raise typer.BadParameter("--task is needed (or --from-hf, which reads it from the directory)")
    else:
        if encoder is not None:
            check_encoder_dir(encoder)
        text = render_pipeline_config(task, encoder, crf=crf, gpu=gpu, precision=precision, output=output)
    warning = precision_setting(precision, gpu).warning
    if warning:
        typer.echo(f"warning: {warning}", err=True)
    write_config(output, text, "init-config", [encoder] if encoder else [], force)


@app.command("init-pretrain-config", short_help="Write a complete masked-LM pretraining config.")
def init_pretrain_config_cli(
    output: str = typer.Argument(..., help="the config file to write ('-': stdout)"),
    source: Optional[str] = typer.Option(
        None, "--source", help="HF directory to continue pretraining from (default: train from scratch)"),
    force: bool = force_config_option(),
):
    """Write the pretraining config with every setting and its default, for
    `python -m spacy_mlm pretrain OUTPUT OUTPUT_DIR --paths.train corpus.txt`."""
    from ..training.config_templates import render_pretraining_config

    if source is not None:
        check_encoder_dir(source)
    write_config(output, render_pretraining_config(source, output=output), "init-pretrain-config", [source], force)
