"""Every scorer; evaluating a pipeline on a file is `spacy_mlm.evaluation`.

Pure counting: `entities` (exact-span P/R/F1), `classes` (confusion matrix,
right/wrong counts), `bootstrap` (paired bootstrap of a difference),
`similarity` (threshold tuning for same-meaning pairs). On spaCy
objects: `textcat` (the `spacy_mlm.textcat_scorer.v1` scorer), `regression`
and `wic` (the scorers of the regressor and the sense component)."""
