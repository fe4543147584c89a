"""spacy-mlm: masked-language-model encoders in spaCy pipelines."""
__version__ = "0.1.0"

# Importing these registers the factories and architectures (setup.py entry
# points do the same for spaCy when the package is installed).
from .models import encoder, listener, tagger  # noqa: E402,F401
from .tokenization.pair import make_pair_doc  # noqa: E402,F401
from .pipeline.encoder import MLMEncoder  # noqa: E402,F401
from .pipeline import ner  # noqa: E402,F401
from .readers import conll  # noqa: E402,F401
from .models import classifier as _classifier_head  # noqa: E402,F401
from .training import optimizer as _layer_decay  # noqa: E402,F401
from .pipeline import classifier  # noqa: E402,F401
from .pipeline.classifier import classify_pair, classify_pairs  # noqa: E402,F401
from .readers import nli, textcat  # noqa: E402,F401
from .pipeline import vectors  # noqa: E402,F401
from .util import save as _atomic_save  # noqa: E402,F401  (registers spacy_mlm.atomic_to_disk.v1)
