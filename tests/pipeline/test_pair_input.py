"""A classifier trained on sentence pairs remembers it: given a single text it
warns once (naming the command that scores pair files), `spacy_mlm evaluate`
refuses to score it as single texts, and `spacy evaluate` (which rebuilds
Docs from their text) triggers the warning instead of a silent wrong score."""
import logging

import pytest
import spacy
from spacy.tokens import DocBin
from spacy.training import Example

import spacy_mlm  # noqa: F401
from spacy_mlm.errors import SpacyMlmError
from spacy_mlm.pipeline.pair_input import single_text_message
from spacy_mlm.evaluation.evaluate import evaluate_pipeline, resolve_task
from spacy_mlm.tokenization.pair import make_pair_doc

PAIRS = [("A man plays a guitar.", "A person makes music.", "entailment"),
         ("A man plays a guitar.", "Nobody plays music.", "contradiction"),
         ("The cat sleeps on the wall.", "The cat is old.", "neutral")]
LOGGER = "spacy_mlm.pipeline.pair_input"


def classifier(tiny_model_dir, examples_of):
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(tiny_model_dir)}})
    nlp.add_pipe("mlm_textcat", name="nli")
    examples = examples_of(nlp)
    nlp.initialize(lambda: examples)
    return nlp


def labelled(nlp, as_pairs):
    """PAIRS as pair Docs, or as single texts holding both sides."""
    out = []
    for a, b, label in PAIRS:
        doc = make_pair_doc(nlp, a, b) if as_pairs else nlp.make_doc(f"{a} {b}")
        reference = doc.copy()
        reference.cats = {lab: float(lab == label) for _, _, lab in PAIRS}
        out.append(Example(doc, reference))
    return out


def pair_examples(nlp):
    return labelled(nlp, True)


def single_examples(nlp):
    return labelled(nlp, False)


@pytest.fixture(scope="module")
def pair_nlp(tiny_model_dir):
    return classifier(tiny_model_dir, pair_examples)


def test_a_pair_classifier_warns_once_on_single_texts(tiny_model_dir, caplog, tmp_path):
    nlp = classifier(tiny_model_dir, pair_examples)
    assert nlp.get_pipe("nli").cfg["pair_input"] is True
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        nlp(make_pair_doc(nlp, "A man plays.", "Nobody plays."))
        assert not [r for r in caplog.records if r.name == LOGGER]
        nlp("A man plays. Nobody plays.")
        list(nlp.pipe(["A second single text.", "And a third."]))
    warnings = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert warnings == [single_text_message("nli")]
    assert "python -m spacy_mlm evaluate MODEL DATA OUTPUT_DIR" in warnings[0]
    nlp.to_disk(tmp_path / "nli")
    assert spacy.load(tmp_path / "nli").get_pipe("nli").cfg["pair_input"] is True


def test_a_single_text_classifier_never_warns(tiny_model_dir, caplog):
    nlp = classifier(tiny_model_dir, single_examples)
    assert nlp.get_pipe("nli").cfg["pair_input"] is False
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        nlp("A man plays. Nobody plays.")
        nlp(make_pair_doc(nlp, "A man plays.", "Nobody plays."))
    assert not [r for r in caplog.records if r.name == LOGGER]
    assert resolve_task(nlp, "auto") == "textcat"  # NLI labels, but trained on single texts
    with pytest.raises(SpacyMlmError, match="trained on single texts"):
        resolve_task(nlp, "nli")


def test_spacy_mlm_evaluate_refuses_to_score_pairs_as_single_texts(pair_nlp, tmp_path):
    assert resolve_task(pair_nlp, "auto") == "nli"
    texts = tmp_path / "texts.tsv"
    texts.write_text("sentence\tlabel\nA man plays. Nobody plays.\tcontradiction\n", encoding="utf8")
    with pytest.raises(SpacyMlmError, match=r"'nli' was trained on sentence pairs.*--task nli"):
        evaluate_pipeline(pair_nlp, texts, "textcat")


def test_spacy_evaluate_on_a_pair_pipeline_warns(pair_nlp, tmp_path, caplog):
    """spaCy's Corpus makes each predicted Doc with nlp.make_doc(text): the pair
    boundary stored with the gold Docs does not reach the pipeline."""
    from spacy.cli.evaluate import evaluate

    pair_nlp.to_disk(tmp_path / "model")
    docs = [eg.reference for eg in pair_examples(pair_nlp)]
    DocBin(docs=docs, store_user_data=True).to_disk(tmp_path / "dev.spacy")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        evaluate(str(tmp_path / "model"), tmp_path / "dev.spacy", silent=True)
    assert [r.getMessage() for r in caplog.records if r.name == LOGGER] == [single_text_message("nli")]
