"""The models: PyTorch modules (the Hugging Face encoder, the task heads) and the
thinc layers that wrap them for spaCy, registered as `spacy_mlm.<Thing>.vN`
architectures. Data stays in torch tensors on the model's device from the
encoder to every head (see docs/ARCHITECTURE.md)."""
