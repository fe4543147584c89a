"""Self-supervised sense tuning (spacy_mlm/pretraining/sense_tuning.py and the
`sense-tune` command) on the tiny BERT: the InfoNCE loss, the two views, a
toy batch whose loss falls, and a run end to end whose output AutoModel and
mlm_encoder load."""
import json
import random

import numpy
import pytest
import torch

from spacy_mlm.errors import SpacyMlmError
from spacy_mlm.pretraining.sense_tuning import (
    SenseTuneSettings, encode_targets, info_nce, make_views, pick_targets, raw_sentences, sense_tune, target_vectors,
)

SENTENCES = [
    "The river bank was muddy after the long rain.",
    "She opened an account at the bank on Monday.",
    "Birds return every spring to the old garden.",
    "The spring in the mattress was broken again.",
    "He plays the guitar in a small band downtown.",
    "They walked along the quiet road to the village.",
    "A cold wind blew across the open field today.",
    "We plan to travel to the coast next summer.",
]


@pytest.fixture()
def raw_file(tmp_path):
    path = tmp_path / "raw.jsonl"
    path.write_text("".join(json.dumps({"text": " ".join(SENTENCES[i:i + 2])}) + "\n" for i in range(0, 8, 2)), encoding="utf8")
    return path


def test_info_nce_is_low_when_each_row_matches_its_own_and_not_the_others():
    torch.manual_seed(0)
    a = torch.randn(6, 16)
    matched = info_nce(a, a + 0.01 * torch.randn(6, 16), 0.05)
    shuffled = info_nce(a, a[torch.randperm(6)] + 0.01 * torch.randn(6, 16), 0.05)
    assert float(matched) < 0.01 < float(shuffled)
    with pytest.raises(SpacyMlmError):
        info_nce(a, a[:3], 0.05)


def test_sentences_targets_and_views(raw_file, tiny_model_dir):
    from transformers import AutoTokenizer

    sentences = raw_sentences([raw_file], min_words=6)
    assert sentences == SENTENCES
    items = pick_targets(sentences, random.Random(0))
    assert all(len(s[a:b]) >= 3 and s[a:b].isalpha() for s, a, b in items)
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    encoded = encode_targets(tokenizer, items, max_pieces=64)
    plain, masked = make_views(encoded, tokenizer, max_span=3, rng=random.Random(0))
    assert plain.input_ids.shape == masked.input_ids.shape
    assert torch.equal(plain.target_mask, masked.target_mask) and bool((plain.target_mask.sum(1) > 0).all())
    on_target = plain.target_mask.bool()
    assert torch.equal(plain.input_ids[on_target], masked.input_ids[on_target])  # the target is never masked
    changed = plain.input_ids != masked.input_ids
    assert bool((masked.input_ids[changed] == tokenizer.mask_token_id).all()) and int(changed.sum()) > 0


def test_loss_falls_on_a_toy_batch(raw_file, tiny_model_dir):
    from transformers import AutoModel, AutoTokenizer

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    model = AutoModel.from_pretrained(str(tiny_model_dir))
    encoded = encode_targets(tokenizer, pick_targets(SENTENCES, random.Random(1)), 64)
    plain, masked = make_views(encoded, tokenizer, 3, random.Random(0))

    def loss(train: bool) -> torch.Tensor:
        model.train(train)
        return info_nce(target_vectors(model, plain), target_vectors(model, masked), 0.05)

    with torch.no_grad():
        before = float(loss(False))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(15):
        optimizer.zero_grad()
        loss(True).backward()
        optimizer.step()
    with torch.no_grad():
        after = float(loss(False))
    assert after < before * 0.5, (before, after)


