"""spacy-mlm: masked-language-model encoders in spaCy pipelines.

The public API is what `__all__` lists below plus the registered names
(`mlm_encoder`, `spacy_mlm.EncoderListener.v1`, ...; docs/reference.md). The
benchmarks in bench/ import nothing else; submodules may move.

Importing the package is light: it imports none of its modules (torch,
transformers and spaCy load only when something needs them). The names below
are loaded on first use (PEP 562 `__getattr__`), and spaCy finds the factories
and registered functions through setup.py's entry points, which import the one
module that registers each name."""
from importlib import import_module

__version__ = "0.1.0"

# exported name -> (module, attribute in that module)
_EXPORTS = {
    # Pipelines, encoders and sentence pairs
    "get_hf_model": ("spacy_mlm.models.encoder", "get_hf_model"),
    "load_mlm_model": ("spacy_mlm.models.hf", "load_mlm_model"),
    "classify_pair": ("spacy_mlm.pipeline.textcat", "classify_pair"),
    "classify_pairs": ("spacy_mlm.pipeline.textcat", "classify_pairs"),
    "MLMEncoder": ("spacy_mlm.pipeline.encoder", "MLMEncoder"),
    "apply_pipeline": ("spacy_mlm.inference", "apply_pipeline"),
    "make_pair_doc": ("spacy_mlm.tokenization.pair", "make_pair_doc"),
    "length_batches": ("spacy_mlm.tokenization.batching", "length_batches"),
    # Fine-tuned Hugging Face classifiers in and out; zero-shot classification from NLI
    "import_hf": ("spacy_mlm.interop.hf_heads", "import_hf"),
    "export_hf": ("spacy_mlm.interop.hf_heads", "export_hf"),
    "add_zero_shot": ("spacy_mlm.pipeline.zero_shot", "add_zero_shot"),
    # Readers
    "select": ("spacy_mlm.readers.common", "select"),
    "conll_documents_to_docs": ("spacy_mlm.readers.conll", "conll_documents_to_docs"),
    "read_conll": ("spacy_mlm.readers.conll", "read_conll"),
    "read_corpus": ("spacy_mlm.readers.corpus", "read_corpus"),
    "read_nli": ("spacy_mlm.readers.nli", "read_nli"),
    "read_pair_scores": ("spacy_mlm.readers.pair_scores", "read_pair_scores"),
    "read_textcat": ("spacy_mlm.readers.textcat", "read_textcat"),
    "read_wic_split": ("spacy_mlm.readers.wic", "read_wic_split"),
    "target_span": ("spacy_mlm.readers.wic", "target_span"),
    "wic_training_example": ("spacy_mlm.readers.wic", "wic_training_example"),
    "read_wsd_corpus": ("spacy_mlm.readers.wsd", "read_wsd_corpus"),
    "sentence_doc": ("spacy_mlm.readers.wsd", "sentence_doc"),
    # Tag schemes and scoring
    "paired_bootstrap": ("spacy_mlm.scoring.bootstrap", "paired_bootstrap"),
    "correctness_counts": ("spacy_mlm.scoring.classes", "correctness_counts"),
    "pearson": ("spacy_mlm.scoring.regression", "pearson"),
    "spearman": ("spacy_mlm.scoring.regression", "spearman"),
    "doc_entities": ("spacy_mlm.scoring.entities", "doc_entities"),
    "per_doc_counts": ("spacy_mlm.scoring.entities", "per_doc_counts"),
    "score_entities": ("spacy_mlm.scoring.entities", "score_entities"),
    "cosine_rows": ("spacy_mlm.util.vectors", "cosine_rows"),
    # Probabilities a user can act on: calibration error, precision by coverage, temperatures (docs/ner.md)
    "expected_calibration_error": ("spacy_mlm.scoring.calibration", "expected_calibration_error"),
    "reliability_bins": ("spacy_mlm.scoring.calibration", "reliability_bins"),
    "precision_coverage_area": ("spacy_mlm.scoring.calibration", "precision_coverage_area"),
    "precision_at_coverage": ("spacy_mlm.scoring.calibration", "precision_at_coverage"),
    "calibrate_entities": ("spacy_mlm.evaluation.calibration", "calibrate_entities"),
    "reliability_chart": ("spacy_mlm.util.charts", "reliability_chart"),
    "machine_info": ("spacy_mlm.util.machine", "machine_info"),  # the CPU a figure came from
    "make_tag_labels": ("spacy_mlm.tagging.schemes", "make_tag_labels"),
    "spans_to_tags": ("spacy_mlm.tagging.schemes", "spans_to_tags"),
    "tags_to_spans": ("spacy_mlm.tagging.schemes", "tags_to_spans"),
    # Contextual word vectors, word in context, word senses
    "restore_vector_hooks": ("spacy_mlm.similarity.hooks", "restore_vector_hooks"),
    "layer_indices": ("spacy_mlm.similarity.layers", "layer_indices"),
    "docs_before": ("spacy_mlm.vectors_pipeline", "docs_before"),
    "make_vectors_pipeline": ("spacy_mlm.vectors_pipeline", "make_vectors_pipeline"),
    "SenseInventory": ("spacy_mlm.similarity.senses", "SenseInventory"),
    "make_transform_chain": ("spacy_mlm.similarity.transforms", "make_transform_chain"),
    "labels_of": ("spacy_mlm.similarity.wic_cosine", "labels_of"),
    "mix_context": ("spacy_mlm.similarity.wic_cosine", "mix_context"),
    "pos_of": ("spacy_mlm.similarity.wic_cosine", "pos_of"),
    "threshold_evaluation": ("spacy_mlm.similarity.wic_cosine", "threshold_evaluation"),
    "wic_scores": ("spacy_mlm.similarity.wic_cosine", "wic_scores"),
    # Masked-LM pretraining and fill-mask
    "FillMask": ("spacy_mlm.fill_mask", "FillMask"),
    "load_pretraining_config": ("spacy_mlm.pretraining.config", "load_pretraining_config"),
    "PretrainingExample": ("spacy_mlm.pretraining.data", "Example"),
    "MaskingSettings": ("spacy_mlm.pretraining.data", "MaskingSettings"),
    "collate": ("spacy_mlm.pretraining.data", "collate"),
    "tokenize_documents": ("spacy_mlm.pretraining.data", "tokenize_documents"),
    "pretrain": ("spacy_mlm.pretraining.loop", "pretrain"),
    "to_inputs": ("spacy_mlm.pretraining.loop", "to_inputs"),
    "forward_precision": ("spacy_mlm.pretraining.loop", "forward_precision"),
    "uniform_distribution": ("spacy_mlm.pretraining.masking", "uniform_distribution"),
    "PretrainingModel": ("spacy_mlm.pretraining.objectives", "PretrainingModel"),
    "pack_documents": ("spacy_mlm.pretraining.packing", "pack_documents"),
    "train_tokenizer": ("spacy_mlm.pretraining.tokenizer", "train_tokenizer"),
    # A tiny BERT directory for tests and quick runs
    "make_tiny_bert": ("spacy_mlm.testing", "make_tiny_bert"),
    # The fine-tuning precision init-config writes for this machine (bf16 where it is native)
    "precision_setting": ("spacy_mlm.training.precision", "precision_setting"),
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    """Load an exported name from its module on first use (then it is a plain attribute)."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'spacy_mlm' has no attribute {name!r}")
    module, attribute = _EXPORTS[name]
    value = getattr(import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__():
    return sorted({*globals(), *_EXPORTS})
