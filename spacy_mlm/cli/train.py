"""`spacy_mlm train CONFIG --output DIR [--code FILE] [--gpu-id N] [--section.key value ...]`:
`spacy train`, and under `torchrun --nproc_per_node N -m spacy_mlm train ...`
the same training on N processes (`spacy_mlm.training.distributed`)."""
import os
import sys
from pathlib import Path
from typing import Optional

import typer

from . import app
from .options import PASSES_OVERRIDES, gpu_id_option


@app.command("train", short_help="spacy train, on one or data-parallel processes.", context_settings=PASSES_OVERRIDES)
def train_cli(
    ctx: typer.Context,
    config_path: Path = typer.Argument(..., help="training config, as for spacy train", exists=True, dir_okay=False),
    output_path: Optional[Path] = typer.Option(None, "--output", "--output-path", "-o",
                                               help="where model-best and model-last go"),
    code_path: Optional[Path] = typer.Option(None, "--code", "-c", help="Python file with registered functions"),
    gpu_id: int = gpu_id_option(help="GPU to train on, -1: the CPU; under torchrun any GPU id means one GPU per "
                                     "process, the process's LOCAL_RANK"),
    timeout: float = typer.Option(1800.0, "--timeout", help="under torchrun: seconds a process waits for the "
                                  "others (e.g. while the first one evaluates and saves) before the run fails"),
    shared_memory: bool = typer.Option(True, "--shared-memory/--no-shared-memory", help="under torchrun, when every "
                                       "process trains on this machine's CPU: sum the gradients and step the "
                                       "weights through /dev/shm (faster than gloo's TCP); else collectives"),
):
    """Train a pipeline as `spacy train` does (same config, overrides such as
    --paths.train corpus/train.spacy, logger, model-best and model-last).
    Under torchrun every process trains on its share of each batch, the
    gradients of every torch weight are summed before each step, and the first
    process evaluates, logs and saves: N processes reach the weights one
    process would. Pipelines whose trainable components have thinc weights
    (spaCy's own ner, tagger, textcat) are refused; freeze them to keep them."""
    from spacy.cli._util import import_code, parse_config_overrides

    from ..engine.process_group import launch_from_env

    overrides = parse_config_overrides(ctx.args)
    import_code(code_path)
    group = launch_from_env()
    if group is None:
        from spacy.cli.train import train

        train(config_path, output_path, use_gpu=gpu_id, overrides=overrides)
        return
    train_data_parallel(config_path, output_path, gpu_id, overrides, group, timeout, shared_memory)


def train_data_parallel(config_path: Path, output_path: Optional[Path], gpu_id: int, overrides: dict, group,
                        timeout: float, shared_memory: bool = True) -> None:
    """`spacy.cli.train.train` on this process of a torchrun launch."""
    import contextlib

    import torch
    from spacy import util
    from spacy.cli._util import setup_gpu, show_validation_error
    from spacy.training.initialize import init_nlp
    from spacy.training.loop import train as train_nlp

    from ..engine.process_group import broadcast_parameters, start_process_group
    from ..training.distributed import check_synchronisable, data_parallel_training, torch_modules

    use_gpu = group.local_rank if gpu_id >= 0 else -1
    start_process_group(group, use_gpu >= 0, timeout)
    try:
        setup_gpu(use_gpu, silent=not group.main)
        with show_validation_error(config_path):
            config = util.load_config(config_path, overrides=overrides, interpolate=False)
        with show_validation_error(config_path, hint_fill=False):
            nlp = init_nlp(config, use_gpu=use_gpu)
        training = nlp.config.interpolate()["training"]
        outputs = contextlib.ExitStack()
        check_synchronisable(nlp, training["frozen_components"], training["accumulate_gradient"])
        broadcast_parameters(torch_modules(nlp))
        if group.main:
            if output_path is not None:
                output_path.mkdir(parents=True, exist_ok=True)
            typer.echo(f"Data-parallel training on {group.world} processes "
                       f"({'GPUs' if use_gpu >= 0 else 'CPUs'}, {torch.distributed.get_backend()})")
            stdout, stderr = sys.stdout, sys.stderr
        else:  # only the first process logs and saves
            nlp.config["training"]["logger"] = {"@loggers": "spacy.ConsoleLogger.v1", "progress_bar": False}
            stdout = stderr = outputs.enter_context(open(os.devnull, "w"))
            output_path = None
        with outputs, data_parallel_training(group, training["seed"], shared_memory):
            train_nlp(nlp, output_path, use_gpu=use_gpu, stdout=stdout, stderr=stderr)
        torch.distributed.barrier()
    finally:
        torch.distributed.destroy_process_group()
