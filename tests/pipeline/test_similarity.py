import pickle

import numpy
import pytest
import spacy

from spacy.tokens import Doc, Token

import spacy_mlm  # noqa: F401
from spacy_mlm.errors import ModelLoadError, SpacyMlmError
from spacy_mlm.pipeline.vectors import MLMVectors, install_extensions
from spacy_mlm.vectors_pipeline import configure_vectors_component, docs_before, make_vectors_pipeline

RIVER = "The river bank was muddy after the rain."
MONEY = "She opened an account at the bank on Main Street."
TEXTS = [
    RIVER, MONEY, "The pond lies in a quiet wood near the town of Concord.",
    "Our team won the match by two goals.", "He sat by the window and read an old book.",
    "The cat sleeps on the warm stone wall.", "Prices rose sharply in the second quarter.",
    "Children play football in the park every Saturday.",
]


EXTENSIONS = [(Doc, "mlm_vectors"), (Token, "sense"), (Token, "sense_score")]


@pytest.fixture(scope="module")
def vec_nlp(tiny_model_dir):
    return make_vectors_pipeline(tiny_model_dir, all_layers=True)


def remove_extensions():
    for cls, name in EXTENSIONS:
        if cls.has_extension(name):
            cls.remove_extension(name)


@pytest.fixture()
def extensions_removable():
    """A test may remove the mlm_vectors extensions; they are back afterwards."""
    yield remove_extensions
    install_extensions()


def mean_pieces(doc, token, source):
    return source[doc._.mlm_encoding.alignment.pieces_of(token.i)].mean(axis=0)


def cos(a, b):
    return float(a @ b / numpy.linalg.norm(a) / numpy.linalg.norm(b))


def test_hooks_use_contextual_vectors(vec_nlp):
    doc, other = vec_nlp(RIVER), vec_nlp(MONEY)
    bank, bank2 = doc[2], other[6]
    assert bank.text == bank2.text == "bank"
    enc = doc._.mlm_encoding
    numpy.testing.assert_allclose(bank.vector, mean_pieces(doc, bank, enc.hidden), atol=1e-6)
    assert bank.has_vector and bank.vector_norm == pytest.approx(numpy.linalg.norm(bank.vector))
    # Same word, different contexts: not the static-vector 1.0.
    sim = bank.similarity(bank2)
    assert sim == pytest.approx(cos(bank.vector, bank2.vector), abs=1e-6) and sim < 0.999
    span = doc[1:3]
    numpy.testing.assert_allclose(span.vector, (doc[1].vector + doc[2].vector) / 2, atol=1e-6)
    assert span.vector_norm == pytest.approx(float(numpy.linalg.norm(span.vector)), rel=1e-5)
    numpy.testing.assert_allclose(doc.vector, numpy.stack([t.vector for t in doc]).mean(axis=0), atol=1e-6)
    assert doc.similarity(other) == pytest.approx(cos(doc.vector, other.vector), abs=1e-6)
    assert span.similarity(bank2) == pytest.approx(cos(span.vector, bank2.vector), abs=1e-6)
    pickle.loads(pickle.dumps(doc))  # hooks are module functions, docs stay picklable


def test_token_without_pieces_has_no_vector_and_is_left_out_of_means(vec_nlp):
    doc = vec_nlp("river  bank")  # the double space becomes a whitespace token
    assert doc[1].is_space
    assert not doc[1].has_vector and doc[1].vector_norm == 0.0
    numpy.testing.assert_allclose(doc.vector, (doc[0].vector + doc[2].vector) / 2, atol=1e-6)
    assert doc[1].similarity(doc[0]) == 0.0


def test_layer_choices(tiny_model_dir, vec_nlp):
    text = TEXTS[2]
    layers = vec_nlp(text)._.mlm_encoding.layers  # (embeddings + 2 layers, pieces, width)
    assert layers.shape[0] == 3
    emb = make_vectors_pipeline(tiny_model_dir, layer=0)(text)
    numpy.testing.assert_allclose(emb[3].vector, mean_pieces(emb, emb[3], layers[0]), atol=1e-5)
    last2 = make_vectors_pipeline(tiny_model_dir, layer=-1, n_layers=2)(text)
    numpy.testing.assert_allclose(
        last2[3].vector, mean_pieces(last2, last2[3], (layers[1] + layers[2]) / 2), atol=1e-5
    )


def test_other_layer_needs_hidden_states(tiny_model_dir):
    nlp = make_vectors_pipeline(tiny_model_dir, layer=0, all_layers=False)
    with pytest.raises(SpacyMlmError, match="output_hidden_states"):
        nlp("The cat sleeps.")


