"""Package data marker: setup.py installs this folder as `spacy_mlm.configs`, the
training configs the spaCy project reads (a regular package, so an editable
install finds it too)."""
