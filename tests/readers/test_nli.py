import json
from pathlib import Path

import pytest
import spacy

from spacy_mlm.errors import DataError, DataFormatError, SettingError
from spacy_mlm.readers.nli import (
    THREE_WAY,
    TWO_WAY,
    apply_label_scheme,
    create_nli_corpus_v1,
    normalize_nli_label,
    read_nli,
)

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"


def write(path: Path, lines) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf8")
    return path


def test_normalize_label_aliases_and_unlabeled():
    assert normalize_nli_label("ENTAILMENT") == "entailment"
    assert normalize_nli_label(" Neutral ") == "neutral"
    assert normalize_nli_label("non-entailment") == "not_entailment"
    assert normalize_nli_label("-") is None
    assert normalize_nli_label("") is None
    assert normalize_nli_label(None) is None
    with pytest.raises(KeyError):
        normalize_nli_label("maybe")


def test_label_schemes():
    assert apply_label_scheme(["entailment", "neutral"], "auto")[0] == THREE_WAY
    assert apply_label_scheme(["entailment", "not_entailment"], "auto")[0] == TWO_WAY
    labels, mapping = apply_label_scheme(["neutral", "contradiction"], "binary")
    assert labels == TWO_WAY and mapping["neutral"] == mapping["contradiction"] == "not_entailment"
    with pytest.raises(DataError, match="three-way"):
        apply_label_scheme(["not_entailment"], "three_way")
    with pytest.raises(DataError, match="mix"):
        apply_label_scheme(["not_entailment", "neutral"], "auto")


def test_multinli_jsonl_skips_and_counts_unlabeled(tmp_path):
    rows = [
        {"gold_label": "entailment", "sentence1": "A man sleeps.", "sentence2": "A person rests.", "label1": "neutral"},
        {"gold_label": "-", "sentence1": "A dog runs.", "sentence2": "An animal moves."},
        {"gold_label": "contradiction", "sentence1": "It rains.", "sentence2": "It is dry."},
        {"gold_label": "-", "sentence1": "Two cats.", "sentence2": "Cats."},
        {"gold_label": "neutral", "sentence1": "Hi.", "sentence2": "   "},
    ]
    path = write(tmp_path / "mnli.jsonl", [json.dumps(r) for r in rows] + [""])
    data = read_nli(path)
    assert [(eg.label, eg.line) for eg in data.examples] == [("entailment", 1), ("contradiction", 3)]
    assert data.examples[0].premise == "A man sleeps." and data.examples[0].hypothesis == "A person rests."
    assert data.skipped == {"unlabeled": 2, "empty text": 1}
    assert data.labels == THREE_WAY
    assert "skipped: 1 empty text, 2 unlabeled" in data.summary()


def test_glue_mnli_tsv_uses_gold_label_column(tmp_path):
    header = "index\tgenre\tsentence1\tsentence2\tlabel1\tlabel2\tgold_label"
    path = write(tmp_path / "dev_matched.tsv", [
        header,
        '0\tfiction\tHe said "no".\tHe refused.\tneutral\tentailment\tentailment',
        "1\tfiction\tShe left.\tShe stayed.\tcontradiction\tcontradiction\tcontradiction",
        "2\tfiction\tA.\tB.\tneutral\tentailment\t-",
    ])
    data = read_nli(path)
    assert [eg.label for eg in data.examples] == ["entailment", "contradiction"]
    assert data.examples[0].premise == 'He said "no".'
    assert data.skipped == {"unlabeled": 1}


def test_rte_stays_two_way_and_binary_collapses_three_way(tmp_path):
    rte = write(tmp_path / "rte.tsv", [
        "index\tsentence1\tsentence2\tlabel",
        "0\tA cat sat.\tA cat exists.\tentailment",
        "1\tA cat sat.\tA dog flew.\tnot_entailment",
    ])
    data = read_nli(rte)
    assert data.labels == TWO_WAY
    assert [eg.label for eg in data.examples] == ["entailment", "not_entailment"]
    with pytest.raises(DataFormatError, match="three-way"):
        read_nli(rte, label_scheme="three_way")
    sick = write(tmp_path / "SICK_train.txt", [
        "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment",
        "1\tA boy runs\tA kid runs\t4.5\tENTAILMENT",
        "2\tA boy runs\tA boy sits\t3.0\tCONTRADICTION",
        "3\tA boy runs\tA boy runs fast\t4.0\tNEUTRAL",
    ])
    assert [eg.label for eg in read_nli(sick).examples] == ["entailment", "contradiction", "neutral"]
    binary = read_nli(sick, label_scheme="binary")
    assert binary.labels == TWO_WAY
    assert [eg.label for eg in binary.examples] == ["entailment", "not_entailment", "not_entailment"]


