"""An encoder built from a config for training from scratch (every pretrained
family: tests/models/test_families.py)."""
import numpy as np
import spacy


TEXT = "Anna Berg works for the Northwind Company in Oslo."


def test_scratch_encoder_from_config(tiny_model_dir, tmp_path):
    nlp = spacy.blank("en")
    nlp.add_pipe(
        "mlm_encoder",
        config={
            "model": {
                "@architectures": "spacy_mlm.ScratchEncoder.v2",
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
