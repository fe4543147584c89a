"""The table of components the contract suite checks (tests/contract/test_contract.py).

Every factory spacy-mlm registers (setup.py's `spacy_factories` entry points)
and spaCy's own tagger, ner and textcat listening to `mlm_encoder` has a row
here: the pipeline it runs in, the examples it initializes and trains on, the
Docs it predicts on, what it predicts (`read`: floats compared within a
tolerance, decisions compared exactly), what a well-formed prediction is
(`check`), an example with a label it does not know, and a bad setting. A new
component gets every check of the contract by being listed in `CASES`.

Everything runs on the tiny BERT of `spacy_mlm.testing` (2 layers, width 32,
64 positions): the long text below is windowed.
"""
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy
from spacy.language import Language
from spacy.tokens import Doc, Span
from spacy.training import Example

import spacy_mlm
from spacy_mlm.readers.wic import SAME_SENSE, WicExample, wic_training_example

from ..pipeline.test_ner import DATA as NER_DATA
from ..pipeline.test_ner import examples as ner_examples

LONG_TEXT = " ".join(["The committee met in Geneva to discuss the new treaty ."] * 9)  # 99 tokens: two windows
BLANK_TEXTS = ("", " ", "  \n\t \u00a0")


@dataclass
class Prediction:
    """What a component set on one Doc: `values` (floats, compared within a
    tolerance) and `decisions` (labels, entities, pieces: compared exactly)."""

    values: Dict[str, numpy.ndarray]
    decisions: Any


@dataclass
class Refusal:
    """A training example the component must refuse (`example`), the error
    it raises and a pattern its message matches."""

    example: Callable[[Language], Example]
    error: type
    match: str


@dataclass
class BadSetting:
    """A setting of the component's factory (or of its model) set to a bad value."""

    config: Dict[str, Any]
    setting: str
    value: Any


@dataclass
class Training:
    """A few updates on the fixed batch of the row's examples."""

    learn_rate: float
    steps: int
    # components run before the update and not updated, as `spacy train` runs its
    # frozen_components listed in annotating_components
    frozen: Tuple[str, ...] = ()

    def update_settings(self) -> Dict[str, Any]:
        return {"exclude": list(self.frozen), "annotates": list(self.frozen)}


@dataclass
class ComponentCase:
    id: str
    factory: str
    name: str  # the component under test in its pipeline
    pipeline: Sequence[Tuple[str, str, Dict[str, Any]]]  # (name, factory, config), in order
    examples: Callable[[Language], List[Example]]  # what it initializes (and trains) on
    docs: Callable[[Language], List[Doc]]  # Docs of mixed lengths it predicts on
    blank_docs: Callable[[Language], List[Doc]]  # empty and whitespace Docs
    read: Callable[[Language, Doc], Prediction]
    check: Callable[[Language, Doc], None]  # asserts a well-formed prediction
    labels: Optional[Tuple[str, ...]]  # what initialize takes from the examples; None: no labels
    bad_setting: BadSetting
    training: Optional[Training]  # None: not trained by its own loss (see `not_trained`)
    unknown_label: Optional[Refusal]  # None: see `no_refusal`
    prepare: Callable[[Language, List[Example]], None] = lambda nlp, examples: None  # after training
    not_trained: str = ""
    no_refusal: str = ""
    # why a Doc without tokens is predicted differently alone and among others, if it is
    # (such Docs are then left out of the batch comparisons)
    empty_doc_depends_on_batch: str = ""
    # what a Doc sent back by an `nlp.pipe(n_process=N)` worker needs first
    from_worker: Callable[[Doc], Doc] = lambda doc: doc


def tiny_path_config(pipeline, model_dir: str):
    """The pipeline's configs with the encoder's model path filled in."""
    out = []
    for name, factory, config in pipeline:
        if factory == "mlm_encoder":
            config = {**config, "model": {"path": model_dir, **config.get("model", {})}}
        out.append((name, factory, config))
    return out


# -- texts and examples ---------------------------------------------------------------

SINGLE_TEXTS = ["Oslo", NER_DATA[0][0], LONG_TEXT, "The river bank was muddy .", NER_DATA[1][0],
                "What a wonderful and moving story"]
