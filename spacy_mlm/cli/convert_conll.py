"""`spacy_mlm convert-conll`: CoNLL NER file to a .spacy corpus."""
from pathlib import Path

import typer

from . import app
from .options import force_option, quiet_option


@app.command("convert-conll", short_help="Convert a CoNLL NER file to a .spacy corpus.")
def convert_conll_cli(
    input_path: Path = typer.Argument(..., help="CoNLL file (word first, entity tag in --tag-column)"),
    output_path: Path = typer.Argument(..., help="where to write the .spacy file"),
    n_sents: int = typer.Option(1, "--n-sents", help="sentences per Doc, never across -DOCSTART-; 0 = one Doc per document"),
    tag_column: int = typer.Option(-1, "--tag-column", help="column of the entity tag (Python index)"),
    scheme: str = typer.Option("auto", help="auto (IOB1 or IOB2), IOB1, IOB2, BIOES or IO; strict schemes reject ill-formed tags"),
    lang: str = typer.Option("en", help="language of the vocab"),
    quiet: bool = quiet_option(),
    force: bool = force_option(),
):
    """Convert INPUT_PATH to a DocBin with entities and sentence starts."""
    from ..readers.conll import conll_to_docbin, is_docbin_file
    from ..util.outputs import claim_output

    with claim_output(output_path, "convert-conll", directory=False, inputs=[input_path], force=force,
                      recognise=is_docbin_file):
        n = conll_to_docbin(input_path, output_path, n_sents=n_sents, tag_column=tag_column, scheme=scheme,
                            lang=lang, quiet=quiet)
    typer.echo(f"wrote {n} docs to {output_path}")
