"""Continued pretraining of an encoder on raw text (`spacy_mlm pretrain`,
`spacy_mlm sense-tune`), so that it knows a domain's words before any labelled
data is spent: corpora, masking, objectives (MLM, NSP, RTD) as objectives of the
engine."""