SENTIMENT = [
    ("What a wonderful and moving story .", {"POS"}),
    ("The film was dull and far too long .", {"NEG"}),
    ("A wonderful film by the river bank .", {"POS", "EXTRA"}),
    ("Dull and too long , like the rain in town .", {"NEG", "EXTRA"}),
]
NLI_LABELS = ("entailment", "neutral", "contradiction")
PAIRS = [
    ("The cat sleeps on the warm stone wall.", "A cat is resting.", "entailment"),
    ("A man is playing a guitar on the stage.", "Nobody is playing any music tonight.", "contradiction"),
    ("Children play football in the park every Saturday.", "Kids play.", "entailment"),
    ("Prices rose sharply in the second quarter.", "Prices fell.", "contradiction"),
    ("He sat by the window and read an old book.", "He read in the morning.", "neutral"),
]
PAIR_TEXTS = [("Oslo", "A town."), (PAIRS[0][0], PAIRS[0][1]), (LONG_TEXT, "The committee met."),
              ("It rains.", "The river bank was muddy after the rain in the town of Concord."), (PAIRS[3][0], "Up.")]
WIC = [
    WicExample("bank", "N", 6, 7, "She opened an account at the bank .", "He works as a clerk in a bank downtown .",
               True, 1),
    WicExample("bank", "N", 3, 6, "The river bank was muddy .", "She opened an account at the bank .", False, 2),
    WicExample("play", "V", 1, 0, "Children play football in the park .", "Play the guitar on the stage .", False, 3),
    WicExample("read", "V", 5, 1, "He sat by the window and read an old book .", "She read the story twice .", True, 4),
]
WIC_LONG = WicExample("treaty", "N", 8, 1, LONG_TEXT, "A treaty was signed .", True, 5)


def ner_unknown(nlp: Language) -> Example:
    reference = nlp.make_doc("Anna flew to Mars .")
    reference.ents = [Span(reference, 3, 4, label="PLANET")]
    return Example(nlp.make_doc(reference.text), reference)


def single_docs(nlp: Language) -> List[Doc]:
    return [nlp.make_doc(text) for text in SINGLE_TEXTS]


def blank_single_docs(nlp: Language) -> List[Doc]:
    return [nlp.make_doc(text) for text in BLANK_TEXTS]


def blank_pair_docs(nlp: Language) -> List[Doc]:
    return [spacy_mlm.make_pair_doc(nlp, a, b) for a, b in [("", ""), (" ", "A town."), ("A town.", "\n\t ")]]


def pair_docs(nlp: Language) -> List[Doc]:
    return [spacy_mlm.make_pair_doc(nlp, a, b) for a, b in PAIR_TEXTS]


def cats_examples(labels: Sequence[str]) -> Callable[[Language], List[Example]]:
    def make(nlp: Language) -> List[Example]:
        return [Example.from_dict(nlp.make_doc(text), {"cats": {label: float(label in gold) for label in labels}})
                for text, gold in SENTIMENT]

    return make


def cats_refusal(labels: Sequence[str], unknown: str, pair: bool = False) -> Refusal:
    """An example whose one positive class is `unknown`, the others known."""

    def example(nlp: Language) -> Example:
        doc = spacy_mlm.make_pair_doc(nlp, "It rains.", "It pours.") if pair else nlp.make_doc("A dull story .")
        return Example.from_dict(doc, {"cats": {**{label: 0.0 for label in labels}, unknown: 1.0}})

    return Refusal(example, spacy_mlm.errors.SpacyMlmError, unknown)


def nli_examples(nlp: Language) -> List[Example]:
    return [Example.from_dict(spacy_mlm.make_pair_doc(nlp, a, b), {"cats": {l: float(l == gold) for l in NLI_LABELS}})
            for a, b, gold in PAIRS]


def relatedness_examples(nlp: Language) -> List[Example]:
    scores = {"entailment": 4.5, "neutral": 3.0, "contradiction": 1.5}
    return [Example.from_dict(spacy_mlm.make_pair_doc(nlp, a, b), {"cats": {"relatedness": scores[gold]}})
            for a, b, gold in PAIRS]


def wic_examples(nlp: Language) -> List[Example]:
    return [wic_training_example(nlp, example) for example in WIC]


def wic_other_label(nlp: Language) -> Example:
    """A WiC pair whose gold is another cat than SAME_SENSE."""
    predicted = wic_training_example(nlp, WIC[0]).predicted
    reference = predicted.copy()
    reference.cats = {"OTHER_SENSE": 1.0}
    return Example(predicted, reference)


