"""Bad data files: a DataFormatError naming the file and the line, from every
reader; empty corpora and label mismatches are reported, not trained on."""
import pytest
import spacy
from spacy.tokens import DocBin
from spacy.training import Example

import spacy_mlm  # noqa: F401
from spacy_mlm.errors import DataFormatError, SpacyMlmError
from spacy_mlm.readers.conll import conll_to_docbin, create_conll_corpus_v1, load_ner_docs, read_conll
from spacy_mlm.readers.corpus import read_corpus
from spacy_mlm.readers.nli import create_nli_corpus_v1, read_nli
from spacy_mlm.readers.textcat import create_textcat_corpus_v1, read_textcat
from spacy_mlm.readers.wic import read_wic
from spacy_mlm.readers.wsd import read_sense_keys

GOOD_NLI = '{"premise": "A man plays.", "hypothesis": "Nobody plays.", "label": "contradiction"}\n'

# name: (file name, content, reader, line the error must name, words the message must hold)
CASES = {
    "conll_one_column": ("a.conll", "EU B-ORG\nrejects\n", read_conll, 2, "a word and a tag"),
    "conll_column_count": ("a.conll", "EU B-ORG\nrejects O extra\n", read_conll, 2, "columns"),
    "conll_malformed_tag": ("a.conll", "EU B-ORG\n\nrejects Q-XX\n", read_conll, 3, "Malformed tag"),
    "conll_scheme_break": (
        "a.conll", "EU O\nrejects I-ORG\n", lambda p: read_conll(p, scheme="BIO"), 2, "breaks the BIO scheme",
    ),
    "conll_not_utf8": ("a.conll", b"EU B-ORG\n\xff\xfe O\n", read_conll, 2, "cannot decode"),
    "nli_missing_field": ("a.jsonl", GOOD_NLI + '{"premise": "a", "label": "entailment"}\n', read_nli, 2, "hypothesis"),
    "nli_invalid_json": ("a.jsonl", GOOD_NLI + "{oops\n", read_nli, 2, "invalid JSON"),
    "nli_not_an_object": ("a.jsonl", GOOD_NLI + "[1, 2]\n", read_nli, 2, "JSON object"),
    "nli_unknown_label": (
        "a.jsonl", GOOD_NLI + '{"premise": "a", "hypothesis": "b", "label": "maybe"}\n', read_nli, 2, "'maybe'",
    ),
    "nli_text_not_string": (
        "a.jsonl", '{"premise": 5, "hypothesis": "b", "label": "entailment"}\n', read_nli, 1, "strings",
    ),
    "nli_tsv_columns": (
        "a.tsv", "sentence1\tsentence2\tgold_label\na\tb\tentailment\na\tb\n", read_nli, 3, "columns",
    ),
    "textcat_missing_label": ("a.jsonl", '{"text": "good", "label": "pos"}\n{"text": "a"}\n', read_textcat, 2, "label"),
    "textcat_missing_text": ("a.jsonl", '{"label": "pos"}\n', read_textcat, 1, "text"),
    "textcat_tsv_columns": ("a.tsv", "sentence\tlabel\ngood\t1\nabc\n", read_textcat, 3, "columns"),
    "textcat_bad_cats": ("a.jsonl", '{"text": "a", "cats": [1]}\n', read_textcat, 1, "cats"),
    "corpus_missing_field": ("a.jsonl", '{"text": "ok"}\n{"txt": "a"}\n', read_corpus, 2, "missing field 'text'"),
    "corpus_text_not_string": ("a.jsonl", '{"text": 5}\n', read_corpus, 1, "must be a string"),
    "textcat_lone_surrogate": (
        "a.jsonl", '{"text": "ok \\ud83d\\ude00", "label": "pos"}\n{"text": "good \\ud800", "label": "pos"}\n',
        read_textcat, 2, "lone surrogate",
    ),
    "nli_lone_surrogate": (
        "a.jsonl", GOOD_NLI + '{"premise": "\\udfff", "hypothesis": "b", "label": "entailment"}\n', read_nli, 2,
        "lone surrogate",
    ),
    "corpus_lone_surrogate": ("a.jsonl", '{"text": "a \\uDABC b"}\n', read_corpus, 1, "lone surrogate"),
    "wic_bad_index": ("a.txt", "bank\tN\t1\tThe bank.\tA bank.\n", read_wic, 1, "index column"),
    "wic_index_out_of_range": ("a.txt", "bank\tN\t1-9\tThe bank.\tA bank.\n", read_wic, 1, "out of range"),
    "wic_columns": ("a.txt", "bank\tN\t1-1\tThe bank.\n", read_wic, 1, "columns"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_file_names_file_and_line(tmp_path, case):
    name, content, reader, line, words = CASES[case]
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf8"))
    with pytest.raises(DataFormatError, match=words) as info:
        reader(path)
    assert info.value.path == str(path) and info.value.line == line
    assert str(info.value).startswith(f"{path}, line {line}: ")


@pytest.mark.parametrize("reader", [read_conll, read_nli, read_textcat, read_corpus, read_wic])
def test_missing_file(tmp_path, reader):
    with pytest.raises(DataFormatError) as info:
        reader(tmp_path / "nowhere.jsonl")
    assert str(tmp_path / "nowhere.jsonl") in str(info.value)


def test_empty_pretraining_corpus(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(DataFormatError, match="no text") as info:
        read_corpus(tmp_path / "empty.jsonl")
    assert info.value.path == str(tmp_path / "empty.jsonl")


# name: (file name, content, reader factory, words the message must hold)
EMPTY_CORPORA = {
    "conll": ("train.conll", "\n-DOCSTART- -X- O O\n\n", create_conll_corpus_v1, "no sentences: the file is empty"),
    "nli": (
        "train.jsonl", '{"premise": "a", "hypothesis": "b", "label": "-"}\n' * 2, create_nli_corpus_v1,
        r"no labeled sentence pairs: every row was skipped \(2 unlabeled\)",
    ),
    "textcat": ("train.jsonl", "", create_textcat_corpus_v1, "no labeled texts: the file is empty"),
    "textcat_unlabeled_tsv": (
        "train.tsv", "sentence\tlabel\ngood\t\n", create_textcat_corpus_v1, r"every row was skipped \(1 unlabeled\)",
    ),
}


@pytest.mark.parametrize("kind", list(EMPTY_CORPORA))
def test_empty_training_corpus_names_the_file(tmp_path, kind):
    name, content, make_reader, words = EMPTY_CORPORA[kind]
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(DataFormatError, match=words) as info:
        list(make_reader(path)(spacy.blank("en")))
    assert info.value.path == str(path)


def _ner(tiny_model_dir):
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(tiny_model_dir)}})
    listener = {"@architectures": "spacy_mlm.EncoderListener.v1", "pooling": "first"}
    nlp.add_pipe("mlm_ner", name="ner", config={"model": {"tok2vec": listener}})
    return nlp


