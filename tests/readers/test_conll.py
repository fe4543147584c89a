import pytest
import spacy
from spacy.tokens import DocBin

from spacy_mlm.errors import DataFormatError, SpacyMlmError
from spacy_mlm.readers.conll import conll_documents_to_docs, conll_to_docbin, create_conll_corpus_v1, read_conll

IOB2 = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER

-DOCSTART- -X- -X- O

BRUSSELS NNP B-NP B-LOC
1996-08-22 CD I-NP O
"""

IOB1 = """Peter NNP I-PER
Blackburn NNP I-PER
met VBD O
Jane NNP I-PER
Anna NNP B-PER
in IN O
Paris NNP I-LOC
"""


def write(tmp_path, text, name="data.txt"):
    path = tmp_path / name
    path.write_text(text, encoding="utf8")
    return path


def test_documents_sentences_and_entities(tmp_path):
    docs = read_conll(write(tmp_path, IOB2))
    assert [len(d.sentences) for d in docs] == [2, 1]
    assert docs[0].sentences[1].words == ["Peter", "Blackburn"]
    assert docs[0].sentences[1].line == 8
    vocab = spacy.blank("en").vocab
    spacy_docs = list(conll_documents_to_docs(vocab, docs, n_sents=1))
    assert len(spacy_docs) == 3
    assert [(e.text, e.label_) for e in spacy_docs[0].ents] == [("EU", "ORG"), ("German", "MISC")]
    assert [(e.text, e.label_) for e in spacy_docs[1].ents] == [("Peter Blackburn", "PER")]


def test_grouping_sentences_never_crosses_docstart(tmp_path):
    vocab = spacy.blank("en").vocab
    grouped = list(conll_documents_to_docs(vocab, read_conll(write(tmp_path, IOB2)), n_sents=10))
    assert len(grouped) == 2
    assert [t.text for t in grouped[0]] == "EU rejects German call Peter Blackburn".split()
    assert [s.text for s in grouped[0].sents] == ["EU rejects German call", "Peter Blackburn"]
    assert [(e.text, e.label_) for e in grouped[0].ents] == [("EU", "ORG"), ("German", "MISC"), ("Peter Blackburn", "PER")]


def test_iob1_input(tmp_path):
    vocab = spacy.blank("en").vocab
    (doc,) = conll_documents_to_docs(vocab, read_conll(write(tmp_path, IOB1)))
    assert [(e.text, e.label_) for e in doc.ents] == [("Peter Blackburn", "PER"), ("Jane", "PER"), ("Anna", "PER"), ("Paris", "LOC")]


def test_strict_iob2_reports_the_line(tmp_path):
    path = write(tmp_path, IOB1)
    with pytest.raises(DataFormatError, match=r"data\.txt, line 1: tag 'I-PER' breaks the IOB2 scheme"):
        read_conll(path, scheme="IOB2")
    assert read_conll(path, scheme="IOB1")


@pytest.mark.parametrize(
    "text,line,message",
    [
        ("EU B-ORG\nrejects\n", 2, "expected a word and a tag"),
        ("EU NNP B-ORG\nrejects O\n", 2, "expected 3 columns"),
        ("EU NNP B-ORG\n\nrejects VBZ X-ORG\n", 3, "Malformed tag 'X-ORG'"),
    ],
)
def test_malformed_lines(tmp_path, text, line, message):
    with pytest.raises(DataFormatError, match=f"line {line}: {message}") as info:
        read_conll(write(tmp_path, text))
    assert info.value.line == line


def test_unknown_scheme_and_missing_file(tmp_path):
    with pytest.raises(SpacyMlmError, match="Unknown tag scheme"):
        read_conll(write(tmp_path, IOB2), scheme="XYZ")
    with pytest.raises(DataFormatError, match="not found"):
        read_conll(tmp_path / "nope.txt")


def test_docbin_conversion_and_corpus_reader(tmp_path):
    path = write(tmp_path, IOB2)
    out = tmp_path / "train.spacy"
    assert conll_to_docbin(path, out, n_sents=2) == 2
    nlp = spacy.blank("en")
    docs = list(DocBin().from_disk(out).get_docs(nlp.vocab))
    assert [(e.text, e.label_) for e in docs[0].ents] == [("EU", "ORG"), ("German", "MISC"), ("Peter Blackburn", "PER")]
    examples = list(create_conll_corpus_v1(path, n_sents=1)(nlp))
    assert len(examples) == 3
    assert not examples[0].predicted.ents and len(examples[0].reference.ents) == 2
    assert examples[0].predicted.text == examples[0].reference.text


def test_whole_documents_keep_boundaries_and_sentence_starts(tmp_path):
    """n_sents = 0: one Doc per -DOCSTART- document, every sentence start set."""
    vocab = spacy.blank("en").vocab
    docs = list(conll_documents_to_docs(vocab, read_conll(write(tmp_path, IOB2)), n_sents=0))
    assert [[t.text for t in d] for d in docs] == ["EU rejects German call Peter Blackburn".split(), ["BRUSSELS", "1996-08-22"]]
    assert [t.is_sent_start for t in docs[0]] == [True, False, False, False, True, False]
    assert [s.text for s in docs[1].sents] == ["BRUSSELS 1996-08-22"]
    assert [(e.text, e.label_) for e in docs[0].ents] == [("EU", "ORG"), ("German", "MISC"), ("Peter Blackburn", "PER")]


def test_whole_documents_without_docstart_are_one_doc(tmp_path):
    text = "Peter I-PER\nmet O\n\nJane I-PER\nin O\nParis I-LOC\n\nAnna I-PER\n"
    (doc,) = conll_documents_to_docs(spacy.blank("en").vocab, read_conll(write(tmp_path, text)), n_sents=0)
    assert [s.text for s in doc.sents] == ["Peter met", "Jane in Paris", "Anna"]
    assert [(e.text, e.label_) for e in doc.ents] == [("Peter", "PER"), ("Jane", "PER"), ("Paris", "LOC"), ("Anna", "PER")]


def test_whole_documents_through_docbin_and_spacy_corpus(tmp_path):
    """What `spacy train` reads from `convert-conll --n-sents 0`: whole documents with their sentence starts."""
    from spacy.training import Corpus

    out = tmp_path / "train.spacy"
    assert conll_to_docbin(write(tmp_path, IOB2), out, n_sents=0) == 2
    examples = list(Corpus(out)(spacy.blank("en")))
    assert [len(list(eg.reference.sents)) for eg in examples] == [2, 1]
    assert [len(eg.reference.ents) for eg in examples] == [3, 1]
    assert len(list(create_conll_corpus_v1(write(tmp_path, IOB2), n_sents=0)(spacy.blank("en")))) == 2


def test_negative_n_sents_is_refused(tmp_path):
    with pytest.raises(SpacyMlmError, match="n_sents must be 0 \\(whole documents\\) or a number .* got -1"):
        list(conll_documents_to_docs(spacy.blank("en").vocab, read_conll(write(tmp_path, IOB2)), n_sents=-1))
