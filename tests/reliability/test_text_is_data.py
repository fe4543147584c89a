"""Strings that look like special tokens ("[SEP]", "[MASK]", "<s>", ...) in a
user's text are text: the encoder, sentence pairs, pretraining corpora and
fill-mask split them into pieces like any other characters, so the only
special tokens a model sees are the ones its templates put there (and, in
fill-mask, the blanks asked for)."""
import numpy as np
import pytest
import spacy
import torch

import spacy_mlm  # noqa: F401
from spacy_mlm.fill_mask import FillMask
from spacy_mlm.models.hf import load_tokenizer
from spacy_mlm.pretraining.data import tokenize_documents
from spacy_mlm.testing import SAMPLE_TEXT, make_tiny_bert, make_tiny_roberta
from spacy_mlm.tokenization.pair import make_pair_doc
from spacy_mlm.tokenization.tokenizer import PieceTokenizer

LOOKALIKES = "[MASK] [SEP] [CLS] [PAD] [UNK] <s> </s> <pad> <mask> <unk>"
TEXT = f"Anna {LOOKALIKES} works in Oslo."
# texts with brackets, so that the tiny vocabularies have pieces for them (not [UNK])
BRACKET_TEXT = SAMPLE_TEXT + [TEXT, "A [ B ] C < D > E / F"]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("lookalikes")
    return {
        "bert": make_tiny_bert(root / "bert", texts=BRACKET_TEXT),
        "roberta": make_tiny_roberta(root / "roberta", texts=BRACKET_TEXT),
    }


@pytest.fixture
def model_path(request, models):
    """The model of the test's `name`: MiniLM (its cases skip where it is not
    installed) or a tiny model (its cases always run)."""
    name = request.node.callspec.params["name"]
    return request.getfixturevalue("minilm_path") if name == "minilm" else models[name]


def template_ids(hf):
    """The ids of the special tokens a text may never produce by itself."""
    return set(hf.all_special_ids) - {hf.unk_token_id}


@pytest.mark.parametrize("name", ["bert", "roberta", "minilm"])
def test_the_encoder_reads_lookalikes_as_text(model_path, name):
    hf = load_tokenizer(model_path)
    nlp = spacy.blank("en")
    doc = nlp(TEXT)
    pieces = PieceTokenizer(hf, 512, 16)([doc])[0]
    assert not set(pieces.ids.tolist()) & template_ids(hf) and hf.unk_token_id not in pieces.ids
    window = pieces.windows[0].input_ids
    specials = [i for i in window.tolist() if i in template_ids(hf)]
    assert specials == hf.build_inputs_with_special_tokens([])  # only the template's: [CLS] [SEP] / <s> </s>
    # every character of the look-alikes is covered by pieces of its own
    covered = np.zeros(len(TEXT), dtype=bool)
    for start, end in zip(pieces.starts, pieces.ends):
        covered[start:end] = True
    assert all(covered[i] for i, ch in enumerate(TEXT) if not ch.isspace())


@pytest.mark.parametrize("name", ["bert", "minilm"])
def test_a_literal_separator_inside_a_pair_stays_in_its_side(model_path, name):
    hf = load_tokenizer(model_path)
    nlp = spacy.blank("en")
    literal = PieceTokenizer(hf, 512, 16)([make_pair_doc(nlp, "Anna [SEP] works .", "She is in [SEP] Oslo .")])[0]
    plain = PieceTokenizer(hf, 512, 16)([make_pair_doc(nlp, "Anna works .", "She is in Oslo .")])[0]
    window, plain_window = literal.windows[0], plain.windows[0]
    assert (window.input_ids == hf.sep_token_id).sum() == (plain_window.input_ids == hf.sep_token_id).sum() == 2
    # segment ids: side A (with its [CLS] and first [SEP]) 0, side B 1, the literal [SEP]s inside
    n_a = 1 + len(hf("Anna [SEP] works .", add_special_tokens=False, split_special_tokens=True)["input_ids"]) + 1
    assert window.token_type_ids.tolist() == [0] * n_a + [1] * (len(window.input_ids) - n_a)


