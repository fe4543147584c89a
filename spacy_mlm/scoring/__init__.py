"""Every scorer and evaluation routine; the CLI only parses and prints.

Pure counting: `entities` (exact-span P/R/F1), `classes` (confusion matrix,
right/wrong counts), `bootstrap` (paired bootstrap of a difference),
`similarity` (cosine, threshold tuning for same-meaning pairs). On spaCy
objects: `textcat` (the `spacy_mlm.textcat_scorer.v1` scorer), `evaluate`
(`evaluate_pipeline`: a pipeline, and optionally a baseline, scored on a gold
file for ner, textcat or nli) and `report` (its printed lines, metrics.json,
charts and displaCy page)."""
