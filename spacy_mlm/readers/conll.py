"""CoNLL NER files (CoNLL-2002/2003 style) to spaCy docs.

A file has one token per line with whitespace-separated columns, the word first
and the entity tag in `tag_column` (default: the last); blank lines end
sentences and ``-DOCSTART-`` lines end documents. Tags may be IOB1 (``I-X`` opens
an entity, ``B-X`` only splits two adjacent ones of the same type), IOB2/BIO,
BIOES/BILUO or IO: all are read with the same lenient rule
(`schemes.tags_to_spans`). ``scheme = "IOB2"`` (or ``"BIOES"``) instead demands a
well-formed sequence and reports the first line that breaks it.

Sentences of one document can be grouped into one Doc (`n_sents`; 0 = the
whole document), which gives the encoder cross-sentence context; groups never
cross a ``-DOCSTART-``, and sentence starts are set, so a pipeline trained on
whole documents still knows where each sentence begins.
"""
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, List, Optional, Union

from spacy.language import Language
from spacy.tokens import Doc, DocBin, Span
from spacy.training import Example
from spacy.util import registry
from spacy.vocab import Vocab

from ..errors import DataFormatError, SpacyMlmError
from ..tagging.schemes import first_invalid_position, normalize_scheme, split_tag, tags_to_spans
from ..util.io import atomic_write_bytes
from ..util.progress import track
from .common import iter_lines, require_examples

DOCSTART = "-DOCSTART-"


# Columns are separated by spaces and tabs; a no-break space (U+00A0) or other
# Unicode space inside a word is part of the word, as in "10\u00a0000".
COLUMN_SEPARATOR = re.compile(r"[ \t]+")


@dataclass
class ConllSentence:
    words: List[str]
    tags: List[str]
    line: int  # 1-based line number of the first token, for error messages


@dataclass
class ConllDocument:
    sentences: List[ConllSentence] = field(default_factory=list)


def read_conll(
    path: Union[str, Path], tag_column: int = -1, scheme: str = "auto", encoding: str = "utf-8"
) -> List[ConllDocument]:
    """Parse a CoNLL file into documents of sentences. A file without
    ``-DOCSTART-`` lines is one document."""
    path = Path(path)
    if scheme not in ("auto", "IOB1"):
        normalize_scheme(scheme)  # raises on an unknown name
    documents = [ConllDocument()]
    words: List[str] = []
    tags: List[str] = []
    first_line = columns_line = 0
    n_columns = None

    def end_sentence() -> None:
        if words:
            sentence = ConllSentence(list(words), list(tags), first_line)
            _check_sentence(path, sentence, scheme)
            documents[-1].sentences.append(sentence)
            words.clear()
            tags.clear()

    for line_no, raw in iter_lines(path, encoding):
        line = raw.strip()
        if not line:
            end_sentence()
            continue
        columns = COLUMN_SEPARATOR.split(line)
        if columns[0] == DOCSTART:
            end_sentence()
            if documents[-1].sentences:
                documents.append(ConllDocument())
            continue
        if len(columns) < 2:
            raise DataFormatError(path, line_no, f"expected a word and a tag separated by spaces or tabs, got {line}")
        if n_columns is None:
            n_columns, columns_line = len(columns), line_no
            _check_tag_column(path, line_no, tag_column, n_columns)
        elif len(columns) != n_columns:
            raise DataFormatError(
                path, line_no,
                f"expected {n_columns} columns like the first token line ({columns_line}), got {len(columns)}: {line}",
            )
        tag = columns[tag_column]
        try:
            split_tag(tag)
        except SpacyMlmError as err:
            raise DataFormatError(path, line_no, str(err)) from None
        if not words:
            first_line = line_no
        words.append(columns[0])
        tags.append(tag)
    end_sentence()
    return [doc for doc in documents if doc.sentences]


def _check_tag_column(path: Path, line_no: int, tag_column: int, n_columns: int) -> None:
    """The tag column must exist and not be the word's (column 0)."""
    if not -n_columns < tag_column < n_columns or tag_column == 0:
        raise DataFormatError(
            path, line_no, f"tag column {tag_column} is not a tag column of this line: it has {n_columns} columns "
            f"(the word in column 0, tags in 1 to {n_columns - 1}; -1 is the last)"
        )


def _check_sentence(path: Path, sentence: ConllSentence, scheme: str) -> None:
    if scheme in ("auto", "IOB1"):
        return
    bad = first_invalid_position(sentence.tags, scheme)
    if bad is not None:
        raise DataFormatError(
            path, sentence.line + bad, f"tag {sentence.tags[bad]!r} breaks the {scheme} scheme here"
        )


