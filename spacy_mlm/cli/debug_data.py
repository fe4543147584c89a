"""`spacy_mlm debug-data CONFIG`: the checks `spacy debug data` skips for our
components (`spacy_mlm.training.data_checks`), on the corpora of a training
config, with overrides as in `spacy train`."""
from pathlib import Path

import typer

from . import app
from .options import PASSES_OVERRIDES, gpu_id_option, use_gpu


def load_training_pipeline(config_path: Path, overrides: dict):
    """The config's pipeline, initialized on its training corpus as `spacy
    debug data` does, and the (train, dev) examples."""
    from spacy import util
    from spacy.schemas import ConfigSchemaTraining
    from spacy.training.initialize import resolve_dot_names
    from spacy.util import registry

    nlp = util.load_model_from_config(util.load_config(config_path, overrides=overrides))
    config = nlp.config.interpolate()
    training = registry.resolve(config["training"], schema=ConfigSchemaTraining)
    train_corpus, dev_corpus = resolve_dot_names(config, [training["train_corpus"], training["dev_corpus"]])
    nlp.initialize(lambda: train_corpus(nlp))
    return nlp, list(train_corpus(nlp)), list(dev_corpus(nlp))


def components_of(nlp, factory: str):
    return [name for name in nlp.pipe_names if nlp.get_pipe_meta(name).factory == factory]


@app.command("debug-data", short_help="Check a config's corpora for our components.",
             context_settings=PASSES_OVERRIDES)
def debug_data_cli(
    ctx: typer.Context,
    config_path: Path = typer.Argument(..., help="training config (e.g. configs/ner.cfg)", exists=True, dir_okay=False),
    gpu_id: int = gpu_id_option(),
):
    """What `spacy debug data` skips for mlm_ner and mlm_textcat: label counts
    per split, dev labels missing from train, entities off token boundaries
    or beyond the tag scheme, docs longer than the encoder window, unknown
    pieces, pair docs and their side lengths. Settings are overridden as in
    `spacy train`: --paths.train train.spacy --paths.dev dev.spacy"""
    from spacy.cli._util import parse_config_overrides
    from wasabi import Printer

    from ..errors import SpacyMlmError
    from ..training.data_checks import check_messages, piece_limits, split_stats

    use_gpu(gpu_id)
    nlp, train, dev = load_training_pipeline(config_path, parse_config_overrides(ctx.args))
    encoders = components_of(nlp, "mlm_encoder")
    if not encoders:
        raise SpacyMlmError(f"{config_path}: the pipeline ({', '.join(nlp.pipe_names)}) has no mlm_encoder")
    pieces = nlp.get_pipe(encoders[0]).model.attrs["tokenizer"]
    taggers = components_of(nlp, "mlm_ner")
    scheme = nlp.get_pipe(taggers[0]).cfg["scheme"] if taggers else None
    limits = piece_limits(pieces)
    stats = [split_stats(name, examples, pieces.hf, limits, scheme) for name, examples in (("train", train), ("dev", dev))]
    msg = Printer()
    msg.divider(f"spacy_mlm debug-data: {config_path}")
    msg.info(f"pipeline: {', '.join(nlp.pipe_names)}; encoder window {pieces.max_length} pieces"
             + (f"; tag scheme {scheme}" if scheme else ""))
    messages = check_messages(*stats, limits, scheme, ner=bool(taggers), textcat=bool(components_of(nlp, "mlm_textcat")))
    for level, text in messages:
        getattr(msg, level)(text)
    counts = {level: sum(1 for lv, _ in messages if lv == level) for level in ("good", "warn")}
    msg.divider("Summary")
    msg.good(f"{counts['good']} checks passed")
    if counts["warn"]:
        msg.warn(f"{counts['warn']} warnings")
