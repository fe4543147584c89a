import pytest
import spacy

from spacy_mlm.errors import DataFormatError
from spacy_mlm.readers.wic import read_wic, read_wic_split, target_span, word_char_span

DATA = (
    "carry\tV\t2-1\tYou must carry your camping gear .\tSound carries well over water .\n"
    "break\tV\t0-2\tBreak an alibi .\tThe wholesaler broke the container loads .\n"
    "co-operate\tV\t1-0\tThey co-operate closely .\tco-operate , please !\n"
)


def write_split(root, split, data=DATA, gold="F\nT\nT\n"):
    folder = root / split
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{split}.data.txt").write_text(data, encoding="utf8")
    if gold is not None:
        (folder / f"{split}.gold.txt").write_text(gold, encoding="utf8")
    return folder


def test_reads_columns_and_gold(tmp_path):
    write_split(tmp_path, "train")
    examples = read_wic_split(tmp_path, "train")
    assert [e.label for e in examples] == [False, True, True]
    first = examples[0]
    assert (first.target, first.pos, first.index1, first.index2) == ("carry", "V", 2, 1)
    assert first.line == 1
    s1, s2 = first.char_span1, first.char_span2
    assert first.sentence1[s1[0]:s1[1]] == "carry"
    assert first.sentence2[s2[0]:s2[1]] == "carries"  # inflected form, located by index
    second = examples[1]
    assert second.sentence2[slice(*second.char_span2)] == "broke"


def test_missing_gold_gives_none_labels(tmp_path):
    write_split(tmp_path, "test", gold=None)
    assert [e.label for e in read_wic_split(tmp_path, "test")] == [None, None, None]


def test_target_span_maps_to_spacy_tokens_robustly():
    nlp = spacy.blank("en")
    # spaCy splits "co-operate" into three tokens; the span covers all of them.
    text = "They co-operate closely ."
    span = target_span(nlp(text), word_char_span(text, 1))
    assert span.text == "co-operate" and len(span) == 3
    # Irregular whitespace in the sentence still maps by character offsets.
    text = "Sound  carries\twell ."
    span = target_span(nlp(text), word_char_span(text, 1))
    assert span.text == "carries" and len(span) == 1


@pytest.mark.parametrize(
    "line, message",
    [
        ("carry\tV\t2-1\tonly four columns\n", "expected 5"),
        ("carry\tV\t2_1\ta b c\td e f\n", "index column"),
        ("carry\tV\t9-0\ta b c\td e f\n", "sentence1: word index 9 out of range"),
        ("carry\tV\t0-3\ta b c\td e f\n", "sentence2: word index 3 out of range"),
    ],
)
def test_bad_data_lines_name_file_and_line(tmp_path, line, message):
    path = tmp_path / "x.data.txt"
    path.write_text("carry\tV\t0-0\ta b\tc d\n" + line, encoding="utf8")
    with pytest.raises(DataFormatError, match=message) as err:
        read_wic(path)
    assert err.value.line == 2 and err.value.path == str(path)


def test_bad_gold(tmp_path):
    folder = write_split(tmp_path, "dev", gold="F\nmaybe\nT\n")
    with pytest.raises(DataFormatError, match="T or F") as err:
        read_wic_split(tmp_path, "dev")
    assert err.value.line == 2
    (folder / "dev.gold.txt").write_text("F\nT\n", encoding="utf8")
    with pytest.raises(DataFormatError, match="2 gold labels for 3 examples") as err:
        read_wic_split(tmp_path, "dev")
    assert err.value.line == 3


def test_missing_data_file(tmp_path):
    with pytest.raises(DataFormatError, match="not found"):
        read_wic_split(tmp_path, "train")
