"""`spacy_mlm sense-tune MODEL_DIR RAW_TEXT... OUTPUT_DIR`: self-supervised sense tuning."""
import logging
from pathlib import Path
from typing import List

import typer

from . import app
from .options import force_option, quiet_option


@app.command("sense-tune", short_help="Self-supervised sense tuning of an encoder on raw text (no labels).")
def sense_tune_cli(
    model_dir: Path = typer.Argument(..., help="a local Hugging Face encoder directory", exists=True, file_okay=False),
    paths: List[Path] = typer.Argument(..., help="raw text files (.txt: a paragraph a line; .jsonl: a \"text\" per line), then OUTPUT_DIR"),
    steps: int = typer.Option(150, "--steps", help="optimizer steps"),
    batch_size: int = typer.Option(64, "--batch-size", help="sentences per step (each one's target is a negative for the others)"),
    learn_rate: float = typer.Option(2e-5, "--learn-rate", help="AdamW peak rate (linear warmup, then linear decay to 0)"),
    temperature: float = typer.Option(0.04, "--temperature", help="InfoNCE temperature"),
    max_span: int = typer.Option(5, "--max-span", help="the masked view masks one span of 1..N pieces (never the target's)"),
    layer: int = typer.Option(-1, "--layer", help="the hidden state the loss reads (-1: the top one)"),
    max_sentences: int = typer.Option(0, "--max-sentences", help="read at most N sentences (0: all)"),
    same_word: int = typer.Option(1, "--same-word", help="1: random sentences per batch; k: batch_size/k words with k sentences each (the same word in other contexts among the negatives)"),
    seed: int = typer.Option(0, "--seed", help="random seed of the target words, masks, dropout and batch order"),
    quiet: bool = quiet_option(),
    force: bool = force_option("replace OUTPUT_DIR even if it is not an earlier output of sense-tune"),
):
    """MirrorWiC-style tuning: a random word of each sentence is its target; the
    sentence is read as it is and with a random span masked (dropout on in both),
    and InfoNCE with in-batch negatives pulls the two vectors of each target
    together. Writes a plain HF encoder directory (AutoModel loads it; use it as
    any mlm_encoder's path) to OUTPUT_DIR, atomically, with sense_tuning.json."""
    from ..errors import SpacyMlmError
    from ..pretraining.sense_tuning import SenseTuneSettings, sense_tune
    from ..util.outputs import claim_output

    if len(paths) < 2:
        raise SpacyMlmError("give at least one raw text file and then OUTPUT_DIR")
    *raw, output_dir = paths
    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    settings = SenseTuneSettings(steps=steps, batch_size=batch_size, learn_rate=learn_rate, temperature=temperature,
                                 max_span=max_span, layer=layer, max_sentences=max_sentences,
                                 same_word=same_word, seed=seed)
    with claim_output(output_dir, "sense-tune", directory=True, inputs=[model_dir, *raw], force=force):
        summary = sense_tune(model_dir, raw, output_dir, settings, quiet=quiet)
    typer.echo(f"loss {summary['first_loss']:.4f} -> {summary['last_loss']:.4f} over {steps} steps "
               f"({summary['sentences']} sentences, {summary['seconds']:.0f} s); encoder saved to {output_dir}")
