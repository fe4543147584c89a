"""Messages that point at the cause: the right line, invisible characters by
code point, the file an OS error is about, no library warning that
contradicts what happened."""
import os

import pytest
import spacy

import spacy_mlm  # noqa: F401
from spacy_mlm.errors import DataFormatError, show_invisible
from spacy_mlm.readers.conll import read_conll
from spacy_mlm.util.io import atomic_directory, atomic_write_bytes


def test_a_no_break_space_inside_a_conll_word_is_part_of_the_word(tmp_path):
    """Before: "line 2: expected 3 columns like the first token line, got 2" (the
    no-break space on line 1 had split "New York" into two columns)."""
    path = tmp_path / "nbsp.conll"
    path.write_text("New\u00a0York B-LOC\nis O\n", encoding="utf8")
    assert read_conll(path)[0].sentences[0].words == ["New\u00a0York", "is"]


@pytest.mark.parametrize("text, line, shown", [
    ("Anna B-PER\nParis\u00a0B-LOC\n", 2, "Paris<U+00A0>B-LOC"),
    ("EU B-ORG\nrejects\u200b O x\n", 2, "like the first token line (1), got 3: rejects<U+200B> O x"),
    ("EU B-ORG\n\nrejects\u2028O\n", 3, "separated by spaces or tabs, got rejects<U+2028>O"),
])
def test_a_conll_error_names_the_line_and_shows_invisible_characters(tmp_path, text, line, shown):
    path = tmp_path / "odd.conll"
    path.write_text(text, encoding="utf8")
    with pytest.raises(DataFormatError) as info:
        read_conll(path)
    assert info.value.line == line and shown in str(info.value), str(info.value)


def test_every_data_error_shows_hidden_characters_by_code_point():
    err = DataFormatError("f.txt", 3, "field 'text' is 'a\u2028b\u200dc\u00a0d\ufeff'")
    assert str(err) == "f.txt, line 3: field 'text' is 'a<U+2028>b<U+200D>c<U+00A0>d<U+FEFF>'"
    assert show_invisible("tab\tand newline\nstay") == "tab\tand newline\nstay"


def test_a_full_disk_names_the_file(tmp_path, monkeypatch):
    """Before: "[Errno 28] No space left on device", no file."""
    def full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space left on device") as info:
        atomic_write_bytes(tmp_path / "scores.json", b"{}")
    assert info.value.filename == str(tmp_path / "scores.json")
    with pytest.raises(OSError) as info:
        with atomic_directory(tmp_path / "model") as tmp:
            (tmp / "weights").write_bytes(b"1")
    assert info.value.errno == 28 and info.value.filename == str(tmp_path / "model")
    assert not list(tmp_path.iterdir())  # nothing left behind


def test_loading_a_trained_pipeline_says_nothing_about_untrained_weights(encoder_nlp, tmp_path, capfd):
    """Before: every spacy.load printed transformers' "Some weights of BertModel were not
    initialized ... newly initialized: ['pooler...'] You should probably TRAIN this model"."""
    encoder_nlp.to_disk(tmp_path / "pipe")
    capfd.readouterr()
    spacy.load(tmp_path / "pipe")
    err = capfd.readouterr().err
    assert "newly initialized" not in err and "TRAIN" not in err and "not sharded" not in err, err
