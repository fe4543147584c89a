"""The maths of text and sentence-pair classification, apart from any component:
its losses on logits (`losses.py`) and zero-shot scores from an NLI model's
entailment logits (`zero_shot.py`). The head is `models/classifier.py`, the
components `pipeline/textcat.py`, `pipeline/regressor.py` and `pipeline/zero_shot.py`."""