def test_headerless_label_first_tsv_with_crlf(tmp_path):
    path = tmp_path / "sample.tsv"
    path.write_bytes(b"neutral\tImpossible .\tImpossible , unless .\r\nentailment\tA b .\tA .\r\n")
    data = read_nli(path)
    assert [(eg.label, eg.premise, eg.hypothesis) for eg in data.examples] == [
        ("neutral", "Impossible .", "Impossible , unless ."),
        ("entailment", "A b .", "A ."),
    ]


def test_errors_name_file_and_line(tmp_path):
    bad_label = write(tmp_path / "bad.tsv", ["sentence1\tsentence2\tlabel", "a\tb\tentailment", "a\tb\tperhaps"])
    with pytest.raises(DataFormatError, match=r"bad.tsv, line 3: unknown NLI label 'perhaps'"):
        read_nli(bad_label)
    bad_columns = write(tmp_path / "cols.tsv", ["sentence1\tsentence2\tlabel", "a\tb"])
    with pytest.raises(DataFormatError, match=r"cols.tsv, line 2: expected 3 tab-separated columns, found 2"):
        read_nli(bad_columns)
    bad_json = write(tmp_path / "bad.jsonl", ['{"premise": "a", "hypothesis": "b", "label": "neutral"}', "{oops"])
    with pytest.raises(DataFormatError, match=r"bad.jsonl, line 2: invalid JSON"):
        read_nli(bad_json)
    no_label = write(tmp_path / "nolabel.jsonl", ['{"premise": "a", "hypothesis": "b"}'])
    with pytest.raises(DataFormatError, match=r"line 1: needs premise"):
        read_nli(no_label)
    unknown_header = write(tmp_path / "what.tsv", ["foo\tbar", "1\t2"])
    with pytest.raises(DataFormatError, match="not a known NLI TSV"):
        read_nli(unknown_header)
    with pytest.raises(DataFormatError, match="file not found"):
        read_nli(tmp_path / "missing.tsv")


def test_corpus_yields_pair_docs_with_one_hot_cats(tmp_path):
    rows = [{"premise": f"A man number {i} sleeps .", "hypothesis": "A person rests .",
             "label": ["entailment", "neutral", "contradiction", "-"][i % 4]} for i in range(8)]
    path = write(tmp_path / "snli.jsonl", [json.dumps(r) for r in rows])
    nlp = spacy.blank("en")
    examples = list(create_nli_corpus_v1(path)(nlp))
    assert len(examples) == 6
    eg = examples[0]
    assert eg.predicted._.mlm_pair_start == len(nlp.make_doc(rows[0]["premise"]))
    assert eg.predicted.text.startswith("A man number 0 sleeps .") and eg.predicted.text.endswith("rests .")
    assert eg.reference.cats == {"entailment": 1.0, "neutral": 0.0, "contradiction": 0.0}
    assert eg.reference._.mlm_pair_start == eg.predicted._.mlm_pair_start
    some = list(create_nli_corpus_v1(path, limit=3, shuffle=True, seed=1)(nlp))
    again = list(create_nli_corpus_v1(path, limit=3, shuffle=True, seed=1)(nlp))
    assert len(some) == 3 and [e.predicted.text for e in some] == [e.predicted.text for e in again]
    with pytest.raises(SettingError, match="label_scheme"):
        create_nli_corpus_v1(path, label_scheme="four_way")


@pytest.mark.skipif(not (SHARED / "mnli_sample").is_dir(), reason="shared data not present")
def test_shared_nli_files_counts():
    mnli = read_nli(SHARED / "mnli_sample" / "dev_matched_sample1000.tsv")
    counts = {label: sum(eg.label == label for eg in mnli.examples) for label in mnli.labels}
    assert counts == {"entailment": 373, "neutral": 311, "contradiction": 316}
    rte = read_nli(SHARED / "rte" / "dev.tsv")
    assert rte.labels == TWO_WAY and len(rte.examples) == 277 and not rte.skipped
