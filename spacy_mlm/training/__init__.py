"""What fine-tuning with `spacy train` (and `spacy_mlm train` on several
processes) needs beyond spaCy's own loop: the optimizer with layer-wise decay
(`[training.optimizer]`, stepped in torch by `models/torch_stepper.py`), its
learning-rate schedule, the console logger with progress, the data checks, the
precision choice, data-parallel training, and the templates of the configs
`spacy_mlm init-config` writes (configs/ is made from them)."""
