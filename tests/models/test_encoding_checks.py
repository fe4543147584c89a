"""A DocEncoding read from bytes (msgpack in doc.to_bytes / DocBin, pickle) is
checked before anything uses it: its own parts when it is decoded, its fit to
the Doc where a component reads it (issue 48, case 6)."""
import pickle
import re

import numpy
import pytest
import spacy
import srsly
import torch
from spacy.tokens import Doc, DocBin
from spacy.training import Example

from spacy_mlm.errors import DataError
from spacy_mlm.models.encoding import DocEncoding
from spacy_mlm.models.encoding_codec import MSGPACK_KEY
from spacy_mlm.tokenization.align import align_pieces_to_tokens

TEXT = "Anna lives in Paris now"
ENCODING_KEY = ("._.", "mlm_encoding", None, None)  # where spaCy keeps doc._.mlm_encoding in user_data


def encoding_data() -> dict:
    """`to_dict` of a consistent encoding: 2 tokens ("abc def"), 3 pieces, width 4, 3 hidden states."""
    hidden = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    alignment = align_pieces_to_tokens([0, 4], [3, 7], [0, 4, 6], [3, 6, 7])
    return DocEncoding(numpy.array([5, 6, 7]), numpy.array([[0, 3], [4, 6], [6, 7]]), alignment, hidden, hidden[0],
                       layers_tensor=torch.zeros(3, 3, 4), pieces=["abc", "de", "##f"],
                       pooled_tensor=hidden[1]).to_dict()


def test_a_consistent_encoding_reads_back_through_every_route():
    data = encoding_data()
    for back in (DocEncoding.from_dict(data), pickle.loads(pickle.dumps(DocEncoding.from_dict(data))),
                 srsly.msgpack_loads(srsly.msgpack_dumps({MSGPACK_KEY: data}))):
        assert back.alignment.pieces_of(1).tolist() == [1, 2] and back.layers_tensor.shape == (3, 3, 4)
        assert torch.equal(back.hidden_tensor, torch.arange(12, dtype=torch.float32).reshape(3, 4))
        back.check_doc(Doc(spacy.blank("en").vocab, words=["abc", "def"]))


def _set(path, value):
    def change(data):
        *parents, last = path
        target = data
        for key in parents:
            target = target[key]
        if value is KeyError:
            del target[last]
        else:
            target[last] = value
    return change


MALFORMED = [
    # (what is changed, the message)
    (_set(["tensors"], KeyError), "a serialized encoding is a dict of piece_ids, piece_offsets, alignment, pieces, "
                                  "tensors; got ['alignment', 'piece_ids', 'piece_offsets', 'pieces']"),
    (_set(["alignment"], "abc"), "alignment must be [n_tokens, n_pieces, token_index, piece_index], got str"),
    (_set(["alignment"], [2, 3, []]),
     "alignment must be [n_tokens, n_pieces, token_index, piece_index], got list of 3"),
    (_set(["alignment", 0], "2"), "the alignment's n_tokens must be a count (an integer >= 0), got '2'"),
    (_set(["alignment", 1], -3), "the alignment's n_pieces must be a count (an integer >= 0), got -3"),
    (_set(["alignment", 0], True), "n_tokens must be a count (an integer >= 0), got True"),
    (_set(["alignment", 2], numpy.array([0, 1, 2])), "its alignment names token 2, outside the 2 tokens it covers"),
    (_set(["alignment", 3], numpy.array([0, 1, 3])), "its alignment names piece 3, outside the 3 pieces it covers"),
    (_set(["alignment", 3], numpy.array([0, -1, 2])), "its alignment names piece -1"),
    (_set(["alignment", 3], numpy.array([0, 2, 1])), "pairs are not sorted by token then piece, each pair once"),
    (_set(["alignment", 3], numpy.array([0, 1, 1])), "pairs are not sorted by token then piece, each pair once"),
    (_set(["alignment", 2], numpy.array([0, 1])), "its alignment has 2 token indices but 3 piece indices"),
    (_set(["alignment", 2], numpy.array([0.0, 1.0, 1.0])), "alignment's token_index holds float64, expected integers"),
    (_set(["alignment", 2], [[0], [1, 1]]), "alignment's token_index is no array"),
    (_set(["piece_ids"], numpy.array([5, 6])), "piece_ids has shape (2,), expected (3,)"),
    (_set(["piece_offsets"], numpy.array([0, 3, 4, 6, 6, 7])), "piece_offsets has shape (6,), expected (3, 2)"),
    (_set(["piece_offsets"], numpy.array([[0, 3], [6, 4], [6, 7]])), "a piece ending before it starts"),
    (_set(["pieces"], "abc"), "pieces must be a list of the 3 pieces' strings (or empty)"),
    (_set(["pieces"], ["abc", 1, "##f"]), "pieces must be a list of the 3 pieces' strings"),
    (_set(["tensors", "hidden_tensor"], None), "tensors must be a dict of hidden_tensor, cls_tensor"),
    (_set(["tensors", "extra"], numpy.zeros(4)), "tensors must be a dict of hidden_tensor, cls_tensor"),
    (_set(["tensors", "hidden_tensor"], numpy.zeros((2, 4), "float32")),
     "hidden_tensor has shape (2, 4), expected (3, n)"),
    (_set(["tensors", "hidden_tensor"], numpy.zeros((3, 4), "int64")), "hidden_tensor holds int64, expected floats"),
    (_set(["tensors", "cls_tensor"], numpy.zeros(5, "float32")), "cls_tensor has shape (5,), expected (4,)"),
    (_set(["tensors", "pooled_tensor"], numpy.zeros((1, 4), "float32")),
     "pooled_tensor has shape (1, 4), expected (4,)"),
    (_set(["tensors", "layers_tensor"], numpy.zeros((3, 2, 4), "float32")),
     "layers_tensor has shape (3, 2, 4), expected (n, 3, 4)"),
]