def wic_docs(nlp: Language) -> List[Doc]:
    """Pair Docs with their targets (WiC's), of mixed lengths, and a plain text."""
    docs = [wic_training_example(nlp, example).predicted for example in (WIC[1], WIC_LONG, WIC[2], WIC[0])]
    return docs[:2] + [nlp.make_doc("The river bank .")] + docs[2:]


def tagged_examples(nlp: Language) -> List[Example]:
    out = []
    for text, ents in NER_DATA:
        doc = nlp.make_doc(text)
        names = {i for s, e, _ in ents for i in range(s, e)}
        out.append(Example.from_dict(doc, {"tags": ["NAME" if i in names else "X" for i in range(len(doc))]}))
    return out


# -- what each predicts ------------------------------------------------------------------

def read_encoding(nlp: Language, doc: Doc) -> Prediction:
    encoding = doc._.mlm_encoding
    return Prediction({"hidden": encoding.hidden, "cls": encoding.cls}, tuple(encoding.pieces))


def check_encoding(nlp: Language, doc: Doc) -> None:
    encoding = doc._.mlm_encoding
    assert encoding.hidden.shape == (len(encoding.pieces), encoding.width)
    assert encoding.alignment.n_tokens == len(doc)


def entities(doc: Doc) -> Tuple:
    return tuple((e.start, e.end, e.label_) for e in doc.ents)


def read_tagged_entities(nlp: Language, doc: Doc) -> Prediction:
    return Prediction({"tag_probs": doc._.tag_probs}, entities(doc))


def check_tagged_entities(nlp: Language, doc: Doc) -> None:
    ner = nlp.get_pipe("ner")
    assert {e.label_ for e in doc.ents} <= set(ner.labels)
    assert doc._.tag_probs.shape == (len(doc), len(ner.tag_labels))
    numpy.testing.assert_allclose(doc._.tag_probs.sum(axis=1), 1.0, atol=1e-5)


def read_cats(name: str, exclusive: bool) -> Callable[[Language, Doc], Prediction]:
    """doc.cats in the component's label order; the decision is the argmax
    (exclusive classes) or the labels at or above the threshold."""

    def read(nlp: Language, doc: Doc) -> Prediction:
        component = nlp.get_pipe(name)
        scores = numpy.asarray([doc.cats[label] for label in component.labels], dtype="float32")
        if exclusive:
            return Prediction({"cats": scores}, component.labels[int(scores.argmax())])
        threshold = component.cfg["threshold"]
        chosen = tuple(label for label, score in zip(component.labels, scores) if score >= threshold)
        return Prediction({"cats": scores}, chosen)

    return read


def check_cats(name: str, exclusive: bool, empty_is_zero: bool = False) -> Callable[[Language, Doc], None]:
    """Every label scored, probabilities; exclusive ones sum to 1 (spaCy's own
    textcat gives all zeros to a Doc without tokens: `empty_is_zero`)."""

    def check(nlp: Language, doc: Doc) -> None:
        component = nlp.get_pipe(name)
        assert set(doc.cats) == set(component.labels)
        scores = numpy.asarray(list(doc.cats.values()))
        assert ((0 <= scores) & (scores <= 1)).all()
        if exclusive and not (empty_is_zero and len(doc) == 0):
            assert abs(scores.sum() - 1) < 1e-5

    return check


def read_values(nlp: Language, doc: Doc) -> Prediction:
    return Prediction({"cats": numpy.asarray(list(doc.cats.values()), dtype="float32")}, tuple(doc.cats))


def check_values(nlp: Language, doc: Doc) -> None:
    assert tuple(doc.cats) == nlp.get_pipe("regressor").labels


def senses(doc: Doc) -> Tuple:
    return tuple(token._.sense for token in doc)


def read_vectors(nlp: Language, doc: Doc) -> Prediction:
    return Prediction({"vectors": doc._.mlm_vectors}, (doc._.mlm_vectors.shape, senses(doc)))


def check_vectors(nlp: Language, doc: Doc) -> None:
    vectors = doc._.mlm_vectors
    assert vectors.ndim == 2 and vectors.shape[0] == len(doc)
    assert doc.vector.shape == (vectors.shape[1],)


