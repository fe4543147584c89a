"""spacy-mlm: masked-language-model encoders in spaCy pipelines.

The public API is what `__all__` lists below plus the registered names
(`mlm_encoder`, `spacy_mlm.EncoderListener.v1`, ...; docs/reference.md). The
benchmarks in bench/ import nothing else; submodules may move."""
__version__ = "0.1.0"

# Importing these modules registers the factories, architectures, readers,
# optimizer, schedule, logger, scorer, callback and misc functions (one per setup.py entry point:
# the entry points do the same for spaCy when the package is installed).
from .models import classifier as _classifier_head, encoder as _encoder, listener as _listener  # noqa: E402,F401
from .models import senses as _sense_head, tagger as _tagger  # noqa: E402,F401
from .pipeline import textcat as _textcat, encoder as _encoder_component, ner as _ner  # noqa: E402,F401
from .pipeline import regressor as _regressor, senses as _senses, vectors as _vectors  # noqa: E402,F401
from .pipeline import zero_shot as _zero_shot  # noqa: E402,F401
from .readers import conll as _conll, nli as _nli, pair_scores as _pair_scores, textcat as _textcat  # noqa: E402,F401
from .scoring import regression as _regression_scorer, textcat as _textcat_scorer, wic as _wic_scorer  # noqa: E402,F401
from .readers import context as _sentences_in_context  # noqa: E402,F401
from .similarity import transforms as _transforms  # noqa: E402,F401
from .training import logger as _console_logger, optimizer as _layer_decay, schedules as _schedules  # noqa: E402,F401
from .util import save as _atomic_save  # noqa: E402,F401

# Pipelines, encoders and sentence pairs
from .models.encoder import get_hf_model  # noqa: E402
from .models.hf import load_mlm_model  # noqa: E402
from .pipeline.textcat import classify_pair, classify_pairs  # noqa: E402
from .pipeline.encoder import MLMEncoder  # noqa: E402
from .inference import apply_pipeline  # noqa: E402
from .tokenization.batching import length_batches  # noqa: E402
from .tokenization.pair import make_pair_doc  # noqa: E402

# Fine-tuned Hugging Face classifiers in and out; zero-shot classification from NLI
from .interop.hf_heads import export_hf, import_hf  # noqa: E402
from .pipeline.zero_shot import add_zero_shot  # noqa: E402

# Readers
from .readers.common import select  # noqa: E402
from .readers.conll import conll_documents_to_docs, read_conll  # noqa: E402
from .readers.corpus import read_corpus  # noqa: E402
from .readers.nli import read_nli  # noqa: E402
from .readers.pair_scores import read_pair_scores  # noqa: E402
from .readers.textcat import read_textcat  # noqa: E402
from .readers.wic import read_wic_split, target_span, wic_training_example  # noqa: E402
from .readers.wsd import read_wsd_corpus, sentence_doc  # noqa: E402

# Tag schemes and scoring
from .scoring.bootstrap import paired_bootstrap  # noqa: E402
from .scoring.classes import correctness_counts  # noqa: E402
from .scoring.regression import pearson, spearman  # noqa: E402
from .scoring.entities import doc_entities, per_doc_counts, score_entities  # noqa: E402
from .util.vectors import cosine_rows  # noqa: E402
from .tagging.schemes import make_tag_labels, spans_to_tags, tags_to_spans  # noqa: E402

# Contextual word vectors, word in context, word senses
from .similarity.hooks import restore_vector_hooks  # noqa: E402
from .similarity.layers import contextual_token_vectors, layer_indices  # noqa: E402
from .vectors_pipeline import docs_before, make_vectors_pipeline  # noqa: E402
from .similarity.senses import SenseInventory  # noqa: E402
from .similarity.transforms import make_transform_chain  # noqa: E402
from .similarity.wic import labels_of, mix_context, pos_of, threshold_evaluation, wic_scores  # noqa: E402

# Masked-LM pretraining and fill-mask
from .fill_mask import FillMask  # noqa: E402
from .pretraining.config import load_pretraining_config  # noqa: E402
from .pretraining.data import Example as PretrainingExample  # noqa: E402
from .pretraining.data import MaskingSettings, collate, tokenize_documents  # noqa: E402
from .pretraining.loop import forward_precision, pretrain, to_inputs  # noqa: E402
from .pretraining.masking import uniform_distribution  # noqa: E402
from .pretraining.objectives import PretrainingModel  # noqa: E402
from .pretraining.packing import pack_documents  # noqa: E402
from .pretraining.tokenizer import train_tokenizer  # noqa: E402

# A tiny BERT directory for tests and quick runs
from .testing import make_tiny_bert  # noqa: E402

# The fine-tuning precision init-config writes for this machine (bf16 where it is native)
from .training.precision import precision_setting  # noqa: E402

__all__ = [
    "__version__",
    "get_hf_model", "load_mlm_model", "classify_pair", "classify_pairs", "MLMEncoder", "apply_pipeline", "make_pair_doc",
    "length_batches",
    "import_hf", "export_hf", "add_zero_shot",
    "select", "conll_documents_to_docs", "read_conll", "read_corpus", "read_nli", "read_pair_scores", "read_textcat",
    "read_wic_split", "target_span", "wic_training_example", "read_wsd_corpus", "sentence_doc",
    "paired_bootstrap", "correctness_counts", "pearson", "spearman", "doc_entities", "per_doc_counts", "score_entities", "cosine_rows",
    "make_tag_labels", "spans_to_tags", "tags_to_spans",
    "restore_vector_hooks", "contextual_token_vectors", "layer_indices", "docs_before", "make_vectors_pipeline", "SenseInventory",
    "make_transform_chain", "labels_of", "mix_context", "pos_of", "threshold_evaluation", "wic_scores",
    "FillMask", "load_pretraining_config", "PretrainingExample", "MaskingSettings", "collate",
    "tokenize_documents", "pretrain", "to_inputs", "forward_precision", "uniform_distribution", "PretrainingModel",
    "pack_documents",
    "train_tokenizer",
    "make_tiny_bert",
    "precision_setting",
]
