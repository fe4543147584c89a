"""50 sentences for comparing our imported pipelines with transformers' own:
the tiny models' sample text, headlines without final punctuation, and a few
whose spaCy tokens are not transformers' words ("Monday's", "U.S.", "don't",
"3.5"), where the two may differ for that reason alone."""
from spacy_mlm.testing import SAMPLE_TEXT

MORE = [
    "Anna Berg flew to Oslo",
    "Peter Grant joins Acme Bank",
    "Maria Lopez opens a park in Concord",
    "The Northwind Company wins in Geneva",
    "Berlin and Paris sign the new treaty",
    "Oslo team won the match",
    "Anna met Peter in the park on Saturday",
    "The bank in Oslo opened an account for Maria.",
    "Children from Concord play football in Berlin",
    "Peter Grant, Anna Berg and Maria Lopez met in Paris.",
    "The committee of Acme Bank met on Monday.",
    "A quiet man sat by the river bank in Geneva.",
    "Northwind Company prices rose in the second quarter",
    "She read an old book about Walden Pond.",
    "The town of Concord lies near a quiet wood.",
    "Maria works for the committee in Geneva.",
    "Our team flew from Oslo to Paris",
    "Peter read the story to the children.",
    "The film about Berlin was far too long.",
    "Anna Berg is chief economist at Northwind Company.",
    "The treaty was discussed in Paris and Berlin.",
    "Music played on the stage in Oslo tonight",
    "A man is playing a guitar in Concord.",
    "The cat of Maria Lopez sleeps on the wall.",
    "Geneva and Oslo are quiet towns",
    "Acme Bank joined the Northwind Company",
    "The rain made the park in Berlin muddy.",
    "Peter Grant won the match on Saturday",
    "Monday's match in Oslo was dull.",
    "The U.S. team flew to Paris.",
    "Anna don't play football in Berlin.",
    "Prices rose by 3.5 percent in Geneva.",
    "Maria Lopez (Acme Bank) met Peter Grant.",
    "Nobody in Concord read the book",
]
SENTENCES = list(SAMPLE_TEXT) + MORE
assert len(SENTENCES) == 50
