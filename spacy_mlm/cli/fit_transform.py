"""`spacy_mlm fit-transform`: fit a vector transformation on a text corpus and
save it into a pipeline."""
from pathlib import Path
from typing import Optional

import typer

from . import app
from .options import force_option, gpu_id_option, quiet_option, use_gpu


@app.command("fit-transform", short_help="Fit a vector transformation on a corpus.")
def fit_transform_cli(
    model: Path = typer.Argument(..., help="saved spaCy pipeline with an mlm_encoder, or a Hugging Face model directory"),
    corpus: Path = typer.Argument(..., help="plain text (one segment per line) or JSONL file, or a folder of them"),
    output_dir: Path = typer.Argument(..., help="where to save the pipeline with the fitted transform"),
    steps: str = typer.Option("standardize+abtt", help="transform steps: remove_static (first), center, standardize, abtt, whiten joined by '+'"),
    n_components: Optional[int] = typer.Option(None, help="principal components removed by abtt [default: 2]"),
    layer: Optional[int] = typer.Option(None, help="hidden state to use (-1 = top) [default: -1 or the saved setting]"),
    n_layers: Optional[int] = typer.Option(None, help="average this many layers ending at --layer [default: 1]"),
    pooling: Optional[str] = typer.Option(None, help="pieces -> token: mean | first | last | max [default: mean]"),
    max_vectors: int = typer.Option(100_000, help="token vectors to fit on (read in corpus order)"),
    text_field: str = typer.Option("text", help="JSONL field holding the text"),
    batch_size: int = typer.Option(64, help="docs per encoder batch"),
    gpu_id: int = gpu_id_option(),
    quiet: bool = quiet_option(),
    force: bool = force_option("replace OUTPUT_DIR even if it is not an earlier output of fit-transform"),
):
    """Fit remove-static / center / standardize / all-but-the-top / whitening on the contextual token
    vectors of CORPUS and save the pipeline (encoder + mlm_vectors with the
    fitted transform) to OUTPUT_DIR."""
    from ..vectors_pipeline import docs_before, load_vectors_pipeline
    from ..readers.corpus import read_corpus
    from ..util.io import atomic_directory
    from ..util.outputs import claim_output
    from ..util.progress import track
    from .wic import vector_overrides

    use_gpu(gpu_id)

    overrides = vector_overrides(pooling, layer, n_layers, steps, n_components)
    with claim_output(output_dir, "fit-transform", directory=True, inputs=[model, corpus], force=force):
        nlp, name = load_vectors_pipeline(model, **overrides)
        texts = (segment for document in read_corpus(corpus, text_field=text_field) for segment in document)
        component = nlp.get_pipe(name)
        docs = track(docs_before(nlp, name, texts, batch_size), None, "fit transform", "docs", quiet=quiet)
        n = component.fit_transform(docs, max_vectors=max_vectors)
        with atomic_directory(output_dir) as tmp:
            nlp.to_disk(tmp)
    typer.echo(f"fitted {component.transform.describe()} on {n} token vectors; saved pipeline to {output_dir}")
