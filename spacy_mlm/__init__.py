"""spacy-mlm: masked-language-model encoders in spaCy pipelines."""
__version__ = "0.1.0"

# Importing these registers the factories and architectures (setup.py entry
# points do the same for spaCy when the package is installed).
from .encoder import listener, model  # noqa: E402,F401
from .encoder.pair import make_pair_doc  # noqa: E402,F401
from .pipeline import encoder  # noqa: E402,F401
from .pipeline import similarity  # noqa: E402,F401
