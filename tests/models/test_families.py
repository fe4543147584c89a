"""The family matrix: a tiny random model of every encoder family (built from
transformers' config classes, a fast tokenizer of the family's kind, nothing
downloaded) through every path, each checked against transformers' own
clients: the tokenizer's ids, AutoModel's hidden states,
AutoModelForMaskedLM's logits, the fill-mask pipeline's top 5."""
import numpy as np
import pytest
import spacy
import torch
from spacy.tokens import DocBin
from transformers import AutoModel, AutoModelForMaskedLM, AutoTokenizer

import spacy_mlm
from spacy_mlm.models.families import family_layout, parameter_depths
from spacy_mlm.models.hf import freeze_backbone
from spacy_mlm.testing import FAMILIES, SAMPLE_TEXT, make_tiny_family

TEXT = "Anna  Berg works for the Northwind Company in Oslo."
PAIR = ("A man is playing a guitar.", "Nobody plays music.")
NER_DATA = [
    ("Anna Berg works for the Northwind Company in Oslo .", [(0, 9, "PER"), (24, 41, "ORG"), (45, 49, "LOC")]),
    ("Peter Grant flew from Paris to Berlin on Monday .", [(0, 11, "PER"), (22, 27, "LOC"), (31, 37, "LOC")]),
]


@pytest.fixture(scope="session", params=FAMILIES)
def family_dir(request, tmp_path_factory):
    return make_tiny_family(request.param, tmp_path_factory.mktemp(request.param))


def encoder_pipeline(path, **model_settings):
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(path), **model_settings}})
    nlp.initialize()
    return nlp


@pytest.fixture(scope="session")
def family_nlp(family_dir):
    return encoder_pipeline(family_dir)


@pytest.fixture(scope="session")
def family_tokenizer(family_dir):
    return AutoTokenizer.from_pretrained(str(family_dir))


def pieces_of(nlp, doc):
    return nlp.get_pipe("mlm_encoder").model.attrs["tokenizer"]([doc])[0]


def test_pieces_and_hidden_states_equal_transformers(family_nlp, family_dir, family_tokenizer):
    doc = family_nlp(TEXT)
    window = pieces_of(family_nlp, doc).windows[0]
    reference = family_tokenizer(TEXT, return_tensors="pt")
    assert window.input_ids.tolist() == reference["input_ids"][0].tolist()
    model = AutoModel.from_pretrained(str(family_dir)).eval()
    with torch.no_grad():
        hidden = model(**reference).last_hidden_state[0].numpy()
    enc = doc._.mlm_encoding
    assert np.abs(enc.hidden - hidden[1:-1]).max() < 1e-5 and np.abs(enc.cls - hidden[0]).max() < 1e-5
    # a pair: the family's separators and, where it has them, segment ids
    pair_doc = family_nlp(spacy_mlm.make_pair_doc(family_nlp, *PAIR))
    pair_window = pieces_of(family_nlp, pair_doc).windows[0]
    pair_reference = family_tokenizer(*PAIR, return_token_type_ids=True)
    assert pair_window.input_ids.tolist() == pair_reference["input_ids"]
    if family_layout(model).segments:
        assert pair_window.token_type_ids.tolist() == pair_reference["token_type_ids"]
        assert set(pair_window.token_type_ids.tolist()) == {0, 1}


def test_alignment_is_exact_to_characters(family_nlp):
    """Every word gets pieces, and a piece's span holds no whitespace at its
    edges (`▁`, `Ġ` pieces report the space before a word), so the whitespace
    token of a double space gets none."""
    doc = family_nlp(TEXT)
    enc = doc._.mlm_encoding
    pieces = pieces_of(family_nlp, doc)
    assert [len(enc.alignment.pieces_of(token.i)) > 0 for token in doc] == [not token.is_space for token in doc]
    spans = [doc.text[start:end] for start, end in zip(pieces.starts, pieces.ends)]
    assert all(span == span.strip() for span in spans)


