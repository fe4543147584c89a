"""Training machinery shared by every component: the optimizer (a torch step
for torch parameters, following the config's `[training.optimizer]`), its
learning-rate schedule, the console logger with progress, and the templates
of the configs `spacy_mlm init-config` writes (configs/ is made from them)."""
