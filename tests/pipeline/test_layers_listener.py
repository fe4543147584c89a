"""spacy_mlm.EncoderLayersListener.v1: mlm_vectors and mlm_senses read the
encoder through it, as every component does, and get what a direct computation
from the encoder's own per-layer states gives (the behaviour they had when they
read `doc._.mlm_encoding` themselves); a pair Doc read with `pairs = "apart"`
is its two sides read as Docs of their own."""
import numpy
import pytest
import spacy
import torch
from spacy.util import registry

from spacy_mlm.errors import SpacyMlmError
from spacy_mlm.models.senses import sense_head
from spacy_mlm.tokenization.pair import make_pair_doc
from spacy_mlm.vectors_pipeline import docs_before, make_vectors_pipeline

TEXTS = ["The bank by the river was muddy.", "Unbelievably long words like antidisestablishmentarianism split."]


def by_hand(doc, pooling, states):
    """The mean over `states` of the encoder's per-layer token vectors of `doc`."""
    encoding = doc._.mlm_encoding
    return numpy.mean([encoding.token_vectors(pooling, k) for k in states], axis=0, dtype="float32")


def assert_same_sums(got, expected):
    """numpy and torch may add the same few fp32 terms in another order (pairwise,
    vectorised): equal to a few units in the last place, not bit for bit."""
    numpy.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("pooling,layer,n_layers,states", [("mean", 1, 1, [1]), ("max", -1, 2, [1, 2]), ("first", 2, 3, [0, 1, 2])])
def test_vectors_are_the_mean_of_the_chosen_layer_states(tiny_model_dir, pooling, layer, n_layers, states):
    nlp = make_vectors_pipeline(tiny_model_dir, pooling=pooling, layer=layer, n_layers=n_layers)
    for doc in nlp.pipe(TEXTS):
        assert_same_sums(doc._.mlm_vectors, by_hand(doc, pooling, states))


def test_top_layer_vectors_need_no_hidden_states_and_remove_static_reads_the_embeddings(tiny_model_dir):
    top = make_vectors_pipeline(tiny_model_dir)
    doc = top(TEXTS[0])
    assert doc._.mlm_encoding.layers is None
    assert_same_sums(doc._.mlm_vectors, doc._.mlm_encoding.token_vectors("mean"))
    static = make_vectors_pipeline(tiny_model_dir, steps=["remove_static"])
    doc = next(iter(docs_before(static, "mlm_vectors", TEXTS[:1])))  # the transform is not fitted
    raw = static.get_pipe("mlm_vectors").transform_input(doc)
    assert_same_sums(raw, numpy.concatenate([doc._.mlm_encoding.token_vectors("mean"), by_hand(doc, "mean", [0])], axis=1))


def test_the_layers_listener_refuses_what_the_encoder_cannot_give(tiny_model_dir):
    with pytest.raises(SpacyMlmError, match="layers = \\[5\\]: the encoder has 3 hidden states"):
        make_vectors_pipeline(tiny_model_dir, layer=5)(TEXTS[0])
    nlp = make_vectors_pipeline(tiny_model_dir)
    with pytest.raises(SpacyMlmError, match="has no doc._.mlm_encoding"):
        nlp.get_pipe("mlm_vectors")(nlp.make_doc(TEXTS[0]))
    with pytest.raises(Exception, match="unknown pooling 'cls'"):
        registry.architectures.get("spacy_mlm.EncoderLayersListener.v1")(layers=None, pooling="cls")


@pytest.fixture(scope="module")
def senses_nlp(tiny_model_dir):
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", name="encoder", config={"pairs": "apart", "model": {
        "@architectures": "spacy_mlm.HFEncoder.v2", "path": str(tiny_model_dir), "output_hidden_states": True,
        "trainable_layers": 0}})
    nlp.add_pipe("mlm_senses", name="senses")
    nlp.initialize()
    with torch.no_grad():
        sense_head(nlp.get_pipe("senses").model).layer_logits.copy_(torch.tensor([0.3, -1.0, 2.0]))
    return nlp


def test_a_pair_doc_read_apart_is_its_sides_read_alone(senses_nlp):
    pair = senses_nlp(make_pair_doc(senses_nlp, TEXTS[0], TEXTS[1]))
    start = pair._.mlm_pair_start
    # in one batch, as the pair's two windows are (a batch's padding moves the last bits)
    a, b = senses_nlp.pipe([pair[:start].as_doc(), pair[start:].as_doc()])
    numpy.testing.assert_array_equal(pair._.mlm_encoding.layers, numpy.concatenate([a._.mlm_encoding.layers, b._.mlm_encoding.layers], axis=1))
    numpy.testing.assert_array_equal(pair._.mlm_vectors, numpy.concatenate([a._.mlm_vectors, b._.mlm_vectors]))


def test_sense_vectors_are_the_head_over_the_encoder_layer_states_each_side_its_sentence(senses_nlp):
    """By hand from the pair Doc's own per-layer states: each token's states and
    the mean over its side's tokens with pieces (its sentence)."""
    doc = senses_nlp(make_pair_doc(senses_nlp, TEXTS[0], TEXTS[1]))
    head = sense_head(senses_nlp.get_pipe("senses").model)
    tokens = torch.from_numpy(numpy.stack([doc._.mlm_encoding.token_vectors("mean", k) for k in range(3)], axis=1))
    sentences = []
    for side in torch.split(tokens, [doc._.mlm_pair_start, len(doc) - doc._.mlm_pair_start]):
        sentences.append(side[side[:, -1].abs().sum(dim=-1) > 0].mean(dim=0).expand_as(side))
    with torch.no_grad():
        expected = head(tokens, torch.cat(sentences)).numpy()
    numpy.testing.assert_allclose(doc._.mlm_vectors, expected, rtol=1e-5, atol=1e-6)  # sentence means summed here, and in the component
