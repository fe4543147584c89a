"""Replaced-token detection (ELECTRA): its labels and losses, the embeddings the
generator shares with the discriminator, what a run saves, and resuming it."""
import logging
import shutil

import pytest
import torch
import torch.nn.functional as F
from transformers import AutoModel, AutoModelForMaskedLM, AutoTokenizer

from spacy_mlm.errors import SpacyMlmError
from spacy_mlm.models.hf import load_discriminator
from spacy_mlm.engine.checkpoint import load_training_state
from spacy_mlm.pretraining.checkpoint import run_differences
from spacy_mlm.pretraining.config import load_pretraining_config
from spacy_mlm.pretraining.loop import pretrain
from spacy_mlm.pretraining.masking import IGNORE_INDEX
from spacy_mlm.pretraining.rtd import (
    ReplacedTokenDetection, build_generator, corrupt, discriminator_sums, generator_config, replaced_token_labels,
    sample_replacements,
)

from .conftest import read_history, tiny_overrides
from .test_objectives import inputs

RTD = {"pretraining.objective": "rtd"}


def test_labels_mark_replaced_tokens_and_a_proposal_equal_to_the_original_is_original():
    masked = torch.tensor([[2, 4, 7, 4, 3, 0]])  # 4 = [MASK] at two chosen positions, 0 = padding
    labels = torch.tensor([[IGNORE_INDEX, 11, IGNORE_INDEX, 12, IGNORE_INDEX, IGNORE_INDEX]])
    original, corrupted = corrupt(masked, labels, torch.tensor([11, 15]))  # the first proposal is the original
    assert original.tolist() == [[2, 11, 7, 12, 3, 0]] and corrupted.tolist() == [[2, 11, 7, 15, 3, 0]]
    assert replaced_token_labels(original, corrupted).tolist() == [[0, 0, 0, 1, 0, 0]]


def test_the_discriminator_loss_is_over_every_non_padding_position_and_none_other():
    logits = torch.tensor([[2.0, -1.0, 0.5, 9.0], [-3.0, 4.0, 99.0, -99.0]])
    targets = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 1.0, 0.0]])
    scored = torch.tensor([[True, True, True, True], [True, True, False, False]])  # row 2 ends in padding
    loss, correct, replaced = discriminator_sums(logits, targets, scored)
    positions = [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1)]
    expected = sum(float(F.binary_cross_entropy_with_logits(logits[i, j], targets[i, j])) for i, j in positions)
    assert float(loss) == pytest.approx(expected, rel=1e-6)
    assert int(correct) == 5 and int(replaced) == 3  # (0, 2) predicted replaced, wrongly; padding counts for nothing


def test_sampling_is_by_inverse_cdf_of_the_softmax():
    logits = torch.log(torch.tensor([[0.2, 0.0, 0.5, 0.3]] * 4) + 1e-30)
    draws = sample_replacements(logits, torch.tensor([0.0, 0.19, 0.21, 0.99]))
    assert draws.tolist() == [0, 0, 2, 3]  # never the zero-probability token 1
    many = sample_replacements(torch.zeros(20000, 3), torch.rand(20000, generator=torch.Generator().manual_seed(0)))
    assert torch.bincount(many, minlength=3).float().div(20000).sub(1 / 3).abs().max() < 0.02


def test_generator_size_follows_the_discriminator(tiny_model_dir):
    config = AutoModel.from_pretrained(tiny_model_dir).config  # 32 wide, 2 heads of 16
    half = generator_config(config, 0.5)
    assert (half.hidden_size, half.num_attention_heads, half.embedding_size) == (16, 1, 32)
    assert half.num_hidden_layers == config.num_hidden_layers and half.vocab_size == config.vocab_size
    assert half.intermediate_size == config.intermediate_size // 2
    assert generator_config(config, 1.0).hidden_size == 32


