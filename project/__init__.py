"""Package data marker: setup.py installs this folder as `spacy_mlm.project`, the
spaCy project that `spacy_mlm demo` unpacks and runs (a regular package, so an
editable install finds it too). Not imported by the project itself."""
