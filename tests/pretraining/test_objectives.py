import numpy as np
import pytest
import torch
from transformers import AutoModelForMaskedLM

from spacy_mlm.errors import ModelLoadError
from spacy_mlm.pretraining.masking import IGNORE_INDEX
from spacy_mlm.pretraining.objectives import PretrainingModel, masked_lm_sums


def inputs(vocab, n_rows=3, length=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (n_rows, length), generator=g)
    labels = torch.full_like(ids, IGNORE_INDEX)
    chosen = torch.rand(ids.shape, generator=g) < 0.3
    chosen[:, 0] = True
    labels[chosen] = ids[chosen]
    return ids, labels


def test_head_at_chosen_positions_equals_full_logits(still_model_dir):
    mlm = AutoModelForMaskedLM.from_pretrained(still_model_dir).eval()
    model = PretrainingModel(mlm).eval()
    ids, labels = inputs(mlm.config.vocab_size)
    sums = model(input_ids=ids, labels=labels)
    full = mlm(input_ids=ids, labels=labels)  # HF: logits at every position, mean over labelled ones
    assert sums.n_predicted == int((labels != IGNORE_INDEX).sum())
    assert float(sums.mlm_loss.detach()) / sums.n_predicted == pytest.approx(float(full.loss.detach()), rel=1e-5)
    pred = full.logits.argmax(-1)[labels != IGNORE_INDEX]
    assert int(sums.mlm_correct) == int((pred == labels[labels != IGNORE_INDEX]).sum())


def test_decoder_is_tied_and_receives_gradient(still_model_dir):
    mlm = AutoModelForMaskedLM.from_pretrained(still_model_dir)
    model = PretrainingModel(mlm)
    assert mlm.get_output_embeddings().weight is mlm.get_input_embeddings().weight
    ids, labels = inputs(mlm.config.vocab_size)
    model(input_ids=ids, labels=labels).mlm_loss.backward()
    grad = mlm.get_input_embeddings().weight.grad
    targets = labels[labels != IGNORE_INDEX].unique()
    assert grad[targets].abs().sum() > 0


def test_masked_lm_sums_of_the_logits_at_chosen_positions():
    selected = torch.tensor([[0.0, 5.0], [1.0, 1.0]])
    loss, correct, n = masked_lm_sums(selected, torch.tensor([1, 1]))
    expected = -torch.log_softmax(torch.tensor([0.0, 5.0]), 0)[1] - torch.log_softmax(torch.tensor([1.0, 1.0]), 0)[1]
    assert n == 2 and float(loss) == pytest.approx(float(expected)) and int(correct) == 1


def test_top_layer_only_at_chosen_positions_equals_the_full_layer(still_model_dir):
    mlm = AutoModelForMaskedLM.from_pretrained(still_model_dir).eval()
    model = PretrainingModel(mlm).eval()
    assert model._sparse
    ids, labels = inputs(mlm.config.vocab_size, n_rows=4, length=16, seed=3)
    attention = torch.ones_like(ids)
    attention[1, 10:] = 0  # a padded row: padding must stay invisible to the chosen queries
    labels[1, 10:] = IGNORE_INDEX
    sums = model(input_ids=ids, labels=labels, attention_mask=attention)
    full = mlm(input_ids=ids, attention_mask=attention, labels=labels)
    assert float(sums.mlm_loss.detach()) / sums.n_predicted == pytest.approx(float(full.loss.detach()), rel=1e-5)
    model._sparse = False
    dense = model(input_ids=ids, labels=labels, attention_mask=attention)
    assert float(dense.mlm_loss.detach()) == pytest.approx(float(sums.mlm_loss.detach()), rel=1e-5)


def test_next_sentence_head_adds_a_loss(still_model_dir):
    mlm = AutoModelForMaskedLM.from_pretrained(still_model_dir)
    model = PretrainingModel(mlm, next_sentence=True)
    ids, labels = inputs(mlm.config.vocab_size)
    types = torch.zeros_like(ids)
    types[:, 6:] = 1
    sums = model(input_ids=ids, labels=labels, token_type_ids=types, nsp_labels=torch.tensor([0, 1, 0]))
    assert sums.n_pairs == 3 and float(sums.nsp_loss) > 0
    sums.nsp_loss.backward()
    assert model.nsp_head.classify.weight.grad.abs().sum() > 0
    # segment embeddings are used: other token types, other hidden states
    other = model(input_ids=ids, labels=labels, token_type_ids=torch.zeros_like(ids), nsp_labels=torch.tensor([0, 1, 0]))
    assert float(other.nsp_loss) != pytest.approx(float(sums.nsp_loss))


def test_a_head_that_is_not_a_chain_of_modules_is_refused_by_family():
    """DeBERTa-v2's non-legacy head takes the embedding matrix as a second
    input (and in transformers 4.53 fails even so): refused, naming the family;
    DistilBERT's four head children run in turn and are accepted."""
    from transformers import DebertaV2Config, DebertaV2ForMaskedLM, DistilBertConfig, DistilBertForMaskedLM

    distilbert = DistilBertForMaskedLM(DistilBertConfig(vocab_size=50, dim=16, n_layers=1, n_heads=2, hidden_dim=32))
    assert PretrainingModel(distilbert).head_names == ("vocab_transform", "activation", "vocab_layer_norm",
                                                       "vocab_projector")
    deberta = DebertaV2ForMaskedLM(DebertaV2Config(vocab_size=50, hidden_size=16, num_hidden_layers=1,
                                                   num_attention_heads=2, intermediate_size=32, legacy=False))
    with pytest.raises(ModelLoadError, match="'deberta-v2': DebertaV2ForMaskedLM fails"):
        PretrainingModel(deberta)
