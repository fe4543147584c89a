"""The plain attention of a training pass on a CPU (models/attention.py): the
swap is verified per model, gives the fused attention's outputs, and is undone."""
import json
import logging

import pytest
import torch

from spacy_mlm.models import attention
from spacy_mlm.models.hf import load_backbone
from spacy_mlm.testing import make_tiny_family


def _without_dropout(model):
    """Dropout off, so that train mode is deterministic."""
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
        if hasattr(m, "dropout_prob"):  # the SDPA classes' own rate
            m.dropout_prob = 0.0


@pytest.mark.parametrize("family", ["bert", "roberta", "albert"])
def test_plain_attention_gives_the_fused_outputs_and_is_undone(family, tmp_path):
    model, _ = load_backbone(make_tiny_family(family, tmp_path))
    fused_classes = {type(m) for m in model.modules()}
    assert attention.plain_classes(model), "transformers 4.x has an attention table for this family"
    _without_dropout(model)
    model.train()
    ids = torch.tensor([[5, 9, 13, 7, 2, 11], [6, 8, 3, 4, 0, 0]])
    mask = (ids != 0).long()
    fused = model(input_ids=ids, attention_mask=mask)[0]
    with attention.plain_attention(model):
        inside = {type(m) for m in model.modules()}
        plain = model(input_ids=ids, attention_mask=mask)[0]
    assert inside != fused_classes and not any("Sdpa" in c.__name__ for c in inside)
    assert {type(m) for m in model.modules()} == fused_classes
    real = mask.bool()
    assert torch.allclose(plain[real], fused[real], atol=1e-5)
    plain[real].sum().backward()  # the plain classes train


def test_a_family_that_fails_the_probe_keeps_its_attention(tmp_path, caplog):
    """DistilBERT's model prepares its mask for SDPA alone: the plain class
    cannot take it, so the probe refuses the swap and training keeps SDPA."""
    model, _ = load_backbone(make_tiny_family("distilbert", tmp_path))
    model.train()
    before = [type(m) for m in model.modules()]
    assert attention.plain_classes(model)
    with caplog.at_level(logging.INFO, logger="spacy_mlm.models.attention"):
        with attention.plain_attention(model):
            assert [type(m) for m in model.modules()] == before
    assert "training keeps SDPA" in caplog.text
    assert model.training  # the probe's eval mode is undone


def test_a_decoder_keeps_its_causal_attention_on_an_unpadded_batch(tmp_path, caplog):
    """With config.is_decoder and no padding, BERT gives SDPA no mask and runs
    it causally; the plain class would get no mask and attend both ways
    (outputs off by 0.03 on the tiny model): the probe's unpadded batch
    refuses the swap."""
    path = make_tiny_family("bert", tmp_path)
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, "is_decoder": True}))
    model, _ = load_backbone(path)
    _without_dropout(model)
    model.train()
    ids = torch.tensor([[5, 9, 13, 7, 2, 11], [6, 8, 3, 4, 10, 12]])
    mask = torch.ones_like(ids)
    fused = model(input_ids=ids, attention_mask=mask)[0]
    with caplog.at_level(logging.INFO, logger="spacy_mlm.models.attention"):
        with attention.plain_attention(model):
            inside = model(input_ids=ids, attention_mask=mask)[0]
    assert torch.allclose(inside, fused, atol=1e-5)
    assert "training keeps SDPA" in caplog.text


def test_swap_is_undone_when_the_pass_fails(tiny_model_dir):
    model, _ = load_backbone(tiny_model_dir)
    before = [type(m) for m in model.modules()]
    with pytest.raises(RuntimeError, match="boom"):
        with attention.plain_attention(model):
            assert [type(m) for m in model.modules()] != before
            raise RuntimeError("boom")
    assert [type(m) for m in model.modules()] == before


def test_encoder_trains_with_plain_attention_and_predicts_with_sdpa(tiny_model_dir):
    import spacy
    from spacy.training import Example

    import spacy_mlm  # noqa: F401
    from spacy_mlm.models.encoder import get_hf_model

    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(tiny_model_dir)}})
    nlp.add_pipe("mlm_textcat")
    examples = [Example.from_dict(nlp.make_doc(t), {"cats": {"A": float(i % 2), "B": float(1 - i % 2)}})
                for i, t in enumerate(["a cat sat", "the dog ran far", "birds fly", "fish swim here"])]
    nlp.initialize(lambda: examples)
    hf = get_hf_model(nlp.get_pipe("mlm_encoder").model)
    seen = []
    hf.encoder.layer[0].attention.self.register_forward_pre_hook(lambda module, args: seen.append(type(module).__name__))
    nlp.update(examples, sgd=nlp.create_optimizer())
    nlp("a cat ran")
    # once per model, window packing's probe (window_packing.py: padded and packed rows, with the
    # model's attention, then within the plain attention, whose own probe runs padded and unpadded
    # rows both ways first); then the training pass and the prediction
    sdpa, plain = "BertSdpaSelfAttention", "BertSelfAttention"
    probes = [sdpa, sdpa] + [sdpa, plain] * 2 + [plain, plain]
    assert seen == probes + [plain, sdpa]
    nlp.update(examples, sgd=nlp.create_optimizer())
    assert seen[len(probes) + 2:] == [plain]
    nlp.get_pipe("mlm_encoder").model.attrs["plain_attention"] = False  # SDPA kept in training
    nlp.update(examples, sgd=nlp.create_optimizer())
    assert seen[len(probes) + 3:] == [sdpa]
