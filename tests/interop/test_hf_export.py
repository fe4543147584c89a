"""`export_hf`: a pipeline's tagger or classifier as a Hugging Face directory that
transformers' pipelines load and that reproduces our predictions; round trips
through `import_hf`, heads trained here, and the heads transformers cannot hold."""
import logging

import numpy
import pytest
import spacy
from spacy.training import Example
from thinc.api import Adam
from transformers import AutoTokenizer, pipeline

import spacy_mlm
from spacy_mlm.errors import SpacyMlmError
from spacy_mlm.interop.hf_heads import export_hf, import_hf

from .compare import hf_words
from .hf_models import FAMILIES, make_classifier
from .sentences import SENTENCES
from .test_hf_import import NER_LABELS, NLI_LABELS

TRAIN = [("Anna Berg flew to Oslo", [(0, 9, "PER"), (18, 22, "LOC")]),
         ("Peter Grant joins Acme Bank", [(0, 11, "PER"), (18, 27, "ORG")])]


def hf_entities(hf, texts):
    return [[(e["start"], e["end"], e["entity_group"], float(e["score"])) for e in doc] for doc in hf(texts)]


@pytest.mark.parametrize("family", FAMILIES)
def test_a_tagger_round_trips_through_import_and_export(tmp_path, family):
    original = make_classifier(tmp_path / "hf", family, "Token", NER_LABELS)
    export_hf(import_hf(original), tmp_path / "out")
    args = dict(task="token-classification", aggregation_strategy="first")
    before = hf_entities(pipeline(model=str(original), **args), SENTENCES)
    after = hf_entities(pipeline(model=str(tmp_path / "out"), **args), SENTENCES)
    for a, b in zip(before, after):
        assert [e[:3] for e in a] == [e[:3] for e in b]
        numpy.testing.assert_allclose([e[3] for e in a], [e[3] for e in b], atol=1e-5)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("problem_type", [None, "multi_label_classification"])
def test_a_classifier_round_trips_through_import_and_export(tmp_path, family, problem_type):
    original = make_classifier(tmp_path / "hf", family, "Sequence", ["NEG", "POS", "MIXED"], problem_type)
    assert export_hf(import_hf(original), tmp_path / "out").endswith("ForSequenceClassification")
    texts = SENTENCES[:12]
    before = pipeline("text-classification", model=str(original), top_k=None)(texts)
    after = pipeline("text-classification", model=str(tmp_path / "out"), top_k=None)(texts)
    for a, b in zip(before, after):
        assert [r["label"] for r in a] == [r["label"] for r in b]
        numpy.testing.assert_allclose([r["score"] for r in a], [r["score"] for r in b], atol=1e-5)


def _train(nlp, examples, steps=4):
    optimizer = Adam(1e-2)
    for _ in range(steps):
        nlp.update(examples, sgd=optimizer)


def test_a_tagger_trained_here_exports_what_it_predicts(tiny_model_dir, tmp_path):
    spacy.util.fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(tiny_model_dir)}})
    nlp.add_pipe("mlm_ner", config={"constrained": False})
    examples = []
    for text, spans in TRAIN:
        doc = nlp.make_doc(text)
        examples.append(Example.from_dict(doc, {"entities": spans}))
    nlp.initialize(lambda: examples)
    _train(nlp, examples)
    export_hf(nlp, tmp_path / "out")
    hf = pipeline("token-classification", model=str(tmp_path / "out"), aggregation_strategy="first")
    tokenizer = AutoTokenizer.from_pretrained(str(tmp_path / "out"))
    compared = 0
    for doc, theirs in zip(nlp.pipe(SENTENCES), hf_entities(hf, SENTENCES)):
        if hf_words(tokenizer, doc.text) == [(t.idx, t.idx + len(t)) for t in doc]:
            compared += 1
            assert [(e.start_char, e.end_char, e.label_) for e in doc.ents] == [e[:3] for e in theirs]
    assert compared >= 40 and any(doc.ents for doc in nlp.pipe(SENTENCES))


