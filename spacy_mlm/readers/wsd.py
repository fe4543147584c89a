"""Sense-annotated corpora in the Raganato et al. (2017) unified WSD format:
`<corpus><text><sentence><wf lemma pos>word</wf><instance id lemma pos>word</instance>`
plus a key file with `instance_id sense_key [sense_key ...]` lines.

Sentences become spaCy Docs from their words (one token per word, lemmas set),
so an instance's word index is its token index.
"""
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Tuple, Union

from spacy.tokens import Doc
from spacy.vocab import Vocab

from ..errors import DataFormatError
from .common import iter_lines


@dataclass(frozen=True)
class WsdInstance:
    id: str
    index: int  # word (= token) index in the sentence
    lemma: str
    pos: str


@dataclass(frozen=True)
class WsdSentence:
    id: str
    words: Tuple[str, ...]
    lemmas: Tuple[str, ...]
    instances: Tuple[WsdInstance, ...]


def read_raganato(path: Union[str, Path]) -> List[WsdSentence]:
    path = Path(path)
    if not path.is_file():
        raise DataFormatError(path, None, "WSD data file not found")
    try:
        root = ET.parse(str(path)).getroot()
    except ET.ParseError as err:
        raise DataFormatError(path, err.position[0], f"invalid XML: {err}") from None
    sentences = []
    for sentence in root.iter("sentence"):
        sid = sentence.get("id", "?")
        words, lemmas, instances = [], [], []
        for element in sentence:
            if element.tag not in ("wf", "instance"):
                continue
            word = (element.text or "").strip()
            if not word:
                raise DataFormatError(path, None, f"sentence {sid}: empty <{element.tag}>")
            lemma = element.get("lemma") or word.lower()
            if element.tag == "instance":
                if not element.get("id"):
                    raise DataFormatError(path, None, f"sentence {sid}: <instance> without an id")
                instances.append(WsdInstance(element.get("id"), len(words), lemma, element.get("pos", "")))
            words.append(word)
            lemmas.append(lemma)
        if words:
            sentences.append(WsdSentence(sid, tuple(words), tuple(lemmas), tuple(instances)))
    if not sentences:
        raise DataFormatError(path, None, "no <sentence> elements with words")
    return sentences


def read_sense_keys(path: Union[str, Path]) -> Dict[str, List[str]]:
    """instance id -> its gold sense keys (several where annotators allowed them)."""
    keys: Dict[str, List[str]] = {}
    for number, line in iter_lines(path):
        fields = line.split()
        if not fields:
            continue
        if len(fields) < 2:
            raise DataFormatError(path, number, f"expected 'instance_id sense_key ...', got {line!r}")
        if fields[0] in keys:
            raise DataFormatError(path, number, f"instance {fields[0]} listed twice")
        keys[fields[0]] = fields[1:]
    return keys


def read_wsd_corpus(stem: Union[str, Path]) -> Tuple[List[WsdSentence], Dict[str, List[str]]]:
    """`<stem>.data.xml` and `<stem>.gold.key.txt`; every instance must have a key."""
    stem = Path(stem)
    xml_path, key_path = Path(f"{stem}.data.xml"), Path(f"{stem}.gold.key.txt")
    sentences, keys = read_raganato(xml_path), read_sense_keys(key_path)
    for sentence in sentences:
        for instance in sentence.instances:
            if instance.id not in keys:
                raise DataFormatError(key_path, None, f"no gold key for instance {instance.id} of {xml_path}")
    return sentences, keys


def sentence_doc(vocab: Vocab, sentence: WsdSentence) -> Doc:
    n = len(sentence.words)
    return Doc(vocab, words=list(sentence.words), spaces=[i < n - 1 for i in range(n)], lemmas=list(sentence.lemmas))