def test_needs_an_encoder_before_it():
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_vectors")
    nlp.initialize()
    with pytest.raises(SpacyMlmError, match="has read no encoder: put an initialized mlm_encoder before it"):
        nlp("The cat sleeps.")
    with pytest.raises(SpacyMlmError, match="no mlm_encoder"):
        configure_vectors_component(spacy.blank("en"))


def test_fit_transform_then_save_and_load(tiny_model_dir, device, tmp_path):
    nlp = make_vectors_pipeline(tiny_model_dir, steps=["standardize", "abtt"], n_components=2)
    component: MLMVectors = nlp.get_pipe("mlm_vectors")
    assert not component.transform.is_fitted
    n = component.fit_transform(docs_before(nlp, "mlm_vectors", TEXTS))
    assert n > 40
    docs = list(nlp.pipe(TEXTS))
    fitted = numpy.concatenate([[t.vector for t in d] for d in docs])
    # Standardize then all-but-the-top: zero mean, orthogonal to the removed directions.
    numpy.testing.assert_allclose(fitted.mean(axis=0), 0.0, atol=1e-4)
    assert numpy.abs(fitted @ component.transform.steps[1].arrays["components"].T).max() < 1e-4
    nlp.to_disk(tmp_path / "pipe")
    loaded = spacy.load(tmp_path / "pipe")
    again = loaded(TEXTS[0])
    numpy.testing.assert_allclose(again[2].vector, docs[0][2].vector, atol=1e-5)
    assert again[2].similarity(loaded(TEXTS[1])[6]) == pytest.approx(docs[0][2].similarity(docs[1][6]), abs=1e-5)
    # bytes round trip into a component configured the same way
    blank = make_vectors_pipeline(tiny_model_dir, steps=["standardize", "abtt"], n_components=2)
    blank.get_pipe("mlm_vectors").from_bytes(component.to_bytes())
    numpy.testing.assert_allclose(blank(TEXTS[0])[2].vector, docs[0][2].vector, atol=1e-5)
    # a pipeline whose config asks for a different transform refuses the saved one
    other = make_vectors_pipeline(tiny_model_dir, steps=["center"])
    with pytest.raises(ModelLoadError, match="config asks for"):
        other.get_pipe("mlm_vectors").from_disk(tmp_path / "pipe" / "mlm_vectors")


def test_whiten_on_a_layer_range_then_save_and_load(tiny_model_dir, tmp_path):
    nlp = make_vectors_pipeline(tiny_model_dir, layer=2, n_layers=2, steps=["whiten"])
    component: MLMVectors = nlp.get_pipe("mlm_vectors")
    n = component.fit_transform(docs_before(nlp, "mlm_vectors", TEXTS))
    docs = list(nlp.pipe(TEXTS))
    fitted = numpy.concatenate([[t.vector for t in d if t.has_vector] for d in docs])
    assert fitted.shape[0] == n
    centered = fitted - fitted.mean(axis=0)
    numpy.testing.assert_allclose(centered.T @ centered / n, numpy.eye(fitted.shape[1]), atol=1e-3)
    # doc.vector is the mean of the whitened token vectors
    numpy.testing.assert_allclose(docs[0].vector, fitted[: len(docs[0])].mean(axis=0), atol=1e-5)
    nlp.to_disk(tmp_path / "white")
    loaded = spacy.load(tmp_path / "white")
    assert loaded.get_pipe("mlm_vectors").layer == 2 and loaded.get_pipe("mlm_vectors").n_layers == 2
    numpy.testing.assert_allclose(loaded(TEXTS[0])[2].vector, docs[0][2].vector, atol=1e-5)


def test_remove_static_chain_in_the_component_then_save_and_load(tiny_model_dir, tmp_path):
    nlp = make_vectors_pipeline(tiny_model_dir, layer=2, n_layers=2, steps=["remove_static", "standardize"])
    assert nlp.get_pipe("mlm_encoder").model.attrs["output_hidden_states"]
    component: MLMVectors = nlp.get_pipe("mlm_vectors")
    n = component.fit_transform(docs_before(nlp, "mlm_vectors", TEXTS))
    docs = list(nlp.pipe(TEXTS))
    fitted = numpy.concatenate([[t.vector for t in d if t.has_vector] for d in docs])
    assert fitted.shape == (n, nlp.get_pipe("mlm_encoder").model.get_dim("nO"))
    numpy.testing.assert_allclose(fitted.std(axis=0), 1.0, atol=1e-3)
    # Little of the residual is still linearly predictable from the embedding layer's vectors.
    inputs = numpy.concatenate([component.transform_input(d)[[t.has_vector for t in d]] for d in docs])
    width = fitted.shape[1]
    raw, static = inputs[:, :width], inputs[:, width:]
    residual = component.transform.steps[0].apply(inputs)

    def cross(A):
        return numpy.linalg.norm((A - A.mean(0)).T @ (static - static.mean(0)))

    assert cross(residual) < 0.2 * cross(raw)
    numpy.testing.assert_allclose(docs[0].vector, fitted[: len(docs[0])].mean(axis=0), atol=1e-5)
    nlp.to_disk(tmp_path / "static")
    loaded = spacy.load(tmp_path / "static")
    numpy.testing.assert_allclose(loaded(TEXTS[0])[2].vector, docs[0][2].vector, atol=1e-5)


