"""A Doc's document around it, for encoders that read sentences in context.

Entity types are often decided outside the sentence, so with `context =
"document"` the encoder reads each sentence in a window of its own together with
up to `context_pieces` pieces of its document on either side (FLERT, Schweter &
Akbik 2020); vectors, and so tags, are only ever taken for the sentence's own
pieces. The document around a sentence comes from two places, and both give the
same windows:

* the Doc itself: its other sentences (`token.is_sent_start`), when the Doc is
  a whole document, which is how users run a pipeline;
* `doc._.mlm_context = (text_before, text_after)`: the document's text before
  and after the Doc, when the Doc is one sentence, which is how training
  batches sentences from many documents (see `sentences_in_context`).

`text_before + doc.text + text_after` should be the document's text; the
encoder reads only as much of each side as `context_pieces` needs, cut at
whitespace (`tail`, `head`), so that those pieces are the whole text's.
"""
from typing import Iterator, Tuple

from spacy.tokens import Doc, Span

from ..errors import SpacyMlmError

CONTEXT_ATTR = "mlm_context"
CONTEXTS = ("none", "document")


def check_context(context: str, context_pieces: int) -> None:
    if context not in CONTEXTS:
        raise SpacyMlmError(f"context must be one of {', '.join(CONTEXTS)}, not {context!r}")
    if not isinstance(context_pieces, int) or context_pieces < 0:
        raise SpacyMlmError(f"context_pieces must be a whole number, 0 or more, not {context_pieces!r}")


def install_context_extension() -> None:
    """`doc._.mlm_context`, installed by what sets it (`sentences_in_context`) and
    by the `mlm_encoder` factory, which reads it."""
    if not Doc.has_extension(CONTEXT_ATTR):
        Doc.set_extension(CONTEXT_ATTR, default=None)


def doc_context(doc: Doc) -> Tuple[str, str]:
    """The (text before, text after) set on `doc`, or two empty strings."""
    value = doc._.get(CONTEXT_ATTR) if Doc.has_extension(CONTEXT_ATTR) else None
    if value is None:
        return "", ""
    if not (isinstance(value, (tuple, list)) and len(value) == 2 and all(isinstance(v, str) for v in value)):
        raise SpacyMlmError(
            f"doc._.{CONTEXT_ATTR} must be (text_before, text_after), two strings, not {value!r:.80} "
            f"(on the Doc {doc.text[:40]!r})"
        )
    return value[0], value[1]


def sentence_starts(doc: Doc) -> list:
    """Token indices where the Doc's sentences start ([0] for a Doc without
    sentence annotation, which is then one sentence)."""
    if len(doc) == 0:
        return []
    if not doc.has_annotation("SENT_START"):
        return [0]
    return [0] + [t.i for t in doc[1:] if t.is_sent_start]


def tail(text: str, chars: int) -> str:
    """The last ~`chars` characters of `text`, starting at whitespace (no word cut)."""
    if len(text) <= chars:
        return text
    return text[next((k for k in range(len(text) - chars, len(text)) if text[k].isspace()), len(text)) :]


def head(text: str, chars: int) -> str:
    """The first ~`chars` characters of `text`, ending at whitespace (no word cut)."""
    if len(text) <= chars:
        return text
    return text[: next((k for k in range(chars, 0, -1) if text[k].isspace()), 0)]


def sentences_in_context(doc: Doc, max_chars: int = 0) -> Iterator[Tuple[Span, str, str]]:
    """Each sentence of `doc` with the document's text before and after it, so
    that `before + sentence.as_doc().text + after == before_doc + doc.text +
    after_doc` (the Doc's own `mlm_context` extends both sides). `max_chars` > 0
    keeps only that much of each side (cut at whitespace), so that the contexts
    of a long document's sentences do not take memory quadratic in its length."""
    before_doc, after_doc = doc_context(doc)
    text = doc.text
    starts = sentence_starts(doc)
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(doc)
        sentence = doc[start:end]
        first = sentence[0].idx
        last = sentence[-1].idx + len(sentence[-1].text_with_ws)
        before, after = before_doc + text[:first], text[last:] + after_doc
        if max_chars:
            before, after = tail(before, max_chars), head(after, max_chars)
        yield sentence, before, after
