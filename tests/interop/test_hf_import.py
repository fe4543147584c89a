"""`import_hf` against transformers' own pipelines, on tiny random fine-tuned
BERT, RoBERTa and DeBERTa-v2 models built here: the entities of
`pipeline("token-classification", aggregation_strategy="first")` and the scores
of `pipeline("text-classification", top_k=None)`, single texts and pairs."""
import re

import spacy
import pytest
import torch

import spacy_mlm
from spacy_mlm.errors import ModelLoadError, SpacyMlmError
from spacy_mlm.interop.hf_heads import import_hf, read_tag_scheme
from spacy_mlm.tagging.schemes import is_valid_sequence

from .compare import assert_transformers_entities, assert_transformers_pair_scores, assert_transformers_scores
from .hf_models import FAMILIES, MORE_SEQUENCE_FAMILIES, make_classifier
from .sentences import SENTENCES

NER_LABELS = ["B-ORG", "O", "I-PER", "B-LOC", "I-ORG", "B-PER", "I-LOC"]  # not in our order
NLI_LABELS = ["contradiction", "neutral", "entailment"]


@pytest.fixture(scope="module")
def ner_dirs(tmp_path_factory):
    """A token classifier directory per family, made when first asked for."""
    made = {}

    def get(family):
        if family not in made:
            made[family] = make_classifier(tmp_path_factory.mktemp(family), family, "Token", NER_LABELS)
        return made[family]

    return get


@pytest.fixture(params=FAMILIES)
def ner_dir(request, ner_dirs):
    return request.param, ner_dirs(request.param)


def test_imported_ner_gives_transformers_entities_and_probabilities(ner_dir):
    family, ner_dir = ner_dir
    same_words = assert_transformers_entities(import_hf(ner_dir), ner_dir, "mlm_ner")
    # BERT and DeBERTa (WordPiece) split punctuation as spaCy does: only "Monday's",
    # "U.S.", "don't" and "3.5" differ; RoBERTa's byte-level BPE has no word marker,
    # so transformers glues punctuation to the word before it ("Oslo.", "(Acme"):
    # the 14 sentences without such are compared
    assert same_words == {"bert": 46, "roberta": 14, "deberta-v2": 46}[family]


@pytest.mark.parametrize("family, problem_type", [
    *((family, problem_type) for family in FAMILIES for problem_type in (None, "multi_label_classification")),
    *((family, None) for family in MORE_SEQUENCE_FAMILIES),
])
def test_imported_classifier_gives_transformers_scores(tmp_path, family, problem_type):
    directory = make_classifier(tmp_path, family, "Sequence", ["NEG", "POS", "MIXED"], problem_type)
    nlp = import_hf(directory)
    assert nlp.get_pipe("mlm_textcat").exclusive_classes == (problem_type is None)
    assert_transformers_scores(nlp, directory, ["NEG", "POS", "MIXED"])


@pytest.mark.parametrize("family", FAMILIES)
def test_imported_pair_classifier_gives_transformers_scores(tmp_path, family):
    directory = make_classifier(tmp_path, family, "Sequence", NLI_LABELS)
    nlp = import_hf(directory)  # "entailment" among the labels: a pair model
    assert nlp.get_pipe("mlm_textcat").cfg["pair_input"]
    assert_transformers_pair_scores(nlp, directory, NLI_LABELS)


def test_a_crf_import_starts_as_the_softmax(ner_dir):
    _, ner_dir = ner_dir
    softmax, crf = import_hf(ner_dir), import_hf(ner_dir, crf=True)
    head = crf.get_pipe("mlm_ner").model.shims[0].module
    assert head.crf and not head.transitions.any()
    for a, b in zip(softmax.pipe(SENTENCES[:10]), crf.pipe(SENTENCES[:10])):
        assert [(e.start, e.end, e.label_) for e in a.ents] == [(e.start, e.end, e.label_) for e in b.ents]


@pytest.mark.parametrize("labels, scheme, types", [
    (["O", "B-PER", "I-PER"], "BIO", ["PER"]),
    (["I-LOC", "O", "I-PER"], "IO", ["LOC", "PER"]),
    (["O", "B-X", "I-X", "E-X", "S-X"], "BIOES", ["X"]),
    (["U-X", "B-X", "L-X", "O", "I-X"], "BIOES", ["X"]),
])
def test_tag_schemes_are_read_from_the_labels(labels, scheme, types):
    found, found_types, order = read_tag_scheme(dict(enumerate(labels)), "config.json", None)
    assert (found, found_types) == (scheme, types)
    tags = spacy_mlm.make_tag_labels(types, scheme)
    assert [labels[i].replace("U-", "S-").replace("L-", "E-") for i in order] == tags


@pytest.mark.parametrize("labels, scheme, message", [
    (["O", "PER", "LOC"], None, "'PER' (id 1), which is no tag"),
    (["LABEL_0", "LABEL_1"], None, "'LABEL_0' (id 0)"),
    (["O", "B-PER", "I-PER", "B-LOC"], None, "BIO tag set of the types ['LOC', 'PER']: ['I-LOC'] missing"),
    (["O", "B-PER", "I-PER", "I-PER"], None, "['I-PER'] repeated"),
    (["O", "B-PER", "I-PER"], "IO", "IO tag set of the types ['PER']: ['B-PER'] not in it"),
    (["O", "B-PER", "I-PER"], "IOB3", "Unknown tag scheme 'IOB3'"),
])
def test_unknown_or_incomplete_tag_sets_are_clear_errors(labels, scheme, message):
    with pytest.raises(SpacyMlmError, match=re.escape(message)):
        read_tag_scheme(dict(enumerate(labels)), "config.json", scheme)


