"""Fine-tuned Hugging Face token and sequence classifiers into our pipeline
components and back (`spacy_mlm import-hf` / `export-hf`), so that work done in
either ecosystem is not lost in the other."""
