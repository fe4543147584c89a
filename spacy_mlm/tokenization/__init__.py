"""From a Doc's text to the encoder's input and back: subword pieces with
character offsets (`tokenizer.py`), their alignment to spaCy tokens
(`align.py`), windows over long documents (`window.py`), grouping windows into
forward passes (`batching.py`) and sentence-pair Docs (`pair.py`). Pure Python
and numpy, no model."""
