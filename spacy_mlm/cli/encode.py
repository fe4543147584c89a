"""`spacy_mlm encode` and `spacy_mlm export-encoder`: look inside the encoder."""
from pathlib import Path

import typer

from . import app
from .options import force_option, gpu_id_option, use_gpu


def load_encoder_pipeline(model: str, lang: str = "en"):
    """A saved spaCy pipeline directory, or a plain HF directory wrapped in a
    blank pipeline with an `mlm_encoder`."""
    import spacy

    path = Path(model)
    if (path / "meta.json").exists() or (path / "config.cfg").exists():
        return spacy.load(path)
    nlp = spacy.blank(lang)
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(path)}})
    nlp.initialize()
    return nlp


@app.command("encode", short_help="Show the subword pieces of a text and their alignment.")
def encode_cli(
    model: str = typer.Argument(..., help="spaCy pipeline or Hugging Face model directory"),
    text: str = typer.Argument(..., help="text to encode"),
    pair: str = typer.Option(None, "--pair", help="second text: encode the two as a sentence pair"),
    lang: str = typer.Option("en", help="language of the blank pipeline wrapped around an HF directory"),
    gpu_id: int = gpu_id_option(),
):
    """Show the model family, the subword pieces of TEXT, their alignment to
    spaCy tokens and the vector sizes; with --pair, the pair's input as the
    model reads it: the family's separators and, where it has them, segment ids."""
    from ..models.encoder import get_hf_model
    from ..models.families import family_layout
    from ..pipeline.encoder import MLMEncoder
    from ..tokenization.pair import make_pair_doc

    use_gpu(gpu_id)
    nlp = load_encoder_pipeline(model, lang)
    encoder = next(pipe for _, pipe in nlp.pipeline if isinstance(pipe, MLMEncoder))
    layout = family_layout(get_hf_model(encoder.model))
    segments = "segment ids" if layout.segments else "no segment ids"
    typer.echo(f"family {layout.family}: {layout.n_layers} layers, {layout.attention}, {segments}, "
               f"{layout.max_positions} positions")
    doc = nlp(make_pair_doc(nlp, text, pair) if pair is not None else text)
    enc = doc._.mlm_encoding
    typer.echo(f"{len(doc)} tokens, {len(enc.pieces)} pieces, width {enc.width}")
    if pair is not None:
        tokenizer = encoder.model.attrs["tokenizer"]
        window = tokenizer([doc])[0].windows[0]
        typer.echo("input:    " + " ".join(tokenizer.hf.convert_ids_to_tokens(window.input_ids.tolist())))
        if layout.segments:
            typer.echo("segments: " + " ".join(str(t) for t in window.token_type_ids.tolist()))
    for token in doc:
        pieces = [enc.pieces[i] for i in enc.alignment.pieces_of(token.i)]
        typer.echo(f"{token.i:>4}  {token.text!r:<20} {' '.join(pieces) if pieces else '(no pieces)'}")


@app.command("export-encoder", short_help="Save a pipeline's encoder as a Hugging Face directory.")
def export_encoder_cli(
    pipeline: Path = typer.Argument(..., help="saved spaCy pipeline with an mlm_encoder"),
    output_dir: Path = typer.Argument(..., help="where to write the Hugging Face directory"),
    component: str = typer.Option(None, help="name of the encoder component (default: the first mlm_encoder)"),
    force: bool = force_option(),
):
    """Write the (fine-tuned) encoder and tokenizer as a plain Hugging Face directory."""
    import spacy

    from ..models.hf import save_backbone
    from ..models.encoder import get_hf_model
    from ..pipeline.encoder import MLMEncoder
    from ..util.outputs import claim_output

    with claim_output(output_dir, "export-encoder", directory=True, inputs=[pipeline], force=force):
        nlp = spacy.load(pipeline)
        names = [name for name, pipe in nlp.pipeline if isinstance(pipe, MLMEncoder)]
        name = component or (names[0] if names else None)
        if name is None or name not in names:
            raise typer.BadParameter(f"{pipeline} has no mlm_encoder component named {component!r}; it has {names}")
        encoder = nlp.get_pipe(name)
        save_backbone(get_hf_model(encoder.model), encoder.model.attrs["tokenizer"].hf, output_dir)
    typer.echo(f"wrote {output_dir}")
