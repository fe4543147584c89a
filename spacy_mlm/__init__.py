"""spacy-mlm: masked-language-model encoders in spaCy pipelines."""
__version__ = "0.1.0"
