import pytest

LISTENER = {"@architectures": "spacy_mlm.EncoderListener.v1", "pooling": "mean"}

TRAIN = [
    ("What a wonderful and moving story.", "POS"),
    ("The film was dull and far too long.", "NEG"),
    ("A wonderful film.", "POS"),
    ("Dull and too long.", "NEG"),
]
ADJECTIVES = ("wonderful", "dull", "long", "moving")


def build_tagger_textcat(path):
    """A blank pipeline: mlm_encoder with spaCy's tagger and textcat listening to it."""
    import spacy

    import spacy_mlm  # noqa: F401

    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(path)}})
    nlp.add_pipe(
        "textcat",
        config={
            "model": {
                "@architectures": "spacy.TextCatReduce.v1",
                "exclusive_classes": True,
                "use_reduce_first": False,
                "use_reduce_last": False,
                "use_reduce_max": False,
                "use_reduce_mean": True,
                "tok2vec": LISTENER,
            }
        },
    )
    nlp.add_pipe("tagger", config={"model": {"@architectures": "spacy.Tagger.v2", "tok2vec": LISTENER}})
    return nlp


def tagger_textcat_examples(nlp):
    from spacy.training import Example

    examples = []
    for text, label in TRAIN:
        doc = nlp.make_doc(text)
        tags = ["ADJ" if t.text.lower() in ADJECTIVES else "X" for t in doc]
        cats = {"POS": float(label == "POS"), "NEG": float(label == "NEG")}
        examples.append(Example.from_dict(doc, {"cats": cats, "tags": tags}))
    return examples


def train_tagger_textcat(path, steps: int, seed: int = 0):
    """Train a few steps; return (nlp, per-step losses)."""
    import spacy

    spacy.util.fix_random_seed(seed)
    nlp = build_tagger_textcat(path)
    examples = tagger_textcat_examples(nlp)
    optimizer = nlp.initialize(lambda: examples)
    history = []
    for _ in range(steps):
        losses = {}
        nlp.update(examples, sgd=optimizer, losses=losses)
        history.append(losses)
    return nlp, history


@pytest.fixture(scope="session")
def tagger_textcat_nlp(tiny_model_dir):
    nlp, _ = train_tagger_textcat(tiny_model_dir, steps=3)
    return nlp
