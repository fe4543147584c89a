"""`spacy_mlm optimize`: a trained pipeline's encoder as an ONNX Runtime graph
(fp32 or dynamic int8) for fast CPU inference, with its agreement with the
original on a sample of texts."""
import os
import tempfile
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
import typer

from . import app

# the HFEncoder settings that carry over from any encoder architecture
KEPT_SETTINGS = ("window", "overlap", "trainable_layers", "output_hidden_states", "max_batch_pieces")


def optimized_config(config, precision: str, fp32_layers: List[int]):
    """`config` (a saved pipeline's, uninterpolated) with every mlm_encoder's
    model replaced by HFEncoder.v2 on the ONNX backend, its other settings kept.
    `path` only names where `nlp.initialize()` would load from; a saved pipeline
    loads its weights from its own directory."""
    names = [name for name, block in config["components"].items() if block.get("factory") == "mlm_encoder"]
    if not names:
        raise typer.BadParameter("the pipeline has no mlm_encoder component")
    for name in names:
        model = config["components"][name]["model"]
        new = {key: model[key] for key in KEPT_SETTINGS if key in model}
        path = model.get("path", model.get("tokenizer_path"))
        new.update({"@architectures": "spacy_mlm.HFEncoder.v2", "path": path, "backend": "onnx",
                    "precision": precision, "fp32_layers": fp32_layers})
        config["components"][name]["model"] = new
    return config


def load_optimized(pipeline: Path, precision: str, fp32_layers: List[int]):
    """The pipeline loaded with its encoders on ONNX Runtime (exported while it
    loads): its files are linked into a temporary directory beside a rewritten
    config.cfg, so nothing is copied and the original stays untouched."""
    import spacy
    from thinc.api import Config

    config = optimized_config(Config().from_disk(pipeline / "config.cfg", interpolate=False), precision, fp32_layers)
    with tempfile.TemporaryDirectory() as tmp:
        for entry in pipeline.iterdir():
            if entry.name != "config.cfg":
                os.symlink(entry.resolve(), Path(tmp) / entry.name)
        config.to_disk(Path(tmp) / "config.cfg")
        return spacy.load(tmp)


def agreement(original, optimized, texts: List[str]) -> Dict[str, Optional[float]]:
    """How far the optimized pipeline's outputs follow the original's on `texts`:
    the mean cosine of the encoder's piece vectors, the share of docs with the
    same entities and the share with the same top category (None where the
    pipeline sets no entities or categories)."""
    cosines, same_ents, same_cats = [], [], []
    for a, b in zip(original.pipe(texts), optimized.pipe(texts)):
        x, y = a._.mlm_encoding.hidden, b._.mlm_encoding.hidden
        if len(x):
            norms = np.linalg.norm(x, axis=1) * np.linalg.norm(y, axis=1)
            cosines.append(float(np.mean((x * y).sum(1) / np.maximum(norms, 1e-12))))
        if a.has_annotation("ENT_IOB"):
            same_ents.append([(e.start, e.end, e.label_) for e in a.ents] == [(e.start, e.end, e.label_) for e in b.ents])
        if a.cats:
            same_cats.append(max(a.cats, key=a.cats.get) == max(b.cats, key=b.cats.get))
    return {"encoder_cosine": _mean(cosines), "same_entities": _mean(same_ents), "same_top_category": _mean(same_cats)}


def _mean(values: List) -> Optional[float]:
    return float(np.mean(values)) if values else None


@app.command("optimize", short_help="Run a pipeline's encoder on ONNX Runtime (fp32/int8).")
def optimize_cli(
    pipeline: Path = typer.Argument(..., help="trained spaCy pipeline with an mlm_encoder"),
    output: Path = typer.Argument(..., help="where to write the optimized pipeline"),
    precision: str = typer.Option("int8", help="int8 (dynamic int8 matmuls) or fp32"),
    fp32_layer: List[int] = typer.Option(
        [], "--fp32-layer", help="with int8, a transformer layer kept in fp32 (-1: the last); repeatable"
    ),
    sample: Path = typer.Option(None, help="texts, one per line, to measure agreement on (default: 16 built in)"),
):
    """Write PIPELINE to OUTPUT with its encoder exported to ONNX (int8 or fp32) for
    fast CPU inference, and print how well its outputs agree with PIPELINE's on a
    sample. The optimized pipeline is inference only: train the original."""
    import spacy

    import spacy_mlm  # noqa: F401  (registers the factories)
    from ..testing import SAMPLE_TEXT
    from ..util.save import save_atomically

    if precision not in ("int8", "fp32"):
        raise typer.BadParameter(f"--precision must be int8 or fp32, not {precision!r}")
    if not (pipeline / "config.cfg").is_file():
        raise typer.BadParameter(f"{pipeline} is not a saved spaCy pipeline (no config.cfg)")
    texts = SAMPLE_TEXT if sample is None else [t for t in sample.read_text(encoding="utf8").splitlines() if t.strip()]
    optimized = load_optimized(pipeline, precision, list(fp32_layer))
    save_atomically(optimized, output)
    scores = agreement(spacy.load(pipeline), spacy.load(output), texts)
    typer.echo(f"wrote {output} ({precision}); agreement with {pipeline} on {len(texts)} texts:")
    for name, value in scores.items():
        typer.echo(f"  {name}: {'n/a' if value is None else f'{value:.4f}'}")