@pytest.fixture
def rtd_model(tiny_model_dir):
    discriminator = AutoModel.from_pretrained(tiny_model_dir, add_pooling_layer=False)
    generator = build_generator(discriminator, 0.5, seed=0)
    return ReplacedTokenDetection(discriminator, generator, discriminator_weight=50.0)


def test_generator_and_discriminator_share_the_embeddings_and_both_losses_train_them(rtd_model):
    generator, discriminator = rtd_model.generator.mlm_model, rtd_model.discriminator
    assert generator.electra.embeddings is discriminator.embeddings  # token, position, segment and their LayerNorm
    shared = discriminator.embeddings.word_embeddings.weight
    assert generator.get_output_embeddings().weight is shared  # the generator's decoder stays tied to them
    ids, labels = inputs(discriminator.config.vocab_size)
    noise = torch.rand(ids.shape, generator=torch.Generator().manual_seed(1))
    for loss in ("mlm_loss", "rtd_loss"):
        rtd_model.zero_grad()
        getattr(rtd_model(ids, labels, noise), loss).backward()
        assert shared.grad is not None and shared.grad.abs().sum() > 0, loss
        assert discriminator.embeddings.position_embeddings.weight.grad.abs().sum() > 0, loss


def rtd_pair(model_dir, padding: bool):
    """The same generator, head and input under both embedding_sharing settings
    (a fresh disentangled delta is zero): their rtd sums, and the models."""
    models = []
    for sharing in ("shared", "disentangled"):
        discriminator = AutoModel.from_pretrained(model_dir, add_pooling_layer=False)
        generator = build_generator(discriminator, 0.5, seed=0)
        torch.manual_seed(0)  # the head's initialisation
        models.append(ReplacedTokenDetection(discriminator, generator, 50.0, embedding_sharing=sharing).eval())
    ids, labels = inputs(models[0].discriminator.config.vocab_size, n_rows=2, length=10)
    attention = torch.ones_like(ids)
    if padding:  # RoBERTa-style positions skip padding: the embedded input must get the same positions
        pad = models[0].discriminator.config.pad_token_id
        ids[1, 7:], labels[1, 7:], attention[1, 7:] = pad, IGNORE_INDEX, 0
    noise = torch.rand(ids.shape, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        return [model(ids, labels, noise, attention_mask=attention) for model in models], models


@pytest.mark.parametrize("kind", ["bert", "roberta"])
def test_disentangled_sharing_starts_as_the_discriminator_with_shared_embeddings(tmp_path, tiny_model_dir, kind):
    from spacy_mlm.testing import make_tiny_roberta

    model_dir = tiny_model_dir if kind == "bert" else make_tiny_roberta(tmp_path / "roberta")
    (shared, disentangled), _ = rtd_pair(model_dir, padding=True)
    assert float(disentangled.rtd_loss) == pytest.approx(float(shared.rtd_loss), rel=1e-6)
    assert int(disentangled.rtd_correct) == int(shared.rtd_correct)


def test_disentangled_sharing_keeps_the_discriminator_loss_off_the_shared_token_embeddings(tiny_model_dir):
    _, (_, model) = rtd_pair(tiny_model_dir, padding=False)
    model.train()
    table = model.discriminator.embeddings.word_embeddings.weight
    ids, labels = inputs(model.discriminator.config.vocab_size)
    noise = torch.rand(ids.shape, generator=torch.Generator().manual_seed(1))
    model.zero_grad()
    model(ids, labels, noise).rtd_loss.backward()
    assert table.grad is None or table.grad.abs().sum() == 0  # the generator's table: its masked-LM alone trains it
    assert model.embedding_delta.grad.abs().sum() > 0
    assert model.discriminator.embeddings.position_embeddings.weight.grad.abs().sum() > 0  # still shared
    model.zero_grad()
    model(ids, labels, noise).mlm_loss.backward()
    assert table.grad.abs().sum() > 0 and (model.embedding_delta.grad is None or model.embedding_delta.grad.abs().sum() == 0)


def test_a_checkpoint_of_the_other_embedding_sharing_is_refused(tiny_model_dir):
    _, (shared, disentangled) = rtd_pair(tiny_model_dir, padding=False)
    with pytest.raises(SpacyMlmError, match="read the token embeddings shared, this one reads them disentangled"):
        disentangled.load_objective_state(shared.objective_state())
    with pytest.raises(SpacyMlmError, match="read the token embeddings disentangled, this one reads them shared"):
        shared.load_objective_state(disentangled.objective_state())


def test_the_model_scores_every_position_of_its_corrupted_input(rtd_model):
    rtd_model.eval()
    ids, labels = inputs(rtd_model.discriminator.config.vocab_size, n_rows=2, length=10)
    attention = torch.ones_like(ids)
    attention[1, 7:] = 0
    labels[1, 7:] = IGNORE_INDEX
    noise = torch.rand(ids.shape, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        sums = rtd_model(ids, labels, noise, attention_mask=attention)
        proposals = sample_replacements(sums.mlm_logits, noise[labels != IGNORE_INDEX])
        original, corrupted = corrupt(ids, labels, proposals)
        hidden = rtd_model.discriminator(input_ids=corrupted, attention_mask=attention).last_hidden_state
        logits = rtd_model.rtd_head(hidden)
    targets = replaced_token_labels(original, corrupted)
    expected = F.binary_cross_entropy_with_logits(logits[attention.bool()], targets[attention.bool()], reduction="sum")
    assert float(sums.rtd_loss) == pytest.approx(float(expected), rel=1e-5)
    assert int(sums.rtd_replaced) == int(targets.sum()) and 0 < int(sums.rtd_replaced) <= int((labels >= 0).sum())


def test_a_run_from_a_source_saves_the_discriminator_as_a_plain_encoder(tmp_path, corpus_file, tiny_model_dir):
    import spacy

    import spacy_mlm  # noqa: F401

    out = tmp_path / "rtd"
    pretrain(load_pretraining_config(None, tiny_overrides(corpus_file, tiny_model_dir, **RTD, **{
        "pretraining.max_steps": 2, "pretraining.eval_every": 0})), out)
    model_dir = out / "model"
    assert (model_dir / "rtd_head.safetensors").exists()
    encoder = AutoModel.from_pretrained(model_dir)
    assert type(encoder).__name__ == "BertModel"
    trained = load_discriminator(model_dir).model  # our loader's checks: every tensor there, nothing extra
    source = AutoModelForMaskedLM.from_pretrained(tiny_model_dir).bert
    moved = trained.encoder.layer[0].attention.self.query.weight - source.encoder.layer[0].attention.self.query.weight
    assert moved.abs().max() > 0  # it trained, from the source's weights
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(model_dir)}})
    nlp.initialize()
    text = "The pond lies in a quiet wood."
    with torch.no_grad():
        expected = encoder.eval()(**AutoTokenizer.from_pretrained(model_dir)(text, return_tensors="pt"))
    torch.testing.assert_close(torch.as_tensor(nlp(text)._.mlm_encoding.hidden), expected.last_hidden_state[0, 1:-1],
                               rtol=1e-4, atol=1e-5)
    state = load_training_state(out / "checkpoints" / "step-00000002")
    assert set(state["generator"]) and not any(key.startswith("electra.embeddings.") for key in state["generator"])


