"""Evaluating trained pipelines on gold files: `evaluate` (`evaluate_pipeline`:
a pipeline, and optionally a baseline, scored on a gold file for ner, textcat
or nli; what `spacy_mlm evaluate` computes) and `report` (its printed lines,
metrics.json, charts and displaCy page). It loads files and runs pipelines, so
it sits above `pipeline/`; the counting it uses is `scoring/`, which stays pure."""