def test_empty_and_whitespace_docs_alone_and_in_batches(family_nlp, family_tokenizer):
    """An empty Doc is its template alone ([CLS] [SEP]), in a batch as alone;
    a whitespace-only Doc has the pieces the tokenizer makes of it (a
    SentencePiece `▁`, a byte-level `Ġ`), aligned to no token."""
    texts = ["", "Hello world.", "   ", "\n"]
    alone = [family_nlp(text)._.mlm_encoding for text in texts]
    batch = [doc._.mlm_encoding for doc in family_nlp.pipe(texts)]
    window = pieces_of(family_nlp, family_nlp.make_doc("")).windows[0]
    assert window.input_ids.tolist() == family_tokenizer("")["input_ids"]
    for text, one, together in zip(texts, alone, batch):
        ids = family_tokenizer(text, add_special_tokens=False)["input_ids"]
        assert one.piece_ids.tolist() == together.piece_ids.tolist() == ids
        assert together.hidden.shape == (len(ids), together.width) and together.cls.shape == (together.width,)
        np.testing.assert_allclose(together.cls, one.cls, atol=1e-5)
        if not text.strip():
            assert len(together.alignment.token_index) == 0
    # the empty Doc's [CLS] is its own, not the next Doc's first piece
    assert not np.allclose(batch[0].cls, batch[1].cls)


def test_long_document_is_read_in_windows(family_dir):
    """A piece in the middle of a long document has the vector of the same
    piece in the window around it, as AutoModel computes that window."""
    nlp = encoder_pipeline(family_dir, window=24, overlap=8)
    doc = nlp(" ".join(SAMPLE_TEXT[:6]))
    pieces = pieces_of(nlp, doc)
    assert len(pieces.windows) > 2
    middle = len(pieces.ids) // 2
    window = pieces.windows[pieces.owner[middle]]
    model = AutoModel.from_pretrained(str(family_dir)).eval()
    with torch.no_grad():
        hidden = model(input_ids=torch.from_numpy(window.input_ids)[None]).last_hidden_state[0]
    expected = hidden[pieces.owner_position[middle]].numpy()
    assert np.abs(doc._.mlm_encoding.hidden[middle] - expected).max() < 1e-5


def test_encode_cli_names_the_family_and_shows_the_pair_input(family_dir, family_tokenizer):
    from typer.testing import CliRunner

    from spacy_mlm.cli import app

    result = CliRunner().invoke(app, ["encode", str(family_dir), PAIR[0], "--pair", PAIR[1]])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    family = AutoModel.from_pretrained(str(family_dir)).config.model_type
    assert any(line.startswith(f"family {family}: 2 layers") for line in lines)
    pair = family_tokenizer(*PAIR, return_token_type_ids=True)
    assert f"input:    {' '.join(family_tokenizer.convert_ids_to_tokens(pair['input_ids']))}" in lines
    segments = [line for line in lines if line.startswith("segments: ")]
    if "no segment ids" not in result.output:
        assert segments == ["segments: " + " ".join(map(str, pair["token_type_ids"]))]
    else:
        assert not segments


def test_layer_stack_as_run_freezing_and_depths(family_dir):
    model = AutoModel.from_pretrained(str(family_dir))
    layout = family_layout(model)
    assert layout.n_layers == 2
    freeze_backbone(model, 1)
    trainable = {id(p) for p in model.parameters() if p.requires_grad}
    assert trainable == {id(p) for p in layout.layers[-1].parameters()}
    depths = dict(zip([name for name, _ in model.named_parameters()], parameter_depths(model)))
    word_embeddings = next(n for n, p in model.named_parameters() if p is model.get_input_embeddings().weight)
    assert depths[word_embeddings] == 0
    top = {depths[n] for n, p in model.named_parameters() if any(p is q for q in layout.layers[-1].parameters())}
    assert top == {2}  # ALBERT's one shared group: the depth of the last layer that runs it
    # layer-wise learning-rate decay steps every family with those depths
    from spacy_mlm.models.torch_stepper import TorchStepper, layer_lr_scales
    from spacy_mlm.training.optimizer import build_layer_decay_adam_v2

    scales = dict(zip(depths, layer_lr_scales(list(depths), 0.5, list(depths.values()))))
    assert scales[word_embeddings] == 0.125 and {scales[n] for n, d in depths.items() if d == 2} == {0.5}
    freeze_backbone(model, -1)
    model(input_ids=torch.tensor([[1, 2, 3]])).last_hidden_state.sum().backward()
    TorchStepper().step(model, build_layer_decay_adam_v2(0.001, layer_decay=0.5))
    assert all(p.grad is None for p in model.parameters())


