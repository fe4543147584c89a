"""`spacy_mlm pretrain CONFIG OUTPUT_DIR [--resume] [--section.key value ...]`."""
import logging
from pathlib import Path

import typer

from . import app


@app.command(
    "pretrain", context_settings={"allow_extra_args": True, "ignore_unknown_options": True}
)
def pretrain_cli(
    ctx: typer.Context,
    config_path: Path = typer.Argument(..., help="config file with a [pretraining] section", exists=True, dir_okay=False),
    output_dir: Path = typer.Argument(..., help="where checkpoints, curves and the final model go"),
    resume: bool = typer.Option(False, "--resume", help="continue from the last checkpoint in OUTPUT_DIR"),
):
    """Masked-LM (and optionally next-sentence) pretraining of a transformer encoder.
    Settings are overridden like in `spacy train`: --pretraining.max_steps 500 --paths.train corpus.jsonl"""
    from spacy.cli._util import parse_config_overrides

    from ..errors import SpacyMlmError
    from ..pretraining.config import load_pretraining_config
    from ..pretraining.loop import pretrain

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        config = load_pretraining_config(config_path, parse_config_overrides(ctx.args))
        final = pretrain(config, output_dir, resume=resume)
    except SpacyMlmError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(1)
    typer.echo(f"model saved to {final}")
