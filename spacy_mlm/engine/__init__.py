"""The one torch training engine: what every run that trains torch weights
outside spaCy's loop (pretraining, sense tuning, distillation) or beside it
(data-parallel `spacy_mlm train`) shares. See `trainer.py`."""
