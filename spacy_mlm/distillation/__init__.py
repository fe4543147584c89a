"""Distillation: a smaller student pipeline trained on the soft outputs of one or
more trained teacher pipelines over unlabelled text (`spacy_mlm distill`)."""
