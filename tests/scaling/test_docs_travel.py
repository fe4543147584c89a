"""Docs and pipelines that travel: every extension our components set survives
`doc.to_bytes()`, a DocBin on disk, pickle and deepcopy; a pickled pipeline
predicts what it did; `store_encoding` decides what stays on the Doc."""
import copy
import gc
import pickle
import subprocess
import sys
import weakref

import numpy
import pytest
import spacy
import srsly
import torch
from spacy.tokens import Doc, DocBin

import spacy_mlm
from spacy_mlm.errors import SpacyMlmError
from spacy_mlm.models.encoding import DocEncoding

from .conftest import TEXTS, assert_same_docs, inputs_for, snapshot

PIPELINES = ["ner", "crf", "int8", "pairs", "scores", "senses"]


def _through_bytes(docs, nlp):
    return [spacy_mlm.restore_vector_hooks(Doc(nlp.vocab).from_bytes(doc.to_bytes())) for doc in docs]


def _through_docbin(docs, nlp, path):
    DocBin(docs=docs, store_user_data=True).to_disk(path)
    return [spacy_mlm.restore_vector_hooks(doc) for doc in DocBin().from_disk(path).get_docs(nlp.vocab)]


@pytest.mark.parametrize("name", PIPELINES)
def test_docs_and_the_pipeline_survive_every_round_trip(saved_pipelines, tmp_path, name):
    if name not in saved_pipelines:
        pytest.skip("onnxruntime is not installed")
    nlp = spacy.load(saved_pipelines[name])
    docs = list(nlp.pipe(inputs_for(name, nlp)))
    assert any(doc.ents for doc in docs) or any(doc.cats for doc in docs) or name == "senses"
    assert all(isinstance(doc._.mlm_encoding, DocEncoding) for doc in docs)  # the default keeps the host copy
    assert_same_docs(_through_bytes(docs, nlp), docs)
    assert_same_docs(_through_docbin(docs, nlp, tmp_path / "docs.spacy"), docs)
    assert_same_docs([pickle.loads(pickle.dumps(doc)) for doc in docs], docs)
    assert_same_docs([copy.deepcopy(doc) for doc in docs], docs)
    unpickled = pickle.loads(pickle.dumps(nlp))
    assert_same_docs(unpickled.pipe(inputs_for(name, unpickled)), docs)


def test_what_the_docs_of_each_pipeline_carry(saved_pipelines):
    """The round trips above compare these: the test is only as good as what is there."""
    nlp = spacy.load(saved_pipelines["ner"])
    doc = nlp(TEXTS[2])
    assert doc._.tag_probs.shape == (len(doc), len(nlp.get_pipe("ner").tag_labels))
    assert doc._.mlm_vectors.shape[0] == len(doc) and doc._.mlm_encoding.layers is not None
    assert doc[6]._.sense in ("bank%shore", "bank%money")
    pairs = spacy.load(saved_pipelines["pairs"])
    pair_doc = pairs(inputs_for("pairs", pairs)[0])
    assert pair_doc._.mlm_pair_start is not None and set(pair_doc.cats) == {"entailment", "contradiction"}
    scores = spacy.load(saved_pipelines["scores"])
    assert set(scores(inputs_for("scores", scores)[0]).cats) == {"relatedness"}
    senses = spacy.load(saved_pipelines["senses"])
    sense_doc = senses(inputs_for("senses", senses)[0])
    assert isinstance(sense_doc._.sense_similarity, float) and sense_doc._.same_sense in (True, False)


def test_user_context_survives_too(saved_pipelines):
    nlp = spacy.load(saved_pipelines["ner"])
    doc = nlp.make_doc(TEXTS[0])
    doc._.mlm_context = ("Before this.", "After that.")
    doc = nlp(doc)
    back = Doc(nlp.vocab).from_bytes(doc.to_bytes())
    assert tuple(back._.mlm_context) == ("Before this.", "After that.")


def test_an_encoding_travels_through_msgpack():
    hidden = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    alignment = spacy_mlm.tokenization.align.align_pieces_to_tokens([0, 4], [3, 9], [0, 4, 6], [3, 6, 9])
    encoding = DocEncoding(numpy.array([5, 6, 7]), numpy.array([[0, 3], [4, 6], [6, 9]]), alignment, hidden,
                           hidden[0], pieces=["a", "b", "##c"])
    back = srsly.msgpack_loads(srsly.msgpack_dumps({"x": encoding}))["x"]
    assert isinstance(back, DocEncoding) and back.hidden_tensor.dtype == torch.float32
    assert torch.equal(back.hidden_tensor, hidden) and back.layers_tensor is None and back.pooled_tensor is None
    assert back.pieces == ["a", "b", "##c"] and back.alignment.pieces_of(1).tolist() == [1, 2]
    numpy.testing.assert_array_equal(back.token_vectors("mean"), encoding.token_vectors("mean"))