def test_masked_lm_logits_at_chosen_positions_equal_transformers(family_dir, family_tokenizer):
    from spacy_mlm.pretraining.data import Example, collate
    from spacy_mlm.pretraining.objectives import PretrainingModel

    mlm = AutoModelForMaskedLM.from_pretrained(str(family_dir)).eval()
    ids = [np.asarray(family_tokenizer(text, add_special_tokens=False)["input_ids"]) for text in SAMPLE_TEXT[:3]]
    batch = collate([Example((i, np.ones(len(i), bool))) for i in ids], family_tokenizer)
    assert batch.input_ids[0, : len(ids[0]) + 2].tolist() == family_tokenizer(SAMPLE_TEXT[0])["input_ids"]
    input_ids = torch.from_numpy(batch.input_ids)
    mask = None if batch.attention_mask is None else torch.from_numpy(batch.attention_mask)
    labels = torch.full_like(input_ids, -100)
    labels[:, 2:5] = input_ids[:, 2:5]
    sums = PretrainingModel(mlm).eval()(input_ids, labels, attention_mask=mask,
                                        token_type_ids=torch.from_numpy(batch.token_type_ids))
    with torch.no_grad():
        reference = mlm(input_ids=input_ids, attention_mask=mask).logits[labels != -100]
    assert sums.n_predicted == 9 and (sums.mlm_logits - reference).abs().max() < 1e-5


# ELECTRA's generator runs the discriminator's own embedding module: these families' cannot serve it
RTD_REFUSED = {"distilbert": "no intermediate_size", "deberta-v2": "cannot serve an ELECTRA generator",
               "modernbert": "no BERT-style embeddings"}


def test_replaced_token_detection_runs_or_names_the_family(family_dir, family_tokenizer):
    from spacy_mlm.errors import SpacyMlmError
    from spacy_mlm.pretraining.data import Example, collate
    from spacy_mlm.pretraining.rtd import ReplacedTokenDetection, build_generator

    discriminator = AutoModel.from_pretrained(str(family_dir))
    family = discriminator.config.model_type
    if family in RTD_REFUSED:
        with pytest.raises(SpacyMlmError, match=f"'{family}'.*{RTD_REFUSED[family]}"):
            build_generator(discriminator, 0.5, seed=0)
        return
    rtd = ReplacedTokenDetection(discriminator, build_generator(discriminator, 0.5, seed=0), 50.0)
    ids = [np.asarray(family_tokenizer(text, add_special_tokens=False)["input_ids"]) for text in SAMPLE_TEXT[:2]]
    batch = collate([Example((i, np.ones(len(i), bool))) for i in ids], family_tokenizer)
    input_ids = torch.from_numpy(batch.input_ids)
    labels = torch.full_like(input_ids, -100)
    labels[:, 2:4] = input_ids[:, 2:4]
    sums = rtd(input_ids, labels, sample_noise=torch.rand(input_ids.shape),
               attention_mask=None if batch.attention_mask is None else torch.from_numpy(batch.attention_mask),
               token_type_ids=torch.from_numpy(batch.token_type_ids))
    assert torch.isfinite(sums.rtd_loss) and torch.isfinite(sums.mlm_loss)