def test_remove_static_needs_hidden_states(tiny_model_dir):
    nlp = make_vectors_pipeline(tiny_model_dir, steps=["remove_static"], all_layers=False)
    with pytest.raises(SpacyMlmError, match=r"hidden states \[0\] needs them kept: .*output_hidden_states = true"):
        nlp.get_pipe("mlm_vectors").fit_transform(docs_before(nlp, "mlm_vectors", TEXTS))


def test_unfitted_transform_is_reported(tiny_model_dir):
    nlp = make_vectors_pipeline(tiny_model_dir, steps=["center"])
    with pytest.raises(SpacyMlmError, match="not fitted"):
        nlp("The cat sleeps.")


def test_sense_inventory_assigns_nearest_sense_and_survives_save(vec_nlp, tiny_model_dir, tmp_path):
    nlp = make_vectors_pipeline(tiny_model_dir)
    component = nlp.get_pipe("mlm_vectors")
    river = nlp("The river bank was muddy after the rain.")
    money = nlp("She opened an account at the bank on Main Street.")
    assert river[2].text == money[6].text == "bank"
    assert component.add_sense_examples([(river[2], "bank%shore"), (money[6], "bank%money")]) == 2
    assert component.senses.senses("bank") == ["bank%shore", "bank%money"]
    # The labeled tokens themselves are nearest to their own centroid (score 1).
    again = nlp("The river bank was muddy after the rain.")
    assert again[2]._.sense == "bank%shore" and again[2]._.sense_score == pytest.approx(1.0, abs=1e-5)
    assert again[1]._.sense is None and again[1]._.sense_score is None  # no senses for "river"
    new = nlp("The bank was muddy.")
    got = component.senses.assign("bank", new[1].vector)
    assert new[1]._.sense == got.sense
    expected = max(
        ("bank%shore", "bank%money"), key=lambda s: cos(new[1].vector, component.senses.centroid("bank", s))
    )
    assert got.sense == expected
    nlp.to_disk(tmp_path / "senses_pipe")
    loaded = spacy.load(tmp_path / "senses_pipe")
    assert loaded("The bank was muddy.")[1]._.sense == new[1]._.sense
    assert loaded.get_pipe("mlm_vectors").senses.count("bank", "bank%money") == 1


def test_refitting_clears_stale_senses(tiny_model_dir):
    nlp = make_vectors_pipeline(tiny_model_dir, steps=["center"])
    component = nlp.get_pipe("mlm_vectors")
    component.fit_transform(docs_before(nlp, "mlm_vectors", TEXTS[:4]))
    doc = nlp(RIVER)
    component.add_sense_examples([(doc[2], "shore")])
    assert len(component.senses) == 1
    assert component.fit_transform(docs_before(nlp, "mlm_vectors", TEXTS), max_vectors=30) == 30
    assert len(component.senses) == 0


def test_bad_settings():
    nlp = spacy.blank("en")
    with pytest.raises(SpacyMlmError, match="pooling"):
        nlp.add_pipe("mlm_vectors", config={"pooling": "median"})
    with pytest.raises(SpacyMlmError, match="sense_key"):
        nlp.add_pipe("mlm_vectors", config={"sense_key": "pos"})


def test_the_factory_installs_the_extensions_also_in_spacy_load(extensions_removable, tmp_path):
    extensions_removable()
    assert not any(cls.has_extension(name) for cls, name in EXTENSIONS)
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_vectors")
    assert all(cls.has_extension(name) for cls, name in EXTENSIONS)
    nlp.initialize()
    nlp.to_disk(tmp_path / "vectors_only")
    extensions_removable()
    spacy.load(tmp_path / "vectors_only")
    assert all(cls.has_extension(name) for cls, name in EXTENSIONS)


def test_unpickled_doc_has_vectors_where_no_component_was_built(vec_nlp, extensions_removable):
    """As in a spawned worker process: the hooks register doc._.mlm_vectors when
    they first read it; the doc's vectors came with its user data."""
    doc = vec_nlp(RIVER)
    data = pickle.dumps(doc)
    extensions_removable()
    loaded = pickle.loads(data)
    numpy.testing.assert_array_equal(loaded[2].vector, doc[2].vector)
    assert Doc.has_extension("mlm_vectors")
    assert loaded.similarity(doc) == pytest.approx(1.0, abs=1e-6)