def read_senses(nlp: Language, doc: Doc) -> Prediction:
    similarity = doc._.sense_similarity
    values = {"vectors": doc._.mlm_vectors}
    if similarity is not None:
        values["similarity"] = numpy.asarray([similarity])
    return Prediction(values, (doc._.mlm_vectors.shape, doc._.same_sense, senses(doc)))


def check_senses(nlp: Language, doc: Doc) -> None:
    check_vectors(nlp, doc)
    if "sense_pair" in doc.spans:
        assert -1 - 1e-5 <= doc._.sense_similarity <= 1 + 1e-5
        assert doc._.same_sense == (doc._.sense_similarity >= nlp.get_pipe("senses").threshold)


def read_tags(nlp: Language, doc: Doc) -> Prediction:
    """The tags, and the tagger's scores of this Doc (its model read again
    from the Doc's stored encoding)."""
    return Prediction({"scores": nlp.get_pipe("tagger").model.predict([doc])[0]}, tuple(t.tag_ for t in doc))


def check_tags(nlp: Language, doc: Doc) -> None:
    assert {t.tag_ for t in doc} <= set(nlp.get_pipe("tagger").labels)


def read_entities(nlp: Language, doc: Doc) -> Prediction:
    return Prediction({}, entities(doc))


def check_entities(nlp: Language, doc: Doc) -> None:
    assert {e.label_ for e in doc.ents} <= set(nlp.get_pipe("ner").labels)


# -- after training ----------------------------------------------------------------------

def fit_vectors(nlp: Language, examples: List[Example]) -> None:
    """A fitted transform and a sense inventory, so a round trip has both to keep."""
    docs = list(nlp.pipe([eg.predicted.text for eg in examples] + SINGLE_TEXTS, disable=["vectors"]))
    vectors = nlp.get_pipe("vectors")
    vectors.fit_transform(docs)
    river = nlp("The river bank was muddy .")
    vectors.add_sense_examples([(river[2], "bank%shore")])


def add_senses(nlp: Language, examples: List[Example]) -> None:
    river = nlp("The river bank was muddy .")
    nlp.get_pipe("senses").add_sense_examples([(river[2], "bank%shore")])


def add_zero_shot(nlp: Language, examples: List[Example]) -> None:
    spacy_mlm.add_zero_shot(nlp, ["sports", "music", "a place"], nli="nli", batch_size=4)


# -- the table ---------------------------------------------------------------------------

ENCODER = ("mlm_encoder", "mlm_encoder", {})
MEAN_LISTENER = {"@architectures": "spacy_mlm.EncoderListener.v1", "pooling": "mean"}
SPACY_TEXTCAT_MODEL = {"@architectures": "spacy.TextCatReduce.v1", "exclusive_classes": True,
                       "use_reduce_first": False, "use_reduce_last": False, "use_reduce_max": False,
                       "use_reduce_mean": True, "tok2vec": MEAN_LISTENER}
SPACY_NER_MODEL = {"@architectures": "spacy.TransitionBasedParser.v2", "state_type": "ner",
                   "extra_state_tokens": False, "hidden_width": 16, "maxout_pieces": 2, "use_upper": True,
                   "tok2vec": MEAN_LISTENER}


def mlm_ner_case(id: str, crf: bool, bad_setting: BadSetting, **settings) -> ComponentCase:
    """`settings`: the component's other settings; `listener`: its model's tok2vec."""
    listener = settings.pop("listener", {})
    config = {"store_probs": True, **settings, "model": {"crf": crf, "tok2vec": listener}}
    return ComponentCase(
        id=id, factory="mlm_ner", name="ner",
        pipeline=[ENCODER, ("ner", "mlm_ner", config)],
        examples=ner_examples, docs=single_docs, blank_docs=blank_single_docs,
        read=read_tagged_entities, check=check_tagged_entities, labels=("LOC", "ORG", "PER"),
        bad_setting=bad_setting, training=Training(learn_rate=5e-3, steps=6),
        unknown_label=Refusal(ner_unknown, spacy_mlm.errors.SpacyMlmError, "PLANET"),
    )


def mlm_textcat_case(id: str, labels: Tuple[str, ...], exclusive: bool, learn_rate: float, bad_setting: BadSetting,
                     unknown: str) -> ComponentCase:
    head = {"exclusive_classes": exclusive, "tok2vec": {"pooling": "cls" if exclusive else "doc_mean"}}
    return ComponentCase(
        id=id, factory="mlm_textcat", name="textcat",
        pipeline=[ENCODER, ("textcat", "mlm_textcat", {"model": head})],
        examples=cats_examples(labels), docs=single_docs, blank_docs=blank_single_docs,
        read=read_cats("textcat", exclusive), check=check_cats("textcat", exclusive), labels=labels,
        bad_setting=bad_setting, training=Training(learn_rate, steps=6), unknown_label=cats_refusal(labels, unknown),
    )


