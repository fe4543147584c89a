"""import-hf reads config.json's label maps before any weight (issue 48, case
8): ids 0..n-1, names that are strings and used once, at most MAX_LABELS of
them, each error one message naming the file and printing no long list."""
import json
import logging
import re

import pytest
from typer.testing import CliRunner

from spacy_mlm.cli import app
from spacy_mlm.errors import ModelLoadError
from spacy_mlm.interop.hf_heads import MAX_LABELS, choose_task, import_hf

from .hf_models import make_classifier


def config_only(directory, **settings):
    """A directory with a config.json and no weights: an error about its labels
    shows they were read before any weight."""
    directory.mkdir()
    config = {"architectures": ["BertForSequenceClassification"], "model_type": "bert", **settings}
    (directory / "config.json").write_text(json.dumps(config), encoding="utf8")
    return directory


@pytest.mark.parametrize("id2label, message", [
    ({"0": "O", "1": "B-PER", "2": "I-PER", "3": "B-LOC", "7": "I-LOC"},  # once a bare KeyError: 4
     "id2label's ids must be 0..4 for its 5 labels: [4] missing; [7] outside that range"),
    ({"1": "A", "2": "B"}, "id2label's ids must be 0..1 for its 2 labels: [0] missing; [2] outside that range"),
    ({"0": "A", "x": "B"}, "id2label's key 'x' is no integer id"),
    ({"0": "A", "1": 7}, "id2label's label of id 1 is 7, not a string"),
    ({"0": "NEG", "1": "POS", "2": "NEG"}, "id2label names ['NEG'] more than once ('NEG': ids [0, 2])"),
    (["A", "B"], "id2label must be an object, got list"),
])
def test_a_bad_id2label_is_refused_naming_the_file(tmp_path, id2label, message):
    directory = config_only(tmp_path / "model", id2label=id2label)
    with pytest.raises(ModelLoadError, match=re.escape(message)) as caught:
        import_hf(directory)
    assert caught.value.path == str(directory.resolve() / "config.json")


def test_a_label_map_of_100000_labels_is_refused_by_its_count_without_printing_it(tmp_path):
    """Once refused after 243 s with every label in the message."""
    n = 100_000
    directory = config_only(tmp_path / "model", id2label={str(i): f"LABEL_{i}" for i in range(n)})
    with pytest.raises(ModelLoadError) as caught:
        choose_task(directory, None)
    assert str(caught.value) == (f"{directory / 'config.json'}: id2label has 100,000 labels; at most "
                                 f"{MAX_LABELS:,} are imported")
    directory = config_only(tmp_path / "other", label2id={f"LABEL_{i}": i for i in range(n)})
    with pytest.raises(ModelLoadError, match="label2id has 100,000 labels"):
        choose_task(directory, None)


def test_long_lists_in_messages_are_cut_short(tmp_path):
    id2label = {str(i): f"L{i}" for i in range(9000)}
    id2label.update({str(i + 20000): id2label.pop(str(i)) for i in range(1000, 1010)})
    with pytest.raises(ModelLoadError) as caught:
        choose_task(config_only(tmp_path / "model", id2label=id2label), None)
    assert "[1000, 1001, 1002, 1003, 1004, ... (10 in all)] missing" in str(caught.value)
    assert len(str(caught.value)) < 400


def test_a_label2id_that_is_no_map_of_ids_is_refused_and_one_that_disagrees_is_said(tmp_path, caplog):
    directory = config_only(tmp_path / "bad", id2label={"0": "A", "1": "B"}, label2id={"A": 0, "B": "1"})
    with pytest.raises(ModelLoadError, match="label2id must map each label to an integer id"):
        choose_task(directory, None)
    directory = config_only(tmp_path / "stale", id2label={"0": "NEG", "1": "POS"},
                            label2id={"LABEL_0": 0, "LABEL_1": 1})
    with caplog.at_level(logging.WARNING, logger="spacy_mlm.interop.hf_heads"):
        assert choose_task(directory, None) == "textcat"
    assert "label2id is not id2label turned round; id2label is read" in caplog.text


def test_an_id_given_twice_in_the_json_is_refused(tmp_path):
    """json keeps the last of a repeated key silently: one label would be lost."""
    directory = config_only(tmp_path / "model")
    text = (directory / "config.json").read_text(encoding="utf8")
    (directory / "config.json").write_text(text[:-1] + ', "id2label": {"0": "A", "1": "B", "0": "C"}}', encoding="utf8")
    with pytest.raises(ModelLoadError, match=re.escape("cannot be read (an object has the key '0' more than once)")):
        choose_task(directory, None)


def test_a_sequence_classifier_with_a_label_named_twice_is_one_error_line_naming_the_file(tmp_path):
    """Once a bare tensor-size error with no path."""
    directory = make_classifier(tmp_path / "model", "bert", "Sequence", ["NEG", "POS", "NEG"])
    result = CliRunner().invoke(app, ["import-hf", str(directory), str(tmp_path / "out")])
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines() == [
        f"error: {directory.resolve() / 'config.json'}: id2label names ['NEG'] more than once ('NEG': ids [0, 2]): "
        "each class needs a name of its own"
    ]
    assert not (tmp_path / "out").exists()
