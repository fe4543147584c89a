"""`init-config --from-hf` and the `from_hf` initialize setting of mlm_ner and
mlm_textcat: a training config whose pipeline, as `spacy train` initializes it
(before any update), predicts what transformers' pipelines predict on the
fine-tuned directory, then trains on; and clear errors where the directory or
the component does not fit."""
import json
import re

import pytest
import spacy
import torch
from spacy.cli.train import train
from spacy.tokens import DocBin
from spacy.training.initialize import init_nlp
from spacy.util import load_config
from typer.testing import CliRunner

from spacy_mlm.cli import app
from spacy_mlm.errors import ModelLoadError, SpacyMlmError

from .compare import assert_transformers_entities, assert_transformers_pair_scores, assert_transformers_scores
from .hf_models import make_classifier
from .test_hf_import import NER_LABELS, NLI_LABELS

CLASSES = ["NEG", "POS", "MIXED"]


def _corpus(kind: str, path):
    """Two training rows of `kind` in the file format its config reads."""
    if kind == "ner":
        nlp, docs = spacy.blank("en"), []
        for text, spans in [("Anna Berg flew to Oslo", [(0, 9, "PER"), (18, 22, "LOC")]),
                            ("Peter Grant joins Acme Bank", [(0, 11, "PER"), (18, 27, "ORG")])]:
            doc = nlp.make_doc(text)
            doc.ents = [doc.char_span(s, e, label=label) for s, e, label in spans]
            docs.append(doc)
        DocBin(docs=docs).to_disk(path / "train.spacy")
        return path / "train.spacy"
    if kind == "textcat":
        (path / "train.tsv").write_text("sentence\tlabel\nA fine day.\tPOS\nA dull film.\tNEG\nSo-so.\tMIXED\n")
        return path / "train.tsv"
    rows = [("A man plays a guitar.", "A person makes music.", "entailment"),
            ("A dog runs.", "A cat sleeps.", "contradiction"), ("A child reads.", "The book is old.", "neutral")]
    (path / "train.jsonl").write_text("".join(
        json.dumps({"sentence1": a, "sentence2": b, "gold_label": label}) + "\n" for a, b, label in rows))
    return path / "train.jsonl"


def _write_config(directory, output, *options):
    result = CliRunner().invoke(app, ["init-config", str(output), "--from-hf", str(directory), "--precision", "fp32",
                                      *options])
    assert result.exit_code == 0, result.output
    return output


def _initialized(config_path, corpus, **overrides):
    """The pipeline as `spacy train` has it before its first update."""
    config = load_config(config_path, overrides={"paths.train": str(corpus), "paths.dev": str(corpus), **overrides},
                         interpolate=False)
    return init_nlp(config)


# (kind, family, labels, the component, how its predictions are compared)
CASES = {
    "ner": ("bert", "Token", NER_LABELS, "ner"),
    "textcat": ("roberta", "Sequence", CLASSES, "textcat"),  # a tanh hidden layer on <s>
    "nli": ("bert", "Sequence", NLI_LABELS, "nli"),  # the backbone's pooler; "entailment": pairs
}


@pytest.mark.parametrize("kind", list(CASES))
def test_a_from_hf_config_starts_as_the_directory_predicts_then_trains(kind, tmp_path):
    family, architecture, labels, name = CASES[kind]
    directory = make_classifier(tmp_path / "model", family, architecture, labels)
    config = _write_config(directory, tmp_path / "train.cfg")
    corpus = _corpus("textcat" if kind == "textcat" else kind, tmp_path)
    nlp = _initialized(config, corpus)
    assert nlp.pipe_names == ["encoder", name]
    if kind == "ner":
        assert assert_transformers_entities(nlp, directory, name) == 46
        assert nlp.get_pipe(name).labels == ("LOC", "ORG", "PER")
    elif kind == "textcat":
        assert_transformers_scores(nlp, directory, CLASSES)
    else:
        assert nlp.get_pipe(name).cfg["pair_input"]
        assert_transformers_pair_scores(nlp, directory, NLI_LABELS)
    before = {k: v.clone() for k, v in nlp.get_pipe(name).model.shims[0].module.state_dict().items()}
    train(config, tmp_path / "out", overrides={"paths.train": str(corpus), "paths.dev": str(corpus),
                                                "training.max_steps": 2, "training.eval_frequency": 2})
    trained = spacy.load(tmp_path / "out" / "model-last")
    after = trained.get_pipe(name).model.shims[0].module.state_dict()
    assert trained.get_pipe(name).labels == nlp.get_pipe(name).labels
    moved = [k for k in before if not torch.equal(before[k], after[k])]
    assert moved  # trained on from the directory's head, not from a fresh one:
    for key in before:
        cosine = torch.nn.functional.cosine_similarity(before[key].flatten(), after[key].flatten(), dim=0)
        assert cosine > 0.95, key