def test_fill_mask_equals_the_transformers_pipeline(family_dir, family_tokenizer):
    from transformers import pipeline

    from spacy_mlm.fill_mask import FillMask

    text = "The cat sleeps on the warm ___ wall."
    ours = FillMask(family_dir)(text, top_k=5)[0]
    fill = pipeline("fill-mask", model=str(family_dir), tokenizer=family_tokenizer, device="cpu")
    specials = set(family_tokenizer.all_special_ids)
    theirs = [c for c in fill(text.replace("___", family_tokenizer.mask_token), top_k=40)
              if c["token"] not in specials and c["token"] < len(family_tokenizer)][:5]
    assert [text for text, _ in ours] == [c["token_str"] for c in theirs]
    assert not any("Ġ" in t or "▁" in t for t, _ in ours)  # text, not pieces (WordPiece's lone "##s" decodes as such)


def _ner_docbin(path):
    nlp = spacy.blank("en")
    docs = []
    for text, spans in NER_DATA:
        doc = nlp.make_doc(text)
        doc.ents = [doc.char_span(s, e, label) for s, e, label in spans]
        docs.append(doc)
    DocBin(docs=docs).to_disk(path)
    return str(path)


def test_generated_ner_config_trains_predicts_saves_and_loads(family_dir, tmp_path):
    """`init-config --task ner` + `spacy train` (layer-wise LR decay finds the
    layer stack), then the saved pipeline predicts and loads."""
    from spacy.cli.train import train

    from spacy_mlm.training.config_templates import render_pipeline_config

    config = tmp_path / "ner.cfg"
    config.write_text(render_pipeline_config("ner", str(family_dir), output=str(config)), encoding="utf8")
    data = _ner_docbin(tmp_path / "ner.spacy")
    train(config, tmp_path / "out", overrides={
        "paths.train": data, "paths.dev": data, "training.max_steps": 3, "training.eval_frequency": 3,
        "training.logger.progress_interval": 0, "components.encoder.model.trainable_layers": 1,
    })
    nlp = spacy.load(tmp_path / "out" / "model-last")
    doc = nlp(NER_DATA[0][0])
    assert doc._.mlm_encoding.hidden.shape[0] > 0 and all(e.label_ in {"PER", "ORG", "LOC"} for e in doc.ents)


@pytest.mark.parametrize("pooling", ["cls", "pair_mean"])
def test_textcat_and_pair_classification_train(family_dir, pooling):
    """Single texts by [CLS]; sentence pairs (NLI-style, the family's pair
    template) by the mean of each side's pieces."""
    from spacy.training import Example

    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(family_dir)}})
    nlp.add_pipe("mlm_textcat", config={"model": {"tok2vec": {"@architectures": "spacy_mlm.EncoderListener.v1",
                                                              "pooling": pooling}}})
    if pooling == "pair_mean":
        docs = [spacy_mlm.make_pair_doc(nlp, a, b) for a, b in zip(SAMPLE_TEXT[:4], SAMPLE_TEXT[4:8])]
    else:
        docs = [nlp.make_doc(text) for text in SAMPLE_TEXT[:4]]
    examples = [Example.from_dict(doc, {"cats": {"POS": float(i % 2), "NEG": float(1 - i % 2)}})
                for i, doc in enumerate(docs)]
    optimizer = nlp.initialize(lambda: examples)
    losses = [nlp.update(examples, sgd=optimizer, losses={})["mlm_textcat"] for _ in range(3)]
    assert np.isfinite(losses).all() and losses[-1] != losses[0]
    assert set(nlp(docs[0]).cats) == {"POS", "NEG"}


def test_pretrain_with_the_family_head_and_resume(family_dir, tmp_path):
    """A few steps of masked-LM (plus NSP where the family has segment ids)
    from the family's own head, a checkpoint, and a resumed run to the end."""
    from spacy_mlm.pretraining.config import load_pretraining_config
    from spacy_mlm.pretraining.loop import pretrain

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join("\n".join(SAMPLE_TEXT[i : i + 4]) for i in range(0, 16, 4)), encoding="utf8")
    segments = family_layout(AutoModel.from_pretrained(str(family_dir))).segments
    settings = {
        "paths.train": str(corpus), "paths.source": str(family_dir), "pretraining.max_length": 32,
        "pretraining.batch_size": 4, "pretraining.max_steps": 2, "pretraining.eval_every": 2,
        "pretraining.eval_sequences": 4, "pretraining.checkpoint_every": 1, "pretraining.log_every": 1,
        "pretraining.optimizer.warmup_steps": 1, "pretraining.next_sentence": segments,
    }
    pretrain(load_pretraining_config(None, settings), tmp_path / "out")
    settings["pretraining.max_steps"] = 3
    pretrain(load_pretraining_config(None, settings), tmp_path / "out", resume=True)
    saved = AutoModelForMaskedLM.from_pretrained(str(tmp_path / "out" / "model"))
    assert saved.config.model_type == family_layout(saved).family


