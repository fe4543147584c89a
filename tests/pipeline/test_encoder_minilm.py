"""On a real pretrained encoder, our vectors are transformers' own."""
import numpy as np
import spacy
import torch
from transformers import AutoModel, AutoTokenizer

import spacy_mlm  # noqa: F401

TEXTS = [
    "Henry David Thoreau lived by Walden Pond near Concord, Massachusetts.",
    "Naïve café-goers don't pay $3.50 for coffee!",
    "Short.",
]


def test_token_vectors_equal_transformers_outputs(minilm_path):
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": minilm_path}})
    nlp.initialize()
    model = AutoModel.from_pretrained(minilm_path).eval()
    tokenizer = AutoTokenizer.from_pretrained(minilm_path)
    for doc in nlp.pipe(TEXTS, batch_size=3):
        enc = doc._.mlm_encoding
        inputs = tokenizer(doc.text, return_tensors="pt", return_offsets_mapping=True)
        offsets = inputs.pop("offset_mapping")[0, 1:-1].numpy()
        with torch.no_grad():
            hidden = model(**inputs).last_hidden_state[0].numpy()
        assert enc.pieces == tokenizer.convert_ids_to_tokens(inputs["input_ids"][0, 1:-1].tolist())
        np.testing.assert_allclose(enc.hidden, hidden[1:-1], atol=2e-5)
        np.testing.assert_allclose(enc.cls, hidden[0], atol=2e-5)
        # mean pooling of the pieces inside each token, computed by hand from offsets
        vectors = enc.token_vectors("mean")
        for token in doc:
            inside = [i for i, (s, e) in enumerate(offsets) if s < token.idx + len(token) and e > token.idx]
            np.testing.assert_allclose(vectors[token.i], hidden[1:-1][inside].mean(axis=0), atol=2e-5)
