"""`spacy_mlm fill-mask MODEL TEXT`: top candidates for each blank."""
import typer

from . import app
from .options import gpu_id_option, use_gpu


@app.command("fill-mask", short_help="Top candidates for each blank in a text.")
def fill_mask_cli(
    model: str = typer.Argument(..., help="HF model directory with an MLM head (e.g. the output of pretrain)"),
    text: str = typer.Argument(..., help='text with blanks: ___ or the mask token, e.g. "The ___ of Walden Pond"'),
    top_k: int = typer.Option(5, "--top-k", "-k", help="candidates per blank"),
    gpu_id: int = gpu_id_option(),
):
    """Print the top-k candidates with their probabilities for each blank in TEXT."""
    from ..fill_mask import FillMask

    use_gpu(gpu_id)
    results = FillMask(model)(text, top_k)
    for n, candidates in enumerate(results, start=1):
        typer.echo(f"blank {n}:")
        for text, prob in candidates:
            typer.echo(f"  {text!r:<20} {prob:.4f}")