def test_the_encoder_output_for_a_lookalike_is_that_of_its_characters(models):
    """[SEP] inside the text and [ sep ] spelt out give the same pieces and the same vectors."""
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(models["bert"])}})
    nlp.initialize()
    joined, spaced = (nlp(text)._.mlm_encoding for text in ("Anna [SEP] works .", "Anna [ SEP ] works ."))
    assert joined.hidden.shape == spaced.hidden.shape, (joined.pieces, spaced.pieces)
    np.testing.assert_allclose(joined.hidden, spaced.hidden, atol=1e-6)
    np.testing.assert_allclose(joined.cls, spaced.cls, atol=1e-6)
    assert joined.pieces == spaced.pieces and "[SEP]" not in joined.pieces


@pytest.mark.parametrize("name", ["bert", "roberta"])
def test_pretraining_corpora_read_lookalikes_as_text(models, name):
    hf = load_tokenizer(models[name])
    ((ids, starts),) = tokenize_documents(hf, [[TEXT]])[0]
    assert not set(ids.tolist()) & template_ids(hf)
    assert len(ids) == len(starts)


def fill_inputs(fill, text):
    """The pieces fill-mask runs for a short `text`, with the model's template."""
    return fill.tokenizer.build_inputs_with_special_tokens(fill.piece_ids(text).tolist())


@pytest.mark.parametrize("name", ["bert", "roberta"])
def test_fill_mask_blanks_are_only_underscores_and_the_models_own_mask(models, name):
    fill = FillMask(models[name])
    tok = fill.tokenizer
    other_mask = "<mask>" if tok.mask_token == "[MASK]" else "[MASK]"
    text = f"Anna ___ in {tok.mask_token} . [SEP] <s> </s> [CLS] {other_mask} [PAD] <pad>"
    ids = fill.piece_ids(text)
    assert (ids == tok.mask_token_id).sum() == 2
    assert not set(ids.tolist()) & (template_ids(tok) - {tok.mask_token_id})
    assert len(fill(text, top_k=3)) == 2


@pytest.mark.parametrize("name", ["bert", "roberta"])
def test_fill_mask_encodes_blanks_as_a_mask_token_in_the_text_would(models, name):
    """Splitting at the blanks keeps the pieces the tokenizer gives the text with mask tokens in it
    (RoBERTa's <mask> takes the space before it), and the predictions of one forward pass."""
    fill = FillMask(models[name])
    tok = fill.tokenizer
    for text in ["The ___ lies in a quiet wood.", "___ lies", "The ___.", "un___able", "x ___ ___ y"]:
        with_masks = text.replace("___", tok.mask_token)
        assert fill.piece_ids(text).tolist() == tok(with_masks, add_special_tokens=False)["input_ids"], text
    text = "The ___ lies in a quiet ___ near the town."
    ids = torch.tensor([fill_inputs(fill, text)])
    with torch.no_grad():
        logits = fill.model(input_ids=ids).logits[0, ids[0] == tok.mask_token_id, : len(tok)]
    logits[:, sorted(set(tok.all_special_ids))] = float("-inf")
    expected = logits.softmax(-1).topk(3)
    got = fill(text, top_k=3)
    for candidates, probs, indices in zip(got, expected.values, expected.indices):
        assert [text for text, _ in candidates] == [tok.decode([i]) for i in indices.tolist()]
        np.testing.assert_allclose([p for _, p in candidates], probs.numpy(), rtol=1e-5)


def test_fill_mask_answers_every_blank_of_a_long_text(models):
    """The tiny BERT has 64 positions; a blank at piece ~330 was cut off (or 'no blank') before."""
    fill = FillMask(models["bert"])
    long = " ".join(["The pond lies in a quiet wood near the town of Concord ."] * 25)
    text = f"The ___ lies. {long} She opened an ___ at the bank. {long} The ___ ."
    ids = fill.piece_ids(text)
    assert len(ids) > 5 * fill.pieces.max_length
    results = fill(text, top_k=2)
    assert len(results) == 3
    # each blank is answered as in its owner window run alone
    windows, owner, position = fill.pieces.windows(ids)
    blanks = np.flatnonzero(ids == fill.tokenizer.mask_token_id)
    for blank, candidates in zip(blanks, results):
        window = torch.from_numpy(windows[owner[blank]].input_ids)[None]
        with torch.no_grad():
            logits = fill.model(input_ids=window).logits[0, position[blank], : len(fill.tokenizer)]
        logits[sorted(set(fill.tokenizer.all_special_ids))] = float("-inf")
        assert candidates[0][0] == fill.tokenizer.convert_ids_to_tokens(int(logits.argmax()))
