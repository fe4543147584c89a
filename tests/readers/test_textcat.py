import json
from pathlib import Path

import pytest
import spacy

from spacy_mlm.errors import DataFormatError
from spacy_mlm.readers.textcat import create_textcat_corpus_v1, read_textcat

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"


def write(path: Path, lines, encoding="utf8") -> Path:
    path.write_bytes(("\n".join(lines) + "\n").encode(encoding))
    return path


def test_sst2_tsv_with_label_names_and_skips(tmp_path):
    path = write(tmp_path / "train.tsv", [
        "sentence\tlabel",
        "a charming journey \t1",
        "bleak and desperate \t0",
        "no label here\t",
        " \t1",
    ])
    data = read_textcat(path, label_names={"0": "negative", "1": "positive"})
    assert [(eg.text, eg.labels) for eg in data.examples] == [
        ("a charming journey", ("positive",)),
        ("bleak and desperate", ("negative",)),
    ]
    assert data.labels == ("negative", "positive")
    assert data.skipped == {"unlabeled": 1, "empty text": 1}
    assert not data.multi_label
    with pytest.raises(DataFormatError, match=r"train.tsv, line 2: label '1' has no name"):
        read_textcat(path, label_names={"0": "negative"})


def test_tsv_named_columns_and_errors(tmp_path):
    path = write(tmp_path / "data.tsv", ["id\tbody\ttopic", "1\tgoal scored\tsport", "2\tshares fell\tbusiness"])
    data = read_textcat(path, text_column="body", label_column="topic")
    assert [(eg.text, eg.labels[0]) for eg in data.examples] == [("goal scored", "sport"), ("shares fell", "business")]
    with pytest.raises(DataFormatError, match="line 1: header"):
        read_textcat(path)
    ragged = write(tmp_path / "ragged.tsv", ["sentence\tlabel", "fine\t1", "too\tmany\tcols"])
    with pytest.raises(DataFormatError, match=r"ragged.tsv, line 3: expected 2 tab-separated columns"):
        read_textcat(ragged)
    with pytest.raises(DataFormatError, match="suffix"):
        read_textcat(write(tmp_path / "data.xyz", ["x"]))


def test_ag_news_csv_with_classes_file(tmp_path):
    path = write(tmp_path / "test.csv", [
        '"3","Fears for pension","Unions say they are ""disappointed"" after talks."',
        '"2","Team wins, again","A late goal."',
    ])
    classes = write(tmp_path / "classes.txt", ["World", "Sports", "Business", "Sci/Tech"])
    data = read_textcat(path, label_names_file=classes)
    assert data.examples[0].text == 'Fears for pension Unions say they are "disappointed" after talks.'
    assert data.examples[0].labels == ("Business",)
    assert data.examples[1].labels == ("Sports",) and data.examples[1].line == 2
    assert data.labels == ("World", "Sports", "Business", "Sci/Tech")
    bad = write(tmp_path / "bad.csv", ['"1","ok"', '"onlylabel"'])
    with pytest.raises(DataFormatError, match=r"bad.csv, line 2"):
        read_textcat(bad)


def test_trec_latin1_coarse_and_fine(tmp_path):
    path = write(tmp_path / "train_5500.label", [
        "DESC:manner How did serfdom develop in and then leave Russia ?",
        "HUM:ind Who was Pel\u00e9 ?",
        "NUM:dist How far is it ?",
    ], encoding="latin-1")
    coarse = read_textcat(path)
    assert [eg.labels[0] for eg in coarse.examples] == ["DESC", "HUM", "NUM"]
    assert coarse.examples[1].text == "Who was Pel\u00e9 ?"
    fine = read_textcat(path, trec_granularity="fine")
    assert [eg.labels[0] for eg in fine.examples] == ["DESC:manner", "HUM:ind", "NUM:dist"]
    with pytest.raises(DataFormatError, match="cannot decode as utf-8"):
        read_textcat(path, encoding="utf-8")
    bad = write(tmp_path / "bad.label", ["DESC:manner fine", "nolabel question here"])
    with pytest.raises(DataFormatError, match=r"bad.label, line 2: expected 'COARSE:fine"):
        read_textcat(bad)


def test_jsonl_single_and_multi_label(tmp_path):
    path = write(tmp_path / "data.jsonl", [
        json.dumps({"text": "rain and wind", "labels": ["weather", "news"]}),
        json.dumps({"text": "a match report", "cats": {"sport": 1.0, "news": 1.0, "weather": 0.0}}),
        json.dumps({"text": "tomorrow", "label": "weather"}),
        json.dumps({"text": "integers work", "label": 1}),
        json.dumps({"text": "no labels at all", "labels": []}),
    ])
    data = read_textcat(path)
    assert [eg.labels for eg in data.examples] == [("weather", "news"), ("sport", "news"), ("weather",), ("1",)]
    assert data.multi_label
    assert data.labels == ("1", "news", "sport", "weather")
    assert data.skipped == {"unlabeled": 1}
    bad = write(tmp_path / "bad.jsonl", [json.dumps({"text": "x"})])
    with pytest.raises(DataFormatError, match=r"bad.jsonl, line 1: needs a 'label'"):
        read_textcat(bad)


def test_corpus_one_hot_multi_hot_and_subsample(tmp_path):
    path = write(tmp_path / "data.jsonl", [
        json.dumps({"text": f"text number {i}", "labels": ["a", "b"] if i % 3 == 0 else ["c"]}) for i in range(9)
    ])
    nlp = spacy.blank("en")
    examples = list(create_textcat_corpus_v1(path)(nlp))
    assert len(examples) == 9
    assert examples[0].reference.cats == {"a": 1.0, "b": 1.0, "c": 0.0}
    assert examples[1].reference.cats == {"a": 0.0, "b": 0.0, "c": 1.0}
    assert examples[1].predicted.text == "text number 1" and not examples[1].predicted.cats
    sample = [eg.predicted.text for eg in create_textcat_corpus_v1(path, limit=4, shuffle=True, seed=3)(nlp)]
    assert len(sample) == 4 and sample == [
        eg.predicted.text for eg in create_textcat_corpus_v1(path, limit=4, shuffle=True, seed=3)(nlp)
    ]
    assert sample != [f"text number {i}" for i in range(4)]


@pytest.mark.skipif(not (SHARED / "sst2").is_dir(), reason="shared data not present")
def test_shared_sst2_dev_counts():
    data = read_textcat(SHARED / "sst2" / "dev.tsv")
    assert len(data.examples) == 872 and data.labels == ("0", "1")
    assert sum(eg.labels == ("1",) for eg in data.examples) == 444
