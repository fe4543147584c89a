"""What the bench scripts share, so that no script imports another: `common`
(paths, the flags every script spells alike, timing, the last JSON line),
`precisions` (`--precision` of the fine-tuning benches), `peers` (the
spacy-transformers pipelines and the Hugging Face fine-tuning loop every
comparison runs), and the training recipes more than one script runs:
`textcat`, `ner`, `wic_vectors`, `pretraining`.

Imported first by every script: the environment below must be set before
tokenizers and transformers load.
"""
import os

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