def test_sense_tune_end_to_end_writes_an_encoder_that_automodel_and_mlm_encoder_load(raw_file, tiny_model_dir, tmp_path):
    import spacy
    from transformers import AutoModel, AutoTokenizer

    from spacy_mlm.cli import app
    from typer.testing import CliRunner

    out = tmp_path / "tuned"
    result = CliRunner().invoke(app, ["sense-tune", str(tiny_model_dir), str(raw_file), str(out), "--steps", "4",
                                      "--batch-size", "4", "--learn-rate", "1e-3", "--quiet"])
    assert result.exit_code == 0, result.output
    assert "encoder saved to" in result.output
    record = json.loads((out / "sense_tuning.json").read_text(encoding="utf8"))
    assert len(record["losses"]) == 4 and record["settings"]["batch_size"] == 4
    assert not list(tmp_path.glob(".tuned*"))  # the temporary directory was renamed, nothing left beside
    tuned, base = AutoModel.from_pretrained(str(out)), AutoModel.from_pretrained(str(tiny_model_dir))
    moved = [k for k, v in tuned.state_dict().items() if k in base.state_dict() and not torch.equal(v, base.state_dict()[k])]
    assert moved  # the weights were trained
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"@architectures": "spacy_mlm.HFEncoder.v2", "path": str(out)}})
    nlp.initialize()
    encoding = nlp("The river bank was muddy.")._.mlm_encoding
    ids = torch.tensor([AutoTokenizer.from_pretrained(str(out)).build_inputs_with_special_tokens(encoding.piece_ids.tolist())])
    with torch.no_grad():
        expected = tuned.eval()(input_ids=ids).last_hidden_state[0]
    numpy.testing.assert_allclose(encoding.hidden, expected[1:-1].numpy(), atol=1e-5)  # the tuned weights, as AutoModel reads them


def test_too_few_sentences_or_a_bad_batch_are_refused(raw_file, tiny_model_dir, tmp_path):
    with pytest.raises(SpacyMlmError, match="fewer than one batch"):
        sense_tune(tiny_model_dir, [raw_file], tmp_path / "x", SenseTuneSettings(steps=1, batch_size=64))
    with pytest.raises(SpacyMlmError, match="batch_size >= 2"):
        sense_tune(tiny_model_dir, [raw_file], tmp_path / "x", SenseTuneSettings(steps=1, batch_size=1))
    with pytest.raises(SpacyMlmError, match="does not exist"):
        sense_tune(tiny_model_dir, [tmp_path / "missing.txt"], tmp_path / "x", SenseTuneSettings(steps=1, batch_size=4))
    assert not (tmp_path / "x").exists()


def test_same_word_batches_put_one_word_in_several_contexts(tiny_model_dir):
    from transformers import AutoTokenizer

    from spacy_mlm.pretraining.sense_tuning import same_word_batches, word_occurrences

    sentences = ["The river bank was muddy.", "She opened an account at the bank.", "A bank of clouds rose.",
                 "Birds return every spring.", "The spring was broken.", "Water came from a spring."]
    index = word_occurrences(sentences)
    assert [s for s, _, _ in index["bank"]] == sentences[:3] and "a" not in index  # under 3 letters
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    settings = SenseTuneSettings(batch_size=4, same_word=2)
    batch = next(same_word_batches(index, tokenizer, settings, random.Random(0)))
    assert len(batch) == 4
    words = target_words(tokenizer, batch)
    assert words[0] == words[1] and words[2] == words[3] and words[0] != words[2], words


def target_words(tokenizer, batch):
    """The target word of each (piece ids, target positions) of an encoded batch."""
    return [tokenizer.decode([ids[p] for p in positions]).replace(" ", "").lower() for ids, positions in batch]


def test_sense_tune_with_same_word_batches(raw_file, tiny_model_dir, tmp_path, monkeypatch):
    """The run trains on batches of two words, each in two different sentences."""
    from transformers import AutoTokenizer

    import spacy_mlm.pretraining.sense_tuning as sense_tuning

    batches, loss = [], sense_tuning.sense_tuning_loss

    def recording(model, tokenizer, encoded, *args):
        batches.append(encoded)
        return loss(model, tokenizer, encoded, *args)

    monkeypatch.setattr(sense_tuning, "sense_tuning_loss", recording)
    summary = sense_tune(tiny_model_dir, [raw_file], tmp_path / "tuned",
                         SenseTuneSettings(steps=2, batch_size=4, same_word=2, learn_rate=1e-3), quiet=True)
    assert summary["first_loss"] > 0 and (tmp_path / "tuned" / "model.safetensors").is_file()
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    assert len(batches) == 2
    for batch in batches:
        words = target_words(tokenizer, batch)
        assert words[0] == words[1] != words[2] == words[3], words
        assert batch[0][0] != batch[1][0] and batch[2][0] != batch[3][0]  # each word in two sentences
    with pytest.raises(SpacyMlmError, match="same_word"):
        sense_tune(tiny_model_dir, [raw_file], tmp_path / "x", SenseTuneSettings(steps=1, batch_size=4, same_word=3))