@pytest.mark.parametrize("sharing", ["shared", "disentangled"])
def test_resuming_an_interrupted_run_continues_it_exactly(tmp_path, corpus_file, sharing, caplog):
    """Stopped by max_time after its first step (a checkpoint is written), then
    resumed: the same losses and weights as the run that was never stopped."""
    settings = tiny_overrides(corpus_file, None, **RTD, **{"pretraining.max_steps": 5, "pretraining.eval_every": 5,
                                                           "pretraining.scratch.dropout": 0.0,
                                                           "pretraining.rtd.embedding_sharing": sharing})
    pretrain(load_pretraining_config(None, settings), tmp_path / "reference")
    out = tmp_path / "stopped"
    shutil.copytree(tmp_path / "reference" / "tokenizer", out / "tokenizer")  # the same vocabulary
    pretrain(load_pretraining_config(None, {**settings, "pretraining.max_time": 1e-9}), out)
    assert [row["step"] for row in read_history(out) if "loss" in row] == [1]
    with caplog.at_level(logging.INFO):
        pretrain(load_pretraining_config(None, settings), out, resume=True)
    assert "Resumed from" in caplog.text and "step-00000001 at step 1" in caplog.text  # not a silent restart
    reference, resumed = read_history(tmp_path / "reference"), read_history(out)
    assert resumed[-1]["eval_rtd_loss"] == pytest.approx(reference[-1]["eval_rtd_loss"], rel=1e-6)
    for key in ("loss", "rtd_loss", "replaced"):
        values = [[(row["step"], row[key]) for row in history if key in row] for history in (resumed, reference)]
        assert [step for step, _ in values[0]] == [step for step, _ in values[1]], key
        assert [v for _, v in values[0]] == pytest.approx([v for _, v in values[1]], rel=1e-6), key
    first, second = (load_discriminator(path / "model").model for path in (tmp_path / "reference", out))
    for (name, a), b in zip(first.state_dict().items(), second.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7, msg=name)
    if sharing == "disentangled":  # the output folds the discriminator's difference into its token embeddings
        last = tmp_path / "reference" / "checkpoints" / "step-00000005"
        delta = load_training_state(last)["embedding_delta"]
        table = load_discriminator(last / "model").model.embeddings.word_embeddings.weight
        assert delta.abs().max() > 0
        torch.testing.assert_close(first.embeddings.word_embeddings.weight, table + delta)


