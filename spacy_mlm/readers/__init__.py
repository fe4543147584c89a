"""The registered corpus readers: the task data formats people already have
(CoNLL, NLI, text classes, WiC/WSD, pair scores, raw text) read into spaCy
Examples, bad lines named by file and line."""
