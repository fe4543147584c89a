import pytest
import spacy

from spacy_mlm import read_pair_scores
from spacy_mlm.errors import DataFormatError
from spacy_mlm.readers.pair_scores import create_pair_score_corpus_v1

SICK = (
    "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\r\n"
    "1\tA man is playing a guitar.\tA man plays a guitar.\t4.9\tENTAILMENT\r\n"
    "2\tA dog runs.\tNobody is cooking.\t1.2\tNEUTRAL\r\n"
)
STSB = (
    "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
    "0\tmain-captions\tMSRvid\t2012test\t0001\tnone\tnone\tA plane is taking off.\tAn air plane is taking off.\t5.000\n"
    "1\tmain-captions\tMSRvid\t2012test\t0004\tnone\tnone\tA man plays a flute.\t \t3.800\n"
)


def test_sick_relatedness_with_crlf(tmp_path):
    path = tmp_path / "SICK_trial.txt"
    path.write_bytes(SICK.encode("utf8"))
    data = read_pair_scores(path)
    assert [(eg.text_a, eg.text_b, eg.score, eg.line) for eg in data.examples] == [
        ("A man is playing a guitar.", "A man plays a guitar.", 4.9, 2), ("A dog runs.", "Nobody is cooking.", 1.2, 3)]
    nlp = spacy.blank("en")
    (first, _) = list(create_pair_score_corpus_v1(path, target="relatedness")(nlp))
    assert first.reference.cats == {"relatedness": 4.9}
    assert first.reference._.mlm_pair_start == len(nlp.make_doc("A man is playing a guitar."))


def test_stsb_tsv_and_jsonl(tmp_path):
    path = tmp_path / "dev.tsv"
    path.write_text(STSB, encoding="utf8")
    data = read_pair_scores(path)
    assert [eg.score for eg in data.examples] == [5.0] and data.skipped == {"empty text": 1}
    lines = tmp_path / "pairs.jsonl"
    lines.write_text('{"sentence1": "a b", "sentence2": "c d", "score": 2}\n{"sentence1": "e", "sentence2": "f", '
                     '"score": null}\n', encoding="utf8")
    data = read_pair_scores(lines)
    assert [(eg.text_a, eg.score) for eg in data.examples] == [("a b", 2.0)] and data.skipped == {"no score": 1}


@pytest.mark.parametrize("text, message", [
    ("sentence1\tsentence2\n", "needs columns"),
    ("sentence1\tsentence2\tscore\na\tb\thigh\n", "line 2: the score 'high' is not a number"),
    ("sentence1\tsentence2\tscore\na\tb\tinf\n", "is not a finite number"),
    ("sentence1\tsentence2\tscore\na\tb\n", "expected 3 tab-separated columns"),
])
def test_bad_files_name_the_line(tmp_path, text, message):
    path = tmp_path / "bad.tsv"
    path.write_text(text, encoding="utf8")
    with pytest.raises(DataFormatError, match=message):
        read_pair_scores(path)


def test_a_corpus_without_scored_pairs_is_an_error(tmp_path):
    path = tmp_path / "empty.tsv"
    path.write_text("sentence1\tsentence2\tscore\na\tb\t\n", encoding="utf8")
    with pytest.raises(DataFormatError, match="empty.tsv"):
        list(create_pair_score_corpus_v1(path)(spacy.blank("en")))