def test_a_process_that_never_imported_spacy_mlm_reads_an_encoding(tmp_path):
    """The codec comes through srsly's entry points, and costs plain msgpack users nothing."""
    hidden = torch.ones(2, 3)
    alignment = spacy_mlm.tokenization.align.align_pieces_to_tokens([0], [1], [0, 1], [1, 1])
    encoding = DocEncoding(numpy.array([5, 6]), numpy.array([[0, 1], [1, 1]]), alignment, hidden, hidden[0])
    (tmp_path / "data.msgpack").write_bytes(srsly.msgpack_dumps({"x": encoding}))
    script = (
        "import sys, srsly\n"
        "assert srsly.msgpack_loads(srsly.msgpack_dumps({'a': [1]})) == {'a': [1]}\n"
        "assert 'torch' not in sys.modules and 'spacy_mlm.models.encoding' not in sys.modules\n"
        "x = srsly.msgpack_loads(open(sys.argv[1], 'rb').read())['x']\n"
        "print(type(x).__module__, type(x).__name__, x.hidden_tensor.sum().item())\n"
    )
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path / "data.msgpack")], capture_output=True,
                         text=True, check=True).stdout
    assert out.split() == ["spacy_mlm.models.encoding", "DocEncoding", "6.0"]


@pytest.mark.numerics
@pytest.mark.parametrize("store", ["device", "host", "none"])
def test_store_encoding_decides_what_stays_and_changes_no_prediction(saved_pipelines, store):
    """What stays on the Doc is decided after every listener has read it, so the
    predictions are those of the default setting exactly: the same batches run the
    same kernels. (Other batches would not: another batch size takes other matmul
    kernels, whose fp32 sums differ in the last bits on some CPUs.)"""
    reference = [snapshot(doc) for doc in spacy.load(saved_pipelines["crf"]).pipe(TEXTS, batch_size=2)]
    config = {"components": {"mlm_encoder": {"store_encoding": store}}}
    nlp = spacy.load(saved_pipelines["crf"], config=config, exclude=["vectors"])
    seen = []
    encoder = nlp.get_pipe("mlm_encoder")
    predict = encoder.predict
    encoder.predict = lambda docs: [seen.append(weakref.ref(e.hidden_tensor)) or e for e in predict(docs)]
    docs = list(nlp.pipe(TEXTS, batch_size=2))
    for doc, expected in zip(docs, reference):
        assert (doc.ents, doc.cats) and [(e.start, e.end, e.label_) for e in doc.ents] == expected["ents"]
        assert doc.cats == expected["cats"]
    gc.collect()
    if store == "none":
        assert all(doc._.mlm_encoding is None for doc in docs)
        assert all(ref() is None for ref in seen)  # the hidden states are gone while the Docs live
    else:
        assert all(doc._.mlm_encoding.hidden_tensor.device.type == "cpu" for doc in docs)
        assert all(ref() is not None for ref in seen)


def test_vectors_are_read_before_store_encoding_none_drops_the_encoding(saved_pipelines):
    """mlm_vectors reads the encoder through its listener, so it has read each
    Doc's encoding before "none" drops it."""
    nlp = spacy.load(saved_pipelines["ner"], config={"components": {"mlm_encoder": {"store_encoding": "none"}}},
                     exclude=["ner", "textcat"])
    kept = spacy.load(saved_pipelines["ner"], exclude=["ner", "textcat"])
    doc = nlp(TEXTS[0])
    assert doc._.mlm_encoding is None
    numpy.testing.assert_array_equal(doc._.mlm_vectors, kept(TEXTS[0])._.mlm_vectors)


def test_a_bad_store_encoding_is_refused(tiny_model_dir):
    nlp = spacy.blank("en")
    with pytest.raises(SpacyMlmError, match="store_encoding must be one of device, host, none, got 'gpu'"):
        nlp.add_pipe("mlm_encoder", config={"model": {"path": str(tiny_model_dir)}, "store_encoding": "gpu"})
