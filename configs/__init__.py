"""Package data marker: setup.py installs this folder as `spacy_mlm.configs`, the
training configs the spaCy project reads (a regular package, so an editable
install finds it too). Every .cfg here is written by `spacy_mlm init-config` /
`init-pretrain-config` from `spacy_mlm/training/templates` (the command is in
each file's header; tests/test_configs.py checks they match): change the
template, then rewrite the file."""