def _textcat(tiny_model_dir):
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(tiny_model_dir)}})
    nlp.add_pipe("mlm_textcat", config={"model": {"exclusive_classes": True, "hidden_width": 0,
                                                  "tok2vec": {"pooling": "cls"}}})
    return nlp


TEXT = "Anna Berg works in Oslo."


def test_ner_scores_unknown_gold_labels_as_misses(tiny_model_dir):
    nlp = _ner(tiny_model_dir)
    nlp.initialize(lambda: [Example.from_dict(nlp.make_doc(TEXT), {"entities": [(0, 9, "PER")]})])
    dev = [Example.from_dict(nlp.make_doc(TEXT), {"entities": [(0, 9, "PER"), (19, 23, "LOC")]})]
    scores = nlp.evaluate(dev)
    assert scores["ents_per_type"]["LOC"]["r"] == 0.0  # counted, never predicted
    assert 0.0 <= scores["ents_f"] <= 1.0


def _cats(nlp, text, cats):
    return Example.from_dict(nlp.make_doc(text), {"cats": cats})


def test_textcat_evaluation_with_unknown_gold_label_is_an_error(tiny_model_dir):
    nlp = _textcat(tiny_model_dir)
    nlp.initialize(lambda: [_cats(nlp, "a wonderful film", {"POS": 1.0, "NEG": 0.0}),
                            _cats(nlp, "a dull film", {"POS": 0.0, "NEG": 1.0})])
    known = r"labels \['MEH'\] that the classifier does not know \(it has \['POS', 'NEG'\]\)"
    with pytest.raises(SpacyMlmError, match=known):
        nlp.evaluate([_cats(nlp, "a dull film", {"POS": 0.0, "NEG": 0.0, "MEH": 1.0})])


