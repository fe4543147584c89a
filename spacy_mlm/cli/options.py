"""Options several commands share, spelled as spaCy's own commands spell them."""
import typer

# for a command that passes config overrides (`--section.key value`) on, as spacy train does
PASSES_OVERRIDES = {"allow_extra_args": True, "ignore_unknown_options": True}


def gpu_id_option(default=-1, help: str = "GPU to run on (-1: the CPU), as in spacy train"):
    return typer.Option(default, "--gpu-id", "-g", help=help)


def quiet_option():
    return typer.Option(False, "--quiet", "-q", help="no progress bar or progress lines on stderr")


def force_option(help: str = "replace OUTPUT even if it is not an earlier output of this command"):
    return typer.Option(False, "--force", help=help)


def use_gpu(gpu_id: int) -> None:
    """Run spaCy's ops and every torch module on GPU `gpu_id` (-1: the CPU)."""
    from spacy.cli._util import setup_gpu

    setup_gpu(gpu_id, silent=True)