def test_export_and_onnx(family_nlp, family_dir, tmp_path):
    """export-encoder writes a directory AutoModel loads with the same
    outputs; the ONNX fp32 graph gives the torch vectors, int8 close ones."""
    from typer.testing import CliRunner

    from spacy_mlm.cli import app
    from spacy_mlm.models.encoder import get_hf_model
    from spacy_mlm.models.families import layer_scopes
    from spacy_mlm.models.onnx_backbone import layer_matmuls

    pytest.importorskip("onnxruntime")
    family_nlp.to_disk(tmp_path / "pipeline")
    result = CliRunner().invoke(app, ["export-encoder", str(tmp_path / "pipeline"), str(tmp_path / "hf")])
    assert result.exit_code == 0, result.output
    exported = AutoModel.from_pretrained(str(tmp_path / "hf")).eval()
    assert exported.config.model_type == family_layout(exported).family
    reference = family_nlp(TEXT)._.mlm_encoding
    for precision, tolerance in (("fp32", 1e-4), ("int8", None)):
        nlp = encoder_pipeline(family_dir, backend="onnx", precision=precision)
        enc = nlp(TEXT)._.mlm_encoding
        if tolerance:
            assert np.abs(enc.hidden - reference.hidden).max() < tolerance
            # int8's fp32_layers find every layer's weight products in the graph
            encoder = nlp.get_pipe("mlm_encoder").model
            scopes = layer_scopes(get_hf_model(encoder))
            assert all(layer_matmuls(encoder.attrs["onnx"].graph, [i], scopes) for i in range(len(scopes)))
        else:
            cosine = (enc.hidden * reference.hidden).sum(-1) / (
                np.linalg.norm(enc.hidden, axis=-1) * np.linalg.norm(reference.hidden, axis=-1))
            assert cosine.mean() > 0.95



def test_crf_tagger_and_contextual_vectors(family_dir):
    """The CRF variant of `mlm_ner` trains on the family's pieces and decodes
    tag paths its scheme allows; `mlm_vectors` gives each token a vector of the
    family's width whose similarity to itself is 1."""
    from spacy.training import Example

    from spacy_mlm.tagging.schemes import is_valid_sequence

    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(family_dir)}})
    ner = nlp.add_pipe("mlm_ner", name="ner", config={"model": {"crf": True}})
    examples = []
    for text, spans in NER_DATA:
        doc = nlp.make_doc(text)
        examples.append(Example.from_dict(doc, {"entities": [(s, e, label) for s, e, label in spans]}))
    optimizer = nlp.initialize(lambda: examples)
    losses = [nlp.update(examples, sgd=optimizer, losses={})["ner"] for _ in range(4)]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
    docs = [nlp.make_doc(text) for text, _ in NER_DATA]
    paths, *_ = ner.predict([nlp.get_pipe("mlm_encoder")(doc) for doc in docs])
    assert [len(path) for path in paths] == [len(doc) for doc in docs]
    assert all(is_valid_sequence([ner.tag_labels[t] for t in path], ner.cfg["scheme"]) for path in paths)

    vectors = spacy_mlm.make_vectors_pipeline(family_dir)
    doc = vectors(NER_DATA[0][0])
    width = AutoModel.from_pretrained(str(family_dir)).config.hidden_size
    assert doc[0].vector.shape == (width,) and np.isfinite(doc[0].vector).all()
    assert doc[0].similarity(doc[0]) == pytest.approx(1.0, abs=1e-5)
