"""`spacy_mlm import-hf` and `spacy_mlm export-hf`: fine-tuned Hugging Face
token and sequence classifiers into spaCy pipelines and back (the work is in
`spacy_mlm/interop/hf_heads.py`)."""
from pathlib import Path

import typer

from ..tasks import hf_tasks, spoken_list
from . import app
from .options import force_option


@app.command("import-hf", short_help="A fine-tuned HF classifier as a spaCy pipeline.")
def import_hf_cli(
    model_dir: Path = typer.Argument(..., help="local *ForTokenClassification or *ForSequenceClassification directory"),
    output: Path = typer.Argument(..., help="where to write the spaCy pipeline"),
    task: str = typer.Option(None, help=f"{spoken_list(hf_tasks())} (default: from config.json; NLI labels give pairs)"),
    lang: str = typer.Option("en", help="language of the pipeline's tokenizer"),
    crf: bool = typer.Option(False, "--crf", help="ner: add a CRF, its transitions starting at zero"),
    constrained: bool = typer.Option(
        False, "--constrained", help="ner: decode under the tag scheme's constraints (default: the argmax, as HF)"
    ),
    scheme: str = typer.Option(None, help="ner: IOB1 for B-/I- tags trained as IOB1 (default: read from the tags)"),
    training_config: Path = typer.Option(
        None, help="also write a spacy train config fine-tuning MODEL_DIR further (init-config --from-hf's)"
    ),
    force: bool = force_option(),
):
    """Write OUTPUT: mlm_encoder with MODEL_DIR's encoder and mlm_ner or mlm_textcat
    holding its trained classifier. It predicts at once, trains further with
    `spacy train` and runs through `spacy_mlm optimize`."""
    from ..interop.hf_heads import hf_training_config, import_hf
    from ..util.io import atomic_write_text
    from ..util.outputs import claim_output
    from ..util.save import save_atomically

    with claim_output(output, "import-hf", directory=True, inputs=[model_dir], force=force):
        nlp = import_hf(model_dir, task=task, lang=lang, crf=crf, constrained=constrained, scheme=scheme)
        save_atomically(nlp, output)
    if training_config is not None:
        options = [f"--task {task}"] * bool(task) + [f"--lang {lang}"] * (lang != "en") + ["--crf"] * crf
        options += ["--constrained"] * constrained + [f"--scheme {scheme}"] * bool(scheme)
        command = " ".join(["python -m spacy_mlm import-hf", str(model_dir), str(output), *options,
                            "--training-config", str(training_config)])
        text = hf_training_config(str(model_dir), command, task=task, crf=crf, constrained=constrained, scheme=scheme,
                                  lang=lang, output=str(training_config))
        atomic_write_text(training_config, text)
        typer.echo(f"wrote {training_config}: spacy train {training_config} --paths.train ... --paths.dev ...")
    head = nlp.get_pipe(nlp.pipe_names[-1])
    detail = f", scheme {head.cfg['scheme']}" if "scheme" in head.cfg else ""
    detail += ", for sentence pairs (spacy_mlm.classify_pairs)" if head.cfg.get("pair_input") else ""
    typer.echo(f"wrote {output}: {' + '.join(nlp.pipe_names)}, labels {list(head.labels)}{detail}")


@app.command("export-hf", short_help="A pipeline's tagger or classifier as an HF directory.")
def export_hf_cli(
    pipeline: Path = typer.Argument(..., help="saved spaCy pipeline with an mlm_ner or mlm_textcat"),
    output: Path = typer.Argument(..., help="where to write the Hugging Face directory"),
    component: str = typer.Option(None, help="the mlm_ner or mlm_textcat to export (default: the only one)"),
    refuse_crf: bool = typer.Option(
        False, "--refuse-crf", help="fail on a CRF tagger instead of exporting its emissions with a warning"
    ),
    force: bool = force_option(),
):
    """Write OUTPUT: a *ForTokenClassification or *ForSequenceClassification directory
    (config.json with id2label, safetensors, tokenizer) of COMPONENT and its encoder,
    which transformers' pipelines load."""
    import spacy

    from ..interop.hf_heads import export_hf
    from ..util.outputs import claim_output

    if not (pipeline / "config.cfg").is_file():
        raise typer.BadParameter(f"{pipeline} is not a saved spaCy pipeline (no config.cfg)")
    with claim_output(output, "export-hf", directory=True, inputs=[pipeline], force=force):
        architecture = export_hf(spacy.load(pipeline), output, component=component, refuse_crf=refuse_crf)
    typer.echo(f"wrote {output} ({architecture})")
