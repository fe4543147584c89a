"""Text and sentence-pair classification on the shared encoder: the head
architecture (`model.py`), its losses (`losses.py`) and layer-wise learning-rate
decay for fine-tuning (`optimizer.py`). The pipeline component is
`spacy_mlm.pipeline.textcat`."""