def test_from_hf_with_a_crf_starts_with_zero_transitions(tmp_path):
    directory = make_classifier(tmp_path / "model", "bert", "Token", NER_LABELS)
    config = _write_config(directory, tmp_path / "train.cfg", "--crf")
    nlp = _initialized(config, _corpus("ner", tmp_path))
    head = nlp.get_pipe("ner").model.shims[0].module
    assert head.crf and not head.transitions.any() and not head.start.any() and not head.end.any()


def test_a_bad_directory_is_a_clear_error(tiny_model_dir, tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["init-config", str(tmp_path / "a.cfg"), "--from-hf", str(tiny_model_dir)])
    assert result.exit_code == 1 and not (tmp_path / "a.cfg").exists()
    assert "expected one *ForTokenClassification or *ForSequenceClassification" in result.output
    result = runner.invoke(app, ["init-config", str(tmp_path / "a.cfg"), "--from-hf", str(tmp_path / "none")])
    assert result.exit_code == 1 and "none: no such directory" in result.output
    result = runner.invoke(app, ["init-config", str(tmp_path / "a.cfg"), "--from-hf", str(tiny_model_dir),
                                 "--task", "vectors"])
    assert result.exit_code == 2 and "ner, textcat or nli (a fine-tuned classifier's), not 'vectors'" in result.output
    # a config whose from_hf names a classifier saved without its head
    directory = make_classifier(tmp_path / "model", "bert", "Sequence", CLASSES)
    config = _write_config(directory, tmp_path / "train.cfg")
    from safetensors.torch import load_file, save_file

    weights = directory / "model.safetensors"
    save_file({k: v for k, v in load_file(str(weights)).items() if not k.startswith("classifier.")}, str(weights),
              metadata={"format": "pt"})
    with pytest.raises(ModelLoadError, match="the weights lack 2 tensors of the classifier"):
        _initialized(config, _corpus("textcat", tmp_path))


@pytest.mark.parametrize("kind, override, message", [
    ("ner", {"initialize.components.ner.labels": ["PER", "MISC"]},
     ["labels ['MISC', 'PER'] in [initialize.components.ner] are not the directory's ['LOC', 'ORG', 'PER']"]),
    ("ner", {"components.ner.scheme": "BIOES"}, ["has scheme 'BIOES'; the directory's tags", "are BIO's"]),
    ("ner", {"components.ner.model.tok2vec.pooling": "mean"}, ["scores each token from its pieces' mean"]),
    ("textcat", {"components.textcat.model.tok2vec.pooling": "doc_mean"},
     ["has pooling 'doc_mean', no hidden layer; bert's", "head is pooling 'pooler', no hidden layer: the component "
      "cannot start from this head"]),
    ("textcat", {"components.textcat.model.exclusive_classes": False},
     ["has exclusive_classes = false; the directory's classifier is single-label"]),
])
def test_a_component_that_does_not_fit_the_directory_is_a_clear_error(kind, override, message, tmp_path):
    labels, architecture = (NER_LABELS, "Token") if kind == "ner" else (CLASSES, "Sequence")
    directory = make_classifier(tmp_path / "model", "bert", architecture, labels)
    config = _write_config(directory, tmp_path / "train.cfg")
    with pytest.raises(SpacyMlmError, match=".*".join(map(re.escape, message))):
        _initialized(config, _corpus(kind, tmp_path), **override)


def test_from_hf_on_the_wrong_kind_of_component_is_a_clear_error(tmp_path):
    tagger = make_classifier(tmp_path / "tagger", "bert", "Token", NER_LABELS)
    classifier = make_classifier(tmp_path / "classifier", "bert", "Sequence", CLASSES)
    config = _write_config(classifier, tmp_path / "train.cfg")
    with pytest.raises(ModelLoadError, match=re.escape("'textcat' (from_hf = ") + ".* is a classifier: textcat does "
                       "not fit the architecture BertForTokenClassification"):
        _initialized(config, _corpus("textcat", tmp_path), **{"paths.encoder": str(tagger)})