def test_textcat_label_set_mismatch_between_config_and_data(tiny_model_dir):
    nlp = _textcat(tiny_model_dir)
    data = [_cats(nlp, "a wonderful film", {"POS": 1.0, "NEG": 0.0}), _cats(nlp, "a dull film", {"POS": 0.0, "NEG": 1.0})]
    nlp.get_pipe("mlm_encoder").initialize(lambda: data)
    nlp.get_pipe("mlm_textcat").initialize(lambda: data, nlp=nlp, labels=["A", "B"])
    mismatch = r"labels \['A', 'B'\].*gold labels \['NEG', 'POS'\].*initialize\.components\.mlm_textcat"
    with pytest.raises(SpacyMlmError, match=mismatch):
        nlp.update(data)


def test_textcat_scores_unknown_gold_label_set_to_zero(tiny_model_dir):
    """Only a gold label that is *set* makes scoring wrong; one listed as 0.0 is harmless."""
    nlp = _textcat(tiny_model_dir)
    nlp.initialize(lambda: [_cats(nlp, "a wonderful film", {"POS": 1.0, "NEG": 0.0}),
                            _cats(nlp, "a dull film", {"POS": 0.0, "NEG": 1.0})])
    gold = [("a dull film", {"POS": 0.0, "NEG": 1.0}), ("a wonderful film", {"POS": 1.0, "NEG": 0.0}),
            ("a film", {"POS": 0.0, "NEG": 1.0})]
    with_meh = nlp.evaluate([_cats(nlp, text, {**cats, "MEH": 0.0}) for text, cats in gold])
    without = nlp.evaluate([_cats(nlp, text, cats) for text, cats in gold])
    assert with_meh["cats_accuracy"] is not None
    assert {k: v for k, v in with_meh.items() if k != "speed"} == {k: v for k, v in without.items() if k != "speed"}


def test_ner_label_set_mismatch_between_config_and_data(tiny_model_dir):
    nlp = _ner(tiny_model_dir)
    data = [Example.from_dict(nlp.make_doc(TEXT), {"entities": [(0, 9, "PER"), (19, 23, "LOC")]})]
    nlp.get_pipe("mlm_encoder").initialize(lambda: data)
    nlp.get_pipe("ner").initialize(lambda: data, nlp=nlp, labels=["PER"])
    with pytest.raises(SpacyMlmError, match=r"labels \['PER'\].*labelled \['LOC'\].*initialize\.components\.ner"):
        nlp.update(data)


# name: (file name, content, reader): every reader reads a file saved with a UTF-8 byte-order mark
# (Notepad, Excel's "CSV UTF-8") as it reads the file without one
BOM_FILES = {
    "conll_docstart": ("a.conll", "-DOCSTART- -X- O O\n\nEU B-ORG\nrejects O\n", read_conll),
    "conll_first_word": ("a.conll", "EU B-ORG\nrejects O\n", read_conll),
    "nli_jsonl": ("a.jsonl", GOOD_NLI, read_nli),
    "nli_tsv": ("a.tsv", "sentence1\tsentence2\tgold_label\na\tb\tentailment\n", read_nli),
    "textcat_tsv": ("a.tsv", "sentence\tlabel\ngood\t1\nbad\t0\n", read_textcat),
    "textcat_csv": ("a.csv", "text,label\ngood,pos\nbad,neg\n", read_textcat),
    "textcat_jsonl": ("a.jsonl", '{"text": "good", "label": "pos"}\n', read_textcat),
    "corpus_text": ("a.txt", "First line.\nSecond line.\n", read_corpus),
    "corpus_jsonl": ("a.jsonl", '{"text": "First line."}\n', read_corpus),
    "wic": ("a.txt", "bank\tN\t1-1\tThe bank.\tA bank.\n", read_wic),
    "wsd_keys": ("a.gold.key.txt", "d000.s000.t000 bank%1:14:00::\n", read_sense_keys),
}


