"""RoBERTa-style (byte-level BPE, no segments) and DistilBERT encoders work too, and
so does an encoder built from a config for training from scratch."""
import numpy as np
import pytest
import spacy
import torch
from transformers import AutoModel, AutoTokenizer

import spacy_mlm
from spacy_mlm.testing import make_tiny_distilbert, make_tiny_roberta

TEXT = "Anna Berg works for the Northwind Company in Oslo."


@pytest.fixture(scope="module", params=["roberta", "distilbert"])
def family_dir(request, tmp_path_factory):
    make = {"roberta": make_tiny_roberta, "distilbert": make_tiny_distilbert}[request.param]
    return make(tmp_path_factory.mktemp(request.param))


def test_family_matches_transformers_and_aligns(family_dir):
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(family_dir)}})
    nlp.initialize()
    doc = nlp(TEXT)
    enc = doc._.mlm_encoding
    model = AutoModel.from_pretrained(str(family_dir)).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(family_dir))
    with torch.no_grad():
        hidden = model(**tokenizer(TEXT, return_tensors="pt")).last_hidden_state[0].numpy()
    np.testing.assert_allclose(enc.hidden, hidden[1:-1], atol=1e-5)
    assert all(len(enc.alignment.pieces_of(t.i)) > 0 for t in doc)
    # the model's own pair template
    pair = nlp(spacy_mlm.make_pair_doc(nlp, "A man plays.", "Nobody plays."))
    n_all = len(tokenizer("A man plays.", "Nobody plays.")["input_ids"])
    assert pair._.mlm_encoding.hidden.shape[0] == n_all - tokenizer.num_special_tokens_to_add(pair=True)


def test_scratch_encoder_from_config(tiny_model_dir, tmp_path):
    nlp = spacy.blank("en")
    nlp.add_pipe(
        "mlm_encoder",
        config={
            "model": {
                "@architectures": "spacy_mlm.ScratchEncoder.v1",
                "tokenizer_path": str(tiny_model_dir),
                "hidden_width": 16,
                "depth": 1,
                "n_heads": 2,
                "intermediate_width": 32,
                "max_positions": 40,
            }
        },
    )
    nlp.initialize()
    doc = nlp(TEXT + " " + TEXT + " " + TEXT)
    assert doc._.mlm_encoding.width == 16
    nlp.to_disk(tmp_path / "scratch")
    again = spacy.load(tmp_path / "scratch")(doc.text)
    np.testing.assert_array_equal(again._.mlm_encoding.hidden, doc._.mlm_encoding.hidden)
