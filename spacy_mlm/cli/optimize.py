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
from .options import force_option


def optimized_config(config, precision: str, fp32_layers: Dict[str, List[int]]):
    """`config` (a saved pipeline's, uninterpolated) with every mlm_encoder named
    in `fp32_layers` on the ONNX backend at `precision`, keeping those layers in
    fp32; every other setting is kept. `path` only names where
    `nlp.initialize()` would load from: a saved pipeline loads its weights
    from its own directory."""
    for name, layers in fp32_layers.items():
        model = config["components"][name]["model"]
        model.update({"backend": "onnx", "precision": precision, "fp32_layers": layers})
    return config


def encoder_names(nlp) -> List[str]:
    names = [name for name, _ in nlp.pipeline if nlp.get_pipe_meta(name).factory == "mlm_encoder"]
    if not names:
        raise typer.BadParameter("the pipeline has no mlm_encoder component")
    return names


def load_optimized(pipeline: Path, precision: str, fp32_layers: Dict[str, List[int]]):
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
    from ..util.vectors import cosine_rows

    cosines, same_ents, same_cats = [], [], []
    for a, b in zip(original.pipe(texts), optimized.pipe(texts)):
        if len(a._.mlm_encoding.hidden):
            cosines.append(float(np.mean(cosine_rows(a._.mlm_encoding.hidden, b._.mlm_encoding.hidden))))
        if a.has_annotation("ENT_IOB"):
            same_ents.append([(e.start, e.end, e.label_) for e in a.ents] == [(e.start, e.end, e.label_) for e in b.ents])
        if a.cats:
            same_cats.append(max(a.cats, key=a.cats.get) == max(b.cats, key=b.cats.get))
    return {"encoder_cosine": _mean(cosines), "same_entities": _mean(same_ents), "same_top_category": _mean(same_cats)}


def _mean(values: List) -> Optional[float]:
    return float(np.mean(values)) if values else None


def parse_layers(text: str) -> List[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise typer.BadParameter(f"--keep-fp32-layers takes comma-separated layer numbers, not {text!r}") from None


def read_lines(path: Path) -> List[str]:
    texts = [t for t in path.read_text(encoding="utf8").splitlines() if t.strip()]
    if not texts:
        raise typer.BadParameter(f"{path} has no text (one text a line)")
    return texts


@app.command("optimize", short_help="Run a pipeline's encoder on ONNX Runtime (fp32/int8).")
def optimize_cli(
    pipeline: Path = typer.Argument(..., help="trained spaCy pipeline with an mlm_encoder"),
    output: Path = typer.Argument(..., help="where to write the optimized pipeline"),
    precision: str = typer.Option("int8", help="int8 (dynamic int8 matmuls) or fp32"),
    keep_fp32_layers: str = typer.Option(
        "", help="with int8, comma-separated transformer layers kept in fp32 (-1: the last)"
    ),
    calibrate: Path = typer.Option(
        None,
        help="texts, one a line: with int8, also keep in fp32 the layers int8 changes most "
        "on them until the encoder's cosine to fp32 reaches --min-cosine",
    ),
    min_cosine: float = typer.Option(0.99, help="with --calibrate, the mean piece-vector cosine to reach"),
    sample: Path = typer.Option(
        None, help="texts, one a line, to report agreement on (default: --calibrate's, else 16 built in)"
    ),
    force: bool = force_option(),
):
    """Write PIPELINE to OUTPUT with its encoder exported to ONNX (int8 or fp32) for
    fast CPU inference, and print how well its outputs agree with PIPELINE's on a
    sample. The optimized pipeline is inference only: train the original."""
    import spacy

    from ..models.encoder import choose_fp32_layers
    from ..testing import SAMPLE_TEXT
    from ..util.outputs import claim_output
    from ..util.save import save_atomically

    if precision not in ("int8", "fp32"):
        raise typer.BadParameter(f"--precision must be int8 or fp32, not {precision!r}")
    keep = parse_layers(keep_fp32_layers)
    if (keep or calibrate) and precision != "int8":
        raise typer.BadParameter("--keep-fp32-layers and --calibrate apply to --precision int8 only")
    if not (pipeline / "config.cfg").is_file():
        raise typer.BadParameter(f"{pipeline} is not a saved spaCy pipeline (no config.cfg)")
    with claim_output(output, "optimize", directory=True, inputs=[pipeline, calibrate, sample], force=force):
        calibration = None if calibrate is None else read_lines(calibrate)
        texts = read_lines(sample) if sample else calibration or SAMPLE_TEXT
        original = spacy.load(pipeline)
        names = encoder_names(original)
        layers = {name: keep for name in names}
        if calibration is not None:
            docs = [original.make_doc(t) for t in calibration]
            for name in names:
                layers[name] = choose_fp32_layers(original.get_pipe(name).model, docs, min_cosine, keep)
        optimized = load_optimized(pipeline, precision, layers)
        save_atomically(optimized, output)
    scores = agreement(original, spacy.load(output), texts)
    typer.echo(f"wrote {output} ({precision}); agreement with {pipeline} on {len(texts)} texts:")
    for name in names if precision == "int8" else ():
        typer.echo(f"  {name}: layers kept in fp32: {', '.join(map(str, layers[name])) or 'none'}")
    for name, value in scores.items():
        typer.echo(f"  {name}: {'n/a' if value is None else f'{value:.4f}'}")
