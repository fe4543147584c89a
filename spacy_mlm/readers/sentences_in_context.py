"""Training examples for an encoder that reads sentences in their document.

`spacy train` batches examples, and a batch of whole documents is a few large,
correlated steps where a batch of sentences is many small ones from many
documents. So the training corpus is whole documents (`convert-conll --n-sents
0`) and this augmenter turns each into one example per sentence that carries
the document's text around it (`doc._.mlm_context`): batches stay batches of
sentences (16 by default, as with one sentence per Doc) while an encoder with
context = "document" reads each one in its document, as it will at prediction
time on whole documents.
"""
from typing import Callable, Iterator

from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example
from spacy.util import registry

from ..errors import SpacyMlmError
from ..tokenization.context import CONTEXT_ATTR, install_context_extension, sentences_in_context


@registry.augmenters("spacy_mlm.sentences_in_context.v1")
def create_sentences_in_context_v1(max_chars: int = 4000) -> Callable[[Language, Example], Iterator[Example]]:
    """Each example becomes one example per sentence of its reference
    (`token.is_sent_start`; a Doc without them is one sentence), tokenized as the
    reference, whose predicted Doc carries the text before and after it (up to
    `max_chars` a side, cut at whitespace: enough for 64 pieces many times over;
    0 = all). An encoder with context = "none" ignores that text, so one config
    trains sentences alone or in their document; a corpus of one-sentence Docs
    gives the same examples, with empty context."""
    if max_chars < 0:
        raise SpacyMlmError(f"max_chars must be 0 (no limit) or more, got {max_chars}")
    install_context_extension()

    def augment(nlp: Language, example: Example) -> Iterator[Example]:
        for sentence, before, after in sentences_in_context(example.reference, max_chars):
            words = [t.text for t in sentence]
            predicted = Doc(nlp.vocab, words=words, spaces=[bool(t.whitespace_) for t in sentence])
            predicted._.set(CONTEXT_ATTR, (before, after))
            yield Example(predicted, sentence.as_doc())

    return augment