def test_a_tagger_trained_on_iob1_is_imported_as_iob1(ner_dirs):
    """Same predictions unconstrained; IOB1's constraints and training tags."""
    bio, iob1 = import_hf(ner_dirs("bert")), import_hf(ner_dirs("bert"), scheme="IOB1")
    tagger = iob1.get_pipe("mlm_ner")
    assert tagger.cfg["scheme"] == "IOB1" and tagger.tag_labels == bio.get_pipe("mlm_ner").tag_labels
    for a, b in zip(bio.pipe(SENTENCES[:10]), iob1.pipe(SENTENCES[:10])):
        assert [(e.start, e.end, e.label_) for e in a.ents] == [(e.start, e.end, e.label_) for e in b.ents]
    tagger.cfg["constrained"] = True
    paths, *_ = tagger.predict(list(iob1.pipe(SENTENCES)))  # the docs keep their encoding
    tags = [[tagger.tag_labels[j] for j in path] for path in paths]
    assert all(is_valid_sequence(sequence, "IOB1") for sequence in tags)
    assert any(t[i].startswith("I-") and (i == 0 or t[i - 1] == "O") for t in tags for i in range(len(t)))


def test_a_directory_without_a_classifier_is_refused(tiny_model_dir, tmp_path):
    with pytest.raises(ModelLoadError, match="expected one \\*ForTokenClassification"):
        import_hf(tiny_model_dir)
    with pytest.raises(ModelLoadError, match="missing: no such directory"):
        import_hf(tmp_path / "missing")
    directory = make_classifier(tmp_path, "bert", "Sequence", ["NEG", "POS"])
    with pytest.raises(SpacyMlmError, match="settings of a tagger; .* is imported as textcat"):
        import_hf(directory, scheme="IOB1")
    with pytest.raises(ModelLoadError, match="--task ner does not fit the architecture BertForSequenceClassification"):
        import_hf(directory, task="ner")
    from safetensors.torch import load_file, save_file

    weights = directory / "model.safetensors"
    save_file({k: v for k, v in load_file(str(weights)).items() if not k.startswith("classifier.")}, str(weights),
              metadata={"format": "pt"})
    with pytest.raises(ModelLoadError, match="the weights lack 2 tensors of the classifier .*classifier.weight"):
        import_hf(directory)


def _ner_corpus(nlp, path):
    from spacy.tokens import DocBin

    rows = [("Anna Berg flew to Oslo", [(0, 9, "PER"), (18, 22, "LOC")]),
            ("Peter Grant joins Acme Bank", [(0, 11, "PER"), (18, 27, "ORG")])]
    docs = []
    for text, spans in rows:
        doc = nlp.make_doc(text)
        doc.ents = [doc.char_span(s, e, label=label) for s, e, label in spans]
        docs.append(doc)
    DocBin(docs=docs).to_disk(path)
    return path


def test_an_imported_pipeline_trains_on_with_spacy_train_from_its_weights(ner_dirs, tmp_path):
    """import-hf --training-config writes init-config --from-hf's config (the
    header's command aside), from which `spacy train` starts at the directory's
    head, as the import holds it (the weights move a little; a fresh start
    would be Normal(0, 0.02))."""
    from spacy.cli.train import train
    from typer.testing import CliRunner

    from spacy_mlm.cli import app
    from spacy_mlm.models.tagger import tagger_head

    imported, config = tmp_path / "imported", tmp_path / "train.cfg"
    runner = CliRunner()
    result = runner.invoke(app, ["import-hf", str(ner_dirs("bert")), str(imported), "--training-config", str(config)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["init-config", str(tmp_path / "init.cfg"), "--from-hf", str(ner_dirs("bert"))])
    assert result.exit_code == 0, result.output
    written, from_init = (path.read_text().replace(str(path), "OUTPUT").splitlines()
                          for path in (config, tmp_path / "init.cfg"))
    assert written[1].startswith("# Written by: python -m spacy_mlm import-hf ")
    assert written[2:] == from_init[2:]
    nlp = spacy.load(imported)
    corpus = str(_ner_corpus(nlp, tmp_path / "train.spacy"))
    train(config, tmp_path / "out", overrides={"paths.train": corpus, "paths.dev": corpus, "training.max_steps": 3,
                                                "training.eval_frequency": 3})
    before = tagger_head(nlp.get_pipe("mlm_ner").model).output.weight.detach()
    trained = spacy.load(tmp_path / "out" / "model-last")
    after = tagger_head(trained.get_pipe("ner").model).output.weight.detach()
    assert not torch.equal(before, after)
    assert torch.nn.functional.cosine_similarity(before.flatten(), after.flatten(), dim=0) > 0.95


@pytest.mark.parametrize("family", ["bert", "deberta-v2"])
def test_an_imported_pipeline_runs_through_optimize_int8(ner_dirs, family, tmp_path):
    from typer.testing import CliRunner

    from spacy_mlm.cli import app

    ner_dir = ner_dirs(family)
    runner = CliRunner()
    result = runner.invoke(app, ["import-hf", str(ner_dir), str(tmp_path / "imported")])
    assert result.exit_code == 0, result.output
    assert "mlm_encoder + mlm_ner, labels ['LOC', 'ORG', 'PER'], scheme BIO" in result.output
    result = runner.invoke(app, ["optimize", str(tmp_path / "imported"), str(tmp_path / "int8")])
    assert result.exit_code == 0, result.output
    nlp = spacy.load(tmp_path / "int8")
    assert nlp.get_pipe("mlm_encoder").model.attrs["precision"] == "int8"
    same = float(result.output.split("same_entities: ")[1].split()[0])
    assert same >= 0.5, result.output