def _comparable(result):
    return [vars(doc) for doc in result] if isinstance(result, list) and result and hasattr(result[0], "__dict__") \
        else getattr(result, "examples", result)


@pytest.mark.parametrize("case", list(BOM_FILES))
def test_a_utf8_byte_order_mark_is_not_part_of_the_first_line(tmp_path, case):
    name, content, reader = BOM_FILES[case]
    plain, marked = tmp_path / "plain" / name, tmp_path / "marked" / name
    for path, data in ((plain, content.encode("utf8")), (marked, b"\xef\xbb\xbf" + content.encode("utf8"))):
        path.parent.mkdir()
        path.write_bytes(data)
    assert repr(_comparable(reader(marked))).replace(str(marked), "") == \
        repr(_comparable(reader(plain))).replace(str(plain), "")


def test_a_bom_before_docstart_does_not_make_a_sentence(tmp_path):
    path = tmp_path / "a.conll"
    path.write_bytes("\ufeff-DOCSTART- -X- O O\n\nEU B-ORG\n".encode("utf8"))
    (document,) = read_conll(path)
    assert [s.words for s in document.sentences] == [["EU"]]


@pytest.mark.parametrize("encoding,name", [("utf-16", "UTF-16"), ("utf-32", "UTF-32")])
def test_a_utf16_or_utf32_file_is_named_as_such(tmp_path, encoding, name):
    path = tmp_path / "a.conll"
    path.write_bytes("EU B-ORG\n".encode(encoding))  # Python writes the byte-order mark first
    with pytest.raises(DataFormatError, match=f"is {name} \\(byte-order mark\\); convert it to UTF-8") as info:
        read_conll(path)
    assert info.value.path == str(path) and info.value.line == 1


@pytest.mark.parametrize("column", [5, 4, 0, -4, -9])
def test_a_tag_column_the_file_does_not_have_names_file_and_line(tmp_path, column):
    path = tmp_path / "four.conll"
    path.write_text("\n-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\n", encoding="utf8")
    with pytest.raises(DataFormatError, match=f"tag column {column} is not a tag column of this line: it has 4") as info:
        read_conll(path, tag_column=column)
    assert (info.value.path, info.value.line) == (str(path), 4)
    assert read_conll(path, tag_column=-1)[0].sentences[0].tags == ["B-ORG"]
    assert read_conll(path, tag_column=2)[0].sentences[0].tags == ["B-NP"]


def test_converting_a_file_without_sentences_is_an_error(tmp_path):
    path = tmp_path / "empty.conll"
    path.write_text("-DOCSTART- -X- -X- O\n\n\n", encoding="utf8")
    with pytest.raises(DataFormatError, match="no sentences") as info:
        conll_to_docbin(path, tmp_path / "out.spacy")
    assert info.value.path == str(path) and not (tmp_path / "out.spacy").exists()


@pytest.mark.parametrize("content", [b"", b"\x00garbage" * 10, None])
def test_a_spacy_file_that_is_not_a_docbin_names_the_file(tmp_path, content):
    path = tmp_path / "gold.spacy"
    if content is None:  # a real DocBin cut short, as an interrupted copy leaves it
        nlp = spacy.blank("en")
        DocBin(docs=[nlp("Anna Berg works in Oslo.")] * 20).to_disk(path)
        content = path.read_bytes()[: len(path.read_bytes()) // 2]
    path.write_bytes(content)
    with pytest.raises(DataFormatError, match="cannot be read as a spaCy DocBin") as info:
        load_ner_docs(path, spacy.blank("en").vocab)
    assert info.value.path == str(path)
