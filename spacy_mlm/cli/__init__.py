"""The `spacy_mlm` command line (`python -m spacy_mlm ...`). Each command lives in
its own module and registers itself on `app` with `@app.command(...)`. Failures
of every command are reported by `failures.CommandGroup`: one `error: ...`
line, a traceback only with `--verbose`."""
import typer

from .failures import CommandGroup

app = typer.Typer(
    cls=CommandGroup,
    name="spacy_mlm",
    help="Masked-language-model encoders for spaCy: pretrain, fine-tune, evaluate.",
    no_args_is_help=True,
    add_completion=False,
    # plain click help: rich markup would eat "[pretraining]" and "[default: ...]" in help texts
    rich_markup_mode=None,
)

# Command modules (importing them registers their commands on `app`).
from . import demo, encode  # noqa: E402,F401
from . import convert_conll, evaluate_ner, compare  # noqa: E402,F401
from . import fit_transform, wic  # noqa: E402,F401
from . import pretrain, fill_mask  # noqa: E402,F401
from . import evaluate  # noqa: E402,F401
from . import init_config, debug_data  # noqa: E402,F401
from . import optimize  # noqa: E402,F401
from . import sense_tune  # noqa: E402,F401
from . import train  # noqa: E402,F401
from . import apply  # noqa: E402,F401
from . import hf_interop  # noqa: E402,F401
from . import calibrate, uncertain  # noqa: E402,F401
from . import distill  # noqa: E402,F401
