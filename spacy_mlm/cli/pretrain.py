"""`spacy_mlm pretrain`: continue an encoder's pretraining on raw text
(`spacy_mlm.pretraining`), resumable from its last checkpoint.

    spacy_mlm pretrain CONFIG OUTPUT_DIR [--resume [--force]] [--section.key value ...]
"""
import contextlib
import logging
import os
from pathlib import Path
from typing import Optional

import typer

from . import app
from .options import PASSES_OVERRIDES, gpu_id_option, quiet_option


def pretraining_overrides(args, gpu_id):
    """`--section.key value` overrides, and the device `--gpu-id` names."""
    from spacy.cli._util import parse_config_overrides

    overrides = parse_config_overrides(args)
    if gpu_id is not None:
        overrides["pretraining.device"] = "cpu" if gpu_id < 0 else f"cuda:{gpu_id}"
    return overrides


def is_pretraining_output(path: Path) -> bool:
    """A pretrain output directory from before outputs were marked: its config and checkpoints."""
    return (path / "config.cfg").is_file() and (path / "checkpoints").is_dir()


@app.command("pretrain", short_help="Masked-LM pretraining of an encoder.", context_settings=PASSES_OVERRIDES)
def pretrain_cli(
    ctx: typer.Context,
    config_path: Path = typer.Argument(..., help="config file with a [pretraining] section", exists=True, dir_okay=False),
    output_dir: Path = typer.Argument(..., help="where checkpoints, curves and the final model go"),
    resume: bool = typer.Option(False, "--resume", help="continue from the last checkpoint in OUTPUT_DIR"),
    force: bool = typer.Option(
        False, "--force", help="with --resume: continue even if settings or data that define the run changed; "
        "without: write into an OUTPUT_DIR that is not an earlier output of pretrain"
    ),
    gpu_id: Optional[int] = gpu_id_option(None, help="GPU to train on, -1: the CPU [default: the config's device]"),
    quiet: bool = quiet_option(),
):
    """Masked-LM (and optionally next-sentence) pretraining of a transformer encoder.
    Settings are overridden like in `spacy train`: --pretraining.max_steps 500 --paths.train corpus.jsonl"""
    from ..pretraining.config import load_pretraining_config
    from ..pretraining.loop import corpus_paths, pretrain
    from ..util.outputs import claim_output, mark_output

    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    config = load_pretraining_config(config_path, pretraining_overrides(ctx.args, gpu_id))
    section = config["pretraining"]
    corpora = [path for part in ("train", "dev") for path in corpus_paths(section["corpus"][part]).values()]
    inputs = [config_path, section.get("source"), *corpora]
    main = not int(os.environ.get("RANK", "0"))  # rank 0 of a torchrun launch checks and holds the output
    claimed = claim_output(output_dir, "pretrain", directory=True, inputs=inputs, replaces_whole=False, force=force,
                           recognise=is_pretraining_output)
    with claimed if main else contextlib.nullcontext():
        if main:
            output_dir.mkdir(parents=True, exist_ok=True)
            mark_output(output_dir, "pretrain")  # now: a killed run's checkpoints are this command's to resume
        final = pretrain(config, output_dir, resume=resume, quiet=quiet, force=force)
    typer.echo(f"model saved to {final}")