def test_a_classifier_trained_here_exports_what_it_predicts(tmp_path):
    nlp = import_hf(make_classifier(tmp_path / "hf", "bert", "Sequence", NLI_LABELS))
    pairs = [(a, "A man is playing music.") for a in SENTENCES[:6]]
    examples = [Example.from_dict(spacy_mlm.make_pair_doc(nlp, a, b), {"cats": {k: float(k == "neutral") for k in NLI_LABELS}})
                for a, b in pairs]
    before = spacy_mlm.classify_pairs(nlp, pairs)
    _train(nlp, examples)
    ours = spacy_mlm.classify_pairs(nlp, pairs)
    assert ours[0]["neutral"] > before[0]["neutral"] + 0.05  # it trained
    export_hf(nlp, tmp_path / "out")
    theirs = pipeline("text-classification", model=str(tmp_path / "out"), top_k=None)(
        [{"text": a, "text_pair": b} for a, b in pairs])
    for cats, rows in zip(ours, theirs):
        numpy.testing.assert_allclose([cats[r["label"]] for r in rows], [r["score"] for r in rows], atol=1e-5)


def test_a_head_transformers_cannot_hold_is_a_clear_error(tiny_model_dir, tmp_path):
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(tiny_model_dir)}})
    nlp.add_pipe("mlm_textcat")  # [CLS] and no hidden layer: BERT's head reads the pooler
    nlp.initialize(lambda: [Example.from_dict(nlp.make_doc("a b"), {"cats": {"A": 1.0, "B": 0.0}})])
    with pytest.raises(SpacyMlmError, match="has pooling 'cls', no hidden layer; bert's .* head is pooling 'pooler'"):
        export_hf(nlp, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_token_poolings_other_than_the_first_piece_are_refused(tiny_model_dir, tmp_path):
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(tiny_model_dir)}})
    nlp.add_pipe("mlm_ner", config={"model": {"tok2vec": {"pooling": "mean"}}})
    nlp.initialize(lambda: [Example.from_dict(nlp.make_doc(TRAIN[0][0]), {"entities": TRAIN[0][1]})])
    with pytest.raises(SpacyMlmError, match="scores each token from its pieces' mean"):
        export_hf(nlp, tmp_path / "out")


def test_a_crf_exports_its_emissions_with_a_warning_or_is_refused(tmp_path, caplog):
    nlp = import_hf(make_classifier(tmp_path / "hf", "bert", "Token", NER_LABELS), crf=True)
    with pytest.raises(SpacyMlmError, match="CRF tagger.*refused"):
        export_hf(nlp, tmp_path / "refused", refuse_crf=True)
    with caplog.at_level(logging.WARNING):
        export_hf(nlp, tmp_path / "out")
    assert "without the CRF's transitions" in caplog.text
    assert (tmp_path / "out" / "model.safetensors").is_file() and not (tmp_path / "refused").exists()


def test_export_hf_on_the_command_line(tmp_path):
    from typer.testing import CliRunner

    from spacy_mlm.cli import app
    from spacy_mlm.util.save import save_atomically

    nlp = import_hf(make_classifier(tmp_path / "hf", "bert", "Token", NER_LABELS))
    nlp.add_pipe("mlm_ner", name="second", source=nlp)  # two taggers: which one must be said
    save_atomically(nlp, tmp_path / "pipeline")
    runner = CliRunner()
    result = runner.invoke(app, ["export-hf", str(tmp_path / "pipeline"), str(tmp_path / "out")])
    assert result.exit_code != 0 and "name the one to export with --component" in result.output, result.output
    result = runner.invoke(app, ["export-hf", str(tmp_path / "pipeline"), str(tmp_path / "out"), "--component", "second"])
    assert result.exit_code == 0 and "(BertForTokenClassification)" in result.output, result.output
    exported, original = (hf_entities(pipeline("token-classification", model=str(tmp_path / name),
                                               aggregation_strategy="first"), SENTENCES[:3]) for name in ("out", "hf"))
    assert [[e[:3] for e in doc] for doc in exported] == [[e[:3] for e in doc] for doc in original]