def conll_documents_to_docs(vocab: Vocab, documents: Iterable[ConllDocument], n_sents: int = 1) -> Iterator[Doc]:
    """spaCy Docs with entities and sentence starts, `n_sents` sentences each
    (0: one Doc per document, so a model reads every sentence in its document)."""
    if n_sents < 0:
        raise SpacyMlmError(f"n_sents must be 0 (whole documents) or a number of sentences per Doc, got {n_sents}")
    for document in documents:
        size = n_sents or len(document.sentences)
        for i in range(0, len(document.sentences), size):
            group = document.sentences[i : i + size]
            words = [w for s in group for w in s.words]
            sent_starts = [j == 0 for s in group for j in range(len(s.words))]
            doc = Doc(vocab, words=words, sent_starts=sent_starts)
            # Spans per sentence: an entity never crosses a sentence boundary.
            ents, offset = [], 0
            for s in group:
                ents.extend(
                    Span(doc, offset + start, offset + end, label=label)
                    for start, end, label in tags_to_spans(s.tags)
                )
                offset += len(s.words)
            doc.ents = ents
            yield doc


def conll_to_docbin(
    path: Union[str, Path],
    output: Union[str, Path],
    n_sents: int = 1,
    tag_column: int = -1,
    scheme: str = "auto",
    lang: str = "en",
    quiet: bool = True,
) -> int:
    """Convert a CoNLL file to a ``.spacy`` DocBin (written atomically); returns
    the number of docs. Progress on stderr unless `quiet`."""
    import spacy

    vocab = spacy.blank(lang).vocab
    documents = read_conll(path, tag_column=tag_column, scheme=scheme)
    require_examples(path, len(documents), "sentences")
    docbin = DocBin(attrs=["ORTH", "SENT_START", "ENT_IOB", "ENT_TYPE"], store_user_data=False)
    n = 0
    total = sum(-(-len(document.sentences) // (n_sents or len(document.sentences))) for document in documents)
    docs = conll_documents_to_docs(vocab, documents, n_sents=n_sents)
    for doc in track(docs, total, f"convert {Path(path).name}", "docs", quiet=quiet):
        docbin.add(doc)
        n += 1
    atomic_write_bytes(output, docbin.to_bytes())
    return n


def is_docbin_file(path: Path) -> bool:
    """Whether `path` starts as a `DocBin.to_bytes()` does (a zlib stream that
    inflates): an earlier output of `conll_to_docbin`, never a CoNLL text file."""
    with open(path, "rb") as f:
        head = f.read(4096)
    try:
        return bool(zlib.decompressobj().decompress(head, 16))
    except zlib.error:
        return False


@registry.readers("spacy_mlm.ConllCorpus.v1")
def create_conll_corpus_v1(
    path: Optional[Path], n_sents: int = 1, tag_column: int = -1, scheme: str = "auto", limit: int = 0
) -> Callable[[Language], Iterator[Example]]:
    """A corpus reader for `spacy train` straight from a CoNLL file (no
    conversion step): examples whose predicted side is the tokenised text and
    whose reference holds the entities. `n_sents` = 0 gives whole documents.
    `limit` > 0 keeps the first `limit` docs.
    A file without sentences is a DataFormatError naming it."""

    def read(nlp: Language) -> Iterator[Example]:
        if path is None:
            return
        documents = read_conll(path, tag_column=tag_column, scheme=scheme)
        require_examples(path, len(documents), "sentences")
        for i, doc in enumerate(conll_documents_to_docs(nlp.vocab, documents, n_sents=n_sents)):
            if limit and i >= limit:
                break
            words = [t.text for t in doc]
            spaces = [bool(t.whitespace_) for t in doc]
            yield Example(Doc(nlp.vocab, words=words, spaces=spaces), doc)

    return read


def load_ner_docs(path: Union[str, Path], vocab: Vocab, n_sents: int = 1, scheme: str = "auto") -> List[Doc]:
    """Gold docs from a ``.spacy`` DocBin or a CoNLL file (anything else)."""
    path = Path(path)
    if path.suffix == ".spacy":
        if not path.is_file():
            raise DataFormatError(path, None, "file not found")
        try:
            return list(DocBin().from_disk(path).get_docs(vocab))
        except Exception as err:  # spaCy, msgpack and zlib raise several kinds here
            raise DataFormatError(path, None, f"cannot be read as a spaCy DocBin ({type(err).__name__}: "
                                              f"{str(err)[:120]})") from None
    return list(conll_documents_to_docs(vocab, read_conll(path, scheme=scheme), n_sents=n_sents))