CASES: List[ComponentCase] = [
    ComponentCase(
        id="mlm_encoder", factory="mlm_encoder", name="mlm_encoder", pipeline=[ENCODER],
        examples=ner_examples, docs=single_docs, blank_docs=blank_single_docs,
        read=read_encoding, check=check_encoding, labels=None,
        bad_setting=BadSetting({"pairs": "sideways"}, "pairs", "sideways"),
        training=None, not_trained="it has no loss of its own: it trains through its listeners (the other rows)",
        unknown_label=None, no_refusal="it has no labels",
    ),
    mlm_ner_case("mlm_ner_softmax", crf=False,
                 bad_setting=BadSetting({"subword_loss": "most"}, "subword_loss", "most")),
    mlm_ner_case("mlm_ner_crf", crf=True, bad_setting=BadSetting({"scheme": "BIOX"}, "scheme", "BIOX")),
    # every subword scored (its own listener), a word's scores the mean of its subwords' for the CRF
    mlm_ner_case("mlm_ner_subwords_crf", crf=True, subword_decode="mean",
                 listener={"@architectures": "spacy_mlm.EncoderPieceListener.v1"},
                 bad_setting=BadSetting({"subword_decode": "last"}, "subword_decode", "last")),
    mlm_textcat_case("mlm_textcat", ("NEG", "POS"), exclusive=True, learn_rate=5e-3,
                     bad_setting=BadSetting({"class_weights": "even"}, "class_weights", "even"),
                     unknown="MIXED"),
    mlm_textcat_case("mlm_textcat_multilabel", ("EXTRA", "NEG", "POS"), exclusive=False, learn_rate=3e-3,
                     bad_setting=BadSetting({"threshold": 1.5}, "threshold", 1.5),
                     unknown="SARCASM"),
    ComponentCase(
        id="mlm_textcat_pairs", factory="mlm_textcat", name="nli",
        pipeline=[ENCODER, ("nli", "mlm_textcat", {"model": {"tok2vec": {"pooling": "pair_mean"}}})],
        examples=nli_examples, docs=pair_docs, blank_docs=blank_pair_docs,
        read=read_cats("nli", True), check=check_cats("nli", True), labels=NLI_LABELS,
        bad_setting=BadSetting({"model": {"tok2vec": {"pooling": "pair_max"}}}, "pooling", "pair_max"),
        training=Training(learn_rate=3e-3, steps=6),
        unknown_label=cats_refusal(NLI_LABELS, "paraphrase", pair=True),
    ),
    ComponentCase(
        id="mlm_regressor", factory="mlm_regressor", name="regressor",
        pipeline=[ENCODER, ("regressor", "mlm_regressor", {"model": {"tok2vec": {"pooling": "pair_mean"}}})],
        examples=relatedness_examples, docs=pair_docs, blank_docs=blank_pair_docs,
        read=read_values, check=check_values, labels=("relatedness",),
        bad_setting=BadSetting({"model": {"init_std": -1.0}}, "init_std", -1.0),
        training=Training(learn_rate=3e-3, steps=6),
        unknown_label=Refusal(
            lambda nlp: Example.from_dict(spacy_mlm.make_pair_doc(nlp, "It rains.", "It pours."),
                                          {"cats": {"similarity": 4.0}}),
            spacy_mlm.errors.SpacyMlmError, "similarity"),
    ),
    ComponentCase(
        id="mlm_vectors", factory="mlm_vectors", name="vectors",
        pipeline=[ENCODER, ("vectors", "mlm_vectors",
                            {"transform": {"@misc": "spacy_mlm.VectorTransform.v1", "steps": ["center"]}})],
        examples=ner_examples, docs=single_docs, blank_docs=blank_single_docs,
        read=read_vectors, check=check_vectors, labels=None,
        bad_setting=BadSetting({"pooling": "median"}, "pooling", "median"),
        training=None, not_trained="its transform is fitted (fit_transform), not trained by a loss",
        unknown_label=None, no_refusal="it has no labels", prepare=fit_vectors,
        from_worker=spacy_mlm.restore_vector_hooks,  # spaCy sends Docs without their user hooks (W109)
    ),
    ComponentCase(
        id="mlm_senses", factory="mlm_senses", name="senses",
        pipeline=[("mlm_encoder", "mlm_encoder",
                   {"pairs": "apart", "model": {"output_hidden_states": True, "trainable_layers": 0}}),
                  ("senses", "mlm_senses", {})],
        examples=wic_examples, docs=wic_docs, blank_docs=blank_pair_docs,
        read=read_senses, check=check_senses, labels=None,
        bad_setting=BadSetting({"sense_key": "stem"}, "sense_key", "stem"),
        training=Training(learn_rate=1e-2, steps=6, frozen=("mlm_encoder",)),
        unknown_label=Refusal(wic_other_label, spacy_mlm.errors.SpacyMlmError, SAME_SENSE),
        prepare=add_senses, from_worker=spacy_mlm.restore_vector_hooks,
    ),
    ComponentCase(
        id="mlm_zero_shot", factory="mlm_zero_shot", name="mlm_zero_shot",
        pipeline=[ENCODER, ("nli", "mlm_textcat", {"model": {"tok2vec": {"pooling": "pair_mean"}}})],
        examples=nli_examples, docs=single_docs, blank_docs=blank_single_docs,
        read=read_cats("mlm_zero_shot", True), check=check_cats("mlm_zero_shot", True), labels=None,
        bad_setting=BadSetting({"batch_size": 0}, "batch_size", 0),
        training=None, not_trained="it is not trained: it reads the NLI pair classifier (the mlm_textcat_pairs row)",
        unknown_label=None, no_refusal="it scores whatever labels it is given, by design",
        prepare=add_zero_shot,
    ),
    ComponentCase(
        id="spacy_tagger", factory="tagger", name="tagger",
        pipeline=[ENCODER, ("tagger", "tagger", {"model": {"@architectures": "spacy.Tagger.v2",
                                                           "tok2vec": MEAN_LISTENER}})],
        examples=tagged_examples, docs=single_docs, blank_docs=blank_single_docs,
        read=read_tags, check=check_tags, labels=("NAME", "X"),
        bad_setting=BadSetting({"overwrite": "maybe"}, "overwrite", "maybe"),
        training=Training(learn_rate=3e-3, steps=6),
        # spaCy's tagger refuses it with a bare KeyError (spaCy's message, not this plugin's)
        unknown_label=Refusal(lambda nlp: Example.from_dict(nlp.make_doc("Oslo ."), {"tags": ["PLACE", "X"]}),
                              KeyError, "PLACE"),
    ),
    ComponentCase(
        id="spacy_ner", factory="ner", name="ner",
        pipeline=[ENCODER, ("ner", "ner", {"model": SPACY_NER_MODEL})],
        examples=ner_examples, docs=single_docs, blank_docs=blank_single_docs,
        read=read_entities, check=check_entities, labels=("LOC", "ORG", "PER"),
        bad_setting=BadSetting({"incorrect_spans_key": 3}, "incorrect_spans_key", 3),
        training=Training(learn_rate=5e-3, steps=6),
        unknown_label=None,
        no_refusal="spaCy's transition-based ner adds an entity label it meets in an update to its labels "
                   "(spaCy's behaviour, not this plugin's)",
    ),
    ComponentCase(
        id="spacy_textcat", factory="textcat", name="textcat",
        pipeline=[ENCODER, ("textcat", "textcat", {"model": SPACY_TEXTCAT_MODEL})],
        examples=cats_examples(("NEG", "POS")), docs=single_docs, blank_docs=blank_single_docs,
        read=read_cats("textcat", True), check=check_cats("textcat", True, empty_is_zero=True),
        labels=("NEG", "POS"),
        bad_setting=BadSetting({"threshold": "high"}, "threshold", "high"),
        training=Training(learn_rate=3e-3, steps=6),
        unknown_label=None,
        no_refusal="spaCy's textcat reads only its own labels, so the row trains as if no class were true "
                   "(spaCy's behaviour, not this plugin's)",
        empty_doc_depends_on_batch="spaCy's TextCategorizer.predict gives all-zero cats when no Doc of the batch "
                                   "has a token, and its model's scores (the bias) to an empty Doc among others",
    ),
]
