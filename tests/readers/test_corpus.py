import json

import pytest

from spacy_mlm.errors import DataFormatError
from spacy_mlm.readers.corpus import read_corpus


def write(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf8")
    return path


def test_plain_text_blank_lines_separate_documents(tmp_path):
    path = tmp_path / "c.txt"
    path.write_bytes("First sentence.\nSecond one.\n\n\n  \nOther doc.\r\nStill other.\n".encode("utf8"))
    assert read_corpus(path) == [["First sentence.", "Second one."], ["Other doc.", "Still other."]]


def test_jsonl_one_document_per_line_with_newline_segments(tmp_path):
    path = write(tmp_path / "c.jsonl", [json.dumps({"text": "A b.\nC d.", "id": 1}), "", json.dumps({"text": "  "}),
                                        json.dumps({"text": "E f 😀 עברית 中文"})])
    assert read_corpus(path) == [["A b.", "C d."], ["E f 😀 עברית 中文"]]


@pytest.mark.parametrize("bad, message", [
    ('{"body": "x"}', "missing field 'text'"),
    ('{"text": 3}', "must be a string"),
    ('{"text": "x"', "invalid JSON"),
    ('["x"]', "expected a JSON object"),
])
def test_bad_jsonl_lines_name_file_and_line(tmp_path, bad, message):
    path = write(tmp_path / "c.jsonl", [json.dumps({"text": "fine"}), bad])
    with pytest.raises(DataFormatError) as err:
        read_corpus(path)
    assert err.value.line == 2 and message in str(err.value) and str(path) in str(err.value)


def test_other_text_field_and_forced_format(tmp_path):
    path = write(tmp_path / "data.log", [json.dumps({"body": "Hello there."})])
    assert read_corpus(path, text_field="body", file_format="jsonl") == [["Hello there."]]
    assert read_corpus(path) == [['{"body": "Hello there."}']]  # unknown suffix read as text


def test_directory_of_files_in_sorted_order(tmp_path):
    write(tmp_path / "b.txt", ["Second file."])
    write(tmp_path / "a.jsonl", [json.dumps({"text": "First file."})])
    (tmp_path / "notes.md").write_text("ignored")
    assert read_corpus(tmp_path) == [["First file."], ["Second file."]]


def test_empty_missing_and_undecodable(tmp_path):
    with pytest.raises(DataFormatError, match="no text"):
        read_corpus(write(tmp_path / "e.txt", ["", "   "]))
    with pytest.raises(DataFormatError, match="not found"):
        read_corpus(tmp_path / "nope.txt")
    (tmp_path / "latin.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    with pytest.raises(DataFormatError) as err:
        read_corpus(tmp_path / "latin.txt")
    assert err.value.line == 1
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    with pytest.raises(DataFormatError, match="no corpus files"):
        read_corpus(empty_dir)
