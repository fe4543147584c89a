import pytest
import spacy

from spacy_mlm.errors import DataFormatError
from spacy_mlm.readers.wsd import read_raganato, read_sense_keys, read_wsd_corpus, sentence_doc

XML = """<?xml version="1.0" encoding="UTF-8" ?>
<corpus lang="en" source="test">
<text id="d0">
<sentence id="d0.s0">
<wf lemma="the" pos="DET">The</wf>
<instance id="d0.s0.t0" lemma="bank" pos="NOUN">banks</instance>
<instance id="d0.s0.t1" lemma="flood" pos="VERB">flooded</instance>
</sentence>
<sentence id="d0.s1">
<wf lemma="she" pos="PRON">She</wf>
<wf lemma="visit" pos="VERB">visited</wf>
<instance id="d0.s1.t0" lemma="bank" pos="NOUN">banks</instance>
</sentence>
</text>
</corpus>
"""
KEYS = "d0.s0.t0 bank%1:17:01::\nd0.s0.t1 flood%2:30:00:: flood%2:38:00::\nd0.s1.t0 bank%1:14:00::\n"


def write(tmp_path, xml=XML, keys=KEYS):
    (tmp_path / "c.data.xml").write_text(xml, encoding="utf8")
    (tmp_path / "c.gold.key.txt").write_text(keys, encoding="utf8")
    return tmp_path / "c"


def test_reads_sentences_instances_and_keys(tmp_path):
    sentences, keys = read_wsd_corpus(write(tmp_path))
    assert [s.id for s in sentences] == ["d0.s0", "d0.s1"]
    first = sentences[0]
    assert first.words == ("The", "banks", "flooded") and first.lemmas == ("the", "bank", "flood")
    assert [(i.id, i.index, i.lemma, i.pos) for i in first.instances] == [
        ("d0.s0.t0", 1, "bank", "NOUN"), ("d0.s0.t1", 2, "flood", "VERB")
    ]
    assert keys["d0.s0.t1"] == ["flood%2:30:00::", "flood%2:38:00::"]
    doc = sentence_doc(spacy.blank("en").vocab, sentences[1])
    assert doc.text == "She visited banks" and doc[2].lemma_ == "bank"


def test_errors(tmp_path):
    with pytest.raises(DataFormatError, match="invalid XML") as err:
        read_raganato(write(tmp_path, xml=XML.replace("</sentence>\n<sentence", "<sentence", 1)).with_suffix(".data.xml"))
    assert err.value.line is not None
    with pytest.raises(DataFormatError, match="no gold key for instance d0.s1.t0"):
        read_wsd_corpus(write(tmp_path, keys=KEYS.rsplit("d0.s1", 1)[0]))
    bad = tmp_path / "bad.key"
    bad.write_text("d0.s0.t0 k\nlonely\n", encoding="utf8")
    with pytest.raises(DataFormatError, match="expected 'instance_id") as err:
        read_sense_keys(bad)
    assert err.value.line == 2
