"""`spacy_mlm distill`: train a smaller student pipeline on the soft outputs of
trained teachers (`spacy_mlm.distillation`).

    spacy_mlm distill CONFIG OUTPUT_DIR [--resume] [--force] [--section.key value ...]
    torchrun --nproc_per_node N -m spacy_mlm distill CONFIG OUTPUT_DIR ...   # data-parallel
"""
import logging
from pathlib import Path

import typer

from . import app
from .options import PASSES_OVERRIDES, gpu_id_option, quiet_option, use_gpu


def is_distillation_output(path: Path) -> bool:
    """A distill output directory: its config and checkpoints."""
    return (path / "config.cfg").is_file() and (path / "checkpoints").is_dir()


@app.command("distill", short_help="Train a smaller student pipeline on a teacher's soft outputs.",
             context_settings=PASSES_OVERRIDES)
def distill_cli(
    ctx: typer.Context,
    config_path: Path = typer.Argument(..., help="config file with a [distillation] section", exists=True,
                                       dir_okay=False),
    output_dir: Path = typer.Argument(..., help="where the student encoder, checkpoints and the final pipeline go"),
    resume: bool = typer.Option(False, "--resume", help="continue from the last checkpoint in OUTPUT_DIR"),
    force: bool = typer.Option(
        False, "--force", help="with --resume: continue even if settings or data that define the run changed; "
        "without: write into an OUTPUT_DIR that is not an earlier output of distill"
    ),
    gpu_id: int = gpu_id_option(),
    quiet: bool = quiet_option(),
):
    """Distil one trained pipeline (or the mean of several) into a student with the
    same components and a smaller encoder, over unlabelled text (and labelled
    .spacy data if given). Settings are overridden like in `spacy train`:
    --paths.teacher training/ner/model-best --paths.texts corpus.txt --distillation.max_steps 500"""
    from spacy.cli._util import parse_config_overrides

    from ..distillation.config import load_distillation_config, paths_of
    from ..distillation.loop import distill
    from ..engine.process_group import launch_from_env
    from ..util.outputs import claim_output, mark_output

    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    group = launch_from_env()
    use_gpu(gpu_id if group is None or gpu_id < 0 else group.local_rank)  # under torchrun: one GPU per process
    config = load_distillation_config(config_path, parse_config_overrides(ctx.args))
    section = config["distillation"]
    if group is not None and not group.main:  # the first process checks and holds the output directory
        distill(config, output_dir, resume=resume, quiet=True, force=force)
        return
    inputs = [config_path, *paths_of(section, "teacher"), *paths_of(section, "texts"), section["gold"],
              section["student"]["encoder"]]
    with claim_output(output_dir, "distill", directory=True, inputs=inputs, replaces_whole=False, force=force,
                      recognise=is_distillation_output):
        output_dir.mkdir(parents=True, exist_ok=True)
        mark_output(output_dir, "distill")  # now: a killed run's checkpoints are this command's to resume
        final = distill(config, output_dir, resume=resume, quiet=quiet, force=force)
    typer.echo(f"student saved to {final}")