class PickledEncoding:
    """What pickle writes for a DocEncoding (`__reduce__`), with any data."""

    def __init__(self, data: dict):
        self.data = data

    def __reduce__(self):
        return (DocEncoding.from_dict, (self.data,))


@pytest.mark.parametrize("change, message", MALFORMED, ids=[message[:48] for _, message in MALFORMED])
def test_a_malformed_encoding_is_refused_saying_what_is_wrong(change, message):
    data = encoding_data()
    change(data)
    with pytest.raises(DataError, match=re.escape(message)) as caught:
        DocEncoding.from_dict(data)
    assert str(caught.value).startswith("doc._.mlm_encoding: ")
    with pytest.raises(DataError, match=re.escape(message)):  # the same through msgpack and pickle
        srsly.msgpack_loads(srsly.msgpack_dumps({MSGPACK_KEY: data}))
    with pytest.raises(DataError, match=re.escape(message)):
        pickle.loads(pickle.dumps(PickledEncoding(data)))


def test_a_non_dict_encoding_is_refused():
    with pytest.raises(DataError, match=re.escape("a serialized encoding is a dict of piece_ids")):
        DocEncoding.from_dict([1, 2, 3])


@pytest.fixture(scope="module")
def ner_nlp(tiny_model_dir):
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(tiny_model_dir)}})
    nlp.add_pipe("mlm_ner")
    example = Example.from_dict(nlp.make_doc("Anna lives in Paris ."), {"entities": [(0, 4, "PER"), (14, 19, "LOC")]})
    nlp.initialize(lambda: [example])
    return nlp


def _with_raw_encoding(nlp, text: str, data: dict) -> Doc:
    """A Doc read from bytes whose user_data carried `data` as its encoding."""
    doc = nlp.make_doc(text)
    doc.user_data[ENCODING_KEY] = {MSGPACK_KEY: data}
    return Doc(nlp.vocab).from_bytes(doc.to_bytes())


def test_an_encoding_claiming_a_billion_tokens_is_refused_before_the_tagger_sizes_anything(ner_nlp):
    """Once a 128 GB allocation in mlm_ner's listener."""
    data = ner_nlp(TEXT)._.mlm_encoding.to_dict()
    data["alignment"][0] = 10**9
    doc = _with_raw_encoding(ner_nlp, TEXT, data)
    with pytest.raises(DataError, match="its alignment covers 1000000000 tokens but the Doc has 5"):
        ner_nlp.get_pipe("mlm_ner")(doc)


def test_an_encoding_of_another_doc_is_refused(ner_nlp):
    """Once no entities or wrong ones, silently."""
    short = ner_nlp("Anna lives here")
    doc = _with_raw_encoding(ner_nlp, TEXT, short._.mlm_encoding.to_dict())
    with pytest.raises(DataError, match="its alignment covers 3 tokens but the Doc has 5"):
        ner_nlp.get_pipe("mlm_ner")(doc)
    doc = ner_nlp.make_doc("A b c")  # as many tokens as "Bo is at", a shorter text
    doc._.mlm_encoding = ner_nlp("Bo is at")._.mlm_encoding
    with pytest.raises(DataError, match="its pieces reach character 8 but the Doc's text has 5 characters"):
        ner_nlp.get_pipe("mlm_ner")(doc)


def test_a_docbin_with_a_malformed_encoding_is_refused_when_read(ner_nlp):
    data = ner_nlp(TEXT)._.mlm_encoding.to_dict()
    del data["tensors"]["hidden_tensor"]
    doc = ner_nlp.make_doc(TEXT)
    doc.user_data[ENCODING_KEY] = {MSGPACK_KEY: data}
    payload = DocBin(docs=[doc], store_user_data=True).to_bytes()
    with pytest.raises(DataError, match="tensors must be a dict of hidden_tensor, cls_tensor"):
        list(DocBin().from_bytes(payload).get_docs(ner_nlp.vocab))


def test_a_good_encoding_read_from_bytes_tags_as_the_pipeline_does(ner_nlp):
    doc = ner_nlp(TEXT)
    back = Doc(ner_nlp.vocab).from_bytes(doc.to_bytes())
    back.ents = []
    ner_nlp.get_pipe("mlm_ner")(back)
    assert [(e.start, e.end, e.label_) for e in back.ents] == [(e.start, e.end, e.label_) for e in doc.ents]