def test_a_run_record_from_before_the_objective_existed_is_a_masked_lm_run():
    """(--resume refusing another objective: test_resume_safety.py)"""
    current = {"settings": {"pretraining.objective": "mlm", "pretraining.seed": 0}, "data": {"train": "a", "dev": "b"}}
    older = {"settings": {"pretraining.seed": 0}, "data": {"train": "a", "dev": "b"}}
    assert run_differences(older, current) == []
    rtd = {**current, "settings": {**current["settings"], "pretraining.objective": "rtd"}}
    assert run_differences(older, rtd) == ['pretraining.objective: "mlm" -> "rtd"']


@pytest.mark.parametrize("change, message", [
    ({"pretraining.objective": "electra"}, r"objective must be one of mlm, rtd, got 'electra'"),
    ({**RTD, "pretraining.next_sentence": True}, "next_sentence works with objective"),
    ({"pretraining.rtd.generator_size": 0}, r"\[pretraining.rtd\] generator_size must be above 0 and at most 1"),
    ({"pretraining.rtd.discriminator_weight": -1}, "discriminator_weight must be above 0"),
    ({"pretraining.rtd.embedding_sharing": "tied"}, r"embedding_sharing must be one of shared, disentangled, got 'tied'"),
])
def test_bad_rtd_settings_are_named(change, message):
    with pytest.raises(SpacyMlmError, match=message):
        load_pretraining_config(None, change)


def test_micro_batches_give_the_same_steps(tmp_path, corpus_file, still_model_dir):
    """What DDP relies on too: the proposals' noise and the loss's divisor are
    the whole batch's, however it is split (two gloo processes match one: checked
    by hand with tests/pretraining/test_distributed.py's command and objective = rtd)."""
    histories = []
    for accum in (1, 2):
        out = tmp_path / f"accum{accum}"
        pretrain(load_pretraining_config(None, tiny_overrides(corpus_file, still_model_dir, **RTD, **{
            "pretraining.max_steps": 3, "pretraining.eval_every": 0, "pretraining.grad_accumulation_steps": accum})), out)
        histories.append(read_history(out))
    for key in ("loss", "rtd_loss", "replaced"):
        assert [row[key] for row in histories[1]] == pytest.approx([row[key] for row in histories[0]], rel=1e-5), key
