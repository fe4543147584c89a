"""`spacy_mlm wic`: Word-in-Context accuracy of a model's contextual vectors."""
import json
from pathlib import Path
from typing import Optional

import typer

from . import app
from .options import gpu_id_option, quiet_option, use_gpu


def vector_overrides(pooling, layer, n_layers, transform, n_components) -> dict:
    """Only the settings given on the command line (the rest keep the saved ones)."""
    from ..similarity.transforms import parse_steps

    given = {"pooling": pooling, "layer": layer, "n_layers": n_layers, "n_components": n_components}
    overrides = {k: v for k, v in given.items() if v is not None}
    if transform is not None:
        overrides["steps"] = parse_steps(transform)
    return overrides


@app.command("wic", short_help="Word-in-Context accuracy of contextual vectors.")
def wic_cli(
    model: Path = typer.Argument(..., help="saved spaCy pipeline with an mlm_encoder, or a Hugging Face model directory"),
    data_dir: Path = typer.Argument(..., help="WiC folder with train/train.{data,gold}.txt and dev/dev.{data,gold}.txt"),
    layer: Optional[int] = typer.Option(None, help="hidden state to use (-1 = top, 0 = embeddings) [default: -1 or the saved setting]"),
    n_layers: Optional[int] = typer.Option(None, help="average this many layers ending at --layer [default: 1]"),
    pooling: Optional[str] = typer.Option(None, help="pieces -> token: mean | first | last | max [default: mean]"),
    transform: Optional[str] = typer.Option(
        None, help="e.g. 'standardize', 'whiten', 'abtt+whiten', 'remove_static+standardize+abtt', 'raw'; fitted on train sentences"
    ),
    n_components: Optional[int] = typer.Option(None, help="principal components removed by abtt [default: 2]"),
    context_weight: float = typer.Option(
        0.0, help="mix the sentence vector into the target's: (1-w)*target + w*doc.vector (0 = target only)"
    ),
    threshold_per_pos: bool = typer.Option(False, help="tune one threshold per part of speech (N / V) on train"),
    fit_sentences: int = typer.Option(4000, help="train sentences to fit an unfitted transform on"),
    train_split: str = typer.Option("train", help="split the threshold is tuned on"),
    dev_split: str = typer.Option("dev", help="split accuracy is reported on"),
    batch_size: int = typer.Option(64, help="docs per encoder batch"),
    gpu_id: int = gpu_id_option(),
    quiet: bool = quiet_option(),
):
    """Cosine of the target word's contextual vectors in the two sentences
    (optionally mixed with the sentence vectors); the threshold is tuned on the
    train split, accuracy reported on dev.
    Prints a JSON line last."""
    from ..vectors_pipeline import docs_before, load_vectors_pipeline
    from ..readers.wic import read_wic_split
    from ..similarity.wic_cosine import evaluate_wic, wic_sentences
    from ..util.progress import track

    use_gpu(gpu_id)

    train = read_wic_split(data_dir, train_split)
    dev = read_wic_split(data_dir, dev_split)
    overrides = vector_overrides(pooling, layer, n_layers, transform, n_components)
    nlp, name = load_vectors_pipeline(model, **overrides)
    component = nlp.get_pipe(name)
    fitted_on = 0
    if not component.transform.is_fitted:
        texts = wic_sentences(train)[:fit_sentences]
        docs = track(docs_before(nlp, name, texts, batch_size), len(texts), "fit transform", "sentences", quiet=quiet)
        fitted_on = component.fit_transform(docs)
    result = evaluate_wic(nlp, train, dev, batch_size, context_weight, threshold_per_pos, quiet=quiet)
    result.update(
        transform=component.transform.describe(),
        layer=component.layer,
        n_layers=component.n_layers,
        pooling=component.pooling,
        context_weight=context_weight,
        threshold_per_pos=threshold_per_pos,
        fitted_on_vectors=fitted_on,
        n_train=len(train),
        n_dev=len(dev),
    )
    typer.echo(
        f"{component.transform.describe()} (layer {component.layer}, n_layers {component.n_layers}, "
        f"context weight {context_weight}{', threshold per PoS' if threshold_per_pos else ''}): "
        f"threshold {result['threshold']:.4f}, {train_split} acc {result['train_acc']:.4f}, "
        f"{dev_split} acc {result['dev_acc']:.4f}"
    )
    typer.echo(json.dumps(result))
